"""The CPU thread pool (backends/threads.py: over_batch, matmul), the attention kernels
that run on it (backends/cpu_attention.py) and the embedding backward's compiled
scatter-add (CPUBackend.index_add).

A batch cut across threads must give the same bits as the uncut call: each part is the
same kernel on a slice of the batch. The splits are forced (a tiny MIN_WORK_PER_PART,
the machine taken as idle) so that small arrays exercise them.
"""

from __future__ import annotations

import multiprocessing
import sys

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import haelixe as hx
from haelixe.backends import cpu_attention, threads
from haelixe.backends.cpu import CPU_BACKEND as BE

RNG = np.random.default_rng(16)


@pytest.fixture
def split(monkeypatch):
    """Every batch worth cutting is cut in two (an idle 2-core machine, tiny parts);
    yields the list of part counts of the batches the pool ran."""
    p = threads._POLICY
    saved = (p.cap, p.free, p.next_sample, p.blas_spins_until)
    p.cap, p.free, p.next_sample, p.blas_spins_until = 2, 2, float("inf"), 0.0
    monkeypatch.setattr(threads, "MIN_WORK_PER_PART", 1)
    runs = []
    real = threads._POOL.run

    def run(fn, parts):
        results = real(fn, parts)
        if results is not None:  # (None: the pool was busy, nothing ran on it)
            runs.append(len(parts))
        return results

    monkeypatch.setattr(threads._POOL, "run", run)
    yield runs
    p.cap, p.free, p.next_sample, p.blas_spins_until = saved


def _reference(a, b):
    with threadpool_limits(1, "blas"):
        return np.matmul(a, b)


def _arr(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# -- batched matmul ---------------------------------------------------------------------
MATMUL_CASES = {
    "contiguous": lambda dt: (_arr((16, 4, 8, 5), dt), _arr((16, 4, 5, 6), dt)),
    "transposed": lambda dt: (np.swapaxes(_arr((6, 3, 5, 8), dt), -1, -2),
                              np.swapaxes(_arr((6, 3, 7, 5), dt), -1, -2)),
    "strided": lambda dt: (_arr((12, 8, 10), dt)[::2, ::2, 1:6], _arr((6, 5, 3), dt)),
    "permuted": lambda dt: (_arr((5, 7, 3, 4), dt).transpose(2, 0, 1, 3),
                            _arr((3, 5, 4, 2), dt)),
    "broadcast": lambda dt: (_arr((1, 4, 6, 5), dt), _arr((7, 1, 5, 3), dt)),
    "zero strides": lambda dt: (np.broadcast_to(_arr((6, 5), dt), (9, 6, 5)),
                                _arr((9, 5, 4), dt)),
    "matrix @ batch": lambda dt: (_arr((6, 5), dt), _arr((8, 5, 3), dt)),
    "batch @ matrix": lambda dt: (_arr((8, 6, 5), dt), _arr((5, 3), dt)),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", MATMUL_CASES)
def test_split_matmul_equals_numpy_bitwise(split, case, dtype):
    a, b = MATMUL_CASES[case](dtype)
    got = threads.matmul(a, b)
    want = _reference(a, b)
    assert split == [2], "the batch was not cut"
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shapes", [((0, 4, 3), (0, 3, 2)), ((1, 4, 3), (1, 3, 2)),
                                    ((5, 0, 3), (5, 3, 2)), ((5, 4, 0), (5, 0, 2)),
                                    ((4, 3), (3, 2)), ((3,), (4, 3, 2))])
def test_matmul_edge_batches_run_whole(split, shapes):
    a, b = (_arr(s) for s in shapes)
    got = threads.matmul(a, b)
    np.testing.assert_array_equal(got, _reference(a, b))
    assert got.shape == np.matmul(a, b).shape


def test_matmul_not_cut_under_one_thread_a_busy_machine_or_other_dtypes(split):
    a, b = _arr((16, 4, 8, 5)), _arr((16, 4, 5, 6))
    hx.set_num_threads(1)
    try:
        np.testing.assert_array_equal(threads.matmul(a, b), _reference(a, b))
    finally:
        hx.set_num_threads(2)
    threads._POLICY.free = 1  # another process holds the other core
    np.testing.assert_array_equal(threads.matmul(a, b), _reference(a, b))
    threads._POLICY.free = 2
    ints = (np.arange(60).reshape(3, 4, 5), np.arange(30).reshape(3, 5, 2))
    np.testing.assert_array_equal(threads.matmul(*ints), np.matmul(*ints))
    mixed = threads.matmul(a, b.astype(np.float64))
    assert mixed.dtype == np.float64
    assert split == []


def test_no_cut_while_blas_threads_spin(split):
    a, b = _arr((16, 4, 8, 5)), _arr((16, 4, 5, 6))
    big = threads.MIN_WORK_PER_THREAD * 64
    threads.blas(lambda: None, work=big)  # a product on BLAS's threads
    assert threads._POLICY.blas_spins_until > 0
    np.testing.assert_array_equal(threads.matmul(a, b), _reference(a, b))
    assert split == []
    threads._POLICY.blas_spins_until = 0.0  # their spin is over
    np.testing.assert_array_equal(threads.matmul(a, b), _reference(a, b))
    assert split == [2]


def test_matmul_shape_errors_are_numpys(split):
    a, b = _arr((4, 3, 5)), _arr((4, 6, 2))
    with pytest.raises(ValueError) as want:
        np.matmul(a, b)
    with pytest.raises(ValueError) as got:
        threads.matmul(a, b)
    assert str(got.value) == str(want.value)
    with pytest.raises(ValueError):
        threads.matmul(_arr((3, 4, 3, 5)), _arr((2, 5, 2)))
    assert split == []


def test_backend_matmul_uses_the_pool(split):
    a, b = _arr((8, 3, 6, 5)), _arr((8, 3, 5, 4))
    np.testing.assert_array_equal(BE.matmul(a, b), _reference(a, b))
    assert split == [2]
    low = BE.matmul(a.astype(hx.bfloat16.np), b.astype(hx.bfloat16.np))
    assert low.dtype == hx.bfloat16.np and split == [2, 2]


# -- the pool ---------------------------------------------------------------------------
def test_a_failing_part_raises_in_the_caller_and_the_pool_goes_on(split):
    def part(x):
        if x[0] >= 4:
            raise ZeroDivisionError("second part")
        return x.sum()

    x = np.arange(8.0)
    with pytest.raises(ZeroDivisionError, match="second part"):
        threads.over_batch(part, (x,), (0,), 2)
    axis, results = threads.over_batch(lambda x: x * 2, (x,), (0,), 2)
    assert axis == 0
    np.testing.assert_array_equal(np.concatenate(results), x * 2)
    assert not threads._POOL.lock.locked()


def test_nested_calls_run_whole_and_blas_stays_on_one_thread(split):
    seen = []

    def outer(a):
        seen.append((threads.parts_for(1 << 30, 64), threads.threads_for(1 << 30),
                     threads.over_batch(np.negative, (a,), (0,), 2)))
        return threads.matmul(a, np.swapaxes(a, -1, -2))

    a = _arr((8, 6, 5))
    axis, results = threads.over_batch(outer, (a,), (2,), 2)
    want = _reference(a, np.swapaxes(a, -1, -2))
    np.testing.assert_array_equal(np.concatenate(results, axis), want)
    assert seen == [(1, 1, None)] * 2 and split == [2]


def _child_matmul(queue):
    a, b = np.ones((8, 4, 3)), np.ones((8, 3, 2))
    queue.put(float(threads.matmul(a, b).sum()))


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_a_forked_child_gets_a_pool_of_its_own(split):
    threads.matmul(_arr((8, 4, 3)), _arr((8, 3, 2)))  # the parent's workers exist
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_matmul, args=(queue,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert queue.get(timeout=5) == 8 * 4 * 2 * 3


# -- attention cut by heads ---------------------------------------------------------------
def _attention_inputs(dtype, lead_q=(4, 3), lead_kv=(4, 3), sq=7, sk=9, d=5):
    return _arr(lead_q + (sq, d), dtype), _arr(lead_kv + (sk, d), dtype), \
        _arr(lead_kv + (sk, d), dtype)


MASKS = {
    "none": lambda sq, sk: None,
    "bool": lambda sq, sk: RNG.random((4, 1, sq, sk)) > 0.3,
    "float": lambda sq, sk: _arr((sq, sk)),
    "key padding": lambda sq, sk: RNG.random((4, 1, 1, sk)) > 0.2,
}


@pytest.mark.numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("leads", [((4, 3), (4, 3)), ((4, 3), (1, 3)), ((4, 1), (4, 3))])
def test_attention_cut_by_heads_equals_the_whole(split, dtype, causal, mask, leads):
    q, k, v = _attention_inputs(dtype, *leads)
    m = MASKS[mask](q.shape[-2], k.shape[-2])
    if m is not None and m.dtype == np.bool_:
        m[..., 0] = True  # every query sees a key
    scale = 0.3
    cut_out, cut_lse = cpu_attention.attention_forward(q, k, v, causal, scale, m)
    g = _arr(cut_out.shape, dtype)
    cut_grads = cpu_attention.attention_backward(q, k, v, cut_out, cut_lse, g, causal, scale, m)
    assert split == [2, 2]
    hx.set_num_threads(1)
    try:
        out, lse = cpu_attention.attention_forward(q, k, v, causal, scale, m)
        grads = cpu_attention.attention_backward(q, k, v, out, lse, g, causal, scale, m)
    finally:
        hx.set_num_threads(2)
    assert split == [2, 2]
    for got, want in zip((cut_out, cut_lse, *cut_grads), (out, lse, *grads)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mask", MASKS)
def test_kept_probabilities_serve_backward_like_rebuilt_ones(monkeypatch, dtype, mask):
    q, k, v = _attention_inputs(dtype)
    m = MASKS[mask](q.shape[-2], k.shape[-2])
    if m is not None and m.dtype == np.bool_:
        m[..., 0] = True
    out, lse, p = cpu_attention.attention_forward_keeping(q, k, v, True, 0.3, m)
    assert p.shape == (4, 3, 7, 9) and p.dtype == dtype
    plain = cpu_attention.attention_forward(q, k, v, True, 0.3, m)
    assert len(plain) == 2  # the forward of an op that records no node keeps nothing
    for got, want in zip((out, lse), plain):
        np.testing.assert_array_equal(got, want)
    g = _arr(out.shape, dtype)
    kept = cpu_attention.attention_backward(q, k, v, out, lse, g, True, 0.3, m, p)
    again = cpu_attention.attention_backward(q, k, v, out, lse, g, True, 0.3, m, p)
    rebuilt = cpu_attention.attention_backward(q, k, v, out, lse, g, True, 0.3, m)
    tol = dict(rtol=1e-4, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
    for a, b, c in zip(kept, again, rebuilt):
        np.testing.assert_array_equal(a, b)  # backward leaves the kept ones as they were
        np.testing.assert_allclose(a, c, **tol)
    # (backward reads the probabilities it is given: dv = p^T g)
    zero = cpu_attention.attention_backward(q, k, v, out, lse, g, True, 0.3, m, p * 0)
    assert not zero[2].any() and kept[2].any()
    # the size limit: probabilities of exactly KEEP_PROBS_BYTES are kept, larger ones not
    monkeypatch.setattr(cpu_attention, "KEEP_PROBS_BYTES", p.nbytes)
    assert cpu_attention.attention_forward_keeping(q, k, v, True, 0.3, m)[2] is not None
    monkeypatch.setattr(cpu_attention, "KEEP_PROBS_BYTES", p.nbytes - 1)
    assert cpu_attention.attention_forward_keeping(q, k, v, True, 0.3, m)[2] is None


@pytest.mark.numba
def test_the_blocked_path_keeps_no_probabilities():
    q, k, v = _attention_inputs(np.float32, (1,), (1,), sq=3,
                                sk=cpu_attention.FLASH_MIN_KEYS, d=2)
    out, lse, p = cpu_attention.attention_forward_keeping(q, k, v, False, 0.5)
    assert p is None
    plain_out, plain_lse = cpu_attention.attention_forward(q, k, v, False, 0.5)
    np.testing.assert_array_equal(out, plain_out)
    np.testing.assert_array_equal(lse, plain_lse)


@pytest.mark.numba
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mask", ["none", "bool"])
@pytest.mark.parametrize("leads", [((4, 3), (4, 3)), ((4, 1), (4, 3))])
def test_kept_probabilities_cut_by_heads_equal_the_whole(split, causal, mask, leads):
    q, k, v = _attention_inputs(np.float64, *leads)
    m = MASKS[mask](q.shape[-2], k.shape[-2])
    if m is not None:
        m[..., 0] = True
    cut = cpu_attention.attention_forward_keeping(q, k, v, causal, 0.3, m)
    g = _arr(cut[0].shape, np.float64)
    cut_grads = cpu_attention.attention_backward(q, k, v, *cut[:2], g, causal, 0.3, m, cut[2])
    assert split == [2, 2]
    hx.set_num_threads(1)
    try:
        whole = cpu_attention.attention_forward_keeping(q, k, v, causal, 0.3, m)
        grads = cpu_attention.attention_backward(q, k, v, *whole[:2], g, causal, 0.3, m,
                                                 whole[2])
    finally:
        hx.set_num_threads(2)
    assert split == [2, 2]
    for got, want in zip((*cut, *cut_grads), (*whole, *grads)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.numba
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("sq,sk", [(7, 9), (9, 7), (1, 1)])
def test_attention_against_numpy(causal, sq, sk):
    q, k, v = _attention_inputs(np.float64, sq=sq, sk=sk)
    m = RNG.random((sq, sk)) > 0.3
    m[:, 0] = True
    s = q @ np.swapaxes(k, -1, -2) * 0.4
    s = np.where(m, s, -np.inf)
    if causal:
        s = np.where(np.tril(np.ones((sq, sk), bool)), s, -np.inf)
    lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    p = np.exp(s - lse[..., None])
    out, got_lse = cpu_attention.attention_forward(q, k, v, causal, 0.4, m)
    np.testing.assert_allclose(out, p @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_lse, lse, rtol=1e-12, atol=1e-12)
    g = _arr(out.shape, np.float64)
    dq, dk, dv = cpu_attention.attention_backward(q, k, v, out, got_lse, g, causal, 0.4, m)
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) * 0.4
    for got, want in ((dq, ds @ k), (dk, np.swapaxes(ds, -1, -2) @ q),
                      (dv, np.swapaxes(p, -1, -2) @ g)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_probability_kernels_mask_the_hidden_keys(dtype):
    sq, sk = 5, 19  # rows longer than one lane block, with a tail
    s = _arr((3 * sq, sk), dtype)
    s[4, 2] = np.nan  # a NaN spreads over its row, as in numpy
    p, lse = np.empty_like(s), np.empty(3 * sq, dtype)
    from haelixe.backends import cpu_kernels

    cpu_kernels.attention_probs(s, dtype(0.5), True, sq, p, lse)
    hidden = np.arange(sk)[None, :] > (np.arange(3 * sq) % sq)[:, None]
    x = np.where(hidden, -np.inf, s * dtype(0.5)).astype(np.float64)
    want = np.exp(x - x.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    tol = dict(rtol=1e-5, atol=1e-7) if dtype == np.float32 else dict(rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(p[np.arange(15) != 4], want[np.arange(15) != 4], **tol)
    assert np.isnan(p[4]).all() and np.isnan(lse[4])
    assert (p[hidden & ~np.isnan(p)] == 0).all()
    e = np.empty_like(s)
    for k0 in (0, 2, 6):  # a block of keys from k0: query i sees keys up to i
        cpu_kernels.exp_rows(s, dtype(0.5), lse, True, sq, k0, e)
        seen = (np.arange(sk)[None, :] + k0) <= (np.arange(3 * sq) % sq)[:, None]
        ok = np.arange(15) != 4
        np.testing.assert_allclose(e[ok], np.where(seen, np.exp(s * 0.5 - lse[:, None]), 0)[ok],
                                   **tol)


# -- embedding backward: the scatter-add of rows -----------------------------------------
def _add_at(shape, key, values):
    out = np.zeros(shape, values.dtype)
    np.add.at(out, key, values)
    return out


@pytest.mark.numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_shape,table", [((64,), (10, 8)), ((4, 16), (10, 8)),
                                               ((30,), (6, 3, 4)), ((12,), (5,)),
                                               ((0,), (5, 3)), ((2, 0), (5, 3)),
                                               ((7,), (4, 0))])
def test_index_add_rows_equals_add_at_bitwise(dtype, index_shape, table):
    idx = RNG.integers(-table[0], table[0], index_shape)  # repeats and negatives
    shape = index_shape + table[1:]
    values = (_arr(shape, np.float64) * 10.0 ** RNG.integers(-6, 6, shape)).astype(dtype)
    got = BE.index_add(table, (idx,), values)
    want = _add_at(table, (idx,), values)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_index_add_other_keys_and_dtypes_still_add():
    values = _arr((6, 4))
    idx = np.array([0, 2, 2, 1, 0, 2])
    cases = [((3, 4), (idx,), values),
             ((3, 4), (idx,), np.asfortranarray(values)),  # strided values
             ((3, 4), (idx,), values[0]),  # broadcast values
             ((3, 4), (idx.astype(np.uint8),), values),
             ((3, 4), (idx,), values.astype(hx.bfloat16.np)),
             ((3, 4), (idx,), np.arange(24).reshape(6, 4)),
             ((4, 3), (slice(None), idx[:3]), _arr((4, 3))),
             ((3, 4), (idx, idx % 4), values[:, 0])]
    for shape, key, vals in cases:
        got = BE.index_add(shape, key, vals)
        want = _add_at(shape, key, vals)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))


@pytest.mark.parametrize("bad", [3, -4, 100])
def test_index_add_out_of_range_raises_add_ats_error(bad):
    values = _arr((4, 2))
    idx = np.array([0, 1, bad, 2])
    with pytest.raises(IndexError) as want:
        _add_at((3, 2), (idx,), values)
    with pytest.raises(IndexError) as got:
        BE.index_add((3, 2), (idx,), values)
    assert str(got.value) == str(want.value)


@pytest.mark.numba
def test_embedding_gradient_through_the_compiled_path():
    torch = pytest.importorskip("torch")

    w = _arr((11, 6), np.float64)
    idx = RNG.integers(0, 11, (5, 9))
    g = _arr((5, 9, 6), np.float64)
    hw = hx.tensor(w, requires_grad=True)
    hx.nn.functional.embedding(hx.tensor(idx), hw).backward(hx.tensor(g))
    tw = torch.tensor(w, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(idx), tw).backward(torch.tensor(g))
    np.testing.assert_allclose(hw.grad.numpy(), tw.grad.numpy(), rtol=1e-13, atol=1e-14)
