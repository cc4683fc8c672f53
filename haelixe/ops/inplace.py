"""In-place ops. Each writes through the tensor's own layout into its storage and bumps
the storage's version, so a node that saved any view of it notices at backward.

Under autograd an in-place op on a non-leaf is recorded as its out-of-place form applied
to a copy of the old value, and the tensor takes the new node as its grad_fn (PyTorch
also keeps the old value for such backward formulas).
"""

from __future__ import annotations

import numpy as np

from .. import layout
from ..autograd.mode import STATE
from ..dtype import number_as, stored_number
from ..tensor import Tensor
from . import registry
from .convert import as_tensor_like, cast, to_device
from .overwrite import refresh_view, write_region
from .registry import tensor_method


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
        refresh_view(x, op)
    return True


def _rebase(x, result, op):
    """Write ``result`` into x's buffer and make it x's history (a view's: its base's,
    see overwrite.py)."""
    if result.shape != x.shape:
        raise RuntimeError(f"{op}: the result of shape {result.shape} does not fit the "
                           f"in-place target of shape {x.shape}")
    if x._base is not None:
        write_region(x, None, result, op)
        return x
    x._storage.check_writable(op)
    x._be.copy_into(x._data, cast(result, x.dtype)._data)
    x._storage.version += 1
    x._storage.history += 1
    x.grad_fn = result.grad_fn
    x._requires_grad = result._requires_grad
    return x


def check_writable(x, op):
    """Refuse in-place writes that would be wrong or fail below: into elements sharing
    memory, or into read-only memory (a batch mapped from a file opened read-only)."""
    _check_no_overlap(x, op)
    x._storage.check_writable(op)


def _check_no_overlap(x, op):
    # (a contiguous tensor, which most targets are, has no layout to inspect)
    if x._layout is not None and not layout.is_non_overlapping(x.shape, x.strides):
        raise RuntimeError(f"{op}: the target (shape {x.shape}, strides {x.strides}) has "
                           f"elements sharing memory (an expanded view?), so the result "
                           f"would depend on write order; clone() it first")


def apply_elementwise(decl, x, args):
    """``x.<op>_(*args)``: the op's result written into x's own memory."""
    op = decl.name + "_"
    others = args[:decl.arity - 1]
    params = args[decl.arity - 1:]
    if len(params) < len(decl.params):
        params = params + tuple(decl.params.values())[len(params):]
    cd = registry.inplace_result_dtype(decl, x, others)
    if _records_graph(x, next((o for o in others if isinstance(o, Tensor)), None), op):
        return _rebase(x, decl.apply(x.clone(), *others, *params), op)
    if decl.check is not None:  # (before anything is written: x stays as it was)
        decl.check(decl.name, x, *others)
    check_writable(x, op)
    raws = []
    for o in others:
        if isinstance(o, Tensor):
            if o.device is not x.device:
                if o.ndim:
                    raise RuntimeError(f"{op}: operand on {o.device.type} (shape {o.shape}), "
                                       f"target on {x.device.type} (shape {x.shape}); move "
                                       f"the operand with .to(...)")
                o = o.to(x.device)
            shape = layout.broadcast_shapes(x.shape, o.shape, op=op)
            if shape != x.shape:
                raise RuntimeError(f"{op}: operand of shape {o.shape} does not broadcast to "
                                   f"the in-place target's shape {x.shape}")
            raws.append(cast(o.detach(), cd)._data)
        else:
            raws.append(number_as(cd.np, registry._as_python(o), op, decl.wraps_ints))
    raws.extend(cd.np.type(p) for p in params)
    be = x._be
    if cd is x.dtype:
        be.map_into(decl.kernel, x._data, raws)
    else:  # computed wider than x (an int tensor += a long one): then written back
        be.copy_into(x._data, be.map(decl.kernel, [be.cast(x._data, cd.np), *raws],
                                     decl.out_dtype(cd).np))
    x._storage.version += 1
    return x


def fill_(x, value):
    return _fill(x, value, "fill_")


def _fill(x, value, op):
    # (op: the name the user called, fill_ or zero_, for the errors)
    if _records_graph(x, value, op):
        return _rebase(x, x.clone() * 0.0 + value, op)
    check_writable(x, op)
    if isinstance(value, Tensor):
        return copy_(x, value)
    x._be.copy_into(x._data, stored_number(x.dtype.np, value, op))  # one fill, no 0-d buffer
    x._storage.version += 1
    return x


_F32_MAX = float(np.finfo(np.float32).max)  # (beyond it a float32 write is refused)
_FLOAT_NP = frozenset((np.dtype(np.float32), np.dtype(np.float64)))
_INT_RANGES = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
               for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                         np.uint32, np.uint64)}


def _plain_number(np_dtype, value):
    """The Python number ``value`` as ``np_dtype``'s scalar where that is exactly what
    converting it to a tensor and casting would write (a float or a small int into
    float32/64, an int in range into an integer dtype), else None."""
    kind = value.__class__
    if np_dtype in _FLOAT_NP:
        if (kind is float and (np_dtype.itemsize == 8 or -_F32_MAX <= value <= _F32_MAX)) or (
                (kind is int or kind is bool) and -(1 << 24) <= value <= 1 << 24):
            return np_dtype.type(value)
    elif kind is int or kind is bool:
        bounds = _INT_RANGES.get(np_dtype)
        if bounds is not None and bounds[0] <= value <= bounds[1]:
            return np_dtype.type(value)
    return None


def copy_(x, src, through=None):
    """x[...] = src (broadcast, cast and moved as needed). ``through`` is the tensor a
    setitem went through: its autograd rules apply."""
    holder = x if through is None else through
    if not isinstance(src, Tensor):
        number = _plain_number(x.dtype.np, src)
        if number is None and isinstance(src, (int, float)) and not (
                x.dtype.is_floating_point and x.dtype.itemsize == 2):
            # out of range: refused, as PyTorch does (which writes a 16-bit float's
            # overflow as inf: the cast below does too)
            stored_number(x.dtype.np, src, "copy_")
        if number is not None and not _records_graph(holder, src, "copy_"):
            # (one fill of the view: no tensor made for the number, no cast node)
            if through is not None and through._layout is None:
                # a view by basic indexing of a contiguous tensor: no element shared
                through._storage.check_writable("copy_")
            else:
                check_writable(x, "copy_")
            x._be.copy_into(x._data, number)
            x._storage.version += 1
            return x
        src = as_tensor_like(src, x)
    if _records_graph(holder, src, "copy_"):
        if _same_elements(x, src):  # x[i] += v ends by writing x[i] into itself
            return x
        return _rebase(x, to_device(cast(src, x.dtype), x.device).expand(x.shape) + 0.0,
                       "copy_")
    check_writable(x, "copy_")
    s = to_device(cast(src.detach(), x.dtype), x.device)
    layout.broadcast_shapes(x.shape, s.shape, op="copy_")
    x._be.copy_into(x._data, s._data)
    x._storage.version += 1
    return x


def _same_elements(x, src) -> bool:
    return src._storage is x._storage and src.dtype is x.dtype and src.shape == x.shape \
        and src.strides == x.strides and src.offset == x.offset


@tensor_method
def zero_(x):
    return _fill(x, 0, "zero_")


tensor_method(fill_, name="fill_")
tensor_method(name="copy_")(lambda x, src: copy_(x, src))


# x += y writes into x, as in PyTorch (every name holding x sees the change)
for _dunder, _method in (("__iadd__", "add_"), ("__isub__", "sub_"), ("__imul__", "mul_"),
                         ("__itruediv__", "div_"), ("__ipow__", "pow_"),
                         ("__ifloordiv__", "floor_divide_"), ("__imod__", "remainder_"),
                         ("__iand__", "bitwise_and_"), ("__ior__", "bitwise_or_"),
                         ("__ixor__", "bitwise_xor_")):
    setattr(Tensor, _dunder, (lambda m: lambda self, other: getattr(self, m)(other))(_method))
