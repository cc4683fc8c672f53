"""Adamax (Adam with the infinity norm), as PyTorch defines it."""

from __future__ import annotations

from .elementwise import ElementwiseOptimizer, check_betas, check_nonnegative, lerp_


class Adamax(ElementwiseOptimizer):
    r"""Implements Adamax, the infinity-norm variant of Adam (Kingma & Ba, 2015).

    .. math::
        g &\leftarrow g + \lambda p, \quad m \leftarrow \beta_1 m + (1 - \beta_1) g \\
        u &\leftarrow \max(\beta_2 u, |g| + \epsilon), \quad
        p \leftarrow p - \frac{\gamma}{1 - \beta_1^t} \frac{m}{u}

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 2e-3).
        betas (Tuple[float, float], optional): coefficients of the running average and of
            the infinity norm (default: (0.9, 0.999)).
        eps (float, optional): added to the infinity norm (default: 1e-8).
        weight_decay (float, optional): L2 penalty (default: 0).
        foreach (bool, optional): accepted and ignored (a performance switch in PyTorch).
        maximize (bool, optional): maximize the objective (default: False).
        differentiable (bool, optional): only False.
        capturable (bool, optional): only False: this optimizer's step cannot be
            captured (hx.capture); Adam, AdamW and SGD can.

    The update is composed of backend-generic tensor ops, so it runs on any device.
    Each parameter counts its own steps for the bias correction, as in PyTorch. State
    (PyTorch's names): ``exp_avg`` and ``exp_inf``; BF16/F16 parameters keep it in
    float32, as AdamW.
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        check_nonnegative("Adamax", lr=lr, eps=eps)
        betas = check_betas("Adamax", betas)
        check_nonnegative("Adamax", weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _state_names(self, group):
        return ("exp_avg", "exp_inf")

    def _steps_matter(self, group):
        return True

    def _step_elements(self, group, step, p, g, state):
        b1, b2 = group["betas"]
        exp_avg = lerp_(state["exp_avg"], g, 1.0 - b1)
        exp_inf = state["exp_inf"]
        exp_inf.copy_((exp_inf * b2).maximum(g.abs() + group["eps"]))
        p.sub_(exp_avg / exp_inf * (group["lr"] / (1.0 - b1 ** step)))
