"""``F.lp_pool1d/2d/3d`` and their layers: the p-norm of each window,
(sum of x^p)^(1/p), from the average pool of x^p (PyTorch's formula)."""

from __future__ import annotations

import math

from ..ops.pooling import avg_pool1d, avg_pool2d, avg_pool3d
from ..ops.registry import Layer, fused


def _sizes(value, n: int, op: str, what: str) -> tuple:
    sizes = (value,) * n if isinstance(value, int) else tuple(value)
    if len(sizes) != n:
        raise ValueError(f"{op}: {what} must be an int or {n} ints, got {value!r}")
    return sizes


def _lp_pool(pool, n: int, op: str, input, norm_type, kernel_size, stride, ceil_mode):  # noqa: A002
    kernel = _sizes(kernel_size, n, op, "kernel_size")
    stride = kernel if stride is None else stride
    out = pool(input.pow(norm_type), kernel, stride, 0, ceil_mode)
    # (sign * relu(|.|): as PyTorch, a negative window sum of an odd power stays negative)
    return (out.sign() * out.abs().relu()).mul(math.prod(kernel)).pow(1.0 / norm_type)


def _lp_layer(norm_type, kernel_size, stride=None, ceil_mode=False):
    return {"norm_type": norm_type, "kernel_size": kernel_size, "stride": stride,
            "ceil_mode": ceil_mode}


_SHOWN = "norm_type={norm_type}, kernel_size={kernel_size}, stride={stride}, " \
    "ceil_mode={ceil_mode}"


@fused(None, arity=1, layer=Layer("LPPool1d", _lp_layer, shown=_SHOWN))
def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """The norm_type-norm of each window of ``kernel_size`` along the last dim."""
    return _lp_pool(avg_pool1d, 1, "lp_pool1d", input, norm_type, kernel_size, stride,
                    ceil_mode)


@fused(None, arity=1, layer=Layer("LPPool2d", _lp_layer, shown=_SHOWN))
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """The norm_type-norm of each kernel_size window over the last two dims."""
    return _lp_pool(avg_pool2d, 2, "lp_pool2d", input, norm_type, kernel_size, stride,
                    ceil_mode)


@fused(None, arity=1, layer=Layer("LPPool3d", _lp_layer, shown=_SHOWN))
def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """The norm_type-norm of each kernel_size window over the last three dims."""
    return _lp_pool(avg_pool3d, 3, "lp_pool3d", input, norm_type, kernel_size, stride,
                    ceil_mode)
