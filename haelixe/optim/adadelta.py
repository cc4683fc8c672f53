"""Adadelta, as PyTorch defines it."""

from __future__ import annotations

from .elementwise import ElementwiseOptimizer, check_nonnegative, ema_square_


class Adadelta(ElementwiseOptimizer):
    r"""Implements Adadelta (Zeiler, 2012).

    .. math::
        g &\leftarrow g + \lambda p, \quad v \leftarrow \rho v + (1 - \rho) g^2 \\
        \Delta &= g \sqrt{u + \epsilon} / \sqrt{v + \epsilon}, \quad
        u \leftarrow \rho u + (1 - \rho) \Delta^2, \quad p \leftarrow p - \gamma \Delta

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): coefficient that scales delta (default: 1.0).
        rho (float, optional): coefficient of the running averages (default: 0.9).
        eps (float, optional): added inside the square roots (default: 1e-6).
        weight_decay (float, optional): L2 penalty (default: 0).
        foreach (bool, optional): accepted and ignored (a performance switch in PyTorch).
        capturable (bool, optional): only False: this optimizer's step cannot be
            captured (hx.capture); Adam, AdamW and SGD can.
        maximize (bool, optional): maximize the objective (default: False).
        differentiable (bool, optional): only False.

    The update is composed of backend-generic tensor ops, so it runs on any device.
    State (PyTorch's names): ``square_avg`` (v) and ``acc_delta`` (u); BF16/F16
    parameters keep it in float32, as AdamW.
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        check_nonnegative("Adadelta", lr=lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Adadelta: Invalid rho value: rho={rho!r}; it must lie in "
                             f"[0, 1]")
        check_nonnegative("Adadelta", eps=eps, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, capturable=capturable,
                                      maximize=maximize, differentiable=differentiable))

    def _state_names(self, group):
        return ("square_avg", "acc_delta")

    def _step_elements(self, group, step, p, g, state):
        rho, eps = group["rho"], group["eps"]
        std = (ema_square_(state["square_avg"], g, rho) + eps).sqrt()
        delta = (state["acc_delta"] + eps).sqrt() / std * g
        ema_square_(state["acc_delta"], delta, rho)
        p.sub_(delta * group["lr"])
