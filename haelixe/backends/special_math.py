"""The special functions of the elementwise ops on numpy arrays: lgamma, digamma,
polygamma and erfinv, and the coefficients their GPU forms share (backends/wgpu/special.py).

Each works in float64 and rounds once to the input's float dtype, so float32 results are
within half an ulp of the float64 ones. The methods are textbook ones, written here:

- lgamma: a power series of lgamma(2 + z) (coefficients from zeta(k) - 1) for arguments
  near 1 and 2, the recurrence Gamma(x + 1) = x Gamma(x) down to that range from below
  10, Stirling's series from 10 on, the reflection formula for negative arguments;
- digamma: the recurrence up to 12, then its asymptotic series; reflection below 0;
- polygamma(n, x), n >= 1: (-1)^(n + 1) n! zeta(n + 1, x), the Hurwitz zeta summed
  directly up to a point and by Euler-Maclaurin beyond; a negative x is written with
  three Hurwitz zetas of positive arguments (below);
- erfinv: a closed-form first guess refined by Halley steps on erf (erfc in the tails,
  where 1 - |y| is exact and erf's rounding would not be).

At the poles they give PyTorch's values: lgamma +inf at 0 and the negative integers,
digamma -inf at +0, +inf at -0 and NaN at the negative integers, polygamma(n, .) +inf
there for odd n and -inf for even n, except trigamma (n = 1) at the negative integers,
where PyTorch's reflection formula gives pi^2 / sin(pi x)^2 of the rounded pi x (a
large finite number), and so does this.
"""

from __future__ import annotations

import math

import numpy as np

EULER_GAMMA = 0.5772156649015329
HALF_LOG_2PI = 0.9189385332046728  # log(2 pi) / 2


#: the Bernoulli numbers B_2, B_4, ..., B_20 as (numerator, denominator): B_2j is
#: BERNOULLI[j - 1]
BERNOULLI = ((1, 6), (-1, 30), (1, 42), (-1, 30), (5, 66), (-691, 2730), (7, 6),
             (-3617, 510), (43867, 798), (-174611, 330))
#: B_2j / (2j)!, j = 1, 2, ...: the Euler-Maclaurin corrections of the Hurwitz zeta
EM_COEFFICIENTS = tuple(n / (d * math.factorial(2 * j))
                        for j, (n, d) in enumerate(BERNOULLI, start=1))
#: B_2j / (2j (2j - 1)): Stirling's series of lgamma, in powers 1 / x^(2j - 1)
STIRLING_COEFFICIENTS = tuple(n / (d * 2 * j * (2 * j - 1))
                              for j, (n, d) in enumerate(BERNOULLI[:9], start=1))
#: B_2j / (2j): digamma's asymptotic series, in powers 1 / x^(2j)
DIGAMMA_COEFFICIENTS = tuple(n / (d * 2 * j) for j, (n, d) in enumerate(BERNOULLI[:9], start=1))


def hurwitz_zeta(s, q: np.ndarray, terms: int = 10, start: float = 12.0) -> np.ndarray:
    """zeta(s, q) = sum over k >= 0 of (q + k)^-s, for s > 1 (a number, or an array that
    broadcasts with q) and every q > 0 (float64).

    The terms below ``a = max(start, 2 s)`` are summed directly (smallest first), the
    rest by Euler-Maclaurin at a, whose corrections fall by about ((s + 2j) / (2 pi a))^2
    each: ``terms`` of them leave less than an ulp. Past MAX_DIRECT terms (s above 64)
    the rest is dropped: it is below (1 - 64 / s)^s ~ exp(-64) of the first term."""
    q = np.asarray(q, np.float64)
    s = np.asarray(s, np.float64)
    shift = np.maximum(np.ceil(np.maximum(start, 2.0 * s) - q), 0.0)  # summed directly
    capped = shift > MAX_DIRECT
    shift = np.minimum(shift, MAX_DIRECT)
    a = q + shift
    with np.errstate(all="ignore"):
        inv = 1.0 / a
        a_s = a ** -s
        total = a ** (1.0 - s) / (s - 1.0) + 0.5 * a_s
        t = s * a_s * inv  # s (s + 1) ... (s + 2j - 2) a^(-s - 2j + 1), j = 1
        for j, c in enumerate(EM_COEFFICIENTS[:terms], start=1):
            total = total + c * t
            t = t * ((s + 2 * j - 1) * (s + 2 * j)) * (inv * inv)
        total = np.where(capped, 0.0, total)
        for k in range(int(shift.max(initial=0.0)) - 1, -1, -1):
            total = total + np.where(k < shift, (q + k) ** -s, 0.0)
    return total


#: the most terms hurwitz_zeta sums directly
MAX_DIRECT = 128


def _zeta_minus_one(kmax: int) -> list:
    """zeta(k) - 1 for k = 2 .. kmax: hurwitz_zeta's sum at q = 2 in plain floats (a
    numpy call per k would cost the import milliseconds)."""
    out = []
    for k in range(2, kmax + 1):
        a = max(12, 2 * k)  # (terms 2 .. a - 1 directly, the rest by Euler-Maclaurin)
        tail = a ** (1.0 - k) / (k - 1.0) + 0.5 * a ** -k
        t = k * a ** (-k - 1.0)
        for j, c in enumerate(EM_COEFFICIENTS, start=1):
            tail += c * t
            t *= (k + 2 * j - 1) * (k + 2 * j) / (a * a)
        out.append(sum(n ** -k for n in range(a - 1, 1, -1)) + tail)
    return out


#: lgamma(2 + z) = sum over k >= 1 of LGAMMA_SERIES[k - 1] z^k (|z| <= 1/2 here): the
#: first is 1 - gamma, then (-1)^k (zeta(k) - 1) / k
LGAMMA_SERIES = (1.0 - EULER_GAMMA,) + tuple(
    (-1.0) ** k * c / k for k, c in enumerate(_zeta_minus_one(32), start=2))


def _horner(coefficients, z):
    """sum of coefficients[i] * z^i."""
    p = np.zeros_like(z) + coefficients[-1]
    for c in coefficients[-2::-1]:
        p = p * z + c
    return p


def _lgamma2(z):
    """lgamma(2 + z) for |z| <= 1/2: exact near the zeros of lgamma at 1 and 2."""
    return z * _horner(LGAMMA_SERIES, z)


def _as_float64(x):
    """(x as a float64 array of at least one dim, the dtype to return, x's shape)."""
    a = np.asarray(x)
    dtype = a.dtype if a.dtype.kind == "f" else np.dtype(np.float64)
    return np.atleast_1d(a.astype(np.float64)), dtype, a.shape


def in_blocks(fn, v, *args, size: int = 32768):
    """fn(v, *args) over blocks of ``size`` elements of the 1-d ``v``, joined: a
    quadrature's temporaries (its nodes times the elements) stay a few MB."""
    if v.size <= size:
        return fn(v, *args)
    return np.concatenate([fn(v[i:i + size], *args) for i in range(0, v.size, size)])


def _back(out, dtype, shape):
    return out.reshape(shape).astype(dtype, copy=False)


def _sinpi_abs(x):
    """|sin(pi x)|, from x's distance to its nearest integer (exact), not from pi * x."""
    return np.abs(np.sin(np.pi * (x - np.round(x))))


def _lgamma_positive(x):
    out = np.empty_like(x)
    tiny, low, mid = x < 0.5, (x >= 0.5) & (x < 1.5), (x >= 1.5) & (x < 10.0)
    big = x >= 10.0
    v = x[tiny]  # lgamma(x) = lgamma(x + 2) - log(x (x + 1))
    out[tiny] = _lgamma2(v) - np.log1p(v) - np.log(v)
    v = x[low] - 1.0
    out[low] = _lgamma2(v) - np.log1p(v)
    v = x[mid]  # down to [1.5, 2.5): lgamma(x) = lgamma(x - k) + log((x - 1) ... (x - k))
    k = np.floor(v - 1.5)
    f = v - k
    product = np.ones_like(v)
    for j in range(1, 9):
        product = np.where(j <= k, product * (v - j), product)
    out[mid] = _lgamma2(f - 2.0) + np.log(product)
    v = x[big]
    r = 1.0 / v
    series = r * _horner(STIRLING_COEFFICIENTS, r * r)
    with np.errstate(all="ignore"):
        value = (v - 0.5) * np.log(v) - v + HALF_LOG_2PI + series
    out[big] = np.where(v == np.inf, np.inf, value)
    return out


def lgamma(x):
    """log |Gamma(x)|, elementwise (+inf at 0, -0, the negative integers and -inf)."""
    v, dtype, shape = _as_float64(x)
    out = np.full_like(v, np.nan)
    with np.errstate(all="ignore"):
        pos = v > 0
        out[pos] = _lgamma_positive(v[pos])
        pole = (v <= 0) & (v == np.floor(v))
        out[pole] = np.inf
        neg = (v < 0) & ~pole
        w = v[neg]  # reflection: Gamma(x) Gamma(1 - x) = pi / sin(pi x)
        out[neg] = np.log(np.pi / _sinpi_abs(w)) - _lgamma_positive(1.0 - w)
    return _back(out, dtype, shape)


def _digamma_positive(x):
    v = x.copy()
    shift = np.zeros_like(x)
    for _ in range(12):  # psi(x) = psi(x + 1) - 1 / x, until x >= 12
        below = v < 12.0
        shift = shift + np.where(below, 1.0 / v, 0.0)
        v = np.where(below, v + 1.0, v)
    with np.errstate(all="ignore"):
        r2 = 1.0 / (v * v)
        series = r2 * _horner(DIGAMMA_COEFFICIENTS, r2)
        return np.log(v) - 0.5 / v - series - shift


def digamma(x):
    """psi(x) = d/dx lgamma(x), elementwise (-inf at +0, +inf at -0, NaN at the negative
    integers and -inf)."""
    v, dtype, shape = _as_float64(x)
    out = np.full_like(v, np.nan)
    with np.errstate(all="ignore"):
        pos = v > 0
        out[pos] = _digamma_positive(v[pos])
        zero = v == 0
        out[zero] = np.copysign(np.inf, -v[zero])
        neg = (v < 0) & (v != np.floor(v))
        w = v[neg]  # reflection: psi(1 - x) - psi(x) = pi / tan(pi x)
        out[neg] = _digamma_positive(1.0 - w) - np.pi / np.tan(np.pi * (w - np.round(w)))
    return _back(out, dtype, shape)


def _factorial(n: int) -> float:
    return float(math.factorial(n)) if n <= 170 else math.inf


def _hurwitz_any(s: int, v):
    """sum over k >= 0 of (v + k)^-s for finite v: +inf at the poles (0 and the
    negative integers). For v < 0 with m = ceil(-v) and r = v + m in (0, 1), the m terms
    of negative base are (-1)^s (zeta(s, 1 - r) - zeta(s, m + 1 - r))."""
    out = np.full_like(v, np.nan)
    pos = v > 0
    out[pos] = hurwitz_zeta(float(s), v[pos])
    pole = (v <= 0) & (v == np.floor(v))
    out[pole] = np.inf
    neg = (v < 0) & ~pole
    w = v[neg]
    m = np.ceil(-w)
    # 1 - r as -(v + m - 1), exact (1 - (v + m) would round r first, and near a pole
    # (1 - r)^-s is the largest term)
    rest = -(w + (m - 1.0))
    parity = -1.0 if s % 2 else 1.0
    out[neg] = hurwitz_zeta(float(s), w + m) + parity * (
        hurwitz_zeta(float(s), rest) - hurwitz_zeta(float(s), m + rest))
    return out


def polygamma(n, x):
    """The n-th derivative of digamma, elementwise (n an integer >= 0, as a number)."""
    order = int(n)
    if order != n or order < 0:
        raise ValueError(f"polygamma: n must be an integer >= 0, got {n}")
    if order == 0:
        return digamma(x)
    v, dtype, shape = _as_float64(x)
    scale = _factorial(order) * (1.0 if order % 2 else -1.0)
    finite = np.isfinite(v)
    with np.errstate(all="ignore"):
        out = np.full_like(v, np.nan)
        out[finite] = scale * _hurwitz_any(order + 1, v[finite])
        # PyTorch's values at the infinities: trigamma's 0 at +inf and NaN at -inf
        # (sin(pi x) is NaN there), the others' NaN at +inf and the pole's at -inf
        out[v == np.inf] = 0.0 if order == 1 else np.nan
        out[v == -np.inf] = np.nan if order == 1 else scale * np.inf
        if order == 1:
            # and trigamma's values at the negative integers: finite, pi^2 / sin(pi x)^2
            # with pi x rounded in the input's dtype (PyTorch's reflection there)
            at = finite & (v < 0) & (v == np.floor(v))
            w = np.asarray(v[at], dtype)
            pi = dtype.type(np.pi)
            out[at] = (pi * pi / np.square(np.sin(pi * w))).astype(np.float64)
    return _back(out, dtype, shape)


def zeta(x, q):
    """The Hurwitz zeta function zeta(x, q) = sum over k >= 0 of (q + k)^-x, elementwise,
    with PyTorch's values off its domain: +inf at x = 1 and where q is 0 or a negative
    integer, NaN for x < 1, for q = +inf, and for q < 0 with x not an integer (an
    integer x sums the terms of negative base, as _hurwitz_any). At x = +inf: 1 at q = 1,
    +inf for 0 < q < 1, NaN beyond."""
    xa, qa = np.asarray(x), np.asarray(q)
    dtype = np.result_type(xa, qa)
    dtype = dtype if dtype.kind == "f" else np.dtype(np.float64)
    xv, qv = (np.atleast_1d(a.astype(np.float64)) for a in np.broadcast_arrays(xa, qa))
    shape = np.broadcast_shapes(xa.shape, qa.shape)
    out = np.full(xv.shape, np.nan)
    with np.errstate(all="ignore"):
        domain = (xv > 1.0) & (xv < np.inf)
        pos = domain & (qv > 0) & (qv < np.inf)
        out[pos] = hurwitz_zeta(xv[pos], qv[pos])
        pole = (xv > 1.0) & (qv <= 0) & (qv == np.floor(qv))
        out[pole] = np.inf
        neg = domain & (qv < 0) & (qv != np.floor(qv)) & (xv == np.floor(xv))
        s, w = xv[neg], qv[neg]
        m = np.ceil(-w)
        rest = -(w + (m - 1.0))  # 1 - r, r = w + m (exact: see _hurwitz_any)
        parity = np.where(np.fmod(s, 2.0) == 1.0, -1.0, 1.0)
        out[neg] = hurwitz_zeta(s, w + m) + parity * (
            hurwitz_zeta(s, rest) - hurwitz_zeta(s, m + rest))
        top = xv == np.inf
        out[top & (qv == 1.0)] = 1.0
        out[top & (qv > 0) & (qv < 1.0)] = np.inf
        out[xv == 1.0] = np.inf
    return out.reshape(shape).astype(dtype, copy=False)


_erf = np.frompyfunc(math.erf, 1, 1)
_erfc = np.frompyfunc(math.erfc, 1, 1)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
#: the constant of the first guess (Winitzki's form: within 2e-3 of erfinv everywhere)
_GUESS_A = 0.147


def erfinv_guess(a, one_minus_a):
    """erfinv(a) for 0 <= a < 1 within a few parts in a thousand, from log(1 - a^2)."""
    log_term = np.log(one_minus_a * (1.0 + a))
    t = 2.0 / (np.pi * _GUESS_A) + 0.5 * log_term
    return np.sqrt(np.sqrt(t * t - log_term / _GUESS_A) - t)


def erfinv(x):
    """The inverse of erf on [-1, 1], elementwise (+-inf at +-1, NaN outside)."""
    v, dtype, shape = _as_float64(x)
    out = np.full_like(v, np.nan)
    a = np.abs(v)
    inside = a < 1.0
    out[a == 1.0] = np.copysign(np.inf, v[a == 1.0])
    y = a[inside]
    tail = y > 0.5
    rest = 1.0 - y  # (exact where y > 1/2: the tails' residual is erfc(x) - (1 - y))
    with np.errstate(all="ignore"):
        x = erfinv_guess(y, rest)
        for _ in range(3):  # Halley steps on erf(x) - y: the error cubes each time
            residual = np.empty_like(x)
            residual[~tail] = _erf(x[~tail]).astype(np.float64) - y[~tail]
            residual[tail] = rest[tail] - _erfc(x[tail]).astype(np.float64)
            step = residual / (_TWO_OVER_SQRT_PI * np.exp(-x * x))  # (erf'' = -2x erf')
            x = x - step / (1.0 + x * step)
    out[inside] = np.copysign(x, v[inside])  # (erfinv(-0.0) is -0.0)
    return _back(out, dtype, shape)


def _scalar(f):
    """``f`` on a Python number, giving a Python float (the derivatives' scalar math)."""
    return lambda *args: float(f(*args[:-1], np.float64(args[-1])))


#: the functions on plain numbers (ops/registry.py's _SCALAR_MATH)
SCALAR = {"lgamma": _scalar(lgamma), "digamma": _scalar(digamma),
          "polygamma": _scalar(polygamma), "erfinv": _scalar(erfinv),
          "zeta": lambda x, q: float(zeta(np.float64(x), np.float64(q)))}
