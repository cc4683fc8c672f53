"""The CTC forward-backward recursion in log space, in numpy on the host: the extended
labels (a blank around and between each target label), alpha (the log-probability of
every path prefix ending at an extended label at a time step), beta (of every suffix
starting there, its own emission included, as PyTorch defines it) and PyTorch's
gradient with respect to the log-probabilities. Every step is vectorised over the batch
and the extended labels; only time is a loop.

Arrays: ``lp`` (T, N, C) float64 log-probabilities; ``labels`` (N, S) int64 targets,
padded; ``il`` and ``tl`` (N,) int64 input and target lengths."""

from __future__ import annotations

import numpy as np

_NEG = -np.inf


class Extended:
    """The extended label sequences of a batch: ``ext`` (N, L) the class of each
    position (blank at even ones), ``skip`` (N, L) where a path may come from two
    positions back (a label differing from the label before it: repeated labels need
    the blank between them), ``valid`` (N, L) the positions within each sample's
    2 * target_length + 1."""

    __slots__ = ("ext", "skip", "valid")

    def __init__(self, labels, tl, blank):
        n, s = labels.shape
        width = 2 * s + 1
        self.ext = np.full((n, width), blank, np.int64)
        self.ext[:, 1::2] = labels
        self.skip = np.zeros((n, width), bool)
        self.skip[:, 3::2] = labels[:, 1:] != labels[:, :-1]
        self.valid = np.arange(width)[None, :] < (2 * tl + 1)[:, None]


def emissions(lp, ext):
    """(T, N, L): the log-probability of each extended position's class at each step."""
    return lp[:, np.arange(lp.shape[1])[:, None], ext]


def _logsumexp3(a, b, c):
    return np.logaddexp(np.logaddexp(a, b), c)


def _shifted(a, by):
    """``a`` (N, L) moved ``by`` positions along the labels (right for by > 0), -inf
    where nothing moves in."""
    out = np.full_like(a, _NEG)
    if by > 0:
        out[:, by:] = a[:, :-by]
    else:
        out[:, :by] = a[:, -by:]
    return out


def alpha(e, x: Extended):
    """(T, N, L) log alpha: paths start at the first blank or the first label."""
    t_len = e.shape[0]
    out = np.full(e.shape, _NEG)
    out[0, :, :2] = e[0, :, :2]
    out[0] = np.where(x.valid, out[0], _NEG)
    for t in range(1, t_len):
        prev = out[t - 1]
        two_back = np.where(x.skip, _shifted(prev, 2), _NEG)
        out[t] = np.where(x.valid, _logsumexp3(prev, _shifted(prev, 1), two_back) + e[t],
                          _NEG)
    return out


def log_likelihood(a, il, tl):
    """(N,) the log-probability of each target: the paths ending at the last label or
    the blank after it at the sample's last step (0 for an empty input and target, -inf
    for an empty input and a target)."""
    n = np.arange(a.shape[1])
    last = np.maximum(il - 1, 0)
    end = a[last, n, 2 * tl]
    before = np.where(tl > 0, a[last, n, np.maximum(2 * tl - 1, 0)], _NEG)
    ll = np.logaddexp(end, before)
    return np.where(il > 0, ll, np.where(tl == 0, 0.0, _NEG))


def beta(e, x: Extended, il, tl):
    """(T, N, L) log beta, each step's emission included; -inf from a sample's input
    length on."""
    t_len, n, width = e.shape
    out = np.full(e.shape, _NEG)
    ends = np.zeros((n, width), bool)
    ends[np.arange(n), 2 * tl] = True
    ends[np.arange(n), np.maximum(2 * tl - 1, 0)] |= tl > 0
    ahead = np.zeros_like(x.skip)  # (where a path may go from s to s + 2)
    ahead[:, :-2] = x.skip[:, 2:]
    nxt = np.full((n, width), _NEG)
    for t in range(t_len - 1, -1, -1):
        two_on = np.where(ahead, _shifted(nxt, -2), _NEG)
        step = _logsumexp3(nxt, _shifted(nxt, -1), two_on) + e[t]
        start = np.where(ends, e[t], _NEG)
        cur = np.where((t == il - 1)[:, None], start,
                       np.where((t < il - 1)[:, None], step, _NEG))
        out[t] = nxt = np.where(x.valid, cur, _NEG)
    return out


def gradient(lp, e, a, x: Extended, il, tl, nll):
    """(T, N, C) PyTorch's gradient of each loss with respect to ``lp``:
    exp(lp) - exp(log sum over the positions of class c of alpha * beta, + nll - lp) for
    the steps within each input, 0 after. It assumes nothing of lp's normalisation
    (through log_softmax it is the exact gradient of the logits); an infeasible
    target's (nll = inf) is NaN, as PyTorch's. (Where a target's last label is the
    blank's class, PyTorch's backward keeps one of the two alignments ending at the last
    step; this sums both, as its forward does, so it is the gradient of the loss.)"""
    b = beta(e, x, il, tl)
    ab = a + b
    top = ab.max(axis=2, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)  # (no alignment passes there: all -inf)
    classes = (x.ext[:, :, None] == np.arange(lp.shape[2])) & x.valid[:, :, None]
    by_class = np.einsum("tnl,nlc->tnc", np.exp(ab - top), classes.astype(lp.dtype))
    log_ab = np.log(by_class) + top
    grad = np.exp(lp) - np.exp(log_ab + nll[None, :, None] - lp)
    inside = np.arange(lp.shape[0])[:, None] < il[None, :]
    return np.where(inside[:, :, None], grad, 0.0)
