"""Lab 07 · A character language model: the exercises and their checkers.

The next-character pairs are checked against ``haelixe.data.text.next_char_pairs`` on
codes that are all different, so a window that starts one place off is told apart from
one that ends one place off. Sampling is checked by what it draws: thousands of rows of
the same logits, whose frequencies must follow softmax(logits / temperature) over the
top k (and nothing outside them).
"""

from __future__ import annotations

import numpy as np

from ..charlm import sample_next as engine_sample_next
from ..creation import tensor
from ..data.text import next_char_pairs
from ..random import manual_seed
from .core import Lab, first_hint
from .values import as_array, describe

LAB = Lab(7, "A character language model")


# -- 7.1 inputs and next-character targets ------------------------------------------------

def _pair(raw, n, context, call, fb):
    if not isinstance(raw, (tuple, list)) or len(raw) != 2:
        fb.fail(f"{call} should return two arrays (x, y), got {describe(raw)}",
                hint="return x, y")
    out = []
    for name, value in zip("xy", raw):
        got, complaint = as_array(value, (n, context), f"{name} of {call}")
        if complaint:
            fb.fail(complaint, hint=f"{name} holds one row of {context} codes per start: "
                                    f"shape (len(starts), context)")
        out.append(got)
    return out


@LAB.exercise("7.1", "Inputs and next-character targets",
              section="2. Inputs and targets", fallback=lambda: next_char_pairs)
def pairs(answer, fb):
    codes = np.arange(100, 160, dtype=np.int64)  # all different: every shift shows
    for starts, context in (([0, 7, 30], 8), ([51], 8), ([3, 3], 1)):
        call = f"make_pairs(codes, starts={starts}, context={context})"
        raw = fb.call(answer, codes, np.array(starts), context, shown=call)
        want_x, want_y = next_char_pairs(codes, starts, context)
        got_x, got_y = _pair(raw, len(starts), context, call, fb)
        if np.array_equal(got_x, want_x) and np.array_equal(got_y, want_y):
            continue
        s = np.array(starts)[:, None] + np.arange(context)
        hint = first_hint(
            (np.array_equal(got_y, want_x),
             "y is the window one character later: y[b, t] is the character that FOLLOWS "
             "x[b, t], so y starts at start + 1"),
            (np.array_equal(got_x, want_x) and np.array_equal(got_y, codes[s - 1]),
             "the target comes after the input, not before: codes[start + 1 : start + "
             "context + 1]"),
            (np.array_equal(got_x, want_y),
             "x starts at the start itself: codes[start : start + context]"),
            (np.array_equal(got_x, codes[np.array(starts)[:, None] + np.zeros(context, int)]),
             "each row is a window of `context` consecutive codes, not one code repeated"),
            otherwise="x[b] = codes[s : s + context] and y[b] = codes[s + 1 : s + context + "
                      "1] for each start s")
        which = "x" if not np.array_equal(got_x, want_x) else "y"
        fb.fail(f"{call}: {which} is not the expected window",
                expected={"x": want_x, "y": want_y}[which].astype(np.int64),
                got=(got_x if which == "x" else got_y).astype(np.int64), hint=hint)
    return "x is each window and y the same window one character later, for every start"


# -- 7.2 sampling with temperature and top-k ------------------------------------------------

_LOGITS = np.array([2.0, 0.5, -1.0, 1.5, 0.0, -2.0], np.float32)
_ROWS = 4000


def _frequencies(answer, temperature, top_k, fb, seed):
    call = f"sample_next(logits, temperature={temperature}, top_k={top_k})"
    logits = tensor(np.tile(_LOGITS, (_ROWS, 1)))
    manual_seed(seed)
    raw = fb.call(answer, logits, temperature, top_k, shown=call)
    got, complaint = as_array(raw, (_ROWS, 1), call)
    if complaint:
        fb.fail(complaint, hint="one draw per row of logits: shape (batch, 1), as "
                                "hx.multinomial(probs, 1) gives")
    if not np.all((got >= 0) & (got < len(_LOGITS)) & (got == np.round(got))):
        fb.fail(f"{call} should return character indices 0..{len(_LOGITS) - 1}",
                got=raw, hint="draw indices with hx.multinomial(probabilities, 1)")
    counts = np.bincount(got.astype(np.int64).ravel(), minlength=len(_LOGITS))
    return call, counts / _ROWS


def _follows(freq, p) -> bool:
    """Frequencies of 4000 draws within 0.035 of ``p`` (over 4 standard errors), and
    nothing drawn where ``p`` is 0."""
    return np.abs(freq - p).max() < 0.035 and not ((p == 0) & (freq > 0)).any()


def _distribution(temperature, top_k, scale=None):
    z = _LOGITS.astype(np.float64) * (1 / temperature if scale is None else scale)
    if top_k is not None:
        z = np.where(z >= np.sort(z)[-top_k], z, -np.inf)
    p = np.exp(z - z.max())
    return p / p.sum()


@LAB.exercise("7.2", "Sampling with temperature and top-k", section="6. Sampling",
              fallback=lambda: engine_sample_next)
def sampling(answer, fb):
    for temperature, top_k, seed in ((1.0, None, 1), (0.5, None, 2), (2.0, 3, 3),
                                     (1.0, 1, 4)):
        call, freq = _frequencies(answer, temperature, top_k, fb, seed)
        want = _distribution(temperature, top_k)
        if _follows(freq, want):
            continue
        outside = (want == 0) & (freq > 0)

        def looks_like(p, freq=freq):
            return _follows(freq, p)

        hint = first_hint(
            (top_k is not None and outside.any() and looks_like(_distribution(temperature,
                                                                              None)),
             f"top_k={top_k}: keep only the {top_k} largest logits; set the others to "
             f"-inf (logits.topk(k).values[:, -1:] is the k-th largest per row)"),
            (temperature != 1 and looks_like(_distribution(temperature, top_k,
                                                           scale=temperature)),
             "divide the logits by the temperature (a temperature below 1 sharpens the "
             "distribution); yours multiplies"),
            (temperature != 1 and looks_like(_distribution(1.0, top_k)),
             "the temperature is not applied: divide the logits by it before the softmax"),
            (looks_like(np.eye(len(_LOGITS))[np.argmax(_LOGITS)]),
             "always the largest logit is greedy decoding; draw from the probabilities "
             "with hx.multinomial"),
            otherwise="probabilities = softmax(logits / temperature) over the top k "
                      "logits (the rest -inf), then one draw: hx.multinomial(p, 1)")
        over = "all the logits (top_k None)" if top_k is None else f"the top {top_k}"
        fb.fail(f"{call}: the draws do not follow softmax(logits / {temperature:g}) over "
                f"{over}", expected=np.round(want, 3), got=np.round(freq, 3), hint=hint)
    return ("the draws follow softmax(logits / temperature) over the top k, for "
            "temperatures 0.5, 1 and 2 and k = 1, 3 and all")
