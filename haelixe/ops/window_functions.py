"""The signal windows of torch: hann_window, hamming_window, blackman_window,
bartlett_window and kaiser_window. Each is computed on the host in float64 from its
formula over N = window_length (+ 1 when periodic: the window of N points with its last
dropped, as for a DFT) and rounded once to the requested float dtype."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import creation
from .. import dtype as dt
from ..errors import OpError, OpTypeError
from .registry import function


def _window(op, window_length, periodic, dtype, device, requires_grad, formula):
    if isinstance(window_length, bool) or not isinstance(window_length, numbers.Integral):
        raise TypeError(f"{op}: window_length must be an int, got "
                        f"{type(window_length).__name__}")
    if window_length < 0:
        raise OpError(f"{op} requires non-negative window_length, got window_length="
                      f"{window_length}")
    out_dtype = dt.default_float if dtype is None else dt.as_dtype(dtype)
    if not out_dtype.is_floating_point:
        raise OpTypeError(f"{op} expects floating point dtypes, got {out_dtype.name}")
    if window_length <= 1:  # (no period to divide by: PyTorch's empty and [1.])
        values = np.ones(window_length)
    else:
        n_points = window_length + 1 if periodic else window_length
        n = np.arange(window_length, dtype=np.float64)
        values = formula(n, n_points - 1)
    return creation.tensor(values, dtype=out_dtype, device=device,
                           requires_grad=requires_grad)


def _cosines(*coefficients):
    """sum of c_k cos(2 pi k n / M) with alternating signs (hann, hamming, blackman)."""
    def formula(n, m):
        return sum(((-1) ** k) * c * np.cos(2.0 * math.pi * k * n / m)
                   for k, c in enumerate(coefficients))
    return formula


@function
def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False):
    """hann_window(window_length, periodic=True, ...) -> Tensor

    0.5 - 0.5 cos(2 pi n / (N - 1)) for n < window_length."""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   _cosines(0.5, 0.5))


@function
def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, pin_memory=False, requires_grad=False):
    """hamming_window(window_length, periodic=True, ...) -> Tensor

    alpha - beta cos(2 pi n / (N - 1)) for n < window_length."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _cosines(alpha, beta))


@function
def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """blackman_window(window_length, periodic=True, ...) -> Tensor

    0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))."""
    return _window("blackman_window", window_length, periodic, dtype, device,
                   requires_grad, _cosines(0.42, 0.5, 0.08))


@function
def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """bartlett_window(window_length, periodic=True, ...) -> Tensor

    The triangle 1 - |2 n / (N - 1) - 1| for n < window_length."""
    return _window("bartlett_window", window_length, periodic, dtype, device,
                   requires_grad, lambda n, m: 1.0 - np.abs(2.0 * n / m - 1.0))


@function
def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False):
    """kaiser_window(window_length, periodic=True, ...) -> Tensor

    I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta), I0 the modified Bessel function
    of order 0."""
    def formula(n, m):
        ratio = 2.0 * n / m - 1.0
        return np.i0(beta * np.sqrt(np.clip(1.0 - ratio * ratio, 0.0, None))) / np.i0(beta)
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   formula)
