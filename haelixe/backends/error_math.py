"""The error-function family of the elementwise ops on numpy arrays: erfc, erfcx, ndtr,
log_ndtr and ndtri (their GPU forms: backends/wgpu/error_functions.py).

Each works in float64 and rounds once to the input's float dtype, as special_math's:

- erfc: libm's (Python's math.erfc), exact in the upper tail where 1 - erf is not;
- erfcx(x) = exp(x^2) erfc(x): exp of x^2 split into its rounded value and the rounding
  error (so exp's argument is exact), and from 25 on the asymptotic series
  1 / (x sqrt(pi)) * sum of (-1)^k (2k - 1)!! / (2 x^2)^k, whose eighth term is below an
  ulp there; below 0, 2 exp(x^2) - erfcx(-x);
- ndtr(x) = erfc(-x / sqrt(2)) / 2, the rounding error of x / sqrt(2) corrected by
  erfc's slope (in the tails erfc multiplies it by about x^2); exact in the lower tail,
  where PyTorch's (1 + erf(x / sqrt(2))) / 2 is not;
- log_ndtr: log1p(-erfc(t) / 2) from -1 on (the same correction), log(erfcx(-t) / 2) -
  t^2 below (t = x / sqrt(2)), finite as far down as t^2 is;
- ndtri: sqrt(2) erfinv(2p - 1) on [1/4, 3/4], where 2p - 1 is exact; below, Newton's
  steps on log_ndtr(x) = log(p) from Abramowitz and Stegun's 26.2.23 first guess (within
  5e-4), exact down to the subnormals; above, -ndtri(1 - p) (1 - p exact there).
"""

from __future__ import annotations

import math

import numpy as np

from .special_math import _as_float64, _back, _scalar, erfinv

_erfc = np.frompyfunc(math.erfc, 1, 1)
_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_LN2 = math.log(2.0)
#: from here erfcx is its asymptotic series (eight terms)
_ASYMPTOTIC_FROM = 25.0
_SPLIT = 134217729.0  # 2^27 + 1: Dekker's splitting constant for float64


def _erfc64(v):
    return _erfc(v).astype(np.float64) if v.size else v.copy()


def _square_parts(x):
    """(hi, lo) with hi + lo == x * x exactly (Dekker's product, no fma needed)."""
    hi = x * x
    c = _SPLIT * x
    xh = c - (c - x)
    xl = x - xh
    lo = ((xh * xh - hi) + 2.0 * xh * xl) + xl * xl
    return hi, lo


def _exp_square(x):
    """exp(x^2) without the rounding of x^2 (its error times exp's slope 1)."""
    hi, lo = _square_parts(x)
    with np.errstate(all="ignore"):
        # (past |x| = 27 exp(x^2) overflows, and the split itself past 1e154)
        return np.where(np.abs(x) > 27.0, np.inf, np.exp(hi) * (1.0 + lo))


def _erfcx64(v):
    out = np.empty_like(v)
    with np.errstate(all="ignore"):
        big = v >= _ASYMPTOTIC_FROM
        w = v[big]
        r = 1.0 / (2.0 * w * w)
        term, total = np.ones_like(w), np.ones_like(w)
        for k in range(1, 8):
            term = term * (-(2 * k - 1) * r)
            total = total + term
        out[big] = np.where(w == np.inf, 0.0, total * _INV_SQRT_PI / w)
        mid = (v >= 0) & ~big
        out[mid] = _exp_square(v[mid]) * _erfc64(v[mid])
        low = v < 0
        w = v[low]
        out[low] = 2.0 * _exp_square(w) - (_erfcx64(-w) if w.size else w)
        nan = np.isnan(v)
        out[nan] = v[nan]
    return out


def erfc(x):
    """1 - erf(x), exact in the upper tail."""
    v, dtype, shape = _as_float64(x)
    return _back(_erfc64(v), dtype, shape)


def erfcx(x):
    """exp(x^2) erfc(x): 1 / (x sqrt(pi)) for large x, +inf for very negative x."""
    v, dtype, shape = _as_float64(x)
    return _back(_erfcx64(v), dtype, shape)


#: 1 / sqrt(2) beyond its float64 rounding
_SQRT_HALF_LO = 6.268583589525109e-17


def _erfc_scaled(v, sign):
    """erfc(sign * v / sqrt(2)) with the argument's rounding error (Dekker's product, and
    1/sqrt(2)'s own) corrected by erfc's slope: in the tails that error would be
    multiplied by about v^2."""
    t = sign * v * _SQRT_HALF
    c = _SPLIT * v
    vh = c - (c - v)
    vl = v - vh
    ch = _SPLIT * _SQRT_HALF
    ch = ch - (ch - _SQRT_HALF)
    cl = _SQRT_HALF - ch
    with np.errstate(all="ignore"):
        err = ((vh * ch - sign * t) + vh * cl + vl * ch) + vl * cl + v * _SQRT_HALF_LO
        err = np.where(np.isfinite(err), sign * err, 0.0)
        return _erfc64(t) - err * (2.0 / math.sqrt(math.pi)) * np.exp(-t * t)


def _ndtr64(v):
    return 0.5 * _erfc_scaled(v, -1.0)


def ndtr(x):
    """The standard normal distribution function, (1 + erf(x / sqrt(2))) / 2."""
    v, dtype, shape = _as_float64(x)
    return _back(_ndtr64(v), dtype, shape)


def _log_ndtr64(v):
    out = np.empty_like(v)
    t = v * _SQRT_HALF
    with np.errstate(all="ignore"):
        low = v < -1.0
        w = t[low]
        out[low] = np.log(_erfcx64(-w)) - _LN2 - w * w
        out[~low] = np.log1p(-0.5 * _erfc_scaled(v[~low], 1.0))
    return out


def log_ndtr(x):
    """log(ndtr(x)), without underflow for very negative x."""
    v, dtype, shape = _as_float64(x)
    return _back(_log_ndtr64(v), dtype, shape)


def _ndtri_lower(p):
    """ndtri(p) for 0 < p < 1/4: Newton on log_ndtr, which is exact in the far tail."""
    log_p = np.log(p)
    t = np.sqrt(-2.0 * log_p)
    x = -(t - (2.515517 + t * (0.802853 + t * 0.010328))
          / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))))
    with np.errstate(all="ignore"):
        for _ in range(4):  # (quadratic: 5e-4, 1e-7, 1e-14, then an ulp)
            f = _log_ndtr64(x)
            slope = np.exp(-0.5 * x * x - _HALF_LOG_2PI - f)  # d log_ndtr / dx
            x = x - (f - log_p) / slope
    return x


def ndtri(x):
    """The inverse of ndtr on [0, 1]: -inf at 0, +inf at 1, NaN outside."""
    v, dtype, shape = _as_float64(x)
    out = np.full_like(v, np.nan)
    out[v == 0.0] = -np.inf
    out[v == 1.0] = np.inf
    mid = (v >= 0.25) & (v <= 0.75)
    out[mid] = math.sqrt(2.0) * erfinv(2.0 * v[mid] - 1.0)
    low = (v > 0.0) & (v < 0.25)
    out[low] = _ndtri_lower(v[low])
    high = (v > 0.75) & (v < 1.0)
    out[high] = -_ndtri_lower(1.0 - v[high])
    return _back(out, dtype, shape)


#: the functions on plain numbers (ops/registry.py's _SCALAR_MATH)
SCALAR = {name: _scalar(globals()[name]) for name in ("erfc", "erfcx", "ndtr", "log_ndtr", "ndtri")}
