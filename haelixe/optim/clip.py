"""Gradient clipping by global norm."""

from __future__ import annotations

import math

import numpy as np

from ..autograd.mode import no_grad


def clip_grad_norm_(params, max_norm: float, eps: float = 1e-6) -> float:
    """Scale all gradients in place so their joint L2 norm is at most ``max_norm``.
    Returns the norm before clipping."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    total = 0.0
    for g in grads:
        a = g._be.to_numpy(g._data)
        total += float(np.sum(np.square(a, dtype=np.float64)))
    norm = math.sqrt(total)
    if norm > max_norm:
        scale = max_norm / (norm + eps)
        with no_grad():
            for g in grads:
                g.mul_(scale)
    return norm
