"""Indexing, selection and joining: getitem/setitem, where, gather, cat, stack."""

from __future__ import annotations

import numbers

import numpy as np

from .. import layout
from ..autograd.function import Function
from ..dtype import bool_, promote_types, result_type
from ..tensor import Tensor
from .convert import cast
from .registry import declare, elementwise, function, tensor_method
from .views import Slice

# -- __getitem__ ---------------------------------------------------------------------------

def _is_basic(k) -> bool:
    # a bool is an Integral but indexes as a 0-d mask (x[True] adds a dim), not as 1
    return k is None or k is Ellipsis or isinstance(k, slice) or (
        isinstance(k, numbers.Integral) and not isinstance(k, bool))


def _normalize_key(key):
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    for k in key:
        if isinstance(k, Tensor) and k.ndim == 0 and not k.dtype.is_floating_point \
                and k.dtype is not bool_:
            k = int(k.item())
        elif isinstance(k, np.integer):
            k = int(k)
        out.append(k)
    return tuple(out)


def _raw_key(x, key):
    """The key with array entries turned into raw arrays on x's device."""
    be = x._be
    out = []
    for k in key:
        if _is_basic(k):
            out.append(k)
            continue
        if isinstance(k, Tensor):
            if k.device is not x.device:
                raise RuntimeError(f"indexing: index tensor on {k.device.type} for a tensor "
                                   f"on {x.device.type}; move the index with .to(...)")
            arr = k._be.to_numpy(k._data)
        else:
            arr = np.asarray(k)
        if arr.dtype == np.bool_:
            out.append(be.from_numpy(arr) if be.name != "cpu" else arr)
            continue
        if arr.dtype.kind not in "iu":
            raise IndexError(f"indexing: index arrays must be integer or bool, got "
                             f"{arr.dtype}")
        if be.name != "cpu":
            arr = arr.astype(np.int32)
        out.append(be.from_numpy(arr) if be.name != "cpu" else arr)
    return tuple(out)


class Take(Function):
    """Advanced (integer-array / mask) indexing: a copy; backward scatter-adds, so
    repeated indices accumulate."""

    @staticmethod
    def forward(ctx, x, key):
        ctx.in_shape = x.shape
        ctx.key = key
        return x._be.take(x._data, key)

    @staticmethod
    def backward(ctx, g):
        return IndexAdd.apply(g, ctx.in_shape, ctx.key), None


class IndexAdd(Function):
    @staticmethod
    def forward(ctx, g, shape, key):
        ctx.key = key
        return g._be.index_add(shape, key, g._data)

    @staticmethod
    def backward(ctx, gg):
        return Take.apply(gg, ctx.key), None, None


def getitem(x, key):
    key = _normalize_key(key)
    if all(_is_basic(k) for k in key):
        return Slice.apply(x, key)
    return Take.apply(x, _raw_key(x, key))


def setitem(x, key, value):
    from .inplace import _SETITEM_RECORDING, _records_graph, copy_

    key = _normalize_key(key)
    if all(_is_basic(k) for k in key):
        target = x._view(*layout.index(x.shape, x.strides, x.offset, key))
        copy_(target, value, through=x)
        return
    if _records_graph(x, value, "setitem"):  # as the basic-index path refuses it
        raise RuntimeError(_SETITEM_RECORDING)
    if x.device.type != "cpu":
        raise NotImplementedError("setitem with array indices is CPU-only; use where() "
                                  "or index a CPU copy")
    v = value._be.to_numpy(value._data) if isinstance(value, Tensor) else value
    x._data[_raw_key(x, key)] = v
    x._storage.version += 1


# -- where / masked_fill -------------------------------------------------------------------
WHERE = elementwise(
    "where", lambda m, c, a, b: m.where(c, a, b),
    grad=(None, lambda m, g, c: m.where(c, g, 0.0), lambda m, g, c: m.where(c, 0.0, g)),
    method=False, function=False, inplace=False, dtype_from=1)


@function
def where(condition, input, other):  # noqa: A002 (PyTorch's argument names)
    """Elements of ``input`` where ``condition`` holds, else of ``other``; either may be a
    Python number. The condition is kept for backward (and version-checked)."""
    tensors = [t for t in (condition, input, other) if isinstance(t, Tensor)]
    if not tensors:
        raise TypeError("where: expected at least one tensor among condition, input, other")
    ref = tensors[0]
    if not isinstance(condition, Tensor):
        condition = _as_tensor(condition, ref)
    if condition.dtype is not bool_:
        raise TypeError(f"where: condition must be bool, got {condition.dtype.name}; compare "
                        f"first (x > 0)")
    dt = result_type(*((t.dtype, t.ndim == 0) if isinstance(t, Tensor) else t
                       for t in (input, other)))
    vals = []
    for v in (input, other):
        if not isinstance(v, Tensor):
            v = _as_tensor(v, condition, dt)
        elif v.dtype is not dt:
            v = cast(v, dt)
        if v.device is not condition.device:
            raise RuntimeError(f"where: tensors on {condition.device.type} (shape "
                               f"{condition.shape}) and {v.device.type} (shape {v.shape}); "
                               f"move one with .to(...)")
        vals.append(v)
    layout.broadcast_shapes(condition.shape, vals[0].shape, vals[1].shape, op="where")
    return WHERE.function_class.apply(condition, vals[0], vals[1])


def _as_tensor(value, ref, dtype=None):
    from ..creation import tensor

    return tensor(value, dtype=dtype, device=ref.device)


@tensor_method(name="where")
def _where_method(self, condition, other):
    return where(condition, self, other)


@tensor_method(function=True)
def masked_fill(x, mask, value):
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        raise TypeError(f"masked_fill: mask must be a bool tensor, got "
                        f"{getattr(mask, 'dtype', type(mask).__name__)}")
    shape = layout.broadcast_shapes(x.shape, mask.shape, op="masked_fill")
    if shape != x.shape:
        raise ValueError(f"masked_fill: mask of shape {mask.shape} must broadcast to the "
                         f"input's shape {x.shape}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise ValueError(f"masked_fill: value must be a number or a 0-d tensor, got "
                             f"shape {value.shape}")
        value = cast(value, x.dtype)
    else:
        value = _as_tensor(value, x, x.dtype)
    return where(mask, value, x)


# -- gather --------------------------------------------------------------------------------

class Gather(Function):
    @staticmethod
    def forward(ctx, x, dim, index):
        ctx.in_shape, ctx.dim = x.shape, dim
        ctx.save_for_backward(index)  # version-checked: an edited index would misroute
        return x._be.gather(x._data, dim, index._data)

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        return ScatterAdd.apply(g, ctx.in_shape, ctx.dim, index), None, None


class ScatterAdd(Function):
    @staticmethod
    def forward(ctx, g, shape, dim, index):
        ctx.dim = dim
        ctx.save_for_backward(index)
        return g._be.scatter_add(shape, dim, index._data, g._data)

    @staticmethod
    def backward(ctx, gg):
        (index,) = ctx.saved_tensors
        return Gather.apply(gg, ctx.dim, index), None, None, None


def gather(x, dim, index):
    dim = layout.normalize_dim(dim, x.ndim, "gather")
    if index.dtype.is_floating_point or index.dtype is bool_:
        raise TypeError(f"gather: index must be an integer tensor, got {index.dtype.name}")
    if index.ndim != x.ndim:
        raise ValueError(f"gather: index has {index.ndim} dims but input has {x.ndim} "
                         f"(shapes {index.shape} and {x.shape})")
    if any(i > n for d, (i, n) in enumerate(zip(index.shape, x.shape)) if d != dim):
        raise ValueError(f"gather: index of shape {index.shape} is larger than the input "
                         f"of shape {x.shape} outside dim {dim}")
    return Gather.apply(x, dim, index)


# -- cat / stack ---------------------------------------------------------------------------

class Cat(Function):
    @staticmethod
    def forward(ctx, dim, *tensors):
        ctx.dim = dim
        ctx.sizes = sizes = [t.shape[dim] for t in tensors]
        first = tensors[0]
        shape = list(first.shape)
        shape[dim] = sum(sizes)
        be = first._be
        out = Tensor._wrap(be.empty(tuple(shape), first.dtype.np))
        start = 0
        for t, n in zip(tensors, sizes):
            dst = out._view(*layout.narrow(out.shape, out.strides, out.offset, dim, start, n))
            be.copy_into(dst._data, t._data)
            start += n
        return out

    @staticmethod
    def backward(ctx, g):
        grads, start = [None], 0
        for n, nxt in zip(ctx.sizes, ctx.next[1:]):
            grads.append(g.narrow(ctx.dim, start, n) if nxt is not None else None)
            start += n
        return tuple(grads)


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty sequence of tensors")
    ref = tensors[0]
    if any(t.ndim == 0 for t in tensors):
        raise ValueError("cat: zero-dimensional tensors cannot be concatenated; use stack, "
                         "or unsqueeze(0) them first")
    dim = layout.normalize_dim(dim, ref.ndim, "cat")
    dt = ref.dtype
    for t in tensors[1:]:
        dt = promote_types(dt, t.dtype)
        if t.device is not ref.device:
            raise RuntimeError(f"cat: tensors on {ref.device.type} (shape {ref.shape}) and "
                               f"{t.device.type} (shape {t.shape}); move one with .to(...)")
        if t.ndim != ref.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, ref.shape))
                                     if i != dim):
            raise ValueError(f"cat: shapes {ref.shape} and {t.shape} differ outside dim {dim}")
    tensors = [cast(t, dt) for t in tensors]
    return Cat.apply(dim, *tensors)


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    shape = tensors[0].shape
    for t in tensors[1:]:
        if t.shape != shape:
            raise ValueError(f"stack: all tensors must have one shape, got {shape} and "
                             f"{t.shape}")
    dim = layout.normalize_dim(dim, len(shape) + 1, "stack")
    return cat([t.unsqueeze(dim) for t in tensors], dim)


# -- the Tensor methods -----------------------------------------------------------------------
for _name, _arity in (("getitem", 1), ("gather", 1), ("cat", 2), ("stack", 2)):
    declare(_name, arity=_arity, dtypes="any")
Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem
tensor_method(gather, function=True)
function(cat)
function(stack)
