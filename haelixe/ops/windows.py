"""Sliding windows as a strided view, their adjoint (summing windows back), and padding.

The windows of an image are one zero-copy view of it: for a (N, C, H, W) tensor and a
(kh, kw) kernel, ``Windows`` is the (N, C, kh, kw, Ho, Wo) tensor over the same memory
whose element [n, c, i, j, y, x] is the pixel [n, c, y*sh + i*dh, x*sw + j*dw]. The
kernel dims step by the dilation times the image's strides, the output dims by the
stride times them, so no byte moves (im2col as ``as_strided``). Convolution, pooling and
unfold read it; every layer of the images issue is a product or a reduction over it.

Its gradient is ``SumWindows`` (col2im): every window's values added back where the
window read them. That is one loop over the kernel's kh*kw offsets, each adding a
strided slice of all windows at once, never a loop over output positions. The two are
each other's adjoint, so each one's backward is the other, and derivatives of any order
pass through. ``Pad`` (zeros, or any constant, around the last dims; negative sizes
crop) is its own adjoint the same way: its backward is the opposite padding.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import layout
from ..autograd.function import Function
from ..errors import OpError
from ..tensor import Tensor
from .views import _check_history, _view_of


def window_geometry(op, spatial, kernel, stride, dilation):
    """The output size of each windowed dim, or an OpError naming ``op`` when a
    (dilated) kernel does not fit the (padded) input."""
    out = []
    for n, k, s, d in zip(spatial, kernel, stride, dilation):
        span = d * (k - 1) + 1
        if span > n:
            raise OpError(
                f"{op}: the kernel {tuple(kernel)} (dilation {tuple(dilation)}, so spanning "
                f"{span} cells) is larger than the padded input's spatial size "
                f"{tuple(spatial)}; use a smaller kernel or dilation, or more padding")
        out.append((n - span) // s + 1)
    return tuple(out)


def window_layout(shape, strides, kernel, stride, dilation, op="windows"):
    """(shape, strides) of the windows view over a tensor of ``shape``/``strides``: the
    last len(kernel) dims windowed, the ones before kept."""
    d = len(kernel)
    lead, spatial = shape[:-d], shape[-d:]
    lead_strides, spatial_strides = strides[:-d], strides[-d:]
    out = window_geometry(op, spatial, kernel, stride, dilation)
    return (lead + tuple(kernel) + out,
            lead_strides + tuple(st * dl for st, dl in zip(spatial_strides, dilation))
            + tuple(st * s for st, s in zip(spatial_strides, stride)))


class Windows(Function):
    """The sliding windows of the last len(kernel) dims, as a view (see the module)."""

    small_state = True

    @staticmethod
    def forward(ctx, x, kernel, stride, dilation):
        ctx.in_shape, ctx.geometry = x.shape, (kernel, stride, dilation)
        ctx.in_strides = x.strides
        shape, strides = window_layout(x.shape, x.strides, kernel, stride, dilation)
        return _view_of(ctx, x, shape, strides, x.offset)

    @staticmethod
    def backward(ctx, g):
        _check_history(ctx)
        # (the gradient laid out as the input was, where the sum is a copy: the layers
        # before read it in the layout they wrote)
        return SumWindows.apply(g, ctx.in_shape, *ctx.geometry, ctx.in_strides), None, \
            None, None


class SumWindows(Function):
    """col2im: windows (lead, *kernel, *out) added into zeros of ``shape``, each where
    Windows would have read it; one strided add per kernel offset, or one copy where no
    two windows share a cell (into zeros laid out as ``like``, strides of ``shape``,
    where given). 16-bit windows are summed in float32 and rounded once."""

    small_state = True

    @staticmethod
    def forward(ctx, cols, shape, kernel, stride, dilation, like):
        ctx.geometry = (kernel, stride, dilation)
        return summed_windows(cols, shape, kernel, stride, dilation, like)

    @staticmethod
    def backward(ctx, g):
        return Windows.apply(g, *ctx.geometry), None, None, None, None, None


def summed_windows(cols, shape, kernel, stride, dilation, like):
    """SumWindows' forward on graph-less tensors: a tensor of ``shape``."""
    d = len(kernel)
    lead = len(shape) - d
    out_size = cols.shape[lead + d:]
    be = cols._be
    matching = list(range(lead)) + list(range(lead + d, lead + 2 * d))
    cols_order = tuple(cols.strides[m] for m in matching)
    if all(dl * (k - 1) < s for k, s, dl in zip(kernel, stride, dilation)):
        # windows that never share a cell (a pool's stride the kernel's size, a 1x1
        # kernel): the windows view of the output holds each cell once, and the sum
        # is one copy into it
        out = full_in_order(be, cols.dtype.np, shape, like or cols_order)
        be.copy_into(be.make_view(out._storage, *window_layout(
                         out.shape, out.strides, kernel, stride, dilation)[:2],
                         out.offset), cols._data)
        return out
    dtype = cols.dtype.np
    if cols.dtype.itemsize < 4:
        cols = Tensor._wrap(be.cast(cols._data, np.float32))
    out = full_in_order(be, cols.dtype.np, shape, cols_order)
    if be.sum_windows_into(out._data, cols._data, kernel, stride, dilation):
        return out if out.dtype.np == dtype else Tensor._wrap(be.cast(out._data, dtype))
    every = (slice(None),) * lead
    for offsets in itertools.product(*(range(k) for k in kernel)):
        dst = every + tuple(slice(o * dl, o * dl + s * (n - 1) + 1, s) for o, dl, s, n
                            in zip(offsets, dilation, stride, out_size))
        be.add_into(be.make_view(out._storage, *layout.index(
                        out.shape, out.strides, out.offset, dst)),
                    be.make_view(cols._storage, *layout.index(
                        cols.shape, cols.strides, cols.offset, every + offsets)))
    return out if out.dtype.np == dtype else Tensor._wrap(be.cast(out._data, dtype))


def full_in_order(be, dtype, shape, strides, value=0):
    """``value`` (zeros) in a tensor of ``shape`` whose dims are in memory in the order
    ``strides`` (one per dim) has them: for SumWindows, the windows' matching dims (the
    lead dims and the output positions), so each strided add runs along the same inner
    dim in both; for Pad, its input's (a channels-last image stays channels-last)."""
    order = sorted(range(len(shape)), key=lambda i: -abs(strides[i]))
    if order == list(range(len(shape))):
        return Tensor._wrap(be.full(shape, value, dtype))
    laid = Tensor._wrap(be.full(tuple(shape[i] for i in order), value, dtype))
    strides = [0] * len(shape)
    for pos, i in enumerate(order):
        strides[i] = laid.strides[pos]
    return Tensor._wrap(be.make_view(laid._storage, tuple(shape), tuple(strides), 0))


def padded_strides(x, pads):
    """The strides of x padded by ``pads`` (Pad lays its copy out as x is): the layout a
    gradient summed back through the windows (col2im) is written in."""
    return padded_layout(x.strides, x.shape, pads)


def padded_layout(strides, shape, pads):
    """padded_strides from x's strides and shape; None for an expanded x."""
    if not all(strides):
        return None
    lead = len(shape) - len(pads)
    shape = shape[:lead] + tuple(m + a + b for m, (a, b) in zip(shape[lead:], pads))
    out, step = [0] * len(shape), 1
    for i in reversed(sorted(range(len(shape)), key=lambda i: -abs(strides[i]))):
        out[i] = step
        step *= shape[i]
    return tuple(out)


def sum_windows(cols, shape, kernel, stride, dilation, op="fold"):
    """SumWindows, checked: the windows' output dims must be those ``shape`` has."""
    d = len(kernel)
    want = window_geometry(op, shape[-d:], kernel, stride, dilation)
    if tuple(cols.shape[-d:]) != want:
        raise OpError(f"{op}: {tuple(cols.shape[-d:])} window positions do not fit an "
                         f"output of spatial size {tuple(shape[-d:])}, which has {want} for "
                         f"kernel {tuple(kernel)}, stride {tuple(stride)}, dilation "
                         f"{tuple(dilation)}")
    return SumWindows.apply(cols, tuple(shape), tuple(kernel), tuple(stride), tuple(dilation),
                            None)


class Pad(Function):
    """Constant padding of the last len(pads) dims, ``pads`` one (before, after) per dim
    (a negative size crops): a new tensor of the value with the input copied inside.
    Its backward is the opposite padding of the gradient, with zeros."""

    small_state = True

    @staticmethod
    def forward(ctx, x, pads, value):
        ctx.pads = pads
        return padded(x, pads, value)

    @staticmethod
    def backward(ctx, g):
        return Pad.apply(g, tuple((-a, -b) for a, b in ctx.pads), 0), None, None


def padded(x, pads, value):
    """Pad's forward on graph-less tensors: x's copy inside ``value``."""
    lead = x.ndim - len(pads)
    shape = x.shape[:lead] + tuple(n + a + b for n, (a, b) in zip(x.shape[lead:], pads))
    be = x._be
    # (laid out as x is: a channels-last image's padded copy is channels-last, so
    # the windows a convolution copies from it run along the channels; an expanded
    # input's copy is laid out plainly)
    out = full_in_order(be, x.dtype.np, shape, x.strides if all(x.strides) else
                         range(x.ndim, 0, -1), value)
    if math.prod(shape) and x.numel():
        src = (slice(None),) * lead + tuple(slice(max(-a, 0), n - max(-b, 0))
                                            for n, (a, b) in zip(x.shape[lead:], pads))
        dst = (slice(None),) * lead + tuple(slice(max(a, 0), m - max(b, 0))
                                            for m, (a, b) in zip(shape[lead:], pads))
        be.copy_into(be.make_view(out._storage, *layout.index(out.shape, out.strides,
                                                              out.offset, dst)),
                     be.make_view(x._storage, *layout.index(x.shape, x.strides,
                                                            x.offset, src)))
    return out


def pad(x, pads, value=0, op="pad"):
    """x padded with ``value`` by ``pads`` ((before, after) per trailing dim); the
    input itself where every size is zero."""
    pads = tuple((int(a), int(b)) for a, b in pads)
    if not any(a or b for a, b in pads):
        return x
    lead = x.ndim - len(pads)
    for n, (a, b) in zip(x.shape[lead:], pads):
        if n + a + b < 0:
            raise OpError(f"{op}: padding {pads} crops more than the input of shape "
                             f"{x.shape} has")
    return Pad.apply(x, pads, value)


def windows(x, kernel, stride, dilation, op="windows"):
    """The windows view of x's last len(kernel) dims (kernel, stride, dilation tuples)."""
    window_geometry(op, x.shape[-len(kernel):], kernel, stride, dilation)
    return Windows.apply(x, tuple(kernel), tuple(stride), tuple(dilation))
