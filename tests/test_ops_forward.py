"""Every op's forward equals numpy, on contiguous, transposed, step-sliced, broadcast
(zero stride) and flipped (negative stride) inputs: the ``make`` fixture builds the
same logical values through each of those layouts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from layouts import LAYOUTS, assert_close, rng

import haelixe as hx

_erf = np.vectorize(math.erf)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def np_gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def data(shape=(3, 4), seed=0, positive=False, dtype=np.float32):
    a = rng(seed).standard_normal(shape)
    if positive:
        a = np.abs(a) + 0.5
    return a.astype(dtype)


# name: (haelixe fn, numpy fn, positive-only domain)
UNARY = {
    "neg": (lambda t: -t, np.negative, False),
    "abs": (lambda t: abs(t), np.abs, False),
    "exp": (lambda t: t.exp(), np.exp, False),
    "log": (lambda t: t.log(), np.log, True),
    "sqrt": (lambda t: t.sqrt(), np.sqrt, True),
    "rsqrt": (lambda t: t.rsqrt(), lambda a: 1 / np.sqrt(a), True),
    "tanh": (lambda t: t.tanh(), np.tanh, False),
    "sigmoid": (lambda t: t.sigmoid(), np_sigmoid, False),
    "relu": (lambda t: t.relu(), lambda a: np.maximum(a, 0), False),
    "gelu": (lambda t: t.gelu(), np_gelu, False),
    "gelu_none": (lambda t: t.gelu(approximate="none"), np_gelu, False),
    "gelu_tanh": (lambda t: t.gelu(approximate="tanh"), np_gelu_tanh, False),
    "silu": (lambda t: t.silu(), lambda a: a * np_sigmoid(a), False),
    "sin": (lambda t: t.sin(), np.sin, False),
    "cos": (lambda t: t.cos(), np.cos, False),
    "clamp": (lambda t: t.clamp(-0.5, 0.7), lambda a: np.clip(a, -0.5, 0.7), False),
    "clamp_min": (lambda t: t.clamp(min=0.1), lambda a: np.maximum(a, 0.1), False),
    "clamp_max": (lambda t: t.clamp(max=0.1), lambda a: np.minimum(a, 0.1), False),
    "hx_functions": (lambda t: hx.tanh(hx.exp(t)) + hx.sigmoid(t) + hx.relu(t),
                     lambda a: np.tanh(np.exp(a)) + np_sigmoid(a) + np.maximum(a, 0), False),
    "add_scalar": (lambda t: t + 2.5, lambda a: a + 2.5, False),
    "radd_scalar": (lambda t: 2.5 + t, lambda a: 2.5 + a, False),
    "sub_scalar": (lambda t: t - 1.5, lambda a: a - 1.5, False),
    "rsub_scalar": (lambda t: 1.5 - t, lambda a: 1.5 - a, False),
    "mul_scalar": (lambda t: t * -3.0, lambda a: a * -3.0, False),
    "div_scalar": (lambda t: t / 4.0, lambda a: a / 4.0, False),
    "rdiv_scalar": (lambda t: 2.0 / t, lambda a: 2.0 / a, True),
    "pow_scalar": (lambda t: t ** 3, lambda a: a ** 3, False),
    "pow_square": (lambda t: t ** 2, lambda a: a ** 2, False),
    "pow_half": (lambda t: t ** 0.5, lambda a: a ** 0.5, True),
    "rpow_scalar": (lambda t: 2.0 ** t, lambda a: 2.0 ** a, False),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(make, name):
    fn, ref, positive = UNARY[name]
    t, a = make(data((2, 3, 4), positive=positive))
    assert_close(fn(t), ref(a.astype(np.float64)), rtol=2e-5, atol=1e-6)


BINARY = {
    "add": (lambda x, y: x + y, np.add),
    "sub": (lambda x, y: x - y, np.subtract),
    "mul": (lambda x, y: x * y, np.multiply),
    "div": (lambda x, y: x / y, np.divide),
    "pow": (lambda x, y: abs(x) ** y, lambda a, b: np.abs(a) ** b),
    "maximum": (lambda x, y: x.maximum(y), np.maximum),
    "minimum": (lambda x, y: hx.minimum(x, y), np.minimum),
    "eq": (lambda x, y: x == y, np.equal),
    "ne": (lambda x, y: x != y, np.not_equal),
    "lt": (lambda x, y: x < y, np.less),
    "le": (lambda x, y: x <= y, np.less_equal),
    "gt": (lambda x, y: x > y, np.greater),
    "ge": (lambda x, y: x >= y, np.greater_equal),
    "where": (lambda x, y: hx.where(x > y, x, y), lambda a, b: np.where(a > b, a, b)),
    "where_method": (lambda x, y: x.where(x < 0, y), lambda a, b: np.where(a < 0, a, b)),
    "masked_fill": (lambda x, y: x.masked_fill(y > 0, -7.0),
                    lambda a, b: np.where(b > 0, -7.0, a)),
    "add_alpha": (lambda x, y: x.add(y, alpha=2.0), lambda a, b: a + 2 * b),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_same_shape(make, name):
    fn, ref = BINARY[name]
    x, a = make(data((3, 4), seed=1))
    y, b = make(data((3, 4), seed=2) + 0.05)
    b = np.where(np.abs(b) < 0.1, 0.5, b) if name == "div" else b
    if name == "div":
        y = hx.from_numpy(b.astype(np.float32)).T.contiguous().T  # a transposed divisor
    out = fn(x, y)
    expected = ref(a.astype(np.float64), b.astype(np.float64))
    if expected.dtype == np.bool_:
        assert out.dtype is hx.bool
        np.testing.assert_array_equal(out.numpy(), expected)
    else:
        assert_close(out, expected, rtol=2e-5)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "lt", "where"])
@pytest.mark.parametrize("sa, sb", [((3, 1), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)),
                                    ((1, 4), (3, 1))])
def test_binary_broadcasting(make, name, sa, sb):
    fn, ref = BINARY[name]
    x, a = make(data(sa, seed=3))
    y, b = LAYOUTS["flipped"](data(sb, seed=4, positive=name == "div"))
    out = fn(x, y)
    expected = ref(a.astype(np.float64), b.astype(np.float64))
    assert out.shape == expected.shape
    if expected.dtype == np.bool_:
        np.testing.assert_array_equal(out.numpy(), expected)
    else:
        assert_close(out, expected, rtol=2e-5)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64])
def test_elementwise_other_dtypes(make, dtype):
    x, a = make((rng(5).integers(1, 9, (3, 4))).astype(dtype))
    y, b = make((rng(6).integers(1, 9, (3, 4))).astype(dtype))
    np.testing.assert_array_equal((x + y).numpy(), a + b)
    np.testing.assert_array_equal((x * y - y).numpy(), a * b - b)
    np.testing.assert_array_equal((-x).numpy(), -a)
    np.testing.assert_array_equal(abs(x - 5).numpy(), np.abs(a - 5))
    np.testing.assert_allclose((x / y).numpy(), a / b, rtol=1e-6)
    assert (x / y).dtype.is_floating_point


def test_bfloat16_ops_stay_bfloat16(make):
    x, a = make(data((3, 4)))
    xb = x.to(hx.bfloat16)
    outs = (xb * 2.0, xb + xb, xb.exp(), xb.sum(1), xb.softmax(-1), xb @ xb.T, xb.gelu(),
            xb.gelu(approximate="tanh"), abs(xb).rsqrt(), xb.silu(), xb.mean(0), xb / 3,
            hx.where(xb > 0, xb, 0.0), xb.clamp(-0.1, 0.1), xb.var(1))
    for out in outs:
        assert out.dtype is hx.bfloat16
    assert (xb.half() @ xb.half().T).dtype is hx.float16
    ref = a.astype(np.float64)
    assert_close((xb + xb).float(), 2 * ref, rtol=1e-2, atol=1e-2)
    assert_close(xb.exp().float(), np.exp(ref), rtol=2e-2, atol=1e-2)


def test_bfloat16_reductions_accumulate_in_float32():
    # summed in bfloat16 itself, 256 + 1 rounds back to 256 and the sum stalls there
    assert hx.ones(1000, dtype=hx.bfloat16).sum().item() == 1000.0
    assert hx.ones(10000, dtype=hx.bfloat16).sum().item() == 9984.0  # 10000 in bfloat16
    assert hx.ones(4096, dtype=hx.float16).mean().item() == 1.0
    a = rng(4).standard_normal((4, 4096)).astype(np.float32)
    x = hx.from_numpy(a).bfloat16()
    ref = x.float().numpy().astype(np.float64)
    assert_close(x.var(1).float(), ref.var(1, ddof=1), rtol=1e-2)
    assert_close(x.softmax(1).float().sum(1), np.ones(4), rtol=1e-3)
    assert_close(x.log_softmax(1).float().exp().sum(1), np.ones(4), rtol=2e-2)


# -- reductions ----------------------------------------------------------------------------

REDUCE_DIMS = [None, 0, 1, -1, (0, 2), (2, 0, 1)]


@pytest.mark.parametrize("dim", REDUCE_DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["sum", "mean", "var", "amax", "amin"])
def test_reduce(make, op, dim, keepdim):
    t, a = make(data((2, 3, 4), seed=7))
    a = a.astype(np.float64)
    axis = dim if dim is None or isinstance(dim, int) else tuple(dim)
    if op == "var":
        expected = np.var(a, axis=axis, keepdims=keepdim, ddof=1)
    else:
        expected = getattr(np, {"amax": "max", "amin": "min"}.get(op, op))(
            a, axis=axis, keepdims=keepdim)
    out = getattr(t, op)(dim, keepdim=keepdim)
    assert_close(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_max_min_without_dim_and_with_dim(make, kind):
    t, a = make(data((3, 4), seed=8))
    full = getattr(t, kind)()
    assert full.shape == () and full.item() == pytest.approx(float(getattr(a, kind)()))
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            values, indices = getattr(t, kind)(dim, keepdim=keepdim)
            ref_idx = (np.argmax if kind == "max" else np.argmin)(a, axis=dim,
                                                                  keepdims=keepdim)
            np.testing.assert_array_equal(indices.numpy(), ref_idx)
            assert_close(values, getattr(np, kind)(a, axis=dim, keepdims=keepdim))
            assert indices.dtype is hx.int64


def test_var_correction_and_std(make):
    t, a = make(data((3, 5), seed=9))
    assert_close(t.var(1, correction=0), np.var(a.astype(np.float64), axis=1), rtol=1e-5)
    assert_close(t.std(0), np.std(a.astype(np.float64), axis=0, ddof=1), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7,), (3, 1), (4, 32, 64), (2, 3, 1000), (2, 70000)])
def test_last_dim_sums_against_float64(shape, dtype):
    """Sums and means over the last dim of a contiguous float tensor (one matrix-vector
    product with ones on the CPU; rows past its ones buffer take numpy's reduction):
    values to float accuracy, shapes with and without keepdim, NaN and inf carried."""
    a = rng(11).standard_normal(shape).astype(dtype)
    a.reshape(-1)[0] = np.nan
    a.reshape(-1)[-1] = np.inf
    t = hx.from_numpy(a)
    want = a.astype(np.float64).sum(-1, keepdims=True)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for keepdim in (False, True):
        got = t.sum(-1, keepdim=keepdim).numpy()
        assert got.dtype == dtype and got.shape == (want.shape if keepdim else want.shape[:-1])
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=tol, atol=tol)
        mean = t.mean(-1, keepdim=keepdim).numpy().reshape(want.shape)
        np.testing.assert_allclose(mean, want / shape[-1], rtol=tol, atol=tol)


def test_sum_of_bool_and_int(make):
    t, a = make(rng(1).integers(-3, 4, (3, 4)).astype(np.int64))
    assert (t.sum(1)).tolist() == a.sum(1).tolist()
    assert (t > 0).sum().item() == int((a > 0).sum())


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_log_softmax(make, dim):
    t, a = make(data((2, 3, 4), seed=10) * 3)
    a = a.astype(np.float64)
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    sm = e / e.sum(axis=dim, keepdims=True)
    assert_close(t.softmax(dim), sm, rtol=1e-5)
    assert_close(hx.log_softmax(t, dim), np.log(sm), rtol=1e-5, atol=1e-5)


def test_softmax_is_stable_for_large_inputs():
    t = hx.tensor([[1000.0, 1000.0], [-1000.0, 0.0]])
    assert_close(t.softmax(-1), [[0.5, 0.5], [0.0, 1.0]])
    assert np.isfinite(t.log_softmax(-1).numpy()).all()


# -- matmul --------------------------------------------------------------------------------

@pytest.mark.parametrize("sa, sb", [
    ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
    ((1, 3, 4), (2, 4, 3)),
])
def test_matmul(make, sa, sb):
    x, a = make(data(sa, seed=11))
    y, b = make(data(sb, seed=12))
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert_close(x @ y, expected, rtol=1e-5, atol=1e-5)
    assert_close(hx.matmul(x, y), expected, rtol=1e-5, atol=1e-5)


def test_matmul_of_transposed_views():
    a = data((5, 3), seed=13)
    b = data((4, 3), seed=14)
    x, y = hx.from_numpy(a), hx.from_numpy(b)
    assert_close(x.T @ x, a.T @ a, rtol=1e-5)
    assert_close(x @ y.T, a @ b.T, rtol=1e-5)
    assert_close(y.mT.T @ x.mT, b @ a.T, rtol=1e-5)
    batch = hx.from_numpy(data((2, 4, 3), seed=15))
    assert_close(batch.mT @ batch, np.swapaxes(batch.numpy(), 1, 2) @ batch.numpy(),
                 rtol=1e-5)


# -- joining, selection, conversion --------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat_and_stack(make, dim):
    x, a = make(data((3, 4), seed=16))
    y, b = make(data((3, 4), seed=17))
    assert_close(hx.cat([x, y, x], dim), np.concatenate([a, b, a], dim))
    assert_close(hx.stack([x, y], dim), np.stack([a, b], dim))


def test_cat_mixed_sizes_and_dtypes():
    x = hx.ones(2, 3)
    y = hx.zeros(2, 1, dtype=hx.float64)
    out = hx.cat([x, y], 1)
    assert out.dtype is hx.float64 and out.shape == (2, 4)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(make, dim):
    x, a = make(data((3, 4), seed=18))
    n = a.shape[dim]
    index_np = rng(19).integers(0, n, (3, 4))
    idx, index_np = make(index_np.astype(np.int64))
    expected = np.take_along_axis(a, index_np, axis=dim)
    assert_close(x.gather(dim, idx), expected)
    assert_close(hx.gather(x, dim, idx), expected)


def test_gather_with_a_smaller_index_follows_pytorch():
    x = hx.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    idx = hx.tensor([[3, 0]])  # (1, 2): smaller than the input in both dims
    assert x.gather(1, idx).tolist() == [[3.0, 0.0]]
    assert x.gather(0, hx.tensor([[2, 0]])).tolist() == [[8.0, 1.0]]


@pytest.mark.parametrize("target", [hx.float64, hx.bfloat16, hx.int64, hx.int32, hx.bool,
                                    hx.float16])
def test_to_dtype(make, target):
    t, a = make(data((3, 4), seed=20) * 4)
    out = t.to(target)
    assert out.dtype is target and out.shape == a.shape
    np.testing.assert_array_equal(out.numpy(), a.astype(target.np))


INDEX_KEYS = [
    1, -1, (0, 2), (slice(None), 1), (slice(None, None, -1),), (slice(2, 0, -1), slice(1, None, 2)),
    (None, Ellipsis, 0), (Ellipsis, None), (Ellipsis, slice(None, None, -2)),
    ([0, 2, 2],), (slice(None), [3, 0, 3, 1]), ([[0, 1], [2, 2]], [1, 3]),
    (1, [0, 0, 3]), (np.array([True, False, True]),), (slice(None), np.int64(2)),
    (Ellipsis, [1, 1]),
]


@pytest.mark.parametrize("key", INDEX_KEYS, ids=[repr(k) for k in INDEX_KEYS])
def test_indexing(make, key):
    t, a = make(data((3, 4), seed=21))
    expected = a[key]
    out = t[key]
    assert_close(out, expected)


def test_indexing_with_index_tensors():
    t = hx.from_numpy(np.arange(12.0).reshape(3, 4))
    idx = hx.tensor([2, 0])
    assert t[idx].tolist() == [[8.0, 9.0, 10.0, 11.0], [0.0, 1.0, 2.0, 3.0]]
    assert t[hx.tensor(1), 2].item() == 6.0
    mask = t > 6
    np.testing.assert_array_equal(t[mask].numpy(), np.arange(7.0, 12.0))


def test_clone_and_contiguous_values(make):
    t, a = make(data((3, 4), seed=22))
    c = t.clone()
    assert c.storage is not t.storage and c.is_contiguous()
    np.testing.assert_array_equal(c.numpy(), a)
    np.testing.assert_array_equal(t.contiguous().numpy(), a)


def test_integer_clamp_with_float_bounds_promotes():
    assert hx.arange(5).clamp(0.5, 2.5).tolist() == [0.5, 1.0, 2.0, 2.5, 2.5]
    assert hx.arange(5).clamp(1, 3).dtype is hx.int64


def test_bool_index_is_a_mask_not_one():
    a = np.arange(6.0).reshape(2, 3)
    t = hx.from_numpy(a)
    assert t[True].shape == a[True].shape == (1, 2, 3)
    assert t[False].shape == (0, 2, 3)
    np.testing.assert_array_equal(t[True, 1].numpy(), a[True, 1])


def test_module_level_functions():
    x = hx.from_numpy(data((3, 4), seed=23))
    assert hx.allclose(hx.exp(hx.log(abs(x) + 1.0)), abs(x) + 1.0)
    assert_close(hx.softmax(x, 0), x.softmax(0).numpy())
    assert_close(hx.clamp(x, -0.1, 0.1), np.clip(x.numpy(), -0.1, 0.1))
    assert_close(hx.transpose(x, 0, 1), x.numpy().T)
    assert_close(hx.flip(x, (0,)), x.numpy()[::-1])
