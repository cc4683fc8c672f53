"""torch.scatter_reduce: ``src`` reduced into a copy of the input at ``index`` along a
dim by 'sum', 'prod', 'mean', 'amax' or 'amin', the input's own value included or not;
the gradients are PyTorch's."""

from __future__ import annotations

from .. import layout
from ..autograd.function import Function
from ..dtype import bool_
from ..errors import OpError
from ..tensor import Tensor
from .indexing import (
    ScatterAdd,
    _check_index,
    _check_scatter_shapes,
    _same_dtype,
    _zero_d,
    where,
)
from .registry import declare, tensor_method

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
