"""Local response normalization across channels: F.local_response_norm with its layer
nn.LocalResponseNorm, and nn.CrossMapLRN2d (the 4-D form of the same normalization).
Composed of squares, shifted channel slices and a power, so autograd and every backend
come with it."""

from __future__ import annotations

from .. import creation
from ..dtype import default_float, int64
from ..errors import OpError
from ..ops.indexing import cat
from ..ops.registry import Layer, fused
from ..tensor import Tensor


def _check_size(op, size):
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise OpError(f"{op}: size (the channels in each window) must be a positive int, "
                      f"got {size!r}")


def _channel_windows(x, size):
    """The sum of x over each channel's window along dim 1: size // 2 channels before
    it, (size - 1) // 2 after it, zeros past the ends."""
    c = x.shape[1]
    before, after = size // 2, (size - 1) // 2
    edge = list(x.shape)
    parts = []
    for n in (before, after):
        edge[1] = n
        parts.append(creation.zeros(*edge, dtype=x.dtype, device=x.device))
    padded = cat([parts[0], x, parts[1]], 1)
    total = padded.narrow(1, 0, c)
    for j in range(1, size):
        total = total + padded.narrow(1, j, c)
    return total


def _local_response_norm_layer(size, alpha=1e-4, beta=0.75, k=1.0):
    _check_size("LocalResponseNorm", size)
    return {"size": size, "alpha": alpha, "beta": beta, "k": k}


@fused(None, arity=1, dtypes="any",
       layer=Layer("LocalResponseNorm", _local_response_norm_layer,
                   shown="{size}, alpha={alpha}, beta={beta}, k={k}"))
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):  # noqa: A002
    """input / (k + alpha / size * sum of input ** 2 over each channel's window) ** beta,
    over (N, C, *) with at least one dim after the channels; a window spans size // 2
    channels before and (size - 1) // 2 after (zeros past the ends)."""
    op = "local_response_norm"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a tensor, got {type(input).__name__}")
    if input.ndim < 3:
        raise ValueError(f"{op}: expected an input of 3 or more dims (N, C, *), got shape "
                         f"{tuple(input.shape)}; add a batch dim with unsqueeze(0)")
    _check_size(op, size)
    if input.numel() == 0:
        return input
    if input.dtype.is_floating_point:
        mean = _channel_windows(input * input, size) * (1.0 / size)
    else:
        # integers: read as int64, the window's mean truncated, then the default float
        # (PyTorch's int64 kernel; it refuses the narrower integers and bool)
        wide = input.to(int64)
        mean = (_channel_windows(wide * wide, size) // size).to(default_float)
        input = input.to(default_float)
    return input / (mean * alpha + k) ** beta


__all__ = ["local_response_norm"]
