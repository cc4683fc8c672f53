"""The GPU backend's plan caches: what a call works out from its operands' layouts and
arguments alone (metadata, kernel spec, launch size) is kept per signature. Each test
makes a plan, then calls again with one field of the signature changed, and checks the
second result against numpy: a key that missed the field would reuse the first plan
(reading the wrong elements, or the right ones with the wrong kernel)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytestmark = pytest.mark.gpu
BF16 = np.dtype(ml_dtypes.bfloat16)
M, K, N = 6, 5, 8


def close(got, want, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=atol)


def on_gpu(be, base: np.ndarray, view: np.ndarray):
    """The GPU twin of ``view``, a numpy view of the C-contiguous ``base``."""
    g = be.from_numpy(base)
    isz = base.itemsize
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // isz
    return g.view(view.shape, tuple(s // isz for s in view.strides), offset)


def bf16(x):
    return np.asarray(x, np.float32).astype(BF16).astype(np.float64)


def each_pair(pairs):
    """Run a test once per (first call, second call) of ``pairs``."""
    return pytest.mark.parametrize("first_call, second_call", pairs,
                                   ids=lambda name: name.replace(" ", "-"))


rng = np.random.default_rng(5)
A = rng.standard_normal((M + 1, 2 * K + 1)).astype(np.float32)
B = rng.standard_normal((K + 1, 2 * N + 1)).astype(np.float32)
BIAS = rng.standard_normal(N + 1).astype(np.float32)
ROW = rng.standard_normal(M + 1).astype(np.float32)
ELEM = rng.standard_normal((N + 1, M + 1)).astype(np.float32)


def a_(x):
    return x[:M, :K]


def b_(x):
    return x[:K, :N]


# name: (A's view, B's view, their dtype (or dtypes), keyword arguments as (base, view) of a module
# array or a value, what numpy's product then goes through)
MATMUL_CALLS = {
    "plain": (a_, b_, np.float32, {}, None),
    "a shape": (lambda x: x[:M - 1, :K], b_, np.float32, {}, None),
    "a offset": (lambda x: x[1:, :K], b_, np.float32, {}, None),
    "a strides": (lambda x: x[:M, :2 * K:2], b_, np.float32, {}, None),
    "b shape": (a_, lambda x: x[:K, :N - 1], np.float32, {}, None),
    "b offset": (a_, lambda x: x[1:, :N], np.float32, {}, None),
    "b strides": (a_, lambda x: x[:K, :2 * N:2], np.float32, {}, None),
    "dtype": (a_, b_, BF16, {}, None),
    "out float32": (a_, b_, np.float32, {"out_dtype": np.float32}, None),
    "a dtype": (a_, b_, (BF16, np.float32), {"out_dtype": np.float32}, None),
    "b dtype": (a_, b_, (np.float32, BF16), {"out_dtype": np.float32}, None),
    "bias": (a_, b_, np.float32, {"bias": (BIAS, BIAS[:N])}, None),
    "bias offset": (a_, b_, np.float32, {"bias": (BIAS, BIAS[1:])}, None),
    "activation": (a_, b_, np.float32, {"activation": "{x} * 2.0"}, lambda c: 2 * c),
    "other activation": (a_, b_, np.float32, {"activation": "{x} * 3.0"},
                         lambda c: 3 * c),
    "pre": (a_, b_, np.float32, {"activation": "{x} * 2.0", "want_pre": True},
            lambda c: 2 * c),
    "row sums": (a_, b_, np.float32, {"want_row_sums": True}, None),
    "out dtype": (a_, b_, np.float32, {"out_dtype": BF16}, None),
    "round A": (a_, b_, np.float32, {"round_to": (BF16, None, None)}, None),
    "row operand": (a_, b_, np.float32,
                    {"activation": "{x} + {r}", "row_operand": (ROW, ROW[:M])}, None),
    "row operand offset": (a_, b_, np.float32,
                           {"activation": "{x} + {r}", "row_operand": (ROW, ROW[1:])}, None),
    "elem operand": (a_, b_, np.float32,
                     {"activation": "{x} + {e}", "elem_operand": (ELEM, ELEM[:N, :M].T)},
                     None),
    "elem operand offset": (a_, b_, np.float32,
                            {"activation": "{x} + {e}",
                             "elem_operand": (ELEM, ELEM[1:, 1:].T)}, None),
}
# each pair differs in one field
MATMUL_PAIRS = [("plain", other) for other in MATMUL_CALLS if other != "plain"] + [
    ("out float32", "a dtype"), ("out float32", "b dtype"),
    ("activation", "other activation"), ("activation", "pre"), ("bias", "bias offset"),
    ("row operand", "row operand offset"), ("elem operand", "elem operand offset")]


def _matmul_call(be, name):
    """(the GPU's result, numpy's) of MATMUL_CALLS[name]."""
    from haelixe.backends.wgpu import matmul as mm

    view_a, view_b, dtypes, kwargs, finish = MATMUL_CALLS[name]
    dtypes = dtypes if isinstance(dtypes, tuple) else (dtypes, dtypes)
    base_a, base_b = A.astype(dtypes[0]), B.astype(dtypes[1])
    a, b = view_a(base_a), view_b(base_b)
    gpu = {k: on_gpu(be, *v) if isinstance(v, tuple) and isinstance(v[0], np.ndarray)
           else v for k, v in kwargs.items()}
    got = mm.matmul(be, on_gpu(be, base_a, a), on_gpu(be, base_b, b), **gpu)
    a64 = bf16(a) if "round_to" in kwargs else a.astype(np.float64)
    want = a64 @ b.astype(np.float64)
    if kwargs.get("want_pre") or kwargs.get("want_row_sums"):  # (C, pre) or (C, sums)
        got, second = got
        want_second = a64.sum(-1) if kwargs.get("want_row_sums") else want
        close(be.to_numpy(second), want_second)
    got = be.to_numpy(got)
    for k, shaped in (("bias", lambda v: v), ("row_operand", lambda v: v[:, None]),
                      ("elem_operand", lambda v: v)):
        if k in kwargs:
            want = want + shaped(kwargs[k][1])
    if finish is not None:
        want = finish(want)
    low = kwargs.get("out_dtype", dtypes[0]) == BF16
    return got, (bf16(want) if low else want), low


@each_pair(MATMUL_PAIRS)
def test_matmul_plan_per_signature(be, monkeypatch, first_call, second_call):
    from haelixe.backends.wgpu import matmul as mm

    monkeypatch.setattr(mm, "_PLANS", {})
    for name in (first_call, second_call):
        got, want, low = _matmul_call(be, name)
        tol = 2e-2 if low else 1e-5
        close(got, want, rtol=tol, atol=tol)
    assert len(mm._PLANS) == 2


def test_matmul_plan_per_variant_and_build(be, monkeypatch):
    """The tile asked for, the adapter's features and the build switches are part of a
    plan's signature too (they change the kernel, not the numbers)."""
    from haelixe.backends.wgpu import matmul as mm

    monkeypatch.setattr(mm, "_PLANS", {})
    a, b = be.from_numpy(A[:M, :K].copy()), be.from_numpy(B[:K, :N].copy())
    want = A[:M, :K].astype(np.float64) @ B[:K, :N]

    def last_spec():
        return mm._PLANS[next(reversed(mm._PLANS))].launch.spec

    tiles = []
    for variant in (mm.Variant(mm.TILES["64x64"]), mm.Variant(mm.TILES["128x64"])):
        close(be.to_numpy(mm.matmul(be, a, b, variant=variant)), want)
        tiles.append(dict(last_spec().params)["BM"])
    assert tiles == ["64", "128"]
    # a chooser put in its place (a sweep forcing each variant) plans afresh
    for tile in ("64x64", "128x64"):
        monkeypatch.setattr(mm, "choose", lambda *args, t=tile: mm.Variant(mm.TILES[t]))
        close(be.to_numpy(mm.matmul(be, a, b)), want)
        tiles.append(dict(last_spec().params)["BM"])
    assert tiles == ["64", "128", "64", "128"]
    monkeypatch.undo()
    monkeypatch.setattr(mm, "_PLANS", {})
    close(be.to_numpy(mm.matmul(be, a, b)), want)
    checks = last_spec().checks
    monkeypatch.setattr(mm, "RUNTIME_CHECKS", not mm.RUNTIME_CHECKS)
    close(be.to_numpy(mm.matmul(be, a, b)), want)
    assert last_spec().checks != checks
    if not be.context.has("shader-f16"):
        return
    # float16 in f16 arithmetic where the adapter has it, widened to f32 where not
    a16, b16 = (be.from_numpy(x.astype(np.float16)) for x in (A[:M, :K], B[:K, :N]))
    enabled = []
    for features, flush in ((be.context.features, 2), (be.context.features, None),
                            (be.context.features - {"shader-f16"}, 2)):
        monkeypatch.setattr(be.context, "features", features)
        monkeypatch.setattr(mm, "F16_FLUSH_TILES", flush)
        close(be.to_numpy(mm.matmul(be, a16, b16)), want, rtol=1e-2, atol=1e-2)
        enabled.append(last_spec().enable)
    assert enabled == [("f16",), (), ()]


# -- elementwise (run_map) ---------------------------------------------------------------
X = rng.standard_normal((M + 1, 2 * N + 1)).astype(np.float32)
Y = rng.standard_normal((M + 1, 2 * N + 1)).astype(np.float32)
LIB2 = "fn twice(v: f32) -> f32 { return 2.0 * v; }"
LIB3 = "fn twice(v: f32) -> f32 { return 3.0 * v; }"


def x_(v):
    return v[:M, :N]


# name: (out's view of a (M + 1, 2N + 1) buffer and its dtype, inputs (views of X and Y,
# or host scalars), run_map's keyword arguments, numpy's value of out (given the inputs
# and out's old value))
MAP_CALLS = {
    "plain": ((x_, np.float32), [(X, x_), (Y, x_)], {"expr": "x0 + x1"},
              lambda a, b, old: a + b),
    "out offset": ((lambda v: v[1:, 1:N + 1], np.float32), [(X, x_), (Y, x_)],
                   {"expr": "x0 + x1"}, lambda a, b, old: a + b),
    "out strides": ((lambda v: v[:M, :2 * N:2], np.float32), [(X, x_), (Y, x_)],
                    {"expr": "x0 + x1"}, lambda a, b, old: a + b),
    "out shape": ((lambda v: v[:M - 1, :N], np.float32),
                  [(X, lambda v: v[:M - 1, :N]), (Y, lambda v: v[:M - 1, :N])],
                  {"expr": "x0 + x1"}, lambda a, b, old: a + b),
    "broadcast": ((x_, np.float32), [(X, lambda v: v[:1, :N]), np.float32(2.5)],
                  {"expr": "x0 + x1"}, lambda a, b, old: a + b),
    "broadcast, out shape": ((lambda v: v[:M - 1, :N], np.float32),
                             [(X, lambda v: v[:1, :N]), np.float32(2.5)],
                             {"expr": "x0 + x1"}, lambda a, b, old: a + b),
    "out dtype": ((x_, BF16), [(X, x_), (Y, x_)], {"expr": "x0 + x1"},
                  lambda a, b, old: a + b),
    "input offset": ((x_, np.float32), [(X, lambda v: v[1:, :N]), (Y, x_)],
                     {"expr": "x0 + x1"}, lambda a, b, old: a + b),
    "input strides": ((x_, np.float32), [(X, lambda v: v[:M, ::2][:, :N]), (Y, x_)],
                      {"expr": "x0 + x1"}, lambda a, b, old: a + b),
    "input broadcast": ((x_, np.float32), [(X, lambda v: v[:1, :N]), (Y, x_)],
                        {"expr": "x0 + x1"}, lambda a, b, old: a + b),
    "input dtype": ((x_, np.float32), [(X.astype(BF16), x_), (Y, x_)],
                    {"expr": "x0 + x1"}, lambda a, b, old: a + b),
    "host float": ((x_, np.float32), [(X, x_), np.float32(2.5)], {"expr": "x0 + x1"},
                   lambda a, b, old: a + b),
    "host float scalars": ((x_, np.float32), [(X, x_), np.float32(2.5)],
                           {"expr": "x0 + x1", "scalars": (7,)}, lambda a, b, old: a + b),
    "host int": ((x_, np.float32), [(X, x_), np.int32(3)], {"expr": "x0 + f32(x1)"},
                 lambda a, b, old: a + b),
    "host float as int": ((x_, np.float32), [(X, x_), np.float32(3.0)],
                          {"expr": "x0 + f32(x1)"}, lambda a, b, old: a + b),
    "expr": ((x_, np.float32), [(X, x_), (Y, x_)], {"expr": "x0 * x1"},
             lambda a, b, old: a * b),
    "update": ((x_, np.float32), [(Y, x_)], {"expr": "x0 * 2.0", "update": True},
               lambda b, old: 2 * old),
    "no update": ((x_, np.float32), [(Y, x_)], {"expr": "x0 * 2.0"},
                  lambda b, old: 2 * b),
    "lib": ((x_, np.float32), [(X, x_), (Y, x_)], {"expr": "twice(x0) + x1", "lib": LIB2},
            lambda a, b, old: 2 * a + b),
    "other lib": ((x_, np.float32), [(X, x_), (Y, x_)],
                  {"expr": "twice(x0) + x1", "lib": LIB3}, lambda a, b, old: 3 * a + b),
    "typed": ((x_, np.float32), [(X > 0, x_)], {"expr": "select(1.0, 5.0, x0)",
                                                "typed": True},
              lambda a, old: np.where(a, 5.0, 1.0)),
    "untyped": ((x_, np.float32), [(X > 0, x_)], {"expr": "select(1.0, 5.0, x0 != 0u)"},
                lambda a, old: np.where(a, 5.0, 1.0)),
    # (the same WGSL for a float input: only the plan count tells them apart)
    "typed float": ((x_, np.float32), [(X, x_)], {"expr": "x0 * 2.0", "typed": True},
                    lambda a, old: 2 * a),
    "untyped float": ((x_, np.float32), [(X, x_)], {"expr": "x0 * 2.0"},
                      lambda a, old: 2 * a),
}
MAP_PAIRS = [("plain", name) for name in (
    "out offset", "out strides", "out shape", "out dtype", "input offset", "input strides",
    "input broadcast", "input dtype", "expr", "lib")] + [
    ("host float", "host float scalars"), ("host float", "host int"),
    ("host int", "host float as int"), ("lib", "other lib"), ("update", "no update"),
    ("typed", "untyped"), ("typed float", "untyped float"),
    ("broadcast", "broadcast, out shape")]


def _map_call(be, name):
    """(out's buffer after MAP_CALLS[name], numpy's), each as float64."""
    from haelixe.backends.wgpu.elementwise import run_map

    (out_view, out_dtype), inputs, kwargs, value = MAP_CALLS[name]
    old = np.arange((M + 1) * (2 * N + 1), dtype=np.float32).reshape(M + 1, -1) / 7
    base = old.astype(out_dtype)
    out = on_gpu(be, base, out_view(base))
    args, host = [], []
    for x in inputs:
        if isinstance(x, tuple):
            data, view = x
            args.append(on_gpu(be, data, view(data)))
            host.append(view(data).astype(np.float64))
        else:
            args.append(x)
            host.append(np.float64(x))
    run_map(be, out, args, **kwargs)
    want = base.astype(np.float64)
    target = out_view(want)
    target[...] = value(*host, target.copy())
    if out_dtype == BF16:
        want = bf16(want)
    whole = out.view(base.shape, (base.shape[1], 1), 0)
    return be.to_numpy(whole).astype(np.float64), want


@each_pair(MAP_PAIRS)
def test_map_plan_per_signature(be, monkeypatch, first_call, second_call):
    from haelixe.backends.wgpu import elementwise as ew

    monkeypatch.setattr(ew, "_MAP_PLANS", {})
    for name in (first_call, second_call):
        got, want = _map_call(be, name)
        tol = 1e-2 if MAP_CALLS[name][0][1] == BF16 else 1e-6
        close(got, want, rtol=tol, atol=tol)
    assert len(ew._MAP_PLANS) == 2


# -- row kernels (norms) -----------------------------------------------------------------
W = rng.standard_normal(N + 1).astype(np.float32)
BN = rng.standard_normal(N + 1).astype(np.float32)

# name: (x's view of X and its dtype, w's view of W or None, eps, with a bias (layernorm))
ROW_CALLS = {
    "plain": (x_, np.float32, lambda v: v[:N], 1e-6, False),
    "x offset": (lambda v: v[1:, 1:N + 1], np.float32, lambda v: v[:N], 1e-6, False),
    "x strides": (lambda v: v[:M, :2 * N:2], np.float32, lambda v: v[:N], 1e-6, False),
    "x shape": (lambda v: v[:M - 1, :N], np.float32, lambda v: v[:N], 1e-6, False),
    "x dtype": (x_, BF16, lambda v: v[:N], 1e-6, False),
    "no weight": (x_, np.float32, None, 1e-6, False),
    "weight offset": (x_, np.float32, lambda v: v[1:], 1e-6, False),
    "eps": (x_, np.float32, lambda v: v[:N], 0.5, False),
    "bias": (x_, np.float32, lambda v: v[:N], 1e-6, True),
}
ROW_PAIRS = [("plain", name) for name in ROW_CALLS if name != "plain"]


def _norm_call(be, name, layer):
    """(y from the GPU, numpy's) of ROW_CALLS[name] through rmsnorm or layernorm."""
    x_view, dtype, w_view, eps, bias = ROW_CALLS[name]
    base = X.astype(dtype)
    x = x_view(base).astype(np.float64)
    gx = on_gpu(be, base, x_view(base))
    w = None if w_view is None else w_view(W)
    gw = None if w is None else on_gpu(be, W, w)
    gb = on_gpu(be, BN, BN[:N]) if bias else None
    if layer:
        y = be.to_numpy(be.layernorm(gx, gw, gb, eps)[0])
        want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    else:
        y = be.to_numpy(be.rmsnorm(gx, gw, eps)[0])
        want = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps)
    want = want * (1 if w is None else w) + (BN[:N] if bias else 0)
    return y, (bf16(want) if dtype == BF16 else want), dtype == BF16


@each_pair(ROW_PAIRS)
def test_row_kernel_plan_per_signature(be, monkeypatch, first_call, second_call):
    from haelixe.backends.wgpu import nn

    monkeypatch.setattr(nn, "_ROW_PLANS", {})
    layer = "bias" in (first_call, second_call)
    for name in (first_call, second_call):
        got, want, low = _norm_call(be, name, layer)
        close(got, want, rtol=3e-2 if low else 1e-4, atol=3e-2 if low else 1e-4)
    assert len(nn._ROW_PLANS) == 2


def test_row_kernel_plan_per_features(be, monkeypatch):
    """Subgroup reductions or a tree through workgroup memory: the features are part of
    the signature."""
    from haelixe.backends.wgpu import nn

    monkeypatch.setattr(nn, "_ROW_PLANS", {})
    saved = be.context.features
    for features in (saved, saved - {"subgroup"}):
        monkeypatch.setattr(be.context, "features", features)
        got, want, _ = _norm_call(be, "plain", False)
        close(got, want, rtol=1e-4, atol=1e-4)
    assert len(nn._ROW_PLANS) == (2 if "subgroup" in saved else 1)


# -- attention kernels -------------------------------------------------------------------
S, D = 5, 8
QB = rng.standard_normal((2, 3, S + 1, D)).astype(np.float32)
KB = rng.standard_normal((2, 3, S + 1, D)).astype(np.float32)
VB = rng.standard_normal((2, 3, S + 1, D)).astype(np.float32)
GB = rng.standard_normal((2, 3, S + 1, D)).astype(np.float32)
MB = rng.standard_normal((S + 1, S + 1)).astype(np.float32)


def first(v):
    return v[:, :, :S]


def later(v):
    return v[:, :, 1:]


# name: (q's, k's and v's views of QB, KB and VB, their dtype, causal, scale, the mask:
# None or (its dtype, its view of MB))
ATTENTION_CALLS = {
    "plain": (first, first, first, np.float32, False, 0.3, None),
    "q offset": (later, first, first, np.float32, False, 0.3, None),
    "q strides": (lambda v: v[:, ::-1, :S], first, first, np.float32, False, 0.3, None),
    "k offset": (first, later, first, np.float32, False, 0.3, None),
    "v offset": (first, first, later, np.float32, False, 0.3, None),
    "dtype": (first, first, first, BF16, False, 0.3, None),
    "causal": (first, first, first, np.float32, True, 0.3, None),
    "scale": (first, first, first, np.float32, False, 0.7, None),
    "bool mask": (first, first, first, np.float32, False, 0.3,
                  (np.bool_, lambda m: m[:S, :S])),
    "float mask": (first, first, first, np.float32, False, 0.3,
                   (np.float32, lambda m: m[:S, :S])),
    "float mask offset": (first, first, first, np.float32, False, 0.3,
                          (np.float32, lambda m: m[1:, 1:])),
}
ATTENTION_PAIRS = [("plain", name) for name in ATTENTION_CALLS if name != "plain"] + [
    ("float mask", "float mask offset"), ("bool mask", "float mask")]


def _attention_call(be, name):
    """((out, dq, dk, dv) from the GPU's flash kernels, numpy's) of ATTENTION_CALLS[name]."""
    from haelixe.backends.wgpu import attention as at

    qv, kv, vv, dtype, causal, scale, mask = ATTENTION_CALLS[name]
    views, gpu = [], []
    for base, view in ((QB, qv), (KB, kv), (VB, vv), (GB, first)):
        typed = base.astype(dtype)
        views.append(view(typed).astype(np.float64))
        gpu.append(on_gpu(be, typed, view(typed)))
    q, k, v, g = views
    scores = q @ np.swapaxes(k, -1, -2) * scale
    gmask = None
    if mask is not None:
        mdtype, mview = mask
        mbase = MB > 0 if mdtype == np.bool_ else MB
        m = mview(mbase)
        gmask = on_gpu(be, mbase, m)
        scores = np.where(m, scores, -np.inf) if mdtype == np.bool_ else scores + m
    if causal:
        scores = np.where(np.triu(np.ones((S, S), bool), 1), -np.inf, scores)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = p @ v
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) * scale
    want = (out, ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ g)
    gq, gk, gv, gg = gpu
    gout, lse = at.attention(be, gq, gk, gv, causal, scale, gmask)
    grads = at.attention_backward(be, gq, gk, gv, gout, lse, gg, causal, scale, gmask)
    return [be.to_numpy(t).astype(np.float64) for t in (gout, *grads)], want, dtype == BF16


@each_pair(ATTENTION_PAIRS)
def test_attention_plan_per_signature(be, monkeypatch, first_call, second_call):
    from haelixe.backends.wgpu import attention as at

    if any(at.by_matmuls(be, *(be.empty((2, 3, S, D), np.float32),) * 3, (2, 3), None,
                         False, forward=f) for f in (True, False)):
        pytest.skip("attention goes through matmuls here (their plans are tested above)")
    monkeypatch.setattr(at, "_LAUNCHES", {})
    for name in (first_call, second_call):
        got, want, low = _attention_call(be, name)
        for g, w in zip(got, want):
            close(g, bf16(w) if low else w, rtol=5e-2 if low else 1e-4,
                  atol=5e-2 if low else 1e-4)
    assert len(at._LAUNCHES) == 6  # three kernels each


def test_attention_plan_per_kernel_plan_and_features(be, monkeypatch):
    """A kernel plan asked for (tests reach every variant with one) and the subgroup
    feature (the slices' sums by shuffles or through workgroup memory) are part of the
    signature."""
    from haelixe.backends.wgpu import attention as at

    monkeypatch.setattr(at, "_LAUNCHES", {})
    q, k, v = (on_gpu(be, b, first(b)) for b in (QB, KB, VB))
    want = be.to_numpy(at.attention(be, q, k, v, False, 0.3)[0])
    calls = [{"plans": {"attention_forward": at.Plan(1, 16, 4)}},
             {"plans": {"attention_forward": at.Plan(2, 16, 4)}}]
    saved = be.context.features
    for kwargs in calls:
        close(be.to_numpy(at.attention(be, q, k, v, False, 0.3, **kwargs)[0]), want)
    monkeypatch.setattr(be.context, "features", saved - {"subgroup"})
    close(be.to_numpy(at.attention(be, q, k, v, False, 0.3, **calls[1])[0]), want)
    assert len(at._LAUNCHES) == (4 if "subgroup" in saved else 3)


def test_attention_plan_per_tiled_switch(be, monkeypatch):
    """TILED_FORWARD picks the forward's kernel where no plan is asked for: part of the
    signature."""
    from haelixe.backends.wgpu import attention as at

    monkeypatch.setattr(at, "_LAUNCHES", {})
    rng = np.random.default_rng(8)
    q, k, v = (rng.standard_normal((2, 16, 32)).astype(np.float32) for _ in range(3))
    scores = q.astype(np.float64) @ np.swapaxes(k, -1, -2) * 0.2
    p = np.exp(scores - scores.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    for tiled in (False, True):
        monkeypatch.setattr(at, "TILED_FORWARD", tiled)
        got = at.attention(be, *(be.from_numpy(t) for t in (q, k, v)), False, 0.2)[0]
        close(be.to_numpy(got), want, rtol=1e-4, atol=1e-5)
    assert len(at._LAUNCHES) == 2


# -- reductions --------------------------------------------------------------------------
R = rng.standard_normal((4, 100, 200)).astype(np.float32)

# name: (x's view of R (or of R as a dtype), reduce's op, axes, keepdim, out_dtype)
REDUCE_CALLS = {
    "plain": (lambda v: v[:3, :40, :60], np.float32, "sum", (2,), False, None),
    "offset": (lambda v: v[1:, :40, :60], np.float32, "sum", (2,), False, None),
    "strides": (lambda v: v[:3, :40, :120:2], np.float32, "sum", (2,), False, None),
    "shape": (lambda v: v[:3, :40, :50], np.float32, "sum", (2,), False, None),
    "dtype": (lambda v: v[:3, :40, :60], BF16, "sum", (2,), False, None),
    "op": (lambda v: v[:3, :40, :60], np.float32, "max", (2,), False, None),
    "axes": (lambda v: v[:3, :40, :60], np.float32, "sum", (1,), False, None),
    "keepdim": (lambda v: v[:3, :40, :60], np.float32, "sum", (2,), True, None),
    "out dtype": (lambda v: v[:3, :40, :60], np.float32, "sum", (2,), False, BF16),
    # (rows long enough to be split into chunks, whose partials are summed again)
    "long rows": (lambda v: v.reshape(1, -1)[:, :70000], np.float32, "sum", (1,), False,
                  None),
    "long rows offset": (lambda v: v.reshape(1, -1)[:, 1:70001], np.float32, "sum", (1,),
                         False, None),
}
REDUCE_PAIRS = [("plain", name) for name in REDUCE_CALLS
                if name not in ("plain", "long rows", "long rows offset")] + [
    ("long rows", "long rows offset")]


@each_pair(REDUCE_PAIRS)
def test_reduce_plan_per_signature(be, monkeypatch, first_call, second_call):
    from haelixe.backends.wgpu import reduce as rd

    monkeypatch.setattr(rd, "_PLANS", {})
    for name in (first_call, second_call):
        view, dtype, op, axes, keepdim, out_dtype = REDUCE_CALLS[name]
        base = R.astype(dtype)
        x = view(base).astype(np.float64)
        got = be.to_numpy(rd.reduce(be, op, on_gpu(be, base, view(base)), axes, keepdim,
                                    out_dtype))
        want = getattr(np, op)(x, axis=axes, keepdims=keepdim)
        low = BF16 in (dtype, out_dtype)
        assert got.dtype == (out_dtype or dtype)
        close(got, bf16(want) if low else want, rtol=2e-2 if low else 1e-4,
              atol=1e-1 if low else 1e-3)
    # (long rows: the second pass over the partials is one more plan, the same for both)
    assert len(rd._PLANS) == (3 if first_call == "long rows" else 2)
    if first_call == "long rows":
        assert any(plan.chunked for plan in rd._PLANS.values())


# -- rotary embeddings -------------------------------------------------------------------
RX = rng.standard_normal((2, 3, S + 1, 2 * D)).astype(np.float32)
CS = rng.standard_normal((2, S + 1, D + 1)).astype(np.float32)  # cos in [0], sin in [1]

# name: (x's view of RX and its dtype, cos's and sin's views of CS, inverse[, the dtypes
# of cos and sin])
ROPE_CALLS = {
    "plain": (lambda v: v[:, :, :S, :D], np.float32, lambda c: c[0, :S, :D // 2],
              lambda c: c[1, :S, :D // 2], False),
    "x offset": (lambda v: v[:, :, 1:, :D], np.float32, lambda c: c[0, :S, :D // 2],
                 lambda c: c[1, :S, :D // 2], False),
    "x strides": (lambda v: v[:, :, :S, ::2], np.float32, lambda c: c[0, :S, :D // 2],
                  lambda c: c[1, :S, :D // 2], False),
    "x dtype": (lambda v: v[:, :, :S, :D], BF16, lambda c: c[0, :S, :D // 2],
                lambda c: c[1, :S, :D // 2], False),
    "cos offset": (lambda v: v[:, :, :S, :D], np.float32, lambda c: c[0, 1:, 1:D // 2 + 1],
                   lambda c: c[1, :S, :D // 2], False),
    "cos strides": (lambda v: v[:, :, :S, :D], np.float32, lambda c: c[0, :S, ::2][:, :D // 2],
                    lambda c: c[1, :S, :D // 2], False),
    "sin offset": (lambda v: v[:, :, :S, :D], np.float32, lambda c: c[0, :S, :D // 2],
                   lambda c: c[1, 1:, 1:D // 2 + 1], False),
    "inverse": (lambda v: v[:, :, :S, :D], np.float32, lambda c: c[0, :S, :D // 2],
                lambda c: c[1, :S, :D // 2], True),
    "x shape": (lambda v: v[:, :, :S - 1, :D], np.float32, lambda c: c[0, :S - 1, :D // 2],
                lambda c: c[1, :S - 1, :D // 2], False),
    "sin strides": (lambda v: v[:, :, :S, :D], np.float32, lambda c: c[0, :S, :D // 2],
                    lambda c: c[1, :S, ::2][:, :D // 2], False),
    "cos dtype": (lambda v: v[:, :, :S, :D], np.float32, lambda c: c[0, :S, :D // 2],
                  lambda c: c[1, :S, :D // 2], False, (BF16, np.float32)),
    "sin dtype": (lambda v: v[:, :, :S, :D], np.float32, lambda c: c[0, :S, :D // 2],
                  lambda c: c[1, :S, :D // 2], False, (np.float32, BF16)),
}
ROPE_PAIRS = [("plain", name) for name in ROPE_CALLS if name != "plain"]


@each_pair(ROPE_PAIRS)
def test_rope_plan_per_signature(be, monkeypatch, first_call, second_call):
    from haelixe.backends.wgpu import nn

    monkeypatch.setattr(nn, "_ROPE_PLANS", {})
    for name in (first_call, second_call):
        x_view, dtype, cos_view, sin_view, inverse, *tables = ROPE_CALLS[name]
        cos_base, sin_base = (CS.astype(t) for t in (tables or [(np.float32,) * 2])[0])
        base = RX.astype(dtype)
        x = x_view(base).astype(np.float64)
        cos = cos_view(cos_base).astype(np.float64)
        sin = sin_view(sin_base).astype(np.float64) * (-1 if inverse else 1)
        got = be.to_numpy(nn.rope(be, on_gpu(be, base, x_view(base)),
                                  on_gpu(be, cos_base, cos_view(cos_base)),
                                  on_gpu(be, sin_base, sin_view(sin_base)),
                                  inverse)).astype(np.float64)
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        want = np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
        low = dtype == BF16
        close(got, bf16(want) if low else want, rtol=2e-2 if low else 1e-5,
              atol=5e-2 if low else 1e-5)
    assert len(nn._ROPE_PLANS) == 2


# -- the MSE loss ------------------------------------------------------------------------
LX = rng.standard_normal((3, 200, 101)).astype(np.float32)
LY = rng.standard_normal((3, 200, 101)).astype(np.float32)

# name: (x's view of LX, y's of LY, their dtype)
MSE_CALLS = {
    "plain": (lambda v: v[:2, :50, :50], lambda v: v[:2, :50, :50], np.float32),
    "x offset": (lambda v: v[1:, :50, :50], lambda v: v[:2, :50, :50], np.float32),
    "x strides": (lambda v: v[:2, :50, :100:2], lambda v: v[:2, :50, :50], np.float32),
    "y offset": (lambda v: v[:2, :50, :50], lambda v: v[1:, :50, :50], np.float32),
    "y strides": (lambda v: v[:2, :50, :50], lambda v: v[:2, :100:2, :50], np.float32),
    "shape": (lambda v: v[:2, :50, :49], lambda v: v[:2, :50, :49], np.float32),
    "dtype": (lambda v: v[:2, :50, :50], lambda v: v[:2, :50, :50], BF16),
    # (enough elements for partial sums over slices, then their total)
    "long": (lambda v: v[:, :, :100], lambda v: v[:, :, :100], np.float32),
    "long offset": (lambda v: v[:, :, 1:], lambda v: v[:, :, :100], np.float32),
}
MSE_PAIRS = [("plain", name) for name in MSE_CALLS if name != "plain"] + [
    ("long", "long offset")]


@each_pair(MSE_PAIRS)
def test_mse_plan_per_signature(be, monkeypatch, first_call, second_call):
    from haelixe.backends.wgpu import nn

    monkeypatch.setattr(nn, "_MSE_PLANS", {})
    for name in (first_call, second_call):
        x_view, y_view, dtype = MSE_CALLS[name]
        xb, yb = LX.astype(dtype), LY.astype(dtype)
        got = be.to_numpy(nn.mse_loss(be, on_gpu(be, xb, x_view(xb)),
                                      on_gpu(be, yb, y_view(yb))))
        want = np.mean((x_view(xb).astype(np.float64) - y_view(yb).astype(np.float64)) ** 2)
        low = dtype == BF16
        close(got, bf16(want) if low else want, rtol=1e-2 if low else 1e-5)
    assert len(nn._MSE_PLANS) == 2
    if first_call == "long":
        assert all(plan[3] is not None for plan in nn._MSE_PLANS.values())


def test_mse_plan_per_features(be, monkeypatch):
    from haelixe.backends.wgpu import nn

    monkeypatch.setattr(nn, "_MSE_PLANS", {})
    x, y = on_gpu(be, LX, LX[:, :, :100]), on_gpu(be, LY, LY[:, :, :100])
    want = np.mean((LX[:, :, :100].astype(np.float64) - LY[:, :, :100]) ** 2)
    saved = be.context.features
    for features in (saved, saved - {"subgroup"}):
        monkeypatch.setattr(be.context, "features", features)
        close(be.to_numpy(nn.mse_loss(be, x, y)), want, rtol=1e-5)
    assert len(nn._MSE_PLANS) == (2 if "subgroup" in saved else 1)


# -- optimizer steps ---------------------------------------------------------------------
NP = 300
PF = rng.standard_normal(NP + 8).astype(np.float32)
GF = rng.standard_normal(NP + 8).astype(np.float32)

# name: (p's offset in PF, g's offset in GF, g's dtype, the number of elements, lr)
ADAMW_CALLS = {
    "plain": (0, 0, np.float32, NP, 1e-2),
    "p offset": (8, 0, np.float32, NP, 1e-2),
    "g offset": (0, 8, np.float32, NP, 1e-2),
    "g dtype": (0, 0, BF16, NP, 1e-2),
    "size": (0, 0, np.float32, NP - 8, 1e-2),
    # (the same layout: the plan is kept, its scalars are the call's own)
    "lr": (0, 0, np.float32, NP, 3e-1),
}
ADAMW_PAIRS = [("plain", name) for name in ADAMW_CALLS if name != "plain"]


@each_pair(ADAMW_PAIRS)
def test_optimizer_plan_per_signature(be, monkeypatch, first_call, second_call):
    from haelixe.backends.wgpu import optim

    monkeypatch.setattr(optim, "_PLANS", {})
    b1, b2, eps, wd, step = 0.9, 0.999, 1e-8, 0.1, 3
    for name in (first_call, second_call):
        p_at, g_at, g_dtype, n, lr = ADAMW_CALLS[name]
        pflat, gbase = be.from_numpy(PF), GF.astype(g_dtype)
        p = pflat.view((n,), (1,), p_at)
        g = on_gpu(be, gbase, gbase[g_at:g_at + n])
        m, v = be.full((n,), 0.5, np.float32), be.full((n,), 0.25, np.float32)
        optim.adamw_step(be, p, g, m, v, lr, b1, b2, eps, wd, step)
        pr, gr = PF[p_at:p_at + n].astype(np.float64), gbase[g_at:g_at + n].astype(np.float64)
        mr = b1 * 0.5 + (1 - b1) * gr
        vr = b2 * 0.25 + (1 - b2) * gr ** 2
        pr = pr * (1 - lr * wd) - lr / (1 - b1 ** step) * mr / (
            np.sqrt(vr / (1 - b2 ** step)) + eps)
        close(be.to_numpy(p), pr, atol=1e-5)
        close(be.to_numpy(m), mr, atol=1e-6)
    assert len(optim._PLANS) == (1 if second_call == "lr" else 2)
