"""Local response normalization across channels: F.local_response_norm with its layer
nn.LocalResponseNorm, and nn.CrossMapLRN2d (PyTorch's older 4-D form, whose windows
differ). Composed of squares, channel sums and a power, so autograd and every backend
come with them."""

from __future__ import annotations

import numpy as np

from .. import creation
from ..dtype import default_float, int64
from ..errors import OpError
from ..ops.indexing import cat
from ..ops.registry import Layer, fused
from ..tensor import Tensor
from .module import Module


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


def _cross_map_windows(size, c):
    """Which channels' squares each channel's scale sums, as PyTorch's CrossMapLRN2d
    forms them: a running window that starts with the first (size - 1) // 2 + 1
    channels, takes in one channel ahead per step and drops one behind only after
    that many steps (so the first channel stays in every window after the first few:
    PyTorch's result, kept). A (c, c) 0/1 matrix."""
    ahead = int((size - 1) / 2 + 1)
    m = np.zeros((c, c))
    m[0, :min(ahead, c)] = 1.0
    for i in range(1, c):
        m[i] = m[i - 1]
        if i < c - ahead + 1:
            m[i, i + ahead - 1] += 1.0
        if i > ahead:
            m[i, i - ahead] -= 1.0
    return m


class CrossMapLRN2d(Module):
    """Local response normalization of (N, C, H, W) across channels: input * (k + alpha
    / size * the window's sum of squares) ** -beta, the windows PyTorch's CrossMapLRN2d
    forms (see _cross_map_windows). Its gradient is the derivative of that forward
    (PyTorch's own backward for this layer is not)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        _check_size("CrossMapLRN2d", size)
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):  # noqa: A002 (PyTorch's name)
        if not isinstance(input, Tensor):
            raise TypeError(f"CrossMapLRN2d: input must be a tensor, got "
                            f"{type(input).__name__}")
        if input.ndim != 4:
            raise ValueError(f"CrossMapLRN2d: expected a 4D input (N, C, H, W), got "
                             f"{input.ndim}D of shape {tuple(input.shape)}")
        if not input.dtype.is_floating_point:
            raise TypeError(f"CrossMapLRN2d: not defined for {input.dtype.name} inputs; "
                            f"convert with .float() first")
        n, c, h, w = input.shape
        windows = creation.tensor(_cross_map_windows(self.size, c), dtype=input.dtype,
                                  device=input.device)
        sums = (windows @ (input * input).reshape(n, c, h * w)).reshape(n, c, h, w)
        return input * (sums * (self.alpha / self.size) + self.k) ** -self.beta

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


__all__ = ["local_response_norm", "CrossMapLRN2d"]
