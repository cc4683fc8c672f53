"""Rprop, as PyTorch defines it."""

from __future__ import annotations

from .. import creation
from ..ops.indexing import where
from .elementwise import ElementwiseOptimizer, check_nonnegative


class Rprop(ElementwiseOptimizer):
    r"""Implements the resilient backpropagation algorithm (Riedmiller & Braun, 1993).

    Each element keeps its own step size: multiplied by ``etas[1]`` while the gradient
    keeps its sign, by ``etas[0]`` when it flips (and that element then skips the step),
    clamped to ``step_sizes``; the parameter moves by the step size against the
    gradient's sign.

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): the initial step size (default: 1e-2).
        etas (Tuple[float, float], optional): (decrease, increase) factors, 0 < etaminus
            < 1 < etaplus (default: (0.5, 1.2)).
        step_sizes (Tuple[float, float], optional): least and greatest step size
            (default: (1e-6, 50)).
        capturable (bool, optional): only False.
        foreach (bool, optional): accepted and ignored (a performance switch in PyTorch).
        maximize (bool, optional): maximize the objective (default: False).
        differentiable (bool, optional): only False.

    The update is composed of backend-generic tensor ops, so it runs on any device.
    State (PyTorch's names): ``prev`` (the last gradient used) and ``step_size``.
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        check_nonnegative("Rprop", lr=lr)
        etaminus, etaplus = etas
        if not 0.0 < etaminus < 1.0 < etaplus:
            raise ValueError(f"Rprop: Invalid eta values: {etaminus}, {etaplus}; they must "
                             f"satisfy 0 < etas[0] < 1 < etas[1]")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes),
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def _state_names(self, group):
        return ("prev", "step_size")

    def _initial(self, group, name):
        return float(group["lr"]) if name == "step_size" else 0.0

    def _step_elements(self, group, step, p, g, state):
        etaminus, etaplus = group["etas"]
        low, high = group["step_sizes"]
        prev, step_size = state["prev"], state["step_size"]
        agree = (g * prev).sign()
        # (the factors as tensors of the state's dtype: a Python float would be rounded
        # to float32 by where)
        factor = where(agree > 0, _full(agree, etaplus),
                       where(agree < 0, _full(agree, etaminus), _full(agree, 1.0)))
        step_size.mul_(factor).clamp_(low, high)
        g = where(agree < 0, _full(g, 0.0), g)  # (a flipped sign: no step, and no memory of it)
        p.sub_(g.sign() * step_size)
        prev.copy_(g)


def _full(like, value):
    return creation.full(like.shape, value, dtype=like.dtype, device=like.device)
