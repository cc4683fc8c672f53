"""conv2d on a backend that reads the windows inside its matmul kernel (an implicit GEMM,
``Backend.implicit_conv2d``): the forward and both first-order gradients are one
product each, with no im2col copy and no col2im. ``Conv`` (ops/conv.py) takes this way
for float32 convolutions of stride 1, whose input gradient is itself a convolution;
its graph through the gradients (create_graph) comes from the composed definition."""

from __future__ import annotations

from ..tensor import Tensor


def takes(x, weight, stride) -> bool:
    """Whether the convolution of these operands runs as an implicit GEMM."""
    return (x._be.implicit_conv2d and len(stride) == 2 and stride == (1, 1)
            and x.dtype.name == "float32" and weight.dtype.name == "float32"
            and x.numel() > 0 and weight.numel() > 0)


def _before(pads):
    return tuple(b for b, _ in pads)


def forward(x, weight, bias, pads, dilation, groups, out_size):
    """y (N, O, Ho, Wo), laid out (O, N, Ho, Wo) in memory as the composed conv's."""
    y = Tensor._wrap(x._be.conv2d(x._data, weight._data, (1, 1), _before(pads), dilation,
                                  groups, out_size))
    return y if bias is None else y + bias.reshape(-1, 1, 1)


def gradients(g, x, w, need, pads, dilation, groups):
    """(dx, dW, dbias) for the inputs ``need`` marks, first order: dx a convolution of g
    with the flipped weight, dW a product of g with x's windows, dbias a sum of g."""
    be, gd = x._be, g._data
    gx = gw = gb = None
    if need[0] is not None:
        gx = Tensor._wrap(be.conv2d_input_grad(gd, w._data, x.shape, _before(pads),
                                               dilation, groups))
    if need[1] is not None:
        gw = Tensor._wrap(be.conv2d_weight_grad(x._data, gd, w.shape, (1, 1), _before(pads),
                                                dilation, groups))
    if need[2] is not None:
        gb = g.sum((0, 2, 3))
    return gx, gw, gb
