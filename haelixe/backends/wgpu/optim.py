"""Optimizer steps in place on flat, contiguous float32 buffers (one dispatch each)."""

from __future__ import annotations

import math

import numpy as np

from . import dtypes as gd
from .geometry import f32_bits, grid, meta_block
from .shaders import kernel


def _flat(name, x, n, state=True):
    if x.size != n:
        raise ValueError(f"optimizer step: {name} has {x.size} elements, expected {n}")
    if x.ndim and not x.is_contiguous():
        raise ValueError(f"optimizer step: {name} must be contiguous (it is updated in "
                         f"place); got strides {x.strides}")
    if state and x.dtype != gd.F32:
        raise TypeError(f"optimizer step: {name} must be float32, got {x.dtype}")
    return x


def _step(be, entry, arrays, names, scalars):
    n = arrays[0].size
    if n == 0:
        return
    # the checks, the spec and the metadata but its scalars follow from the layouts:
    # planned once per signature (the scalars, a learning rate, change step to step)
    key = (entry, *names, *[(a.shape, a.strides, a.offset, a.dtype) for a in arrays],
           len(scalars))
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= PLANS_KEPT:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(entry, arrays, names, len(scalars))
    if len({id(a.storage) for a in arrays}) != len(arrays):
        raise ValueError("optimizer step: parameter, gradient and state must not share "
                         "storage")
    spec, meta, launch = plan
    meta = meta.copy()
    meta[1:1 + len(scalars)] = scalars
    be.dispatcher.dispatch(spec, [a.buffer for a in arrays], meta, launch)


#: _step's (spec, metadata with zeros for the scalars, grid) by signature
_PLANS: dict = {}
PLANS_KEPT = 1024


def _plan(entry, arrays, names, n_scalars) -> tuple:
    n = arrays[0].size
    for i, (name, a) in enumerate(zip(names, arrays)):
        _flat(name, a, n, state=i != 1)
    meta = meta_block([n] + [0] * n_scalars, (n,), [((1,), a.offset) for a in arrays],
                      what=entry)
    bindings = [(name, gd.kind(a.dtype), "read" if i == 1 else "rw")
                for i, (name, a) in enumerate(zip(names, arrays))]
    return (kernel("optim.wgsl", entry, bindings), np.array(meta, np.int32),
            grid(-(-n // 256)))


def adamw_step(be, p, g, m, v, lr, beta1, beta2, eps, weight_decay, step):
    """Decoupled weight decay, then Adam with bias correction (PyTorch's AdamW)."""
    bc1 = 1.0 - beta1 ** step
    bc2 = 1.0 - beta2 ** step
    scalars = [f32_bits(1.0 - lr * weight_decay), f32_bits(beta1), f32_bits(beta2),
               f32_bits(eps), f32_bits(lr / bc1), f32_bits(1.0 / math.sqrt(bc2))]
    _step(be, "adamw", [p, g, m, v], ["p", "g", "m", "v"], scalars)


def sgd_step(be, p, g, buf, lr, momentum, nesterov, weight_decay):
    """SGD with optional weight decay, momentum (buf) and Nesterov."""
    scalars = [f32_bits(lr), f32_bits(momentum), f32_bits(weight_decay), int(bool(nesterov))]
    if momentum:
        if buf is None:
            raise ValueError("sgd_step: momentum needs a buffer")
        _step(be, "sgd_momentum", [p, g, buf], ["p", "g", "buf"], scalars)
    else:
        _step(be, "sgd", [p, g], ["p", "g"], scalars)


def unscale_and_check(be, g, inv_scale, flag) -> bool:
    """GradScaler's unscale: g *= inv_scale in place and flag (a 0-d float32) = 1 when g
    held an inf or NaN, in one pass. False (nothing done) unless g is contiguous
    float32: the caller then composes it."""
    if g.dtype != gd.F32 or (g.ndim and not g.is_contiguous()) or flag.dtype != gd.F32:
        return False
    n = g.size
    if n:
        meta = meta_block([n, f32_bits(inv_scale)], (n,), [((1,), g.offset),
                                                           ((0,), flag.offset)],
                          what="unscale_check")
        spec = kernel("optim.wgsl", "unscale_check", [("g", "f32", "rw"),
                                                      ("flag", "f32", "write")])
        be.dispatcher.dispatch(spec, [g.buffer, flag.buffer], meta, grid(-(-n // 256)))
    return True
