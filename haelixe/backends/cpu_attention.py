"""Scaled dot-product attention on the CPU, exact, in two shapes of the same math.

Short sequences take the direct path (one score matrix per head). Long ones take the
memory-blocked online-softmax ("flash") path: keys are visited in blocks, a running max
and running sum rescale the partial output, so the (seq x seq) score matrix never exists
whole. Both return the log-sum-exp of every query's scores, from which backward
recomputes the probabilities block by block.
"""

from __future__ import annotations

import numpy as np

# Above this many keys the score matrix of one head would outgrow the caches.
FLASH_MIN_KEYS = 512
BLOCK = 256


def _causal_mask(sq: int, sk: int, q0: int = 0, k0: int = 0) -> np.ndarray:
    """True where query q0+i may not see key k0+j (top-left aligned, as PyTorch)."""
    return (np.arange(k0, k0 + sk)[None, :] > np.arange(q0, q0 + sq)[:, None])


def row_max(s: np.ndarray) -> np.ndarray:
    """max over the last axis, kept as size 1. numpy reduces short contiguous rows one
    element at a time; folding the row in halves runs each step as a wide elementwise
    maximum instead (about 2x faster for rows of 32)."""
    n = s.shape[-1]
    if n < 8 or n & (n - 1):
        return s.max(axis=-1, keepdims=True)
    while n > 1:
        n //= 2
        s = np.maximum(s[..., :n], s[..., n:])
    return s


def row_sum(p: np.ndarray) -> np.ndarray:
    """sum over the last axis, kept as size 1, as a product with a column of ones: BLAS
    instead of numpy's pairwise reduction over short rows (about 6x faster)."""
    return np.matmul(p, np.ones((p.shape[-1], 1), p.dtype))


def _masked(s, mask, k0, n):
    """Scores with the user's mask applied to keys [k0, k0 + n): a bool mask keeps
    True (the rest becomes -inf), a float mask is added."""
    if mask is None:
        return s
    m = mask[..., k0:k0 + n] if mask.shape[-1] != 1 else mask
    if m.dtype == np.bool_:
        return np.where(m, s, -np.inf)
    return s + m


def attention_forward(q, k, v, causal, scale, mask=None):
    sk = k.shape[-2]
    if sk >= FLASH_MIN_KEYS:
        return _flash_forward(q, k, v, causal, scale, mask)
    s = np.matmul(q, np.swapaxes(k, -1, -2))
    s *= scale
    s = _masked(s, mask, 0, sk)
    if causal:
        s = np.where(_causal_mask(q.shape[-2], sk), -np.inf, s)
    m = row_max(s)
    p = np.exp(s - m)
    l = row_sum(p)
    out = np.matmul(p, v)
    out /= l
    lse = (m + np.log(l))[..., 0]
    return out, lse.astype(q.dtype, copy=False)


def _flash_forward(q, k, v, causal, scale, mask):
    sq, sk = q.shape[-2], k.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    out = np.zeros(lead + (sq, v.shape[-1]), q.dtype)
    m = np.full(lead + (sq, 1), -np.inf, q.dtype)
    l = np.zeros(lead + (sq, 1), q.dtype)
    for k0 in range(0, sk, BLOCK):
        if causal and k0 > sq - 1:
            break
        kb = k[..., k0:k0 + BLOCK, :]
        vb = v[..., k0:k0 + BLOCK, :]
        s = np.matmul(q, np.swapaxes(kb, -1, -2))
        s *= scale
        s = _masked(s, mask, k0, kb.shape[-2])
        if causal:
            s = np.where(_causal_mask(sq, kb.shape[-2], 0, k0), -np.inf, s)
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        # rows with every key masked so far keep m = -inf; shift by 0 there instead
        shift = np.where(np.isfinite(m_new), m_new, 0)
        p = np.exp(s - shift)
        alpha = np.exp(np.where(np.isfinite(m), m - shift, -np.inf))
        l = l * alpha + p.sum(axis=-1, keepdims=True)
        out = out * alpha + np.matmul(p, vb)
        m = m_new
    out /= l
    lse = (m + np.log(l))[..., 0]
    return out, lse.astype(q.dtype, copy=False)


def attention_backward(q, k, v, out, lse, gout, causal, scale, mask=None):
    sq, sk = q.shape[-2], k.shape[-2]
    # D_i = sum_j P_ij dP_ij = rowsum(dO * O): the softmax Jacobian's correction term.
    delta = np.einsum("...qd,...qd->...q", gout, out)[..., None]
    lse = lse[..., None]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    dq = np.zeros(lead + q.shape[-2:], q.dtype)
    dk = np.zeros(lead + k.shape[-2:], k.dtype)
    dv = np.zeros(lead + v.shape[-2:], v.dtype)
    step = BLOCK if sk >= FLASH_MIN_KEYS else sk
    for k0 in range(0, sk, step):
        kb = k[..., k0:k0 + step, :]
        vb = v[..., k0:k0 + step, :]
        s = np.matmul(q, np.swapaxes(kb, -1, -2))
        s *= scale
        p = np.exp(_masked(s, mask, k0, kb.shape[-2]) - lse)
        if causal:
            p = np.where(_causal_mask(sq, kb.shape[-2], 0, k0), 0, p)
        dv[..., k0:k0 + step, :] = np.matmul(np.swapaxes(p, -1, -2), gout)
        dp = np.matmul(gout, np.swapaxes(vb, -1, -2))
        ds = p * (dp - delta)
        ds *= scale
        dq += np.matmul(ds, kb)
        dk[..., k0:k0 + step, :] = np.matmul(np.swapaxes(ds, -1, -2), q)
    return dq, dk, dv
