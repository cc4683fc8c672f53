"""Writing into positions of a copy: take, put, index_put, masked_scatter, and the
scatters into a view (slice_scatter, select_scatter, diagonal_scatter,
as_strided_scatter).

Each finds, on the host, the flat positions it writes (the view's elements over an
arange of the input's size, or the linear index of a tuple of index tensors), then
writes with index_copy or index_add over the flattened input: their gradients are
PyTorch's (the source gets the gradient at its positions, the input the rest, or all
of it when accumulating), on every backend, with no derivative of its own."""

from __future__ import annotations

import numpy as np

from .. import layout
from ..dtype import bool_, int64
from ..errors import OpError, OpIndexError, OpTypeError
from ..tensor import Tensor
from .arranging import index_copy, same_dtype_and_device
from .composite import _in_place
from .convert import as_tensor_like
from .indexing import index_add, index_select
from .registry import declare, tensor_method
from .views import storage_positions


def _check_tensor(op, name, t):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")


def _write_flat(x, positions, values, accumulate):
    """x flattened, values (flat, one per position) written or added at the flat
    ``positions`` (a host int64 array), reshaped back to x's shape."""
    flat = x.reshape(-1)
    index = as_tensor_like(positions.reshape(-1).astype(np.int64), x, int64)
    out = (index_add if accumulate else index_copy)(flat, 0, index, values.reshape(-1))
    return out.reshape(x.shape)


def _host_index(op, index, n):
    """index's values as a host int64 array, negatives wrapped, each within [-n, n)."""
    _check_tensor(op, "index", index)
    if index.dtype is not int64:
        raise OpIndexError(f"{op}: expected an int64 (long) index, got {index.dtype.name}")
    a = index.cpu().numpy().astype(np.int64)
    bad = (a < -n) | (a >= n)
    if bad.any():
        raise OpIndexError(f"{op}: index {int(a[bad][0])} is out of range for a tensor of "
                           f"{n} elements")
    return np.where(a < 0, a + n, a)


# -- take and put: the input as one flat vector ------------------------------------------------
@tensor_method(function=True)
def take(input, index):  # noqa: A002 (PyTorch's names)
    """take(input, index) -> Tensor

    The elements of input read as one flat vector (row-major), at ``index`` (negative
    indices count from the end); the result has index's shape."""
    _check_tensor("take", "input", input)
    positions = _host_index("take", index, input.numel())
    picked = index_select(input.reshape(-1), 0,
                          as_tensor_like(positions.reshape(-1), input, int64))
    return picked.reshape(index.shape)


def _put(x, index, source, accumulate, op):
    _check_tensor(op, "source", source)
    positions = _host_index(op, index, x.numel())
    if source.numel() != positions.size:
        raise OpIndexError(f"{op}: source has {source.numel()} elements and index "
                           f"{positions.size}; give one source element per index")
    same_dtype_and_device(op, x, source, "source")
    if x.ndim == 0:
        return _write_flat(x.reshape(1), positions, source, accumulate).reshape(())
    return _write_flat(x, positions, source, accumulate)


@tensor_method(function=True)
def put(input, index, source, accumulate=False):  # noqa: A002
    """put(input, index, source, accumulate=False) -> Tensor

    A copy of input, read as one flat vector, with source's elements written at
    ``index`` (or added, with accumulate=True, repeated indices adding up)."""
    return _put(input, index, source, accumulate, "put")


@tensor_method(name="put_")
def put_(input, index, source, accumulate=False):  # noqa: A002
    """put_(index, source, accumulate=False) -> Tensor

    In-place put."""
    return _in_place(input, "put", lambda x: _put(x, index, source, accumulate, "put_"),
                     other=source)


# -- index_put: a tuple of index tensors ----------------------------------------------------
def _index_positions(op, x, indices):
    """The flat positions of x[indices] (the index tensors broadcast; bool masks stand
    for their nonzero positions), as an array of shape (broadcast index shape) + the
    dims no index names."""
    if isinstance(indices, Tensor) or not isinstance(indices, (tuple, list)):
        raise TypeError(f"{op}: indices must be a tuple of tensors, got "
                        f"{type(indices).__name__}; wrap one index as (index,)")
    arrays = []
    for i, t in enumerate(indices):
        _check_tensor(op, f"indices[{i}]", t)
        a = t.cpu().numpy()
        if t.dtype is bool_ or t.dtype.name == "uint8":  # (a mask: its dims' positions)
            arrays.extend(np.nonzero(a.astype(bool)))
        elif t.dtype.is_floating_point:
            raise OpIndexError(f"{op}: indices must be long, int, bool or byte tensors, "
                               f"got {t.dtype.name} (indices[{i}])")
        else:
            arrays.append(a.astype(np.int64))
    if len(arrays) > x.ndim:
        raise OpIndexError(f"{op}: too many indices ({len(arrays)}) for a tensor of shape "
                           f"{x.shape}")
    try:
        arrays = np.broadcast_arrays(*arrays) if arrays else []
    except ValueError:
        raise OpIndexError(f"{op}: the index tensors' shapes "
                           f"{[a.shape for a in arrays]} do not broadcast") from None
    grid = np.arange(x.numel(), dtype=np.int64).reshape(x.shape)
    for d, a in enumerate(arrays):
        n = x.shape[d]
        if ((a < -n) | (a >= n)).any():
            bad = int(a[(a < -n) | (a >= n)][0])
            raise OpIndexError(f"{op}: index {bad} is out of bounds for dim {d} of size {n}")
    return grid[tuple(arrays)]


def _index_put(x, indices, values, accumulate, op):
    _check_tensor(op, "values", values)
    positions = _index_positions(op, x, indices)
    same_dtype_and_device(op, x, values, "values")
    try:
        spread = values.expand(positions.shape) if values.shape != positions.shape \
            else values
    except (OpError, RuntimeError, ValueError):
        raise OpError(f"{op}: values of shape {values.shape} do not broadcast to the "
                      f"indexed shape {positions.shape}") from None
    if x.ndim == 0:
        return _write_flat(x.reshape(1), positions, spread, accumulate).reshape(())
    return _write_flat(x, positions, spread, accumulate)


@tensor_method(function=True)
def index_put(input, indices, values, accumulate=False):  # noqa: A002
    """index_put(input, indices, values, accumulate=False) -> Tensor

    A copy of input with input[indices] = values (``indices`` a tuple of index tensors,
    broadcast; values broadcast to what they index), or += with accumulate=True (repeated
    positions adding up)."""
    return _index_put(input, indices, values, accumulate, "index_put")


@tensor_method(name="index_put_", function=True)
def index_put_(input, indices, values, accumulate=False):  # noqa: A002
    """index_put_(input, indices, values, accumulate=False) -> Tensor

    In-place index_put."""
    return _in_place(input, "index_put",
                     lambda x: _index_put(x, indices, values, accumulate, "index_put_"),
                     other=values)


# -- masked_scatter: source's elements, in order, where the mask holds -------------------------
def _masked_scatter(x, mask, source, op, in_place):
    _check_tensor(op, "mask", mask)
    _check_tensor(op, "source", source)
    if mask.dtype is not bool_:
        raise OpTypeError(f"{op}: only boolean masks are supported, got {mask.dtype.name}; "
                          f"compare first (mask != 0)")
    shape = x.shape if in_place else layout.broadcast_shapes(x.shape, mask.shape, op=op)
    if in_place and layout.broadcast_shapes(x.shape, mask.shape, op=op) != x.shape:
        raise OpError(f"{op}: the mask of shape {mask.shape} does not broadcast to the "
                      f"input's shape {x.shape}")
    same_dtype_and_device(op, x, source, "source")
    m = np.broadcast_to(mask.cpu().numpy(), shape)
    positions = np.flatnonzero(m)
    if positions.size > source.numel():
        raise OpError(f"{op}: source has {source.numel()} elements, fewer than the "
                      f"{positions.size} True elements of the mask")
    base = x.expand(shape) if x.shape != shape else x
    if base.ndim == 0:
        return _write_flat(base.reshape(1), positions,
                           source.reshape(-1)[:positions.size], False).reshape(())
    return _write_flat(base, positions, source.reshape(-1)[:positions.size], False)


@tensor_method(function=True)
def masked_scatter(input, mask, source):  # noqa: A002
    """masked_scatter(input, mask, source) -> Tensor

    A copy of input (broadcast with the mask) with source's elements, taken in order,
    written where ``mask`` is True."""
    return _masked_scatter(input, mask, source, "masked_scatter", False)


@tensor_method(name="masked_scatter_")
def masked_scatter_(input, mask, source):  # noqa: A002
    """masked_scatter_(mask, source) -> Tensor

    In-place masked_scatter (the mask broadcasts to this tensor's shape)."""
    return _in_place(input, "masked_scatter",
                     lambda x: _masked_scatter(x, mask, source, "masked_scatter_", True),
                     other=source)


# -- scatters into a view -----------------------------------------------------------------
def _scatter_into(op, x, src, view):
    """A copy of x with ``src`` written where ``view`` (a function of an array of x's
    shape to a view of it) reads."""
    _check_tensor(op, "input", x)
    _check_tensor(op, "src", src)
    positions = view(np.arange(x.numel(), dtype=np.int64).reshape(x.shape))
    if tuple(src.shape) != positions.shape:
        raise OpError(f"{op}: expected src to have the shape of the view it fills, "
                      f"{positions.shape}, got {src.shape}")
    if src.device is not x.device:
        raise RuntimeError(f"{op}: src on {src.device.type}, input on {x.device.type}; "
                           f"move it with .to(...)")
    # (src is cast to input's dtype, as PyTorch's copy into the view casts)
    return _write_flat(x, positions, src.to(x.dtype), False)


@tensor_method(function=True)
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    """slice_scatter(input, src, dim=0, start=None, end=None, step=1) -> Tensor

    A copy of input with input[start:end:step] along ``dim`` replaced by src."""
    if input.ndim == 0:
        raise OpError("slice_scatter: the input needs at least one dim, got a 0-d tensor")
    d = layout.normalize_dim(dim, input.ndim, "slice_scatter")
    if step is None:
        step = 1
    if step <= 0:
        raise OpError(f"slice_scatter: slice step must be positive, got {step}")
    key = (slice(None),) * d + (slice(start, end, step),)
    return _scatter_into("slice_scatter", input, src, lambda a: a[key])


@tensor_method(function=True)
def select_scatter(input, src, dim, index):  # noqa: A002
    """select_scatter(input, src, dim, index) -> Tensor

    A copy of input with input.select(dim, index) replaced by src."""
    if input.ndim == 0:
        raise OpError("select_scatter: the input needs at least one dim, got a 0-d tensor")
    d = layout.normalize_dim(dim, input.ndim, "select_scatter")
    n = input.shape[d]
    if not -n <= index < n:
        raise OpIndexError(f"select_scatter: index {index} is out of range for dim {d} "
                           f"of size {n}")
    key = (slice(None),) * d + (index,)
    return _scatter_into("select_scatter", input, src, lambda a: a[key])


@tensor_method(function=True)
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002
    """diagonal_scatter(input, src, offset=0, dim1=0, dim2=1) -> Tensor

    A copy of input with its diagonal (as diagonal(offset, dim1, dim2) reads it)
    replaced by src."""
    if input.ndim < 2:
        raise OpError(f"diagonal_scatter: the input needs at least 2 dims, got shape "
                      f"{input.shape}")
    d1, d2 = (layout.normalize_dim(d, input.ndim, "diagonal_scatter") for d in (dim1, dim2))
    if d1 == d2:
        raise OpError(f"diagonal_scatter: dim1 and dim2 name one dim ({d1}); pass two")
    return _scatter_into("diagonal_scatter", input, src,
                         lambda a: np.diagonal(a, offset, d1, d2))


@tensor_method(function=True)
def as_strided_scatter(input, src, size, stride, storage_offset=None):  # noqa: A002
    """as_strided_scatter(input, src, size, stride, storage_offset=None) -> Tensor

    A copy of input with src written where input.as_strided(size, stride,
    storage_offset) reads, as PyTorch's: the positions are in input's storage (offset
    None: input's own), the copy is of that whole storage and the result reads it with
    input's own layout (its strides too). An input whose elements share memory (an
    expanded one) is made contiguous first."""
    op = "as_strided_scatter"
    _check_tensor(op, "input", input)
    _check_tensor(op, "src", src)
    size, stride = tuple(size), tuple(stride)
    base = input if layout.is_non_overlapping(input.shape, input.strides) else \
        input.contiguous()
    cells = base.storage.size
    offset = base.offset if storage_offset is None else storage_offset
    try:
        layout.check_as_strided(cells, size, stride, offset)
    except OpError as e:
        raise OpError(f"{op}: {str(e).removeprefix('as_strided: ')}") from None
    if tuple(src.shape) != size:
        raise OpError(f"{op}: expected src to have a size equal to the slice of self: src "
                      f"size {tuple(src.shape)}, slice size {size}")
    if not layout.is_non_overlapping(size, stride):
        raise OpError(f"{op}: more than one element of the written-to slice (size {size}, "
                      f"stride {stride}) refers to one memory location; give strides "
                      f"that do not overlap")
    if src.device is not input.device:
        raise RuntimeError(f"{op}: src on {src.device.type}, input on "
                           f"{input.device.type}; move it with .to(...)")
    positions = storage_positions(size, stride, offset)
    # (the whole storage as one vector, written, then read back with input's layout)
    flat = base.as_strided((cells,), (1,), 0)
    written = _write_flat(flat, positions, src.to(input.dtype), False)
    return written.as_strided(base.shape, base.strides, base.offset)


for _name, _arity in (("take", 1), ("put", 2), ("index_put", 2), ("masked_scatter", 2),
                      ("slice_scatter", 2), ("select_scatter", 2), ("diagonal_scatter", 2),
                      ("as_strided_scatter", 2)):
    declare(_name, arity=_arity, dtypes="any")
