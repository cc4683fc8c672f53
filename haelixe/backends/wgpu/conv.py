"""2-D convolution as implicit-GEMM matmuls: the forward and both gradients read the
windows (im2col) matrix from the image inside the matmul kernel (matmul.windows_matmul),
so the columns are never copied out and the input's gradient needs no col2im.

With G groups, cols is (G, C/G * kh * kw, N * Ho * Wo) and:

- forward:   y  = W @ cols(x), W as (G, O/G, C/G * kh * kw);
- weight:    dW = dY @ cols(x)^T, dY as (G, O/G, N * Ho * Wo);
- input (stride 1): dx = W' @ cols(dY), the convolution of dY with W flipped along both
  spatial dims and its channels swapped per group, padded by d * (k - 1) - p.

Products come out as (channels, N, H, W) in memory and are handed on as (N, C, H, W)
views of it: the next layer reads them through their strides.
"""

from __future__ import annotations

import math

from . import matmul as mm
from .geometry import permute, reshape_view


def _channels_first(y, n, c, h, w):
    """(G, C/G, N * H * W) in memory, seen as (N, C, H, W)."""
    return y.view((n, c, h, w), (h * w, n * h * w, w, 1), y.offset)


def _as_groups(be, a, groups):
    """(O, ...) as the (G, O/G, rest) matrix the products take (a copy only where the
    trailing dims do not merge)."""
    rows = a.shape[0]
    return be.reshape(a, (groups, rows // groups, math.prod(a.shape[1:])))


def conv2d(be, x, w, stride, pad, dilation, groups, out_size):
    """y (N, O, Ho, Wo) of the convolution of x (N, C, H, W) with w (O, C/G, kh, kw),
    ``pad`` cells before each spatial dim (the output size says where it ends)."""
    y = mm.windows_matmul(be, _as_groups(be, w, groups), x, w.shape[2:], stride, pad,
                          dilation, out_size, groups, True)
    return _channels_first(y, x.shape[0], w.shape[0], *out_size)


def conv2d_weight_grad(be, x, gy, w_shape, stride, pad, dilation, groups):
    """dW of conv2d, shaped as the weight: dY (N, O, Ho, Wo) laid out as (G, O/G,
    N * Ho * Wo) (a view of what conv2d wrote, else one copy) times cols(x)^T."""
    g = be.reshape(permute(gy, (1, 0, 2, 3)), (groups, gy.shape[1] // groups,
                                             math.prod(gy.shape) // gy.shape[1]))
    dw = mm.windows_matmul(be, g, x, w_shape[2:], stride, pad, dilation, gy.shape[2:],
                           groups, False)
    return reshape_view(dw, tuple(w_shape))


def conv2d_input_grad(be, gy, w, x_shape, pad, dilation, groups):
    """dx of a stride-1 conv2d: dY convolved with the flipped, channel-swapped weight."""
    o, cg, kh, kw = w.shape
    s0, s1, s2, s3 = w.strides
    # w'[g, c, o, i, j] = w[g * O/G + o, c, kh - 1 - i, kw - 1 - j]: a view, copied once
    # (the weight is small) into the (G, C/G, O/G * kh * kw) matrix of the product
    flipped = w.view((groups, cg, o // groups, kh, kw), (o // groups * s0, s1, s0, -s2, -s3),
                     w.offset + (kh - 1) * s2 + (kw - 1) * s3)
    wt = be.reshape(be.copy(flipped), (groups, cg, o // groups * kh * kw))
    back = tuple(d * (k - 1) - p for d, k, p in zip(dilation, (kh, kw), pad))
    dx = mm.windows_matmul(be, wt, gy, (kh, kw), (1, 1), back, dilation, x_shape[2:],
                           groups, True)
    return _channels_first(dx, x_shape[0], x_shape[1], *x_shape[2:])
