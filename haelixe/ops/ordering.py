"""Order and scans: sort, argsort, topk, unique, multinomial, cumsum, cumprod, cummax,
cummin, logcumsumexp; the order statistics median, nanmedian, kthvalue, mode, quantile and
nanquantile.

Sorted values reach their gradient through gather (the indices say where each value came
from); cumsum's gradient is the reverse cumsum of the incoming one. The order statistics
find their positions on the host and gather the values there, so their gradients flow
to the elements they picked.
"""

from __future__ import annotations

import numbers
import operator
from collections import namedtuple

import numpy as np

from .. import layout
from ..autograd.function import Function
from ..dtype import bfloat16, bool_, float16, float32, float64, int64
from ..errors import OpError, OpTypeError
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


# -- order statistics: median, nanmedian, kthvalue, mode, quantile, nanquantile ---------------
Median = namedtuple("Median", ["values", "indices"])
NanMedian = namedtuple("NanMedian", ["values", "indices"])
KthValue = namedtuple("KthValue", ["values", "indices"])
Mode = namedtuple("Mode", ["values", "indices"])


def _int_arg(value, name, op):
    if isinstance(value, bool):  # (an index, to Python; not to PyTorch's parser)
        raise TypeError(f"{op}: {name} must be an int, got bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int, got {type(value).__name__}") from None


def _along(x, dim, op):
    """``dim`` normalised; refused, as in PyTorch, where it has no element to pick."""
    d = layout.normalize_dim(_int_arg(dim, "dim", op), x.ndim, op)
    if x.ndim and x.shape[d] == 0:
        raise IndexError(f"{op}: dim {dim} has size 0 (input shape {x.shape}); there is no "
                         f"element to pick")
    return d


def _host_keys(x, op, bools=False):
    """x's values on the host, in a dtype numpy sorts with NaNs last (float16 and bfloat16
    widened to float32, exactly); bool refused unless ``bools`` (PyTorch's kernels)."""
    if x.dtype is bool_ and not bools:
        raise OpTypeError(f"{op}: not defined for bool tensors (as in PyTorch); convert with "
                          f".int() first")
    if x.dtype in (float16, bfloat16):
        x = x.float()
    return x.detach().cpu().numpy()


def _nan_counts(keys, d):
    if keys.dtype.kind != "f":
        shape = list(keys.shape)
        shape[d] = 1
        return np.zeros(shape, np.int64)
    return np.isnan(keys).sum(axis=d, keepdims=True)


def _middle(keys, d, skip_nan):
    """Per slice along ``d``, the position of its median: the lower middle of its sorted
    values (of its non-NaN ones where ``skip_nan``, a NaN where all are); else, where it
    has a NaN, its first NaN (NaNs sort last, in their order), as PyTorch."""
    order = np.argsort(keys, axis=d, kind="stable")
    n, nans = keys.shape[d], _nan_counts(keys, d)
    if skip_nan:
        rank = np.maximum(n - nans - 1, 0) // 2
    else:
        rank = np.where(nans > 0, n - nans, (n - 1) // 2)
    return np.take_along_axis(order, rank, d)


def _most_frequent(keys, d):
    """Per slice along ``d``, the position of the last occurrence of its most frequent
    value, the least of equally frequent ones, as PyTorch (a NaN, unequal to every
    other, counts once)."""
    n = keys.shape[d]
    rows = np.moveaxis(keys, d, -1).reshape(-1, n)
    order = np.argsort(rows, axis=1, kind="stable")
    s = np.take_along_axis(rows, order, 1)
    starts = np.ones(rows.shape, bool)
    starts[:, 1:] = s[:, 1:] != s[:, :-1]
    run = np.cumsum(starts, axis=1) - 1  # (the run of equal values each sorted one is in)
    m = rows.shape[0]
    lengths = np.bincount((run + n * np.arange(m)[:, None]).ravel(),
                          minlength=m * n).reshape(m, n)
    best = np.argmax(lengths, axis=1)[:, None]  # (the first longest: the least value)
    last = np.take_along_axis(np.cumsum(lengths, axis=1), best, 1) - 1
    positions = np.take_along_axis(order, last, 1)
    shape = np.moveaxis(keys, d, -1).shape[:-1] + (1,)
    return np.moveaxis(positions.reshape(shape), -1, d)


def _picked(x, d, positions, result, keepdim):
    """(values, indices) at ``positions`` along ``d`` (a host array, size 1 along ``d``):
    the values gathered from the input, so their gradient flows to those elements."""
    index = _on_device(positions.astype(np.int64, copy=False), x.device)
    values = x.gather(d, index)
    if not keepdim:
        values, index = values.squeeze(d), index.squeeze(d)
    return result(values, index)


def _of_scalar(x, result):
    return result(x.clone(), Tensor._wrap(x._be.full((), 0, int64.np)).to(x.device))


class _MedianOfAll(Function):
    """The median of every element, picked on the host (``value``); its gradient is shared
    evenly by the elements equal to it (by the NaNs, where it is NaN), as PyTorch's."""

    label = "Median"
    small_state = True

    @staticmethod
    def forward(ctx, x, value):
        ctx.save_for_backward(x, value)
        return x._be.copy(value._data)

    @staticmethod
    def backward(ctx, g):
        x, value = ctx.saved_tensors
        xd = x.detach()
        hit = ((xd == value) | (xd.isnan() & value.isnan())).to(g.dtype)
        return g * hit / hit.sum(), None


def _median_of_all(x, op, skip_nan):
    keys = _host_keys(x, op).reshape(-1)
    if keys.size:
        p = int(_middle(keys, 0, skip_nan)[0])
        value = x.detach().reshape(-1).narrow(0, p, 1).reshape(())
    elif x.dtype.is_floating_point:
        value = Tensor._wrap(x._be.full((), np.nan, x.dtype.np))  # (PyTorch's: nan)
    else:
        raise OpError(f"{op}: an empty {x.dtype.name} tensor has no median (shape "
                      f"{x.shape}); convert with .float() to get nan")
    return _MedianOfAll.apply(x, value)


def _median(x, dim, keepdim, op, skip_nan, result):
    if dim is None:
        if keepdim:
            raise TypeError(f"{op}: keepdim=True needs a dim (as in PyTorch: {op}(input) "
                            f"reduces every dim); pass dim=")
        return _median_of_all(x, op, skip_nan)
    d = _along(x, dim, op)
    keys = _host_keys(x, op)
    if x.ndim == 0:
        return _of_scalar(x, result)
    return _picked(x, d, _middle(keys, d, skip_nan), result, keepdim)


@tensor_method(function=True)
def median(input, dim=None, keepdim=False):  # noqa: A002 (PyTorch's name)
    """median(input) -> Tensor
    median(input, dim, keepdim=False) -> (Tensor, LongTensor)

    The median of every element (a 0-d tensor; nan for an empty float tensor), or along
    ``dim`` the medians and their indices: the lower of the two middle values for an even
    count; a NaN wherever the slice has one (its first NaN), as PyTorch. The gradient of
    ``median(input)`` is shared by the elements equal to it; along ``dim`` it flows to
    the index."""
    return _median(input, dim, keepdim, "median", False, Median)


@tensor_method(function=True)
def nanmedian(input, dim=None, keepdim=False):  # noqa: A002 (PyTorch's name)
    """nanmedian(input) -> Tensor
    nanmedian(input, dim, keepdim=False) -> (Tensor, LongTensor)

    median with the NaNs left out: the lower middle of the other values (NaN where a
    slice has nothing else)."""
    return _median(input, dim, keepdim, "nanmedian", True, NanMedian)


@tensor_method(function=True)
def kthvalue(input, k, dim=None, keepdim=False):  # noqa: A002 (PyTorch's name)
    """kthvalue(input, k, dim=None, keepdim=False) -> (Tensor, LongTensor)

    The ``k``-th smallest element along ``dim`` (the last when None; ``k`` counts from 1,
    NaNs are the largest) and its index."""
    x, op, dim = input, "kthvalue", -1 if dim is None else dim
    k = _int_arg(k, "k", op)
    d = _along(x, dim, op)
    n = x.shape[d] if x.ndim else 1
    if not 1 <= k <= n:
        raise OpError(f"{op}: k ({k}) must be between 1 and the size of dim {dim} ({n}), "
                      f"input shape {x.shape}")
    keys = _host_keys(x, op)
    if x.ndim == 0:
        return _of_scalar(x, KthValue)
    positions = np.take(np.argsort(keys, axis=d, kind="stable"), [k - 1], axis=d)
    return _picked(x, d, positions, KthValue, keepdim)


@tensor_method(function=True)
def mode(input, dim=-1, keepdim=False):  # noqa: A002 (PyTorch's name)
    """mode(input, dim=-1, keepdim=False) -> (Tensor, LongTensor)

    The most frequent value along ``dim`` (the least of equally frequent ones) and the
    index of its last occurrence."""
    d = _along(input, dim, "mode")
    keys = _host_keys(input, "mode", bools=True)
    if input.ndim == 0:
        return _of_scalar(input, Mode)
    return _picked(input, d, _most_frequent(keys, d), Mode, keepdim)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_q(op, q, dtype):
    """q's values on the host, as a 1-D array of the input's dtype, checked in [0, 1]."""
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise OpError(f"{op}: q must be a number or a 1-D tensor, got shape {q.shape}")
        if q.dtype is not dtype:
            raise OpTypeError(f"{op}: q is {q.dtype.name} and the input {dtype.name} (PyTorch "
                              f"asks for one dtype too); pass q.to(input.dtype)")
        host = q.detach().cpu().numpy().reshape(-1)
    elif isinstance(q, numbers.Real):
        host = np.array([q], dtype=np.float64)
    else:
        raise TypeError(f"{op}: q must be a float or a 1-D tensor, got {type(q).__name__}; "
                        f"pass hx.tensor(q, dtype=input.dtype)")
    outside = host[~((host >= 0) & (host <= 1))]
    if outside.size:
        raise OpError(f"{op}: q must be in [0, 1], got {outside[0]}")
    return host.astype(dtype.np)


def _ranks(keys, d, qs, skip_nan):
    """Per quantile and slice, its rank among the sorted values, in the input's dtype (as
    PyTorch computes it): q * (n - 1); where a slice has a NaN, its last value (a NaN);
    with ``skip_nan``, q * (the non-NaN count - 1), 0 where that is < 0. Also the count
    q is scaled by, and where the rank follows q (elsewhere it is a constant)."""
    dt = keys.dtype.type
    n, nans = keys.shape[d], _nan_counts(keys, d)
    shape = [1] * keys.ndim
    shape[d] = len(qs)
    q = qs.reshape(shape)
    if skip_nan:
        scale = (n - nans - 1).astype(dt)
        rank = q * scale
        live = rank >= 0
        rank = np.where(live, rank, dt(0))
    else:
        scale = np.full(nans.shape, n - 1, dt)
        live = nans == 0
        rank = np.where(live, q * scale, scale)
    full = list(keys.shape)
    full[d] = len(qs)
    return np.broadcast_to(rank, full), scale, live


#: how 'lower', 'higher' and 'nearest' round a rank (np.round: half to even, as torch.round)
_ROUNDING = {"lower": np.floor, "higher": np.ceil, "nearest": np.round}


def _check_quantile(op, x, interpolation):
    if x.dtype not in (float32, float64):
        raise OpTypeError(f"{op}: input must be float32 or float64 (as in PyTorch), got "
                          f"{x.dtype.name}; convert with .float() or .double() first")
    if interpolation not in _INTERPOLATIONS:
        raise OpError(f"{op}: interpolation must be one of {', '.join(_INTERPOLATIONS)}, got "
                      f"{interpolation!r}")
    if x.numel() == 0:
        raise OpError(f"{op}: input is empty (shape {x.shape}); a quantile needs at least one "
                      f"element")


def _quantile(op, x, q, dim, keepdim, interpolation, skip_nan):
    _check_quantile(op, x, interpolation)
    qs = _quantile_q(op, q, x.dtype)
    src, d = (x.reshape(-1), 0) if dim is None else \
        (x.reshape(1) if x.ndim == 0 else x, _along(x, dim, op))
    if src.shape[d] > 2 ** 24:
        raise OpError(f"{op}: a slice of {src.shape[d]} elements is more than 2**24, the most "
                      f"PyTorch takes (it counts ranks in floats)")
    keys = src.detach().cpu().numpy()
    order = np.argsort(keys, axis=d, kind="stable")  # (NaNs last)
    rank, scale, live = _ranks(keys, d, qs, skip_nan)
    rank = _ROUNDING.get(interpolation, lambda r: r)(rank)
    below = rank.astype(np.int64)
    out = _gathered(src, d, order, below)
    if interpolation in ("linear", "midpoint"):  # (PyTorch's lerp, by the weight above)
        weight = _on_device(np.full(rank.shape, 0.5, rank.dtype) if interpolation ==
                            "midpoint" else (rank - below).astype(rank.dtype), x.device)
        if interpolation == "linear" and isinstance(q, Tensor) and q.requires_grad:
            weight = weight + _zero_following(q, rank.ndim, d, scale, live)
        out = out.lerp(_gathered(src, d, order, np.ceil(rank).astype(np.int64)), weight)
    out = out.movedim(d, 0)  # (the quantiles first)
    if keepdim:
        out = out.reshape((len(qs),) + (1,) * x.ndim) if dim is None else \
            out.unsqueeze(d + 1) if x.ndim else out
    return out.squeeze(0) if not isinstance(q, Tensor) or q.ndim == 0 else out


def _on_device(a, device):
    return Tensor._wrap(np.ascontiguousarray(a)).to(device)


def _zero_following(q, ndim, d, scale, live):
    """Zeros whose gradient with respect to q is a linear weight's: the rank's scale
    where the rank follows q, none elsewhere (where cuts the graph there, as PyTorch's
    masked_fill does, so the NaNs beyond it stay out of q's gradient)."""
    shape = [1] * ndim
    shape[d] = -1
    qv = q.reshape(shape)
    return ((qv - qv.detach()) * _on_device(scale, q.device)).where(
        _on_device(live, q.device), 0.0)


def _gathered(src, d, order, ranks):
    """The sorted values of ``src`` at ``ranks`` along ``d`` (gathered from ``src``)."""
    return src.gather(d, _on_device(np.take_along_axis(order, ranks, d), src.device))


@tensor_method(function=True)
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """quantile(input, q, dim=None, keepdim=False, *, interpolation='linear') -> Tensor

    The ``q``-quantiles (a number, or a 1-D tensor of the input's dtype: then a leading
    dim of them) over ``dim`` (every element when None), as PyTorch: the rank q * (n - 1)
    among the sorted values, between its neighbours by ``interpolation`` ('linear',
    'lower', 'higher', 'midpoint' or 'nearest', which rounds half to even); NaN where a
    slice has a NaN. float32 and float64 only. The gradient of 'linear' goes to the two
    neighbours by their weights (and to q)."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


@tensor_method(function=True)
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """nanquantile(input, q, dim=None, keepdim=False, *, interpolation='linear') -> Tensor

    quantile with the NaNs left out: the ranks count the other values (NaN where a slice
    has nothing else)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


for _name in ("sort", "argsort", "topk", "multinomial", "cumsum", "cumprod", "unique",
              "cummax", "cummin"):
    declare(_name, differentiable=_name in ("sort", "topk", "cumsum", "cumprod", "cummax",
                                            "cummin"),
            dtypes="any")
declare("logcumsumexp", dtypes="float")
for _name in ("median", "nanmedian", "kthvalue", "mode"):
    declare(_name, dtypes="any")
for _name in ("quantile", "nanquantile"):
    declare(_name, dtypes="float")
