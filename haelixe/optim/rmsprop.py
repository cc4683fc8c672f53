"""RMSprop, as PyTorch defines it (optionally centered, with momentum)."""

from __future__ import annotations

from .elementwise import ElementwiseOptimizer, check_nonnegative, ema_square_, lerp_


class RMSprop(ElementwiseOptimizer):
    r"""Implements RMSprop (Hinton's lecture notes; centered as in Graves, 2013).

    .. math::
        g &\leftarrow g + \lambda p \\
        v &\leftarrow \alpha v + (1 - \alpha) g^2 \\
        \bar g &\leftarrow \alpha \bar g + (1 - \alpha) g \quad
            \text{(centered: } \tilde v = v - \bar g^2 \text{, else } \tilde v = v) \\
        b &\leftarrow \mu b + g / (\sqrt{\tilde v} + \epsilon), \quad p \leftarrow p - \gamma b
            \quad \text{(without momentum: } p \leftarrow p - \gamma g /
            (\sqrt{\tilde v} + \epsilon))

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 1e-2).
        alpha (float, optional): smoothing constant (default: 0.99).
        eps (float, optional): added to the denominator (default: 1e-8).
        weight_decay (float, optional): L2 penalty (default: 0).
        momentum (float, optional): momentum factor (default: 0).
        centered (bool, optional): normalize by an estimate of the gradient's variance
            (default: False).
        capturable (bool, optional): only False: this optimizer's step cannot be
            captured (hx.capture); Adam, AdamW and SGD can.
        foreach (bool, optional): accepted and ignored (a performance switch in
            PyTorch; here every step is whole-buffer ops anyway).
        maximize (bool, optional): maximize the objective (default: False).
        differentiable (bool, optional): only False.

    The update is composed of backend-generic tensor ops, so it runs on any device.
    State (PyTorch's names): ``square_avg``, ``momentum_buffer`` (momentum > 0),
    ``grad_avg`` (centered); BF16/F16 parameters keep it in float32, as AdamW.
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        check_nonnegative("RMSprop", lr=lr, eps=eps, momentum=momentum,
                          weight_decay=weight_decay, alpha=alpha)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps,
                                      weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, capturable=capturable,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable))

    def _state_names(self, group):
        names = ("square_avg",)
        if group["momentum"] > 0:
            names += ("momentum_buffer",)
        if group["centered"]:
            names += ("grad_avg",)
        return names

    def _step_elements(self, group, step, p, g, state):
        alpha, lr, eps = group["alpha"], group["lr"], group["eps"]
        square_avg = ema_square_(state["square_avg"], g, alpha)
        if group["centered"]:
            grad_avg = lerp_(state["grad_avg"], g, 1.0 - alpha)
            avg = (square_avg - grad_avg * grad_avg).sqrt() + eps
        else:
            avg = square_avg.sqrt() + eps
        if group["momentum"] > 0:
            buf = state["momentum_buffer"].mul_(group["momentum"]).add_(g / avg)
            p.sub_(buf * lr)
        else:
            p.sub_(g / avg * lr)
