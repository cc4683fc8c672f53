"""The Bessel functions of the elementwise ops on numpy arrays: i0, i0e, i1, i1e (the
modified ones of the first kind, plain and scaled by exp(-|x|)), bessel_j0, bessel_j1
and spherical_bessel_j0 (their GPU forms: backends/wgpu/special_more.py and
special_bessel.py). The second kind's are in bessel_second_kind.py.

Each works in float64 and rounds once to the input's float dtype. The methods:

- I0, I1: below |x| = 20 their power series, sum of (x/2)^(2k + n) / (k! (k + n)!),
  whose terms are all positive (no cancellation; 70 of them reach an ulp at 20); from 20
  on the asymptotic series exp(x) / sqrt(2 pi x) * sum of c_k / x^k with
  c_k = c_(k-1) * -(4 n^2 - (2k - 1)^2) / (8 k), whose smallest term (about exp(-2x)) is
  below an ulp there. The scaled forms take exp(-|x|) in the series and leave exp out of
  the asymptotic one. As PyTorch's, I0 and I1 overflow where exp(|x|) does, in the
  input's dtype;
- J0, J1: up to |x| = 25 the trapezoidal rule on Bessel's integral, J_n(x) = the mean
  over a period of cos(n t - x sin t), at 80 points (its error is of the size of
  J_80(x), below 1e-30 there); beyond, Hankel's asymptotic expansion
  sqrt(2 / (pi x)) (P cos(chi) - Q sin(chi)), chi = x - (2n + 1) pi / 4, whose cos(chi)
  and sin(chi) come from cos(x) and sin(x) (exactly reduced), not from a rounded x - chi.
  Both are NaN at the infinities, as PyTorch's;
- spherical_bessel_j0: sin(x) / x (numpy's sin is within an ulp at any x), 1 at 0 and 0
  at the infinities, as PyTorch's.
"""

from __future__ import annotations

import math

import numpy as np

from .special_math import _as_float64, _back, _scalar

_SERIES_BELOW = 20.0
_SERIES_TERMS = 72
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
#: the largest float32 whose exp is finite (PyTorch's float32 I0 and I1 overflow there)
_F32_EXP_MAX = float(np.float32(88.72283))


def _series(y, n):
    """sum over k of (y / 4)^k / (k! (k + n)!) (y = x^2), n = 0 or 1."""
    q = 0.25 * y
    term = np.ones_like(y)  # (the k = 0 term: 1 / (0! n!) = 1 for n = 0, 1)
    total = term.copy()
    for k in range(1, _SERIES_TERMS):
        term = term * q / (k * (k + n))
        total = total + term
    return total


def _asymptotic(a, n):
    """sum over k of c_k / a^k (see the module docstring), a = |x| >= 20."""
    mu = 4.0 * n * n
    term, total = np.ones_like(a), np.ones_like(a)
    for k in range(1, 40):
        term = term * (-(mu - (2 * k - 1) ** 2) / (8.0 * k * a))
        total = total + term
    return total


def _bessel_i(x, n, scaled):
    """I_n(x) (n = 0, 1), or exp(-|x|) I_n(x) where ``scaled``, in float64."""
    v, dtype, shape = _as_float64(x)
    a = np.abs(v)
    out = np.empty_like(v)
    with np.errstate(all="ignore"):
        small = a < _SERIES_BELOW
        s = _series(a[small] ** 2, n) * (0.5 * a[small] if n else 1.0)
        out[small] = s * np.exp(-a[small]) if scaled else s
        big = ~small & ~np.isnan(a)
        b = a[big]
        s = _asymptotic(b, n) * _INV_SQRT_2PI / np.sqrt(b)
        if scaled:
            out[big] = np.where(b == np.inf, 0.0, s)
        else:
            out[big] = np.where(b == np.inf, np.nan, np.exp(b) * s)
            if dtype == np.float32:  # (as PyTorch's float32: where exp(|x|) overflows)
                out[big] = np.where((b > _F32_EXP_MAX) & (b < np.inf), np.inf, out[big])
        out[np.isnan(a)] = np.nan
        if n:  # (odd; +0.0 at -0.0, as PyTorch's)
            out = np.where(v == 0, 0.0, np.copysign(out, v))
    return _back(out, dtype, shape)


def i0(x):
    """The modified Bessel function of the first kind of order 0."""
    return _bessel_i(x, 0, False)


def i0e(x):
    """exp(-|x|) i0(x)."""
    return _bessel_i(x, 0, True)


def i1(x):
    """The modified Bessel function of the first kind of order 1 (odd)."""
    return _bessel_i(x, 1, False)


def i1e(x):
    """exp(-|x|) i1(x)."""
    return _bessel_i(x, 1, True)


_TRAPEZOID_BELOW = 25.0
#: midpoints of a quarter period: J_n's integrands are even about pi / 2, so the mean
#: over these 20 is the 80-point rule's over the period
_NODES = (np.arange(20) + 0.5) * (math.pi / 40.0)
_SIN_NODES = np.sin(_NODES)


def hankel_parts(b, n):
    """Hankel's expansion at b > 25 for order n = 0, 1: (P, Q, c, s) with c and s
    sqrt(2) cos(chi) and sqrt(2) sin(chi), chi = b - (2n + 1) pi / 4, so that
    J_n(b) = (P c - Q s) / sqrt(pi b) and Y_n(b) = (P s + Q c) / sqrt(pi b)."""
    mu = 4.0 * n * n
    p, q = np.ones_like(b), np.zeros_like(b)
    term = np.ones_like(b)
    for k in range(1, 40):
        term = term * ((mu - (2 * k - 1) ** 2) / (8.0 * k * b))
        if k % 4 == 1:
            q = q + term
        elif k % 4 == 2:
            p = p - term
        elif k % 4 == 3:
            q = q - term
        else:
            p = p + term
    c, s = np.cos(b), np.sin(b)
    # (by the angle-difference formulas: cos(chi) and sin(chi) from cos(b) and sin(b))
    cos_chi, sin_chi = ((c + s), (s - c)) if n == 0 else ((s - c), -(s + c))
    return p, q, cos_chi, sin_chi


def _bessel_j(x, n):
    v, dtype, shape = _as_float64(x)
    a = np.abs(v)
    out = np.full_like(v, np.nan)  # (NaN at the infinities and NaN, as PyTorch)
    with np.errstate(all="ignore"):
        small = a <= _TRAPEZOID_BELOW
        phase = a[small, None] * _SIN_NODES
        if n == 0:
            out[small] = np.cos(phase).mean(axis=-1)
        else:  # (cos(t - x sin t) averages to sin(t) sin(x sin t))
            out[small] = (_SIN_NODES * np.sin(phase)).mean(axis=-1)
        big = ~small & np.isfinite(a)
        b = a[big]
        p, q, cos_chi, sin_chi = hankel_parts(b, n)
        out[big] = math.sqrt(1.0 / math.pi) / np.sqrt(b) * (p * cos_chi - q * sin_chi)
    if n:  # (odd, -0.0 at -0.0 as PyTorch's)
        out = np.where(np.signbit(v), -out, out)
    return _back(out, dtype, shape)


def bessel_j0(x):
    """The Bessel function of the first kind of order 0."""
    return _bessel_j(x, 0)


def bessel_j1(x):
    """The Bessel function of the first kind of order 1 (odd)."""
    return _bessel_j(x, 1)


def spherical_bessel_j0(x):
    """The spherical Bessel function of the first kind of order 0, sin(x) / x: 1 at 0, 0 at
    the infinities (as PyTorch's)."""
    v, dtype, shape = _as_float64(x)
    with np.errstate(all="ignore"):
        out = np.sin(v) / v
    out[v == 0] = 1.0
    out[np.isinf(v)] = 0.0
    return _back(out, dtype, shape)


#: the functions on plain numbers (ops/registry.py's _SCALAR_MATH)
SCALAR = {name: _scalar(globals()[name])
          for name in ("i0", "i0e", "i1", "i1e", "bessel_j0", "bessel_j1",
                       "spherical_bessel_j0")}
