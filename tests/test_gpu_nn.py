"""GPU backend vs numpy: softmax, indexing, fused linear / norms / RoPE, flash attention
(forward and backward) and optimizer steps, on contiguous and strided inputs."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from haelixe.ops.elementwise import ACTIVATIONS

pytestmark = pytest.mark.gpu
BF16 = np.dtype(ml_dtypes.bfloat16)


def close(got, want, rtol=1e-4, atol=1e-5, msg=""):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=atol, err_msg=msg)


def up(be, a):
    return be.from_numpy(np.ascontiguousarray(a))


def T(be, a):
    """A GPU view of ``a`` whose last two dims are transposed in memory (the data is
    uploaded as the swapped array, then viewed back)."""
    from haelixe.backends.wgpu.geometry import swap_last2

    return swap_last2(up(be, np.swapaxes(a, -1, -2)))


def flipped(be, a):
    """A GPU view of ``a`` with a negative stride on its first dim."""
    g = up(be, a[::-1])
    return g.view(g.shape, (-g.strides[0],) + g.strides[1:], g.offset + (a.shape[0] - 1)
                  * g.strides[0])


# -- softmax -----------------------------------------------------------------------------
def softmax_ref(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_softmax_and_log_softmax(be, axis):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 5, 130)) * 4).astype(np.float32)
    for name, g in (("contiguous", up(be, x)), ("flipped", flipped(be, x)),
                    ("transposed", T(be, x))):
        close(be.to_numpy(be.softmax(g, axis)), softmax_ref(x.astype(float), axis),
              msg=name)
        close(be.to_numpy(be.log_softmax(g, axis)),
              np.log(softmax_ref(x.astype(float), axis)), msg=name)


def test_softmax_masked_rows(be):
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, 5.0]], np.float32)
    close(be.to_numpy(be.softmax(up(be, x), 1)), softmax_ref(x.astype(float), 1))


# -- indexing ----------------------------------------------------------------------------
def test_gather_and_scatter_add(be):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    for axis in (0, 1, 2):
        shape = list(x.shape)
        shape[axis] = 3
        idx = rng.integers(0, x.shape[axis], shape).astype(np.int32)
        for g in (up(be, x), flipped(be, x)):
            got = be.to_numpy(be.gather(g, axis, up(be, idx)))
            np.testing.assert_array_equal(got, np.take_along_axis(x, idx, axis))
        src = rng.standard_normal(shape).astype(np.float32)
        want = np.zeros_like(x)
        key = list(np.indices(idx.shape, sparse=True))
        key[axis] = idx
        np.add.at(want, tuple(key), src)
        close(be.to_numpy(be.scatter_add(x.shape, axis, up(be, idx), up(be, src))), want)


TAKE_KEYS = [
    lambda r: (np.array([0, 2, 2, -1]),),
    lambda r: (slice(None), np.array([[1], [3]]), np.array([0, 5, -1])),
    lambda r: (np.array([1, 2]), slice(1, 4), np.array([0, 3])),
    lambda r: (Ellipsis, np.array([1, 1, 0])),
    lambda r: (None, 1, slice(None, None, -2)),
    lambda r: (np.array([0, 1]), None, slice(2, 4), 3),
    lambda r: (r.random((4, 5)) > 0.5,),
    lambda r: (slice(1, 3), Ellipsis),
]


@pytest.mark.parametrize("make_key", TAKE_KEYS)
def test_take_and_index_add_follow_numpy(be, make_key):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    key = make_key(rng)
    gkey = tuple(up(be, k.astype(np.int32)) if isinstance(k, np.ndarray) and k.dtype != bool
                 else up(be, k) if isinstance(k, np.ndarray) else k for k in key)
    want = x[key]
    got = be.to_numpy(be.take(up(be, x), gkey))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    vals = rng.standard_normal(want.shape).astype(np.float32)
    acc = np.zeros_like(x)
    np.add.at(acc, key, vals)
    close(be.to_numpy(be.index_add(x.shape, gkey, up(be, vals))), acc)


def test_embedding_lookup_and_backward_with_repeats(be):
    rng = np.random.default_rng(3)
    table = rng.standard_normal((10, 8)).astype(np.float32)
    tokens = rng.integers(0, 10, (3, 7))  # int64 host indices: narrowed where used
    got = be.to_numpy(be.take(up(be, table), (tokens,)))
    np.testing.assert_array_equal(got, table[tokens])
    grad = rng.standard_normal((3, 7, 8)).astype(np.float32)
    want = np.zeros_like(table)
    np.add.at(want, tokens, grad)
    close(be.to_numpy(be.index_add(table.shape, (tokens,), up(be, grad))), want)


@pytest.mark.parametrize("rows_kernel", [True, False], ids=["rows", "atomics"])
def test_index_add_of_rows_sums_in_the_cpus_order(be, monkeypatch, rows_kernel):
    """An embedding's gradient: repeated rows add up in the positions' order, as on the
    CPU, so the sums are the CPU's bit for bit (scatter_add's atomics, kept for tables
    too large to scan, add in an order the GPU picks)."""
    from haelixe.backends.cpu import CPUBackend
    from haelixe.backends.wgpu import indexing as ix

    if not rows_kernel:
        monkeypatch.setattr(ix, "ROWS_MAX_WORK", 0)
    rng = np.random.default_rng(5)
    idx = rng.integers(-9, 9, (5, 6))  # int64, negative and repeated
    vals = (rng.standard_normal((4, 6, 3, 2)) * 10 ** rng.uniform(-3, 3, (4, 6, 3, 2)))
    vals = vals.astype(np.float32)
    g_idx = up(be, idx)
    g_idx = g_idx.view((4, 6), g_idx.strides, g_idx.offset + 6)  # rows 1.. (an offset)
    g_vals = up(be, vals)
    g_vals = g_vals.view((4, 6, 2, 3), (36, 6, 1, 2), 0)  # a transposed view
    want = CPUBackend().index_add((9, 2, 3), (idx[1:],), vals.transpose(0, 1, 3, 2))
    got = be.to_numpy(be.index_add((9, 2, 3), (g_idx,), g_vals))
    if rows_kernel:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)
    bf16 = be.index_add((9, 2, 3), (idx[1:],), be.cast(g_vals, ml_dtypes.bfloat16))
    np.testing.assert_allclose(be.to_numpy(bf16).astype(np.float32), want, rtol=2e-2,
                               atol=0.5)
    ints = np.arange(4 * 6 * 6, dtype=np.int32).reshape(4, 6, 2, 3)  # (atomics: exact)
    want_ints = np.zeros((9, 2, 3), np.int32)
    np.add.at(want_ints, idx[1:], ints)
    np.testing.assert_array_equal(
        be.to_numpy(be.index_add((9, 2, 3), (idx[1:],), up(be, ints))), want_ints)


# -- fused linear ------------------------------------------------------------------------
def gelu_ref(x, approx):
    if approx == "gelu_tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


@pytest.mark.parametrize("activation", [None, "gelu", "gelu_tanh"])
def test_linear_forward_backward(be, activation):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 9, 13)).astype(np.float32)
    w = rng.standard_normal((11, 13)).astype(np.float32)
    b = rng.standard_normal(11).astype(np.float32)
    pre = x.astype(float) @ w.T.astype(float) + b
    y_ref = pre if activation is None else gelu_ref(pre, activation)
    # x flipped along the batch dim, w stored transposed: read through strides
    act = None if activation is None else ACTIVATIONS[activation]
    y, p = be.linear(flipped(be, x), T(be, w), up(be, b), act)
    close(be.to_numpy(y), y_ref)
    assert (p is None) == (activation is None)
    gy = rng.standard_normal(y_ref.shape).astype(np.float32)
    gpre = gy.astype(float)
    if activation is not None:
        eps = 1e-6
        gpre = gpre * (gelu_ref(pre + eps, activation) - gelu_ref(pre - eps, activation)) / (
            2 * eps)
    dx, dw, db = be.linear_backward(up(be, x), up(be, w), p, up(be, gy), act, True)
    close(be.to_numpy(dx), gpre @ w, atol=1e-4)
    close(be.to_numpy(dw), gpre.reshape(-1, 11).T @ x.reshape(-1, 13), atol=1e-4)
    close(be.to_numpy(db), gpre.reshape(-1, 11).sum(0), atol=1e-4)
    _, _, none = be.linear_backward(up(be, x), up(be, w), p, up(be, gy), act, False)
    assert none is None


# -- norms -------------------------------------------------------------------------------
@pytest.mark.parametrize("with_weight", [True, False])
def test_rmsnorm_forward_backward(be, with_weight):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4, 40)).astype(np.float32)
    w = rng.standard_normal(40).astype(np.float32) if with_weight else None
    wf = 1.0 if w is None else w.astype(float)
    xf = x.astype(float)
    rstd = 1 / np.sqrt((xf ** 2).mean(-1, keepdims=True) + 1e-5)
    y, r = be.rmsnorm(flipped(be, x), None if w is None else up(be, w), 1e-5)
    close(be.to_numpy(y), xf * rstd * wf)
    close(be.to_numpy(r), rstd)
    gy = rng.standard_normal(x.shape).astype(np.float32)
    xhat = xf * rstd
    gx = gy * wf
    dx_ref = rstd * (gx - xhat * (gx * xhat).mean(-1, keepdims=True))
    dx, dw = be.rmsnorm_backward(up(be, x), None if w is None else up(be, w), r, up(be, gy))
    close(be.to_numpy(dx), dx_ref, atol=1e-5)
    if w is None:
        assert dw is None
    else:
        close(be.to_numpy(dw), (gy * xhat).reshape(-1, 40).sum(0), atol=1e-4)


@pytest.mark.parametrize("affine", [True, False])
def test_layernorm_forward_backward(be, affine):
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((5, 300)) + 3).astype(np.float32)
    w = rng.standard_normal(300).astype(np.float32) if affine else None
    b = rng.standard_normal(300).astype(np.float32) if affine else None
    xf = x.astype(float)
    mu = xf.mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(((xf - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    xhat = (xf - mu) * rstd
    y_ref = xhat * (1.0 if w is None else w) + (0.0 if b is None else b)
    gw = None if w is None else up(be, w)
    y, m, r = be.layernorm(T(be, x), gw, None if b is None else up(be, b), 1e-5)
    close(be.to_numpy(y), y_ref)
    close(be.to_numpy(m), mu)
    close(be.to_numpy(r), rstd)
    gy = rng.standard_normal(x.shape).astype(np.float32)
    gx = gy * (1.0 if w is None else w)
    dx_ref = rstd * (gx - gx.mean(-1, keepdims=True)
                     - xhat * (gx * xhat).mean(-1, keepdims=True))
    dx, dw, db = be.layernorm_backward(up(be, x), gw, m, r, up(be, gy))
    close(be.to_numpy(dx), dx_ref, atol=1e-5)
    close(be.to_numpy(db), gy.sum(0), atol=1e-4)
    if w is None:
        assert dw is None
    else:
        close(be.to_numpy(dw), (gy * xhat).sum(0), atol=1e-4)


# -- rope --------------------------------------------------------------------------------
def test_rope_and_its_inverse(be):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 9, 16)).astype(np.float32)
    ang = rng.standard_normal((9, 8))
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    x1, x2 = x[..., :8], x[..., 8:]
    want = np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    got = be.rope(flipped(be, x), up(be, cos), up(be, sin))
    close(be.to_numpy(got), want, atol=1e-6)
    back = be.rope(got, up(be, cos), up(be, sin), inverse=True)
    close(be.to_numpy(back), x, atol=1e-5)


# -- attention ---------------------------------------------------------------------------
def attention_ref(q, k, v, causal, scale):
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.arange(sk)[None, :] > np.arange(sq)[:, None], -np.inf, s)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l_ = p.sum(-1, keepdims=True)
    p /= l_
    return p, p @ v, (m + np.log(l_))[..., 0]


def attention_grads_ref(q, k, v, causal, scale, gout):
    p, out, _ = attention_ref(q, k, v, causal, scale)
    q, k, v, g = (t.astype(np.float64) for t in (q, k, v, gout))
    dv = np.swapaxes(p, -1, -2) @ g
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (g * out).sum(-1, keepdims=True)) * scale
    return ds @ k, np.swapaxes(ds, -1, -2) @ q, dv


@pytest.mark.parametrize("head_dim", [16, 32, 64])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_forward_backward(be, head_dim, causal):
    rng = np.random.default_rng(head_dim + causal)
    for sq, sk in ((1, 1), (7, 7), (33, 33), (7, 33)):
        q = rng.standard_normal((2, 2, sq, head_dim)).astype(np.float32)
        k = rng.standard_normal((2, 2, sk, head_dim)).astype(np.float32)
        v = rng.standard_normal((2, 2, sk, head_dim)).astype(np.float32)
        scale = 1 / math.sqrt(head_dim)
        _, out_ref, lse_ref = attention_ref(q, k, v, causal, scale)
        # q laid out as (batch, seq, heads, dim) and viewed as (batch, heads, seq, dim)
        gq = up(be, q.transpose(0, 2, 1, 3))
        gq = gq.view(q.shape, (gq.strides[0], gq.strides[2], gq.strides[1], 1), 0)
        out, lse = be.attention(gq, up(be, k), up(be, v), causal, scale)
        msg = f"sq={sq} sk={sk}"
        close(be.to_numpy(out), out_ref, atol=2e-5, msg=msg)
        close(be.to_numpy(lse), lse_ref, atol=2e-5, msg=msg)
        gout = rng.standard_normal(out_ref.shape).astype(np.float32)
        grads = be.attention_backward(gq, up(be, k), up(be, v), out, lse, up(be, gout),
                                      causal, scale)
        for name, g, want in zip(("dq", "dk", "dv"), grads,
                                 attention_grads_ref(q, k, v, causal, scale, gout)):
            close(be.to_numpy(g), want, atol=5e-5, msg=f"{name} {msg}")


def test_attention_odd_head_dims(be):
    rng = np.random.default_rng(10)
    q = rng.standard_normal((3, 9, 6)).astype(np.float32)  # head_dim 6: not a multiple of 4
    k = rng.standard_normal((3, 11, 6)).astype(np.float32)
    v = rng.standard_normal((3, 11, 5)).astype(np.float32)  # value dim differs
    _, out_ref, lse_ref = attention_ref(q, k, v, False, 0.4)
    out, lse = be.attention(up(be, q), up(be, k), up(be, v), False, 0.4)
    close(be.to_numpy(out), out_ref, atol=2e-5)
    close(be.to_numpy(lse), lse_ref, atol=2e-5)
    gout = rng.standard_normal(out_ref.shape).astype(np.float32)
    grads = be.attention_backward(up(be, q), up(be, k), up(be, v), out, lse, up(be, gout),
                                  False, 0.4)
    for g, want in zip(grads, attention_grads_ref(q, k, v, False, 0.4, gout)):
        close(be.to_numpy(g), want, atol=5e-5)


def test_attention_broadcast_heads_and_large_head_dim(be):
    rng = np.random.default_rng(8)
    q = rng.standard_normal((1, 4, 20, 128)).astype(np.float32)
    k = rng.standard_normal((1, 1, 20, 128)).astype(np.float32)  # shared across heads
    v = rng.standard_normal((1, 1, 20, 128)).astype(np.float32)
    _, want, _ = attention_ref(q, k, v, True, 0.1)
    out, _ = be.attention(up(be, q), up(be, k), up(be, v), True, 0.1)
    close(be.to_numpy(out), want, atol=2e-5)


# -- optimizers --------------------------------------------------------------------------
def test_adamw_and_sgd_steps_in_place(be):
    rng = np.random.default_rng(9)
    n = 1000
    flat = rng.standard_normal(n + 24).astype(np.float32)
    gflat = be.from_numpy(flat)
    p = gflat.view((n,), (1,), 24)  # a parameter living at an offset in a flat buffer
    pr = flat[24:].astype(np.float64)
    m, v = be.full((n,), 0.0, np.float32), be.full((n,), 0.0, np.float32)
    mr, vr = np.zeros(n), np.zeros(n)
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-8, 0.1
    for step in (1, 2, 3):
        g = rng.standard_normal(n).astype(np.float32)
        be.adamw_step(p, up(be, g), m, v, lr, b1, b2, eps, wd, step)
        pr *= 1 - lr * wd
        mr = b1 * mr + (1 - b1) * g
        vr = b2 * vr + (1 - b2) * g.astype(float) ** 2
        pr -= lr / (1 - b1 ** step) * mr / (np.sqrt(vr / (1 - b2 ** step)) + eps)
    close(be.to_numpy(p), pr, atol=1e-5)
    close(be.to_numpy(gflat)[:24], flat[:24])  # neighbours untouched
    for nesterov in (False, True):
        p = up(be, flat[:n])
        buf = be.full((n,), 0.0, np.float32)
        pr, br = flat[:n].astype(np.float64), np.zeros(n)
        for _ in range(3):
            g = rng.standard_normal(n).astype(np.float32)
            be.sgd_step(p, up(be, g), buf, 0.1, 0.9, nesterov, 0.01)
            d = g + 0.01 * pr
            br = 0.9 * br + d
            pr -= 0.1 * (d + 0.9 * br if nesterov else br)
        close(be.to_numpy(p), pr, atol=1e-5)
    p = up(be, flat[:n])
    g = rng.standard_normal(n).astype(np.float32)
    be.sgd_step(p, up(be, g), None, 0.5, 0.0, False, 0.0)
    close(be.to_numpy(p), flat[:n] - 0.5 * g, atol=1e-6)


@pytest.mark.parametrize("shape", [(5, 3, 7), (130, 70, 9), (2, 4, 0), (3, 0, 5)])
def test_matmul_row_sums_ride_along(be, shape):
    """want_row_sums: C = A @ B and A summed over k from one dispatch (bias gradients)."""
    from haelixe.backends.wgpu import matmul as mm

    m, k, n = shape
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((k, m)).astype(np.float32)  # A = a.T, a strided view
    b = rng.standard_normal((k, n)).astype(np.float32)
    c, sums = mm.matmul(be, T(be, a.T), up(be, b), want_row_sums=True)
    close(be.to_numpy(c), a.T @ b, atol=1e-4)
    close(be.to_numpy(sums), a.T.sum(1), atol=1e-4)


def test_attention_output_is_sequence_major(be):
    """(batch, heads, seq, d) in, an output whose transpose(1, 2) is contiguous: the
    head merge of multi-head attention is a view."""
    from haelixe.backends.wgpu.geometry import permute

    rng = np.random.default_rng(10)
    q, k, v = (rng.standard_normal((2, 3, 11, 8)).astype(np.float32) for _ in range(3))
    out, _ = be.attention(up(be, q), up(be, k), up(be, v), False, 0.35)
    assert out.shape == (2, 3, 11, 8) and permute(out, (0, 2, 1, 3)).is_contiguous()
    _, want, _ = attention_ref(q, k, v, False, 0.35)
    close(be.to_numpy(out), want, atol=2e-5)


# -- every variant chosen by shape ---------------------------------------------------------
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("sq,sk", [(300, 20), (20, 300)])
def test_attention_row_block_variants(be, sq, sk, causal):
    """Both rows-per-workgroup plans (64 up to 256 rows, 128 beyond) in each of the
    three kernels: the forward and dq take theirs from the query length, dk/dv from the
    key length; lengths that are not multiples of the blocks."""
    from haelixe.backends.wgpu.attention import plan

    assert {plan("attention_forward", 16, 12, 1 << 15, n).bq for n in (sq, sk)} == {64, 128}
    rng = np.random.default_rng(sq + causal)
    q = rng.standard_normal((2, sq, 16)).astype(np.float32)
    k = rng.standard_normal((2, sk, 16)).astype(np.float32)
    v = rng.standard_normal((2, sk, 12)).astype(np.float32)
    _, out_ref, lse_ref = attention_ref(q, k, v, causal, 0.25)
    out, lse = be.attention(up(be, q), up(be, k), up(be, v), causal, 0.25)
    close(be.to_numpy(out), out_ref, atol=2e-5)
    close(be.to_numpy(lse), lse_ref, atol=2e-5)
    gout = rng.standard_normal(out_ref.shape).astype(np.float32)
    grads = be.attention_backward(up(be, q), up(be, k), up(be, v), out, lse, up(be, gout),
                                  causal, 0.25)
    for name, g, want in zip(("dq", "dk", "dv"), grads,
                             attention_grads_ref(q, k, v, causal, 0.25, gout)):
        close(be.to_numpy(g), want, atol=5e-5, msg=name)


ROW_LENGTHS = (5, 40, 300, 700)  # per-invocation rows, then 32, 64 and 256 per workgroup


def test_row_kernel_workgroup_variants(be):
    """Reductions, argmax, softmax and the norms pick their workgroup size from the row
    length: every size (and the one-invocation-per-row reduction) against numpy."""
    from haelixe.backends.wgpu.reduce import workgroup_size

    assert {workgroup_size(n) for n in ROW_LENGTHS} == {32, 64, 256}
    rng = np.random.default_rng(13)
    for n in ROW_LENGTHS:
        x = rng.standard_normal((3, n)).astype(np.float32)
        gx = T(be, x)  # rows read with a stride
        msg = f"length {n}"
        close(be.to_numpy(be.sum(gx, (1,))), x.sum(1), atol=1e-4, msg=msg)
        close(be.to_numpy(be.max(gx, (1,))), x.max(1), msg=msg)
        np.testing.assert_array_equal(be.to_numpy(be.argmax(gx, 1)), x.argmax(1), msg)
        close(be.to_numpy(be.softmax(gx, 1)), softmax_ref(x, 1), atol=1e-6, msg=msg)
        y, _ = be.rmsnorm(gx, None, 1e-6)
        close(be.to_numpy(y), x / np.sqrt((x.astype(float) ** 2).mean(1, keepdims=True)
                                          + 1e-6), atol=1e-5, msg=msg)
        y, _, _ = be.layernorm(gx, None, None, 1e-5)
        xc = x - x.mean(1, keepdims=True)
        close(be.to_numpy(y), xc / np.sqrt((xc ** 2).mean(1, keepdims=True) + 1e-5),
              atol=1e-4, msg=msg)
