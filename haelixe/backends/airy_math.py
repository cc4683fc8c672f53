"""The Airy function Ai of torch.special (airy_ai) on numpy arrays (its GPU form:
backends/wgpu/special_bessel.py), in float64, rounded once to the input's float dtype.

- -3 <= x <= 1: the Maclaurin series Ai(x) = Ai(0) f(x) + Ai'(0) g(x), f and g the two
  series of x^3k and x^(3k+1) that solve y'' = x y (past 1 their sum cancels digits of
  the decaying Ai, past -3 it does not yet);
- x > 1: Ai(x) = exp(-zeta) / (2 sqrt(pi) x^(1/4) Gamma(5/6)) times the integral over
  t >= 0 of exp(-t) t^(-1/6) (1 + t / (2 zeta))^(-1/6), zeta = 2/3 x^(3/2) (K_1/3's
  integral, Abramowitz and Stegun 9.6.23, with Ai = sqrt(x / 3) K_1/3(zeta) / pi), by
  Gauss-Laguerre quadrature for the weight t^(-1/6) exp(-t), 60 points below |x| = 4
  and 24 beyond (its nodes and weights from the eigenvalues of the Jacobi matrix,
  Golub and Welsch);
- x < -3: the same integral at x e^(i pi / 3), where zeta is purely imaginary, i xi with
  xi = 2/3 |x|^(3/2), by Ai(-y) = 2 Re(e^(i pi / 3) Ai(y e^(i pi / 3))): that is
  Re(e^(-i (xi - pi / 4)) I) / (sqrt(pi) y^(1/4) Gamma(5/6)), I the integral with
  (1 - i t / (2 xi))^(-1/6).

zeta and xi are computed with their rounding error (Dekker's products), which then
corrects exp(-zeta) and the phase: rounded, they would be off by an ulp of zeta, which
exp and cos make an error of that size in the value (1e-13 at |x| = 50).

As PyTorch's: 0 from x = 103.892 on (where Ai is below 1e-307), NaN at both infinities.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from .special_math import _as_float64, _back, _scalar, in_blocks

#: Ai(0) = 1 / (3^(2/3) Gamma(2/3)) and -Ai'(0) = 1 / (3^(1/3) Gamma(1/3))
_AI0 = 1.0 / (3.0 ** (2.0 / 3.0) * math.gamma(2.0 / 3.0))
_AI1 = 1.0 / (3.0 ** (1.0 / 3.0) * math.gamma(1.0 / 3.0))
_SERIES_FROM, _SERIES_UP_TO = -3.0, 1.0
_SERIES_TERMS = 30
_ZERO_FROM = 103.892
#: Gauss-Laguerre nodes below |x| = 4 (where the integrand's branch point at
#: t = -2 zeta is near and it needs more) and from there on: each within an ulp
_NEAR_NODES, _FAR_NODES, _FAR_FROM = 60, 24, 4.0
_SCALE = 1.0 / (math.sqrt(math.pi) * math.gamma(5.0 / 6.0))
_SPLIT = 134217729.0  # 2^27 + 1: Dekker's splitting constant for float64
_TWO_THIRDS = 2.0 / 3.0
_TWO_THIRDS_LO = float(Fraction(2, 3) - Fraction(_TWO_THIRDS))  # (2/3's rounding error)


@functools.cache
def laguerre_rule(n: int, alpha: float = -1.0 / 6.0):
    """(nodes, weights) of n-point Gauss-Laguerre quadrature for t^alpha exp(-t) on
    t >= 0: the eigenvalues of the Jacobi matrix of the Laguerre polynomials L^(alpha)
    (diagonal 2i + alpha + 1, off the diagonal sqrt(i (i + alpha))), and Gamma(alpha + 1)
    times the squared first components of its eigenvectors."""
    i = np.arange(n, dtype=np.float64)
    jacobi = np.diag(2.0 * i + alpha + 1.0)
    off = np.sqrt(i[1:] * (i[1:] + alpha))
    jacobi += np.diag(off, 1) + np.diag(off, -1)
    nodes, vectors = np.linalg.eigh(jacobi)
    return nodes, math.gamma(alpha + 1.0) * vectors[0] ** 2


def _maclaurin(x):
    """Ai(x) for -3 <= x <= 1."""
    cube = x * x * x
    f, g = np.ones_like(x), x.copy()
    tf, tg = f.copy(), g.copy()
    for k in range(1, _SERIES_TERMS):
        tf = tf * cube / ((3 * k - 1) * (3 * k))
        tg = tg * cube / ((3 * k) * (3 * k + 1))
        f, g = f + tf, g + tg
    return _AI0 * f - _AI1 * g


def _two_product(a, b):
    """(a * b, its rounding error), exactly (Dekker)."""
    p = a * b
    c = _SPLIT * a
    ah = c - (c - a)
    c = _SPLIT * b
    bh = c - (c - b)
    al, bl = a - ah, b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _zeta(y):
    """(z, e): 2/3 y^(3/2) = z + e to about an ulp of e (y > 0 finite, below 1e200)."""
    s = np.sqrt(y)
    square, square_error = _two_product(s, s)
    s_error = ((y - square) - square_error) / (s + s)  # (sqrt's rounding)
    p, p_error = _two_product(y, s)
    p_error = p_error + y * s_error
    z, z_error = _two_product(_TWO_THIRDS, p)
    return z, z_error + _TWO_THIRDS * p_error + _TWO_THIRDS_LO * p


def _positive(x, points):
    """Ai(x) for 1 < x < 103.892, by the rule of ``points`` nodes."""
    nodes, weights = laguerre_rule(points)
    zeta, error = _zeta(x)
    integral = (1.0 + nodes / (2.0 * zeta[:, None])) ** (-1.0 / 6.0) @ weights
    return 0.5 * _SCALE * np.exp(-zeta) * (1.0 - error) * integral / np.sqrt(np.sqrt(x))


def _negative(x, points):
    """Ai(x) for x < -3 (module docstring)."""
    nodes, weights = laguerre_rule(points)
    y = -x
    xi, error = _zeta(y)
    s = nodes / (2.0 * xi[:, None])
    modulus = (1.0 + s * s) ** (-1.0 / 12.0)
    angle = np.arctan(s) / 6.0
    real, imaginary = (modulus * np.cos(angle)) @ weights, (modulus * np.sin(angle)) @ weights
    c, si = np.cos(xi), np.sin(xi)
    c, si = c - si * error, si + c * error  # (cos and sin at xi + error)
    # e^(-i phi), phi = xi - pi / 4: its real part and sin(phi), times sqrt(2)
    cos_phi, sin_phi = c + si, si - c
    return _SCALE * (real * cos_phi + imaginary * sin_phi) / (math.sqrt(2.0)
                                                               * np.sqrt(np.sqrt(y)))


def airy_ai(x):
    """The Airy function Ai, the solution of y'' = x y that decays as x -> +inf."""
    v, dtype, shape = _as_float64(x)
    out = np.full_like(v, np.nan)  # (NaN and the infinities: NaN, as PyTorch's)
    with np.errstate(all="ignore"):
        small = (v >= _SERIES_FROM) & (v <= _SERIES_UP_TO)
        out[small] = _maclaurin(v[small])
        near = np.abs(v) < _FAR_FROM
        for side, form in (((v > _SERIES_UP_TO) & (v < _ZERO_FROM), _positive),
                           ((v < _SERIES_FROM) & (v > -np.inf), _negative)):
            for part, points in ((side & near, _NEAR_NODES), (side & ~near, _FAR_NODES)):
                out[part] = in_blocks(form, v[part], points)
        out[(v >= _ZERO_FROM) & (v < np.inf)] = 0.0
    return _back(out, dtype, shape)


#: the functions on plain numbers (ops/registry.py's _SCALAR_MATH)
SCALAR = {"airy_ai": _scalar(airy_ai)}
