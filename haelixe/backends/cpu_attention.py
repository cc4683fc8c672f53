"""Scaled dot-product attention on the CPU, exact, in two shapes of the same math.

Short sequences take the direct path (one score matrix per head). Long ones take the
memory-blocked online-softmax ("flash") path: keys are visited in blocks, a running max
and running sum rescale the partial output, so the (seq x seq) score matrix never exists
whole. Both return the log-sum-exp of every query's scores, from which backward
recomputes the probabilities block by block. For a graph node the direct path returns
its probabilities instead where they are small (KEEP_PROBS_BYTES): the node holds them
until its backward, which is handed them back (the attention_for_backward contract).
"""

from __future__ import annotations

import math

import numpy as np

from . import threads
from .cpu_jit import kernels

# Above this many keys the score matrix of one head would outgrow the caches.
FLASH_MIN_KEYS = 512
BLOCK = 256
# The direct path's probabilities are kept for backward up to this size (rebuilding them
# costs a score matmul and an exp per score: about a fifth of the backward)
KEEP_PROBS_BYTES = 16 << 20


_mm = threads.matmul  # np.matmul on the threads the thread policy gives it


def _causal_mask(sq: int, sk: int, q0: int = 0, k0: int = 0) -> np.ndarray:
    """True where query q0+i may not see key k0+j (top-left aligned, as PyTorch)."""
    return (np.arange(k0, k0 + sk)[None, :] > np.arange(q0, q0 + sq)[:, None])


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
    """(out, lse): the forward of an op that records no node, so nothing is kept."""
    return _over_heads(_forward, (q, k, v, causal, scale, False, mask),
                       (2, 2, 2, None, None, None), 4)[:2]


def attention_forward_keeping(q, k, v, causal, scale, mask=None):
    """(out, lse, probabilities) for a graph node to hold until its backward: the
    probabilities where the direct path makes them and they fit KEEP_PROBS_BYTES,
    else None (backward then rebuilds them from lse)."""
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    sq, sk = q.shape[-2], k.shape[-2]
    keep = sk < FLASH_MIN_KEYS and \
        math.prod(lead) * sq * sk * q.dtype.itemsize <= KEEP_PROBS_BYTES
    return _over_heads(_forward, (q, k, v, causal, scale, keep, mask),
                       (2, 2, 2, None, None, None), 4)


def attention_backward(q, k, v, out, lse, gout, causal, scale, mask=None, probs=None):
    """(dq, dk, dv); ``probs``: what attention_forward_keeping returned, or None."""
    return _over_heads(_backward, (q, k, v, out, lse, gout, probs, causal, scale, mask),
                       (2, 2, 2, 2, 1, 2, None if probs is None else 2, None, None), 7)


def _over_heads(fn, args, tails, products):
    """fn(*args) (its arrays q, k, v first, the mask last), with the heads cut across
    the pool's threads (threads.over_batch) where their work calls for it (``products``:
    the work in score-sized matmuls, the row kernels counted as about two); the parts'
    results are joined along the cut dim."""
    q, k, mask = args[0], args[1], args[-1]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    items = math.prod(lead)
    parts = threads.parts_for(products * items * q.shape[-2] * k.shape[-2] * q.shape[-1],
                              items)
    if parts > 1:
        # a mask's dims broadcast from the right, the last two over (queries, keys)
        tails += (None if mask is None else min(2, mask.ndim),)
        split = threads.over_batch(fn, args, tails, parts)
        if split is not None:
            axis, results = split
            return tuple(None if r[0] is None else np.concatenate(r, axis=axis)
                         for r in zip(*results))
    return fn(*args)


def _forward(q, k, v, causal, scale, keep, mask):
    sk = k.shape[-2]
    if sk >= FLASH_MIN_KEYS:
        return _flash_forward(q, k, v, causal, scale, mask)
    s, scale = _scaled(_mm(q, np.swapaxes(k, -1, -2)), scale, mask, 0)
    # one pass per row: scale, causal mask, max, exp, sum, normalise and the
    # log-sum-exp (numpy's broadcast s - max alone costs several times that on rows
    # this short)
    p = np.empty(s.shape, s.dtype)
    lse = np.empty(s.shape[:-1], s.dtype)
    kernels().attention_probs(_by_rows(s), s.dtype.type(scale), causal, q.shape[-2],
                              _by_rows(p), lse.reshape(-1))
    # (p itself, not a copy: kept or not, it costs nothing more than its lifetime)
    return _mm(p, v), lse.astype(q.dtype, copy=False), p if keep else None


def _by_rows(a):
    """A C-contiguous array as a 2-D view of its rows (last dim), 0-size ones too."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def _scaled(s, scale, mask, k0):
    """Scores (C-contiguous) and the scale the row kernel still applies to them: all of
    it where no mask is given; else the scaled scores with the mask applied, and 1."""
    if mask is None:
        return s, scale
    s *= scale
    return np.ascontiguousarray(_masked(s, mask, k0, s.shape[-1])), 1.0


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
        s = _mm(q, np.swapaxes(kb, -1, -2))
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
        out = out * alpha + _mm(p, vb)
        m = m_new
    out /= l
    lse = (m + np.log(l))[..., 0]
    return out, lse.astype(q.dtype, copy=False), None  # (no probabilities to keep)


def _backward(q, k, v, out, lse, gout, p, causal, scale, mask):
    sq, sk = q.shape[-2], k.shape[-2]
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    # D_i = sum_j P_ij dP_ij = rowsum(dO * O): the softmax Jacobian's correction term.
    rows = (_rows(lse, lead + (sq,)),
            _rows(np.einsum("...qd,...qd->...q", gout, out), lead + (sq,)))
    if sk < FLASH_MIN_KEYS:
        return _backward_keys(q, k, v, gout, rows, causal, scale, mask, 0, p)
    dq = np.zeros(lead + q.shape[-2:], q.dtype)
    dk = np.zeros(lead + k.shape[-2:], k.dtype)
    dv = np.zeros(lead + v.shape[-2:], v.dtype)
    for k0 in range(0, sk, BLOCK):
        keys = slice(k0, k0 + BLOCK)
        dqb, dk[..., keys, :], dv[..., keys, :] = _backward_keys(
            q, k[..., keys, :], v[..., keys, :], gout, rows, causal, scale, mask, k0)
        dq += dqb
    return dq, dk, dv


def _rows(stat, shape):
    """A per-query statistic as one contiguous value per row of scores."""
    return np.ascontiguousarray(np.broadcast_to(stat, shape)).reshape(-1)


def _backward_keys(q, kb, vb, gout, rows, causal, scale, mask, k0, p=None):
    """(dq, dk, dv) of attention through the keys kb (those from k0 on): dq is this
    block's share, dk and dv are the block's rows. ``p``: the block's probabilities,
    where the forward kept them (else they are rebuilt from the scores)."""
    lse_rows, delta_rows = rows
    if p is None:
        s, left = _scaled(_mm(q, np.swapaxes(kb, -1, -2)), scale, mask, k0)
        p = np.empty(s.shape, s.dtype)
        kernels().exp_rows(_by_rows(s), s.dtype.type(left), lse_rows, causal, q.shape[-2],
                           k0, _by_rows(p))
    dv = _mm(np.swapaxes(p, -1, -2), gout)
    ds = _mm(gout, np.swapaxes(vb, -1, -2))
    kernels().attention_dscores(_by_rows(p), _by_rows(ds), delta_rows, p.dtype.type(scale),
                                _by_rows(ds))
    return _mm(ds, kb), _mm(np.swapaxes(ds, -1, -2), q), dv
