"""Adam and AdamW, with bias correction, optional AMSGrad and F32 master weights."""

from __future__ import annotations

import math

from ..memory import tagged
from .optimizer import LOW_PRECISION, Optimizer, working_copies, write_back


class Adam(Optimizer):
    """PyTorch's Adam: weight decay is L2, added to the gradient (g + weight_decay * p)
    before the moments; with ``decoupled_weight_decay=True`` (AdamW) it is applied to the
    parameter instead, p *= 1 - lr * weight_decay (Loshchilov & Hutter).

    Each parameter counts its own steps for the bias correction, as in PyTorch, so a
    parameter that missed steps (no gradient) is corrected by the steps it took.

    master_weights=True keeps an F32 copy of low-precision (BF16/F16) parameters: the
    moments and the update live in F32 and the parameter receives the rounded result, so
    updates smaller than half a BF16 ulp accumulate instead of vanishing.
    stochastic_rounding=True rounds that write-back stochastically instead.

    capturable=True keeps the step counts and the learning rate on the device (the
    counts advance by a kernel, the bias corrections are computed by the update kernel
    in float32, as PyTorch's capturable Adam), so the step can be captured (hx.capture)
    and replayed under a scheduler. Stochastic rounding draws on the host: it cannot.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, *, maximize=False, decoupled_weight_decay=False,
                 master_weights=False, stochastic_rounding=False, capturable=False):
        name = type(self).__name__
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"{name}: lr, eps and weight_decay must be >= 0, got lr={lr}, "
                             f"eps={eps}, weight_decay={weight_decay}")
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"{name}: betas must lie in [0, 1), got {tuple(betas)}")
        self.master_weights = master_weights
        self.stochastic_rounding = stochastic_rounding
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      capturable=capturable))

    def _init_state(self, group, fg):
        self._buffer(group, fg, "exp_avg")
        self._buffer(group, fg, "exp_avg_sq")
        if self.master_weights and fg.dtype.name in LOW_PRECISION:
            with tagged("optimizer_state"):
                fg.state["master"] = fg.data.to("float32", copy=True)
        if group["amsgrad"]:
            self._buffer(group, fg, "max_exp_avg_sq")

    def _steps_matter(self, group) -> bool:
        return True

    def _state_names(self, group) -> tuple:
        return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group["amsgrad"] else ())

    # the F32 master weights are Haelixe's own: saved beside PyTorch's state, and taken
    # from the parameter when a state dict (PyTorch's) has none
    def _param_state(self, group, fg, i) -> dict:
        entry = super()._param_state(group, fg, i)
        master = fg.state.get("master")
        if master is not None:
            a, b = fg.bounds[i]
            entry["master_weight"] = master[a:b].view(fg.params[i].shape).detach().clone()
        return entry

    def _load_param(self, group, fg, i, entry) -> None:
        super()._load_param(group, fg, i, entry)
        master = fg.state.get("master")
        if master is not None:
            a, b = fg.bounds[i]
            kept = None if entry is None else entry.get("master_weight")
            master[a:b].copy_(fg.data[a:b] if kept is None else kept.detach().reshape(-1))

    def _update(self, group, fg, start, stop, step):
        st = fg.state
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        b1, b2 = group["betas"]
        decoupled = group["decoupled_weight_decay"]
        p, g = fg.part(fg.data, start, stop), fg.part(fg.grad, start, stop)
        m, v = fg.part(st["exp_avg"], start, stop), fg.part(st["exp_avg_sq"], start, stop)
        master = st.get("master")
        pw, gw = working_copies(fg, p, g,
                                None if master is None else fg.part(master, start, stop))
        if group["maximize"]:
            gw = -gw
        if wd and not decoupled:
            gw = gw + pw * wd
        if group["capturable"]:  # lr and the count (one more, by a kernel) on the device
            lr, step = fg.device_lr, fg.device_step_of(start, stop)
        if not group["amsgrad"]:
            if group["capturable"]:
                pw._be.adamw_step_capturable(pw._data, gw._data, m._data, v._data, lr._data,
                                             step._data, b1, b2, eps,
                                             wd if decoupled else 0.0)
            else:
                pw._be.adamw_step(pw._data, gw._data, m._data, v._data, lr, b1, b2, eps,
                                  wd if decoupled else 0.0, step)
            write_back(p, pw, self.stochastic_rounding)
            return
        # AMSGrad: the denominator uses the running maximum of v (no fused kernel)
        # (made here when amsgrad was switched on after construction)
        vmax = fg.part(self._buffer(group, fg, "max_exp_avg_sq"), start, stop)
        if wd and decoupled:
            pw.mul_(1.0 - lr * wd)
        m.mul_(b1).add_(gw * (1.0 - b1))
        v.mul_(b2).add_(gw * gw * (1.0 - b2))
        vmax.copy_(vmax.maximum(v))
        if group["capturable"]:  # the same formulas on device tensors
            denom = vmax.sqrt() / (1.0 - b2 ** step).sqrt() + eps
        else:
            denom = vmax.sqrt() * (1.0 / math.sqrt(1.0 - b2 ** step)) + eps
        pw.sub_(m / denom * (lr / (1.0 - b1 ** step)))
        write_back(p, pw, self.stochastic_rounding)


class AdamW(Adam):
    """Adam with decoupled weight decay (PyTorch's AdamW; weight_decay defaults to 0.01)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                 amsgrad=False, *, maximize=False, master_weights=False,
                 stochastic_rounding=False, capturable=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True, master_weights=master_weights,
                         stochastic_rounding=stochastic_rounding, capturable=capturable)
