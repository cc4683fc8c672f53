"""Pooling over the windows view: max, average, their adaptive forms, and max-unpooling.

max_pool2d pads with -inf, takes the windows view (N, C, kh, kw, Ho, Wo) of the image,
lays each window out along one dim and picks its largest value with argmax and gather:
the gradient goes back through gather (to the one cell each window picked, the first
where several tie) and the windows (SumWindows), so each input cell receives the sum
over the windows that picked it. avg_pool sums over the same view and divides by the
count of cells PyTorch's rule counts. The adaptive pools have windows of varying size:
the average is a product with a (out, in) averaging matrix per dim, the max a gather
of each window's cells through an index table.
"""

from __future__ import annotations

import math

import numpy as np

from .. import creation
from ..amp import autocast
from ..autograd.function import Function
from ..autograd.mode import STATE, no_grad
from ..backends.base import Kernel
from ..errors import OpError
from ..tensor import Tensor
from .conv import ntuple
from .indexing import ScatterAdd
from .linalg import matmul
from .registry import Layer, function, fused
from .windows import SumWindows, full_in_order, pad, padded_layout, windows


def _input(op, d, x, ints=()):
    """The batched input, and whether it was unbatched. ``ints``: the integer dtypes the
    op takes (True: all), as PyTorch's CPU kernels do."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point and not (
            x.dtype.kind == "int" and (ints is True or x.dtype.name in ints)):
        raise TypeError(f"{op}: not defined for {x.dtype.name} tensors (shape {x.shape}); "
                        f"convert with .float() first")
    if x.ndim not in (d + 1, d + 2):
        raise OpError(f"{op}: expected a {d + 1}-D (unbatched) or {d + 2}-D (batched) "
                         f"input, got shape {x.shape}")
    if any(n == 0 for n in x.shape[x.ndim - d - 1:]):
        raise OpError(f"{op}: input of shape {x.shape} has an empty channel or spatial "
                         f"dim; only the batch dim may be 0")
    return (x.unsqueeze(0), True) if x.ndim == d + 1 else (x, False)


def pool_geometry(op, d, spatial, kernel_size, stride, padding, dilation, ceil_mode):
    """(kernel, stride, dilation, out sizes, pads): PyTorch's pooling output size (the
    last window starts inside the input or its left padding) and the padding that makes
    exactly those windows fit (a negative size after crops unread cells)."""
    kernel = ntuple(kernel_size, d, "kernel_size", op)
    stride = kernel if stride is None or stride == [] or stride == () else \
        ntuple(stride, d, "stride", op)
    padding = ntuple(padding, d, "padding", op)
    dilation = ntuple(dilation, d, "dilation", op)
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise OpError(f"{op}: kernel_size {kernel}, stride {stride} and dilation "
                         f"{dilation} must be positive and padding {padding} non-negative")
    out, pads = [], []
    for n, k, s, p, dl in zip(spatial, kernel, stride, padding, dilation):
        if p > k // 2:
            raise OpError(f"{op}: padding {padding} should be at most half of the "
                             f"kernel size {kernel}")
        span = dl * (k - 1) + 1
        room = n + 2 * p - span
        o = (-(-room // s) if ceil_mode else room // s) + 1
        if ceil_mode and (o - 1) * s >= n + p:
            o -= 1
        if o < 1:
            raise OpError(f"{op}: the kernel {kernel} (dilation {dilation}) is larger "
                             f"than the padded input's spatial size "
                             f"{tuple(m + 2 * q for m, q in zip(spatial, padding))}; use a "
                             f"smaller kernel or more padding")
        out.append(o)
        pads.append((p, (o - 1) * s + span - n - p))
    return kernel, stride, dilation, tuple(out), tuple(pads)


def _lowest(dtype):
    return -math.inf if dtype.is_floating_point else int(np.iinfo(dtype.np).min)


def _flat_positions(picked, kernel, stride, dilation, pads, spatial, device):
    """The index into the flattened input of the cell each window picked (``picked``:
    the offset inside its window, (N, C, *out)), as max_pool's return_indices gives."""
    d = len(kernel)
    out = picked.shape[2:]
    flat, rest = None, picked
    for i in reversed(range(d)):
        tap = rest % kernel[i]
        rest = rest // kernel[i]
        shape = [1] * (d + 2)
        shape[2 + i] = out[i]
        start = creation.arange(out[i], dtype="int64", device=device).reshape(shape) * \
            stride[i] - pads[i][0]
        pos = start + tap * dilation[i]
        flat = pos if flat is None else flat + pos * math.prod(spatial[i + 1:])
    return flat


def max_pool(op, d, input, kernel_size, stride=None, padding=0, dilation=1,
             ceil_mode=False, return_indices=False):
    # (PyTorch's max_pool1d kernel takes no integers; its 2-D and 3-D ones take all)
    x, unbatched = _input(op, d, input, ints=True if d > 1 else ())
    spatial = x.shape[2:]
    kernel, stride, dilation, out, pads = pool_geometry(op, d, spatial, kernel_size, stride,
                                                        padding, dilation, ceil_mode)
    if not return_indices:
        y = MaxPool.apply(x, kernel, stride, dilation, pads, op)
        return y.squeeze(0) if unbatched else y
    y, picked = _max_pool_composed(x, kernel, stride, dilation, pads, op)
    idx = _flat_positions(picked, kernel, stride, dilation, pads, spatial, x.device)
    return (y.squeeze(0), idx.squeeze(0)) if unbatched else (y, idx)


def _max_pool_composed(x, kernel, stride, dilation, pads, op):
    """max_pool composed of differentiable ops, its definition: x padded with its
    lowest value, its windows view, and each window's largest cell (_pick_in_windows).
    Returns the output and the offset each window picked."""
    win = windows(pad(x, pads, _lowest(x.dtype), op), kernel, stride, dilation, op)
    return _pick_in_windows(win, len(kernel))


def _pick_in_windows(win, d):
    """Each window's cells along the last dim (one copy of the view), the largest
    picked by argmax and gather (the first of equal ones; a NaN wins, as in PyTorch):
    (N, C, *out) values and their offsets inside their windows."""
    n, c = win.shape[:2]
    out, kernel = win.shape[2 + d:], win.shape[2:2 + d]
    cells_last = (0, 1, *range(2 + d, 2 + 2 * d), *range(2, 2 + d))
    cells = win.permute(cells_last).reshape((n, c) + out + (math.prod(kernel),))
    y, picked = _pick_max(cells, False)
    return y, picked.squeeze(-1)


class MaxPool(Function):
    """``_max_pool_composed`` as one graph node: forward picks each window's largest
    cell (the backend's one-pass kernel where it has one, else the composition run
    without recording its steps); backward puts each gradient on the cell its window
    picked (the backend's one-pass kernel, first order, or ``route_to_picked``)."""

    @staticmethod
    def forward(ctx, x, kernel, stride, dilation, pads, op):
        be, d = x._be, len(kernel)
        with no_grad():
            xp = pad(x, pads, _lowest(x.dtype), op)
            found = be.window_max(xp._data, kernel, stride, dilation)
            if found is None:
                y, picked = _pick_in_windows(windows(xp, kernel, stride, dilation, op), d)
            else:
                y, picked = Tensor._wrap(found[0]), Tensor._wrap(found[1])
        ctx.in_shape, ctx.in_strides = x.shape, x.strides
        ctx.picked, ctx.geometry = picked, (kernel, stride, dilation, pads)
        return y

    @staticmethod
    def backward(ctx, g):
        kernel, stride, dilation, pads = ctx.geometry
        shape, be = ctx.in_shape, g._be
        padded = shape[:2] + tuple(m + a + b for m, (a, b) in zip(shape[2:], pads))
        like = padded_layout(ctx.in_strides, shape, pads)
        gx = None
        if not STATE.grad_enabled:
            gx = full_in_order(be, g.dtype.np, padded, like or range(len(shape), 0, -1))
            if not be.route_max_into(gx._data, g._data, ctx.picked._data, kernel, stride,
                                     dilation):
                gx = None
        if gx is None:
            gx = route_to_picked(g, ctx.picked, padded, kernel, stride, dilation, like)
        if any(b < 0 for _, b in pads):  # (cells no window read: zeros put back)
            gx = pad(gx, tuple((-a, -b) for a, b in pads))
        elif any(a or b for a, b in pads):  # (the padding cropped: a view)
            gx = gx[(slice(None),) * 2 + tuple(slice(a, a + m) for m, (a, _) in
                                               zip(shape[2:], pads))]
        return gx, None, None, None, None, None


def route_to_picked(g, picked, padded, kernel, stride, dilation, like):
    """max_pool's backward written with differentiable ops (so it has its own): each
    gradient scattered onto the cell its window picked, among the window's cells, and
    the windows summed back into the padded input (SumWindows)."""
    d = len(kernel)
    out = g.shape[2:]
    cells = ScatterAdd.apply(g.unsqueeze(-1), g.shape + (math.prod(kernel),), 2 + d,
                             picked.unsqueeze(-1))
    cells = cells.reshape(g.shape[:2] + out + tuple(kernel))
    cells = cells.permute((0, 1, *range(2 + d, 2 + 2 * d), *range(2, 2 + d)))
    return SumWindows.apply(cells, padded, kernel, stride, dilation, like)


def max_unpool(op, d, input, indices, kernel_size, stride=None, padding=0,
               output_size=None):
    """Each value put back at the flat index max_pool gave for it; zeros elsewhere."""
    x, unbatched = _input(op, d, input)
    if not isinstance(indices, Tensor) or indices.shape != input.shape:
        raise OpError(f"{op}: indices must be a tensor of the input's shape "
                         f"{input.shape} (the indices max_pool returned), got "
                         f"{getattr(indices, 'shape', type(indices).__name__)}")
    kernel = ntuple(kernel_size, d, "kernel_size", op)
    stride = kernel if stride is None else ntuple(stride, d, "stride", op)
    padding = ntuple(padding, d, "padding", op)
    spatial = x.shape[2:]
    default = tuple((i - 1) * s - 2 * p + k for i, s, p, k in
                    zip(spatial, stride, padding, kernel))
    size = default if output_size is None else tuple(output_size)[-d:]
    if len(size) != d:
        raise OpError(f"{op}: output_size must end with {d} sizes, got {output_size!r}")
    for m, dm, s in zip(size, default, stride):
        if not dm - s < m < dm + s:
            raise OpError(f"{op}: output_size {size} is not a size max_pool could have "
                             f"pooled to {tuple(spatial)} (expected within stride of "
                             f"{default})")
    n, c = x.shape[:2]
    idx = (indices.unsqueeze(0) if unbatched else indices).reshape(n, c, -1)
    cells = math.prod(size)
    if idx.numel():
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= cells:
            raise IndexError(f"{op}: index {hi if hi >= cells else lo} is outside the "
                             f"output's {cells} cells (output_size {size}); pass the "
                             f"output_size the input was pooled from")
    y = Unpool.apply(x.reshape(n, c, -1), idx, cells).reshape((n, c) + size)
    return y.squeeze(0) if unbatched else y


_K_MEAN_OF_HITS = Kernel("unpool_put", lambda m, put, hit: put / m.maximum(hit, 1.0), 2)


class Unpool(Function):
    """Zeros of (N, C, cells) with each value put at its index along the last dim. Two
    windows that picked one cell carry its one value: it is put there once (the sum over
    the hits divided by their count, on every backend), and, as PyTorch's, each of them
    receives the cell's gradient."""

    small_state = True

    @staticmethod
    def forward(ctx, src, index, cells):
        ctx.save_for_backward(index)
        be, dt = src._be, src.dtype.np
        shape = src.shape[:-1] + (cells,)
        put = be.scatter_add(shape, 2, index._data, src._data)
        hit = be.scatter_add(shape, 2, index._data, be.full(index.shape, 1, dt))
        return be.map(_K_MEAN_OF_HITS, [put, hit], dt)

    @staticmethod
    def backward(ctx, g):
        (index,) = ctx.saved_tensors
        return g.gather(2, index), None, None


def _avg_divisor(spatial, kernel, stride, pads, out, count_include_pad):
    """The count of cells each window averages over, (*out), by PyTorch's rule: the
    window clipped to the padded input (count_include_pad) or to the input itself."""
    total = np.ones((), np.float64)
    for n, k, s, (p, _), o in zip(spatial, kernel, stride, pads, out):
        start = np.arange(o) * s - p
        if count_include_pad:
            count = np.minimum(start + k, n + p) - start
        else:
            count = np.minimum(start + k, n) - np.maximum(start, 0)
        total = np.multiply.outer(total, count)
    return total


def avg_pool(op, d, input, kernel_size, stride=None, padding=0, ceil_mode=False,
             count_include_pad=True, divisor_override=None):
    # (an int64 average is the sum divided by the count rounded toward zero, as
    # PyTorch's CPU kernel computes it; it refuses the other integer dtypes)
    x, unbatched = _input(op, d, input, ints=("int64",))
    spatial = x.shape[2:]
    kernel, stride, _, out, pads = pool_geometry(op, d, spatial, kernel_size, stride,
                                                 padding, 1, ceil_mode)
    win = windows(pad(x, pads, 0, op), kernel, stride, (1,) * d, op)
    total = win.sum(tuple(range(2, 2 + d)))
    ints = not x.dtype.is_floating_point
    if divisor_override is not None:
        if not divisor_override:
            raise OpError(f"{op}: divisor_override must be non-zero")
        count = divisor_override
    else:
        count = _avg_divisor(spatial, kernel, stride, pads, out, count_include_pad)
        count = count.flat[0] if np.all(count == count.flat[0]) else \
            creation.tensor(count, dtype=x.dtype, device=x.device)
    if ints:
        y = total.div(count if isinstance(count, Tensor) else int(count),
                      rounding_mode="trunc")
    else:
        y = total / (count if isinstance(count, Tensor) else float(count))
    return y.squeeze(0) if unbatched else y


def _adaptive_output(op, d, spatial, output_size):
    size = ntuple(output_size, d, "output_size", op) if not isinstance(
        output_size, (tuple, list)) or None not in output_size else tuple(output_size)
    if len(size) != d:
        raise OpError(f"{op}: output_size must be {d} sizes, got {output_size!r}")
    size = tuple(n if o is None else o for o, n in zip(size, spatial))
    if any(o < 1 for o in size):
        raise OpError(f"{op}: output_size {size} must be positive")
    return size


def _bins(n, o):
    """PyTorch's adaptive bins: [floor(i n / o), ceil((i + 1) n / o)) for each output i."""
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)


def adaptive_avg_pool(op, d, input, output_size):
    x, unbatched = _input(op, d, input)
    size = _adaptive_output(op, d, x.shape[2:], output_size)
    y = x
    with autocast(enabled=False):  # (the products are averages: kept in the input's dtype)
        for i, (n, o) in enumerate(zip(x.shape[2:], size)):
            if n == o:
                continue
            start, end = _bins(n, o)
            mean = np.zeros((o, n))
            for r, (a, b) in enumerate(zip(start, end)):
                mean[r, a:b] = 1.0 / (b - a)
            m = creation.tensor(mean, dtype=x.dtype, device=x.device)
            y = matmul(y, m.mT) if i == d - 1 else matmul(m, y)  # (d <= 2)
    return y.squeeze(0) if unbatched else y


def adaptive_max_pool(op, d, input, output_size, return_indices=False):
    x, unbatched = _input(op, d, input)
    spatial = x.shape[2:]
    size = _adaptive_output(op, d, spatial, output_size)
    flat = np.zeros((), np.int64)
    for n, o in zip(spatial, size):
        start, end = _bins(n, o)
        width = int((end - start).max())
        cells = np.minimum(start[:, None] + np.arange(width), end[:, None] - 1)  # (o, w)
        flat = flat[..., None, None] * n + cells  # (..., o, w)
    # (o1, w1, o2, w2) -> (o1, o2, w1 * w2): each output's window cells along the last dim
    perm = tuple(range(0, 2 * d, 2)) + tuple(range(1, 2 * d, 2))
    table = flat.transpose(perm).reshape(size + (-1,))
    index = creation.tensor(table, dtype="int64", device=x.device)
    nb, c = x.shape[:2]
    cells = x.reshape(nb, c, -1)[:, :, index]  # (N, C, *out, cells)
    y, picked = _pick_max(cells, unbatched)
    if not return_indices:
        return y
    idx = index.expand(cells.shape).gather(-1, picked).squeeze(-1)
    return y, idx.squeeze(0) if unbatched else idx


def _pick_max(cells, unbatched):
    """The largest of each window's cells (laid along the last dim), and where it is."""
    picked = cells.argmax(-1, keepdim=True)
    y = cells.gather(-1, picked).squeeze(-1)
    return (y.squeeze(0) if unbatched else y), picked


def _max_pool_layer(kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                    ceil_mode=False):
    """Pools each window to its largest value (stride defaults to the kernel size)."""
    return {"kernel_size": kernel_size, "stride": kernel_size if stride is None else stride,
            "padding": padding, "dilation": dilation, "return_indices": return_indices,
            "ceil_mode": ceil_mode}


_MAX_POOL_SHOWN = ("kernel_size={kernel_size}, stride={stride}, padding={padding}, "
                   "dilation={dilation}, ceil_mode={ceil_mode}")


@fused(MaxPool, arity=1, layer=Layer("MaxPool1d", _max_pool_layer, shown=_MAX_POOL_SHOWN))
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """The largest value of each window over (N, C, L) or (C, L); with ``return_indices``
    also its index into the input's L."""
    return max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation,
                    ceil_mode, return_indices)


@fused(MaxPool, arity=1, layer=Layer("MaxPool2d", _max_pool_layer, shown=_MAX_POOL_SHOWN))
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """The largest value of each window; with ``return_indices`` also its index into the
    flattened (H*W) input, which max_unpool2d takes."""
    return max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation,
                    ceil_mode, return_indices)


@fused(MaxPool, arity=1, layer=Layer("MaxPool3d", _max_pool_layer, shown=_MAX_POOL_SHOWN))
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """max_pool2d over three windowed dims; indices into the flattened (D*H*W) input."""
    return max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation,
                    ceil_mode, return_indices)


def _max_unpool_layer(d):
    """MaxUnpool{d}d's state, each size a d-tuple as PyTorch keeps it."""
    def state(kernel_size, stride=None, padding=0):
        """Puts each value back at the index max_pool gave it (stride defaults to the
        kernel size)."""
        def size(value, what):
            return ntuple(value, d, what, f"MaxUnpool{d}d")
        kernel = size(kernel_size, "kernel_size")
        return {"kernel_size": kernel,
                "stride": kernel if stride is None else size(stride, "stride"),
                "padding": size(padding, "padding")}
    return state


def _unpool_forward(unpool):
    """The layer's forward: ``unpool`` with its attributes, to the output_size asked for
    (an argument of forward, as in PyTorch, not an attribute)."""
    def forward(self, input, indices, output_size=None):  # noqa: A002 (PyTorch's name)
        return unpool(input, indices, self.kernel_size, self.stride, self.padding,
                      output_size)
    return forward


_MAX_UNPOOL_SHOWN = "kernel_size={kernel_size}, stride={stride}, padding={padding}"


def _max_unpool_declared(name, d):
    """The declaration of max_unpool1d/2d/3d, with its layer (``name``)."""
    return fused(Unpool, arity=2, layer=Layer(name, _max_unpool_layer(d), inputs=2,
                                              shown=_MAX_UNPOOL_SHOWN,
                                              forward=_unpool_forward))


@_max_unpool_declared("MaxUnpool1d", 1)
def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Each value of (N, C, L) or (C, L) put back at the index into L max_pool1d gave
    for it (its ``return_indices``); zeros elsewhere."""
    return max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding,
                      output_size)


@_max_unpool_declared("MaxUnpool2d", 2)
def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Each value put back at the index into the flattened (H*W) output max_pool2d gave
    for it (its ``return_indices``); zeros elsewhere."""
    return max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding,
                      output_size)


@_max_unpool_declared("MaxUnpool3d", 3)
def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """max_unpool2d over three dims: indices into the flattened (D*H*W) output, as
    max_pool3d gives them."""
    return max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding,
                      output_size)


def _avg_pool1d_layer(kernel_size, stride=None, padding=0, ceil_mode=False,
                      count_include_pad=True):
    """Pools each window to its mean (stride defaults to the kernel size)."""
    def size(value):  # (as PyTorch keeps them: 1-tuples)
        return ntuple(value, 1, "size", "AvgPool1d")
    return {"kernel_size": size(kernel_size),
            "stride": size(kernel_size if stride is None else stride),
            "padding": size(padding), "ceil_mode": ceil_mode,
            "count_include_pad": count_include_pad}


def _avg_pool_layer(kernel_size, stride=None, padding=0, ceil_mode=False,
                    count_include_pad=True, divisor_override=None):
    """Pools each window to its mean, or its sum over ``divisor_override``."""
    return {"kernel_size": kernel_size, "stride": kernel_size if stride is None else stride,
            "padding": padding, "ceil_mode": ceil_mode,
            "count_include_pad": count_include_pad, "divisor_override": divisor_override}


_AVG_POOL_SHOWN = "kernel_size={kernel_size}, stride={stride}, padding={padding}"


# (no Function of their own: an average pool is the windows view summed and divided)
@function  # (torch.avg_pool1d too)
@fused(None, arity=1, layer=Layer("AvgPool1d", _avg_pool1d_layer, shown=_AVG_POOL_SHOWN))
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True):
    """The mean of each window over (N, C, L) or (C, L); the padding's zeros count where
    ``count_include_pad``."""
    return avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                    count_include_pad)


@fused(None, arity=1, layer=Layer("AvgPool2d", _avg_pool_layer, shown=_AVG_POOL_SHOWN))
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    """The mean of each window over (N, C, H, W) or (C, H, W), or its sum over
    ``divisor_override``."""
    return avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                    count_include_pad, divisor_override)


@fused(None, arity=1, layer=Layer("AvgPool3d", _avg_pool_layer, shown=_AVG_POOL_SHOWN))
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,  # noqa: A002
               count_include_pad=True, divisor_override=None):
    """avg_pool2d over three windowed dims, (N, C, D, H, W) or (C, D, H, W)."""
    return avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode,
                    count_include_pad, divisor_override)


def _adaptive_avg_pool_layer(output_size):
    """Pools to ``output_size`` windows of (nearly) equal size (None keeps a dim's size)."""
    return {"output_size": output_size}


def _adaptive_max_pool_layer(output_size, return_indices=False):
    """Pools each of ``output_size`` windows of (nearly) equal size (None keeps a dim's
    size) to its largest value."""
    return {"output_size": output_size, "return_indices": return_indices}


_ADAPTIVE_SHOWN = "output_size={output_size}"


# (no Function of their own: an average is a product with each dim's averaging matrix,
# a max a gather through the windows' index table)
@function  # (torch.adaptive_avg_pool1d too)
@fused(None, arity=1, layer=Layer("AdaptiveAvgPool1d", _adaptive_avg_pool_layer,
                                  shown=_ADAPTIVE_SHOWN))
def adaptive_avg_pool1d(input, output_size):
    """The mean of each of ``output_size`` windows of (nearly) equal size over (N, C, L)
    or (C, L): window i covers [floor(i L / out), ceil((i + 1) L / out))."""
    return adaptive_avg_pool("adaptive_avg_pool1d", 1, input, output_size)


@fused(None, arity=1, layer=Layer("AdaptiveAvgPool2d", _adaptive_avg_pool_layer,
                                  shown=_ADAPTIVE_SHOWN))
def adaptive_avg_pool2d(input, output_size):
    """The mean of each cell of an ``output_size`` grid laid over (N, C, H, W) or
    (C, H, W), the bins of adaptive_avg_pool1d along each dim."""
    return adaptive_avg_pool("adaptive_avg_pool2d", 2, input, output_size)


@fused(None, arity=1, layer=Layer("AdaptiveAvgPool3d", _adaptive_avg_pool_layer,
                                  shown=_ADAPTIVE_SHOWN))
def adaptive_avg_pool3d(input, output_size):
    """adaptive_avg_pool2d over three dims, (N, C, D, H, W) or (C, D, H, W)."""
    return adaptive_avg_pool("adaptive_avg_pool3d", 3, input, output_size)


@fused(None, arity=1, layer=Layer("AdaptiveMaxPool1d", _adaptive_max_pool_layer,
                                  shown=_ADAPTIVE_SHOWN))
def adaptive_max_pool1d(input, output_size, return_indices=False):
    """The largest value of each of ``output_size`` windows of (nearly) equal size over
    (N, C, L) or (C, L); with ``return_indices`` also its index into the input's L."""
    return adaptive_max_pool("adaptive_max_pool1d", 1, input, output_size, return_indices)


@fused(None, arity=1, layer=Layer("AdaptiveMaxPool2d", _adaptive_max_pool_layer,
                                  shown=_ADAPTIVE_SHOWN))
def adaptive_max_pool2d(input, output_size, return_indices=False):
    """The largest value of each cell of an ``output_size`` grid laid over the image;
    with ``return_indices`` also its index into the flattened (H*W) input."""
    return adaptive_max_pool("adaptive_max_pool2d", 2, input, output_size, return_indices)


@fused(None, arity=1, layer=Layer("AdaptiveMaxPool3d", _adaptive_max_pool_layer,
                                  shown=_ADAPTIVE_SHOWN))
def adaptive_max_pool3d(input, output_size, return_indices=False):
    """adaptive_max_pool2d over three dims, (N, C, D, H, W) or (C, D, H, W); indices into
    the flattened (D*H*W) input."""
    return adaptive_max_pool("adaptive_max_pool3d", 3, input, output_size, return_indices)
