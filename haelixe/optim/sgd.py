"""SGD with momentum, dampening, Nesterov and (coupled, L2) weight decay, as PyTorch
defines it."""

from __future__ import annotations

from .optimizer import Optimizer, working_copies, write_back


class SGD(Optimizer):
    """d = g + weight_decay * p; buf = momentum * buf + (1 - dampening) * d (buf = d on
    a parameter's first step); d = d + momentum * buf (Nesterov) or buf; p -= lr * d.

    capturable=True reads the learning rate from a device copy (updated when it changes),
    so the step can be captured (hx.capture) and replayed under a scheduler."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False, capturable=False):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: lr, momentum and weight_decay must be >= 0, got lr={lr}"
                             f", momentum={momentum}, weight_decay={weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum needs momentum > 0 and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, capturable=capturable))

    def _init_state(self, group, fg):
        if group["momentum"]:
            self._buffer(group, fg, "momentum_buffer")

    _saves_step = False  # (PyTorch's SGD state holds its momentum buffer only)

    def _state_names(self, group) -> tuple:
        return ("momentum_buffer",) if group["momentum"] else ()

    def _steps_matter(self, group) -> bool:
        # with dampening the first step differs (the buffer starts as d, undamped)
        return bool(group["momentum"]) and group["dampening"] != 0

    def _update(self, group, fg, start, stop, step):
        lr, momentum, wd = group["lr"], group["momentum"], group["weight_decay"]
        p, g = fg.part(fg.data, start, stop), fg.part(fg.grad, start, stop)
        buf = fg.part(self._buffer(group, fg, "momentum_buffer"), start, stop) \
            if momentum else None
        pw, gw = working_copies(fg, p, g)
        lr_t = fg.device_lr if group["capturable"] else None
        if group["dampening"] == 0 and not group["maximize"]:
            # the common case: one fused kernel (buf starts at zero, so buf = d at first)
            raw_buf = None if buf is None else buf._data
            if lr_t is None:
                pw._be.sgd_step(pw._data, gw._data, raw_buf, lr, momentum, group["nesterov"],
                                wd)
            else:
                pw._be.sgd_step_capturable(pw._data, gw._data, raw_buf, lr_t._data, momentum,
                                           group["nesterov"], wd)
            write_back(p, pw)
            return
        d = -gw if group["maximize"] else gw
        if wd:
            d = d + pw * wd
        if momentum:
            if step == 1:
                buf.copy_(d)
            else:
                buf.mul_(momentum).add_(d * (1.0 - group["dampening"]))
            d = d + buf * momentum if group["nesterov"] else buf
        pw.sub_(d * (lr if lr_t is None else lr_t))
        write_back(p, pw)
