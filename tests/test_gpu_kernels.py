"""Every kernel variant the GPU backend chooses by shape, layout, dtype or adapter
feature, forced one by one on small and ragged sizes and checked against numpy: matmul
tiles / loads / split-K / f16 compute, attention plans and masks, 16-bit outputs written
a word at a time, float16 and int64 storage, GradScaler's unscale kernel. Each feature
path also runs with the feature switched off (the fallback adapters without it take)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

from haelixe.backends.wgpu.geometry import swap_last2
from haelixe.ops.elementwise import ACTIVATIONS

pytestmark = pytest.mark.gpu

BF16 = ml_dtypes.bfloat16


@pytest.fixture(params=["native", "fallback"])
def f16_mode(request, be):
    """Runs a test with float16 arithmetic (where the adapter has shader-f16; the matmul
    summing two K tiles in f16) and with the f32 fallback kernels."""
    from haelixe.backends.wgpu import matmul as mm

    if request.param == "native" and not be.context.has("shader-f16"):
        pytest.skip("the adapter has no shader-f16")
    saved, flush = be.context.features, mm.F16_FLUSH_TILES
    if request.param == "fallback":
        be.context.features = saved - {"shader-f16"}
    else:
        mm.F16_FLUSH_TILES = 2
    yield request.param
    be.context.features, mm.F16_FLUSH_TILES = saved, flush


def up(be, a):
    return be.from_numpy(np.ascontiguousarray(a))


def f64(a):
    return np.asarray(a).astype(np.float64)


def rel(got, want):
    got, want = f64(got), f64(want)
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)


# -- matmul --------------------------------------------------------------------------------
def _operand(be, a, layout):
    """a (R, C) as a GPU view: 'row' contiguous, 'col' transposed storage, 'sliced' a
    strided slice (scalar loads), 'odd' an odd offset (scalar loads)."""
    if layout == "row":
        return up(be, a)
    if layout == "col":
        return swap_last2(up(be, a.T))
    if layout == "sliced":
        big = np.zeros((a.shape[0], 2 * a.shape[1]), a.dtype)
        big[:, ::2] = a
        g = up(be, big)
        return g.view(a.shape, (g.strides[0], 2), 0)
    flat = np.concatenate([np.zeros(1, a.dtype), a.reshape(-1)])
    g = up(be, flat)
    return g.view(a.shape, (a.shape[1], 1), 1)


# (tile, split-K factor, how it is built: "" as TILES has it and matmul runs it (K steps
# unrolled on GPUs, looped on software adapters, whose compiler takes seconds over each
# unrolled 128 x 256 kernel), "s2" two stages of workgroup tiles, "loop" / "unrolled" K
# steps looped over / unrolled everywhere, "checks" wgpu's runtime checks on)
MATMUL_VARIANTS = [("128x256", 1, ""), ("128x128", 1, ""), ("128x128k8", 1, ""),
                   ("128x64", 1, ""), ("64x128", 1, ""), ("64x64", 1, ""), ("64x64", 3, ""),
                   ("128x128", 2, ""), ("128x128", 1, "s2"), ("64x64", 2, "s2 unrolled"),
                   ("128x256", 1, "loop"), ("64x64", 1, "s2 loop"), ("64x128", 1, "checks"),
                   ("64x64", 1, "unrolled")]


@pytest.mark.parametrize("tile,splits,build", MATMUL_VARIANTS)
def test_matmul_every_tile_load_and_split(be, tile, splits, build):
    """Each tile, with and without split-K, one or two stages, unrolled or looped K
    steps, with and without runtime checks, over the loads each operand layout takes
    (vec4 along m/n, vec4 along k, scalar), ragged sizes, bias + GELU + pre, row sums."""
    from haelixe.backends.wgpu import matmul as mm

    rng = np.random.default_rng(len(tile) + splits)
    t = mm.TILES[tile]
    unrolled = "unrolled" in build or ("loop" not in build and not be.context.software)
    t = t._replace(stages=2 if "s2" in build else 1, unrolled=unrolled)
    variant = mm.Variant(t, splits)
    saved, mm.RUNTIME_CHECKS = mm.RUNTIME_CHECKS, "checks" in build
    try:
        # a build variant changes the K loop only: the two vec4 layouts suffice (scalar
        # loads store into the tile as the vec4 ones along m / n do)
        _check_matmul_variant(be, rng, variant, f"{tile}/{splits}/{build}",
                              MATMUL_CASES[:2] if build else MATMUL_CASES)
    finally:
        mm.RUNTIME_CHECKS = saved


# (m, k, n), A's layout, B's: every pair of the vec4 and scalar loads
MATMUL_CASES = [((70, 52, 36), "row", "col"), ((33, 40, 68), "col", "row"),
                ((20, 17, 9), "sliced", "odd"), ((64, 64, 64), "row", "row")]


def _check_matmul_variant(be, rng, variant, name, cases):
    from haelixe.backends.wgpu import matmul as mm

    for (m, k, n), la, lb in cases:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        ga, gb = _operand(be, a, la), _operand(be, b, lb)
        y, pre = mm.matmul(be, ga, gb, bias=up(be, bias), activation=ACTIVATIONS["gelu"],
                           want_pre=True, variant=variant)
        want = f64(a) @ f64(b) + bias
        gelu = 0.5 * want * (1 + np.vectorize(math.erf)(want / math.sqrt(2)))
        msg = f"{name} {m}x{k}x{n} {la} {lb}"
        assert rel(be.to_numpy(pre), want) < 1e-5, msg
        assert rel(be.to_numpy(y), gelu) < 1e-5, msg
        c, sums = mm.matmul(be, ga, gb, want_row_sums=True, variant=variant)
        assert rel(be.to_numpy(c), f64(a) @ f64(b)) < 1e-5, msg
        np.testing.assert_allclose(be.to_numpy(sums), a.sum(1), rtol=1e-4, atol=1e-4,
                                   err_msg=msg)


@pytest.mark.parametrize("lanes", [(8, 4), (4, 8), None])
def test_matmul_warp_lanes(be, lanes):
    """Warps of LX x LY register blocks (a tile's lanes; matmul.LANES by default, which
    test_matmul_every_tile_load_and_split runs) or rows compute the same products."""
    from haelixe.backends.wgpu import matmul as mm

    rng = np.random.default_rng(7)
    for tile in ("128x128", "64x64n8"):
        t = mm.TILES[tile]._replace(unrolled=not be.context.software, lanes=lanes)
        _check_matmul_variant(be, rng, mm.Variant(t), f"{tile} lanes {lanes}",
                              MATMUL_CASES[:2])


def test_matmul_activation_as_a_wgsl_expression_and_batches(be):
    from haelixe.backends.wgpu import matmul as mm

    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 1, 9, 12)).astype(np.float32)
    b = rng.standard_normal((2, 12, 8)).astype(np.float32)  # batch dims broadcast
    for variant in (None, mm.Variant(mm.TILES["64x64"], 2)):
        got = mm.matmul(be, up(be, a), up(be, b), activation="max({x}, 0.0)",
                        variant=variant)
        want = np.maximum(f64(a) @ f64(b), 0)
        assert got.shape == (3, 2, 9, 8)
        assert rel(be.to_numpy(got), want) < 1e-5


def test_matmul_choice_by_shape():
    from haelixe.backends.wgpu import matmul as mm

    assert mm.choose(4096, 4096, 4096, 1) == mm.Variant(mm.TILES["128x256"])
    assert mm.choose(1920, 2048, 512, 1) == mm.Variant(mm.TILES["128x128"])
    assert mm.choose(512, 64, 512, 128).tile == mm.TILES["128x64"]  # narrow: no overhang
    small_out = mm.choose(64, 64, 8192, 1)  # a small Linear's weight gradient
    assert small_out.splits > 1 and small_out.tile == mm.TILES["64x64"]
    assert mm.choose(8, 8, 8, 1).splits == 1  # short K: no split
    # a long K, but narrow tiles enough for a wave (attention's dq over 4096 keys)
    assert mm.choose(4096, 64, 4096, 16, "a_k4", "b_n4") == mm.Variant(mm.TILES["128x64"])
    assert mm.choose(2048, 512, 8192, 1).splits > 1  # a weight gradient still splits
    # a Transformer's over 8192 tokens: 128 x 256 tiles split into a wave of them
    assert mm.choose(512, 512, 8192, 1, "a_m4", "b_n4") == mm.Variant(mm.TILES["128x256"], 16)
    assert mm.choose(1536, 512, 8192, 1, "a_m4", "b_n4") == mm.Variant(mm.TILES["128x256"], 5)
    assert all(t.valid() for t in mm.TILES.values())
    # 16-bit operands (or float32 ones rounded as read) take half the accumulators
    assert mm.choose(8192, 1536, 512, 1) == mm.Variant(mm.TILES["128x256"])
    assert mm.choose(8192, 1536, 512, 1, sixteen_bit=True) == \
        mm.Variant(mm.TILES["128x128k8"])
    assert mm.choose(512, 64, 512, 128, sixteen_bit=True).tile == mm.TILES["128x64"]


def test_matmul_tells_the_choice_which_operands_are_16_bit(be, monkeypatch):
    from haelixe.backends.wgpu import matmul as mm

    seen = []
    real = mm.choose
    monkeypatch.setattr(mm, "choose", lambda *a: seen.append(a[-1]) or real(*a))
    x = np.ones((8, 4), np.float32)
    for a, b, rnd in [(x, x.T, mm._NO_ROUNDING), (x.astype(BF16), x.T.astype(BF16),
                                                   mm._NO_ROUNDING),
                      (x, x.T.astype(BF16), (np.dtype(BF16), None, None))]:
        mm.matmul(be, up(be, a), up(be, np.ascontiguousarray(b)),
                  out_dtype=None if rnd == mm._NO_ROUNDING else np.dtype(BF16), round_to=rnd)
    assert seen == [False, True, True]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_matmul_16bit(be, dtype, f16_mode):
    from haelixe.backends.wgpu import matmul as mm

    np_dt = np.float16 if dtype == "f16" else BF16
    rng = np.random.default_rng(4)
    for (m, k, n), variant in [((37, 24, 20), None), ((64, 40, 12), None),
                               ((16, 300, 8), mm.Variant(mm.TILES["64x64"], 2))]:
        a = rng.standard_normal((m, k)).astype(np_dt)
        b = rng.standard_normal((n, k)).astype(np_dt)
        bias = rng.standard_normal(n).astype(np_dt)
        got, sums = mm.matmul(be, up(be, a), swap_last2(up(be, b)), want_row_sums=True,
                              variant=variant)
        assert got.dtype == np_dt
        assert rel(be.to_numpy(got), f64(a) @ f64(b).T) < 4e-3
        assert rel(be.to_numpy(sums), f64(a).sum(1)) < 4e-3
        y = mm.matmul(be, up(be, a), swap_last2(up(be, b)), bias=up(be, bias),
                      activation=ACTIVATIONS["gelu_tanh"], variant=variant)
        pre = f64(a) @ f64(b).T + f64(bias)
        want = 0.5 * pre * (1 + np.tanh(0.7978845608 * (pre + 0.044715 * pre ** 3)))
        assert rel(be.to_numpy(y), want) < 4e-3


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_matmul_16bit_every_layout_and_tile(be, dtype, f16_mode):
    """16-bit operands through each load (vec4 along m/n and along k, fetched as raw words
    and widened into the tile; scalar), tile and split-K, on ragged sizes, against the
    float64 product of the same 16-bit values (the output rounded once). The extra case
    reads A contiguous along m (the others take A along k, or scalar)."""
    from haelixe.backends.wgpu import matmul as mm

    np_dt = np.float16 if dtype == "f16" else BF16
    rng = np.random.default_rng(12)
    for variant in (None, mm.Variant(mm.TILES["128x128k8"]), mm.Variant(mm.TILES["64x128"]),
                    mm.Variant(mm.TILES["64x64"], 3)):
        for (m, k, n), la, lb in MATMUL_CASES + [((36, 20, 44), "col", "row")]:
            a = rng.standard_normal((m, k)).astype(np_dt)
            b = rng.standard_normal((k, n)).astype(np_dt)
            got = mm.matmul(be, _operand(be, a, la), _operand(be, b, lb), variant=variant)
            assert got.dtype == np_dt
            assert rel(be.to_numpy(got), f64(a) @ f64(b)) < 4e-3, (variant, m, k, n, la, lb)


@pytest.mark.parametrize("out", ["f32", "bf16"])
def test_matmul_mixed_operands_and_output_dtype(be, out):
    """out_dtype: float32 products of bfloat16 operands (exact inputs, so float32
    accuracy), a float32 operand times a bfloat16 one, each layout; without out_dtype
    mixed operands are refused."""
    from haelixe.backends.wgpu import matmul as mm

    out_dt = np.float32 if out == "f32" else BF16
    tol = 1e-5 if out == "f32" else 4e-3
    rng = np.random.default_rng(13)
    for variant in (None, mm.Variant(mm.TILES["64x64"], 2)):
        for (m, k, n), la, lb in MATMUL_CASES:
            for dta, dtb in ((BF16, BF16), (np.float32, BF16), (BF16, np.float32)):
                a = rng.standard_normal((m, k)).astype(dta)
                b = rng.standard_normal((k, n)).astype(dtb)
                got = mm.matmul(be, _operand(be, a, la), _operand(be, b, lb),
                                variant=variant, out_dtype=out_dt)
                assert got.dtype == out_dt
                assert rel(be.to_numpy(got), f64(a) @ f64(b)) < tol, (m, k, n, la, lb, dta)
    with pytest.raises(TypeError, match="operands of one dtype"):
        mm.matmul(be, up(be, np.ones((2, 2), BF16)), up(be, np.ones((2, 2), np.float32)))


# -- attention ----------------------------------------------------------------------------
def attention_ref(q, k, v, causal, scale, mask=None):
    """(out, lse, p) in float64, PyTorch's semantics for masks: rows with no visible key
    give zeros."""
    q, k, v = f64(q), f64(k), f64(v)
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + f64(mask)
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None], -np.inf, s)
    m = s.max(-1, keepdims=True)
    dead = ~np.isfinite(m)
    e = np.exp(s - np.where(dead, 0, m))
    l_ = np.where(dead, 1, e.sum(-1, keepdims=True))
    p = np.where(dead, 0, e / l_)
    return p @ v, np.where(dead[..., 0], -np.inf, (m + np.log(l_))[..., 0]), p


def attention_grads_ref(q, k, v, causal, scale, gout, mask=None):
    out, _, p = attention_ref(q, k, v, causal, scale, mask)
    q, k, v, g = f64(q), f64(k), f64(v), f64(gout)
    dv = np.swapaxes(p, -1, -2) @ g
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (g * out).sum(-1, keepdims=True)) * scale
    return ds @ k, np.swapaxes(ds, -1, -2) @ q, dv


def check_attention(be, q, k, v, causal, scale, mask=None, plans=None, tol=2e-5, dt=None):
    from haelixe.backends.wgpu import attention as at

    dt = dt or np.float32
    cast = [t.astype(dt) for t in (q, k, v)]
    gmask = None if mask is None else up(be, mask)
    out, lse = at.attention(be, *(up(be, t) for t in cast), causal, scale, gmask, plans)
    want, lse_ref, _ = attention_ref(*cast, causal, scale, mask)
    np.testing.assert_allclose(f64(be.to_numpy(out)), want, atol=tol, rtol=tol)
    np.testing.assert_allclose(be.to_numpy(lse), lse_ref, atol=tol, rtol=tol)
    g = np.random.default_rng(0).standard_normal(want.shape).astype(dt)
    grads = at.attention_backward(be, *(up(be, t) for t in cast), out, lse, up(be, g),
                                  causal, scale, gmask, plans)
    for name, got, ref in zip(("dq", "dk", "dv"), grads,
                              attention_grads_ref(*cast, causal, scale, g, mask)):
        np.testing.assert_allclose(f64(be.to_numpy(got)), ref, atol=4 * tol, rtol=4 * tol,
                                   err_msg=name)


@pytest.mark.parametrize("p,bq,bk,kg,r", [(1, 16, 4, 4, 1), (2, 32, 8, 4, 1),
                                          (4, 16, 16, 8, 1), (2, 64, 16, 8, 1),
                                          (1, 32, 8, 0, 1), (2, 32, 8, 4, 2),
                                          (1, 16, 8, 4, 4), (4, 32, 4, 4, 4)])
def test_attention_every_plan(be, p, bq, bk, kg, r):
    """Invocations per row (head-dim slices summed by shuffles or through workgroup
    memory), rows per workgroup, block lengths, unrolled steps and the forward's rows per
    invocation, in all three kernels, on lengths that fit no block."""
    from haelixe.backends.wgpu.attention import Plan

    plan = Plan(p, bq, bk, kg, r)
    plans = dict.fromkeys(("attention_forward", "attention_dq", "attention_dkdv"), plan)
    rng = np.random.default_rng(p * bq + bk)
    for causal, (sq, sk) in ((False, (19, 23)), (True, (37, 30))):
        q = rng.standard_normal((2, sq, 16)).astype(np.float32)
        k = rng.standard_normal((2, sk, 16)).astype(np.float32)
        v = rng.standard_normal((2, sk, 16)).astype(np.float32)
        check_attention(be, q, k, v, causal, 0.3, plans=plans)


@pytest.mark.parametrize("p,r", [(2, 1), (4, 1), (2, 2), (4, 4)])
def test_attention_slices_summed_through_workgroup_memory_without_subgroups(be, p, r):
    """Where the adapter has subgroups, a row's slices add their partial dot products by
    subgroup shuffles; without, through workgroup memory: both give the same results."""
    from haelixe.backends.wgpu.attention import Plan

    plans = dict.fromkeys(("attention_forward", "attention_dq", "attention_dkdv"),
                          Plan(p, 16, 8, 4, r))
    rng = np.random.default_rng(p)
    q, k, v = (rng.standard_normal((2, 21, 16)).astype(np.float32) for _ in range(3))
    saved = be.context.features
    be.context.features = saved - {"subgroup"}
    try:
        check_attention(be, q, k, v, True, 0.3, plans=plans)
    finally:
        be.context.features = saved


@pytest.mark.parametrize("bq,bk,rg,kh,shared_kv,dqk,dv", [
    (16, 16, 1, 1, False, 16, 16), (32, 32, 2, 2, True, 16, 16),
    (32, 32, 2, 1, False, 64, 64), (16, 32, 2, 1, True, 128, 128),
    (32, 32, 1, 2, True, 32, 64), (16, 16, 1, 1, False, 20, 16)])
def test_attention_tiled_forward_every_plan(be, bq, bk, rg, kh, shared_kv, dqk, dv):
    """The register-tiled forward: rows and key blocks of each size, k and v in one tile
    or two, head dims 16 to 128 (q/k and v apart, one not a multiple of 4: scalar row
    loads), lengths that fit no block, causal with more queries than keys and the other
    way round, a user mask with a row that sees no key, k broadcast over a batch dim;
    with more rows than invocations (the probability pass loops)."""
    from haelixe.backends.wgpu.attention import TiledPlan

    plans = {"attention_forward": TiledPlan(bq, bk, rg, kh, shared_kv)}
    rng = np.random.default_rng(bq + bk + dqk)
    for causal, (sq, sk) in ((False, (19, 45)), (True, (37, 30)), (True, (9, 41))):
        q = rng.standard_normal((2, sq, dqk)).astype(np.float32)
        k = rng.standard_normal((1, sk, dqk)).astype(np.float32)
        v = rng.standard_normal((2, sk, dv)).astype(np.float32)
        check_attention(be, q, k, v, causal, 0.3, plans=plans)
    keep = rng.random((19, 45)) > 0.5
    keep[3] = False
    q = rng.standard_normal((2, 19, dqk)).astype(np.float32)
    k = rng.standard_normal((2, 45, dqk)).astype(np.float32)
    v = rng.standard_normal((2, 45, dv)).astype(np.float32)
    check_attention(be, q, k, v, False, 0.3, mask=keep, plans=plans)


def test_attention_tiled_forward_unrolled_as_on_gpus(be, monkeypatch):
    """The phases unrolled whole (every tile index a constant), as a hardware adapter
    compiles them, on a small head dim and block (lavapipe compiles it in seconds)."""
    from haelixe.backends.wgpu.attention import TiledPlan

    monkeypatch.setitem(be.context.info, "software", False)
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 21, 16)).astype(np.float32)
    k, v = (rng.standard_normal((2, 18, 16)).astype(np.float32) for _ in range(2))
    for causal in (False, True):
        check_attention(be, q, k, v, causal, 0.3,
                        plans={"attention_forward": TiledPlan(16, 16, 1, 1)})


def test_attention_tiled_forward_is_chosen_where_it_fits(be, monkeypatch):
    """Switched on, the forward takes the tiled kernel for the head dims models use, the
    one-row kernel where v's columns do not spread over a row's invocations; off (the
    default), the one-row kernel; a plan that does not fit the adapter's workgroup
    memory is refused."""
    from haelixe.backends.wgpu import attention as at

    assert at.tiled_plan(64, 64, 49152) is None
    monkeypatch.setattr(at, "TILED_FORWARD", True)
    for d in (32, 64, 128):
        assert at.tiled_plan(d, d, 49152) is not None
    assert at.tiled_plan(64, 64, 49152) == at.TILED_PLANS[0]
    assert at.tiled_plan(8, 8, 49152) is None
    q = up(be, np.zeros((1, 8, 64), np.float32))
    with pytest.raises(ValueError, match="does not fit"):
        at.attention(be, q, q, q, False, 1.0,
                     plans={"attention_forward": at.TiledPlan(128, 64, 2, 2)})


def test_attention_by_matmuls_in_chunks(be, monkeypatch):
    """Scores over the size limit go through in chunks along the first batch dim (k and
    v broadcast over it, or with fewer batch dims), forward and backward, the same as
    all at once; where one batch index is over the limit there is no chunk length (the
    flash way)."""
    from haelixe.backends.wgpu import attention as at

    rng = np.random.default_rng(9)
    monkeypatch.setattr(at, "MATMUL_PATH", True)
    monkeypatch.setattr(at, "MATMUL_FORWARD", True)
    for q_shape, kv_shape, causal in (((5, 2, 13, 8), (5, 2, 11, 8), False),
                                      ((5, 2, 13, 8), (1, 2, 11, 8), True),
                                      ((5, 2, 13, 8), (2, 11, 8), True)):
        q = rng.standard_normal(q_shape).astype(np.float32)
        k, v = (rng.standard_normal(kv_shape).astype(np.float32) for _ in range(2))
        lead = q_shape[:-2]
        monkeypatch.setattr(at, "MATMUL_MAX_SCORE_BYTES", 2 * 4 * 2 * 13 * 11)
        assert at._chunk_length(lead, 13, 11) == 2
        check_attention(be, q, k, v, causal, 0.3)
        # a mask per batch index (sliced with the chunks) and one for every batch index
        check_attention(be, q, k, v, causal, 0.3, mask=rng.random((5, 1, 13, 11)) > 0.3)
        check_attention(be, q, k, v, causal, 0.3, mask=rng.random((13, 11)) > 0.3)
    monkeypatch.setattr(at, "MATMUL_MAX_SCORE_BYTES", 4 * 13 * 11)
    assert at._chunk_length((5, 2), 13, 11) == 0


@pytest.fixture(params=["flash", "matmuls"])
def attention_way(request, monkeypatch):
    """Runs a test with the flash forward and backward and with both through matmuls
    (scores materialised), whatever way the shapes would take."""
    from haelixe.backends.wgpu import attention as at

    monkeypatch.setattr(at, "MATMUL_PATH", request.param == "matmuls")
    monkeypatch.setattr(at, "MATMUL_FORWARD", request.param == "matmuls")
    return request.param


def test_attention_masks_bool_and_float_broadcast(be, attention_way):
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    k = rng.standard_normal((2, 3, 11, 8)).astype(np.float32)
    v = rng.standard_normal((2, 3, 11, 8)).astype(np.float32)
    keep = rng.random((9, 11)) > 0.4
    keep[4] = False  # a row with no visible key: zeros, zero gradients
    check_attention(be, q, k, v, False, 0.35, mask=keep)
    check_attention(be, q, k, v, True, 0.35, mask=keep[None, None])  # with causal
    per_batch = rng.standard_normal((2, 1, 1, 11)).astype(np.float32)  # padding-style
    per_batch[1, 0, 0, 7:] = -np.inf
    check_attention(be, q, k, v, False, 0.35, mask=per_batch)
    check_attention(be, q, k, v, False, 0.35, mask=rng.standard_normal((3, 9, 1))
                    .astype(np.float32))


def test_attention_by_matmuls_layouts_and_broadcasts(be, attention_way):
    """Strided q, k, v (views of one qkv tensor, as multi-head attention makes them),
    ragged lengths, causal with more keys than queries, k and v broadcast over a batch
    dim, long rows, and v broadcast further than q and k (the matmul way then takes
    flash's)."""
    rng = np.random.default_rng(8)
    qkv = rng.standard_normal((2, 21, 3, 2, 12)).astype(np.float32)  # (b, t, 3, h, d)
    gqkv = up(be, qkv)
    views = [gqkv.view((2, 2, 21, 12), (gqkv.strides[0], gqkv.strides[3], gqkv.strides[1],
                                         1), i * gqkv.strides[2]) for i in range(3)]
    q, k, v = (np.ascontiguousarray(qkv[:, :, i].transpose(0, 2, 1, 3)) for i in range(3))
    from haelixe.backends.wgpu import attention as at

    out, lse = at.attention(be, *views, False, 0.3)
    want, lse_ref, _ = attention_ref(q, k, v, False, 0.3)
    np.testing.assert_allclose(f64(be.to_numpy(out)), want, atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(be.to_numpy(lse), lse_ref, atol=2e-5, rtol=2e-5)
    g = rng.standard_normal(want.shape).astype(np.float32)
    for got, ref in zip(at.attention_backward(be, *views, out, lse, up(be, g), False, 0.3),
                        attention_grads_ref(q, k, v, False, 0.3, g)):
        np.testing.assert_allclose(f64(be.to_numpy(got)), ref, atol=8e-5, rtol=8e-5)
    q = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    k = rng.standard_normal((1, 3, 13, 8)).astype(np.float32)
    v = rng.standard_normal((1, 3, 13, 4)).astype(np.float32)
    check_attention(be, q, k, v, True, 0.5)
    # long rows: several subgroups a row and up to 8 scores an invocation, with and
    # without subgroup reductions
    long_rows = [rng.standard_normal((1, 2, n, 8)).astype(np.float32) for n in (40, 300, 300)]
    saved = be.context.features
    try:
        for features in (saved, saved - {"subgroup"}):
            be.context.features = features
            check_attention(be, *long_rows, True, 0.4, tol=4e-5)
    finally:
        be.context.features = saved
    v2 = rng.standard_normal((2, 3, 13, 4)).astype(np.float32)
    out, lse = at.attention(be, up(be, q[:1]), up(be, k), up(be, v2), False, 0.5)
    want, lse_ref, _ = attention_ref(q[:1], k, v2, False, 0.5)
    np.testing.assert_allclose(f64(be.to_numpy(out)), want, atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(be.to_numpy(lse), np.broadcast_to(lse_ref, (2, 3, 7)),
                               atol=2e-5, rtol=2e-5)


def test_attention_mask_errors(be):
    q = up(be, np.zeros((2, 5, 4), np.float32))
    with pytest.raises(ValueError, match=r"mask of shape \(4, 5\) does not broadcast"):
        be.attention(q, q, q, False, 1.0, up(be, np.ones((4, 5), bool)))
    with pytest.raises(TypeError, match="mask must be bool"):
        be.attention(q, q, q, False, 1.0, up(be, np.ones((5, 5), np.int32)))


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_attention_16bit_inputs(be, dtype, f16_mode, attention_way):
    """16-bit q, k, v both ways of the backward (through matmuls: float32 scores of the
    16-bit operands), ragged lengths, a mask, k and v broadcast over a batch dim."""
    rng = np.random.default_rng(6)
    dt = np.float16 if dtype == "f16" else BF16
    q, k, v = (rng.standard_normal((2, 13, 16)).astype(np.float32) for _ in range(3))
    check_attention(be, q, k, v, True, 0.25, tol=2e-2, dt=dt)
    q = rng.standard_normal((2, 3, 9, 12)).astype(np.float32)
    k = rng.standard_normal((1, 3, 11, 12)).astype(np.float32)
    v = rng.standard_normal((1, 3, 11, 8)).astype(np.float32)
    check_attention(be, q, k, v, False, 0.3, mask=rng.random((9, 11)) > 0.3, tol=2e-2,
                    dt=dt)


# -- 16-bit outputs a word at a time ---------------------------------------------------------
@pytest.mark.parametrize("np_dt", [BF16, np.float16], ids=["bf16", "f16"])
def test_pairs_elementwise_exact(be, np_dt):
    """Outputs written as words: odd lengths (the last element alone), views starting at
    an odd element (the element path), strided, broadcast and scalar inputs."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal(21).astype(np.float32)
    b = rng.standard_normal(21).astype(np.float32)
    ga, gb = up(be, a.astype(np_dt)), up(be, b.astype(np_dt))
    want = (a.astype(np_dt).astype(np.float32) * b.astype(np_dt).astype(np.float32))
    np.testing.assert_array_equal(be.to_numpy(be.mul(ga, gb)), want.astype(np_dt))
    half = ga.view((10,), (2,), 1)  # odd start, stride 2
    np.testing.assert_array_equal(be.to_numpy(be.exp(half)),
                                  np.exp(a.astype(np_dt)[1::2].astype(np.float32))
                                  .astype(np_dt))
    row = up(be, a[:7].astype(np_dt))
    grid = be.add(up(be, np.zeros((3, 7), np_dt)), row)  # broadcast input
    np.testing.assert_array_equal(be.to_numpy(grid), np.tile(a[:7].astype(np_dt), (3, 1)))
    dst = up(be, np.zeros(9, np_dt))
    inner = dst.view((7,), (1,), 1)  # odd offset into a word
    be.copy_into(inner, up(be, a[:7]))
    np.testing.assert_array_equal(be.to_numpy(dst)[1:8], a[:7].astype(np_dt))
    assert be.to_numpy(dst)[0] == 0 and be.to_numpy(dst)[8] == 0
    x = be.mul(ga, np.dtype(np_dt).type(3.0))  # scalar operand
    np.testing.assert_array_equal(be.to_numpy(x),
                                  (a.astype(np_dt).astype(np.float32) * 3).astype(np_dt))


def test_f16_storage_and_casts_are_bit_exact(be):
    specials = np.array([0.0, -0.0, 1e-8, 3e-8, 6e-8, 1e-7, 2.98e-8, 6.1e-5, 6.09e-5,
                         65504, 65519, 65520, 1e6, -1e6, np.inf, -np.inf, np.nan, 1 / 3,
                         1 + 2 ** -11, 1 + 3 * 2 ** -11], np.float32)
    x = np.concatenate([specials, np.random.default_rng(8).standard_normal(301)
                        .astype(np.float32) * 300])
    with np.errstate(over="ignore"):  # numpy's cast overflows to inf, as the kernel
        want = x.astype(np.float16)
    got = be.to_numpy(be.cast(up(be, x), np.float16))
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    back = be.to_numpy(be.cast(up(be, want), np.float32))
    np.testing.assert_array_equal(back, want.astype(np.float32))
    np.testing.assert_array_equal(be.to_numpy(be.full((5,), 1.5, np.float16)),
                                  np.full(5, 1.5, np.float16))


def test_norms_in_units_of_two_and_one(be):
    """Even rows walk pairs (words of a 16-bit dtype), odd rows and strided outputs single
    elements; both against numpy."""
    rng = np.random.default_rng(9)
    for d in (10, 7):
        x = rng.standard_normal((5, d)).astype(np.float32)
        w = rng.standard_normal(d).astype(np.float32)
        for np_dt, tol in ((np.float32, 1e-5), (BF16, 2e-2), (np.float16, 3e-3)):
            xx, ww = x.astype(np_dt), w.astype(np_dt)
            y, _ = be.rmsnorm(up(be, xx), up(be, ww), 1e-6)
            want = f64(xx) / np.sqrt((f64(xx) ** 2).mean(1, keepdims=True) + 1e-6) * f64(ww)
            np.testing.assert_allclose(f64(be.to_numpy(y)), want, rtol=tol, atol=tol)
            y, _, _ = be.layernorm(up(be, xx), up(be, ww), up(be, ww), 1e-5)
            xc = f64(xx) - f64(xx).mean(1, keepdims=True)
            want = xc / np.sqrt((xc ** 2).mean(1, keepdims=True) + 1e-5) * f64(ww) + f64(ww)
            np.testing.assert_allclose(f64(be.to_numpy(y)), want, rtol=tol, atol=tol)


def test_rope_pairs_and_single_elements(be):
    rng = np.random.default_rng(10)
    for d in (8, 6):  # pairs when D % 4 == 0
        x = rng.standard_normal((2, 5, d)).astype(np.float32)
        ang = rng.standard_normal((5, d // 2))
        cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
        h = d // 2
        want = np.concatenate([x[..., :h] * cos - x[..., h:] * sin,
                               x[..., h:] * cos + x[..., :h] * sin], -1)
        for np_dt, tol in ((np.float32, 1e-6), (BF16, 2e-2)):
            got = be.rope(up(be, x.astype(np_dt)), up(be, cos), up(be, sin))
            np.testing.assert_allclose(f64(be.to_numpy(got)), want, rtol=tol, atol=tol)
            # the same x from an odd element (pairs computed, read one element at a time)
            wide = np.zeros((2, 5, d + 1), np_dt)
            wide[..., 1:] = x.astype(np_dt)
            base = up(be, wide)
            odd = base.view((2, 5, d), base.strides, 1)
            np.testing.assert_array_equal(
                be.to_numpy(be.rope(odd, up(be, cos), up(be, sin))), be.to_numpy(got))


def _run_without_shader_int64(code: str) -> None:
    """Run ``code`` in a fresh interpreter whose GPU lacks shader-int64; it prints ok."""
    env = dict(os.environ, HAELIXE_GPU_DISABLE="shader-int64")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    if "GpuUnavailableError" in res.stderr:
        pytest.skip("no wgpu adapter")
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-2000:]


# -- int64 -------------------------------------------------------------------------------------
def test_int64_stays_int64(be):
    import haelixe as hx

    big = np.array([3, -2, 5_000_000_000, -7, 0], np.int64)
    if not be.context.int64_native:
        pytest.skip("the adapter stores int64 as int32 (tested in a subprocess below)")
    g = up(be, big)
    assert g.dtype == np.int64
    np.testing.assert_array_equal(be.to_numpy(g), big)
    np.testing.assert_array_equal(be.to_numpy(be.sum(g, (0,))), big.sum())
    np.testing.assert_array_equal(be.to_numpy(be.max(g, (0,))), big.max())
    np.testing.assert_array_equal(be.to_numpy(be.full((3,), -5_000_000_000, np.int64)),
                                  np.full(3, -5_000_000_000))
    np.testing.assert_array_equal(be.to_numpy(be.cast(g, np.float32)),
                                  big.astype(np.float32))
    t = hx.tensor(big, device="gpu")
    assert t.dtype is hx.int64
    for got, want in (((t + t), big + big), ((t * 3), big * 3), ((t > 1), big > 1),
                      ((t // 2), big // 2), ((t % 3), big % 3), ((t ** 2), big ** 2),
                      (t.abs(), np.abs(big)), (hx.maximum(t, t * 0), np.maximum(big, 0))):
        np.testing.assert_array_equal(got.to("cpu").numpy(), want)
    back = (t - 1).to("cpu")
    assert back.dtype is hx.int64 and back.numpy().tolist() == (big - 1).tolist()
    am = hx.tensor([[1.0, 5.0, 2.0]], device="gpu").argmax(1)
    assert am.dtype is hx.int64 and am.to("cpu").numpy().tolist() == [1]
    x = hx.arange(6, dtype=hx.float32, device="gpu")
    idx = hx.tensor([4, 0], device="gpu")
    assert x[idx].to("cpu").numpy().tolist() == [4.0, 0.0]


def test_int64_without_shader_int64_is_narrowed_but_reported():
    """Without the feature int64 lives in int32 words: the dtype stays int64 both ways,
    values past int32 are refused with an OverflowError."""
    code = textwrap.dedent("""
        import numpy as np
        from haelixe.backends.wgpu.backend import get_backend
        be = get_backend()
        assert not be.context.int64_native
        g = be.from_numpy(np.array([3, -2, 2**31 - 1], np.int64))
        assert g.dtype == np.int64
        back = be.to_numpy(be.add(g, be.from_numpy(np.array([1, 1, 0], np.int64))))
        assert back.dtype == np.int64 and back.tolist() == [4, -1, 2**31 - 1], back
        assert be.argmax(be.from_numpy(np.ones((2, 3), np.float32)), 1).dtype == np.int64
        try:
            be.from_numpy(np.array([2**31], np.int64))
        except OverflowError as err:
            assert "shader-int64" in str(err)
        else:
            raise AssertionError("no OverflowError")
        print("ok")
    """)
    _run_without_shader_int64(code)


def test_index_checks_read_int64_back_right_without_shader_int64():
    """Without the feature the index checks of gather and cross_entropy read int64 words
    back from the GPU: computed, offset and strided indices give their true values, so a
    good index passes and a bad one is named."""
    code = textwrap.dedent("""
        import numpy as np
        import haelixe as hx
        from haelixe.errors import OpIndexError
        from haelixe.nn import functional as F
        from haelixe.backends.wgpu.backend import get_backend
        assert not get_backend().context.int64_native
        rng = np.random.default_rng(3)
        raw = rng.integers(0, 11, 13)
        raw[[2, 7]] = -100
        t = hx.tensor(raw, device="gpu")
        safe = hx.where(t == -100, 0, t)  # computed by a kernel, never uploaded
        want = np.where(raw == -100, 0, raw)
        for got, ref in ((safe, want), (safe[1:], want[1:]), (safe[3::2], want[3::2]),
                         (safe.reshape(1, 13).T[5:, 0], want[5:])):
            assert got.dtype is hx.int64 and got.cpu().tolist() == ref.tolist(), got
        logits = rng.standard_normal((13, 11)).astype(np.float32)
        x = hx.tensor(logits, device="gpu")
        picked = x.gather(1, safe[:, None]).cpu().numpy()[:, 0]
        np.testing.assert_array_equal(picked, logits[np.arange(13), want])
        loss = F.cross_entropy(x, t).item()
        ref = F.cross_entropy(hx.tensor(logits), hx.tensor(raw)).item()
        assert abs(loss - ref) < 1e-5, (loss, ref)
        try:
            x.gather(1, (safe + 11)[:, None])
        except OpIndexError as err:
            assert f"index {int(want[0]) + 11} is out of bounds" in str(err), err
        else:
            raise AssertionError("no OpIndexError")
        print("ok")
    """)
    _run_without_shader_int64(code)


# -- GradScaler's kernel ---------------------------------------------------------------------
def test_unscale_and_check_kernel(be):
    g = up(be, np.array([2.0, -4.0, 6.0], np.float32))
    flag = up(be, np.zeros((), np.float32))
    assert be.unscale_and_check(g, 0.5, flag)
    np.testing.assert_array_equal(be.to_numpy(g), [1.0, -2.0, 3.0])
    assert be.to_numpy(flag) == 0.0
    for bad in (np.inf, -np.inf, np.nan):
        g = up(be, np.array([1.0, bad, 3.0], np.float32))
        assert be.unscale_and_check(g, 0.5, flag) and be.to_numpy(flag) == 1.0
        flag = up(be, np.zeros((), np.float32))
    assert not be.unscale_and_check(up(be, np.ones(2, BF16)), 0.5, flag)  # composed path


# -- row reductions: subgroups and the workgroup-memory tree ---------------------------------
@pytest.mark.parametrize("subgroups", [True, False], ids=["subgroup", "tree"])
def test_row_reductions_with_and_without_subgroups(be, subgroups):
    if subgroups and not be.context.has("subgroup"):
        pytest.skip("the adapter has no subgroups")
    saved = be.context.features
    if not subgroups:
        be.context.features = saved - {"subgroup"}
    try:
        rng = np.random.default_rng(11)
        for n in (5, 40, 300, 700):  # 32, 64 and 256 invocations a row
            x = rng.standard_normal((3, n)).astype(np.float32)
            x[2, n // 2] = np.nan  # NaN wins the max
            got = be.to_numpy(be.softmax(up(be, x), 1))
            e = np.exp(x[:2] - x[:2].max(1, keepdims=True))
            np.testing.assert_allclose(got[:2], e / e.sum(1, keepdims=True), atol=1e-6)
            assert np.isnan(got[2]).all()
            y, _ = be.rmsnorm(up(be, x[:2]), None, 1e-6)
            want = f64(x[:2]) / np.sqrt((f64(x[:2]) ** 2).mean(1, keepdims=True) + 1e-6)
            np.testing.assert_allclose(be.to_numpy(y), want, atol=1e-5)
            mse = be.to_numpy(be.mse_loss(up(be, x[:2]), up(be, x[:2] * 0.5)))
            np.testing.assert_allclose(mse, ((f64(x[:2]) * 0.5) ** 2).mean(), rtol=1e-5)
        # large enough for partial sums over workgroups (and ragged, strided, bf16)
        big = rng.standard_normal((97, 2 * 613)).astype(np.float32)
        gx = up(be, big)
        gx = gx.view((97, 613), (gx.strides[0], 2), 1)
        gy = up(be, big[:, ::2] * 0.25)
        want = ((f64(big[:, 1::2]) - f64(big[:, ::2]) * 0.25) ** 2).mean()
        np.testing.assert_allclose(be.to_numpy(be.mse_loss(gx, gy)), want, rtol=1e-5)
        xb, yb = big[:, :900].astype(BF16), big[:, 300:1200].astype(BF16)
        np.testing.assert_allclose(f64(be.to_numpy(be.mse_loss(up(be, xb), up(be, yb)))),
                                   ((f64(xb) - f64(yb)) ** 2).mean(), rtol=1e-2)
    finally:
        be.context.features = saved


def test_16bit_whole_word_outputs_store_without_atomics(be):
    """A bf16 tensor updated in place a word per invocation (pairs: from an even element)
    binds plain words: no atomics in its shader; from an odd element, an element per
    invocation, it keeps them (two invocations share a word). Both give the CPU's values."""
    import haelixe as hx
    from haelixe.backends.wgpu import elementwise as ew

    rng = np.random.default_rng(21)
    a = rng.standard_normal(10).astype(np.float32)
    for view, words in ((slice(0, 9), True), (slice(1, 10), False)):
        base = hx.from_numpy(a).to("gpu").bfloat16()
        ew._SPECS.clear()
        base[view].mul_(2.0)
        (spec,) = ew._SPECS.values()
        want = hx.from_numpy(a).bfloat16()
        want[view].mul_(2.0)
        np.testing.assert_array_equal(base.cpu().float().numpy(), want.float().numpy())
        source = spec.source()
        assert ("out_buf: array<atomic<u32>>" in source) is not words, spec.entry
        assert spec.bindings[0].access == ("rw_words" if words else "rw")


def test_reduce_into_16bit_output_rounds_once(be):
    """A float32 sum stored straight into bfloat16 (a norm's 16-bit weight gradient):
    rounded once from the float32 total, for long (a workgroup per output) and short (an
    invocation per output) reductions, odd output counts included."""
    from haelixe.backends.wgpu import reduce as rd

    rng = np.random.default_rng(22)
    for rows, cols in ((300, 7), (5, 9), (64, 1)):
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        got = rd.reduce(be, "sum", up(be, x), (0,), False, out_dtype=BF16)
        assert got.dtype == BF16
        f32 = be.to_numpy(rd.reduce(be, "sum", up(be, x), (0,), False))
        np.testing.assert_array_equal(be.to_numpy(got), f32.astype(BF16))


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_matmul_round_to_equals_casting_first(be, dtype, f16_mode):
    """round_to: a float32 A or B rounded to 16 bits as it is read, or a float32 C rounded
    as it is written, equal bit for bit the product of operands cast first (C: the
    16-bit product widened), through each tile, load and split-K with its reduce. (With
    f16 arithmetic switched on, two f16 operands multiply in f16 while a rounded float32
    one multiplies in f32: there the two agree to f16's precision.)"""
    from haelixe.backends.wgpu import matmul as mm

    np_dt = np.float16 if dtype == "f16" else BF16
    rng = np.random.default_rng(23)
    f16_arithmetic = dtype == "f16" and f16_mode == "native"

    def same(x, y):
        if f16_arithmetic:
            assert rel(be.to_numpy(x), be.to_numpy(y).astype(np.float64)) < 4e-3
        else:
            np.testing.assert_array_equal(be.to_numpy(x), be.to_numpy(y))

    for variant in (None, mm.Variant(mm.TILES["64x64"], 3), mm.Variant(mm.TILES["128x128k8"])):
        for (m, k, n), la, lb in MATMUL_CASES:
            f32 = rng.standard_normal((m, k)).astype(np.float32)
            low = rng.standard_normal((k, n)).astype(np_dt)
            # A float32, read rounded
            same(mm.matmul(be, _operand(be, f32, la), _operand(be, low, lb), variant=variant,
                           out_dtype=np_dt, round_to=(np_dt, None, None)),
                 mm.matmul(be, _operand(be, f32.astype(np_dt), la), _operand(be, low, lb),
                           variant=variant))
            # B float32, read rounded (low^T @ f32^T)
            same(mm.matmul(be, _operand(be, low.T.copy(), la), _operand(be, f32.T.copy(), lb),
                           variant=variant, out_dtype=np_dt, round_to=(None, np_dt, None)),
                 mm.matmul(be, _operand(be, low.T.copy(), la),
                           _operand(be, f32.T.astype(np_dt), lb), variant=variant))
            # C float32, written rounded
            a16 = _operand(be, f32.astype(np_dt), la)
            got = mm.matmul(be, a16, _operand(be, low, lb), variant=variant,
                            out_dtype=np.float32, round_to=(None, None, np_dt))
            assert got.dtype == np.float32
            want = mm.matmul(be, a16, _operand(be, low, lb), variant=variant)
            np.testing.assert_array_equal(be.to_numpy(got),
                                          be.to_numpy(want).astype(np.float32))
