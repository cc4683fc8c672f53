"""torch.special's orthogonal polynomials on numpy arrays: the Chebyshev polynomials of
the four kinds T, U, V, W and their shifted forms T*, U*, V*, W* (x -> 2x - 1), the
physicists' and probabilists' Hermite polynomials H and He, Laguerre's L and Legendre's
P, each a function of (x, n) that broadcasts (their GPU forms:
backends/wgpu/special_polynomials.py).

They compute in the dtype of their inputs (float32 or float64), as PyTorch's do, so a
float32 value overflows (and then turns to NaN) where PyTorch's float32 one does. The
degree is n truncated toward zero; a negative degree gives 0, and so do a NaN or
infinite n (PyTorch casts those to the most negative int64). The values are PyTorch's
methods, written here from the polynomials' definitions:

- the three-term recurrence from degrees 0 and 1, run to each element's degree (or
  until the value is NaN, where it stays);
- for the Chebyshev polynomials inside (-1, 1) past a small degree (T past 6, U, V, W
  past 8; the shifted ones past 6, W* past 4), the closed forms in theta = acos(x):
  cos(n theta), sin((n + 1) theta) / sin(theta), cos((n + 1/2) theta) / cos(theta / 2),
  sin((n + 1/2) theta) / sin(theta / 2);
- the values at the ends of the interval (x = +-1; 0 and 1 for the shifted ones)
  written out, and L_n(0) = 1.

Where PyTorch's U, W, U*, W*, L and P read uninitialised memory (a NaN x, whose branches
it leaves without a value), these give NaN.
"""

from __future__ import annotations

import numpy as np

#: |n| from here on is beyond int64, where PyTorch's cast gives the most negative int64
_INT64_LIMIT = 2.0 ** 63


def _operands(x, n):
    """(x, n as float arrays of one dtype and shape, the degrees as int64, the shape)."""
    # (the dtype is the float arrays'; a Python number beside one takes its dtype, as the
    # registry's numbers do)
    floats = [v.dtype for v in (x, n)
              if isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind == "f"]
    dtype = np.result_type(*floats) if floats else np.dtype(np.float64)
    xa, na = np.asarray(x), np.asarray(n)
    shape = np.broadcast_shapes(xa.shape, na.shape)
    xv = np.broadcast_to(xa.astype(dtype, copy=False), shape).ravel()
    nv = np.broadcast_to(na.astype(dtype, copy=False), shape).ravel()
    with np.errstate(invalid="ignore"):
        usable = np.isfinite(nv) & (np.abs(nv) < _INT64_LIMIT)
        k = np.where(usable, np.trunc(np.where(usable, nv, 0)), -1).astype(np.int64)
    return xv, k, shape


def _recurrence(x, k, first, step):
    """The degree-k value at each x (every k >= 2) of the recurrence whose degree 0 is 1
    and degree 1 ``first(x)``: degree j is ``step(j, x, q, p)`` from degrees j - 1 (q) and
    j - 2 (p). The elements are taken in decreasing degree, so step j works on the
    prefix still below its degree."""
    if not k.size:
        return np.empty_like(x)
    uniform = k.min() == k.max()
    order = None if uniform else np.argsort(-k, kind="stable")
    xs, ks = (x, k) if uniform else (x[order], k[order])
    p, q = np.ones_like(xs), first(xs)
    descending = -ks  # (ascending: searchsorted counts the degrees >= j)
    with np.errstate(all="ignore"):
        for j in range(2, int(ks[0]) + 1):
            c = xs.size if uniform else int(np.searchsorted(descending, -j, side="right"))
            r = step(j, xs[:c], q[:c], p[:c])
            p[:c] = q[:c]
            q[:c] = r
            if j % 64 == 0 and np.isnan(q[:c]).all():
                break  # (NaN stays NaN: PyTorch's loop stops there too)
    if uniform:
        return q
    out = np.empty_like(q)
    out[order] = q
    return out


def _evaluate(x, n, ends, closed, first, step):
    """The value of one polynomial family: ``ends(x, k)`` gives (mask, values) of the
    points written out, ``closed`` (mask function, value function) the closed form where
    the mask holds, or None; ``first`` and ``step`` the recurrence (see _recurrence)."""
    xv, k, shape = _operands(x, n)
    dtype = xv.dtype
    out = np.zeros(xv.shape, dtype)  # (a negative degree: 0)
    todo = k >= 0
    with np.errstate(all="ignore"):
        hit, value = ends(xv, k)
        hit &= todo
        out[hit] = value[hit] if np.ndim(value) else value
        todo &= ~hit
        if closed is not None:
            where, form = closed
            use = todo & where(xv, k)
            out[use] = form(xv[use], k[use].astype(dtype))
            todo &= ~use
        zero = todo & (k == 0)
        out[zero] = 1
        one = todo & (k == 1)
        out[one] = first(xv[one])
        rest = todo & (k >= 2)
        out[rest] = _recurrence(xv[rest], k[rest], first, step)
    return out.reshape(shape)


def _parity(k, even, odd):
    return np.where(k % 2 == 0, even, odd)


def _no_ends(x, k):
    return np.zeros(x.shape, bool), 0


# -- Chebyshev ---------------------------------------------------------------------------------
def _chebyshev_step(j, x, q, p):
    return (x + x) * q - p


def _inside(limit, shifted=False):
    """The closed forms' domain: |x| < 1 (|2x - 1| < 1 shifted) past degree ``limit``."""
    if shifted:
        return lambda x, k: (k > limit) & (np.abs(x + x - 1) < 1)
    return lambda x, k: (k > limit) & (np.abs(x) < 1)


def _t_form(y, kf):
    return np.cos(kf * np.arccos(y))


def _u_form(y, kf):
    theta = np.arccos(y)
    return np.sin((kf + 1) * theta) / np.sin(theta)


def _v_form(y, kf):
    """cos((k + 1/2) theta) / cos(theta / 2); +-(2k + 1) where sin(theta / 2) rounds to 1
    (y within an ulp or two of -1), PyTorch's value there."""
    theta = np.arccos(y)
    return np.where(np.sin(theta / 2) != 1, np.cos((kf + 0.5) * theta) / np.cos(theta / 2),
                    _parity(kf.astype(np.int64), kf + kf + 1, -(kf + kf + 1)))


def _w_form(positive_end):
    """sin((k + 1/2) theta) / sin(theta / 2); where cos(theta / 2) rounds to 1 (y within
    an ulp or two of 1) PyTorch's value there: ``positive_end(y, k)``."""
    def form(y, kf):
        theta = np.arccos(y)
        return np.where(np.cos(theta / 2) != 1,
                        np.sin((kf + 0.5) * theta) / np.sin(theta / 2), positive_end(y, kf))
    return form


def chebyshev_polynomial_t(x, n):
    """T_n(x): cos(n acos(x)) on [-1, 1]."""
    return _evaluate(
        x, n, lambda x, k: (np.abs(x) == 1, np.where((x > 0) | (k % 2 == 0), 1.0, -1.0)),
        (_inside(6), _t_form), lambda x: x.copy(), _chebyshev_step)


def chebyshev_polynomial_u(x, n):
    """U_n(x): sin((n + 1) theta) / sin(theta), x = cos(theta)."""
    return _evaluate(
        x, n, lambda x, k: (np.abs(x) == 1,
                            np.where((x > 0) | (k % 2 == 0), k + 1.0, -(k + 1.0))),
        (_inside(8), _u_form), lambda x: x + x, _chebyshev_step)


def chebyshev_polynomial_v(x, n):
    """V_n(x): cos((n + 1/2) theta) / cos(theta / 2)."""
    return _evaluate(
        x, n, lambda x, k: (np.abs(x) == 1, np.where(x > 0, 1.0, _parity(k, 2.0 * k + 1,
                                                                          -2.0 * k - 1))),
        (_inside(8), _v_form), lambda x: x + x - 1, _chebyshev_step)


def _w_end(y, kf):
    k = kf.astype(np.int64)
    return np.where(y > 0, kf + kf + 1, _parity(k, 1.0, -1.0))


def chebyshev_polynomial_w(x, n):
    """W_n(x): sin((n + 1/2) theta) / sin(theta / 2)."""
    return _evaluate(
        x, n, lambda x, k: (np.abs(x) == 1, _w_end(x, k.astype(np.float64))),
        (_inside(8), _w_form(_w_end)), lambda x: x + x + 1, _chebyshev_step)


def _shifted(form):
    """A closed form of y applied at y = 2x - 1 (computed as x + x - 1, as PyTorch)."""
    return lambda x, kf: form(x + x - 1, kf)


def _shifted_step(j, x, q, p):
    y = x + x - 1
    return (y + y) * q - p


def shifted_chebyshev_polynomial_t(x, n):
    """T*_n(x) = T_n(2x - 1)."""
    return _evaluate(
        x, n, lambda x, k: ((x == 1) | (x == 0),
                            np.where(x == 1, 1.0, _parity(k, 1.0, -1.0))),
        (_inside(6, True), _shifted(_t_form)), lambda x: x + x - 1, _shifted_step)


def shifted_chebyshev_polynomial_u(x, n):
    """U*_n(x) = U_n(2x - 1)."""
    return _evaluate(
        x, n, lambda x, k: ((x == 1) | (x == 0),
                            np.where(x == 1, k + 1.0, _parity(k, k + 1.0, -(k + 1.0)))),
        (_inside(6, True), _shifted(_u_form)),
        lambda x: (x + x - 1) + (x + x - 1), _shifted_step)


def shifted_chebyshev_polynomial_v(x, n):
    """V*_n(x) = V_n(2x - 1)."""
    return _evaluate(
        x, n, lambda x, k: ((x == 1) | (x == 0),
                            np.where(x == 1, 1.0, _parity(k, 2.0 * k + 1, -2.0 * k - 1))),
        (_inside(6, True), _shifted(_v_form)),
        lambda x: (x + x - 1) + (x + x - 1) - 1, _shifted_step)


def _shifted_w_end(y, kf):
    return _parity(kf.astype(np.int64), 1.0, -1.0)


def shifted_chebyshev_polynomial_w(x, n):
    """W*_n(x) = W_n(2x - 1)."""
    return _evaluate(
        x, n, lambda x, k: ((x == 1) | (x == 0),
                            np.where(x == 1, 2.0 * k + 1, _parity(k, 1.0, -1.0))),
        (_inside(4, True), _shifted(_w_form(_shifted_w_end))),
        lambda x: (x + x - 1) + (x + x - 1) + 1, _shifted_step)


# -- Hermite, Laguerre, Legendre ---------------------------------------------------------------
def hermite_polynomial_h(x, n):
    """The physicists' H_n(x): H_j = 2x H_(j-1) - 2(j - 1) H_(j-2)."""
    return _evaluate(x, n, _no_ends, None, lambda x: x + x,
                     lambda j, x, q, p: (x + x) * q - (2 * (j - 1)) * p)


def hermite_polynomial_he(x, n):
    """The probabilists' He_n(x): He_j = x He_(j-1) - (j - 1) He_(j-2)."""
    return _evaluate(x, n, _no_ends, None, lambda x: x.copy(),
                     lambda j, x, q, p: x * q - (j - 1) * p)


def laguerre_polynomial_l(x, n):
    """L_n(x): j L_j = (2j - 1 - x) L_(j-1) - (j - 1) L_(j-2); 1 at x = 0."""
    return _evaluate(x, n, lambda x, k: (x == 0, 1.0), None, lambda x: 1 - x,
                     lambda j, x, q, p: ((2 * (j - 1) + (1 - x)) * q - (j - 1) * p) / j)


def legendre_polynomial_p(x, n):
    """P_n(x): j P_j = (2j - 1) x P_(j-1) - (j - 1) P_(j-2); +-1 at x = +-1."""
    return _evaluate(
        x, n, lambda x, k: (np.abs(x) == 1, np.where((x > 0) | (k % 2 == 0), 1.0, -1.0)),
        None, lambda x: x.copy(),
        lambda j, x, q, p: ((2 * j - 1) * x * q - (j - 1) * p) / j)


NAMES = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
         "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
         "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
         "laguerre_polynomial_l", "legendre_polynomial_p")
#: the functions on plain numbers (ops/registry.py's _SCALAR_MATH)
SCALAR = {name: (lambda f: lambda x, n: float(f(np.float64(x), np.float64(n))))(globals()[name])
          for name in NAMES}
