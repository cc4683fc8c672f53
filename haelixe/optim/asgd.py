"""ASGD, as PyTorch defines it."""

from __future__ import annotations

from .elementwise import ElementwiseOptimizer, check_nonnegative


class ASGD(ElementwiseOptimizer):
    r"""Implements averaged stochastic gradient descent (Polyak & Juditsky, 1992).

    .. math::
        p &\leftarrow p (1 - \lambda \eta_t) - \eta_t g, \quad
        a \leftarrow a + \mu_t (p - a) \\
        \eta_{t+1} &= \gamma / (1 + \lambda \gamma t)^\alpha, \quad
        \mu_{t+1} = 1 / \max(1, t - t_0)

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate :math:`\gamma` (default: 1e-2).
        lambd (float, optional): decay term :math:`\lambda` (default: 1e-4).
        alpha (float, optional): power for the eta update (default: 0.75).
        t0 (float, optional): the step at which averaging starts (default: 1e6).
        weight_decay (float, optional): L2 penalty (default: 0).
        foreach (bool, optional): accepted and ignored (a performance switch in PyTorch).
        maximize (bool, optional): maximize the objective (default: False).
        differentiable (bool, optional): only False.
        capturable (bool, optional): only False.

    The update is composed of backend-generic tensor ops, so it runs on any device.
    State (PyTorch's names): ``ax`` (the running average of the parameter) and ``eta``
    and ``mu``, host floats per parameter (float64).
    """

    _host_names = ("eta", "mu")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        check_nonnegative("ASGD", lr=lr, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _state_names(self, group):
        return ("ax",)

    def _initial(self, group, name):
        return {"eta": float(group["lr"]), "mu": 1.0}.get(name, 0.0)

    def _steps_matter(self, group):
        return True

    def _update(self, group, fg, start, stop, step):
        etas, mus = fg.host_state["eta"], fg.host_state["mu"]
        first, last = fg._index_of_start[start], fg._index_of_stop[stop]
        # one call per stretch of parameters with equal (eta, mu): a loaded state dict
        # may give parameters of equal count different values
        stretch = first
        for i in range(first + 1, last + 1):
            if (etas[i], mus[i]) != (etas[stretch], mus[stretch]) and fg.sizes[i]:
                super()._update(group, fg, fg.bounds[stretch][0], fg.bounds[i][0], step,
                                eta=etas[stretch], mu=mus[stretch])
                stretch = i
        super()._update(group, fg, fg.bounds[stretch][0], stop, step, eta=etas[stretch],
                        mu=mus[stretch])
        lr, lambd = group["lr"], group["lambd"]
        for i in range(first, last + 1):
            etas[i] = lr / ((1 + lambd * lr * step) ** group["alpha"])
            mus[i] = 1 / max(1, step - group["t0"])

    def _step_elements(self, group, step, p, g, state, eta, mu):
        p.mul_(1 - group["lambd"] * eta)
        p.add_(g * -eta)
        ax = state["ax"]
        if mu != 1:
            ax.add_((p - ax) * mu)
        else:
            ax.copy_(p)
