"""One-pass CPU kernels compiled with numba: the row ops (softmax, log-softmax, RMSNorm,
LayerNorm), RoPE and the AdamW step, and the scalar math that traced elementwise kernels
call (cpu_jit.py).

Each kernel reads its input once and writes its output once, where numpy would make a
pass (and a temporary) per operation. Kernels take 2-D C-contiguous arrays (rows, n),
so each compiles once per dtype; they are compiled on first use and cached on disk
(numba's cache), so a later process loads them instead of compiling.

float32 math uses exp and erf written as polynomials (``exp32``, ``erf32``), which
LLVM vectorises; libm's are one call per element. float64 uses libm, exact to the last
digit as gradient checks need.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import overload

_F32 = np.float32
_I32 = np.int32
JIT = {"cache": True, "nogil": True, "fastmath": False, "error_model": "numpy"}


# -- scalar math -------------------------------------------------------------------------
@njit(inline="always", **JIT)
def exp32(x):
    """exp in float32: Cody-Waite reduction to r in [-ln2/2, ln2/2], a degree-6
    polynomial (Cephes expf, within 1 ulp), then two exact scalings by powers of two
    so that results down to the smallest subnormal come out right. Straight-line code
    (no branch, float floor), which LLVM vectorises also beside other functions.
    Below -104 the result is 0: those lanes compute exp(0) and select 0, since working
    down to 0 through subnormal products costs a microcode assist per lane (a softmax
    row with a far outlier is mostly such lanes: twice the kernel's time)."""
    under = x < _F32(-104.0)
    x = np.float32(np.minimum(_F32(0.0) if under else x, _F32(88.8)))  # NaN stays
    k = np.floor(x * _F32(1.4426950408889634) + _F32(0.5))
    r = x - k * _F32(0.693359375) + k * _F32(2.12194440e-4)
    p = _F32(1.9875691500e-4)
    p = p * r + _F32(1.3981999507e-3)
    p = p * r + _F32(8.3334519073e-3)
    p = p * r + _F32(4.1665795894e-2)
    p = p * r + _F32(1.6666665459e-1)
    p = p * r + _F32(5.0000001201e-1)
    p = p * r * r + r + _F32(1.0)
    ki = _I32(k)
    k1 = ki >> _I32(1)
    s1 = _I32((k1 + _I32(127)) << _I32(23)).view(np.float32)
    s2 = _I32((ki - k1 + _I32(127)) << _I32(23)).view(np.float32)
    return _F32(0.0) if under else p * s1 * s2


@njit(inline="always", **JIT)
def erf32(x):
    """erf in float32 as a rational function of x on [-4, 4] (beyond, erf is +-1 in
    float32): the approximation Eigen and XLA use, within a few ulp."""
    x = min(max(x, _F32(-4.0)), _F32(4.0))
    x2 = x * x
    p = x2 * _F32(-2.72614225801306e-10) + _F32(2.77068142495902e-08)
    p = p * x2 + _F32(-2.10102402082508e-06)
    p = p * x2 + _F32(-5.69250639462346e-05)
    p = p * x2 + _F32(-7.34990630326855e-04)
    p = p * x2 + _F32(-2.95459980854025e-03)
    p = p * x2 + _F32(-1.60960333262415e-02)
    q = x2 * _F32(-1.45660718464996e-05) + _F32(-2.13374055278905e-04)
    q = q * x2 + _F32(-1.68282697438203e-03)
    q = q * x2 + _F32(-7.37332916720468e-03)
    q = q * x2 + _F32(-1.42647390514189e-02)
    return x * p / q


@njit(inline="always", **JIT)
def tanh32(x):
    """tanh in float32 (Cephes tanhf): an odd polynomial below |x| 0.625, where
    1 - 2 / (exp(2|x|) + 1) would lose digits to cancellation, that form above (exp32),
    the sign put back; both branches straight-line code, one selected. Within 1.3
    ulp, as numpy's float32 tanh."""
    a = abs(x)
    s = x * x
    p = _F32(-5.70498872745e-3) * s + _F32(2.06390887954e-2)
    p = p * s + _F32(-5.37397155531e-2)
    p = p * s + _F32(1.33314422036e-1)
    p = p * s + _F32(-3.33332819422e-1)
    small = p * s * x + x if a != _F32(0.0) else x  # (-0 stays -0)
    big = _F32(1.0) - _F32(2.0) / (exp32(min(a + a, _F32(88.0))) + _F32(1.0))
    big = big if x >= _F32(0.0) else -big
    return small if a < _F32(0.625) else (big if a == a else x)


def fexp(x):
    """exp for the kernels: exp32 on float32, libm on float64."""
    return math.exp(x)


def ferf(x):
    return math.erf(x)


def ftanh(x):
    return math.tanh(x)


@overload(fexp, inline="always")
def _fexp(x):
    if x == types.float32:
        return lambda x: exp32(x)
    return lambda x: math.exp(x)


@overload(ftanh, inline="always")
def _ftanh(x):
    if x == types.float32:
        return lambda x: tanh32(x)
    return lambda x: math.tanh(x)


@overload(ferf, inline="always")
def _ferf(x):
    if x == types.float32:
        return lambda x: erf32(x)
    return lambda x: math.erf(x)


@njit(inline="always", **JIT)
def fmaximum(a, b):
    """numpy's maximum: a NaN in either operand wins."""
    return a if (a > b or a != a) else b


@njit(inline="always", **JIT)
def fminimum(a, b):
    return a if (a < b or a != a) else b


def typed(a, v):
    """``v`` as a scalar of array ``a``'s dtype (inside kernels)."""
    return v


@overload(typed, inline="always")
def _typed(a, v):
    dt = a.dtype
    return lambda a, v: dt(v)


# -- softmax family ----------------------------------------------------------------------
# Sums may be reassociated (LLVM then vectorises them); everything else is exact IEEE.
ROWS = dict(JIT, fastmath={"reassoc", "contract"})


LANES = 16  # a row's max kept in this many partial maxima, which LLVM vectorises


@njit(inline="always", **ROWS)
def _row_max(x, r, n, scale, acc):
    """max(x[r, :n] * scale): whole lanes, masked past n, then the tail of the row."""
    m = x.shape[1]
    full = m - m % LANES
    for lane in range(LANES):
        acc[lane] = typed(x, -np.inf)
    for j0 in range(0, full, LANES):
        for lane in range(LANES):
            j = j0 + lane
            v = x[r, j] * scale if j < n else typed(x, -np.inf)
            acc[lane] = v if v > acc[lane] else acc[lane]
    mx = typed(x, -np.inf)
    for lane in range(LANES):
        mx = acc[lane] if acc[lane] > mx else mx
    for j in range(full, m):
        v = x[r, j] * scale if j < n else typed(x, -np.inf)
        mx = v if v > mx else mx
    return mx


@njit(inline="always", **ROWS)
def _visible(r, n, causal, sq, k0):
    """Keys [k0, k0 + n) that query ``r % sq`` may see: all, or under a causal mask
    (top-left aligned, as PyTorch's) those up to the query's own index."""
    if not causal:
        return n
    return min(max(r % sq + 1 - k0, 0), n)


@njit(inline="always", **ROWS)
def _softmax(x, scale, causal, sq, out, lse, with_lse):
    """out = softmax(x * scale) of each row over the keys its query may see (_visible),
    zeros at the others; lse the rows' log-sum-exp where ``with_lse`` (else their max:
    a log per row is an eighth of a softmax of rows of 32). One pass over all rows per step
    (max, exp, normalise), each loop the whole row with masking selects: LLVM
    vectorises these short loops where the fused per-row loop, or a loop whose length
    varies by row, it leaves scalar (1.5x slower on rows of 64)."""
    rows, m = x.shape
    acc = np.empty(LANES, x.dtype)
    for r in range(rows):
        lse[r] = _row_max(x, r, _visible(r, m, causal, sq, 0), scale, acc)
    for r in range(rows):
        n = _visible(r, m, causal, sq, 0)
        mx = lse[r]
        for j in range(m):
            e = fexp(x[r, j] * scale - mx)
            out[r, j] = e if j < n else typed(x, 0.0)
    for r in range(rows):
        s = typed(x, 0.0)
        for j in range(m):
            s += out[r, j]
        inv = typed(x, 1.0) / s
        for j in range(m):
            out[r, j] *= inv
        if with_lse:
            lse[r] += math.log(s)


@njit(**ROWS)
def softmax_rows(x, out):
    """out = softmax of each row."""
    _softmax(x, typed(x, 1.0), False, 1, out, np.empty(x.shape[0], x.dtype), False)


@njit(**ROWS)
def softmax_backward_rows(y, out, g, log):
    """out = the gradient of softmax (log_softmax where ``log``) at rows whose output is
    y (p, or log p), given the output's gradient g: p * (g - sum(g * p)), or
    g - exp(y) * sum(g); the row sums add up in float64."""
    rows, n = y.shape
    for r in range(rows):
        s = 0.0
        if log:
            for j in range(n):
                s += g[r, j]
        else:
            for j in range(n):
                s += g[r, j] * y[r, j]
        t = typed(y, s)
        if log:
            for j in range(n):
                out[r, j] = g[r, j] - fexp(y[r, j]) * t
        else:
            for j in range(n):
                out[r, j] = y[r, j] * (g[r, j] - t)


@njit(**ROWS)
def attention_probs(s, scale, causal, sq, out, lse):
    """Attention's probabilities from its raw scores (rows of keys, sq query rows per
    head): softmax(s * scale) over the keys each query may see, zeros at the hidden
    ones, and each row's log-sum-exp; the scale, the causal mask and the softmax in
    one kernel."""
    _softmax(s, scale, causal, sq, out, lse, True)


@njit(**ROWS)
def exp_rows(x, scale, shift, causal, sq, k0, out):
    """out[r, j] = exp(x[r, j] * scale - shift[r]) at the keys k0 + j that query
    r % sq may see, 0 at the others: probabilities recomputed from scores and their
    row's log-sum-exp."""
    rows, n = x.shape
    for r in range(rows):
        sh = shift[r]
        m = _visible(r, n, causal, sq, k0)
        for j in range(n):  # (whole rows, masked: see _softmax)
            e = fexp(x[r, j] * scale - sh)
            out[r, j] = e if j < m else typed(x, 0.0)


@njit(**ROWS)
def attention_dscores(p, dp, delta, scale, ds):
    """ds = p * (dp - delta[r]) * scale per row: the softmax's backward through the
    scores, in one pass (ds may be dp)."""
    rows, n = p.shape
    for r in range(rows):
        d = delta[r]
        for j in range(n):
            ds[r, j] = p[r, j] * (dp[r, j] - d) * scale


#: elements (whole rows, at least one) that each pass of log_softmax_rows covers before
#: the next pass starts: 64 KiB of float32, which the next pass finds in cache (passes
#: over the whole of a (700, 2000) array each go to memory: 1.35x the time)
BLOCK = 16384


@njit(**ROWS)
def log_softmax_rows(x, out):
    """out = x - logsumexp of each row, in passes over blocks of rows (BLOCK) as
    _softmax's over all rows."""
    rows, n = x.shape
    step = max(1, BLOCK // max(n, 1))
    for r0 in range(0, rows, step):
        _log_softmax_block(x[r0:r0 + step], out[r0:r0 + step])


@njit(inline="always", **ROWS)
def _log_softmax_block(x, out):
    rows, n = x.shape
    shift = np.empty(rows, x.dtype)
    one = typed(x, 1.0)
    acc = np.empty(LANES, x.dtype)
    for r in range(rows):
        shift[r] = _row_max(x, r, n, one, acc)
    for r in range(rows):
        mx = shift[r]
        for j in range(n):
            out[r, j] = x[r, j] - mx
    # the exps in one loop over the whole block: a row's own loop leaves its last n % 16
    # elements to scalar code, most of a short row (27 classes: 2.5x the time)
    flat = out.reshape(rows * n)
    for i in range(rows * n):
        flat[i] = fexp(flat[i])
    for r in range(rows):
        s = typed(x, 0.0)
        for j in range(n):
            s += out[r, j]
        sh = shift[r] + math.log(s)
        for j in range(n):
            out[r, j] = x[r, j] - sh


@njit(**ROWS)
def cross_entropy_rows(x, target, ignore, logp, safe, w):
    """Backend.cross_entropy at class indices, without a class weight or smoothing, over
    (rows, c) logits: logp = log_softmax_rows(x); per row the weight w (1, or 0 where the
    target is ``ignore``) and the class read (safe: the target, or 0); returns the sum
    of -logp[r, safe[r]] * w[r] and the sum of w, each added up in float64."""
    log_softmax_rows(x, logp)
    loss = 0.0
    total = 0.0
    for r in range(x.shape[0]):
        t = target[r]
        kept = t != ignore
        k = t if kept else 0
        safe[r] = k
        wr = typed(x, 1.0) if kept else typed(x, 0.0)
        w[r] = wr
        loss += np.float64(-(logp[r, k] * wr))
        total += np.float64(wr)
    return loss, total


@njit(**ROWS)
def cross_entropy_backward_rows(logp, safe, s, out):
    """Backend.cross_entropy_backward without a class weight or smoothing: out =
    exp(logp) * s[r] - one_hot(safe[r]) * s[r] per row r, s the rows' weights times the
    loss's gradient. The exps in one loop over all rows (see _log_softmax_block)."""
    rows, n = logp.shape
    src, flat = logp.reshape(rows * n), out.reshape(rows * n)
    for i in range(rows * n):
        flat[i] = fexp(src[i])
    for r in range(rows):
        sr = s[r]
        for j in range(n):
            out[r, j] *= sr
        out[r, safe[r]] -= sr


# -- recurrent cells ----------------------------------------------------------------------
@njit(inline="always", **JIT)
def _sigmoid(x, one):
    return one / (one + fexp(-x))


@njit(**JIT)
def lstm_cell_rows(gates, c, hc, act):
    """Backend.lstm_cell in one pass over C-contiguous (rows, 4n) gates and (rows, n) c:
    act = sigmoid(i, f, o) and tanh(g) in the gates' order, hc = (h, c') side by side
    with c' = f * c + i * g and h = o * tanh(c'). One short loop per block of a row,
    each of which LLVM vectorises (one loop over all four gates it leaves scalar)."""
    rows, n = c.shape
    one = typed(c, 1.0)
    for r in range(rows):
        for j in range(2 * n):
            act[r, j] = _sigmoid(gates[r, j], one)
        for j in range(2 * n, 3 * n):
            act[r, j] = ftanh(gates[r, j])
        for j in range(3 * n, 4 * n):
            act[r, j] = _sigmoid(gates[r, j], one)
        for j in range(n):
            hc[r, n + j] = act[r, n + j] * c[r, j] + act[r, j] * act[r, 2 * n + j]
        for j in range(n):
            hc[r, j] = act[r, 3 * n + j] * ftanh(hc[r, n + j])


@njit(**JIT)
def lstm_cell_backward_rows(act, c, hc, ghc, dgates, dc):
    """Backend.lstm_cell_backward in one pass: dgates (rows, 4n) and dc (rows, n) from
    the gradient ghc (rows, 2n) of hc (dh, then the gradient of c'); the gradient of
    c' goes through dc while it is formed."""
    rows, n = c.shape
    one = typed(c, 1.0)
    for r in range(rows):
        for j in range(n):
            t = ftanh(hc[r, n + j])
            dh, o = ghc[r, j], act[r, 3 * n + j]
            dc[r, j] = ghc[r, n + j] + dh * o * (one - t * t)
            dgates[r, 3 * n + j] = dh * t * o * (one - o)
        for j in range(n):
            dc2, i, f, g = dc[r, j], act[r, j], act[r, n + j], act[r, 2 * n + j]
            dgates[r, j] = dc2 * g * i * (one - i)
            dgates[r, n + j] = dc2 * c[r, j] * f * (one - f)
            dgates[r, 2 * n + j] = dc2 * i * (one - g * g)
            dc[r, j] = dc2 * f


@njit(**JIT)
def gru_cell_rows(xp, hp, h, out, act):
    """Backend.gru_cell in one pass over C-contiguous (rows, 3n) projections xp, hp and
    (rows, n) h: act = (r, z, c) with r, z = sigmoid(xp + hp) and c = tanh(xp_n + r *
    hp_n), out = c + z * (h - c). One short loop per block of a row (see
    lstm_cell_rows); the candidate's loop computes r again rather than read it back
    from act, which it writes (LLVM leaves a loop reading and writing one array
    scalar: 1.4x the kernel's time at (20, 600))."""
    rows, n = h.shape
    one = typed(h, 1.0)
    for r in range(rows):
        for j in range(2 * n):
            act[r, j] = _sigmoid(xp[r, j] + hp[r, j], one)
        for j in range(n):
            rr = _sigmoid(xp[r, j] + hp[r, j], one)
            out[r, j] = ftanh(xp[r, 2 * n + j] + rr * hp[r, 2 * n + j])
        for j in range(n):
            act[r, 2 * n + j] = out[r, j]
        for j in range(n):
            c = out[r, j]
            out[r, j] = c + act[r, n + j] * (h[r, j] - c)


@njit(**JIT)
def gru_cell_backward_rows(act, hp, h, g, dxp, dhp, dh):
    """Backend.gru_cell_backward in one pass: dxp, dhp (rows, 3n) and dh (rows, n) from
    the gradient g of h'."""
    rows, n = h.shape
    one = typed(h, 1.0)
    for r in range(rows):
        for j in range(n):
            rr, z, c, gj = act[r, j], act[r, n + j], act[r, 2 * n + j], g[r, j]
            dpre = gj * (one - z) * (one - c * c)
            dr = dpre * hp[r, 2 * n + j] * rr * (one - rr)
            dz = gj * (h[r, j] - c) * z * (one - z)
            dxp[r, j] = dr
            dhp[r, j] = dr
            dxp[r, n + j] = dz
            dhp[r, n + j] = dz
            dxp[r, 2 * n + j] = dpre
            dhp[r, 2 * n + j] = dpre * rr
            dh[r, j] = gj * z


# -- norms -------------------------------------------------------------------------------
@njit(**ROWS)
def rmsnorm_rows(x, w, eps, y, rstd):
    """y = x * rsqrt(mean(x^2) + eps) * w per row; w has n entries (ones when absent).
    The mean of squares accumulates in float64 for float32 rows (PyTorch's accuracy)."""
    rows, n = x.shape
    for r in range(rows):
        ss = 0.0
        for j in range(n):
            v = np.float64(x[r, j])
            ss += v * v
        inv = typed(x, 1.0 / math.sqrt(ss / n + eps))
        rstd[r] = inv
        for j in range(n):
            y[r, j] = x[r, j] * inv * w[j]


@njit(**ROWS)
def rmsnorm_backward_rows(x, w, rstd, gy, dx, dw):
    """dx per row and dw (accumulated over rows, in float64) of rmsnorm_rows."""
    rows, n = x.shape
    for r in range(rows):
        inv = rstd[r]
        proj = 0.0
        for j in range(n):
            xh = x[r, j] * inv
            gx = gy[r, j] * w[j]
            proj += np.float64(gx) * np.float64(xh)
            dw[j] += np.float64(gy[r, j]) * np.float64(xh)
        proj32 = typed(x, proj / n)
        for j in range(n):
            dx[r, j] = inv * (gy[r, j] * w[j] - x[r, j] * inv * proj32)


@njit(**ROWS)
def layernorm_rows(x, w, b, eps, y, mean, rstd):
    """Statistics in the input's dtype, as PyTorch's CPU kernel keeps them (a gradient
    that cancels to ~0 then carries PyTorch's rounding, not a more exact one)."""
    rows, n = x.shape
    for r in range(rows):
        s = typed(x, 0.0)
        for j in range(n):
            s += x[r, j]
        mu = s / typed(x, n)
        ss = typed(x, 0.0)
        for j in range(n):
            d = x[r, j] - mu
            ss += d * d
        inv = typed(x, 1.0) / math.sqrt(ss / typed(x, n) + typed(x, eps))
        mean[r] = mu
        rstd[r] = inv
        for j in range(n):
            y[r, j] = (x[r, j] - mu) * inv * w[j] + b[j]


@njit(**ROWS)
def layernorm_backward_rows(x, w, mean, rstd, gy, dx, dw, db):
    rows, n = x.shape
    for r in range(rows):
        m, inv = mean[r], rstd[r]
        s1 = typed(x, 0.0)
        s2 = typed(x, 0.0)
        for j in range(n):
            xh = (x[r, j] - m) * inv
            gx = gy[r, j] * w[j]
            s1 += gx
            s2 += gx * xh
            dw[j] += np.float64(gy[r, j]) * np.float64(xh)
            db[j] += np.float64(gy[r, j])
        m1, m2 = s1 / typed(x, n), s2 / typed(x, n)
        for j in range(n):
            xh = (x[r, j] - m) * inv
            dx[r, j] = inv * (gy[r, j] * w[j] - m1 - xh * m2)


@njit(**JIT)
def column_moments(x, mean, var):
    """Each column's mean and biased variance over the rows of x (rows, C), summed in
    float64: the mean in one pass, the squared deviations from it in a second (the
    composed form's mean((x - mean)^2), not E[x^2] - mean^2, which cancels)."""
    rows, n = x.shape
    s = np.zeros(n)
    for r in range(rows):
        for j in range(n):
            s[j] += x[r, j]
    for j in range(n):
        mean[j] = typed(x, s[j] / rows)
        s[j] = 0.0
    for r in range(rows):
        for j in range(n):
            dev = np.float64(x[r, j] - mean[j])
            s[j] += dev * dev
    for j in range(n):
        var[j] = typed(x, s[j] / rows)


@njit(**JIT)
def normalize_columns(x, mean, rstd, w, b, y):
    """y = (x - mean) * rstd * w + b over (rows, C), every operand one value per column
    (a batch norm's forward, the composed form's center_scale)."""
    rows, n = x.shape
    for r in range(rows):
        for j in range(n):
            y[r, j] = (x[r, j] - mean[j]) * rstd[j] * w[j] + b[j]


@njit(**JIT)
def batchnorm_backward_rows(x, w, mean, rstd, gy, dx, dw, db):
    """A batch norm's backward over (rows, C), statistics per column: the column sums
    of gy and gy * xhat in one pass (float64), dx in a second, as the composed form's
    rstd * (gy*w - mean(gy*w) - xhat * mean(gy*w * xhat)) (the two means computed once
    per column)."""
    rows, n = x.shape
    for r in range(rows):
        for j in range(n):
            g = np.float64(gy[r, j])
            db[j] += g
            dw[j] += g * np.float64((x[r, j] - mean[j]) * rstd[j])
    m1 = np.empty(n, x.dtype)
    m2 = np.empty(n, x.dtype)
    for j in range(n):
        m1[j] = typed(x, db[j] / rows) * w[j]
        m2[j] = typed(x, dw[j] / rows) * w[j]
    for r in range(rows):
        for j in range(n):
            xh = (x[r, j] - mean[j]) * rstd[j]
            dx[r, j] = rstd[j] * (gy[r, j] * w[j] - m1[j] - xh * m2[j])


# -- indexing ----------------------------------------------------------------------------
@njit(**JIT)
def index_add_rows(out, index, values):
    """out[index[i]] += values[i] for each i in order (np.add.at's order, so the sums
    round alike); a negative index counts from the end. Returns False, having added
    nothing, where an index is out of range."""
    n = out.shape[0]
    for i in range(index.shape[0]):
        if not -n <= index[i] < n:
            return False
    for i in range(index.shape[0]):
        r = index[i] + n if index[i] < 0 else index[i]
        for j in range(out.shape[1]):
            out[r, j] += values[i, j]
    return True


# -- RoPE --------------------------------------------------------------------------------
@njit(**JIT)
def rope5(x, cos, sin, sign, out):
    """Rotate-half RoPE over a 5-D view (any strides) whose last two dims are
    (seq, d); cos and sin are (seq, d/2); sign -1 rotates the other way."""
    a, b, c, t, d = x.shape
    h = d // 2
    for i0 in range(a):
        for i1 in range(b):
            for i2 in range(c):
                for s in range(t):
                    for j in range(h):
                        x1 = x[i0, i1, i2, s, j]
                        x2 = x[i0, i1, i2, s, j + h]
                        co = cos[s, j]
                        si = sin[s, j] * sign
                        out[i0, i1, i2, s, j] = x1 * co - x2 * si
                        out[i0, i1, i2, s, j + h] = x2 * co + x1 * si


# -- windows -----------------------------------------------------------------------------
@njit(**JIT)
def sum_windows_2d(cols, out, sh, sw, dh, dw):
    """col2im in one pass: out[a, b, y*sh + i*dh, x*sw + j*dw] += cols[a, b, i, j, y, x]
    for (a, b) the two lead dims, any strides (the windows' layout, as they come)."""
    na, nb, kh, kw, ho, wo = cols.shape
    for a in range(na):
        for b in range(nb):
            for i in range(kh):
                for j in range(kw):
                    for y in range(ho):
                        r = y * sh + i * dh
                        for x in range(wo):
                            # (an unsigned index, known not to be negative: numba then
                            # leaves out its wraparound test, and the loop vectorises)
                            out[a, b, r, np.uintp(x * sw + j * dw)] += cols[a, b, i, j, y, x]


@njit(**JIT)
def sum_windows_channels_last(cols, out, sh, sw, dh, dw):
    """sum_windows_2d with the channels innermost, for a channels-last image's
    gradient: cols (N, ho, wo, kh, kw, C), out (N, H, W, C), each window's cells added
    for all the channels in one loop, along memory where both are channels-last (the
    compiler then vectorises it)."""
    na, ho, wo, kh, kw, nc = cols.shape
    for a in range(na):
        for y in range(ho):
            for x in range(wo):
                for i in range(kh):
                    for j in range(kw):
                        r, c = y * sh + i * dh, x * sw + j * dw
                        for b in range(nc):
                            out[a, r, c, b] += cols[a, y, x, i, j, b]


@njit(**JIT)
def padded_windows_2d(x, out, ph, pw, sh, sw, dh, dw):
    """im2col in one pass: out[c, i, j, a, y, s] = x[a, c, y*sh + i*dh - ph,
    s*sw + j*dw - pw], zero where that cell lies in the padding: the windows of x
    (a, c, H, W) zero-padded by (ph, pw) cells before its two windowed dims (out's
    positions say how far the padding after reaches), with no padded copy of x, in
    the columns' order (C, *kernel, N, *positions): each row of positions one run."""
    nc, kh, kw, na, ho, wo = out.shape
    h, w = x.shape[2], x.shape[3]
    for c in range(nc):
        for i in range(kh):
            for j in range(kw):
                # (the positions whose column s*sw + j*dw - pw is inside x)
                first = min(wo, max(0, (pw - j * dw + sw - 1) // sw))
                end = max(first, min(wo, (w - 1 + pw - j * dw) // sw + 1))
                for a in range(na):
                    for y in range(ho):
                        r = y * sh + i * dh - ph
                        inside = (r >= 0) & (r < h)
                        for s in range(first if inside else wo):
                            out[c, i, j, a, y, s] = 0
                        if not inside:
                            continue
                        # (unsigned indices, known not to be negative: numba then
                        # leaves out its wraparound test, and the copy vectorises)
                        for s in range(first, end):
                            out[c, i, j, a, y, np.uintp(s)] = \
                                x[a, c, r, np.uintp(s * sw + j * dw - pw)]
                        for s in range(end, wo):
                            out[c, i, j, a, y, np.uintp(s)] = 0


@njit(**JIT)
def padded_windows_channels_last(x, out, ph, pw, sh, sw, dh, dw):
    """padded_windows_2d for a channels-last image, the channels innermost: x (N, H,
    W, C), out (N, ho, wo, kh, kw, C) = the windows of x zero-padded by (ph, pw) cells
    before its two windowed dims (out[a, y, s, i, j, b] = x[a, y*sh + i*dh - ph,
    s*sw + j*dw - pw, b]): each window's cell copied for all the channels in one loop,
    along memory where both are channels-last."""
    na, ho, wo, kh, kw, nc = out.shape
    h, w = x.shape[1], x.shape[2]
    for a in range(na):
        for y in range(ho):
            for s in range(wo):
                for i in range(kh):
                    r = y * sh + i * dh - ph
                    for j in range(kw):
                        c = s * sw + j * dw - pw
                        if (r >= 0) & (r < h) & (c >= 0) & (c < w):
                            for b in range(nc):  # (unsigned: no wraparound test)
                                out[a, y, s, i, j, b] = x[a, np.uintp(r), np.uintp(c), b]
                        else:
                            for b in range(nc):
                                out[a, y, s, i, j, b] = 0


@njit(**JIT)
def window_max_2d(win, y, picked):
    """Each window's largest cell and its offset in the window, in one pass over the
    windows view win (a, b, kh, kw, ho, wo), any strides: the first of equal cells,
    and the first NaN where there is one (numpy's argmax, PyTorch's max-pool). The
    loops run over (a, b, ho, wo) in that order: the caller puts the dim with the
    smallest stride last (a channels-last image's channels). Each window's cells are
    compared without a branch (a select of the kept value), as a branch on random
    values is mispredicted about every other cell."""
    na, nb, kh, kw, ho, wo = win.shape
    for a in range(na):
        for b in range(nb):
            for r in range(ho):
                for s in range(wo):
                    best = win[a, b, 0, 0, r, s]
                    at = 0
                    for i in range(kh):
                        for j in range(kw):
                            v = win[a, b, i, j, r, s]
                            take = (v > best) | ((v != v) & (best == best))
                            best = v if take else best
                            at = (i * kw + j) if take else at
                    y[a, b, r, s] = best
                    picked[a, b, r, s] = at


@njit(**JIT)
def window_max_channels_last(x, y, picked, kh, kw, sh, sw, dh, dw):
    """window_max_2d on a channels-last image: x (N, H, W, C), y and picked (N, Ho, Wo,
    C). Each window cell is compared for all the channels in one loop along memory,
    which the compiler vectorises (window_max_2d's loops over the windows view, strides
    known only when it runs, stay one cell at a time); the same order of cells, so the
    same first of equal cells and first NaN."""
    na, ho, wo, nc = y.shape
    for a in range(na):
        for r in range(ho):
            for s in range(wo):
                for c in range(nc):
                    y[a, r, s, c] = x[a, r * sh, s * sw, c]
                    picked[a, r, s, c] = 0
                for t in range(1, kh * kw):
                    row, col = r * sh + (t // kw) * dh, s * sw + (t % kw) * dw
                    for c in range(nc):
                        v, best = x[a, row, col, c], y[a, r, s, c]
                        take = (v > best) | ((v != v) & (best == best))
                        y[a, r, s, c] = v if take else best
                        picked[a, r, s, c] = t if take else picked[a, r, s, c]


@njit(**JIT)
def route_max_2d(g, picked, out):
    """max-pool's backward in one pass: each g[a, b, r, s] added to the cell its window
    picked, out being the windows view (a, b, kh, kw, ho, wo) of the input's gradient
    (picked: the offset inside the window, window_max_2d's)."""
    na, nb, ho, wo = g.shape
    kh, kw = out.shape[2], out.shape[3]
    # (each offset's row and column looked up: a division per cell costs more than
    # the add)
    rows, cols = np.empty(kh * kw, np.int64), np.empty(kh * kw, np.int64)
    for t in range(kh * kw):
        rows[t], cols[t] = t // kw, t % kw
    for a in range(na):
        for b in range(nb):
            for r in range(ho):
                for s in range(wo):
                    t = picked[a, b, r, s]
                    out[a, b, rows[t], cols[t], r, s] += g[a, b, r, s]


# -- optimizers --------------------------------------------------------------------------
@njit(**JIT)
def adamw_flat(p, g, m, v, lr, beta1, beta2, eps, weight_decay, bc1, bc2):
    """One AdamW step over flat buffers, in place, each element read and written once
    (PyTorch's formula: decoupled decay, bias corrections on m and v)."""
    decay = typed(p, 1.0 - lr * weight_decay)
    b1, b2 = typed(p, beta1), typed(p, beta2)
    c1, c2 = typed(p, 1.0 - beta1), typed(p, 1.0 - beta2)
    step = typed(p, lr / bc1)
    inv_sqrt_bc2 = typed(p, 1.0 / math.sqrt(bc2))
    e = typed(p, eps)
    for i in range(p.shape[0]):
        gi = g[i]
        mi = m[i] * b1 + gi * c1
        vi = v[i] * b2 + gi * gi * c2
        m[i] = mi
        v[i] = vi
        p[i] = p[i] * decay - step * mi / (math.sqrt(vi) * inv_sqrt_bc2 + e)

