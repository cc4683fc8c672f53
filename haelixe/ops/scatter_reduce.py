"""torch.scatter_reduce: ``src`` reduced into a copy of the input at ``index`` along a
dim by 'sum', 'prod', 'mean', 'amax' or 'amin', the input's own value included or not;
the gradients are PyTorch's. index_reduce, its form over whole slices (one index per
slice of the source), is a scatter_reduce with the index spread over the slices, so its
gradients are those too; so is segment_reduce, consecutive runs along a dim each reduced
(one index per run)."""

from __future__ import annotations

import numpy as np

from .. import layout
from ..autograd.function import Function
from ..dtype import bool_, int32, int64
from ..errors import OpError, OpIndexError, OpNotImplementedError, OpTypeError
from ..tensor import Tensor
from .composite import _in_place
from .indexing import (
    ScatterAdd,
    _check_index,
    _check_scatter_shapes,
    _same_dtype,
    _zero_d,
    where,
)
from .registry import declare, function, tensor_method

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _reduced(x, dim, index, src, reduce, include_self):
    """The forward on tensors (no graph): the backward recomputes what it needs."""
    return Tensor._wrap(x._be.scatter_reduce(x._data, dim, index._data, src._data, reduce,
                                             include_self))


class ScatterReduce(Function):
    @staticmethod
    def forward(ctx, x, dim, index, src, reduce, include_self):
        ctx.dim, ctx.reduce, ctx.include_self = dim, reduce, include_self
        ctx.save_for_backward(x, index, src)  # (version-checked)
        return x._be.scatter_reduce(x._data, dim, index._data, src._data, reduce,
                                    include_self)

    @staticmethod
    def backward(ctx, g):
        x, index, src = ctx.saved_tensors
        dim, include_self = ctx.dim, ctx.include_self
        hit = ScatterAdd.apply(src.new_ones(index.shape, dtype=g.dtype), x.shape, dim, index)
        own = (hit == 0) | include_self  # where x's own value takes part
        x, src = x.to(g.dtype), src.to(g.dtype)
        gx, gsrc = _GRADIENTS[ctx.reduce](g, x, dim, index, src, hit, own, include_self)
        return gx * own, None, None, gsrc, None, None


def _sum_grad(g, x, dim, index, src, hit, own, include_self):
    return g, g.gather(dim, index)


def _mean_grad(g, x, dim, index, src, hit, own, include_self):
    per = g / (hit + own)  # (own is 1 where nothing points: a count of at least 1)
    return per, per.gather(dim, index)


def _extreme_grad(reduce):
    def grad(g, x, dim, index, src, hit, own, include_self):
        # the gradient is shared evenly by every value equal to the result; as PyTorch, an
        # input value left out (include_self=False) still counts as a share (then dropped)
        result = _reduced(x, dim, index, src, reduce, include_self)
        x_is = x == result
        src_is = src == result.gather(dim, index)
        ties = x_is.to(g.dtype) + ScatterAdd.apply(src_is.to(g.dtype), x.shape, dim, index)
        share = g / ties
        return share * x_is, share.gather(dim, index) * src_is
    return grad


def _prod_grad(g, x, dim, index, src, hit, own, include_self):
    # d(prod)/d(value) is the product of the others: result / value without a zero; with
    # one zero, the product of the nonzero values for that zero and 0 for the rest
    zeros = ScatterAdd.apply((src == 0).to(g.dtype), x.shape, dim, index) + (x == 0) * own
    result = _reduced(x, dim, index, src, "prod", include_self)
    nonzero = _reduced(where(x == 0, 1.0, x), dim, index, where(src == 0, 1.0, src),
                       "prod", include_self)

    def of(value, zeros, result, nonzero):
        return where(zeros == 0, result / where(value == 0, 1.0, value),
                     where((zeros == 1) & (value == 0), nonzero, 0.0))

    gsrc = g.gather(dim, index) * of(src, zeros.gather(dim, index), result.gather(dim, index),
                                     nonzero.gather(dim, index))
    return g * of(x, zeros, result, nonzero), gsrc


_GRADIENTS = {"sum": _sum_grad, "mean": _mean_grad, "amax": _extreme_grad("amax"),
              "amin": _extreme_grad("amin"), "prod": _prod_grad}


@tensor_method(function=True)
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """``out = input``, then ``out[index[i][j]][j] = reduce(out[...], src[i][j])`` (dim 0)
    over every value that points there: ``reduce`` is 'sum', 'prod', 'mean' (an integer
    mean rounds down), 'amax' or 'amin'; ``include_self=False`` leaves the input's own
    value out where an index points."""
    if reduce not in REDUCTIONS:
        raise OpError(f"scatter_reduce: reduce must be one of {', '.join(REDUCTIONS)}, got "
                      f"{reduce!r}")
    if (one := _zero_d(input, index, src)) is not None:
        return scatter_reduce(one[0], dim, one[1], one[2], reduce,
                              include_self=include_self).reshape(())
    d = layout.normalize_dim(dim, input.ndim, "scatter_reduce")
    _check_index("scatter_reduce", input, d, index)
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_reduce: src must be a tensor, got {type(src).__name__}; "
                        f"for a number use torch.full_like(index, value, dtype=input.dtype)")
    _check_scatter_shapes("scatter_reduce", input, d, index, src)
    _same_dtype("scatter_reduce", input, src)
    if reduce == "mean" and input.dtype is bool_:
        raise TypeError("scatter_reduce: reduce='mean' is not supported on bool tensors (as "
                        "in PyTorch); convert with .int() or .float() first")
    if src.device is not input.device:
        raise RuntimeError(f"scatter_reduce: src on {src.device.type}, input on "
                           f"{input.device.type}; move src with .to(...)")
    src = src[tuple(slice(0, n) for n in index.shape)]
    return ScatterReduce.apply(input, d, index, src, reduce, bool(include_self))


@tensor_method(name="scatter_reduce_")
def scatter_reduce_(x, dim, index, src, reduce, *, include_self=True):
    """In place: :func:`scatter_reduce` written into ``x``."""
    return x.copy_(scatter_reduce(x, dim, index, src, reduce, include_self=include_self))


declare("scatter_reduce", arity=2, dtypes="any")


INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def _index_reduce(input, dim, index, source, reduce, include_self, op):  # noqa: A002
    if reduce not in INDEX_REDUCTIONS:
        raise OpError(f"{op}: reduce must be one of {', '.join(INDEX_REDUCTIONS)}, got "
                      f"{reduce!r}")
    for name, t in (("input", input), ("source", source), ("index", index)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    if index.dtype not in (int64, int32):
        raise OpTypeError(f"{op}: index must be int64 or int32, got {index.dtype.name}; "
                          f"convert with .long()")
    if index.ndim > 1:
        raise OpIndexError(f"{op}: index must be 0-D or 1-D (one entry per slice of "
                           f"source), got shape {index.shape}")
    if input.dtype is bool_:
        raise OpNotImplementedError(f"{op}: not implemented for bool tensors (as in "
                                    f"PyTorch); convert with .int() first")
    _same_dtype(op, input, source)
    # (PyTorch's 0-d forms: a 0-d input is one slice of one element, a 0-d source one)
    x = input.reshape(1) if input.ndim == 0 else input
    src = source.reshape(1) if source.ndim == 0 and input.ndim == 0 else source
    d = layout.normalize_dim(dim, x.ndim, op)
    if src.ndim != x.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, src.shape))
                                 if i != d):
        raise OpError(f"{op}: source of shape {source.shape} must match the input's shape "
                      f"{input.shape} outside dim {dim}")
    if src.shape[d] != index.numel():
        raise OpError(f"{op}: {index.numel()} indices for source's dim {d} of size "
                      f"{src.shape[d]}; give one index per slice of source")
    for t, name in ((source, "source"), (index, "index")):
        if t.device is not input.device:
            raise RuntimeError(f"{op}: {name} on {t.device.type}, input on "
                               f"{input.device.type}; move it with .to(...)")
    _check_index(op, x, d, index)
    # index i names the slice source[..., i, ...] along d: spread over that slice
    shape = [1] * x.ndim
    shape[d] = index.numel()
    spread = index.reshape(shape).to(int64).expand(*src.shape)
    out = scatter_reduce(x, d, spread, src, reduce, include_self=include_self)
    return out.reshape(()) if input.ndim == 0 else out


@tensor_method(function=True)
def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """index_reduce(input, dim, index, source, reduce, *, include_self=True) -> Tensor

    A copy of input with slice i of ``source`` along ``dim`` reduced into the slice at
    position index[i] by ``reduce``: 'prod', 'mean' (an integer mean rounds down),
    'amax' or 'amin'; ``include_self=False`` leaves input's own values out of the
    slices an index names."""
    return _index_reduce(input, dim, index, source, reduce, include_self, "index_reduce")


@tensor_method(name="index_reduce_")
def index_reduce_(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """index_reduce_(dim, index, source, reduce, *, include_self=True) -> Tensor

    In-place index_reduce: writes the result into this tensor's memory."""
    return _in_place(input, "index_reduce",
                     lambda x: _index_reduce(x, dim, index, source, reduce, include_self,
                                             "index_reduce_"),
                     other=source)


declare("index_reduce", arity=2, dtypes="any")


# -- segment_reduce: consecutive runs along a dim, each reduced ---------------------------------
#: segment_reduce's names -> scatter_reduce's
_SEGMENT_REDUCTIONS = {"sum": "sum", "prod": "prod", "mean": "mean", "max": "amax",
                       "amax": "amax", "min": "amin", "amin": "amin"}
#: what an empty segment holds without ``initial`` (mean's: NaN, 0 / 0)
_EMPTY = {"sum": 0.0, "prod": 1.0, "amax": float("-inf"), "amin": float("inf")}


def _segment_bounds(op, data, axis, lengths, offsets, unsafe):
    """The segments' (start, end) positions along ``axis`` as host int64 arrays of shape
    data.shape[:axis] + (segments,)."""
    given = lengths if lengths is not None else offsets
    name = "lengths" if lengths is not None else "offsets"
    if not isinstance(given, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(given).__name__}")
    if given.dtype not in (int32, int64):
        raise OpNotImplementedError(f"{op}: {name} must be int32 or int64, got "
                                    f"{given.dtype.name}")
    if given.ndim == 0 or given.ndim > data.ndim:
        raise OpError(f"{op}: {name} of shape {given.shape} for data of shape "
                      f"{data.shape}: it needs 1 to data.dim() dims")
    if axis != given.ndim - 1:
        raise OpError(f"{op}: Expected axis to be the last dimension of {name} but got "
                      f"{axis} ({name} has {given.ndim} dims)")
    if tuple(given.shape[:-1]) != tuple(data.shape[:axis]):
        raise OpError(f"{op}: {name} of shape {given.shape} must have data's leading dims "
                      f"{data.shape[:axis]} before its last")
    values = given.detach().cpu().numpy().astype(np.int64)
    n = data.shape[axis]
    if lengths is not None:
        if (values < 0).any():
            raise OpError(f"{op}: lengths contains negative value!")
        if not unsafe and (values.sum(-1) != n).any():
            raise OpError(f"{op}: Expected all rows of lengths along axis to sum to "
                          f"data.size({axis}) = {n} when !unsafe, got sums "
                          f"{values.sum(-1).tolist()}")
        ends = np.cumsum(values, -1)
        return ends - values, ends
    if values.shape[-1] == 0:
        raise OpError(f"{op}: offsets needs at least one entry (segments + 1)")
    if (np.diff(values, axis=-1) < 0).any():
        raise OpError(f"{op}: Expected segment_length >= 0: offsets must not decrease")
    if (values < 0).any() or (values > n).any():
        raise OpError(f"{op}: offsets must lie in [0, data.size({axis}) = {n}], got "
                      f"{values.min()} to {values.max()}")
    return values[..., :-1], values[..., 1:]


@function
def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
                   unsafe=False, initial=None):
    """segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0,
    unsafe=False, initial=None) -> Tensor

    data cut along ``axis`` into consecutive segments, each reduced by ``reduce``
    ('sum', 'prod', 'mean', 'max' or 'amax', 'min' or 'amin'): the segments given by
    their ``lengths`` (which add up to the dim unless ``unsafe``) or by ``offsets``
    (segments + 1 bounds). ``initial`` joins every segment's reduction; an empty segment
    without it is 0, 1, -inf, inf or NaN (mean). ``axis`` is the last dim of lengths;
    lengths' other dims are data's leading ones. Gradients are scatter_reduce's (max and
    min share among ties)."""
    op = "segment_reduce"
    if not isinstance(data, Tensor):
        raise TypeError(f"{op}: data must be a Tensor, got {type(data).__name__}")
    if not data.dtype.is_floating_point:
        raise OpNotImplementedError(f"{op}: not implemented for {data.dtype.name} data (as "
                                    f"in PyTorch); convert with .float()")
    if reduce not in _SEGMENT_REDUCTIONS:
        raise OpError(f"{op}: reduce argument must be either sum, prod, mean, amax or amin, "
                      f"got {reduce}")
    if indices is not None:
        raise OpError(f"{op}: indices based reduction is not supported yet (as in "
                      f"PyTorch); pass lengths or offsets")
    if lengths is None and offsets is None:
        raise OpError(f"{op}: Either lengths or offsets must be defined.")
    kind = _SEGMENT_REDUCTIONS[reduce]
    axis = layout.normalize_dim(axis, data.ndim, op)
    starts, ends = _segment_bounds(op, data, axis, lengths, offsets, unsafe)
    lead, n, rest = data.shape[:axis], data.shape[axis], data.shape[axis + 1:]
    segments = starts.shape[-1]
    # (each position's segment; positions in none go to one more, dropped at the end)
    where_at = np.arange(n)
    ids = np.full(lead + (n,), segments, np.int64)
    counts = (ends - starts).astype(np.float64)
    for s in range(segments):
        inside = (where_at >= starts[..., s, None]) & (where_at < ends[..., s, None])
        ids[inside] = s
    index = Tensor._wrap(data._be.from_numpy(np.ascontiguousarray(np.broadcast_to(
        ids.reshape(ids.shape + (1,) * len(rest)), data.shape))))
    total = "sum" if kind == "mean" else kind
    base = data.new_full(lead + (segments + 1,) + rest, _EMPTY[total])
    out = scatter_reduce(base, axis, index, data, total, include_self=False)
    out = out.narrow(axis, 0, segments)
    if kind == "mean":
        shaped = counts.reshape(counts.shape + (1,) * len(rest))
        if initial is not None:
            out = out + initial
        empty = Tensor._wrap(data._be.from_numpy(np.ascontiguousarray(
            np.broadcast_to(shaped == 0, out.shape))))
        size = Tensor._wrap(data._be.from_numpy(np.ascontiguousarray(
            np.broadcast_to(np.maximum(shaped, 1), out.shape).astype(data.dtype.np))))
        return where(empty, float("nan") if initial is None else initial, out / size)
    if initial is None:
        return out
    if kind == "sum":
        return out + initial
    if kind == "prod":
        return out * initial
    # (initial joins the max only where it wins: the gradient stays with data's ties)
    keep = out >= initial if kind == "amax" else out <= initial
    return where(keep, out, initial)


declare("segment_reduce", dtypes="float")
