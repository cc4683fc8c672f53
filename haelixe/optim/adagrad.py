"""Adagrad, as PyTorch defines it (with learning-rate decay)."""

from __future__ import annotations

from .elementwise import ElementwiseOptimizer, check_nonnegative


class Adagrad(ElementwiseOptimizer):
    r"""Implements Adagrad (Duchi et al., 2011).

    .. math::
        \tilde\gamma &= \gamma / (1 + (t - 1) \eta), \quad g \leftarrow g + \lambda p \\
        s &\leftarrow s + g^2, \quad p \leftarrow p - \tilde\gamma g / (\sqrt{s} + \epsilon)

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 1e-2).
        lr_decay (float, optional): learning rate decay :math:`\eta` (default: 0).
        weight_decay (float, optional): L2 penalty (default: 0).
        initial_accumulator_value (float, optional): the value ``sum`` starts at
            (default: 0).
        eps (float, optional): added to the denominator (default: 1e-10).
        foreach (bool, optional): accepted and ignored (a performance switch in PyTorch).
        maximize (bool, optional): maximize the objective (default: False).
        differentiable (bool, optional): only False.
        fused (bool, optional): accepted and ignored (a performance switch in PyTorch).

    The update is composed of backend-generic tensor ops, so it runs on any device.
    State (PyTorch's names): ``sum`` and ``step``, for every parameter from the start, as
    in PyTorch; BF16/F16 parameters keep ``sum`` in float32, as AdamW its moments.
    Gradients are dense (no sparse gradients).
    """

    _eager_state = True

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, foreach=None, *, maximize=False,
                 differentiable=False, fused=None):
        check_nonnegative("Adagrad", lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                          initial_accumulator_value=initial_accumulator_value, eps=eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))

    def _state_names(self, group):
        return ("sum",)

    def _initial(self, group, name):
        return float(group["initial_accumulator_value"])

    def _steps_matter(self, group):
        return bool(group["lr_decay"])

    def _step_elements(self, group, step, p, g, state):
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        total = state["sum"].add_(g * g)
        p.sub_(g / (total.sqrt() + group["eps"]) * clr)
