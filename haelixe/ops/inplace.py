"""In-place ops. Each writes through the tensor's own layout into its storage and bumps
the storage's version, so a node that saved any view of it notices at backward.

Under autograd an in-place op on a non-leaf is recorded as its out-of-place form applied
to a copy of the old value, and the tensor takes the new node as its grad_fn (PyTorch
also keeps the old value for such backward formulas).
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import layout
from ..autograd.mode import STATE
from . import elementwise as ew
from .convert import cast, to_device

_UFUNC = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _records_graph(x, other, op):
    other_req = isinstance(other, Tensor) and other._requires_grad
    if not STATE.grad_enabled or not (x._requires_grad or other_req):
        return False
    if x._requires_grad and x.grad_fn is None:
        raise RuntimeError(
            f"{op}: a leaf tensor that requires grad (shape {x.shape}) is being used in an "
            f"in-place operation. Do it inside `with hx.no_grad():` (as optimizers do) or "
            f"use the out-of-place op.")
    if x._base is not None:
        raise RuntimeError(
            f"{op}: in-place change of a view (shape {x.shape}) while autograd records; "
            f"use the out-of-place op, or clone() the view first")
    return True


_SETITEM_RECORDING = (
    "setitem (x[...] = v) while autograd records, with x or v requiring grad, is not "
    "supported; build the result with cat / where / masked_fill, or assign inside "
    "`with hx.no_grad():`")


def _rebase(x, result, op):
    """Write ``result`` into x's buffer and make it x's history."""
    if result.shape != x.shape:
        raise RuntimeError(f"{op}: the result of shape {result.shape} does not fit the "
                           f"in-place target of shape {x.shape}")
    x._be.copy_into(x._data, cast(result, x.dtype)._data)
    x._storage.version += 1
    x._storage.history += 1
    x.grad_fn = result.grad_fn
    x._requires_grad = result._requires_grad
    return x


def _raw_operand(x, other, op):
    if isinstance(other, Tensor):
        if other.device is not x.device:
            raise RuntimeError(f"{op}: operand on {other.device.type} (shape {other.shape}), "
                               f"target on {x.device.type} (shape {x.shape}); move the "
                               f"operand with .to(...)")
        shape = layout.broadcast_shapes(x.shape, other.shape, op=op)
        if shape != x.shape:
            raise RuntimeError(f"{op}: operand of shape {other.shape} does not broadcast to "
                               f"the in-place target's shape {x.shape}")
        return cast(other.detach(), x.dtype)._data
    if isinstance(other, (numbers.Number, np.generic)):
        return ew._scalar_raw(x._be, other, x.dtype)
    return ew.as_tensor_like(other, x).to(x.dtype)._data


def _check_no_overlap(x, op):
    if not layout.is_non_overlapping(x.shape, x.strides):
        raise RuntimeError(f"{op}: the target (shape {x.shape}, strides {x.strides}) has "
                           f"elements sharing memory (an expanded view?), so the result "
                           f"would depend on write order; clone() it first")


def apply(kind, x, other):
    op = f"{kind}_"
    if _records_graph(x, other, op):
        return _rebase(x, getattr(ew, kind)(x.clone(), other), op)
    _check_no_overlap(x, op)
    o = _raw_operand(x, other, op)
    if x.device.type == "cpu":
        _UFUNC[kind](x._data, o, out=x._data, casting="unsafe")
    else:
        be = x._be
        into = getattr(be, "binary_into", None)
        if into is not None:  # one kernel reading and writing x
            into(kind, x._data, o)
        else:
            be.copy_into(x._data, getattr(be, kind)(x._data, o))
    x._storage.version += 1
    return x


def clamp_(x, lo=None, hi=None):
    if _records_graph(x, None, "clamp_"):
        return _rebase(x, x.clone().clamp(lo, hi), "clamp_")
    _check_no_overlap(x, "clamp_")
    x._be.copy_into(x._data, x._be.clamp(x._data, lo, hi))
    x._storage.version += 1
    return x


def fill_(x, value):
    if _records_graph(x, value, "fill_"):
        return _rebase(x, x.clone() * 0.0 + value, "fill_")
    if x.device.type == "cpu":
        x._data[...] = value
    else:
        x._be.copy_into(x._data, x.dtype.np.type(value))  # one fill, no 0-d buffer
    x._storage.version += 1
    return x


def copy_(x, src, through=None):
    """x[...] = src (broadcast, cast and moved as needed). ``through`` is the tensor a
    setitem went through: its autograd rules apply."""
    holder = x if through is None else through
    if not isinstance(src, Tensor):
        src = ew.as_tensor_like(src, x)
    if _records_graph(holder, src, "copy_"):
        if through is not None:
            raise RuntimeError(_SETITEM_RECORDING)
        return _rebase(x, to_device(cast(src, x.dtype), x.device).expand(x.shape) + 0.0,
                       "copy_")
    _check_no_overlap(x, "copy_")
    s = to_device(cast(src.detach(), x.dtype), x.device)
    layout.broadcast_shapes(x.shape, s.shape, op="copy_")
    x._be.copy_into(x._data, s._data)
    x._storage.version += 1
    return x


def random_(x, kind, a, b):
    from ..random import generator

    gen = generator()
    if kind == "normal":
        host = gen.standard_normal(x.shape) * b + a
    else:
        host = gen.uniform(a, b, x.shape)
    return copy_(x, Tensor._wrap(x._be.from_numpy(host.astype(x.dtype.np))))


from ..tensor import Tensor  # noqa: E402
