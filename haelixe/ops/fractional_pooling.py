"""Fractional max pooling (Graham's, PyTorch's F.fractional_max_pool2d/3d and their
layers): windows of a fixed kernel size whose starts step by a fractional amount, drawn
per (sample, channel) plane from ``_random_samples`` (uniform in [0, 1) unless given).

Along a dim of n cells pooled to o outputs with kernel k, a sample u puts window i at
floor((i + u) a) - floor(u a), with a = (n - k) / (o - 1), and the last window at n - k;
the arithmetic is done in the input's dtype, as PyTorch's kernel does it, so given
samples give PyTorch's windows exactly. The windows' cells are gathered from the input
through an index table made on the host and the largest picked (the first of equal
ones, the last NaN where there is one, as PyTorch's), so the gradient goes back through
gather to the cell each window picked.
"""

from __future__ import annotations

import math

import numpy as np

from .. import creation
from ..errors import OpError
from ..tensor import Tensor
from .conv import ntuple
from .indexing import where
from .pooling import _input
from .registry import Layer, fused

#: the dims' names in PyTorch's errors, and which column of a plane's samples each reads
_DIMS = {2: (("height", 1), ("width", 0)), 3: (("time", 0), ("height", 1), ("width", 2))}


def _output_size(op, d, spatial, output_size, output_ratio):
    if output_size is None and output_ratio is None:
        raise ValueError(f"{op} requires specifying either an output_size or an "
                         f"output_ratio")
    if output_size is not None:
        size = ntuple(output_size, d, "output_size", op)
        if min(size) < 0:
            raise OpError(f"{op}: output_size must be non-negative, got {size}")
        return size
    ratio = _ratios(op, d, output_ratio)
    return tuple(int(n * r) for n, r in zip(spatial, ratio))


def _ratios(op, d, output_ratio):
    ratio = tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) else \
        (output_ratio,) * d
    if len(ratio) == 1:
        ratio *= d
    if len(ratio) != d or not all(isinstance(r, (int, float)) for r in ratio):
        raise OpError(f"{op}: output_ratio must be a number or {d} numbers, got "
                      f"{output_ratio!r}")
    return ratio


def _samples(op, d, x, samples):
    """The (N, C, d) samples of x's planes, on the host in x's dtype."""
    n, c = x.shape[:2]
    if samples is None:
        samples = creation.rand(max(n, 1), c, d, dtype=x.dtype, device=x.device)
    if not isinstance(samples, Tensor):
        raise TypeError(f"{op}: _random_samples must be a tensor, got "
                        f"{type(samples).__name__}")
    if samples.dtype is not x.dtype:
        raise OpError(f"{op}: _random_samples has dtype {samples.dtype.name} and the input "
                      f"{x.dtype.name}; they must match")
    if samples.ndim != 3 or samples.shape[2] != d or samples.shape[1] != c or \
            samples.shape[0] < n:
        raise OpError(f"{op}: _random_samples must be of shape (N, C, {d}) with N at least "
                      f"the batch size {n} and C the input's {c} channels, got "
                      f"{samples.shape}")
    return samples.detach()._be.to_numpy(samples._data)[:n].reshape(n, c, d)


def _starts(u, n, o, k):
    """Each window's first cell along a dim, (N, C, o), from the planes' samples ``u``
    (N, C), computed in u's dtype as PyTorch's kernel does."""
    starts = np.empty(u.shape + (o,), np.int64)
    if o > 1:
        t = u.dtype.type
        alpha = t(n - k) / t(o - 1)
        steps = np.arange(o - 1).astype(u.dtype)
        first = (u * alpha).astype(np.int64)
        starts[..., :-1] = ((steps + u[..., None]) * alpha).astype(np.int64) - first[..., None]
    if o > 0:
        starts[..., -1] = n - k
    return starts


def _picked(cells):
    """Where each window's largest cell is along the last dim: the first of equal ones;
    in a window holding NaN, its last NaN (PyTorch's kernel takes every NaN it meets)."""
    picked = cells.argmax(-1, keepdim=True)
    nan = cells.isnan()
    if bool(nan.any()):
        last = (cells.shape[-1] - 1) - nan.flip(-1).long().argmax(-1, keepdim=True)
        picked = where(nan.any(-1, keepdim=True), last, picked)
    return picked


def fractional_max_pool(op, d, input, kernel_size, output_size, output_ratio,  # noqa: A002
                        return_indices, samples):
    x, unbatched = _input(op, d, input)
    spatial = x.shape[2:]
    kernel = ntuple(kernel_size, d, "kernel_size", op)
    if min(kernel) < 1:
        raise OpError(f"{op}: kernel_size must be positive, got {kernel}")
    out = _output_size(op, d, spatial, output_size, output_ratio)
    for (what, _), n, o, k in zip(_DIMS[d], spatial, out, kernel):
        # (PyTorch's 3-D kernel asks for one cell to spare, its 2-D one does not)
        if o + k - 1 > n - (d == 3):
            raise OpError(f"{op}: pool {what} {k} too large relative to input {what} {n} "
                          f"(output size {out}, input shape {input.shape}); use a smaller "
                          f"kernel or output size")
    u = _samples(op, d, x, samples)
    nb, c = x.shape[:2]
    # the flat index of every window's cells: (N, C, *out, *kernel), dim by dim
    flat = np.zeros((nb, c) + (1,) * (2 * d), np.int64)
    for j, ((_, column), n, o, k) in enumerate(zip(_DIMS[d], spatial, out, kernel)):
        at = [1] * (2 * d)
        at[j] = o
        start = _starts(u[..., column], n, o, k).reshape((nb, c) + tuple(at))
        at[j], at[d + j] = 1, k
        cells = start + np.arange(k).reshape(at)
        flat = flat * n + cells
    table = np.ascontiguousarray(np.broadcast_to(flat, (nb, c) + out + kernel))
    index = creation.tensor(table.reshape(nb, c, math.prod(out + kernel)), dtype="int64",
                            device=x.device)
    picked_cells = x.reshape(nb, c, math.prod(spatial)).gather(2, index)
    cells = picked_cells.reshape((nb, c) + out + (math.prod(kernel),))
    picked = _picked(cells)
    y = cells.gather(-1, picked).squeeze(-1)
    y = y.squeeze(0) if unbatched else y
    if not return_indices:
        return y
    where = index.reshape(cells.shape).gather(-1, picked).squeeze(-1)
    return y, where.squeeze(0) if unbatched else where


def _fractional_layer(d):
    name = f"FractionalMaxPool{d}d"

    def state(kernel_size, output_size=None, output_ratio=None, return_indices=False,
              _random_samples=None):
        """Max over windows of ``kernel_size`` whose starts step fractionally, pooling to
        ``output_size`` or to ``output_ratio`` of the input's size (in (0, 1));
        ``_random_samples`` (a buffer) fixes the windows."""
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a "
                             f"pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        ratio = None if output_ratio is None else _ratios(name, d, output_ratio)
        if ratio is not None and not all(0 < r < 1 for r in ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")
        return {"kernel_size": ntuple(kernel_size, d, "kernel_size", name),
                "output_size": None if output_size is None else
                ntuple(output_size, d, "output_size", name),
                "output_ratio": ratio, "return_indices": return_indices,
                "_random_samples": _random_samples}
    return state


def _declared(d):
    return fused(None, arity=1, layer=Layer(f"FractionalMaxPool{d}d", _fractional_layer(d),
                                            buffers=("_random_samples",)))


# (no Function of their own: a gather of the windows' cells, then gather at their max)
@_declared(2)
def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                          return_indices=False, _random_samples=None):
    """The largest value of each of ``output_size`` (or ``output_ratio`` of the input's
    size) windows of ``kernel_size`` over (N, C, H, W) or (C, H, W), their starts
    stepping fractionally by ``_random_samples`` (N, C, 2: the width's, then the
    height's; drawn uniformly when not given); with ``return_indices`` also each one's
    index into the flattened (H*W) input."""
    return fractional_max_pool("fractional_max_pool2d", 2, input, kernel_size, output_size,
                               output_ratio, return_indices, _random_samples)


@_declared(3)
def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                          return_indices=False, _random_samples=None):
    """fractional_max_pool2d over (N, C, T, H, W) or (C, T, H, W): ``_random_samples``
    (N, C, 3) steps the time, height and width windows; indices into the flattened
    (T*H*W) input."""
    return fractional_max_pool("fractional_max_pool3d", 3, input, kernel_size, output_size,
                               output_ratio, return_indices, _random_samples)
