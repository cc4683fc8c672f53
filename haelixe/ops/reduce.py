"""Reductions and the softmax family.

Reductions follow PyTorch: integers and bools sum in int64; ``dim=None`` and ``dim=()``
reduce every dim; a 0-d tensor accepts dim 0 and -1 (reducing nothing); ``max(dim)``
gives (values, indices).
"""

from __future__ import annotations

import inspect
import math
from collections import namedtuple

from .. import layout
from ..amp import cast_inputs
from ..autograd.function import SINK, Function
from ..autograd.mode import STATE
from ..backends.base import Kernel
from ..dtype import bool_, float32, int64, promote_types, uint8
from ..errors import OpError
from ..tensor import Tensor
from .registry import Layer, declare, function, fused, tensor_method

MaxMin = namedtuple("MaxMin", ["values", "indices"])


def _dims(x, dim, op):
    """The dims a reduction covers, normalised; () for a 0-d tensor."""
    ndim = len(x.shape)  # (every reduction asks: the property read once)
    if ndim == 0:
        for d in (dim if isinstance(dim, (tuple, list)) else () if dim is None else (dim,)):
            layout.normalize_dim(d, 0, op)  # only 0 and -1 are valid
        return ()
    if dim is None:
        return _ALL_DIMS[ndim] if ndim < len(_ALL_DIMS) else tuple(range(ndim))
    if isinstance(dim, (tuple, list)) and len(dim) == 0:
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    return layout.normalize_dims(dim, ndim, op)


_ALL_DIMS = tuple(tuple(range(n)) for n in range(8))  # (a full reduction's dims, made once)


class Unreduce(Function):
    """The adjoint of a sum over ``dims``: ``g`` seen over ``shape`` with stride 0 along
    the reduced dims (whether or not they were kept), a view with no copy. Sum's backward
    at every order; its own backward sums again."""

    label = "Expand"
    small_state = True

    @staticmethod
    def forward(ctx, g, shape, dims):
        if ctx is not SINK:  # (a first-order backward records nothing: skip the writes)
            ctx.dims, ctx.kept = dims, g.ndim == len(shape)
        # (unreduced_strides' first case, a full sum's 0-d gradient, loss.sum()'s, with
        # every stride 0, and the offset read here: no call for either on every step)
        strides = (0,) * len(shape) if not g.shape else \
            layout.unreduced_strides(g.shape, g.strides, shape, dims)
        lay = g._layout
        return g._view(shape, strides, 0 if lay is None else lay[1])

    @staticmethod
    def backward(ctx, gg):
        return Sum.apply(gg, ctx.dims, ctx.kept), None, None


class Sum(Function):
    small_state = True

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.in_shape, ctx.dims = x.shape, dims
        if not dims:  # nothing to reduce (a 0-d tensor): a copy, as PyTorch gives
            return x._be.copy(x._data)
        return x._be.sum(x._data, dims, keepdim)

    @staticmethod
    def backward(ctx, g):
        if STATE.grad_enabled:  # create_graph: the view recorded, its backward a sum
            return Unreduce.apply(g, ctx.in_shape, ctx.dims), None, None
        # first order: Unreduce's view with no node (what apply runs when it records
        # nothing, its checks hoisted)
        return Unreduce.forward(SINK, g, ctx.in_shape, ctx.dims), None, None


def sum(input, dim=None, keepdim=False, dtype=None, *, axis=None):  # noqa: A001 (PyTorch's name)
    if axis is not None:  # (numpy's name, which PyTorch takes too)
        dim = axis
    state = STATE
    if dim is None and dtype is None and state.autocast is None and \
            input.dtype.is_floating_point and len(input.shape) < 8:
        return Sum.apply(input, _ALL_DIMS[len(input.shape)], keepdim)  # input.sum(): the usual
    if dtype is not None:
        input = input.to(dtype)  # (an int dtype adds up in it, wrapping: PyTorch's too)
    elif not input.dtype.is_floating_point and input.dtype is not int64:
        input = input.to(int64)  # ints and bools add up in int64, as PyTorch
    if STATE.autocast is not None:
        (input,) = cast_inputs("reduction", input)
    return Sum.apply(input, _dims(input, dim, "sum"), keepdim)


def _count(x, dims) -> int:
    return math.prod(x.shape[d] for d in dims)


def mean(input, dim=None, keepdim=False, dtype=None, *, axis=None):
    dim = dim if axis is None else axis
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise TypeError(f"mean: input dtype {input.dtype.name} is not floating point; "
                        f"use .float() first")
    if STATE.autocast is not None:
        (input,) = cast_inputs("reduction", input)
    dims = _dims(input, dim, "mean")
    n = _count(input, dims)
    return Sum.apply(input, dims, keepdim) * (1.0 / n if n else math.nan)


def var(x, dim=None, keepdim=False, correction=1, unbiased=None, *, axis=None):
    dim = dim if axis is None else axis
    if unbiased is not None:
        correction = 1 if unbiased else 0
    if not x.dtype.is_floating_point:
        raise TypeError(f"var: input dtype {x.dtype.name} is not floating point; "
                        f"use .float() first")
    dims = _dims(x, dim, "var")
    n = _count(x, dims)
    dof = n - correction
    if dof <= 0:
        return _VarNoDof.apply(x, dims, keepdim, dof, dim is None or not x.shape)
    centered = x - mean(x, dims, keepdim=True)
    return sum(centered * centered, dims, keepdim) * (1.0 / dof)


class _VarNoDof(Function):
    """var with no degrees of freedom left (N - correction <= 0), as PyTorch gives it:
    inf (nan where every value equals the mean); its gradient is PyTorch's formula
    (composing the ops would give nan everywhere, as inf - inf).

    Over every element (no dim): inf times the incoming gradient, nan where x equals the
    mean. Over given dims: 2 / (N - correction) * g * (x - mean), that factor unclamped
    (so finite for a negative count, inf for zero).
    """

    label = "Var"

    @staticmethod
    def forward(ctx, x, dims, keepdim, dof, whole):
        ctx.save_for_backward(x)
        ctx.dims, ctx.keepdim, ctx.dof, ctx.whole = dims, keepdim, dof, whole
        d = x.detach()
        centered = d - mean(d, dims, keepdim=True)
        return (sum(centered * centered, dims, keepdim) / 0.0)._data

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        dims = ctx.dims
        m = mean(x, dims, keepdim=True)
        if not ctx.keepdim and dims:
            g = g.reshape(layout.keep_shape(x.shape, dims))
        if ctx.whole:
            factor = ((x - m) * 0.0 + math.inf).masked_fill(x == m, math.nan)
            return g * factor, None, None, None, None
        scale = 2.0 / ctx.dof if ctx.dof else math.inf
        return g * (x - m) * scale, None, None, None, None


def std(x, dim=None, keepdim=False, correction=1, unbiased=None, *, axis=None):
    dim = dim if axis is None else axis
    if not x.dtype.is_floating_point:  # (named here: var's own check would say "var")
        raise TypeError(f"std: input dtype {x.dtype.name} is not floating point; "
                        f"use .float() first")
    return var(x, dim, keepdim, correction, unbiased).sqrt()


def _moments(input, dim=None, *, correction=1, keepdim=False):  # noqa: A002
    """The signature PyTorch publishes for std_mean and var_mean (its first form)."""


def moment_arguments(op, args, kwargs):
    """(dim, correction, keepdim) from what follows the input of std_mean or var_mean, in
    each of PyTorch's forms: (dim=None, *, correction=1, keepdim=False), (dim, unbiased,
    keepdim=False) and (unbiased)."""
    given = dict(kwargs)
    unknown = sorted(set(given) - {"dim", "correction", "keepdim", "unbiased"})
    if unknown:
        raise TypeError(f"{op}() got an unexpected keyword argument {unknown[0]!r}")
    if args and isinstance(args[0], bool):  # (op(input, unbiased))
        names = ("unbiased",)
    else:
        names = ("dim", "unbiased", "keepdim")
    if len(args) > len(names):
        raise TypeError(f"{op}() takes at most {len(names) + 1} positional arguments "
                        f"({len(args) + 1} given); see {op}{moment_arguments.signature}")
    for name, value in zip(names, args):
        if name in given:
            raise TypeError(f"{op}() got multiple values for argument {name!r}")
        given[name] = value
    unbiased = given.get("unbiased")
    if unbiased is not None:
        if "correction" in given:
            raise TypeError(f"{op}: pass unbiased or correction, not both")
        if not isinstance(unbiased, bool):
            raise TypeError(f"{op}: unbiased must be a bool, got {unbiased!r}")
        correction = int(unbiased)
    else:
        correction = given.get("correction")
    return given.get("dim"), 1 if correction is None else correction, \
        bool(given.get("keepdim", False))


moment_arguments.signature = inspect.signature(_moments)


def std_mean(input, *args, **kwargs):  # noqa: A002
    """std_mean(input, dim=None, *, correction=1, keepdim=False) -> (Tensor, Tensor)

    The standard deviation and the mean over ``dim`` (every dim when None), as the pair
    PyTorch returns; composed from std and mean, so both have their gradients. PyTorch's
    other forms bind too: ``std_mean(input, dim, unbiased, keepdim=False)`` and
    ``std_mean(input, unbiased)``."""
    dim, correction, keepdim = moment_arguments("std_mean", args, kwargs)
    return std(input, dim, keepdim, correction), mean(input, dim, keepdim)


std_mean.__signature__ = moment_arguments.signature


class AMaxMin(Function):
    """max / min over dims (kept as size 1); tied maxima share the gradient evenly."""

    small_state = True

    @staticmethod
    def forward(ctx, x, dims, kind):
        ctx.save_for_backward(x)
        ctx.dims, ctx.kind = dims, kind
        if not dims:
            return x._be.copy(x._data)
        return getattr(x._be, kind)(x._data, dims, True)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if not ctx.dims:
            return g, None, None
        xd = x.detach()
        m = Tensor._wrap(getattr(xd._be, ctx.kind)(xd._data, ctx.dims, True))
        hit = (xd == m).to(g.dtype)
        return g * hit / hit.sum(ctx.dims, keepdim=True), None, None


def _check_nonempty(op, x, dims):
    if any(x.shape[d] == 0 for d in dims) or (not dims and x.numel() == 0):
        raise IndexError(f"{op}: cannot reduce over a dim of size 0 (input shape {x.shape}); "
                         f"this reduction has no identity")


def amax_amin(kind, x, dim=None, keepdim=False):
    op = "amax" if kind == "max" else "amin"
    dims = _dims(x, dim, op)
    _check_nonempty(op, x, dims)
    out = AMaxMin.apply(x, dims, kind)
    if not keepdim and dims:
        out = out.reshape(tuple(n for i, n in enumerate(x.shape) if i not in dims))
    return out


def max_min(kind, x, dim=None, keepdim=False):
    """torch.max: without dim the max of all elements; with dim a (values, indices)
    pair, the gradient going to the position of the index. With a tensor as the second
    argument, the elementwise maximum."""
    if isinstance(dim, Tensor):
        return x.maximum(dim) if kind == "max" else x.minimum(dim)
    if dim is None:
        return amax_amin(kind, x, None, keepdim)
    if isinstance(dim, tuple):
        raise TypeError(f"{kind}(dim) takes one int dim; use amax for several")
    if x.ndim == 0:
        layout.normalize_dim(dim, 0, kind)
        return MaxMin(x.clone(), Tensor._wrap(x._be.full((), 0, int64.np)))
    d = layout.normalize_dim(dim, x.ndim, kind)
    _check_nonempty(kind, x, (d,))
    key = x.int() if x.dtype is bool_ else x  # (argmax refuses bools; max does not)
    indices = (argmax if kind == "max" else argmin)(key, d, keepdim=True)
    values = x.gather(d, indices)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return MaxMin(values, indices)


def _arg(kind, x, dim, keepdim):
    op = "argmax" if kind == "max" else "argmin"
    if x.dtype is bool_:
        raise TypeError(f"{op}: does not support bool input (as in PyTorch); use .int() "
                        f"or .nonzero-style masks")
    kernel = getattr(x._be, op)
    if dim is None:
        _check_nonempty(op, x, ())
        raw = kernel(x.detach().reshape(-1)._data, 0, False)
        out = Tensor._wrap(raw).to(int64)
        return out.reshape((1,) * x.ndim) if keepdim else out
    if x.ndim == 0:
        layout.normalize_dim(dim, 0, op)
        return Tensor._wrap(x._be.full((), 0, int64.np))
    d = layout.normalize_dim(dim, x.ndim, op)
    _check_nonempty(op, x, (d,))
    return Tensor._wrap(kernel(x.detach()._data, d, keepdim)).to(int64)


def argmax(input, dim=None, keepdim=False):
    return _arg("max", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    return _arg("min", input, dim, keepdim)


class Softmax(Function):
    """softmax, or log_softmax where ``log``. The backward reads the output (the
    probabilities, or their logs), as PyTorch's does, so the in-place rules are PyTorch's:
    changing the output before backward is refused, changing the input is not."""

    small_state = True
    saves_output = True
    log = False  # (a class each: a node then sets its dim alone)

    @classmethod
    def forward(cls, ctx, x, dim):  # (a classmethod: the ctx may be the sink)
        ctx.dim = dim
        return (x._be.log_softmax if cls.log else x._be.softmax)(x._data, dim)

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        if not STATE.grad_enabled:  # first order: the backend's one kernel
            return Tensor._wrap(y._be.softmax_backward(y._data, g._data, ctx.dim,
                                                       ctx.log)), None
        # create_graph: the output with its history (this node), so the gradient has a
        # graph of its own
        y = y._alias()
        y.grad_fn, y._requires_grad = ctx, True
        if ctx.log:
            return g - y.exp() * g.sum(ctx.dim, keepdim=True), None
        return y * (g - (g * y).sum(ctx.dim, keepdim=True)), None


class LogSoftmax(Softmax):
    log = True


def _softmax_input(x, op, dtype):
    if dtype is not None:
        x = x.to(dtype)
    if STATE.autocast is not None:
        (x,) = cast_inputs("softmax", x)
    if not x.dtype.is_floating_point and x.numel():  # (an empty one passes, as PyTorch)
        raise TypeError(f"{op}: input dtype {x.dtype.name} is not floating point; pass "
                        f"dtype=hx.float32 or use .float() first")
    return x


def softmax(input, dim, *, dtype=None):
    return _softmax(Softmax, input, dim, dtype)


def log_softmax(x, dim, dtype=None):
    return _softmax(LogSoftmax, x, dim, dtype)


def _softmax(op, x, dim, dtype):
    nd = len(x.shape)
    state = STATE
    if dtype is None and state.autocast is None and x.dtype.is_floating_point and nd and \
            dim.__class__ is int and -nd <= dim < nd and 0 not in x.shape:
        # the usual call, checked in one line and recorded without apply's generic
        # pass over the arguments (together a sixth of a small softmax's time)
        return op.apply(x, dim + nd if dim < 0 else dim)
    name = "log_softmax" if op.log else "softmax"
    x = _softmax_input(x, name, dtype)
    if x.ndim == 0:
        layout.normalize_dim(dim, 0, name)
        return x * 0.0 if op.log else x * 0.0 + 1.0
    d = layout.normalize_dim(dim, x.ndim, name)
    if x.numel() == 0:
        return x.clone()
    return op.apply(x, d)


def logsumexp(input, dim, keepdim=False):  # noqa: A002 (PyTorch's name)
    x = input
    dims = _dims(x, dim, "logsumexp")
    if not x.dtype.is_floating_point:
        x = x.to(float32)
    m = x.detach().amax(dims, keepdim=True) if x.numel() else x.detach().sum(dims, True)
    m = m.masked_fill(m.isinf(), 0.0)
    out = (x - m).exp().sum(dims, keepdim=True).log() + m
    return out if keepdim else out.reshape(tuple(n for i, n in enumerate(x.shape)
                                                 if i not in dims))


def sum_to(g, shape):
    """Sum a broadcast result back to ``shape`` (the adjoint of expand)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead, keep = layout.reduced_dims(shape, g.shape)
    out = g
    if keep:
        out = Sum.apply(out, keep, True)
    if lead:
        out = Sum.apply(out, lead, False)
    if out.shape != shape:
        out = out.reshape(shape)
    return out


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """The p-norm over ``dim`` (all dims by default). p: a number, inf, -inf or 'fro';
    ``dtype``: the input is cast to it first (a widening only, as PyTorch)."""
    if out is not None:
        raise TypeError("norm: out= is not supported; use the returned tensor")
    if dtype is not None:
        if promote_types(input.dtype, dtype) is not dtype:
            raise TypeError(f"norm: input dtype {input.dtype.name} cannot be cast to "
                            f"dtype={dtype.name} without narrowing; pass a wider dtype")
        input = input.to(dtype)
    if p in ("fro", None):
        p = 2
    if not input.dtype.is_floating_point:
        raise TypeError(f"norm: input dtype {input.dtype.name} is not floating point")
    a = input.abs()
    if p == math.inf:
        return a.amax(dim, keepdim)
    if p == -math.inf:
        return a.amin(dim, keepdim)
    if p == 0:
        return (a != 0).to(input.dtype).sum(dim, keepdim)
    if p == 1:
        return a.sum(dim, keepdim)
    if p == 2:
        return _Norm2.apply(input, _dims(input, dim, "norm"), keepdim)
    return (a ** p).sum(dim, keepdim) ** (1.0 / p)


# -- distances (torch.nn.functional's, also torch.<name>) ------------------------------------
def _broadcast_floats(op, x1, x2):
    """x1 and x2 in one floating dtype, expanded to their broadcast shape."""
    for t in (x1, x2):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: x1 and x2 must be tensors, got {type(t).__name__}")
    dt = promote_types(x1.dtype, x2.dtype)
    if not dt.is_floating_point:
        raise TypeError(f"{op}: x1 ({x1.dtype.name}) and x2 ({x2.dtype.name}) must be "
                        f"floating point (as in PyTorch); convert with .float() first")
    shape = layout.broadcast_shapes(x1.shape, x2.shape, op=op)
    return tuple((t if t.dtype is dt else t.to(dt)) if t.shape == shape else
                 (t if t.dtype is dt else t.to(dt)).expand(*shape) for t in (x1, x2))


def _cosine_similarity_layer(dim=1, eps=1e-8):
    return {"dim": dim, "eps": eps}


@function
@fused(None, arity=2, layer=Layer("CosineSimilarity", _cosine_similarity_layer, inputs=2))
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """The cosine of the angle between x1 and x2 along ``dim`` (broadcast first):
    sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps)), each norm clamped apart as
    PyTorch's (so neither vector's size can underflow the other's)."""
    x1, x2 = _broadcast_floats("cosine_similarity", x1, x2)
    if x1.ndim == 0:
        raise OpError("cosine_similarity: x1 and x2 are 0-d; they need a dim to compare "
                      "along (unsqueeze them)")
    n1, n2 = (norm(t, 2, dim, True).clamp(min=eps) for t in (x1, x2))
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def _pairwise_distance_layer(p=2.0, eps=1e-6, keepdim=False):
    return {"p": p, "eps": eps, "keepdim": keepdim}


@function
@fused(None, arity=2, layer=Layer("PairwiseDistance", _pairwise_distance_layer, inputs=2))
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps over the last dim (broadcast first): the distance of
    each pair of rows; ``eps`` keeps the gradient finite where the rows are equal."""
    for t in (x1, x2):
        if not isinstance(t, Tensor):
            raise TypeError(f"pairwise_distance: x1 and x2 must be tensors, got "
                            f"{type(t).__name__}")
    d = x1 - x2 + eps
    if not d.dtype.is_floating_point:
        d = d.float()
    if d.ndim == 0:  # (a 0-d pair: the one element's absolute value, as PyTorch's)
        return norm(d.reshape(1), p, -1)
    return norm(d, p, -1, keepdim)


class _Norm2(Function):
    """sqrt(sum x^2): its gradient at 0 is 0 (as PyTorch's), not 0/0."""

    label = "Norm"
    small_state = True

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.save_for_backward(x)
        ctx.dims, ctx.keepdim = dims, keepdim
        be = x._be
        sq = be.map(_SQUARE, [x._data], x.dtype.np)
        s = be.sum(sq, dims, keepdim) if dims else sq
        return be.map(_SQRT, [s], x.dtype.np)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        n = _Norm2.apply(x, ctx.dims, True)
        if not ctx.keepdim and ctx.dims:
            g = g.reshape(layout.keep_shape(x.shape, ctx.dims))
        safe = n.masked_fill(n == 0, 1.0)
        return (g * x / safe).masked_fill(n == 0, 0.0), None, None


def all_any(kind, x, dim=None, keepdim=False):
    """Tensors (bool, or uint8 for uint8 as PyTorch's), with dim and keepdim, as
    PyTorch: empty all() is True."""
    b = x if x.dtype is bool_ else (x != 0)
    n = b.to(int64).sum(dim, keepdim)
    out = n > 0 if kind == "any" else n == _count(b, _dims(b, dim, kind))
    return out.to(uint8) if x.dtype is uint8 else out


def prod(input, dim=None, keepdim=False, dtype=None):
    """The product over ``dim`` (all elements by default): the last running product, so
    its gradient is cumprod's, exact where entries are zero."""
    if dtype is not None:
        input = input.to(dtype)
    elif not input.dtype.is_floating_point and input.dtype is not int64:
        input = input.to(int64)
    if dim is None:
        out = prod(input.reshape(-1), 0)
        return out.reshape((1,) * input.ndim) if keepdim else out
    if input.ndim == 0:
        layout.normalize_dim(dim, 0, "prod")
        return input.clone()
    d = layout.normalize_dim(dim, input.ndim, "prod")
    n = input.shape[d]
    if n == 0:
        shape = tuple(1 if i == d else s for i, s in enumerate(input.shape))
        out = input.new_ones(shape)
    else:
        out = input.cumprod(d).narrow(d, n - 1, 1)
    return out if keepdim else out.squeeze(d)


def equal(a, b) -> bool:
    """True when both have one shape and equal elements (torch.equal)."""
    return a.shape == b.shape and bool((a == b).all())


# -- declarations and Tensor methods ------------------------------------------------------
# (softmax and log_softmax are declared on their functional forms, with their layers:
# nn/functional.py)
for _name in ("sum", "mean", "var", "std", "amax", "amin", "logsumexp", "norm"):
    declare(_name, dtypes="float")
for _name in ("max", "min", "argmax", "argmin", "all", "any"):
    declare(_name, differentiable=_name in ("max", "min"), dtypes="any")

tensor_method(sum, name="sum", function=True)
tensor_method(mean, function=True)
tensor_method(var, function=True)
tensor_method(std, function=True)
function(std_mean)
declare("std_mean", dtypes="float")


@tensor_method(function=True)
def count_nonzero(input, dim=None):  # noqa: A002 (PyTorch's name)
    """The number of nonzero elements over ``dim`` (an int or a tuple of ints; every dim
    when None), as int64."""
    nonzero = input != 0
    return nonzero.sum() if dim is None else nonzero.sum(dim)


declare("count_nonzero", differentiable=False, dtypes="any")


@tensor_method(function=True)
def diff(input, n=1, dim=-1, prepend=None, append=None):  # noqa: A002
    """The n-th forward difference along ``dim``: out[i] = x[i + 1] - x[i], n times, after
    ``prepend`` and ``append`` are joined to x along that dim (as PyTorch; booleans give
    x[i + 1] != x[i])."""
    from .indexing import cat  # (indexing imports this module)

    if not isinstance(n, int) or n < 0:
        raise ValueError(f"diff: n must be a non-negative int, got {n!r}")
    if input.ndim == 0:
        raise RuntimeError("diff: expected a tensor of at least 1 dim, got a 0-d one")
    dim = layout.normalize_dim(dim, input.ndim, "diff")
    parts = [t for t in (prepend, input, append) if t is not None]
    x = cat(parts, dim) if len(parts) > 1 else input
    for _ in range(n):
        length = x.shape[dim]
        if length == 0:
            break
        later, earlier = x.narrow(dim, 1, length - 1), x.narrow(dim, 0, length - 1)
        x = later != earlier if x.dtype is bool_ else later - earlier
    return x


declare("diff", dtypes="any")
tensor_method(argmax, function=True)
tensor_method(argmin, function=True)
tensor_method(softmax, function=True)
tensor_method(log_softmax, function=True)
tensor_method(logsumexp, function=True)
tensor_method(norm, function=True)
tensor_method(sum_to)
tensor_method(prod, function=True)
tensor_method(equal, function=True)
declare("prod", dtypes="any")


def _reduction_method(impl, kind):
    def method(input, dim=None, keepdim=False, *, axis=None):
        return impl(kind, input, dim if axis is None else axis, keepdim)

    return method


for _name, _impl, _kind in (("max", max_min, "max"), ("min", max_min, "min"),
                            ("amax", amax_amin, "max"), ("amin", amax_amin, "min"),
                            ("all", all_any, "all"), ("any", all_any, "any")):
    tensor_method(_reduction_method(_impl, _kind), name=_name, function=True)


_SQUARE = Kernel("square", lambda m, x: x * x, 1)
_SQRT = Kernel("sqrt", lambda m, x: m.sqrt(x), 1)
