"""Reductions and the softmax family."""

from __future__ import annotations

from collections import namedtuple

from .. import layout
from ..amp import cast_inputs
from ..autograd.function import Function
from ..autograd.mode import STATE

MaxMin = namedtuple("MaxMin", ["values", "indices"])


def _dims(x, dim, op):
    if dim is None:
        return tuple(range(x.ndim))
    if isinstance(dim, int):
        dim = (dim,)
    return layout.normalize_dims(dim, x.ndim, op)


def _keep_shape(shape, dims):
    return tuple(1 if i in dims else n for i, n in enumerate(shape))


class Sum(Function):
    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.in_shape, ctx.dims = x.shape, dims
        return x._be.sum(x._data, dims, keepdim)

    @staticmethod
    def backward(ctx, g):
        if not STATE.grad_enabled:
            # first order only: one zero-stride view of g, built directly
            dims, strides, j = ctx.dims, [], 0
            kept = g.ndim == len(ctx.in_shape)
            for d in range(len(ctx.in_shape)):
                if d in dims:
                    strides.append(0)
                    j += kept
                else:
                    strides.append(g.strides[j])
                    j += 1
            return g._view(ctx.in_shape, tuple(strides), g.offset), None, None
        if g.ndim != len(ctx.in_shape):  # keepdim=False: put the summed dims back
            if g.ndim:
                g = g.reshape(_keep_shape(ctx.in_shape, ctx.dims))
            # (a full reduction's 0-d gradient expands as it is: new dims lead)
        return g.expand(ctx.in_shape), None, None


def sum(x, dim=None, keepdim=False):
    if STATE.autocast is not None:
        (x,) = cast_inputs("reduction", x)
    if x.dtype.kind == "bool":
        x = x.to("int64")
    return Sum.apply(x, _dims(x, dim, "sum"), keepdim)


def mean(x, dim=None, keepdim=False):
    if not x.dtype.is_floating_point:
        raise TypeError(f"mean: input dtype {x.dtype.name} is not floating point; "
                        f"use .float() first")
    if STATE.autocast is not None:
        (x,) = cast_inputs("reduction", x)
    dims = _dims(x, dim, "mean")
    n = 1
    for d in dims:
        n *= x.shape[d]
    return Sum.apply(x, dims, keepdim) * (1.0 / n if n else float("nan"))


def var(x, dim=None, keepdim=False, correction=1):
    dims = _dims(x, dim, "var")
    n = 1
    for d in dims:
        n *= x.shape[d]
    centered = x - mean(x, dims, keepdim=True)
    return sum(centered * centered, dims, keepdim) * (1.0 / max(n - correction, 0)
                                                       if n - correction > 0 else float("nan"))


class AMaxMin(Function):
    """max / min over dims (kept as size 1); tied maxima share the gradient evenly."""

    @staticmethod
    def forward(ctx, x, dims, kind):
        ctx.save_for_backward(x)
        ctx.dims, ctx.kind = dims, kind
        return getattr(x._be, kind)(x._data, dims, True)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        xd = x.detach()
        m = Tensor._wrap(getattr(xd._be, ctx.kind)(xd._data, ctx.dims, True))
        hit = (xd == m).to(g.dtype)
        return g * hit / hit.sum(ctx.dims, keepdim=True), None, None


def amax_amin(kind, x, dim=None, keepdim=False):
    dims = _dims(x, dim, "amax" if kind == "max" else "amin")
    if x.numel() == 0:
        raise RuntimeError(f"{kind}: cannot reduce an empty tensor of shape {x.shape}")
    out = AMaxMin.apply(x, dims, kind)
    if not keepdim:
        out = out.reshape(tuple(n for i, n in enumerate(x.shape) if i not in dims))
    return out


def max_min(kind, x, dim=None, keepdim=False):
    """torch.max: without dim the max of all elements; with dim a (values, indices)
    pair, the gradient going to the position of the index."""
    if dim is None:
        return amax_amin(kind, x, None, keepdim)
    if isinstance(dim, tuple):
        raise TypeError(f"{kind}(dim) takes one int dim; use amax for several")
    d = layout.normalize_dim(dim, x.ndim, kind)
    indices = argmax(x if kind == "max" else -x.detach(), d, keepdim=True)
    values = x.gather(d, indices)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return MaxMin(values, indices)


def argmax(x, dim=None, keepdim=False):
    if dim is None:
        flat = x.reshape(-1)
        return Tensor._wrap(x._be.argmax(flat._data, 0, False))
    d = layout.normalize_dim(dim, x.ndim, "argmax")
    raw = x._be.argmax(x.detach()._data, d, keepdim)
    return Tensor._wrap(raw)


class Softmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        ctx.save_for_backward(x)
        return x._be.softmax(x._data, dim)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = softmax(x, ctx.dim)
        return y * (g - (g * y).sum(ctx.dim, keepdim=True)), None


class LogSoftmax(Function):
    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        ctx.save_for_backward(x)
        return x._be.log_softmax(x._data, dim)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        p = softmax(x, ctx.dim)
        return g - p * g.sum(ctx.dim, keepdim=True), None


def softmax(x, dim):
    if STATE.autocast is not None:
        (x,) = cast_inputs("softmax", x)
    return Softmax.apply(x, layout.normalize_dim(dim, x.ndim, "softmax"))


def log_softmax(x, dim):
    if STATE.autocast is not None:
        (x,) = cast_inputs("softmax", x)
    return LogSoftmax.apply(x, layout.normalize_dim(dim, x.ndim, "log_softmax"))


def sum_to(g, shape):
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


from ..tensor import Tensor  # noqa: E402
