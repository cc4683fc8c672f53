"""The CPU's compiled kernels (backends/cpu_kernels.py, cpu_jit.py) and its thread policy
(backends/threads.py).

Each compiled kernel is checked against a second computation of the same math: the
traced elementwise ufuncs against the Kernel's own numpy evaluation, the fused row
kernels against the contract's composed defaults (backends/base.py, run on the CPU's
primitives) and against PyTorch, in float32 and float64, on contiguous and strided
inputs, forward and backward.
"""

from __future__ import annotations

import math
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import haelixe as hx
from haelixe.backends import base, cpu_jit, threads
from haelixe.backends.cpu import _MATH, CPU_BACKEND, JIT_MIN_SIZE, _compile
from haelixe.ops.elementwise import ACTIVATIONS
from haelixe.ops.registry import OPS, Elementwise

BE = CPU_BACKEND
COMPOSED = base.Backend  # the composed defaults, called on the CPU backend's primitives
TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _all_kernels():
    ks = []
    for d in OPS.values():
        if isinstance(d, Elementwise):
            ks.append(d.kernel)
            ks += [g.kernel for g in d.grads if g is not None]
    ks += [v for v in vars(base).values() if isinstance(v, base.Kernel)]
    ks += [a.backward for a in ACTIVATIONS.values()]
    return ks


def _jitted(k) -> bool:
    if k.cpu is not None:
        return False
    try:
        src, ops = cpu_jit.trace(k)
    except cpu_jit.Unsupported:
        return False
    return cpu_jit.worth_compiling(src, ops)


JITTED = sorted({k.name: k for k in _all_kernels() if _jitted(k)}.items())


def _inputs(kernel, dtype, rng, shape=(64, 300)):
    """Arrays in each kernel's domain: positive where it takes a log or a root."""
    xs = [rng.uniform(-3, 3, shape).astype(dtype) for _ in range(kernel.arity)]
    if any(s in kernel.name for s in ("sqrt", "log", "rstd", "reciprocal", "adamw_p",
                                      "adam_v", "div")):
        xs = [np.abs(x) + dtype(0.5) for x in xs]
    if "celu" in kernel.name:  # alpha (the last input) away from 0: exp(x / alpha) would
        xs[-1] = np.abs(xs[-1]) + dtype(0.5)  # amplify the rounding of x / alpha
    return xs


def test_the_compiled_set_covers_the_ops_that_train():
    names = {n for n, _ in JITTED}
    for n in ("gelu_erf", "gelu_backward", "silu", "silu_grad0", "relu_grad0",
              "sigmoid_grad0", "tanh_grad0", "erf"):
        assert n in names
    assert len(JITTED) > 30


@pytest.mark.numba
@pytest.mark.parametrize("name,kernel", JITTED, ids=[n for n, _ in JITTED])
def test_compiled_kernel_equals_numpy_float32(name, kernel):
    rng = np.random.default_rng(0)
    xs = _inputs(kernel, np.float32, rng)
    ufunc = cpu_jit.compile_ufunc(kernel, np.float32)
    want = np.asarray(kernel.fn(_MATH, *[x.astype(np.float64) for x in xs]))
    got = ufunc(*xs)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=2e-6, err_msg=name)


@pytest.mark.numba
@pytest.mark.parametrize("name", ["gelu_erf", "gelu_backward", "silu_grad0", "erf",
                                  "clamp3_grad0", "adamw_p"])
def test_compiled_kernel_float64_and_strided(name):
    """float64 is exact libm math (gradient checks need it); strided and broadcast
    operands go through numpy's ufunc machinery like any ufunc's."""
    kernel = dict(JITTED)[name]
    rng = np.random.default_rng(1)
    xs = _inputs(kernel, np.float64, rng, shape=(300, 128))
    xs = [x.T if i % 2 == 0 else x[::-1] for i, x in enumerate(xs)]  # transposed, flipped
    xs = [x if x.shape == (128, 300) else x.T for x in xs]
    f = _compile(kernel)
    got = f(*xs)
    want = kernel.fn(_MATH, *xs)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)
    # a scalar operand broadcast against arrays
    if kernel.arity >= 2:
        xs[1] = np.float64(0.75)
        np.testing.assert_allclose(f(*xs), kernel.fn(_MATH, *xs), rtol=1e-13, atol=1e-14)


def test_small_and_mixed_inputs_stay_on_numpy():
    k = dict(JITTED)["gelu_backward"]
    f = _compile(k)
    small = np.ones((4, 4), np.float32)
    assert np.array_equal(f(small, small), k.fn(_MATH, small, small))
    big16 = np.ones(JIT_MIN_SIZE, np.float16)  # no compiled form: computed in float32
    assert f(big16, big16).dtype == np.float32


def test_single_operations_run_as_numpy_ufuncs():
    assert cpu_jit.single_ufunc(base.K_ADD) is np.add
    assert cpu_jit.single_ufunc(base.K_MUL) is np.multiply
    assert cpu_jit.single_ufunc(dict(JITTED)["gelu_erf"]) is None


def test_kernels_calling_log_or_tanh_are_not_compiled():
    """numpy's SIMD log and tanh beat a libm call per element: those stay on numpy."""
    names = {n for n, _ in JITTED}
    assert "softplus" not in names and "gelu_tanh" not in names and "logaddexp" not in names


@pytest.mark.numba
def test_compile_failure_falls_back_to_numpy(monkeypatch):
    k = base.Kernel("probe_fallback", lambda m, x: m.exp(x) * 2.0 + 1.0, 1)

    def broken(kernel, dtype):
        raise RuntimeError("no compiler")

    monkeypatch.setattr(cpu_jit, "compile_ufunc", broken)
    x = np.linspace(-1, 1, JIT_MIN_SIZE, dtype=np.float32)
    with pytest.warns(UserWarning, match="probe_fallback"):
        out = BE.map(k, [x], x.dtype)
    np.testing.assert_allclose(out, np.exp(x) * 2 + 1, rtol=1e-6)


def test_float_edge_cases_are_silent_and_right():
    gelu = ACTIVATIONS["gelu"].forward
    x = np.zeros(JIT_MIN_SIZE, np.float32)
    x[:6] = [np.nan, np.inf, -np.inf, 1e30, -1e30, -0.0]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        y = BE.map(gelu, [x], x.dtype)
    # numpy's float warnings name haelixe's own module, which haelixe silences (as
    # PyTorch is silent), never numba's
    assert all("/haelixe/" in w.filename for w in seen), [w.filename for w in seen]
    # the values of the Kernel's numpy evaluation (as PyTorch, gelu(-inf) is NaN)
    np.testing.assert_array_equal(y[:6], np.float32([np.nan, np.inf, np.nan, 1e30, -0.0, -0.0]))


@pytest.mark.numba
def test_exp32_and_erf32_accuracy():
    from numba import vectorize

    from haelixe.backends.cpu_kernels import erf32, exp32

    exp_u = vectorize(["float32(float32)"])(lambda x: exp32(x))
    erf_u = vectorize(["float32(float32)"])(lambda x: erf32(x))
    x = np.linspace(-120, 88.7, 240001).astype(np.float32)  # (below -104: 0 by select)
    ref = np.exp(x.astype(np.float64))
    normal = ref > np.finfo(np.float32).tiny
    rel = np.abs(exp_u(x)[normal] - ref[normal]) / ref[normal]
    assert rel.max() < 3e-7  # about two float32 ulp
    assert np.abs(exp_u(x)[~normal] - ref[~normal]).max() < 2e-45  # subnormals too
    special = np.array([np.nan, np.inf, -np.inf, 89.0, -110.0], np.float32)
    with np.errstate(all="ignore"):
        out = exp_u(special)
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == 0 and out[3] == np.inf
    assert out[4] == 0
    z = np.linspace(-6, 6, 100001).astype(np.float32)
    want = np.array([math.erf(v) for v in z.astype(np.float64)])
    assert np.abs(erf_u(z) - want).max() < 5e-7


@pytest.mark.numba
def test_tanh32_accuracy():
    from numba import vectorize

    from haelixe.backends.cpu_kernels import tanh32

    tanh_u = vectorize(["float32(float32)"])(lambda x: tanh32(x))
    tiny = np.geomspace(1e-38, 20, 100001)
    x = np.concatenate([np.linspace(-30, 30, 240001), tiny, -tiny,
                        np.nextafter(np.float32(0.625), np.float32([0, 1]))]).astype(np.float32)
    ref = np.tanh(x.astype(np.float64))
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    assert (np.abs(tanh_u(x) - ref) / ulp).max() <= 2  # numpy's float32 tanh: 1.4
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 100.0], np.float32)
    out = tanh_u(special)
    assert np.isnan(out[0]) and list(out[1:3]) == [1, -1] and out[5] == 1
    assert out[3] == 0 and not np.signbit(out[3]) and np.signbit(out[4])


def _lstm(ops, gates, c, ghc):
    hc, act = ops.lstm_cell(BE, gates, c)
    return (hc, act) + tuple(ops.lstm_cell_backward(BE, act, c, hc, ghc))


def _gru(ops, xp, hp, h, g):
    out, act = ops.gru_cell(BE, xp, hp, h)
    return (out, act) + tuple(ops.gru_cell_backward(BE, act, hp, h, g))


#: per cell: its forward and backward through a backend class, the widths (in units of
#: n) and scales of their arrays, and the compiled kernels they run
CELLS = {"lstm": (_lstm, [(4, 3.0), (1, 1.0), (2, 1.0)],
                  ("lstm_cell_rows", "lstm_cell_backward_rows")),
         "gru": (_gru, [(3, 3.0), (3, 3.0), (1, 1.0), (1, 1.0)],
                 ("gru_cell_rows", "gru_cell_backward_rows"))}


@pytest.mark.numba
@pytest.mark.parametrize("cell", sorted(CELLS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 4), (4,), (0, 3)])
@pytest.mark.parametrize("strided", [False, True])
def test_recurrent_cell_matches_composed(cell, dtype, shape, strided):
    """The compiled LSTM and GRU steps (one pass each way) against base's composed ones,
    forward and backward, over batch shapes, strided operands and an empty batch."""
    run, widths, names = CELLS[cell]
    rng = np.random.default_rng(5)
    n = shape[-1]
    arrays = [(rng.standard_normal(shape[:-1] + (k * n,)) * scale).astype(dtype)
              for k, scale in widths]
    if strided:
        arrays = [_strided(a) for a in arrays]
    run(type(BE), *arrays)
    cpu_jit.wait()  # (the compiled kernels loaded: the calls below run them)
    for name in names if math.prod(shape) else ():
        assert getattr(cpu_jit.kernels(), name).ready.get(np.dtype(dtype)) not in (
            None, cpu_jit._composed)
    for got, want in zip(run(type(BE), *arrays), run(COMPOSED, *arrays)):
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(512, 27), (7, 1), (3, 40), (0, 5)])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("strided", [False, True])
def test_cross_entropy_matches_composed(dtype, shape, reduction, strided):
    """The compiled cross-entropy at class indices (one call each way) against base's
    composed one: the loss, what backward reads, and the gradient (a 0-d one, as
    loss.backward() gives), with ignored rows, over short rows (27 classes), one class,
    strided logits and an empty batch."""
    rng = np.random.default_rng(9)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    target = rng.integers(0, shape[1], shape[0])
    target[::4] = -1
    if strided:
        x = _strided(x)
    g = np.array(1.5, dtype)
    BE.cross_entropy_backward(BE.cross_entropy(x, target, None, -1, reduction, 0.0)[1], g)
    cpu_jit.wait()  # (the compiled kernels loaded: the calls below run them)
    for name in ("cross_entropy_rows", "cross_entropy_backward_rows") if x.size else ():
        assert getattr(cpu_jit.kernels(), name).ready.get(np.dtype(dtype)) not in (
            None, cpu_jit._composed)
    loss, saved = BE.cross_entropy(x, target, None, -1, reduction, 0.0)
    want_loss, want_saved = COMPOSED.cross_entropy(BE, x, target, None, -1, reduction, 0.0)
    assert loss.dtype == dtype and loss.shape == ()
    np.testing.assert_allclose(loss, want_loss, **TOL[dtype])
    for got, want in zip(saved, want_saved):
        if want is None or got is None:
            assert got is want is None
        else:
            np.testing.assert_allclose(got, want, **TOL[dtype])
    dx = BE.cross_entropy_backward(saved, g)
    want_dx = COMPOSED.cross_entropy_backward(BE, want_saved, g)
    assert dx.dtype == dtype and dx.shape == x.shape
    np.testing.assert_allclose(dx, want_dx, **TOL[dtype])


@pytest.mark.numba
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_compiled_cross_entropy_matches_pytorch(dtype, reduction):
    """F.cross_entropy through autograd with the compiled kernels loaded, makemore's
    (512, 27) logits with ignored targets: the loss and the gradient against PyTorch's,
    and a float64 gradcheck."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((512, 27)) * 2).astype(dtype)
    t = rng.integers(0, 27, 512)
    t[rng.random(512) < 0.2] = -1
    hx.nn.functional.cross_entropy(hx.tensor(a), hx.tensor(t), ignore_index=-1)
    cpu_jit.wait()
    got, want = [], []
    for lib, out in ((hx, got), (torch, want)):
        x = lib.tensor(a, requires_grad=True)
        loss = lib.nn.functional.cross_entropy(x, lib.tensor(t), ignore_index=-1,
                                               reduction=reduction)
        (loss * 0.5).backward()
        out += [loss.detach().numpy(), x.grad.numpy()]
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-14)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **tol)
    if dtype == "float64":
        x = hx.tensor(a[:40], requires_grad=True)
        tt = hx.tensor(t[:40])
        assert hx.autograd.gradcheck(lambda v: hx.nn.functional.cross_entropy(
            v, tt, ignore_index=-1, reduction=reduction), (x,))


# -- row kernels ---------------------------------------------------------------------------
def _strided(a):
    """``a``'s values through a transposed, stepped buffer."""
    big = np.zeros((a.shape[-1] * 2,) + a.shape[:-1], a.dtype)
    big[::2] = np.moveaxis(a, -1, 0)
    return np.moveaxis(big[::2], 0, -1)


@pytest.mark.numba
def test_a_kernel_loading_in_the_background_runs_the_composed_form(monkeypatch):
    # a fresh set of kernels, none loaded: the first call queues the load and computes
    # the composed form; once loaded, the compiled kernel runs
    fresh = cpu_jit._Kernels()
    monkeypatch.setattr(cpu_jit, "_KERNELS", fresh)
    monkeypatch.setattr(cpu_jit, "_BACKGROUND", True)
    x = np.random.default_rng(1).standard_normal((8, 33)).astype(np.float32)
    np.testing.assert_array_equal(BE.softmax(x, 1), COMPOSED.softmax(BE, x, 1))
    cpu_jit.wait()
    assert np.dtype(np.float32) in fresh.softmax_rows.ready
    np.testing.assert_allclose(BE.softmax(x, 1), COMPOSED.softmax(BE, x, 1),
                               **TOL[np.float32])
    with pytest.raises(cpu_jit.Loading):  # float64: not loaded yet
        fresh.softmax_rows(x.astype(np.float64), np.empty((8, 33)))
    cpu_jit.wait()


def test_the_gil_changes_hands_often_only_while_kernels_load(monkeypatch):
    # a load that waits until the test has seen the switch interval it runs under
    monkeypatch.setattr(cpu_jit, "_BACKGROUND", True)
    before = sys.getswitchinterval()
    started, release, ready = threading.Event(), threading.Event(), {}

    def make():
        started.set()
        release.wait(10)
        return "loaded"

    assert cpu_jit.soon(ready, "k", make) is None
    assert started.wait(10)
    during = sys.getswitchinterval()
    release.set()
    cpu_jit.wait()
    deadline = time.monotonic() + 10
    while sys.getswitchinterval() != before and time.monotonic() < deadline:
        time.sleep(0.01)  # (restored once the loader finds its queue empty)
    assert ready["k"] == "loaded"
    assert during < before
    assert during == pytest.approx(min(before, cpu_jit._SWITCH_WHILE_LOADING))
    assert sys.getswitchinterval() == before


@pytest.mark.numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("axis", [2, 0])
def test_softmax_family_matches_composed(dtype, strided, axis):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((6, 5, 37)) * 4).astype(dtype)
    x[0, 0] = -np.inf  # a row of -inf: NaN, as PyTorch
    x[1, 1, 3] = -np.inf
    if strided:
        x = _strided(x)
    for kernel in ("softmax", "log_softmax"):
        got = getattr(BE, kernel)(x, axis)
        want = getattr(COMPOSED, kernel)(BE, x, axis)
        assert got.dtype == dtype and got.flags.c_contiguous
        np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1000, 37), (3, 20000)])
def test_log_softmax_over_several_blocks_matches_pytorch(dtype, shape):
    """Rows cut into blocks of cpu_kernels.BLOCK elements, the last one partial (1000 rows
    of 37), and rows longer than a block (one row a block): every row as PyTorch's."""
    torch = pytest.importorskip("torch")
    from haelixe.backends import cpu_kernels

    rows, n = shape
    assert rows * n > 2 * cpu_kernels.BLOCK and (n > cpu_kernels.BLOCK or
                                                 rows % (cpu_kernels.BLOCK // n))
    x = (np.random.default_rng(3).standard_normal(shape) * 4).astype(dtype)
    x[-1, 5] = -np.inf
    out = np.empty_like(x)
    cpu_kernels.log_softmax_rows(x, out)
    want = torch.log_softmax(torch.from_numpy(x), -1).numpy()
    np.testing.assert_allclose(out, want, **TOL[dtype])


@pytest.mark.numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("weight", [True, False])
def test_rmsnorm_matches_composed(dtype, strided, weight):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 7, 48)).astype(dtype)
    gy = rng.standard_normal((3, 7, 48)).astype(dtype)
    w = rng.standard_normal(48).astype(dtype) if weight else None
    if strided:
        x, gy = _strided(x), _strided(gy)
    y, rstd = BE.rmsnorm(x, w, 1e-6)
    y0, rstd0 = COMPOSED.rmsnorm(BE, x, w, 1e-6)
    np.testing.assert_allclose(y, y0, **TOL[dtype])
    np.testing.assert_allclose(rstd, rstd0, **TOL[dtype])
    dx, dw = BE.rmsnorm_backward(x, w, rstd, gy)
    dx0, dw0 = COMPOSED.rmsnorm_backward(BE, x, w, rstd0, gy)
    np.testing.assert_allclose(dx, dx0, **TOL[dtype])
    if weight:
        np.testing.assert_allclose(dw, dw0, rtol=1e-4 if dtype == np.float32 else 1e-12)
        assert dw.dtype == dtype
    else:
        assert dw is None


@pytest.mark.numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("affine", [True, False])
def test_layernorm_matches_composed(dtype, strided, affine):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((5, 33)) * 3 + 2).astype(dtype)
    gy = rng.standard_normal((5, 33)).astype(dtype)
    w = rng.standard_normal(33).astype(dtype) if affine else None
    b = rng.standard_normal(33).astype(dtype) if affine else None
    if strided:
        x, gy = _strided(x), _strided(gy)
    y, mean, rstd = BE.layernorm(x, w, b, 1e-5)
    y0, mean0, rstd0 = COMPOSED.layernorm(BE, x, w, b, 1e-5)
    for got, want in ((y, y0), (mean, mean0), (rstd, rstd0)):
        np.testing.assert_allclose(got, want, **TOL[dtype])
    dx, dw, db = BE.layernorm_backward(x, w, mean, rstd, gy)
    dx0, dw0, db0 = COMPOSED.layernorm_backward(BE, x, w, mean0, rstd0, gy)
    np.testing.assert_allclose(dx, dx0, rtol=1e-4 if dtype == np.float32 else 1e-11,
                               atol=1e-5 if dtype == np.float32 else 1e-12)
    np.testing.assert_allclose(db, db0, rtol=1e-5 if dtype == np.float32 else 1e-12)
    if affine:
        np.testing.assert_allclose(dw, dw0, rtol=1e-4 if dtype == np.float32 else 1e-11,
                                   atol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(9, 8), (3, 9, 8), (2, 3, 2, 9, 8), (2, 2, 2, 2, 9, 8)])
def test_rope_matches_composed_on_views(dtype, shape):
    rng = np.random.default_rng(5)
    # the attention's layout: a permuted, sliced view of a bigger buffer
    full = rng.standard_normal(shape[:-2] + (3, shape[-2], shape[-1])).astype(dtype)
    x = np.moveaxis(full, -3, 0)[1]
    cos = rng.standard_normal((shape[-2], shape[-1] // 2)).astype(dtype)
    sin = rng.standard_normal((shape[-2], shape[-1] // 2)).astype(dtype)
    for inverse in (False, True):
        got = BE.rope(x, cos, sin, inverse)
        want = COMPOSED.rope(BE, x, cos, sin, inverse)
        assert got.shape == x.shape and got.flags.c_contiguous
        np.testing.assert_allclose(got, want, **TOL[dtype])
    # the inverse undoes the rotation where cos^2 + sin^2 = 1
    ang = rng.uniform(-3, 3, cos.shape)
    c, s = np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)
    back = BE.rope(BE.rope(x, c, s), c, s, inverse=True)
    np.testing.assert_allclose(back, x, rtol=1e-5, atol=1e-5)


@pytest.mark.numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adamw_matches_composed(dtype):
    rng = np.random.default_rng(6)
    n = 1000
    a = [rng.standard_normal(n).astype(dtype) for _ in range(2)] + [
        np.zeros(n, dtype), np.zeros(n, dtype)]
    b = [v.copy() for v in a]
    for step in range(1, 6):
        g = rng.standard_normal(n).astype(dtype)
        a[1][:] = g
        b[1][:] = g
        BE.adamw_step(a[0], a[1], a[2], a[3], 1e-2, 0.9, 0.999, 1e-8, 0.1, step)
        COMPOSED.adamw_step(BE, b[0], b[1], b[2], b[3], 1e-2, 0.9, 0.999, 1e-8, 0.1, step)
    for got, want in zip(a, b):
        np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.numba
def test_adamw_on_bfloat16_runs_in_float32():
    bf = hx.bfloat16.np  # (the backends' bfloat16: resolved here, as by any tensor of it)
    p = np.ones(8, bf)
    g = np.full(8, 0.5, bf)
    m, v = np.zeros(8, bf), np.zeros(8, bf)
    BE.adamw_step(p, g, m, v, 0.1, 0.9, 0.999, 1e-8, 0.0, 1)
    np.testing.assert_allclose(p.astype(np.float32), 0.9, rtol=1e-2)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_ops_match_pytorch(dtype):
    """RMSNorm, LayerNorm, softmax, log-softmax and RoPE through autograd, forward and
    backward, against PyTorch on a strided input."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    a = rng.standard_normal((4, 6, 32)).astype(dtype)
    w = rng.standard_normal(32).astype(dtype)
    b = rng.standard_normal(32).astype(dtype)
    gy = rng.standard_normal((6, 4, 32)).astype(dtype)
    ang = rng.uniform(-3, 3, (4, 16))
    cos, sin = np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)

    def run(lib, F):
        x = lib.tensor(a, requires_grad=True)
        wt, bt = lib.tensor(w, requires_grad=True), lib.tensor(b, requires_grad=True)
        xt = x.transpose(0, 1)  # strided
        rms = F.rms_norm(xt, (32,), wt, eps=1e-6)
        if lib is hx:
            rope = F.apply_rope(xt, hx.tensor(cos), hx.tensor(sin))
        else:
            c, s = torch.tensor(cos), torch.tensor(sin)
            rope = torch.cat([xt[..., :16] * c - xt[..., 16:] * s,
                              xt[..., 16:] * c + xt[..., :16] * s], -1)
        outs = [rms, F.layer_norm(xt, (32,), wt, bt, 1e-5), xt.softmax(-1),
                xt.log_softmax(0), rope]
        total = sum((o * lib.tensor(gy)).sum() for o in outs)
        total.backward()
        return [o.detach().numpy() for o in outs] + [t.grad.numpy() for t in (x, wt, bt)]

    from torch.nn import functional as TF

    from haelixe.nn import functional as HF

    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-11)
    for got, want in zip(run(hx, HF), run(torch, TF)):
        np.testing.assert_allclose(got, want, **tol)


# -- thread policy ---------------------------------------------------------------------------
@pytest.fixture
def policy():
    p = threads._POLICY
    saved = (p.cap, p.free, p.next_sample)
    yield p
    p.cap, p.free, p.next_sample = saved


def test_set_and_get_num_threads(policy):
    hx.set_num_threads(3)
    assert hx.get_num_threads() == 3
    hx.set_num_threads(1)
    assert hx.get_num_threads() == 1
    for bad in (0, -2, 1.5, True, "2"):
        with pytest.raises(ValueError, match="set_num_threads"):
            hx.set_num_threads(bad)
    assert hx.get_num_threads() == 1


def test_threads_chosen_by_size_cap_and_idle_cores(policy):
    policy.cap = 4
    policy.free, policy.next_sample = 4, float("inf")  # as if the machine were idle
    unit = threads.MIN_WORK_PER_THREAD
    assert threads.threads_for(64 * 64 * 64) == 1  # small: one thread
    assert threads.threads_for(2 * unit) == 2
    assert threads.threads_for(100 * unit) == 4  # capped by set_num_threads
    policy.free = 1  # neighbours use the other cores
    assert threads.threads_for(100 * unit) == 1
    policy.free, policy.cap = 4, 1
    assert threads.threads_for(100 * unit) == 1


def _numpy_blas_threads():
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info()
            if i["user_api"] == "blas" and "numpy" in i["filepath"]]


def test_blas_runs_on_the_chosen_threads_and_returns_to_one(policy):
    seen, actual = [], []

    def probe():
        seen.append(policy.current)
        actual.append(_numpy_blas_threads())  # what BLAS itself reports, via its setter
        return "done"

    policy.cap, policy.free, policy.next_sample = 2, 2, float("inf")
    assert threads.blas(probe, work=10 * threads.MIN_WORK_PER_THREAD) == "done"
    assert threads.blas(probe, work=10) == "done"
    assert seen == [2, 1] and policy.current == 1
    assert all(n == 2 for n in actual[0]) and all(n == 1 for n in actual[1])
    assert all(n == 1 for n in _numpy_blas_threads())


def test_idle_cores_measured_from_proc_stat(policy):
    policy.last, policy.cap = None, 2
    policy.free, policy.next_sample = None, 0.0  # a fresh process: the load's guess first
    assert 1 <= policy.free_cores() <= 2
    policy._sample()
    assert 1 <= policy.free <= 2


def test_matmul_results_do_not_depend_on_threads(policy):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((256, 512), dtype=np.float32)
    b = rng.standard_normal((512, 128), dtype=np.float32)
    policy.cap, policy.free, policy.next_sample = 2, 2, float("inf")
    two = BE.matmul(a, b)
    policy.cap = 1
    one = BE.matmul(a, b)
    np.testing.assert_allclose(one, two, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape,kernel,stride,dilation,permute", [
    ((2, 3, 7, 6), (3, 3), (1, 1), (1, 1), False),
    ((2, 3, 9, 8), (3, 2), (2, 1), (1, 2), True),  # windows of a (C, N, ...) layout
    ((3, 2, 11), (4,), (2,), (3,), False),
    ((2, 5, 6, 6), (3, 3), (1, 1), (1, 1), "channels_last"),  # (the channels innermost)
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_sum_windows_equals_the_strided_adds(shape, kernel, stride, dilation,
                                                      permute, dtype, monkeypatch):
    from haelixe.ops.windows import sum_windows, window_geometry

    if not hasattr(type(BE), "sum_windows_into") or \
            type(BE).sum_windows_into is base.Backend.sum_windows_into:
        pytest.skip("no compiled col2im on this CPU backend (numba missing)")
    out = window_geometry("test", shape[2:], kernel, stride, dilation)
    cols_shape = shape[:2] + kernel + out
    rng = np.random.default_rng(0)
    cols = hx.tensor(rng.standard_normal(cols_shape).astype(dtype))
    if permute is True:  # the same values, lead dims swapped in memory
        cols = hx.tensor(np.ascontiguousarray(cols.numpy().swapaxes(0, 1))).transpose(0, 1)
    if permute == "channels_last":  # (N, *out, *kernel, C) in memory, as a conv's gradient
        order = (0, 4, 5, 2, 3, 1)
        cols = hx.tensor(np.ascontiguousarray(cols.numpy().transpose(order))).permute(
            tuple(np.argsort(order)))
    assert BE.sum_windows_into(np.zeros(shape, dtype), cols._data, kernel, stride, dilation)
    got = sum_windows(cols, shape, kernel, stride, dilation).numpy()
    monkeypatch.setattr(BE, "sum_windows_into", lambda *a: False)
    want = sum_windows(cols, shape, kernel, stride, dilation).numpy()
    assert got.dtype == want.dtype == dtype and not np.all(got == 0)
    np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.parametrize("shape,kw", [
    ((2, 5, 7, 6), {"padding": 1}),
    ((3, 8, 9, 8), {"stride": (2, 1), "padding": (2, 1), "dilation": (1, 2)}),
    ((2, 6, 5, 5), {"padding": "same", "dilation": 2}),
    ((2, 3, 11), {"stride": 2, "padding": 3}),  # (1-D: a 1-tall image)
])
@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_im2col_equals_the_padded_copy(shape, kw, dtype, channels_last,
                                                monkeypatch):
    """conv's columns (the channels innermost from a channels-last image, the positions
    from a contiguous one), padded inside the compiled copy, against the composed
    form's padded copy and windows view: forward and gradients (the weight's reads
    the same columns)."""
    import haelixe.nn.functional as F

    if type(BE).windows_into is base.Backend.windows_into:
        pytest.skip("no compiled im2col on this CPU backend (numba missing)")
    d = len(shape) - 2
    conv = F.conv2d if d == 2 else F.conv1d
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(dtype)
    w = hx.tensor(rng.standard_normal((4, shape[1]) + (3,) * d).astype(dtype),
                  requires_grad=True)
    calls = []
    compiled = type(BE).windows_into
    runs = []
    for kernel in (True, False):
        monkeypatch.setattr(BE, "windows_into", (lambda *args: calls.append(
            compiled(BE, *args)) or calls[-1]) if kernel else (lambda *args: False))
        if channels_last:
            x = hx.tensor(np.ascontiguousarray(np.moveaxis(a, 1, -1)))
            x = x.permute(0, d + 1, *range(1, d + 1)).requires_grad_()
        else:
            x = hx.tensor(a, requires_grad=True)
        w.grad = None
        y = conv(x, w, **kw)
        g = np.random.default_rng(1).standard_normal(y.shape).astype(dtype)
        y.backward(hx.tensor(g))
        runs.append((y.detach().numpy(), x.grad.numpy(), w.grad.numpy()))
    assert any(calls)  # (the compiled copy ran)
    for got, want in zip(*runs):
        assert got.dtype == want.dtype == dtype and np.count_nonzero(got)
        np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.parametrize("shape,kw,channels_last", [
    ((2, 3, 7, 6), {"kernel_size": 2}, True),
    ((2, 3, 9, 8), {"kernel_size": (3, 2), "stride": (2, 1), "padding": 1,
                    "dilation": (1, 2)}, False),  # overlapping windows
    ((3, 2, 11), {"kernel_size": 3, "stride": 2, "ceil_mode": True}, False),
    ((2, 5, 9, 8), {"kernel_size": (3, 2), "stride": (2, 1), "padding": 1,
                    "dilation": (1, 2)}, True),  # (the channels-last kernel, overlapping)
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_max_pool_equals_the_composed_one(shape, kw, channels_last, dtype,
                                                   monkeypatch):
    import haelixe.nn.functional as F

    if type(BE).window_max is base.Backend.window_max:
        pytest.skip("no compiled max-pool on this CPU backend (numba missing)")
    a = np.round(np.random.default_rng(0).standard_normal(shape), 1).astype(dtype)  # ties
    a.flat[[3, 17]] = np.nan
    pool = F.max_pool2d if len(shape) == 4 else F.max_pool1d
    runs = []
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(BE, "window_max", lambda *a: None)
            monkeypatch.setattr(BE, "route_max_into", lambda *a: False)
        x = hx.tensor(np.ascontiguousarray(np.moveaxis(a, 1, -1)) if channels_last else a)
        x = (x.permute(0, 3, 1, 2) if channels_last else x).requires_grad_()
        y = pool(x, **kw)
        g = hx.tensor(np.random.default_rng(1).standard_normal(y.shape).astype(dtype))
        y.backward(g)
        runs.append((y.detach().numpy(), x.grad.numpy()))
    (y, gx), (want_y, want_gx) = runs
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_allclose(gx, want_gx, **TOL[dtype])  # (overlaps: sums reordered)
    assert np.isnan(y).any() and np.count_nonzero(gx)


BATCHNORM_CASES = [(np.float32, True, True), (np.float32, False, False),
                   (np.float64, True, False), (np.float64, False, True)]


@pytest.mark.numba
@pytest.mark.parametrize("dtype,channels_last,weight", BATCHNORM_CASES)
def test_batchnorm_backward_matches_composed(dtype, channels_last, weight):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((6, 4, 3, 5)).astype(dtype)  # (N, H, W, C) in memory
    x = a.transpose(0, 3, 1, 2)
    x = x if channels_last else np.ascontiguousarray(x)
    g = rng.standard_normal(x.shape).astype(dtype)
    axes = (0, 2, 3)
    mean, var = BE.moments(x, axes)
    rstd = 1 / np.sqrt(var + dtype(1e-5))
    w = rng.standard_normal((1, 5, 1, 1)).astype(dtype) if weight else None
    got = BE.normalize_backward(x, w, mean, rstd, g, axes, axes)
    want = COMPOSED.normalize_backward(BE, x, w, mean, rstd, g, axes, axes)
    for a_, b_ in zip(got, want):
        if b_ is None:
            assert a_ is None
            continue
        assert a_.shape == b_.shape and a_.dtype == b_.dtype
        np.testing.assert_allclose(a_, b_, **TOL[dtype])


@pytest.mark.numba
@pytest.mark.parametrize("dtype,channels_last,weight", BATCHNORM_CASES)
def test_batchnorm_forward_matches_composed(dtype, channels_last, weight):
    rng = np.random.default_rng(8)
    a = (rng.standard_normal((6, 4, 3, 5)) * 3 + 100).astype(dtype)  # (a large mean)
    x = a.transpose(0, 3, 1, 2)
    x = x if channels_last else np.ascontiguousarray(x)
    axes = (0, 2, 3)
    got, want = BE.moments(x, axes), COMPOSED.moments(BE, x, axes)
    for a_, b_ in zip(got, want):
        assert a_.shape == b_.shape == (1, 5, 1, 1) and a_.dtype == b_.dtype
        np.testing.assert_allclose(a_, b_, **TOL[dtype])
    mean, var = want
    w = rng.standard_normal((1, 5, 1, 1)).astype(dtype) if weight else None
    b = rng.standard_normal((1, 5, 1, 1)).astype(dtype)
    (y, rstd), (want_y, want_rstd) = (BE.normalize(x, w, b, mean, var, 1e-5),
                                      COMPOSED.normalize(BE, x, w, b, mean, var, 1e-5))
    assert y.strides == want_y.strides  # (laid out as x)
    np.testing.assert_allclose(y, want_y, **TOL[dtype])
    np.testing.assert_allclose(rstd, want_rstd, **TOL[dtype])
