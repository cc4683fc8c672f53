"""Host numpy math behind the gamma sampler: Marsaglia and Tsang's draws, the regularized
lower incomplete gamma P(a, x), and dx/da of a draw held at its quantile
(-dP/da / dP/dx, the implicit reparameterization gradient).

P and its derivative in a come from one of two expansions, each carried with its
derivative in a alongside (forward-mode): the power series below x < a + 1, where its
terms are positive and no cancellation occurs, and the Legendre continued fraction of
the upper tail Q = 1 - P beyond, where the series would subtract nearly equal sums.
Everything is float64; a caller casts back.
"""

from __future__ import annotations

import numpy as np

from ..backends.special_math import digamma, lgamma

_EPS = np.finfo(np.float64).eps
_TINY = 1e-300
_MAX_TERMS = 200_000


def _series(a, x):
    """(S, dS/da) of S = sum over n >= 0 of x^n / ((a + 1) ... (a + n)), for x < a + 1."""
    s, ds = np.ones_like(x), np.zeros_like(x)
    term, dlog = np.ones_like(x), np.zeros_like(x)
    live = np.arange(x.size)
    n = 0
    while live.size and n < _MAX_TERMS:
        n += 1
        an = a[live] + n
        term[live] *= x[live] / an
        dlog[live] -= 1.0 / an
        s[live] += term[live]
        ds[live] += term[live] * dlog[live]
        # (terms fall once a + n > x; stop when both sums stopped moving)
        done = (term[live] < _EPS * s[live]) & (x[live] < an)
        live = live[~done]
    return s, ds


def _fraction(a, x):
    """(h, dh/da) of the continued fraction with Gamma(a, x) = e^-x x^a h, for x >= a + 1
    (modified Lentz, each quantity paired with its derivative in a)."""
    b = x + 1.0 - a
    c = np.full_like(x, 1.0 / _TINY)
    dc = np.zeros_like(x)
    d = 1.0 / b
    dd = d * d  # d(1/b)/da, b falling by 1 per unit of a
    h, dh = d.copy(), dd.copy()
    live = np.arange(x.size)
    i = 0
    while live.size and i < _MAX_TERMS:
        i += 1
        al = a[live]
        an, dan = -i * (i - al), float(i)
        b[live] += 2.0
        den = an * d[live] + b[live]
        dden = dan * d[live] + an * dd[live] - 1.0
        den = np.where(np.abs(den) < _TINY, _TINY, den)
        cl, dcl = c[live], dc[live]
        cn = b[live] + an / cl
        dcn = -1.0 + dan / cl - an * dcl / (cl * cl)
        cn = np.where(np.abs(cn) < _TINY, _TINY, cn)
        dn, ddn = 1.0 / den, -dden / (den * den)
        step = dn * cn
        dstep = ddn * cn + dn * dcn
        old = dh[live]
        new = old * step + h[live] * dstep
        dh[live] = new
        h[live] *= step
        c[live], dc[live], d[live], dd[live] = cn, dcn, dn, ddn
        # (at an integer a the fraction ends, step exactly 1, while its derivative in a
        # goes on: both must have settled)
        live = live[~((np.abs(step - 1.0) < _EPS) & (np.abs(new - old) <= _EPS * np.abs(new)))]
    return h, dh


def _split(a, x):
    """Masks of the finite positive points by expansion: (series, fraction)."""
    ok = (x > 0) & (a > 0) & np.isfinite(x) & np.isfinite(a)
    lower = ok & (x < a + 1.0)
    return lower, ok & ~lower


def gamma_quantile_grad(a, x):
    """dx/da at P(a, x) fixed, elementwise over broadcast float64 arrays: 0 where x is 0
    (a draw that underflowed) or the point is outside the domain."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    a, x = a.ravel(), x.ravel()
    out = np.zeros_like(x)
    lower, upper = _split(a, x)
    with np.errstate(all="ignore"):
        al, xl = a[lower], x[lower]
        s, ds = _series(al, xl)
        # P = p(x) x S / a with p the density: dx/da = -(dP/da) / p
        out[lower] = -(xl / al) * (s * (np.log(xl) - digamma(al + 1.0)) + ds)
        au, xu = a[upper], x[upper]
        h, dh = _fraction(au, xu)
        # Q = p(x) x h: dx/da = (dQ/da) / p
        out[upper] = xu * (h * (np.log(xu) - digamma(au)) + dh)
    out[~np.isfinite(out)] = 0.0
    return out


def regularized_lower_gamma(a, x):
    """P(a, x) = gamma(a, x) / Gamma(a), elementwise over broadcast float64 arrays: 0
    at x <= 0, 1 at x = inf, NaN where a <= 0 or either is NaN."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    shape = a.shape
    a, x = a.ravel(), x.ravel()
    out = np.full_like(x, np.nan)
    valid = (a > 0) & ~np.isnan(x)
    out[valid & (x <= 0)] = 0.0
    out[valid & (x == np.inf)] = 1.0
    lower, upper = _split(a, x)
    with np.errstate(all="ignore"):
        al, xl = a[lower], x[lower]
        s, _ = _series(al, xl)
        out[lower] = np.exp(al * np.log(xl) - xl - lgamma(al + 1.0)) * s
        au, xu = a[upper], x[upper]
        h, _ = _fraction(au, xu)
        out[upper] = 1.0 - np.exp(au * np.log(xu) - xu - lgamma(au)) * h
    return out.reshape(shape)


def standard_gamma_draws(gen, alpha):
    """Gamma(alpha, 1) draws of alpha's shape (float64, alpha > 0) by Marsaglia and
    Tsang's squeeze-free rejection; alpha < 1 draws at alpha + 1 and scales by u^(1/alpha)
    (in logs, so the scale's underflow is the draw's)."""
    alpha = np.asarray(alpha, np.float64)
    flat = alpha.ravel()
    boost = flat < 1.0
    a = np.where(boost, flat + 1.0, flat)
    d = a - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    out = np.empty_like(a)
    live = np.arange(a.size)
    while live.size:
        z = gen.standard_normal(live.size)
        u = gen.random(live.size)
        v = 1.0 + c[live] * z
        ok = v > 0
        v3 = np.where(ok, v, 1.0) ** 3
        with np.errstate(divide="ignore"):
            ok &= np.log(u) < 0.5 * z * z + d[live] * (1.0 - v3 + np.log(v3))
        out[live[ok]] = d[live[ok]] * v3[ok]
        live = live[~ok]
    if boost.any():
        u = gen.random(int(boost.sum()))
        with np.errstate(divide="ignore"):
            out[boost] = np.exp(np.log(out[boost]) + np.log(u) / flat[boost])
    return out.reshape(alpha.shape)
