"""Indexing: gather / scatter_add (torch semantics) and take / index_add (numpy advanced
indexing and its adjoint).

Both pairs reduce to one kernel each (index.wgsl): ``gather`` reads ``x[base(i) + idx(i) * s]``
and ``scatter_add`` atomically adds into ``out[base(i) + idx(i) * s]``. For ``take`` the
index arrays are first folded into one int32 array of element offsets (one elementwise
dispatch per index array), so any number of index arrays costs one gather.
"""

from __future__ import annotations

import math

import numpy as np

from . import dtypes as gd
from .array import GpuArray, contiguous_strides
from .elementwise import run_map
from .geometry import STEPS_PER_INVOCATION, broadcast_shapes, broadcast_strides, grid, meta_block
from .shaders import kernel


# -- index arrays ------------------------------------------------------------------------
def as_index(be, idx):
    """An int32 GpuArray from a GpuArray or anything numpy turns into integers (int64
    index arrays are narrowed here, with a range check)."""
    if isinstance(idx, GpuArray):
        if idx.dtype not in (gd.I32, gd.I64):
            raise TypeError(f"indexing: GPU index arrays must be int32 or int64, got "
                            f"{idx.dtype}")
        # int64 stored as int32 words reads as it is; 64-bit words are narrowed
        return idx if gd.kind(idx.dtype) == "i32" else be.cast(idx, gd.I32)
    a = np.asarray(idx)
    if a.dtype.kind not in "iu":
        raise IndexError(f"indexing: index arrays must be integers, got {a.dtype}")
    if a.size and (a.max() > np.iinfo(np.int32).max or a.min() < np.iinfo(np.int32).min):
        raise IndexError("indexing: an index does not fit in int32")
    return be.from_numpy(a.astype(np.int32, copy=False))


def _run_index_kernel(be, file, entry, out_bind, out, data_bind, data, idx, shape,
                      out_strides, data_strides, dim_len, stride, extra=()):
    """One index kernel; ``extra``: (binding, array) pairs bound after idx."""
    n = math.prod(shape)
    if n == 0:
        return
    ops = [(out_strides, out.offset), (data_strides, data.offset),
           (broadcast_strides(idx, shape), idx.offset)]
    meta = meta_block([n, dim_len, stride], shape, ops, what=entry)
    spec = kernel(file, entry, [out_bind, data_bind, ("idx", "i32", "read"),
                                *(b for b, _ in extra)])
    be.dispatcher.dispatch(spec, [out.buffer, data.buffer, idx.buffer,
                                  *(a.buffer for _, a in extra)], meta, grid(-(-n // 256)))


def _gather(be, out, x, x_strides, idx, dim_len, stride):
    _run_index_kernel(be, "index.wgsl", "gather", ("out", gd.kind(out.dtype), "write"), out,
                      ("x", gd.kind(x.dtype), "read"), x, idx, out.shape, out.strides,
                      x_strides, dim_len, stride)


def _scatter_add(be, out, out_strides, src, idx, shape, dim_len, stride):
    """out[...] += src at the indexed places; ``out`` is float32 or int32."""
    _run_index_kernel(be, "index.wgsl", "scatter_add",
                      ("out", gd.kind(out.dtype), "atomic_add"), out,
                      ("src", gd.kind(src.dtype), "read"), src, idx, shape, out_strides,
                      broadcast_strides(src, shape), dim_len, stride)


def _accumulator_dtype(dt):
    k = gd.kind(dt)
    if k == "bool":
        raise TypeError("scatter_add / index_add: bool values cannot be accumulated")
    return gd.F32 if k == "bf16" else dt


def _finish(be, acc, dt):
    return acc if acc.dtype == dt else be.cast(acc, dt)


def check_range(be, index, lo, hi, ignore, error, message):
    """Every value of ``index`` (int32 or int64) in [lo, hi) or equal to ``ignore``,
    checked by a kernel: a failure is recorded on the device and raised by the next
    read-back (Dispatcher.error_words), so the check needs no read-back of its own and a
    captured step replays it."""
    if index.dtype not in (gd.I32, gd.I64):
        raise TypeError(f"check_range: index arrays must be int32 or int64, got "
                        f"{index.dtype}")
    n = index.size
    if n == 0:
        return
    d = be.dispatcher
    scalars = [n, lo, hi, 0 if ignore is None else ignore, ignore is not None,
               d.error_site(error, message)]
    meta = meta_block(scalars, index.shape, [(index.strides, index.offset)],
                      what="check_range")
    spec = kernel("index.wgsl", "check_range",
                  [("idx", gd.kind(index.dtype), "read"), ("errors", "i32", "atomic_add")])
    d.dispatch(spec, [index.buffer, d.error_words()], meta, grid(-(-n // 256)))


# -- torch.gather / scatter_add ----------------------------------------------------------
def gather(be, x, axis, index):
    """``out[..., i, ...] = x[..., index[..., i, ...], ...]`` along ``axis``; as the CPU,
    only index.shape of x is read along the other dims (torch.gather), which then
    broadcast (numpy's take_along_axis)."""
    index = as_index(be, index)
    x = x.view(tuple(n if d == axis else min(n, m) for d, (n, m) in
                     enumerate(zip(x.shape, index.shape))), x.strides, x.offset)
    x_shape = list(x.shape)
    x_shape[axis] = 1
    shape = broadcast_shapes(tuple(x_shape), index.shape)
    shape = shape[:axis] + (index.shape[axis],) + shape[axis + 1:]
    x_strides = list(x.strides)
    x_strides[axis] = 0
    xv = x.view(tuple(x_shape), tuple(x_strides), x.offset)
    out = be.empty(shape, x.dtype)
    _gather(be, out, x, broadcast_strides(xv, shape), broadcast_to_index(index, shape),
            x.shape[axis], x.strides[axis])
    return out


def broadcast_to_index(index, shape):
    return index.view(shape, broadcast_strides(index, shape), index.offset)


def scatter_add(be, shape, axis, index, src):
    """Zeros of ``shape`` plus ``src`` added at ``index`` along ``axis`` (gather's
    adjoint); ``src`` broadcasts to ``index.shape``."""
    index = as_index(be, index)
    acc = be.full(shape, 0, _accumulator_dtype(src.dtype))
    out_strides = list(acc.strides)
    out_strides[axis] = 0
    _scatter_add(be, acc, tuple(out_strides), src, index, index.shape, shape[axis],
                 acc.strides[axis])
    return _finish(be, acc, src.dtype)


#: scatter_reduce's combinations that run on the device, by the binding that does them
_COMBINE_ACCESS = {"prod": "atomic_mul", "amax": "atomic_max", "amin": "atomic_min"}


def combines_on_device(reduce, dtype) -> bool:
    """Whether :func:`scatter_combine_` takes ``reduce`` into ``dtype``: float32 and
    int32, and bfloat16's max and min (exact through a float32 copy; a bfloat16 product
    rounds at each step on the host, which a float32 product would not equal)."""
    k = gd.kind(dtype)
    return k in ("f32", "i32") or (k == "bf16" and reduce != "prod")


def scatter_combine_(be, out, axis, index, src, reduce):
    """In place: ``src`` combined into ``out`` (fresh, C-contiguous) at ``index`` along
    ``axis`` by a product, max or min, atomically, in an order the GPU picks."""
    index = as_index(be, index)
    acc = out if out.dtype == _accumulator_dtype(out.dtype) else be.cast(out, gd.F32)
    data = src if src.dtype == acc.dtype else be.cast(src, acc.dtype)
    out_strides = list(acc.strides)
    out_strides[axis] = 0
    _run_index_kernel(be, "index.wgsl", "scatter_combine",
                      ("out", gd.kind(acc.dtype), _COMBINE_ACCESS[reduce]), acc,
                      ("src", gd.kind(data.dtype), "read"), data, index, index.shape,
                      tuple(out_strides), broadcast_strides(data, index.shape),
                      out.shape[axis], acc.strides[axis])
    if acc is not out:
        be.copy_into(out, acc)


def scatter(be, x, axis, index, src):
    """A copy of ``x`` with ``src`` (broadcast to index.shape) written at ``index`` along
    ``axis``; where an index repeats, the last in C order writes, as on the CPU (numpy's
    put_along_axis): a pass claiming each place for its largest invocation, then one
    writing the winners."""
    index = as_index(be, index)
    if np.ndim(src) == 0 and not hasattr(src, "offset"):  # a host scalar
        src = be.full(index.shape, src, x.dtype)
    out = be.copy(x)
    winner = be.full(x.shape, -1, gd.I32)
    strides = list(out.strides)
    strides[axis] = 0
    src_strides = broadcast_strides(src, index.shape)
    args = (src, index, index.shape, tuple(strides), src_strides, x.shape[axis],
            out.strides[axis])
    _run_index_kernel(be, "index.wgsl", "scatter_claim", ("out", "i32", "atomic_max"), winner,
                      ("src", gd.kind(src.dtype), "read"), *args)
    _run_index_kernel(be, "index.wgsl", "scatter_last", ("out", gd.kind(out.dtype), "write"),
                      out, ("src", gd.kind(src.dtype), "read"), *args,
                      extra=((("winner", "i32", "read"), winner),))
    return out


# -- numpy advanced indexing -------------------------------------------------------------
class _Resolved:
    """A key applied to a layout: the result shape, the strides/offset of the source over
    it (0 along the broadcast index dims) and the int32 offsets array (or None)."""

    def __init__(self, shape, strides, offset, offsets):
        self.shape, self.strides, self.offset, self.offsets = shape, strides, offset, offsets


class _ScalarMask:
    """A 0-d bool mask: an advanced index of one position (True) or none (False) that
    consumes no dim, as numpy and PyTorch read it."""

    def __init__(self, flag):
        self.index = np.zeros(1 if flag else 0, np.int32)


def _consumes_a_dim(k) -> bool:
    return k is not None and k is not Ellipsis and not isinstance(k, _ScalarMask)


def _expand_key(be, key, ndim):
    key = key if isinstance(key, tuple) else (key,)
    out = []
    for k in key:
        if isinstance(k, GpuArray) and k.dtype == gd.BOOL:
            k = be.to_numpy(k)
        if isinstance(k, (np.ndarray, list)) and np.asarray(k).dtype == np.bool_:
            mask = np.asarray(k)
            if mask.ndim == 0:
                out.append(_ScalarMask(bool(mask)))
            else:
                out.extend(np.nonzero(mask))  # a mask is one index array per dim
            continue
        out.append(k)
    consumed = sum(1 for k in out if _consumes_a_dim(k))
    if consumed > ndim:
        raise IndexError(f"too many indices: {consumed} for {ndim} dims")
    if any(k is Ellipsis for k in out):
        i = next(i for i, k in enumerate(out) if k is Ellipsis)
        out[i:i + 1] = [slice(None)] * (ndim - consumed)
    return out + [slice(None)] * (ndim - sum(1 for k in out if _consumes_a_dim(k)))


def resolve_key(be, shape, strides, offset, key) -> _Resolved:
    """Apply ``key`` (slices, None, Ellipsis, ints, index arrays, masks) to a layout."""
    entries = _expand_key(be, key, len(shape))
    basic = []  # (size, stride) of the dims slices and None keep
    advanced = []  # (entry position, index array, dim length, stride)
    first_adv_dim = None
    positions = []
    d = 0
    has_arrays = any(not isinstance(k, (slice, int, np.integer)) and k is not None
                     for k in entries)
    for pos, k in enumerate(entries):
        if k is None:
            basic.append((1, 0))
            continue
        if isinstance(k, _ScalarMask):  # one index 0 (or none) over a size-1 stride-0 dim
            advanced.append((as_index(be, k.index), 1, 0))
            positions.append(pos)
            first_adv_dim = len(basic) if first_adv_dim is None else first_adv_dim
            continue
        n, s = shape[d], strides[d]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            basic.append((len(range(start, stop, step)), s * step))
            offset += start * s
        elif isinstance(k, (int, np.integer)):
            i = int(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for a dim of size {n}")
            offset += (i % n) * s
            if has_arrays:
                positions.append(pos)
                first_adv_dim = len(basic) if first_adv_dim is None else first_adv_dim
        else:
            advanced.append((as_index(be, k), n, s))
            positions.append(pos)
            first_adv_dim = len(basic) if first_adv_dim is None else first_adv_dim
        d += 1
    if not advanced:
        return _Resolved(tuple(b[0] for b in basic), tuple(b[1] for b in basic), offset,
                         None)
    bshape = broadcast_shapes(*(a.shape for a, _, _ in advanced))
    offsets = None
    for idx, n, s in advanced:  # fold every index array into one offsets array
        new = be.empty(bshape, gd.I32)
        wrapped = "select(x{k}, x{k} + scalar_i(2), x{k} < 0) * scalar_i(1)"
        if offsets is None:
            run_map(be, new, [idx], wrapped.format(k=0), [s, n])
        else:
            run_map(be, new, [offsets, idx], "x0 + " + wrapped.format(k=1), [s, n])
        offsets = new
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    at = first_adv_dim if adjacent else 0
    nb = len(bshape)
    rshape = [b[0] for b in basic]
    rstrides = [b[1] for b in basic]
    rshape[at:at] = bshape
    rstrides[at:at] = [0] * nb
    ostrides = [0] * len(rshape)
    ostrides[at:at + nb] = contiguous_strides(bshape)
    offsets = offsets.view(tuple(rshape), tuple(ostrides), offsets.offset)
    return _Resolved(tuple(rshape), tuple(rstrides), offset, offsets)


def take(be, x, key):
    """``x[key]`` with numpy's rules, as a new contiguous array."""
    r = resolve_key(be, x.shape, x.strides, x.offset, key)
    view = x.view(r.shape, r.strides, r.offset)
    if r.offsets is None:
        return be.copy(view)
    out = be.empty(r.shape, x.dtype)
    _gather(be, out, view, view.strides, r.offsets, 0, 1)
    return out


#: the most inner iterations (rows x width x positions) index_add_rows may take; above
#: it, scatter_add's atomics (an order the GPU picks) serve a large table
ROWS_MAX_WORK = 1 << 31


def _index_add_rows(be, shape, key, values):
    """index_add for one index array picking rows (an embedding's gradient), summed in
    the positions' order by index_add_rows: the same sums on every run, and the CPU's.
    None where the key is another kind or the table too large for the scan."""
    if len(key) != 1 or len(shape) < 1 or not shape[0] \
            or gd.kind(values.dtype) not in ("f32", "bf16", "f16"):  # (the sum is f32)
        return None
    idx = key[0]
    host = isinstance(idx, np.ndarray) and idx.dtype.kind in "iu"
    if not (host or isinstance(idx, GpuArray) and idx.dtype in (gd.I32, gd.I64)) \
            or values.shape != idx.shape + tuple(shape[1:]):
        return None
    rows, width, n = shape[0], math.prod(shape[1:]), idx.size
    if rows * width * n > ROWS_MAX_WORK or not width or not n or n > STEPS_PER_INVOCATION:
        return None  # (each invocation loops over the n positions)
    if host:
        idx = as_index(be, idx)  # (host indices: uploaded, as gather's are)
    acc = be.empty((rows, width), _accumulator_dtype(values.dtype))
    idx = idx if idx.is_contiguous() else be.copy(idx)
    src = values if values.is_contiguous() else be.copy(values)
    spec = kernel("index.wgsl", "index_add_rows",
                  [("out", gd.kind(acc.dtype), "write"), ("src", gd.kind(src.dtype), "read"),
                   ("idx", gd.kind(idx.dtype), "read")])
    meta = [rows * width, width, n, rows, src.offset, idx.offset]
    be.dispatcher.dispatch(spec, [acc.buffer, src.buffer, idx.buffer], meta,
                           grid(-(-rows * width // 256)))
    return _finish(be, be.reshape(acc, tuple(shape)), values.dtype)


def index_add(be, shape, key, values):
    """Zeros of ``shape`` with ``values`` added at ``[key]``; repeated indices add up."""
    key = key if isinstance(key, tuple) else (key,)
    rows = _index_add_rows(be, shape, key, values)
    if rows is not None:
        return rows
    acc = be.full(shape, 0, _accumulator_dtype(values.dtype))
    r = resolve_key(be, acc.shape, acc.strides, acc.offset, key)
    target = acc.view(r.shape, r.strides, r.offset)
    if r.offsets is None:  # basic indexing only: no repeats, a strided add is enough
        be.copy_into(target, be.add(target, _as(be, values, acc.dtype)))
    else:
        _scatter_add(be, target, r.strides, values, r.offsets, r.shape, 0, 1)
    return _finish(be, acc, values.dtype)


def _as(be, x, dt):
    return x if x.dtype == dt else be.cast(x, dt)
