"""RAdam (rectified Adam), as PyTorch defines it."""

from __future__ import annotations

import math

from .elementwise import ElementwiseOptimizer, check_betas, check_nonnegative, ema_square_, lerp_


class RAdam(ElementwiseOptimizer):
    r"""Implements RAdam (Liu et al., 2019).

    .. math::
        m &\leftarrow \beta_1 m + (1 - \beta_1) g, \quad
        v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
        \hat m = m / (1 - \beta_1^t) \\
        \rho_\infty &= 2 / (1 - \beta_2) - 1, \quad
        \rho_t = \rho_\infty - 2 t \beta_2^t / (1 - \beta_2^t) \\
        p &\leftarrow p - \gamma \hat m \, r_t \sqrt{1 - \beta_2^t} / (\sqrt{v} + \epsilon)
            \ \text{ if } \rho_t > 5, \text{ else } p \leftarrow p - \gamma \hat m, \\
        r_t &= \sqrt{\frac{(\rho_t - 4)(\rho_t - 2)\rho_\infty}
            {(\rho_\infty - 4)(\rho_\infty - 2)\rho_t}}

    with ``g + weight_decay * p`` for g, or (``decoupled_weight_decay=True``, RAdamW)
    ``p *= 1 - lr * weight_decay`` first.

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 1e-3).
        betas (Tuple[float, float], optional): coefficients of the running averages of the
            gradient and its square (default: (0.9, 0.999)).
        eps (float, optional): added to the denominator (default: 1e-8).
        weight_decay (float, optional): weight decay (default: 0).
        decoupled_weight_decay (bool, optional): decay the parameter, as AdamW, rather than
            adding an L2 term to the gradient (default: False).
        foreach (bool, optional): accepted and ignored (a performance switch in PyTorch).
        maximize (bool, optional): maximize the objective (default: False).
        capturable (bool, optional): only False: this optimizer's step cannot be
            captured (hx.capture); Adam, AdamW and SGD can.
        differentiable (bool, optional): only False.

    The update is composed of backend-generic tensor ops, so it runs on any device.
    Each parameter counts its own steps, as in PyTorch. State (PyTorch's names):
    ``exp_avg`` and ``exp_avg_sq``; BF16/F16 parameters keep it in float32, as AdamW.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        check_nonnegative("RAdam", lr=lr, eps=eps)
        betas = check_betas("RAdam", betas)
        check_nonnegative("RAdam", weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                      weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      capturable=capturable, differentiable=differentiable))

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _steps_matter(self, group):
        return True

    def _step_elements(self, group, step, p, g, state):
        b1, b2 = group["betas"]
        exp_avg = lerp_(state["exp_avg"], g, 1.0 - b1)
        exp_avg_sq = ema_square_(state["exp_avg_sq"], g, b2)
        bias1, bias2 = 1.0 - b1 ** step, 1.0 - b2 ** step
        update = exp_avg / bias1 * group["lr"]
        rho_inf = 2.0 / (1.0 - b2) - 1.0
        rho_t = rho_inf - 2.0 * step * b2 ** step / bias2
        if rho_t > 5.0:  # the variance is tractable: rectify the adaptive step
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                             / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            update = update * (math.sqrt(bias2) / (exp_avg_sq.sqrt() + group["eps"])) * rect
        p.sub_(update)
