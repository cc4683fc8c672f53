"""Ops that place values among others: searchsorted, bucketize, bincount, histc, isin.

They compute on the host (a read-back of their inputs) and return on the input's device,
as unique does; none has a gradient (their results are indices, counts and masks). Dtypes,
scalars, errors and the NaN cases are PyTorch's: searchsorted's binary search compares
as PyTorch's does (``v >= x`` to go left, so a NaN value lands past the end, and a NaN in
the sequence counts as below everything).
"""

from __future__ import annotations

import builtins
import math
import numbers
from collections import namedtuple

import numpy as np

from ..dtype import (
    bool_,
    float32,
    float64,
    int64,
    number_as,
    result_type,
)
from ..errors import OpError, OpNotImplementedError, OpTypeError
from ..tensor import Tensor
from .registry import declare, function, tensor_method


def _is_number(x) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, complex)


def _host(x, dtype):
    """x's values on the host as a numpy array of ``dtype`` (16-bit floats as float32:
    exact, and numpy compares them natively)."""
    a = x.detach().cpu().numpy()
    np_dt = np.float32 if dtype.is_floating_point and dtype.np.itemsize < 4 else dtype.np
    return a.astype(np_dt, copy=False)


def _number(value, dtype, op):
    """A Python number as a 0-d host array of ``dtype`` (an int wraps into an integer
    dtype, as PyTorch's wrapped numbers do)."""
    np_dt = np.float32 if dtype.is_floating_point and dtype.np.itemsize < 4 else dtype.np
    return np.asarray(number_as(dtype.np, value, op, wrap=True)).astype(np_dt)


def _back(x, array):
    """A host array as a tensor on x's device."""
    return Tensor._wrap(x._be.from_numpy(np.array(array, order="C")))


def _same_device(op, *tensors):
    devices = {t.device for t in tensors if isinstance(t, Tensor)}
    if len(devices) > 1:
        raise RuntimeError(f"{op}: expected all tensors on one device, got "
                           f"{', '.join(sorted(str(d) for d in devices))}; move them with "
                           f".to(...)")


# -- searchsorted and bucketize -----------------------------------------------------------------
def _lower_bound(seq, values, right):
    """Per value (rows of ``values`` against the rows of ``seq``, shapes (R, n) and
    (R, m)), the first index whose element is >= it (> it when ``right``), by bisection:
    PyTorch's comparisons, so NaNs fall as they do there."""
    rows, n = seq.shape
    lo = np.zeros(values.shape, np.int64)
    hi = np.full(values.shape, n, np.int64)
    if n == 0 or values.size == 0:
        return lo
    row = np.arange(rows)[:, None]
    for _ in range(n.bit_length() + 1):
        active = lo < hi
        if not active.any():
            break
        mid = lo + ((hi - lo) >> 1)
        element = seq[row, np.minimum(mid, n - 1)]
        stop = (element > values) if right else (element >= values)
        lo = np.where(active & ~stop, mid + 1, lo)
        hi = np.where(active & stop, mid, hi)
    return lo


def _side(op, right, side):
    if side is None:
        return bool(right)
    if side not in ("left", "right"):
        raise OpError(f"{op}: side can only be 'left' or 'right', got {side!r}")
    if side == "left" and right:
        raise OpError(f"{op}: side and right can't be set to opposites (side='left' with "
                      f"right=True); pass one of them")
    return side == "right"


def _search(op, seq, values, out_int32, right, sorter=None):
    if not isinstance(seq, Tensor):
        raise TypeError(f"{op}: the sorted sequence must be a Tensor, got {type(seq).__name__}")
    scalar = not isinstance(values, Tensor)
    if scalar and not _is_number(values):
        raise TypeError(f"{op}: values must be a Tensor or a number, got "
                        f"{type(values).__name__}")
    if seq.ndim == 0:
        raise OpError(f"{op}: the boundaries tensor should have at least one dim, got a 0-d "
                      f"tensor")
    if scalar and seq.ndim != 1:
        raise OpError(f"{op}: values can be a number only when the boundaries tensor is 1-D, "
                      f"got boundaries of shape {seq.shape}")
    if not scalar and seq.ndim > 1 and (values.ndim != seq.ndim or
                                        values.shape[:-1] != seq.shape[:-1]):
        raise OpError(f"{op}: the boundaries tensor should be 1-D, or its first N-1 dims "
                      f"must match the values', got boundaries of shape {seq.shape} and "
                      f"values of shape {values.shape}")
    _same_device(op, seq, values, sorter)
    dtype = result_type((seq.dtype, False), values if scalar else (values.dtype, False))
    if dtype is bool_:
        raise OpNotImplementedError(f"{op}: not implemented for bool tensors (as in PyTorch); "
                                    f"convert them with .int()")
    s = _host(seq, dtype)
    if sorter is not None:
        s = np.take_along_axis(s, _sorter_indices(op, sorter, seq), -1)
    v = _number(values, dtype, op) if scalar else _host(values, dtype)
    if seq.ndim == 1:  # (every value against the one sequence)
        found = _lower_bound(s.reshape(1, -1), v.reshape(1, -1), right)
    else:
        found = _lower_bound(_rows(s), _rows(v), right)
    return _back(seq, found.reshape(v.shape).astype(np.int32 if out_int32 else np.int64))


def _rows(a):
    """``a`` as (rows, last dim), rows counted (reshape(-1, 0) cannot tell them)."""
    return a.reshape(int(np.prod(a.shape[:-1])), a.shape[-1])


def _sorter_indices(op, sorter, seq):
    if not isinstance(sorter, Tensor) or sorter.dtype is not int64:
        got = sorter.dtype.name if isinstance(sorter, Tensor) else type(sorter).__name__
        raise OpTypeError(f"{op}: sorter must be an int64 tensor, got {got}")
    if sorter.shape != seq.shape:
        raise OpError(f"{op}: the boundaries and sorter must have one shape, got "
                      f"{seq.shape} and {sorter.shape}")
    idx = sorter.detach().cpu().numpy()
    n = seq.shape[-1]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise OpError(f"{op}: sorter index out of range (each must be in [0, {n}))")
    return idx


@function
def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None,
    sorter=None) -> Tensor

    Where each of ``values`` would go in ``sorted_sequence`` (along its last dim) to keep
    it sorted: the first index whose element is >= the value, or > it with
    ``right=True`` / ``side='right'``. The sequence is 1-D, or has the values' leading
    dims; ``values`` may be a number. ``sorter``: int64 indices that sort the sequence
    along its last dim. int64 indices (int32 with ``out_int32``), on the sequence's
    device; no gradient."""
    right = _side("searchsorted", right, side)
    return _search("searchsorted", sorted_sequence, values, out_int32, right, sorter)


@function
def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    """bucketize(input, boundaries, *, out_int32=False, right=False) -> Tensor

    The index of the bucket of each element of ``input`` (a tensor or a number) among
    the 1-D sorted ``boundaries``: i with boundaries[i-1] < x <= boundaries[i], or
    boundaries[i-1] <= x < boundaries[i] with ``right=True``. int64 (int32 with
    ``out_int32``); no gradient."""
    if not isinstance(boundaries, Tensor):
        raise TypeError(f"bucketize: boundaries must be a Tensor, got "
                        f"{type(boundaries).__name__}")
    if boundaries.ndim != 1:
        raise OpError(f"bucketize: the boundaries tensor must be 1-D, got shape "
                      f"{boundaries.shape}")
    return _search("bucketize", boundaries, input, out_int32, right)


# -- bincount and histc -------------------------------------------------------------------------
def _int_argument(op, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an int, got {type(value).__name__}")
    return int(value)


@tensor_method(function=True)
def bincount(input, weights=None, minlength=0):  # noqa: A002
    """bincount(input, weights=None, minlength=0) -> Tensor

    How often each value 0, 1, ... occurs in the 1-D non-negative integer ``input`` (at
    least ``minlength`` counts), or, with ``weights`` (1-D, input's length), the sum of
    their weights per value: int64 counts; float32 or float64 sums as the weights (other
    weights sum in float64), as PyTorch. No gradient."""
    op = "bincount"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    minlength = _int_argument(op, "minlength", minlength)
    if input.dtype.is_floating_point or input.dtype is bool_:
        raise OpNotImplementedError(f"{op}: not implemented for {input.dtype.name} tensors "
                                    f"(as in PyTorch); it counts integers: convert with "
                                    f".long()")
    if minlength < 0:
        raise OpError(f"{op}: minlength should be >= 0, got {minlength}")
    if weights is not None and not isinstance(weights, Tensor):
        raise TypeError(f"{op}: weights must be a Tensor or None, got "
                        f"{type(weights).__name__}")
    _same_device(op, input, weights)
    values = input.detach().cpu().numpy() if input.ndim == 1 else None
    if values is None or (values.size and values.min() < 0):
        raise OpError(f"{op}: only supports 1-d non-negative integral inputs, got shape "
                      f"{input.shape}" + ("" if values is None else " with negative values"))
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != input.shape[0]):
        raise OpError(f"{op}: weights should be 1-d and have the input's length "
                      f"({input.shape[0]}), got shape {weights.shape}")
    if values.size == 0:  # (int64 zeros, weights or not: PyTorch's)
        return _back(input, np.zeros(minlength, np.int64))
    if weights is None:
        return _back(input, np.bincount(values.astype(np.int64), minlength=minlength))
    out_dtype = weights.dtype if weights.dtype in (float32, float64) else float64
    w = weights.detach().cpu().numpy().astype(np.float64)
    counts = np.bincount(values.astype(np.int64), weights=w, minlength=minlength)
    return _back(input, counts.astype(out_dtype.np))


@tensor_method(function=True)
def histc(input, bins=100, min=0, max=0):  # noqa: A001, A002 (PyTorch's names)
    """histc(input, bins=100, min=0, max=0) -> Tensor

    A histogram of ``input``'s elements (any shape) in ``bins`` equal bins over [min,
    max], the last bin closed; elements outside it, and NaNs, are not counted. min ==
    max (the default) takes the data's least and greatest elements (widened by 1 each
    way when they are equal). Floating dtypes; the counts in input's dtype, on its
    device. No gradient."""
    op = "histc"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    bins = _int_argument(op, "bins", bins)
    if not input.dtype.is_floating_point:
        raise OpNotImplementedError(f"{op}: not implemented for {input.dtype.name} tensors "
                                    f"(as in PyTorch); convert with .float()")
    if bins <= 0:
        raise OpError(f"{op}: bins must be > 0, got {bins}")
    lo, hi = (float(v.item() if isinstance(v, Tensor) else v) for v in (min, max))
    host = input.detach().cpu().numpy().reshape(-1)
    if lo == hi and host.size:
        lo, hi = float(host.min()), float(host.max())  # (NaN propagates: refused below)
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise OpError(f"{op}: range of [{lo}, {hi}] is not finite; pass finite min and max "
                      f"(or drop the NaN and infinite elements)")
    if not lo < hi:
        raise OpError(f"{op}: max must be larger than min, got min={lo}, max={hi}")
    counts = np.bincount(_bins_of(host, lo, hi, bins, input.dtype), minlength=bins)
    return _back(input, counts.astype(input.dtype.np))


def _bins_of(host, lo, hi, bins, dtype):
    """The bin of each element inside [lo, hi]: (x - lo) * bins / (hi - lo) truncated,
    each step rounded to the input's dtype (so float32 data lands where PyTorch's
    float32 arithmetic puts it), the top edge in the last bin."""
    t = dtype.np.type
    low, high = t(lo), t(hi)
    x = host[(host >= low) & (host <= high)]  # (NaN fails both)
    with np.errstate(all="ignore"):
        position = (((x - low).astype(dtype.np) * t(bins)).astype(dtype.np)
                    / (high - low)).astype(dtype.np)
    pos = position.astype(np.float64).astype(np.int64)
    return np.minimum(pos, bins - 1)


# -- histogram --------------------------------------------------------------------------------
#: torch.return_types.histogram
HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])


def _histogram_edges(op, input, host, bins, range):  # noqa: A002 (PyTorch's name)
    """The bin edges: ``bins`` (a 1-d increasing tensor) as given, or ``bins`` + 1 equal
    steps over ``range`` (the data's least and greatest element when None; widened by
    0.5 each way when they are equal, [0, 1] for no data)."""
    from ..creation import linspace

    if isinstance(bins, Tensor):
        if bins.ndim != 1 or bins.shape[0] < 1:
            raise OpError(f"{op}: bins must be an int or a 1-d tensor of edges, got shape "
                          f"{bins.shape}")
        if bins.dtype is not input.dtype:
            raise OpTypeError(f"{op}: input and bins must have the same dtype, got "
                              f"{input.dtype.name} and {bins.dtype.name}")
        if range is not None:
            raise OpError(f"{op}: range applies to an int bins only; the tensor bins gives "
                          f"the edges")
        edges = bins.detach().cpu().numpy()
        if np.any(np.diff(edges) < 0):
            raise OpError(f"{op}: bin edges must be increasing, got {edges.tolist()}")
        return bins.detach().clone(), edges
    bins = _int_argument(op, "bins", bins)
    if bins <= 0:
        raise OpError(f"{op}: bins must be > 0, got {bins}")
    if range is not None:
        lo, hi = (float(v) for v in range)
    elif host.size:
        lo, hi = float(host.min()), float(host.max())
    else:
        lo, hi = 0.0, 1.0
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise OpError(f"{op}: range of [{lo}, {hi}] is not finite; pass a finite range= (or "
                      f"drop the NaN and infinite elements)")
    if lo > hi:
        raise OpError(f"{op}: max must be larger than min, got range=({lo}, {hi})")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    edges = linspace(lo, hi, bins + 1, dtype=input.dtype, device=input.device)
    return edges, edges.cpu().numpy()


@tensor_method(function=True)
def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A001, A002
    """histogram(input, bins=100, *, range=None, weight=None, density=False) -> (Tensor, Tensor)

    A histogram of ``input``'s elements (any shape): ``bins`` equal bins (100 where not
    given: PyTorch's default, though its docstring writes bins as required) over ``range``
    (the data's span when None), or the bins between the edges of a 1-d tensor
    ``bins``; each bin holds [left, right), the last [left, right]. Elements outside,
    and NaNs, are not counted. ``weight`` (input's shape) adds its elements instead of
    ones; ``density`` divides by the total and the bin widths. Returns the named tuple
    (hist, bin_edges), in input's dtype, on its device. Floating dtypes. No gradient."""
    op = "histogram"
    _floating_input(op, input)
    host = input.detach().cpu().numpy().reshape(-1).astype(np.float64)
    edges_t, edges = _histogram_edges(op, input, host, bins, range)
    w = _weights(op, weight, input, input.shape, "input's shape", host.size)
    e = edges.astype(np.float64)
    n = e.size - 1
    inside = (host >= e[0]) & (host <= e[-1])  # (NaN fails both)
    where = np.minimum(np.searchsorted(e, host[inside], side="right") - 1, n - 1)
    hist = np.bincount(where, weights=w[inside], minlength=n)[:n] if n else np.zeros(0)
    if density:
        with np.errstate(divide="ignore", invalid="ignore"):
            hist = hist / (hist.sum() * np.diff(e))
    hist_t = _back(input, hist.astype(input.dtype.np))
    return HistogramResult(hist_t, edges_t.to(input.device))


def _floating_input(op, input):  # noqa: A002
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    if input.dtype not in (float32, float64):
        raise OpNotImplementedError(f"{op}: not implemented for {input.dtype.name} tensors "
                                    f"(as in PyTorch's CPU kernel); convert with .float()")


def _weights(op, weight, input, shape, described, count):  # noqa: A002
    """The weight of each counted element as float64 on the host (ones when None)."""
    if weight is None:
        return np.ones(count)
    if not isinstance(weight, Tensor) or weight.shape != shape:
        raise OpError(f"{op}: weight must be a tensor of {described} {shape}, got "
                      f"{getattr(weight, 'shape', type(weight).__name__)}")
    if weight.dtype is not input.dtype:
        raise OpTypeError(f"{op}: input and weight must have the same dtype, got "
                          f"{input.dtype.name} and {weight.dtype.name}")
    return weight.detach().cpu().numpy().reshape(-1).astype(np.float64)


HistogramddResult = namedtuple("histogramdd", ["hist", "bin_edges"])


@function
def histogramdd(input, bins, *, range=None, weight=None, density=False):  # noqa: A001, A002
    """histogramdd(input, bins, *, range=None, weight=None, density=False) -> (Tensor, Tensor[])

    A histogram of N-dimensional points: input's last dim (of size N) holds each point's
    coordinates, its other dims are flattened. ``bins``: N 1-d tensors of edges, N ints
    or one int (equal bins over ``range``, a flat sequence of N (min, max) pairs, or the
    data's span per dim). Each bin holds [left, right), the last along a dim [left,
    right]; points outside any bin are not counted. ``weight`` (input's shape less the
    last dim) adds its elements instead of ones; ``density`` divides by the total and
    the bins' volumes. Returns the named tuple (hist, bin_edges). No gradient."""
    op = "histogramdd"
    _floating_input(op, input)
    if input.ndim < 2:
        raise OpError(f"{op}: input must have at least 2 dimensions, got shape {input.shape}")
    dims = input.shape[-1]
    points = input.detach().cpu().numpy().reshape(-1, dims).astype(np.float64)
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool):
        bins = [int(bins)] * dims
    bins = list(bins)
    if len(bins) != dims:
        raise OpError(f"{op}: expected {dims} sequences of bin edges or bin counts (input's "
                      f"last dim), got {len(bins)}")
    if range is not None:
        range = [float(v) for v in range]  # noqa: A001
        if len(range) != 2 * dims:
            raise OpError(f"{op}: range must hold {2 * dims} numbers (a min and a max per "
                          f"dim), got {len(range)}")
    edges_t, edges = [], []
    for d in builtins.range(dims):
        pair = None if range is None else range[2 * d:2 * d + 2]
        e_t, e = _histogram_edges(op, input, points[:, d], bins[d], pair)
        edges_t.append(e_t)
        edges.append(e.astype(np.float64))
    w = _weights(op, weight, input, input.shape[:-1], "input's shape less the last dim",
                 points.shape[0])
    sizes = [e.size - 1 for e in edges]
    inside = np.ones(points.shape[0], bool)
    cells = []
    for d, e in enumerate(edges):
        col = points[:, d]
        inside &= (col >= e[0]) & (col <= e[-1])  # (NaN fails both)
        cells.append(np.clip(np.searchsorted(e, col, side="right") - 1, 0,
                             max(sizes[d] - 1, 0)))
    total = math.prod(sizes)
    if total and inside.any():
        flat = np.ravel_multi_index(tuple(c[inside] for c in cells), sizes)
        hist = np.bincount(flat, weights=w[inside], minlength=total)[:total]
    else:
        hist = np.zeros(total)
    hist = hist.reshape(sizes)
    if density:
        volume = np.ones(sizes)
        for d, e in enumerate(edges):
            shape = [1] * dims
            shape[d] = sizes[d]
            volume = volume * np.diff(e).reshape(shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            hist = hist / (hist.sum() * volume)
    hist_t = _back(input, hist.astype(input.dtype.np))
    return HistogramddResult(hist_t, tuple(e.to(input.device) for e in edges_t))


# -- isin ------------------------------------------------------------------------------------------
@function
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """isin(elements, test_elements, *, assume_unique=False, invert=False) -> Tensor

    True where an element of ``elements`` is among ``test_elements`` (False with
    ``invert``), in their promoted dtype (NaN equals nothing; -0.0 equals 0.0). Either
    may be a number; the result has elements' shape, on its device. ``assume_unique``
    is accepted (the result is the same either way). No gradient."""
    op = "isin"
    el_tensor, test_tensor = isinstance(elements, Tensor), isinstance(test_elements, Tensor)
    if not el_tensor and not test_tensor:
        raise TypeError(f"{op}: expected at least one Tensor, got "
                        f"{type(elements).__name__} and {type(test_elements).__name__}")
    for value, is_tensor in ((elements, el_tensor), (test_elements, test_tensor)):
        if not is_tensor and not _is_number(value):
            raise TypeError(f"{op}: expected a Tensor or a number, got {type(value).__name__}")
    _same_device(op, elements, test_elements)
    ref = elements if el_tensor else test_elements
    dtype = result_type(*((v.dtype, v.ndim == 0) if isinstance(v, Tensor) else v
                          for v in (elements, test_elements)))
    if dtype is bool_ or any(isinstance(v, (bool, np.bool_)) or
                             (isinstance(v, Tensor) and v.dtype is bool_)
                             for v in (elements, test_elements)):
        raise OpTypeError(f"{op}: bool inputs are not supported (as in PyTorch); convert "
                          f"them with .int()")
    if not test_tensor:  # (PyTorch's eq / ne with the number: its wrapped-number rules)
        return elements != test_elements if invert else elements == test_elements
    a = _number(elements, dtype, op) if not el_tensor else _host(elements, dtype)
    b = _host(test_elements, dtype).reshape(-1)
    found = np.isin(a.reshape(-1), b, invert=invert).reshape(a.shape)
    return _back(ref, found)


for _name, _arity in (("searchsorted", 2), ("bucketize", 2), ("bincount", 1), ("histc", 1),
                      ("histogram", 1), ("histogramdd", 1), ("isin", 2)):
    declare(_name, arity=_arity, differentiable=False, dtypes="any")
del _name, _arity
