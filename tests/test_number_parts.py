"""gcd and lcm (integer entries), ldexp and frexp (a float's parts), float_power, and
PyTorch's other names fix (trunc) and true_divide (div): against PyTorch on the cases
the op registry's differential suite does not reach (wrap-around, exactness at the
ends of the exponent range, special values, dtype pairs, keywords, in-place forms,
float64 gradients), and on the GPU against the CPU."""

from __future__ import annotations

import math

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")


def both(values, dtype):
    """The values as a Haelixe tensor and a PyTorch tensor of ``dtype``."""
    return hx.tensor(values, dtype=getattr(hx, dtype)), \
        torch.tensor(values, dtype=getattr(torch, dtype))


def same(got, want, rtol=0.0):
    assert got.dtype.name == str(want.dtype).replace("torch.", ""), (got.dtype, want.dtype)
    assert got.shape == tuple(want.shape)
    g = got.detach().cpu()
    g = g.float().numpy() if g.dtype.name == "bfloat16" else g.numpy()
    w = want.detach()
    w = w.float().numpy() if w.dtype == torch.bfloat16 else w.numpy()
    if rtol:
        np.testing.assert_allclose(g, w, rtol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)


# -- gcd and lcm ---------------------------------------------------------------------------
A = [0, 4, -6, 9, 0, -12, 7, 1, -1, 36]
B = [0, 6, 4, -3, 5, -18, 0, 1, 35, -48]


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
def test_gcd_and_lcm_match_pytorch(dtype):
    a, b = (np.abs(A) if dtype == "uint8" else A), (np.abs(B) if dtype == "uint8" else B)
    (x, tx), (y, ty) = both(a, dtype), both(b, dtype)
    for name in ("gcd", "lcm"):
        same(getattr(hx, name)(x, y), getattr(torch, name)(tx, ty))
        same(getattr(x, name)(other=y), getattr(tx, name)(ty))
        z = x.clone()
        assert getattr(z, name + "_")(y) is z
        same(z, getattr(torch, name)(tx, ty))


@pytest.mark.parametrize("dtype,a,b", [
    ("int8", 100, 99), ("int8", -100, 99), ("int16", 1000, 999), ("uint8", 100, 99),
    ("int32", 100000, 99999), ("int32", 65537, 65535), ("int64", 2 ** 40 + 1, 2 ** 40 - 1),
    ("int32", -2 ** 31, 0), ("int64", -2 ** 63, 0), ("int32", -2 ** 31, 6),
    ("int32", 12, -2 ** 31), ("int64", -2 ** 63, 6), ("int8", -128, 6), ("int16", -2 ** 15, 12),
    ("int32", -2 ** 31, -2 ** 31)])
def test_gcd_and_lcm_wrap_as_pytorchs_at_the_ends_of_the_range(dtype, a, b):
    (x, tx), (y, ty) = both([a], dtype), both([b], dtype)
    same(hx.gcd(x, y), torch.gcd(tx, ty))
    same(hx.lcm(x, y), torch.lcm(tx, ty))


def test_gcd_and_lcm_promote_broadcast_and_take_views():
    for da, db in (("int32", "int64"), ("uint8", "int8"), ("int16", "uint8")):
        (x, tx), (y, ty) = both([[12], [-8]], da), both([18, 4, 0], db)
        same(hx.gcd(x, y), torch.gcd(tx, ty))
        same(hx.lcm(x, y), torch.lcm(tx, ty))
    m = np.arange(-12, 12).reshape(4, 6)
    same(hx.gcd(hx.tensor(m).t()[::2], hx.tensor(6)),
         torch.gcd(torch.tensor(m).t()[::2], torch.tensor(6)))
    same(hx.lcm(hx.tensor(5), hx.tensor(-15)), torch.lcm(torch.tensor(5), torch.tensor(-15)))
    same(hx.gcd(hx.zeros(0, 3, dtype=hx.int64), hx.tensor([1, 2, 3])),
         torch.gcd(torch.zeros(0, 3, dtype=torch.int64), torch.tensor([1, 2, 3])))


@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_and_lcm_refuse_floats_and_bools(name):
    with pytest.raises(RuntimeError, match=f"{name}: needs integer or bool tensors, got float32"):
        getattr(hx, name)(hx.tensor([1.0]), hx.tensor([2.0]))
    with pytest.raises(TypeError, match=f"{name}: not supported on bool tensors"):
        getattr(hx, name)(hx.tensor([True]), hx.tensor([True]))
    for a in (torch.tensor([1.0]), torch.tensor([True])):
        with pytest.raises(NotImplementedError):
            getattr(torch, name)(a, a)
    with pytest.raises(RuntimeError, match=f"{name}: needs integer or bool tensors"):
        getattr(hx.tensor([4], dtype=hx.int32), name + "_")(hx.tensor([6.0]))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_gcd_and_lcm_on_the_gpu_equal_the_cpu(be, dtype):
    r = np.random.default_rng(0)
    a = np.concatenate([A, r.integers(-50000, 50000, 40), [-2 ** 31, 100000, 65537, -2 ** 31,
                                                            12]])
    b = np.concatenate([B, r.integers(-50000, 50000, 40), [0, 99999, 65535, 6, -2 ** 31]])
    for name in ("gcd", "lcm"):
        cpu = getattr(hx, name)(hx.tensor(a, dtype=getattr(hx, dtype)),
                                hx.tensor(b, dtype=getattr(hx, dtype)))
        gpu = getattr(hx, name)(hx.tensor(a, dtype=getattr(hx, dtype), device="gpu"),
                                hx.tensor(b, dtype=getattr(hx, dtype), device="gpu"))
        assert gpu.device.type == "gpu" and gpu.dtype is cpu.dtype
        np.testing.assert_array_equal(gpu.cpu().numpy(), cpu.numpy(), err_msg=name)


# -- ldexp ---------------------------------------------------------------------------------
@pytest.mark.parametrize("da,db", [
    ("float32", "int64"), ("float64", "int32"), ("float16", "int64"), ("bfloat16", "int64"),
    ("int32", "int64"), ("bool", "int64"), ("uint8", "int16"), ("float32", "float32"),
    ("float32", "float64"), ("float16", "float16"), ("int32", "float16"),
    ("bfloat16", "float16"), ("float64", "float32"), ("bool", "bool")])
def test_ldexp_matches_pytorch_on_dtype_pairs(da, db):
    a = np.array([1.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    e = np.array([1, 0, -3, 4, 2, 7]) if db != "bool" else np.array([1, 0, 1, 1, 0, 1])
    if db.startswith("float"):
        e = e + np.array([0.0, 0.5, 0.25, 0.0, -0.5, 0.0])
    (x, tx), (y, ty) = both(a, da), both(e, db)
    # (a float32 exponent beside a float64 input: PyTorch rounds 2 ** other to float32
    # first, Haelixe computes it in float64, the result's dtype: 3e-8 apart)
    same(hx.ldexp(x, y), torch.ldexp(tx, ty), rtol=1e-7 if (da, db) == ("float64", "float32")
         else 0.0)


def test_ldexp_of_an_integer_exponent_is_exact_where_the_result_is_representable():
    cases = [("float32", 2.0 ** -140, 200), ("float16", 2.0 ** -10, 20),
             ("float64", 2.0 ** -1070, 2000), ("float32", 1.5, -140), ("float32", 3.0, 300),
             ("float32", 0.0, 1000), ("float32", math.inf, -500), ("float32", math.nan, 3)]
    for dtype, a, e in cases:
        x, tx = both([a], dtype)
        same(hx.ldexp(x, hx.tensor([e])), torch.ldexp(tx, torch.tensor([e])))
    same(hx.ldexp(hx.ones(2, 1), hx.tensor([1, 2, 3])),
         torch.ldexp(torch.ones(2, 1), torch.tensor([1, 2, 3])))
    same(hx.ldexp(hx.tensor(3.0), hx.tensor([2, -1])),
         torch.ldexp(torch.tensor(3.0), torch.tensor([2, -1])))


def test_ldexp_in_place_errors_and_keywords():
    x = hx.tensor([1.5, -2.0, 0.25])
    assert x.ldexp_(hx.tensor([1, -3, 4])) is x
    same(x, torch.tensor([1.5, -2.0, 0.25]).ldexp_(torch.tensor([1, -3, 4])))
    same(hx.ldexp(input=hx.tensor([4.0]), other=hx.tensor([6])),
         torch.ldexp(input=torch.tensor([4.0]), other=torch.tensor([6])))
    with pytest.raises(RuntimeError, match="ldexp_: result type float32 can't be cast"):
        hx.tensor([1, 2]).ldexp_(hx.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.tensor([1, 2]).ldexp_(torch.tensor([1, 2]))


def test_ldexp_gradients_match_pytorch_in_float64():
    a = np.array([[1.5, -2.0, 0.3], [0.7, 4.0, -0.1]])
    e = np.array([1.0, -0.5, 2.25])
    x, y = hx.tensor(a, requires_grad=True), hx.tensor(e, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(e, requires_grad=True)
    g = np.random.default_rng(1).standard_normal((2, 3))
    hx.ldexp(x, y).backward(hx.tensor(g))
    torch.ldexp(tx, ty).backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-12)
    ints = hx.tensor([3, -2])
    z = hx.tensor([1.5, 2.0], requires_grad=True)
    hx.ldexp(z, ints).sum().backward()
    assert z.grad.tolist() == [8.0, 0.25]
    assert hx.autograd.gradcheck(hx.ldexp, (hx.tensor(a, requires_grad=True),
                                            hx.tensor(e, requires_grad=True)))


@pytest.mark.gpu
def test_ldexp_on_the_gpu_equals_the_cpu_at_the_ends_of_the_range(be):
    a = np.array([2.0 ** -140, 1.5, 3.0, 0.0, 1e-30, -7.0, 5.0, 1.0], np.float32)
    e = np.array([200, -140, 300, 1000, 100, 3, 0.5, -1.25], np.float32)
    cpu = hx.ldexp(hx.tensor(a), hx.tensor(e))
    gpu = hx.ldexp(hx.tensor(a, device="gpu"), hx.tensor(e, device="gpu"))
    np.testing.assert_allclose(gpu.cpu().numpy(), cpu.numpy(), rtol=2e-6)
    n = [1, 2, 3, 4, 5, 6, 7, 8]
    ints = hx.ldexp(hx.tensor(a, device="gpu"), hx.tensor(n, device="gpu"))
    np.testing.assert_array_equal(ints.cpu().numpy(), hx.ldexp(hx.tensor(a), hx.tensor(n)).numpy())


# -- frexp ---------------------------------------------------------------------------------
SPECIAL = [0.0, -0.0, 1.0, 8.0, -3.5, math.inf, math.nan, 1e-40, -math.inf, 0.75, -1e30,
           2.0 ** -149]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_frexp_splits_as_pytorchs(dtype):
    values = [v for v in SPECIAL if dtype != "float16" or abs(v) < 6e4] + [3.0, 1e-6]
    x, tx = both(values, dtype)
    got, want = hx.frexp(x), torch.frexp(tx)
    assert got._fields == ("mantissa", "exponent")
    same(got.mantissa, want.mantissa)
    same(got.exponent, want.exponent)
    m, e = x.frexp()
    finite = np.isfinite(values)
    back = hx.ldexp(m, e)
    same(back[hx.tensor(finite)], tx[torch.tensor(finite)])  # (ldexp puts them back)


def test_frexp_on_edge_shapes_and_views_and_refuses_integers():
    for a in (np.array(5.0), np.zeros((0, 2)), np.arange(12.0).reshape(3, 4) - 5.5):
        x, tx = hx.tensor(a), torch.tensor(a)
        for view in (lambda t: t, lambda t: t.T if t.ndim == 2 else t):
            got, want = hx.frexp(view(x)), torch.frexp(view(tx))
            same(got.mantissa, want.mantissa)
            same(got.exponent, want.exponent)
    with pytest.raises(TypeError, match="frexp: only supports floating-point dtypes, got int64"):
        hx.frexp(hx.tensor([3]))
    with pytest.raises(RuntimeError, match="only supports floating-point"):
        torch.frexp(torch.tensor([3]))


def test_frexp_gradient_is_pytorchs():
    a = np.array([1.5, -20.0, 0.3, 1e-3, 7.0])
    x, tx = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    m, e = hx.frexp(x)
    tm, te = torch.frexp(tx)
    assert not e.requires_grad and m.requires_grad
    g = np.random.default_rng(2).standard_normal(5)
    m.backward(hx.tensor(g))
    tm.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    assert hx.autograd.gradcheck(lambda t: hx.frexp(t).mantissa,
                                 (hx.tensor(a, requires_grad=True),))
    x2 = hx.tensor(a, requires_grad=True)
    m2, e2 = hx.frexp(x2)
    e2 += 1  # (the exponent its gradient reads, changed in place: refused, as PyTorch)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        m2.sum().backward()


@pytest.mark.gpu
def test_frexp_on_the_gpu_equals_the_cpu(be):
    a = np.array([v for v in SPECIAL if abs(v) < 3e38], np.float32)
    cpu = hx.frexp(hx.tensor(a))
    gpu = hx.frexp(hx.tensor(a, device="gpu"))
    assert gpu.mantissa.device.type == "gpu" and gpu.exponent.device.type == "gpu"
    np.testing.assert_array_equal(gpu.mantissa.cpu().numpy(), cpu.mantissa.numpy())
    np.testing.assert_array_equal(gpu.exponent.cpu().numpy(), cpu.exponent.numpy())


# -- float_power ---------------------------------------------------------------------------
@pytest.mark.parametrize("base,exponent", [
    ("float32", 2.5), ("int64", 2), ("int64", "int64"), ("bool", 2), ("float16", "float16"),
    ("bfloat16", "float32"), (2, "int64"), (1.5, "float32"), ("float32", "float64")])
def test_float_power_is_pow_in_float64(base, exponent):
    def operand(spec, lib, values):
        if not isinstance(spec, str):
            return spec
        return lib.tensor(values, dtype=getattr(lib, spec))

    av = [2, 3, 0, 1] if base in ("int64", "bool") else [2.0, -2.0, 0.5, 3.0]
    ev = [2, -1, 3, 0] if exponent == "int64" else [2.0, 0.5, -1.5, 3.0]
    if base == "bool":
        av = [True, False, True, False]
    got = hx.float_power(operand(base, hx, av), operand(exponent, hx, ev))
    want = torch.float_power(operand(base, torch, av), operand(exponent, torch, ev))
    same(got, want, rtol=1e-15)


def test_float_power_in_place_and_its_gradients():
    x = hx.tensor([2.0, 3.0], dtype=hx.float64)
    assert x.float_power_(hx.tensor([3.0, 0.5])) is x
    same(x, torch.tensor([2.0, 3.0], dtype=torch.float64).float_power_(torch.tensor([3.0, 0.5])))
    with pytest.raises(RuntimeError, match="float_power_: the base has dtype float32 but the "
                                           "result requires float64"):
        hx.tensor([2.0]).float_power_(2)
    with pytest.raises(RuntimeError, match="requires dtype Double"):
        torch.tensor([2.0]).float_power_(2)
    with pytest.raises(TypeError, match="float_power: expected a tensor"):
        hx.float_power(2.0, 3.0)
    a = hx.tensor([1.5, 2.0], requires_grad=True)
    b = hx.tensor([2.0, 0.5], requires_grad=True)
    ta = torch.tensor([1.5, 2.0], requires_grad=True)
    tb = torch.tensor([2.0, 0.5], requires_grad=True)
    hx.float_power(a, b).sum().backward()
    torch.float_power(ta, tb).sum().backward()
    assert a.grad.dtype is hx.float32 and b.grad.dtype is hx.float32  # (each its own dtype)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-6)


@pytest.mark.gpu
def test_float_power_on_the_gpu_says_it_needs_float64(be):
    with pytest.raises(TypeError, match="float_power: computes in float64, which gpu tensors "
                                        "cannot hold"):
        hx.float_power(hx.tensor([2.0], device="gpu"), 2)


# -- fix and true_divide -------------------------------------------------------------------
def test_fix_is_trunc_under_pytorchs_other_name():
    a = np.array([-1.5, 2.7, -0.2, 3.0, -7.9])
    same(hx.fix(hx.tensor(a)), torch.fix(torch.tensor(a)))
    same(hx.tensor([-3, 4]).fix(), torch.tensor([-3, 4]).fix())
    x = hx.tensor(a)
    assert x.fix_() is x
    same(x, torch.tensor(a).fix_())
    with pytest.raises(TypeError, match="bool"):
        hx.fix(hx.tensor([True]))
    y = hx.tensor(a, requires_grad=True)
    y.fix().sum().backward()
    assert y.grad.tolist() == [0.0] * 5


def test_true_divide_is_div_under_pytorchs_other_name():
    same(hx.true_divide(hx.tensor([1, 2]), hx.tensor([2, 4])),
         torch.true_divide(torch.tensor([1, 2]), torch.tensor([2, 4])))
    same(hx.true_divide(input=hx.tensor([1, 2]), other=2),
         torch.true_divide(input=torch.tensor([1, 2]), other=2))
    same(hx.tensor([1.0, 2.0]).true_divide(other=4), torch.tensor([1.0, 2.0]).true_divide(other=4))
    x = hx.tensor([1.0, 3.0])
    assert x.true_divide_(2) is x and x.tolist() == [0.5, 1.5]
    with pytest.raises(RuntimeError, match="can't be cast"):
        hx.tensor([1, 2]).true_divide_(2)
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.tensor([1, 2]).true_divide_(2)
    a = hx.tensor([1.5, -2.0], dtype=hx.float64, requires_grad=True)
    b = hx.tensor([0.5, 4.0], dtype=hx.float64, requires_grad=True)
    assert hx.autograd.gradcheck(hx.true_divide, (a, b))
