"""Convolutions as a product with the windows view, and unfold/fold (im2col, col2im).

conv2d(x, w) with G groups is: pad x, take its windows (N, C, kh, kw, Ho, Wo) as a view
(ops/windows.py), lay them out as (N, G, C/G*kh*kw, Ho*Wo) and multiply by the weight
(G, O/G, C/G*kh*kw): one batched product, no loop over positions. Everything is a
composition of differentiable ops, so the gradients come from theirs: the weight's is
one product with the same windows, the input's a product followed by SumWindows (col2im:
a loop over the kh*kw kernel offsets adding strided slices), and derivatives of any
order pass through. The transposed convolution is the same two steps the other way
round: a product, then the windows summed back into the (larger) output.

Both backends can run it through the kernel contract's primitives (a strided view, a
copy, matmul, strided adds). A backend whose matmul reads the windows itself (the GPU's
implicit GEMM, ops/conv_gemm.py) takes float32 stride-1 conv2d that way instead: no
column copy, and the input's gradient one more product instead of a col2im.
"""

from __future__ import annotations

import math

from .. import layout
from ..amp import cast_inputs
from ..autograd.function import Function
from ..autograd.mode import STATE, no_grad
from ..errors import OpError
from ..tensor import Tensor
from . import conv_gemm
from .linalg import matmul
from .registry import Layer, function, fused
from .windows import (
    SumWindows,
    pad,
    padded,
    padded_strides,
    sum_windows,
    summed_windows,
    window_geometry,
    window_layout,
    windows,
)


def ntuple(value, d, name, op):
    """An int or a sequence of d ints as a d-tuple (PyTorch's _pair/_single)."""
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            value = tuple(value) * d
        if len(value) != d or not all(isinstance(v, int) for v in value):
            raise OpError(f"{op}: {name} must be an int or {d} ints, got {value!r}")
        return tuple(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be an int or a tuple of {d} ints, got "
                        f"{type(value).__name__}")
    return (value,) * d


def _positive(values, name, op, allow_zero=False):
    lo = 0 if allow_zero else 1
    if any(v < lo for v in values):
        raise OpError(f"{op}: {name} must be {'non-negative' if allow_zero else 'positive'}"
                         f", got {values}")


def same_padding(kernel, dilation):
    """padding='same': (before, after) per dim; an odd total puts the extra cell after,
    as PyTorch does."""
    out = []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        out.append((total // 2, total - total // 2))
    return tuple(out)


def conv_padding(padding, d, kernel, stride, dilation, op):
    """(before, after) per spatial dim from an int, a tuple, 'same' or 'valid'."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * d
        if padding == "same":
            if any(s != 1 for s in stride):
                raise OpError(f"{op}: padding='same' is not supported for strided "
                                 f"convolutions (stride {stride}); give the padding as "
                                 f"ints, or use stride 1")
            return same_padding(kernel, dilation)
        raise OpError(f"{op}: padding must be an int, a tuple, 'same' or 'valid', got "
                         f"{padding!r}")
    p = ntuple(padding, d, "padding", op)
    _positive(p, "padding", op, allow_zero=True)
    return tuple((n, n) for n in p)


def _check_operands(op, x, weight, bias, ints=()):
    """Tensors of one device and dtype: floating, or one of the integer dtypes ``ints``
    PyTorch's CPU kernels of the op take."""
    for name, t in (("input", x), ("weight", weight), ("bias", bias)):
        if t is None:
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
        if not t.dtype.is_floating_point and t.dtype.name not in ints:
            raise TypeError(f"{op}: not defined for {t.dtype.name} tensors ({name} of shape "
                            f"{t.shape}); convert with .float() first")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is None:
            continue
        if t.device is not x.device:
            raise RuntimeError(f"{op}: input on {x.device.type}, {name} on {t.device.type}; "
                               f"move the module or the input with .to(...)")
        if t.dtype is not x.dtype:
            raise TypeError(f"{op}: input is {x.dtype.name} but {name} is {t.dtype.name}; "
                            f"use hx.autocast or cast the input with .to(dtype)")


_SPATIAL_NAMES = {1: "L", 2: "H, W", 3: "D, H, W"}


def _batched(op, x, d):
    """x with its batch dim, and whether one was added (an unbatched (C, *spatial) input)."""
    if x.ndim == d + 1:
        return x.unsqueeze(0), True
    if x.ndim != d + 2:
        raise OpError(f"{op}: expected a {d + 1}-D (unbatched) or {d + 2}-D (batched) "
                         f"input of shape (N, C, {_SPATIAL_NAMES[d]}), got shape {x.shape}")
    return x, False


def _operands(op, d, input, weight, bias, stride, dilation, ints, weight_dims):
    """What both convolutions check first: autocast's casts, the operands' dtypes and
    devices, a batch dim, the weight's rank, stride and dilation as d positive ints."""
    x, weight, bias = cast_inputs("matmul", input, weight, bias)
    _check_operands(op, x, weight, bias, ints)
    x, unbatched = _batched(op, x, d)
    if weight.ndim != d + 2:
        raise OpError(f"{op}: weight must be {d + 2}-D ({weight_dims}, *kernel), got "
                         f"shape {weight.shape}")
    stride = ntuple(stride, d, "stride", op)
    dilation = ntuple(dilation, d, "dilation", op)
    _positive(stride, "stride", op)
    _positive(dilation, "dilation", op)
    return x, weight, bias, unbatched, stride, dilation


def conv(op, d, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """The d-dimensional convolution (cross-correlation, as PyTorch's) behind conv1d/2d."""
    x, weight, bias, unbatched, stride, dilation = _operands(
        op, d, input, weight, bias, stride, dilation,
        ("uint8", "int8", "int16", "int32", "int64"),
        "out_channels, in_channels / groups")
    if not isinstance(groups, int) or groups < 1:
        raise OpError(f"{op}: groups must be a positive int, got {groups!r}")
    n, c = x.shape[:2]
    o, cg = weight.shape[:2]
    kernel = tuple(weight.shape[2:])
    if c % groups or o % groups:
        raise OpError(f"{op}: in_channels ({c}) and out_channels ({o}) must both be "
                         f"divisible by groups ({groups}); change groups or the channels")
    if cg * groups != c:
        raise OpError(f"{op}: input of shape {x.shape} has {c} channels, but the weight "
                         f"of shape {weight.shape} with groups={groups} expects "
                         f"{cg * groups} ({cg} per group)")
    if bias is not None and bias.shape != (o,):
        raise OpError(f"{op}: bias must have shape ({o},) for a weight of shape "
                         f"{weight.shape}, got {bias.shape}")
    pads = conv_padding(padding, d, kernel, stride, dilation, op)
    y = Conv.apply(x, weight, bias, pads, stride, dilation, groups, op)
    return y.squeeze(0) if unbatched else y


class Recorded:
    """The steps of a convolution and its gradients as differentiable ops: for the
    gradients of a create_graph backward (their own graph, so double backward works)."""

    @staticmethod
    def permute(t, dims):
        return t.permute(dims)

    @staticmethod
    def reshape(t, shape):
        return t.reshape(shape)

    @staticmethod
    def mT(t):
        return t.mT

    matmul = staticmethod(matmul)

    @staticmethod
    def add_bias(y, bias, shape):
        return y + bias.reshape(shape)

    @staticmethod
    def sum(t, dims):
        return t.sum(dims)

    @staticmethod
    def columns(x, pads, kernel, stride, dilation, op, order, shape):
        win = windows(pad(x, pads, 0, op), kernel, stride, dilation, op)
        return win.permute(order).reshape(shape)

    @staticmethod
    def sum_windows(cols, shape, kernel, stride, dilation, like):
        return SumWindows.apply(cols, shape, kernel, stride, dilation, like)

    @staticmethod
    def crop(t, key):
        return t[key]


class Raw:
    """The same steps on tensors with no graph, each one backend primitive (a view's
    layout, a copy, a product): the forward and the first-order gradients, where per-op
    dispatch would cost more than the convolution's small products."""

    @staticmethod
    def permute(t, dims):
        shape, strides = layout.permute(t.shape, t.strides, dims)
        return t._view(shape, strides, t.offset,
                       t._be.permute_view(t._data, dims, t._storage, shape, strides, t.offset))

    @staticmethod
    def reshape(t, shape):
        strides = layout.view_strides(t.shape, t.strides, shape)
        if strides is None:  # (the dims do not merge in memory: a copy, as reshape's)
            return Tensor._wrap(t._be.reshape(t._be.copy(t._data), shape))
        return t._view(shape, strides, t.offset)

    @staticmethod
    def mT(t):
        (*lead, r, c), (*steps, sr, sc) = t.shape, t.strides
        return t._view((*lead, c, r), (*steps, sc, sr), t.offset, t._be.mT(t._data))

    @staticmethod
    def matmul(a, b):
        return Tensor._wrap(a._be.matmul(a._data, b._data))

    @staticmethod
    def add_bias(y, bias, shape):
        # (into the product's fresh result, in place: no second output array)
        y._be.add_into(y._data, y._be.reshape(bias._data, shape))
        return y

    @staticmethod
    def sum(t, dims):
        return Tensor._wrap(t._be.sum(t._data, dims, False))

    @staticmethod
    def columns(x, pads, kernel, stride, dilation, op, order, shape):
        # (the windows of the zero-padded x, permuted by ``order``, as a matrix of
        # ``shape``: a view of x where no padding and the dims merge, else one copy,
        # the padding written as zeros by the backend's kernel where it has one)
        be, padding = x._be, any(a or b for a, b in pads)
        if not padding:
            win = Raw.permute(Raw.windows(x, kernel, stride, dilation, op), order)
            strides = layout.view_strides(win.shape, win.strides, shape)
            if strides is not None:
                return win._view(shape, strides, win.offset)
        size = tuple(m + a + b for m, (a, b) in zip(x.shape[2:], pads))
        geometry = x.shape[:2] + tuple(kernel) + window_geometry(op, size, kernel, stride,
                                                                 dilation)
        cols = Tensor._wrap(be.empty(shape, x.dtype.np))
        # (the columns seen in the windows' dims, (N, C, *kernel, *positions))
        steps = layout.contiguous_strides(tuple(geometry[i] for i in order))
        strides = [0] * len(order)
        for step, i in zip(steps, order):
            strides[i] = step
        into = be.make_view(cols._storage, geometry, tuple(strides), cols.offset)
        if not be.windows_into(into, x._data, tuple(a for a, _ in pads), kernel, stride,
                               dilation):
            xp = padded(x, pads, 0) if padding else x
            be.copy_into(into, Raw.windows(xp, kernel, stride, dilation, op)._data)
        return cols

    @staticmethod
    def windows(x, kernel, stride, dilation, op):
        shape, strides = window_layout(x.shape, x.strides, kernel, stride, dilation, op)
        return x._view(shape, strides, x.offset)

    sum_windows = staticmethod(summed_windows)

    @staticmethod
    def crop(t, key):
        return t._view(*layout.index(t.shape, t.strides, t.offset, key))


def _channels_last_columns(c, strides, kernel, out, stride, dilation, groups):
    """Whether im2col copies the windows as (N, *out, *kernel, C) rather than (C,
    *kernel, N, *out), ``strides`` the padded input's: where it is channels-last in
    memory, each window's row is then kw*C neighbouring values, one run, where the
    other order copies runs of one value (a copy's cost is per run on small images)."""
    if groups != 1 or c == 1 or strides[1] != 1:
        return False
    along = kernel[-1] if strides[-1] == c and dilation[-1] == 1 else 1
    across = out[-1] if strides[-1] == 1 and stride[-1] == 1 else 1
    return c * along > across


def _padded_strides(x, pads):
    """The strides of x padded by ``pads`` as Pad lays its copy out: x's own unpadded,
    plainly ordered where x is expanded."""
    if not any(a or b for a, b in pads):
        return x.strides
    size = x.shape[:2] + tuple(m + a + b for m, (a, b) in zip(x.shape[2:], pads))
    return padded_strides(x, pads) or layout.contiguous_strides(size)


def convolve(x, weight, bias, pads, stride, dilation, groups, op, ops=Recorded):
    """The convolution composed of ``ops`` (Recorded's differentiable ones, its
    definition, or Raw's): pad, the windows view, im2col (the windows copied once as a
    matrix), one product, the bias. Returns the output, the columns (the product's
    matrix, the weight gradient's too) and whether they are in the channels-last order."""
    d = len(stride)
    n, c = x.shape[:2]
    o, cg = weight.shape[:2]
    kernel = tuple(weight.shape[2:])
    # (the windows (N, C, *kernel, *out) of the padded x, copied once as a matrix)
    out = window_geometry(op, tuple(m + a + b for m, (a, b) in zip(x.shape[2:], pads)),
                          kernel, stride, dilation)
    k, positions = cg * math.prod(kernel), n * math.prod(out)
    taps, places = tuple(range(2, 2 + d)), tuple(range(2 + d, 2 + 2 * d))
    if groups == 1:
        # one GEMM over the whole batch, its result (N*positions, O): the output is
        # channels-last in memory (seen as (N, O, *out)), so the next layer's windows
        # (a pool's, a convolution's) run along the channels
        last = _channels_last_columns(c, _padded_strides(x, pads), kernel, out, stride,
                                      dilation, groups)
        if last:
            cols = ops.columns(x, pads, kernel, stride, dilation, op,
                               (0, *places, *taps, 1), (positions, k))
            y = ops.matmul(cols, ops.mT(ops.reshape(ops.permute(weight, (0, *taps, 1)),
                                                    (o, k))))
        else:
            cols = ops.columns(x, pads, kernel, stride, dilation, op,
                               (1, *taps, 0, *places), (k, positions))
            y = ops.matmul(ops.mT(cols), ops.mT(ops.reshape(weight, (o, k))))
        if bias is not None:  # (along the product's rows: no copy of the output)
            y = ops.add_bias(y, bias, (o,))
        y = ops.permute(ops.reshape(y, (n, *out, o)), (0, d + 1, *range(1, d + 1)))
    else:
        # im2col with the batch inside the columns, (C, *kernel, N, *out): each group's
        # product is one GEMM over the whole batch, (O/G, k) @ (k, N*positions)
        last = False
        cols = ops.columns(x, pads, kernel, stride, dilation, op, (1, *taps, 0, *places),
                           (groups, k, positions))
        y = ops.matmul(ops.reshape(weight, (groups, o // groups, k)), cols)  # (G, O/G, N*pos)
        if bias is not None:
            y = ops.add_bias(y, bias, (groups, o // groups, 1))
        y = ops.permute(ops.reshape(y, (o, n) + out), (1, 0, *range(2, 2 + d)))
    return y, cols, last


class Conv(Function):
    """``convolve`` as one graph node: forward runs Raw's steps and keeps its columns;
    the first-order backward is ``conv_gradients`` on Raw's steps and the saved
    columns, a create_graph one Recorded's on columns recomputed with their graph.
    Where the backend reads the windows in its matmul kernel (conv_gemm.takes), forward
    and the first-order gradients are its implicit-GEMM products instead, no columns
    kept."""

    @staticmethod
    def forward(ctx, x, weight, bias, pads, stride, dilation, groups, op):
        if conv_gemm.takes(x, weight, stride):
            out = window_geometry(op, tuple(m + a + b for m, (a, b) in
                                            zip(x.shape[2:], pads)),
                                  weight.shape[2:], stride, dilation)
            with no_grad():
                y = conv_gemm.forward(x, weight, bias, pads, dilation, groups, out)
            cols = last = None
        else:
            y, cols, last = convolve(x, weight, bias, pads, stride, dilation, groups, op,
                                     Raw)
        ctx.save_for_backward(x, weight)
        ctx.cols, ctx.last = cols, last
        ctx.geometry = (pads, stride, dilation, groups, op)
        return y

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        if not STATE.grad_enabled:  # first order: Raw's steps, the saved columns
            if ctx.cols is None:  # (the implicit GEMM's products)
                pads, _, dilation, groups, _ = ctx.geometry
                return conv_gemm.gradients(g, x, w, ctx.next[:3], pads, dilation, groups) + \
                    (None,) * 5
            return conv_gradients(g, x, w, ctx.cols, ctx.last, ctx.next[:3],
                                  *ctx.geometry[:4], Raw) + (None,) * 5
        # (the weight's gradient then has a graph through x: the columns recomputed)
        _, cols, last = convolve(x, w, None, *ctx.geometry)
        return conv_gradients(g, x, w, cols, last, ctx.next[:3], *ctx.geometry[:4]) + \
            (None,) * 5


def conv_gradients(g, x, w, cols, last, need, pads, stride, dilation, groups,
                   ops=Recorded):
    """The gradients of ``convolve`` (for the inputs ``need`` marks) written with
    ``ops`` (as convolve is): the weight's is one product of g with the columns, the input's
    a product of g with the weight followed by col2im (SumWindows) into the padded
    input's layout, the padding cropped; the bias's a sum of g."""
    d = len(stride)
    n, o = g.shape[:2]
    out, kernel = g.shape[2:], w.shape[2:]
    positions = n * math.prod(out)
    gx = gw = gb = dwin = None
    if groups == 1:
        g2 = ops.reshape(ops.permute(g, (0, *range(2, 2 + d), 1)), (positions, o))
        wk = ops.permute(w, (0, *range(2, 2 + d), 1)) if last else w  # (the columns' order)
        if need[1] is not None:
            gw = ops.reshape(ops.matmul(ops.mT(g2), cols if last else ops.mT(cols)), wk.shape)
            gw = ops.permute(gw, (0, d + 1, *range(1, d + 1))) if last else gw
        if need[0] is not None:
            # (the columns' gradient laid out as the columns are: col2im then reads
            # rows of positions, or of channels, along memory)
            wk2 = ops.reshape(wk, (o, math.prod(wk.shape[1:])))
            if last:
                dwin = ops.permute(ops.reshape(ops.matmul(g2, wk2), (n, *out, *wk.shape[1:])),
                                   (0, 2 * d + 1, *range(d + 1, 2 * d + 1), *range(1, d + 1)))
            else:
                dwin = ops.permute(ops.reshape(ops.matmul(ops.mT(wk2), ops.mT(g2)),
                                               (*wk.shape[1:], n, *out)),
                                   (d + 1, 0, *range(1, d + 1), *range(d + 2, 2 * d + 2)))
        if need[2] is not None:
            gb = ops.sum(g2, (0,))
    else:
        g3 = ops.reshape(ops.permute(g, (1, 0, *range(2, 2 + d))),
                         (groups, o // groups, positions))
        wg = ops.reshape(w, (groups, o // groups, w.shape[1] * math.prod(kernel)))
        if need[1] is not None:
            gw = ops.reshape(ops.matmul(g3, ops.mT(cols)), w.shape)
        if need[0] is not None:
            dcols = ops.matmul(ops.mT(wg), g3)  # (G, k, N*positions)
            dwin = ops.permute(ops.reshape(dcols, (x.shape[1], *kernel, n, *out)),
                               (d + 1, 0, *range(1, d + 1), *range(d + 2, 2 * d + 2)))
        if need[2] is not None:
            gb = ops.sum(g, (0, *range(2, 2 + d)))
    if dwin is not None:
        size = tuple(m + a + b for m, (a, b) in zip(x.shape[2:], pads))
        gx = ops.sum_windows(dwin, x.shape[:2] + size, tuple(kernel), stride, dilation,
                             padded_strides(x, pads))
        if any(a or b for a, b in pads):  # (the padding cropped: a view)
            gx = ops.crop(gx, (slice(None),) * 2 + tuple(slice(a, a + m) for m, (a, _) in
                                                         zip(x.shape[2:], pads)))
    return gx, gw, gb


def conv_transpose(op, d, input, weight, bias=None, stride=1, padding=0, output_padding=0,
                   groups=1, dilation=1):
    """The d-dimensional transposed convolution behind conv_transpose1d/2d: each input
    pixel's product with the weight, (O*kh*kw) values, summed back as windows into the
    output (SumWindows), then the padding cropped."""
    x, weight, bias, unbatched, stride, dilation = _operands(
        op, d, input, weight, bias, stride, dilation, ("int64",),
        "in_channels, out_channels / groups")
    if isinstance(padding, str):
        raise OpError(f"{op}: padding must be an int or a tuple of ints, got "
                         f"{padding!r} (only convolutions take 'same' or 'valid')")
    padding = ntuple(padding, d, "padding", op)
    output_padding = ntuple(output_padding, d, "output_padding", op)
    _positive(padding, "padding", op, allow_zero=True)
    _positive(output_padding, "output_padding", op, allow_zero=True)
    for op_, s, dl in zip(output_padding, stride, dilation):
        if op_ >= max(s, dl):
            raise OpError(f"{op}: output_padding {output_padding} must be smaller than "
                             f"either stride {stride} or dilation {dilation}")
    if not isinstance(groups, int) or groups < 1:
        raise OpError(f"{op}: groups must be a positive int, got {groups!r}")
    n, c = x.shape[:2]
    if weight.shape[0] != c:
        raise OpError(f"{op}: input of shape {x.shape} has {c} channels, but the weight "
                         f"of shape {weight.shape} expects {weight.shape[0]}")
    if c % groups:
        raise OpError(f"{op}: in_channels ({c}) must be divisible by groups ({groups})")
    og = weight.shape[1]
    o = og * groups
    kernel = tuple(weight.shape[2:])
    if bias is not None and bias.shape != (o,):
        raise OpError(f"{op}: bias must have shape ({o},), got {bias.shape}")
    spatial = x.shape[2:]
    full = tuple((i - 1) * s + dl * (k - 1) + 1
                 for i, s, dl, k in zip(spatial, stride, dilation, kernel))
    size = tuple(f + p - 2 * q for f, p, q in zip(full, output_padding, padding))
    if any(i < 1 for i in spatial) or any(m < 1 for m in size):
        raise OpError(f"{op}: input of shape {x.shape} with kernel {kernel}, stride "
                         f"{stride}, padding {padding} gives an output of size {size}; "
                         f"use less padding")
    cg = c // groups
    k = og * math.prod(kernel)
    per_pixel = matmul(weight.reshape(groups, cg, k).mT,
                       x.reshape(n, groups, cg, math.prod(spatial)))  # (N, G, k, pixels)
    cols = per_pixel.reshape((n, o) + kernel + spatial)
    y = sum_windows(cols, (n, o) + full, kernel, stride, dilation, op)
    y = pad(y, tuple((-q, p - q) for p, q in zip(output_padding, padding)), 0, op)
    if bias is not None:
        y = y + bias.reshape((o,) + (1,) * d)
    return y.squeeze(0) if unbatched else y


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution over (N, C, L) or (C, L), PyTorch's signature."""
    return conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution over (N, C, H, W) or (C, H, W), PyTorch's signature: stride,
    padding (ints, 'same', 'valid'), dilation and groups (depthwise: groups = C)."""
    return conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution over (N, C, D, H, W) or (C, D, H, W), PyTorch's signature: the
    same windows view and product as conv2d, over three windowed dims."""
    return conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    """The adjoint of conv1d (its gradient for the input) over (N, C, L) or (C, L),
    PyTorch's signature."""
    return conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding,
                          output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    """The adjoint of conv2d (its gradient for the input), PyTorch's signature."""
    return conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding,
                          output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    """The adjoint of conv3d, PyTorch's signature."""
    return conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding,
                          output_padding, groups, dilation)


def _fold_args(op, kernel_size, dilation, padding, stride):
    kernel = ntuple(kernel_size, 2, "kernel_size", op)
    dilation = ntuple(dilation, 2, "dilation", op)
    padding = ntuple(padding, 2, "padding", op)
    stride = ntuple(stride, 2, "stride", op)
    _positive(kernel, "kernel_size", op)
    _positive(dilation, "dilation", op)
    _positive(stride, "stride", op)
    _positive(padding, "padding", op, allow_zero=True)
    return kernel, dilation, tuple((p, p) for p in padding), stride


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C*kh*kw, L), each column one window (PyTorch's F.unfold)."""
    op = "unfold"
    kernel, dilation, pads, stride = _fold_args(op, kernel_size, dilation, padding, stride)
    x, unbatched = _batched(op, input, 2)
    win = windows(pad(x, pads, 0, op), kernel, stride, dilation, op)
    n, c = x.shape[:2]
    cols = win.reshape(n, c * math.prod(kernel), math.prod(win.shape[4:]))
    return cols.squeeze(0) if unbatched else cols


def _fold_layer(output_size, kernel_size, dilation=1, padding=0, stride=1):
    """nn.Fold's state: F.fold's arguments as given."""
    return {"output_size": output_size, "kernel_size": kernel_size, "dilation": dilation,
            "padding": padding, "stride": stride}


# (no Function of its own: the windows summed back, recorded ops)
@fused(None, arity=1, dtypes="any",
       layer=Layer("Fold", _fold_layer,
                   shown="output_size={output_size}, kernel_size={kernel_size}, "
                         "dilation={dilation}, padding={padding}, stride={stride}"))
def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """col2im: (N, C*kh*kw, L) -> (N, C, H, W), overlapping windows summed (F.fold)."""
    op = "fold"
    kernel, dilation, pads, stride = _fold_args(op, kernel_size, dilation, padding, stride)
    size = ntuple(output_size, 2, "output_size", op)
    unbatched = input.ndim == 2
    x = input.unsqueeze(0) if unbatched else input
    if x.ndim != 3:
        raise OpError(f"fold: expected a 2-D or 3-D input (N, C*kh*kw, L), got shape "
                         f"{input.shape}")
    kk = math.prod(kernel)
    n, ck, positions = x.shape
    if ck % kk:
        raise OpError(f"fold: the input's dim 1 ({ck}) must be divisible by the kernel's "
                         f"size {kernel} = {kk}")
    padded = tuple(m + a + b for m, (a, b) in zip(size, pads))
    out = window_geometry(op, padded, kernel, stride, dilation)
    if math.prod(out) != positions:
        raise OpError(f"fold: an output of size {size} with kernel {kernel}, padding "
                         f"{tuple(p for p, _ in pads)}, stride {stride} and dilation "
                         f"{dilation} has {math.prod(out)} windows, but the input has "
                         f"{positions} (its dim 2)")
    c = ck // kk
    cols = x.reshape((n, c) + kernel + out)
    y = sum_windows(cols, (n, c) + padded, kernel, stride, dilation, op)
    y = pad(y, tuple((-a, -b) for a, b in pads), 0, op)
    return y.squeeze(0) if unbatched else y


# (hx.conv2d... as torch's; their fused declarations, with the layers, are in nn/conv.py,
# where the layers' state is)
for _fn in (conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d):
    function(_fn)
