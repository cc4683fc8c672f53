"""Indexing, selection and joining: getitem/setitem, where, gather, cat, stack."""

from __future__ import annotations

import inspect
import numbers
import warnings

import numpy as np

from .. import layout
from ..autograd.function import Function
from ..autograd.mode import STATE
from ..backends.base import Backend
from ..dtype import (
    bool_,
    int32,
    int64,
    number_as,
    promote_types,
    result_type,
    stored_number,
    uint8,
)
from ..errors import OpError, OpIndexError
from ..tensor import Tensor
from .convert import as_tensor_like, cast
from .registry import declare, elementwise, function, tensor_method
from .views import Slice

# -- __getitem__ ---------------------------------------------------------------------------

def _is_basic(k) -> bool:
    # a bool is an Integral but indexes as a 0-d mask (x[True] adds a dim), not as 1
    return k is None or k is Ellipsis or isinstance(k, slice) or (
        isinstance(k, numbers.Integral) and not isinstance(k, bool))


#: the types of the usual key entries: basic, and nothing to convert (a bool is not one)
_PLAIN_KEY_TYPES = frozenset((slice, int, type(None), type(Ellipsis)))


def _normalize_key(key):
    if key.__class__ is tuple:
        for k in key:  # (x[:, ::2, 1:]: returned as it is, with no list built)
            if k.__class__ not in _PLAIN_KEY_TYPES:
                break
        else:
            return key
    elif key.__class__ in _PLAIN_KEY_TYPES:
        return (key,)
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    for k in key:
        if isinstance(k, Tensor) and k.dtype.kind == "int" and k.dtype not in _INDEX_DTYPES:
            k = _mask_of_bytes(k)
        if isinstance(k, Tensor) and k.ndim == 0 and not k.dtype.is_floating_point \
                and k.dtype is not bool_:
            k = int(k.item())
        elif isinstance(k, np.integer):
            k = int(k)
        out.append(k)
    return tuple(out)


#: the integer dtypes an index tensor may have (PyTorch's: long, int, and byte as a mask)
_INDEX_DTYPES = (int64, int32)


def _mask_of_bytes(k):
    """A uint8 index tensor is a mask, as in PyTorch (which warns it is deprecated);
    other small integer dtypes PyTorch refuses as indices."""
    if k.dtype is not uint8:
        raise OpIndexError(f"indexing: tensors used as indices must be int64, int32, uint8 "
                           f"or bool (as in PyTorch), got {k.dtype.name}; convert it with "
                           f".long()")
    warnings.warn("indexing with dtype uint8 is deprecated (as in PyTorch), please use a "
                  "dtype bool instead", UserWarning, stacklevel=4)
    return k != 0


def _key_dims(ndim, key):
    """The first dim of x each key entry addresses (None for None and Ellipsis)."""
    consumed = [0 if k is None or k is Ellipsis else
                (np.ndim(k) if _is_bool_array(k) else 1) for k in key]
    dims, d = [], 0
    for i, (k, n) in enumerate(zip(key, consumed)):
        if k is Ellipsis:
            d = ndim - sum(consumed[i + 1:])
            dims.append(None)
            continue
        dims.append(None if k is None else d)
        d += n
    return dims


def _is_bool_array(k) -> bool:
    dt = getattr(k, "dtype", None)
    return dt is bool_ or (isinstance(dt, np.dtype) and dt == np.bool_)


def _raw_key(x, key):
    """The key with array entries as raw arrays on x's device, checked against x's
    shape first (numpy's own messages, or a GPU read out of bounds, never reach the
    user)."""
    be = x._be
    out, shapes = [], []  # (shapes: what each index array adds to the broadcast)
    for k, d in zip(key, _key_dims(x.ndim, key)):
        if _is_basic(k):
            out.append(k)
            continue
        if isinstance(k, Tensor):
            if k.device is not x.device:
                raise RuntimeError(f"indexing: index tensor on {k.device.type} for a tensor "
                                   f"on {x.device.type}; move the index with .to(...)")
            if k.dtype.kind == "int" and be.checks_on_device():  # (no read-back now)
                n = x.shape[d]
                be.check_range(k._data, -n, n, None, IndexError,
                               _out_of_bounds("indexing", d, n, x.shape))
                out.append(k._data)
                shapes.append(k.shape)
                continue
            arr = k._be.to_numpy(k._data)
        else:
            arr = np.asarray(k)
        if arr.dtype == np.bool_:
            want = x.shape[d:d + arr.ndim]
            if arr.shape != want:
                raise IndexError(f"indexing: a bool mask of shape {arr.shape} does not match "
                                 f"the dims {d}..{d + arr.ndim - 1} of the tensor, of shape "
                                 f"{want} (tensor shape {x.shape})")
        elif arr.dtype.kind not in "iu":
            raise IndexError(f"indexing: index arrays must be integer or bool, got "
                             f"{arr.dtype}")
        elif arr.size:
            n = x.shape[d]
            lo, hi = int(arr.min()), int(arr.max())
            if lo < -n or hi >= n:
                raise IndexError(_out_of_bounds("indexing", d, n, x.shape).format(
                    value=hi if hi >= n else lo))
        # an index tensor's own array once checked (on the GPU: no second upload)
        out.append(k._data if isinstance(k, Tensor) and arr.dtype.kind in "iu"
                   else be.from_numpy(arr))
        shapes.append(arr)
    if len(shapes) > 1:
        _check_broadcast(shapes, x.shape)
    return tuple(out)


def _check_broadcast(shapes, x_shape) -> None:
    """Index arrays pick elements together, so their shapes must broadcast (a mask
    counts as its number of True values)."""
    shapes = [(int(np.count_nonzero(s)),) if getattr(s, "dtype", None) == np.bool_
              else tuple(s.shape) if hasattr(s, "shape") else s for s in shapes]
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        listed = ", ".join(str(list(s)) for s in shapes)
        raise IndexError(f"indexing: shape mismatch: the index tensors' shapes {listed} do "
                         f"not broadcast together (tensor shape {x_shape}); give them one "
                         f"shape, or shapes that broadcast") from None


def _out_of_bounds(op, dim, n, shape, what="tensor") -> str:
    """The message of an index outside dim ``dim`` (of size ``n``) of a tensor of
    ``shape``, the index left as ``{value}`` (see Backend.check_range)."""
    return (f"{op}: index {{value}} is out of bounds for dim {dim} of size {n} ({what} "
            f"shape {shape})")


class Take(Function):
    """Advanced (integer-array / mask) indexing: a copy; backward scatter-adds, so
    repeated indices accumulate."""

    @staticmethod
    def forward(ctx, x, key, key_tensors=()):
        ctx.in_shape = x.shape
        ctx.key = key
        ctx.save_for_backward(*key_tensors)  # version-checked: an edited key would misroute
        return x._be.take(x._data, key)

    @staticmethod
    def backward(ctx, g):
        _ = ctx.saved_tensors  # the version check of the key tensors
        if not STATE.grad_enabled:  # first order: IndexAdd's scatter-add with no node
            return Tensor._wrap(g._be.index_add(ctx.in_shape, ctx.key, g._data)), None, None
        return IndexAdd.apply(g, ctx.in_shape, ctx.key), None, None


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
    for k in key:  # (a plain loop: all() over a generator costs more, on every x[...])
        if k.__class__ not in _PLAIN_KEY_TYPES and not _is_basic(k):
            if any(k.__class__ is int for k in key):
                basic, advanced = _split_key(key)
                x = Slice.apply(x, basic)
                key = advanced
            return Take.apply(x, _raw_key(x, key), tuple(k for k in key
                                                         if isinstance(k, Tensor)))
    return Slice.apply(x, key)


def take_rows(x, index):
    """x[index] for one int64/int32 index tensor of one or more dims (an embedding's
    lookup): getitem's advanced path, without normalising a key of one entry."""
    return Take.apply(x, _raw_key(x, (index,)), (index,))


def _split_key(key):
    """A key of ints and index arrays as PyTorch reads it: the basic entries first (an
    int drops its dim, so it does not count among the advanced indices, as it does in
    numpy), then the arrays over the result; where the arrays' dims go follows from the
    second key alone (x[0, :, [1, 2]] puts them in place of the last dim, not first)."""
    basic, advanced = [], []
    for k in key:
        if k.__class__ is int:
            basic.append(k)
        elif k is Ellipsis or isinstance(k, slice) or k is None:
            basic.append(k)
            advanced.append(k if k is Ellipsis else slice(None))
        else:  # (a bool addresses no dim: x[True] adds one)
            dims = 0 if isinstance(k, (bool, np.bool_)) else \
                np.ndim(k) if _is_bool_array(k) else 1
            basic.extend([slice(None)] * dims)
            advanced.append(k)
    return tuple(basic), tuple(advanced)


def setitem(x, key, value):
    from .inplace import _records_graph, _same_elements, copy_
    from .overwrite import write_region

    key = _normalize_key(key)
    for k in key:  # (a plain loop, as getitem's: all() over a generator costs more)
        if k.__class__ not in _PLAIN_KEY_TYPES and not _is_basic(k):
            break
    else:
        target = x._view(*layout.index(x.shape, x.strides, x.offset, key))
        if _records_graph(x, value, "setitem"):
            # (x[i] += v ends by writing x[i] into itself: nothing left to record)
            if not (isinstance(value, Tensor) and _same_elements(target, value)):
                if not isinstance(value, Tensor):
                    value = as_tensor_like(value, x, x.dtype)
                write_region(x, key, value, "setitem")
            return
        copy_(target, value, through=x)
        return
    if _records_graph(x, value, "setitem"):
        if not isinstance(value, Tensor):
            value = as_tensor_like(value, x, x.dtype)
        write_region(x, key, value, "setitem")
        return
    x._storage.check_writable("setitem")
    target = x
    if any(k.__class__ is int for k in key):  # PyTorch's placement, as getitem's
        basic, key = _split_key(key)
        target = x._view(*layout.index(x.shape, x.strides, x.offset, basic))
    raw = _raw_key(target, key)
    if not isinstance(value, Tensor):
        value = as_tensor_like(value, x, x.dtype)
    if value.device is not x.device:
        value = value.to(x.device)
    x._be.index_put(target._data, raw, cast(value.detach(), x.dtype)._data)
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
        condition = as_tensor_like(condition, ref)
    if condition.dtype is not bool_:
        raise TypeError(f"where: condition must be bool, got {condition.dtype.name}; compare "
                        f"first (x > 0)")
    dt = result_type(*((t.dtype, t.ndim == 0) if isinstance(t, Tensor) else t
                       for t in (input, other)))
    vals = []
    for v in (input, other):
        if not isinstance(v, Tensor):
            v = as_tensor_like(v, condition, dt)
        elif v.dtype is not dt:
            v = cast(v, dt)
        if v.device is not condition.device:
            raise RuntimeError(f"where: tensors on {condition.device.type} (shape "
                               f"{condition.shape}) and {v.device.type} (shape {v.shape}); "
                               f"move one with .to(...)")
        vals.append(v)
    layout.broadcast_shapes(condition.shape, vals[0].shape, vals[1].shape, op="where")
    return WHERE.function_class.apply(condition, vals[0], vals[1])


WHERE.apply = where  # the condition stays bool: not the registry's promoting front


@tensor_method(name="where")
def _where_method(self, condition, other):
    """where(condition, other) -> Tensor

    self where condition holds, other elsewhere: hx.where(condition, self, other)."""
    return where(condition, self, other)


@tensor_method(function=True)
def masked_fill(x, mask, value):
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        raise TypeError(f"masked_fill: mask must be a bool tensor, got "
                        f"{getattr(mask, 'dtype', type(mask).__name__)}")
    shape = layout.broadcast_shapes(x.shape, mask.shape, op="masked_fill")
    if shape != x.shape:
        raise OpError(f"masked_fill: mask of shape {mask.shape} must broadcast to the "
                      f"input's shape {x.shape}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise OpError(f"masked_fill: value must be a number or a 0-d tensor, got "
                          f"shape {value.shape}")
        value = cast(value, x.dtype)
    else:
        if isinstance(value, numbers.Real):
            # (a number beyond the dtype's range is refused, as PyTorch's: the float32
            # finfo(...).min into a float16 tensor)
            stored_number(x.dtype.np, value, "masked_fill")
        value = as_tensor_like(value, x, x.dtype)
    return where(mask, value, x)


@tensor_method(name="masked_fill_")
def masked_fill_(x, mask, value):
    """In place: ``value`` where ``mask`` is True."""
    return x.copy_(masked_fill(x, mask, value))


# -- gather --------------------------------------------------------------------------------

class Gather(Function):
    small_state = True

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
    small_state = True

    @staticmethod
    def forward(ctx, g, shape, dim, index):
        ctx.dim = dim
        ctx.save_for_backward(index)
        return g._be.scatter_add(shape, dim, index._data, g._data)

    @staticmethod
    def backward(ctx, gg):
        (index,) = ctx.saved_tensors
        return Gather.apply(gg, ctx.dim, index), None, None, None


def _zero_d(input, index, src=None):
    """A 0-d input with a 0-d index (and src): PyTorch treats them as one element each,
    so the op runs on 1-element views and its result is seen as 0-d again."""
    if input.ndim or not isinstance(index, Tensor) or index.ndim:
        return None
    one = (input.reshape(1), index.reshape(1))
    return one + ((src.reshape(1) if isinstance(src, Tensor) and src.ndim == 0 else src),)


def gather(input, dim, index, *, sparse_grad=False):
    if (one := _zero_d(input, index)) is not None:
        return gather(one[0], dim, one[1], sparse_grad=sparse_grad).reshape(())
    if sparse_grad:
        raise TypeError("gather: sparse_grad=True is not supported (haelixe has no sparse "
                        "tensors); leave it False for a dense gradient")
    dim = layout.normalize_dim(dim, input.ndim, "gather")
    if index.dtype.is_floating_point or index.dtype is bool_:
        raise TypeError(f"gather: index must be an integer tensor, got {index.dtype.name}")
    if index.ndim != input.ndim:
        raise OpError(f"gather: index has {index.ndim} dims but input has {input.ndim} "
                      f"(shapes {index.shape} and {input.shape})")
    if any(i > n for d, (i, n) in enumerate(zip(index.shape, input.shape)) if d != dim):
        raise OpError(f"gather: index of shape {index.shape} is larger than the input "
                      f"of shape {input.shape} outside dim {dim}")
    _check_index("gather", input, dim, index)  # (devices, and the range: a GPU would not)
    return Gather.apply(input, dim, index)


# -- scatter, index_select, index_add, tril / triu ----------------------------------------

def _same_dtype(op, x, src):
    if src.dtype is not x.dtype:  # (PyTorch refuses too: a cast would round silently)
        raise OpError(f"{op}: src has dtype {src.dtype.name} and the input "
                      f"{x.dtype.name}; they must match: convert with src.to({x.dtype!r})")


def _check_index(op, x, dim, index):
    if not isinstance(index, Tensor) or index.dtype.is_floating_point or index.dtype is bool_:
        raise TypeError(f"{op}: index must be an integer tensor, got "
                        f"{getattr(index, 'dtype', type(index).__name__)}")
    if index.device is not x.device:
        raise RuntimeError(f"{op}: index on {index.device.type}, input on {x.device.type}; "
                           f"move the index with .to(...)")
    n = x.shape[dim] if x.ndim else 1
    message = _out_of_bounds(op, dim, n, x.shape, "input")
    # 0 <= index < n: these ops do not count from the end (PyTorch refuses -1 too)
    be = index._be
    if be.checks_on_device():  # (no read-back now)
        be.check_range(index._data, 0, n, None, OpIndexError, message)
    else:  # the contract's default: the raw array read back and checked now, no op nodes
        Backend.check_range(be, index._data, 0, n, None, OpIndexError, message)


class Scatter(Function):
    """A copy of x with src written at index along dim; x's gradient is zero where it
    was overwritten, src's is gathered back."""

    small_state = True

    @staticmethod
    def forward(ctx, x, dim, index, src):
        ctx.dim = dim
        ctx.save_for_backward(index)
        raw_src = src._data if isinstance(src, Tensor) else number_as(x.dtype.np, src,
                                                                        "scatter")
        return x._be.scatter(x._data, dim, index._data, raw_src)

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        keep = Scatter.apply(g.detach() * 0.0 + 1.0, ctx.dim, index, 0.0)
        gsrc = g.gather(ctx.dim, index) if ctx.next[3] is not None else None
        return g * keep, None, None, gsrc


def _check_scatter_shapes(op, x, dim, index, src):
    """PyTorch's rule: index has the input's number of dims, is no larger than the input
    outside ``dim`` and no larger than a tensor ``src`` anywhere (an empty index: any)."""
    if not isinstance(index, Tensor):
        return  # (_check_index names the type)
    if index.ndim != x.ndim or (isinstance(src, Tensor) and src.ndim != x.ndim):
        raise OpError(f"{op}: index (shape {index.shape}), input (shape {x.shape}) and src "
                      f"must have the same number of dims")
    if index.numel() == 0:
        return
    too_big = any(i > n for d, (i, n) in enumerate(zip(index.shape, x.shape)) if d != dim)
    if isinstance(src, Tensor):
        too_big |= any(i > n for i, n in zip(index.shape, src.shape))
    if too_big:
        of_src = f" and no larger than src {src.shape}" if isinstance(src, Tensor) else ""
        raise OpError(f"{op}: index of shape {index.shape} must be no larger than the input "
                      f"{x.shape} outside dim {dim}{of_src}")


@tensor_method(function=True)
def scatter(x, dim, index, src=None, value=None, *, reduce=None):
    """``out[index[i][j]][j] = src[i][j]`` (dim 0); ``src`` may be a number (``value``).
    ``reduce='add'`` or ``'multiply'`` combines instead of writing, as
    :func:`scatter_reduce`'s 'sum' and 'prod' with the input included (its gradient too,
    where PyTorch has none)."""
    src = value if src is None else src
    if (one := _zero_d(x, index, src)) is not None:
        return scatter(one[0], dim, one[1], one[2], reduce=reduce).reshape(())
    if reduce is not None:
        if reduce not in _SCATTER_REDUCE:
            raise OpError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}; "
                          f"scatter_reduce takes 'sum', 'prod', 'mean', 'amax' and 'amin'")
        if not isinstance(src, Tensor):
            src = x.new_full(tuple(index.shape) if isinstance(index, Tensor) else (),
                             number_as(x.dtype.np, src, "scatter"))
        from .scatter_reduce import scatter_reduce  # (it builds on this module)

        return scatter_reduce(x, dim, index, src, _SCATTER_REDUCE[reduce])
    d = layout.normalize_dim(dim, x.ndim, "scatter")
    _check_index("scatter", x, d, index)
    _check_scatter_shapes("scatter", x, d, index, src)
    if isinstance(src, Tensor):
        _same_dtype("scatter", x, src)
        src = src[tuple(slice(0, n) for n in index.shape)]
    return Scatter.apply(x, d, index, src)


_SCATTER_REDUCE = {"add": "sum", "multiply": "prod"}


@tensor_method(function=True)
def scatter_add(input, dim, index, src):
    """``out = input``, then ``out[index[i][j]][j] += src[i][j]`` (dim 0); repeats add up."""
    if (one := _zero_d(input, index, src)) is not None:
        return scatter_add(one[0], dim, one[1], one[2]).reshape(())
    d = layout.normalize_dim(dim, input.ndim, "scatter_add")
    _check_index("scatter_add", input, d, index)
    _check_scatter_shapes("scatter_add", input, d, index, src)
    _same_dtype("scatter_add", input, src)
    src = src[tuple(slice(0, n) for n in index.shape)]
    return input + ScatterAdd.apply(src, input.shape, d, index)


@tensor_method(name="scatter_")
def scatter_(x, dim, index, src=None, value=None, *, reduce=None):
    """In place: :func:`scatter` written into ``x``."""
    return x.copy_(scatter(x, dim, index, src, value, reduce=reduce))


@tensor_method(name="scatter_add_")
def scatter_add_(x, dim, index, src):
    """In place: :func:`scatter_add` written into ``x``."""
    return x.copy_(scatter_add(x, dim, index, src))


@tensor_method(function=True)
def index_select(input, dim, index):
    """The entries of ``index`` (1-D) along ``dim``: a copy; the gradient adds back."""
    d = layout.normalize_dim(dim, input.ndim, "index_select")
    if index.ndim > 1:
        raise IndexError(f"index_select: index must be 0-D or 1-D, got shape {index.shape}")
    _check_index("index_select", input, d, index)
    return input[(slice(None),) * d + (index.reshape(-1),)]


@tensor_method(name="index_add_")
def index_add_(input, dim, index, source, *, alpha=1):
    """In place: ``input[..., index[i], ...] += alpha * source[..., i, ...]`` along ``dim``,
    repeated indices accumulating."""
    d = layout.normalize_dim(dim, input.ndim, "index_add_")
    _check_index("index_add_", input, d, index)
    key = _raw_key(input, (slice(None),) * d + (index.reshape(-1),))
    src = cast(source, input.dtype) * alpha if alpha != 1 else cast(source, input.dtype)
    return input.add_(IndexAdd.apply(src, input.shape, key))


@tensor_method(function=True)
def index_add(input, dim, index, source, *, alpha=1):
    return index_add_(input.clone(), dim, index, source, alpha=alpha)


def _triangle(op, x, diagonal, lower):
    if x.ndim < 2:
        raise RuntimeError(f"{op}: input needs at least 2 dims, got shape {x.shape}")
    n, m = x.shape[-2:]
    drop = ~np.tril(np.ones((n, m), bool), diagonal) if lower else \
        ~np.triu(np.ones((n, m), bool), diagonal)
    return masked_fill(x, as_tensor_like(drop, x), 0)


@tensor_method(function=True)
def tril(input, diagonal=0):
    return _triangle("tril", input, diagonal, True)


@tensor_method(function=True)
def triu(input, diagonal=0):
    return _triangle("triu", input, diagonal, False)


@tensor_method(function=True)
def nonzero(input, *, as_tuple=False):
    """The indices of the non-zero elements: an (n, ndim) int64 tensor, or one 1-D
    tensor per dim with ``as_tuple`` (read on the host: the count decides the shape)."""
    host = input.detach()._be.to_numpy(input._data).reshape(input.shape)
    if input.ndim == 0:  # a 0-d tensor: one match with no coordinates, or none (PyTorch)
        n = int(host != 0)
        if as_tuple:
            return (as_tensor_like(np.zeros(n, np.int64), input),)
        return as_tensor_like(np.zeros((n, 0), np.int64), input)
    idx = np.nonzero(host)
    if as_tuple:
        return tuple(as_tensor_like(i.astype(np.int64), input) for i in idx)
    stacked = np.stack(idx, axis=1) if idx else np.zeros((0, 0), np.int64)
    return as_tensor_like(stacked.astype(np.int64), input)


declare("nonzero", differentiable=False, dtypes="any")


@tensor_method(function=True)
def masked_select(input, mask):  # noqa: A002 (PyTorch's names)
    """masked_select(input, mask) -> Tensor

    The elements of ``input`` where the bool ``mask`` is True, input and mask broadcast
    together, in row-major order: a 1-D copy (its gradient adds back where it came
    from)."""
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise OpError(f"masked_select: mask must be a bool tensor, got {got}; compare "
                      f"first (x > 0) or convert with .bool()")
    try:
        shape = layout.broadcast_shapes(input.shape, mask.shape)
    except ValueError:
        raise OpError(f"masked_select: mask of shape {mask.shape} does not broadcast "
                      f"with input of shape {input.shape}") from None
    return input.expand(shape)[mask.expand(shape)]


def _repeat_counts(op, repeats, n, device):
    """``repeats`` (a number, or a 0-d or 1-D int tensor) as n counts on the host."""
    if isinstance(repeats, Tensor):
        if repeats.dtype.is_floating_point or repeats.ndim > 1:
            raise OpError(f"{op}: repeats must be an int number or a 0-D or 1-D int "
                          f"tensor, got a {repeats.dtype.name} tensor of shape "
                          f"{repeats.shape}")
        counts = repeats.detach().cpu().numpy().astype(np.int64).reshape(-1)
        if repeats.ndim == 0:
            counts = np.full(n, counts[0], np.int64)
        elif counts.shape[0] != n:
            raise OpError(f"{op}: repeats has {counts.shape[0]} entries for a dim of size "
                          f"{n}: give one count per element, or a single number")
    elif isinstance(repeats, numbers.Integral) and not isinstance(repeats, bool):
        counts = np.full(n, int(repeats), np.int64)
    else:
        raise TypeError(f"{op}: repeats must be an int or an int tensor, got "
                        f"{type(repeats).__name__}")
    if (counts < 0).any():
        raise OpError(f"{op}: repeats must be non-negative, got {counts.min()}")
    return counts


@tensor_method(function=True)
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):  # noqa: A002
    """repeat_interleave(input, repeats, dim=None, *, output_size=None) -> Tensor

    Each element (or slice along ``dim``) repeated ``repeats`` times in place, the
    copies side by side (torch.repeat_interleave; ``repeats`` a number or one count per
    element). Without ``dim`` the input is flattened first. Called with one int tensor
    alone, it repeats each index that many times (PyTorch's second form)."""
    if repeats is None:  # repeat_interleave(counts): the indices, repeated
        counts = _repeat_counts("repeat_interleave", input, input.numel(), input.device)
        return as_tensor_like(np.repeat(np.arange(counts.shape[0]), counts), input)
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else layout.normalize_dim(dim, x.ndim, "repeat_interleave")
    if x.ndim == 0:
        x = x.reshape(1)
    counts = _repeat_counts("repeat_interleave", repeats, x.shape[d], x.device)
    index = np.repeat(np.arange(x.shape[d], dtype=np.int64), counts)
    if output_size is not None and output_size != index.shape[0]:
        raise OpError(f"repeat_interleave: output_size={output_size}, but the repeats "
                      f"make {index.shape[0]} entries")
    return index_select(x, d, as_tensor_like(index, x))


# the signature PyTorch publishes (its first form: repeats given)
repeat_interleave.__signature__ = inspect.signature(repeat_interleave).replace(
    parameters=[p.replace(default=inspect.Parameter.empty) if p.name == "repeats" else p
                for p in inspect.signature(repeat_interleave).parameters.values()])
declare("masked_select", dtypes="any")
declare("repeat_interleave", dtypes="any")

# -- cat / stack ---------------------------------------------------------------------------

class Cat(Function):
    """Tensors joined along ``dim`` (cat), or, ``stacked``, each as one new entry of a new
    dim there (stack: no unsqueeze node per tensor)."""

    small_state = True

    @staticmethod
    def forward(ctx, dim, stacked, *tensors):
        first = tensors[0]
        ctx.sizes = [1] * len(tensors) if stacked else [t.shape[dim] for t in tensors]
        ctx.dim, ctx.stacked = dim, stacked
        return first._be.join([t._data for t in tensors], dim, stacked)

    @staticmethod
    def backward(ctx, g):
        dim, stacked = ctx.dim, ctx.stacked
        grads, start = [None, None], 0
        if not STATE.grad_enabled:
            # first order: each input's part of g as a view with no node, the entry's
            # dim dropped for stack
            shape, strides, offset = g.shape, g.strides, g.offset
            for n, nxt in zip(ctx.sizes, ctx.next[2:]):
                if nxt is None:
                    grads.append(None)
                else:
                    s, st, off = layout.narrow(shape, strides, offset, dim, start, n)
                    if stacked:
                        s, st = s[:dim] + s[dim + 1:], st[:dim] + st[dim + 1:]
                    grads.append(g._view(s, st, off))
                start += n
            return tuple(grads)
        # under create_graph: narrow and squeeze recorded
        for n, nxt in zip(ctx.sizes, ctx.next[2:]):
            if nxt is None:
                grads.append(None)
            else:
                piece = g.narrow(dim, start, n)
                grads.append(piece.squeeze(dim) if stacked else piece)
            start += n
        return tuple(grads)


def _joined(tensors, op):
    """``tensors`` in their common dtype (PyTorch's promotion), all on one device."""
    ref, dt = tensors[0], tensors[0].dtype
    device, mixed = ref.device, False
    for t in tensors:
        if t.dtype is not dt:  # (then some tensor is not of the promoted dtype)
            dt, mixed = promote_types(dt, t.dtype), True
        if t.device is not device:
            raise RuntimeError(f"{op}: tensors on {ref.device.type} (shape {ref.shape}) "
                               f"and {t.device.type} (shape {t.shape}); move one with "
                               f".to(...)")
    return [cast(t, dt) for t in tensors] if mixed else tensors


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise OpError("cat: expected a non-empty sequence of tensors")
    shape = tensors[0].shape
    for t in tensors:
        if not t.shape:
            raise OpError("cat: zero-dimensional tensors cannot be concatenated; use "
                          "stack, or unsqueeze(0) them first")
    dim = layout.normalize_dim(dim, len(shape), "cat")
    before, after = shape[:dim], shape[dim + 1:]
    for t in tensors:
        s = t.shape
        if s != shape and (len(s) != len(shape) or s[:dim] != before or
                           s[dim + 1:] != after):
            raise OpError(f"cat: shapes {shape} and {t.shape} differ outside dim {dim}")
    return Cat.apply(dim, False, *_joined(tensors, "cat"))


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise OpError("stack: expected a non-empty sequence of tensors")
    shape = tensors[0].shape
    for t in tensors[1:]:
        if t.shape != shape:
            raise OpError(f"stack: all tensors must have one shape, got {shape} and "
                          f"{t.shape}")
    dim = layout.normalize_dim(dim, len(shape) + 1, "stack")
    return Cat.apply(dim, True, *_joined(tensors, "stack"))


# -- the Tensor methods -----------------------------------------------------------------------
for _name, _arity in (("getitem", 1), ("gather", 1), ("cat", 2), ("stack", 2),
                      ("scatter", 2), ("scatter_add", 2), ("index_select", 1),
                      ("index_add", 2), ("tril", 1), ("triu", 1)):
    declare(_name, arity=_arity, dtypes="any")
Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem
tensor_method(gather, function=True)
function(cat)
function(stack)
