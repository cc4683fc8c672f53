"""Lab 05 · The Transformer denoiser: the exercises and their checkers.

RMSNorm is checked against the engine's fused kernel (forward and both gradients, the
graph drawn with the node whose gradient differs ringed); the causal mask and attention
against the fused attention kernel with ``causal=True``.
"""

from __future__ import annotations

import math

import numpy as np

from ..creation import from_numpy, tensor
from ..nn import functional as F
from ..ops.fused import RMSNormFn
from .core import Lab, first_hint
from .functions import check_forward, gradcheck_message, locate_difference, require_function
from .render import grid_svg
from .values import as_array, first_difference

LAB = Lab(5, "The Transformer denoiser")


def _rng():
    return np.random.default_rng(5)


# -- 5.1 RMSNorm, forward and backward ----------------------------------------------------

def _rms_by(x, w, eps, reduce=np.mean, root=True):
    ms = reduce(x * x, axis=-1, keepdims=True) + eps
    return x / np.sqrt(ms) * w if root else x / ms * w


def _rmsnorm_forward_hint(inputs, want, got) -> str:
    x, w, eps = inputs[0].detach().numpy(), inputs[1].detach().numpy(), inputs[2]
    def close(alt):
        return np.allclose(got, alt, atol=1e-6)

    return first_hint(
        (close(_rms_by(x, w, 0.0)), "ε goes inside the root: x / √(mean(x²) + ε) · w"),
        (close(_rms_by(x, w, eps, np.sum)),
         "a mean over the last dim, not a sum: the root of the MEAN square"),
        (close(_rms_by(x, w, eps, root=False)), "divide by the square ROOT of mean(x²) + ε"),
        otherwise="y = x / √(mean(x², last dim) + ε) · w")


def _rmsnorm_graph(op, x, w):
    """loss = Σ RMSNorm(x, w · 1) · c; the weight is used through an op so that the
    engine checks the shape of the gradient returned for it."""
    c = from_numpy(np.linspace(-1.0, 1.5, x.numel()).reshape(x.shape))
    return (op(x, w * 1.0, 1e-6) * c).sum()


def _engine_rms(x, w, eps):
    return F.rms_norm(x, x.shape[-1:], w, eps)


@LAB.exercise("5.1", "RMSNorm, forward and backward", section="2. RMSNorm by hand",
              fallback=lambda: RMSNormFn,
              error_hint="a gradient must have the shape of its input: the weight's sums "
                         "over every dim but the last")
def rmsnorm(answer, fb):
    apply = require_function(fb, answer, "RMSNormFn")
    rng = _rng()

    def leaf(*shape, transposed=False):
        a = rng.standard_normal(shape[::-1] if transposed else shape)
        t = from_numpy(a.copy())
        return (t.T if transposed else t).requires_grad_()

    cases = [("x (2, 5, 8), w (8,), eps 1e-6", (leaf(2, 5, 8), leaf(8), 1e-6)),
             ("a transposed x (6, 4), eps 0.5", (leaf(6, 4, transposed=True), leaf(4), 0.5))]
    check_forward(fb, apply, cases, _engine_rms, "RMSNormFn", _rmsnorm_forward_hint)

    # one case throughout the backward feedback: the gradients compared, gradcheck and
    # the graph all use x (3, 4, 6) and w (6,), so every shape shown is the same
    shapes = ((3, 4, 6), (6,))
    x, w0 = leaf(*shapes[0]), leaf(*shapes[1])
    g = from_numpy(rng.standard_normal(shapes[0]))
    y = fb.call(apply, x, w0 * 1.0, 1e-6)
    fb.call(y.backward, g, shown="backward of RMSNormFn",
            unfinished="the forward is right; backward is not written yet")
    xr, wr = (t.detach().clone().requires_grad_() for t in (x, w0))
    _engine_rms(xr, wr * 1.0, 1e-6).backward(g)
    problems = []
    for name, mine, ref in (("x", x, xr), ("weight", w0, wr)):
        got, complaint = as_array(mine.grad, ref.shape, f"the gradient of {name}")
        if complaint:
            fb.fail(complaint, hint="backward returns (dx, dweight, None): one gradient per "
                                    "input of forward, None for eps")
        if first_difference(ref.grad.numpy(), got, 1e-6, 1e-6) is not None:
            problems.append((name, ref.grad.numpy(), got))
    message = gradcheck_message(lambda a, b: apply(a, b, 1e-6),
                                [leaf(*shapes[0]), leaf(*shapes[1])], "RMSNormFn")
    if not problems and message is None:
        return "forward matches the fused kernel, and both gradients match (gradcheck too)"
    if not problems:
        problems.append(("x", None, None))
    name, want, got = problems[0]
    xs, ws = x.detach().numpy(), w0.detach().numpy()
    r = 1 / np.sqrt((xs * xs).mean(-1, keepdims=True) + 1e-6)
    hint = first_hint(
        (name == "x" and got is not None and np.allclose(got, g.numpy() * ws * r),
         "r = 1/√(mean(x²)+ε) depends on x too: dx = r·(g·w − x·r²·mean(g·w·x)) over the "
         "last dim"),
        (name == "x", "dx = r·(g·w − x·r²·mean(g·w·x, last dim)) with r = 1/√(mean(x²)+ε)"),
        otherwise="dweight = Σ g·x·r over every dim but the last")
    located = fb.call(locate_difference, _rmsnorm_graph, apply,
                      lambda a, b, eps: _engine_rms(a, b, eps),
                      [from_numpy(rng.standard_normal(shapes[0])),
                       from_numpy(rng.standard_normal(shapes[1]))], ["x", "w"])
    shape = shapes[0] if name == "x" else shapes[1]
    fb.fail(f"backward gives a wrong gradient for {name}: expected and got below are "
            f"d(sum(y * g))/d{name}, of shape {shape}, for x {shapes[0]} and w {shapes[1]}",
            expected=want, got=got, hint=hint, detail=message,
            pictures=[located[::-1]] if located else [])


# -- 5.2 a causal mask --------------------------------------------------------------------

def engine_causal_mask(T):
    """True where query i may attend key j (j <= i), as a bool Tensor (T, T)."""
    return tensor(np.tril(np.ones((T, T), dtype=bool)))


@LAB.exercise("5.2", "A causal mask", section="4. Attention",
              fallback=lambda: engine_causal_mask)
def causal(answer, fb):
    for T in (4, 7, 1):  # T = 1 last: there, a strict mask and an inverted one agree
        want = np.tril(np.ones((T, T)))
        call = f"causal_mask({T})"
        raw = fb.call(answer, T, shown=call)
        got, complaint = as_array(raw, (T, T), call)
        if complaint:
            fb.fail(complaint, hint="return a (T, T) bool Tensor")
        if not np.isin(got, (0.0, 1.0)).all():
            fb.fail(f"{call} should hold True/False (or 1/0) only", got=raw)
        if np.array_equal(got, want):
            continue
        hint = first_hint(
            (np.array_equal(got, np.triu(np.ones((T, T)))),
             "row i is the query at position i: it may see keys 0..i, the past, so True "
             "sits on and below the diagonal (j <= i)"),
            (np.array_equal(got, np.tril(np.ones((T, T)), -1)),
             "a position may attend to itself: the diagonal is True too"),
            (np.array_equal(got, 1 - want),
             "the convention is True = may attend; yours marks the blocked pairs"),
            otherwise="query i may attend key j exactly when j <= i")
        fb.fail(f"{call} is not the causal mask", expected=want.astype(bool),
                got=got.astype(bool), hint=hint,
                pictures=[("expected (True filled)", grid_svg(want, "causal_mask, expected")),
                          ("yours", grid_svg(got, "yours"))])
    return "True exactly where j <= i, for T = 1, 4 and 7"


# -- 5.3 attention by hand, with the mask -------------------------------------------------

def _attention_np(q, k, v, causal, scale=None, fill=-np.inf, dim=-1):
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        T = s.shape[-1]
        s = np.where(np.tril(np.ones((T, T), bool)), s, fill)
    s = s - s.max(dim, keepdims=True)
    e = np.exp(s)
    return (e / e.sum(dim, keepdims=True)) @ v


def _attention_hint(q, k, v, causal, got) -> str:
    def close(**variant):
        return np.allclose(got, _attention_np(q, k, v, **variant), atol=1e-6)

    return first_hint(
        (close(causal=causal, scale=1.0),
         "scale the scores by 1/√d (d = head_dim) before the softmax"),
        (causal and close(causal=False),
         "with causal=True, mask the scores: fill the blocked ones (mask False) with -inf"),
        (causal and close(causal=True, fill=0.0),
         "a blocked score of 0 still gets weight exp(0); fill it with -inf, whose exp is "
         "exactly 0"),
        (close(causal=causal, dim=-2),
         "softmax over the last dim: each query's weights over the keys sum to 1"),
        otherwise="softmax(q @ kᵀ / √d, masked) @ v, the softmax over the keys (last dim)")


@LAB.exercise("5.3", "Attention by hand, with the mask", section="4. Attention",
              fallback=lambda: F.scaled_dot_product_attention)
def attention(answer, fb):
    rng = _rng()
    for causal_flag in (False, True):
        q, k, v = (from_numpy(rng.standard_normal((2, 3, 5, 4))).requires_grad_()
                   for _ in range(3))
        call = f"attention(q, k, v, causal={causal_flag})"
        raw = fb.call(answer, q, k, v, causal_flag, shown=call)
        ref = F.scaled_dot_product_attention(*(t.detach().clone().requires_grad_()
                                               for t in (q, k, v)), causal=causal_flag)
        want = ref.detach().numpy()
        got, complaint = as_array(raw, want.shape, call)
        if complaint:
            fb.fail(complaint, hint="return a Tensor of q's shape (..., T, head_dim)")
        where = first_difference(want, got, 1e-6, 1e-6)
        if where is not None:
            qs, ks, vs = (t.detach().numpy() for t in (q, k, v))
            fb.fail(f"{call}: first difference at element {where}: expected "
                    f"{want[where]:.6g}, got {got[where]:.6g}", expected=want, got=got,
                    hint=_attention_hint(qs, ks, vs, causal_flag, got))
        if not getattr(raw, "requires_grad", False):
            fb.fail(f"{call} has no autograd graph", hint="build it from Haelixe ops on q, "
                    "k and v (no .numpy(), no detach) so gradients flow back")
    return "forward equals the fused kernel, with and without the causal mask"
