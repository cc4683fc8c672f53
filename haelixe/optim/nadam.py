"""NAdam (Adam with Nesterov momentum), as PyTorch defines it."""

from __future__ import annotations

from .elementwise import ElementwiseOptimizer, check_betas, check_nonnegative, ema_square_, lerp_


class NAdam(ElementwiseOptimizer):
    r"""Implements NAdam (Dozat, 2016), with PyTorch's momentum schedule.

    .. math::
        \mu_t &= \beta_1 (1 - \tfrac12 \, 0.96^{t \psi}), \quad
        \Pi_t = \textstyle\prod_{i \le t} \mu_i \\
        m &\leftarrow \beta_1 m + (1 - \beta_1) g, \quad
        v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
        d = \sqrt{v / (1 - \beta_2^t)} + \epsilon \\
        p &\leftarrow p - \gamma \frac{1 - \mu_t}{1 - \Pi_t} \frac{g}{d}
            - \gamma \frac{\mu_{t+1}}{1 - \Pi_t \mu_{t+1}} \frac{m}{d}

    with ``g + weight_decay * p`` for g, or (``decoupled_weight_decay=True``, NAdamW)
    ``p *= 1 - lr * weight_decay`` first.

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 2e-3).
        betas (Tuple[float, float], optional): coefficients of the running averages of the
            gradient and its square (default: (0.9, 0.999)).
        eps (float, optional): added to the denominator (default: 1e-8).
        weight_decay (float, optional): weight decay (default: 0).
        momentum_decay (float, optional): :math:`\psi` (default: 4e-3).
        decoupled_weight_decay (bool, optional): decay the parameter, as AdamW, rather than
            adding an L2 term to the gradient (default: False).
        foreach (bool, optional): accepted and ignored (a performance switch in PyTorch).
        maximize (bool, optional): maximize the objective (default: False).
        capturable (bool, optional): only False: this optimizer's step cannot be
            captured (hx.capture); Adam, AdamW and SGD can.
        differentiable (bool, optional): only False.

    The update is composed of backend-generic tensor ops, so it runs on any device.
    State (PyTorch's names): ``exp_avg``, ``exp_avg_sq`` (BF16/F16 parameters: float32,
    as AdamW) and ``mu_product``, a host float per parameter (float64; PyTorch keeps it in
    its default dtype).
    """

    _host_names = ("mu_product",)

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        check_nonnegative("NAdam", lr=lr, eps=eps)
        betas = check_betas("NAdam", betas)
        check_nonnegative("NAdam", weight_decay=weight_decay, momentum_decay=momentum_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps,
                                      weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      capturable=capturable, differentiable=differentiable))

    def _state_names(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _initial(self, group, name):
        return 1.0 if name == "mu_product" else 0.0

    def _steps_matter(self, group):
        return True

    def _update(self, group, fg, start, stop, step):
        b1, psi = group["betas"][0], group["momentum_decay"]
        mu = b1 * (1.0 - 0.5 * 0.96 ** (step * psi))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * psi))
        products = fg.host_state["mu_product"]
        first, last = fg._index_of_start[start], fg._index_of_stop[stop]
        for i in range(first, last + 1):
            products[i] *= mu
        # parameters of equal count may still differ in mu_product (a loaded state dict,
        # a changed momentum_decay): one call per stretch of equal products
        stretch = first
        for i in range(first + 1, last + 1):
            if products[i] != products[stretch] and fg.sizes[i]:
                a = fg.bounds[i][0]
                super()._update(group, fg, fg.bounds[stretch][0], a, step, mu=mu,
                                mu_next=mu_next, product=products[stretch])
                stretch = i
        super()._update(group, fg, fg.bounds[stretch][0], stop, step, mu=mu,
                        mu_next=mu_next, product=products[stretch])

    def _step_elements(self, group, step, p, g, state, mu, mu_next, product):
        b1, b2 = group["betas"]
        lr = group["lr"]
        exp_avg = lerp_(state["exp_avg"], g, 1.0 - b1)
        exp_avg_sq = ema_square_(state["exp_avg_sq"], g, b2)
        denom = (exp_avg_sq / (1.0 - b2 ** step)).sqrt() + group["eps"]
        p.add_(g / denom * (-lr * (1.0 - mu) / (1.0 - product)))
        p.add_(exp_avg / denom * (-lr * mu_next / (1.0 - product * mu_next)))
