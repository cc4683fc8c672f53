"""The regularized incomplete gamma functions P(a, x) (igamma, special.gammainc) and
Q(a, x) = 1 - P (igammac, special.gammaincc) in numpy, in float64 whatever the input.

Below x = a + 1 the power series of P converges fast; above it the continued fraction
of Q does (evaluated by the modified Lentz method); each side gives the other as 1
minus it. The edge values are PyTorch's: NaN for a or x negative or NaN and for
a = x = 0; P = 1 at a = 0 < x or x = inf (a finite); P = 0 at x = 0 < a or a = inf
(x finite)."""

from __future__ import annotations

import numpy as np

from .special_math import lgamma

_EPS = 1e-16
_TINY = 1e-300
_MAX_TERMS = 2000


def _prefactor(a, x):
    """x^a e^-x / Gamma(a), in log space."""
    with np.errstate(all="ignore"):
        return np.exp(a * np.log(x) - x - lgamma(a))


def _series_p(a, x):
    term = 1.0 / a
    total = term.copy()
    for n in range(1, _MAX_TERMS):
        term = term * x / (a + n)
        total += term
        if np.all(np.abs(term) <= np.abs(total) * _EPS):
            break
    return total * _prefactor(a, x)


def _fraction_q(a, x):
    b = x + 1.0 - a
    c = np.full_like(x, 1.0 / _TINY)
    d = 1.0 / b
    h = d.copy()
    for i in range(1, _MAX_TERMS):
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = np.where(np.abs(d) < _TINY, _TINY, d)
        c = b + an / c
        c = np.where(np.abs(c) < _TINY, _TINY, c)
        d = 1.0 / d
        delta = d * c
        h = h * delta
        if np.all(np.abs(delta - 1.0) <= _EPS):
            break
    return h * _prefactor(a, x)


def _regularized(a, x, upper):
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    out = np.full(a.shape, np.nan)
    ordinary = (a > 0) & (x > 0) & np.isfinite(a) & np.isfinite(x)
    low = ordinary & (x < a + 1.0)
    high = ordinary & ~low
    with np.errstate(all="ignore"):
        if low.any():
            p = _series_p(a[low], x[low])
            out[low] = 1.0 - p if upper else p
        if high.any():
            q = _fraction_q(a[high], x[high])
            out[high] = q if upper else 1.0 - q
    one, zero = (0.0, 1.0) if upper else (1.0, 0.0)  # (P's 1 is Q's 0)
    out[(a == 0) & (x > 0)] = one
    out[(x == np.inf) & (a > 0) & np.isfinite(a)] = one
    out[(x == 0) & (a > 0)] = zero
    out[(a == np.inf) & (x >= 0) & np.isfinite(x)] = zero
    return out


def _in_dtype(fn):
    def call(a, x):
        dtype = np.result_type(np.asarray(a).dtype, np.asarray(x).dtype)
        out = fn(a, x)
        return out.astype(dtype) if np.issubdtype(dtype, np.floating) else out
    call.__name__ = fn.__name__
    return call


gammainc = _in_dtype(lambda a, x: _regularized(a, x, False))
gammaincc = _in_dtype(lambda a, x: _regularized(a, x, True))
gammainc.__name__, gammaincc.__name__ = "gammainc", "gammaincc"
SCALAR = {"gammainc": lambda a, x: float(gammainc(np.float64(a), np.float64(x))),
          "gammaincc": lambda a, x: float(gammaincc(np.float64(a), np.float64(x)))}
