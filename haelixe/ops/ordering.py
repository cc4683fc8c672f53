"""Order and scans: sort, argsort, topk, unique, multinomial, cumsum, cumprod, cummax,
cummin, logcumsumexp.

Sorted values reach their gradient through gather (the indices say where each value came
from); cumsum's gradient is the reverse cumsum of the incoming one.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import layout
from ..autograd.function import Function
from ..dtype import int64
from ..random import generator as default_generator
from ..tensor import Tensor
from .indexing import cat
from .registry import declare, tensor_method

SortResult = namedtuple("SortResult", ["values", "indices"])


def _indices(x, dim, descending, stable, op):
    d = layout.normalize_dim(dim, x.ndim, op)
    if x.ndim == 0:
        return d, Tensor._wrap(x._be.full((), 0, int64.np))
    _, idx = x._be.sort(x.detach()._data, d, descending, stable)
    return d, Tensor._wrap(idx).to(int64)


@tensor_method(function=True)
def sort(input, dim=-1, descending=False, *, stable=False):
    """(values, indices) along ``dim``; ties keep their order when ``stable``."""
    d, idx = _indices(input, dim, descending, stable, "sort")
    return SortResult(input.gather(d, idx) if input.ndim else input.clone(), idx)


@tensor_method(function=True)
def argsort(input, dim=-1, descending=False, *, stable=False):
    return _indices(input, dim, descending, stable, "argsort")[1]


@tensor_method(function=True)
def topk(input, k, dim=None, largest=True, sorted=True):  # noqa: A002 (PyTorch's name)
    """The ``k`` largest (or smallest) entries along ``dim`` (the last by default) and
    their indices."""
    dim = -1 if dim is None else dim
    if input.dtype.kind == "bool":
        raise TypeError("topk: does not support bool tensors (as in PyTorch); use .int()")
    d = layout.normalize_dim(dim, input.ndim, "topk")
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"topk: k ({k}) must be between 0 and the size of dim {dim} "
                           f"({n}), input shape {input.shape}")
    d, idx = _indices(input, dim, largest, True, "topk")
    if input.ndim:
        idx = idx.narrow(d, 0, k)
    return SortResult(input.gather(d, idx) if input.ndim else input.clone(), idx)


@tensor_method(function=True)
def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Category indices drawn from the rows of ``input`` (non-negative weights, 1-D or
    2-D), with or without replacement; hx.manual_seed makes the draws repeatable."""
    if input.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: input must be 1-D or 2-D, got shape {input.shape}")
    p2 = input.reshape(1, -1) if input.ndim == 1 else input
    if not replacement and num_samples > p2.shape[1]:
        raise RuntimeError(f"multinomial: cannot draw {num_samples} samples without "
                           f"replacement from {p2.shape[1]} categories; pass "
                           f"replacement=True")
    host = p2.detach().cpu().numpy()
    if (host < 0).any() or not (host.sum(axis=1) > 0).all() or not (host == host).all():
        raise RuntimeError("multinomial: probabilities must be finite, non-negative and "
                           "not all zero in a row")
    if not replacement:
        nonzero = (host > 0).sum(axis=1)
        if (nonzero < num_samples).any():
            raise RuntimeError(f"multinomial: a row has fewer than {num_samples} categories "
                               f"with non-zero probability; pass replacement=True")
    raw = input._be.multinomial(p2.detach()._data, num_samples, replacement,
                                default_generator(generator))
    out = Tensor._wrap(raw).to(int64)
    return out.reshape(num_samples) if input.ndim == 1 else out


class CumSum(Function):
    small_state = True

    @staticmethod
    def forward(ctx, x, dim):
        ctx.dim = dim
        return x._be.cumsum(x._data, dim)

    @staticmethod
    def backward(ctx, g):
        d = ctx.dim
        return cumsum(g.flip(d), d).flip(d), None


@tensor_method(function=True)
def cumsum(input, dim, *, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    elif not input.dtype.is_floating_point and input.dtype is not int64:
        input = input.to(int64)  # ints and bools add up in int64, as PyTorch
    if input.ndim == 0:
        layout.normalize_dim(dim, 0, "cumsum")
        return input.clone()
    return CumSum.apply(input, layout.normalize_dim(dim, input.ndim, "cumsum"))


@tensor_method(function=True)
def cumprod(input, dim, *, dtype=None):
    """Running products; the gradient is exact where some entries are zero too."""
    if dtype is not None:
        input = input.to(dtype)
    elif not input.dtype.is_floating_point and input.dtype is not int64:
        input = input.to(int64)
    if input.ndim == 0:
        layout.normalize_dim(dim, 0, "cumprod")
        return input.clone()
    d = layout.normalize_dim(dim, input.ndim, "cumprod")
    if input.dtype.is_floating_point:
        return _CumProd.apply(input, d)
    return Tensor._wrap(input._be.from_numpy(input.cpu().numpy().cumprod(axis=d))).to(input.device)


class _CumProd(Function):
    """y_j = prod_{k<=j} x_k, computed on the host (no backend has a product scan; a
    scan of logs would lose zeros and signs)."""

    label = "CumProd"
    small_state = True

    @staticmethod
    def forward(ctx, x, dim):
        ctx.save_for_backward(x)
        ctx.dim = dim
        host = x._be.to_numpy(x._data)
        return x._be.from_numpy(host.cumprod(axis=dim).astype(host.dtype))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        d = ctx.dim
        n = x.shape[d]
        if n == 0:  # (nothing to multiply: an empty gradient of x's shape)
            return g * 0.0, None
        # dx_i = sum_{j >= i} g_j * prod_{k <= j, k != i} x_k, one column i at a time
        # (exact with zeros, unlike dividing y by x)
        cols = []
        for i in range(n):
            xi = x.narrow(d, i, 1)
            ones = xi * 0.0 + 1.0
            parts = [x.narrow(d, 0, i), ones, x.narrow(d, i + 1, n - i - 1)]
            y_wo = cumprod(cat([p for p in parts if p.shape[d]], d), d)
            cols.append((g.narrow(d, i, n - i) * y_wo.narrow(d, i, n - i)).sum(d, True))
        return cat(cols, d), None


CumMax = namedtuple("CumMax", ["values", "indices"])
CumMin = namedtuple("CumMin", ["values", "indices"])


def _running_extremum(x, dim, running, result, op):
    """(values, indices) of a running maximum or minimum (``running``: np.maximum or
    np.minimum) along ``dim``: each index the latest position of an equal value, a NaN,
    once seen, staying the extremum, as PyTorch. The values are gathered from the input
    at those indices, so their gradient flows back to them."""
    d = layout.normalize_dim(dim, x.ndim, op)
    if x.ndim == 0:
        return result(x.clone(), Tensor._wrap(x._be.full((), 0, int64.np)).to(x.device))
    host = x.detach().cpu().numpy()
    extremum = running.accumulate(host, axis=d) if host.size else host
    shape = [1] * host.ndim
    shape[d] = host.shape[d]
    positions = np.arange(host.shape[d]).reshape(shape)
    hit = host == extremum
    if host.dtype.kind == "f":
        hit |= np.isnan(host)
    indices = np.maximum.accumulate(np.where(hit, positions, 0), axis=d) if host.size \
        else np.zeros(host.shape, np.int64)
    index = Tensor._wrap(np.ascontiguousarray(indices, dtype=np.int64)).to(x.device)
    return result(x.gather(d, index), index)


@tensor_method(function=True)
def cummax(input, dim):  # noqa: A002 (PyTorch's name)
    """cummax(input, dim) -> (Tensor, LongTensor)

    The running maximum along ``dim`` and the index where each was reached (the latest
    of equal values; a NaN, once seen, stays the maximum), as PyTorch."""
    return _running_extremum(input, dim, np.maximum, CumMax, "cummax")


@tensor_method(function=True)
def cummin(input, dim):  # noqa: A002 (PyTorch's name)
    """cummin(input, dim) -> (Tensor, LongTensor)

    The running minimum along ``dim`` and the index where each was reached (the latest
    of equal values; a NaN, once seen, stays the minimum), as PyTorch."""
    return _running_extremum(input, dim, np.minimum, CumMin, "cummin")


class _LogCumSumExp(Function):
    """y_j = log(sum_{k<=j} exp(x_k)), as a running logaddexp on the host (exact where
    early terms are far below the later maximum, which a shift by one maximum loses)."""

    label = "LogCumSumExp"
    small_state = True
    saves_output = True

    @staticmethod
    def forward(ctx, x, dim):
        ctx.save_for_backward(x)
        ctx.dim = dim
        host = x._be.to_numpy(x._data)
        with np.errstate(invalid="ignore"):  # (-inf + -inf: logaddexp gives -inf)
            out = np.logaddexp.accumulate(host, axis=dim) if host.size else host.copy()
        return x._be.from_numpy(np.ascontiguousarray(out, dtype=host.dtype))

    @staticmethod
    def backward(ctx, g):
        # dx_k = sum_{j >= k} g_j exp(x_k - y_j), each sign of g summed in log space (a
        # reverse logcumsumexp), so nothing overflows; written with ops: it has a graph
        x, y = ctx.saved_tensors
        d = ctx.dim
        if x.numel() == 0:
            return g * 0.0, None

        def reverse_scan(t):
            return logcumsumexp(t.flip(d), d).flip(d)

        positive = reverse_scan((g * (g > 0)).log() - y)
        negative = reverse_scan((-g * (g < 0)).log() - y)
        return (x + positive).exp() - (x + negative).exp(), None


@tensor_method(function=True)
def logcumsumexp(input, dim):  # noqa: A002
    """logcumsumexp(input, dim) -> Tensor

    log(cumsum(exp(input), dim)), computed without overflow or underflow."""
    x = input
    if not x.dtype.is_floating_point:
        raise TypeError(f"logcumsumexp: not defined for {x.dtype.name} tensors (as in "
                        f"PyTorch); convert with .float() first")
    d = layout.normalize_dim(dim, x.ndim, "logcumsumexp")
    if x.ndim == 0:
        return x.clone()
    return _LogCumSumExp.apply(x, d)


@tensor_method(function=True)
def unique(x, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct values (or, with ``dim``, the distinct slices along ``dim``) in
    ascending order; with ``return_inverse`` also where each element went (the input's
    shape, or the length of ``dim``), with ``return_counts`` how often each occurs. The
    result carries no gradient, as in PyTorch. ``sorted=False`` gives them sorted too
    (PyTorch's CPU kernel does the same)."""
    host = x.detach().cpu().numpy()
    if dim is None:
        values, inverse, counts = np.unique(host.reshape(-1), return_inverse=True,
                                            return_counts=True)
        inverse = inverse.reshape(host.shape)
    else:
        d = layout.normalize_dim(dim, x.ndim, "unique")
        if host.shape[d] == 0:
            values = host
            inverse = counts = np.zeros(0, np.int64)
        else:
            values, inverse, counts = np.unique(host, return_inverse=True,
                                                return_counts=True, axis=d)
            inverse = inverse.reshape(-1)

    def back(a):
        return Tensor._wrap(x._be.from_numpy(np.array(a, order="C")))  # (0-d stays 0-d)

    out = back(values.astype(host.dtype, copy=False))
    extra = [back(a.astype(np.int64)) for a, want in ((inverse, return_inverse),
                                                     (counts, return_counts)) if want]
    return (out, *extra) if extra else out


for _name in ("sort", "argsort", "topk", "multinomial", "cumsum", "cumprod", "unique",
              "cummax", "cummin"):
    declare(_name, differentiable=_name in ("sort", "topk", "cumsum", "cumprod", "cummax",
                                            "cummin"),
            dtypes="any")
declare("logcumsumexp", dtypes="float")
