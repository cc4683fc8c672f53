"""Optimizer steps in place on flat, contiguous float32 buffers (one dispatch each)."""

from __future__ import annotations

import math

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
    for i, (name, a) in enumerate(zip(names, arrays)):
        _flat(name, a, n, state=i != 1)
    if len({id(a.storage) for a in arrays}) != len(arrays):
        raise ValueError("optimizer step: parameter, gradient and state must not share "
                         "storage")
    meta = meta_block([n, *scalars], (n,), [((1,), a.offset) for a in arrays], what=entry)
    bindings = [(name, gd.kind(a.dtype), "read" if i == 1 else "rw")
                for i, (name, a) in enumerate(zip(names, arrays))]
    be.dispatcher.dispatch(kernel("optim.wgsl", entry, bindings),
                           [a.buffer for a in arrays], meta, grid(-(-n // 256)))


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
