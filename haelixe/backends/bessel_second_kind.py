"""The Bessel functions of the second kind of torch.special on numpy arrays: bessel_y0 and
bessel_y1 (Y_0, Y_1), modified_bessel_k0 and modified_bessel_k1 (K_0, K_1) and their
scaled forms exp(x) K_n(x) (their GPU forms: backends/wgpu/special_bessel.py).

Each works in float64 and rounds once to the input's float dtype. All are defined for
x > 0: NaN below 0 (-inf for Y and +inf for K at 0 and -0, as PyTorch's). The methods:

- Y_n below 2: the power series (Abramowitz and Stegun 9.1.11), with the harmonic numbers
  H_k; from 2 to 25 the Neumann series Y_0 = (2 / pi) ((log(x / 2) + gamma) J_0 - 2 sum
  of (-1)^k J_2k / k), and Y_1 = -Y_0' term by term, whose J_m come from Miller's
  backward recurrence J_(m-1) = (2m / x) J_m - J_(m+1) from m = 80, normalised by
  J_0 + 2 sum of J_2k = 1 (the recurrence is stable backwards, and the sums have no
  large terms to cancel); past 25 Hankel's expansion, bessel_math's for J with sin and
  cos exchanged. NaN at +inf, as PyTorch's;
- K_n up to 1: the power series (Abramowitz and Stegun 9.6.11, 9.6.13); from 1 to 20 the
  trapezoidal rule on exp(x) K_n(x) = integral over t >= 0 of exp(-2x sinh(t / 2)^2)
  cosh(n t), step 1/8 (the integrand is analytic and falls off doubly exponentially, so
  the rule's error is below exp(-50) of the value); past 20 the asymptotic series
  sqrt(pi / (2x)) sum of a_k / x^k, bessel_math's for I at -x. 0 at +inf.
"""

from __future__ import annotations

import math

import numpy as np

from .bessel_math import _asymptotic, hankel_parts
from .special_math import EULER_GAMMA, _as_float64, _back, _scalar, in_blocks

_SERIES_TERMS = 26  # (below 2, (x / 2)^2k / (k!)^2 is below 1e-50 of the first term there)
_MILLER_FROM = 80  # (even; J_80 is below 1e-23 at 25)
_HANKEL_FROM = 25.0
_SERIES_BELOW = 2.0
#: K's series up to here (beyond, its log term cancels a digit of the sum by 2)
_K_SERIES_UP_TO = 1.0
_K_ASYMPTOTIC_FROM = 20.0
#: the trapezoidal rule's nodes, step 1/8 up to 4.5 (past it exp(-2 sinh(t / 2)^2) cosh t
#: is below 4e-18): the weights halve the one at 0
_NODES = np.arange(37) * 0.125
_WEIGHTS = np.where(_NODES == 0, 0.0625, 0.125)
_TWO_OVER_PI = 2.0 / math.pi


def _harmonic_terms(q, n):
    """(sum of q^k / (k! (k + n)!), sum of c_k q^k / (k! (k + n)!)) over k >= 0 for
    n = 0, 1, with c_k = H_k (n = 0) or H_k + H_(k+1) (n = 1): the power series' parts."""
    term = np.ones_like(q)
    plain = term.copy()
    weighted = term * (1.0 if n else 0.0)  # (H_0 = 0, H_0 + H_1 = 1)
    h = 0.0
    for k in range(1, _SERIES_TERMS):
        term = term * q / (k * (k + n))
        h += 1.0 / k
        plain = plain + term
        weighted = weighted + term * (h + h + 1.0 / (k + 1) if n else h)
    return plain, weighted


def _y_series(x, n):
    """Y_n(x) for 0 < x < 2 from the power series: (2/pi)(log(x/2) + gamma) J_n(x), less
    (2 / (pi x)) for n = 1, less the harmonic sum."""
    q = -0.25 * x * x
    plain, weighted = _harmonic_terms(q, n)
    log_term = np.log(0.5 * x) + EULER_GAMMA
    if n == 0:
        return _TWO_OVER_PI * (log_term * plain - weighted)
    half = 0.5 * x
    return _TWO_OVER_PI * (log_term * half * plain - 1.0 / x - 0.5 * half * weighted)


def _y_neumann(x, n):
    """Y_n(x) for 2 <= x <= 25 from the Neumann series (see the module docstring)."""
    later = np.zeros_like(x)  # J_(m+1), J_m up to one scale
    now = np.full_like(x, 1e-30)
    norm = np.zeros_like(x)  # 2 sum of J_2k
    even = np.zeros_like(x)  # sum of (-1)^k J_2k / k
    odd = np.zeros_like(x)  # sum of (-1)^k (J_(2k-1) - J_(2k+1)) / k
    for m in range(_MILLER_FROM, 0, -1):
        if m % 2 == 0:
            k = m // 2
            norm += 2.0 * now
            even += (-1.0) ** k * now / k
        else:  # (J_m with m = 2k - 1 and 2k + 1: k = (m + 1) / 2 and (m - 1) / 2)
            k = (m + 1) // 2
            odd += (-1.0) ** k * now / k
            if m > 1:
                odd -= (-1.0) ** (k - 1) * now / (k - 1)
        later, now = now, (2.0 * m / x) * now - later
    j0 = now
    norm += j0
    log_term = np.log(0.5 * x) + EULER_GAMMA
    if n == 0:
        return _TWO_OVER_PI * (log_term * j0 - 2.0 * even) / norm
    return _TWO_OVER_PI * (log_term * later - j0 / x + odd) / norm


def _y_hankel(x, n):
    """Y_n(x) for x > 25 (Hankel's expansion)."""
    p, q, cos_chi, sin_chi = hankel_parts(x, n)
    return (p * sin_chi + q * cos_chi) / np.sqrt(math.pi * x)


def _bessel_y(x, n):
    v, dtype, shape = _as_float64(x)
    out = np.full_like(v, np.nan)  # (below 0, NaN, +inf: PyTorch's)
    with np.errstate(all="ignore"):
        out[v == 0] = -np.inf
        small = (v > 0) & (v < _SERIES_BELOW)
        out[small] = _y_series(v[small], n)
        middle = (v >= _SERIES_BELOW) & (v <= _HANKEL_FROM)
        out[middle] = _y_neumann(v[middle], n)
        big = (v > _HANKEL_FROM) & (v < np.inf)
        out[big] = _y_hankel(v[big], n)
    return _back(out, dtype, shape)


def bessel_y0(x):
    """The Bessel function of the second kind of order 0."""
    return _bessel_y(x, 0)


def bessel_y1(x):
    """The Bessel function of the second kind of order 1."""
    return _bessel_y(x, 1)


def _k_series(x, n):
    """K_n(x) for 0 < x <= 1 from the power series."""
    q = 0.25 * x * x
    plain, weighted = _harmonic_terms(q, n)
    log_term = np.log(0.5 * x) + EULER_GAMMA
    if n == 0:
        return weighted - log_term * plain
    half = 0.5 * x
    return 1.0 / x + log_term * half * plain - 0.5 * half * weighted


def _k_scaled_trapezoid(x, n):
    """exp(x) K_n(x) for 1 < x <= 20 by the trapezoidal rule (module docstring)."""
    s = np.sinh(0.5 * _NODES)
    f = np.exp(-2.0 * x[:, None] * (s * s))
    if n:
        f = f * np.cosh(_NODES)
    return f @ _WEIGHTS


def _k_scaled_asymptotic(x, n):
    return np.sqrt(0.5 * math.pi / x) * _asymptotic(-x, n)


def _bessel_k(x, n, scaled):
    v, dtype, shape = _as_float64(x)
    out = np.full_like(v, np.nan)  # (below 0 and NaN: NaN, as PyTorch's)
    with np.errstate(all="ignore"):
        out[v == 0] = np.inf
        small = (v > 0) & (v <= _K_SERIES_UP_TO)
        s = _k_series(v[small], n)
        out[small] = s * np.exp(v[small]) if scaled else s
        for region, form in (((v > _K_SERIES_UP_TO) & (v <= _K_ASYMPTOTIC_FROM),
                              _k_scaled_trapezoid),
                             ((v > _K_ASYMPTOTIC_FROM) & (v < np.inf), _k_scaled_asymptotic)):
            b = v[region]
            s = in_blocks(form, b, n)
            # (exp(-x) in halves: a result below the normal floats keeps its digits)
            out[region] = s if scaled else s * np.exp(-0.5 * b) * np.exp(-0.5 * b)
        out[v == np.inf] = 0.0
    return _back(out, dtype, shape)


def modified_bessel_k0(x):
    """The modified Bessel function of the second kind of order 0."""
    return _bessel_k(x, 0, False)


def modified_bessel_k1(x):
    """The modified Bessel function of the second kind of order 1."""
    return _bessel_k(x, 1, False)


def scaled_modified_bessel_k0(x):
    """exp(x) modified_bessel_k0(x)."""
    return _bessel_k(x, 0, True)


def scaled_modified_bessel_k1(x):
    """exp(x) modified_bessel_k1(x)."""
    return _bessel_k(x, 1, True)


NAMES = ("bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
         "scaled_modified_bessel_k0", "scaled_modified_bessel_k1")
#: the functions on plain numbers (ops/registry.py's _SCALAR_MATH)
SCALAR = {name: _scalar(globals()[name]) for name in NAMES}
