"""lgamma, digamma, polygamma, erfinv and mvlgamma against PyTorch: values over wide grids
in float32 and float64 (and against mpmath's, where PyTorch's own float64 is less exact),
the poles, signed zeros, infinities and NaN, integer and 16-bit inputs, views, float64
gradients with gradcheck and gradgradcheck, the in-place forms, the errors, and the GPU
(WGSL, in f32) against the CPU.

Tolerances, float64: 1e-13 of max(|value|, 1) for lgamma, digamma and erfinv; trigamma
(polygamma(1, .)) against mpmath's, as PyTorch's is only within 5e-10 (its asymptotic
series stops early). float32: the CPU rounds a float64 result once, so within 1 ulp of
PyTorch's float64 result rounded (2 ulp allowed). The GPU computes in f32: within 2e-6 of
max(|value|, 1) of the CPU's, except where the value is a difference of much larger
terms (polygamma below 0, near its zeros), there within 2e-6 of those terms.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

_R = np.random.default_rng(5)
#: float32-representable arguments: both sides of 0, near the zeros of lgamma (1, 2,
#: -2.457...) and digamma (1.4616...), tiny and large magnitudes; no integers <= 0
GRID = np.concatenate([np.linspace(-6.5, 12.5, 389), _R.uniform(-40, 60, 300),
                       np.logspace(-8, 6, 60), 0.37 - np.logspace(-8, 2, 40),
                       [1.4616321449683622, 1.0, 2.0, 3.0, 0.5, -0.5, -2.4570247]])
GRID = GRID[np.abs(GRID - np.round(GRID)) > 1e-6].astype(np.float32).astype(np.float64)
#: inside (-1, 1), near both ends and near 0
UNIT = np.concatenate([np.linspace(-0.999, 0.999, 401), 1 - np.logspace(-7, -1, 30),
                       -1 + np.logspace(-7, -1, 30), np.logspace(-30, -1, 30),
                       -np.logspace(-30, -1, 7)]).astype(np.float32).astype(np.float64)
#: the special points: signed zeros, poles, infinities, NaN
EDGES = [0.0, -0.0, -1.0, -2.0, -7.0, -1e10, math.inf, -math.inf, math.nan, 1e-30, 1e30]

UNARY = {
    "lgamma": (hx.lgamma, torch.lgamma),
    "digamma": (hx.digamma, torch.digamma),
    **{f"polygamma{n}": ((lambda k: lambda x: hx.polygamma(k, x))(n),
                        (lambda k: lambda x: torch.polygamma(k, x))(n)) for n in range(5)},
    "erfinv": (hx.erfinv, torch.erfinv),
}


def _args(name):
    return UNIT if name == "erfinv" else GRID


def _close_to_scale(got, want, tol, what):
    """|got - want| <= tol * max(|want|, 1), the infinities and NaNs where want's are."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite], want[~finite], err_msg=what)
    error = np.abs(got[finite] - want[finite]) / np.maximum(np.abs(want[finite]), 1.0)
    assert error.max(initial=0.0) <= tol, f"{what}: {error.max():.3g} of scale (tol {tol})"


def _mpmath_values(f, xs):
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    return np.array([float(f(mpmath, mpmath.mpf(float(v)))) for v in xs])


# -- values ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfinv", "polygamma2", "polygamma3",
                                  "polygamma4"])
def test_float64_values_match_pytorch(name):
    ours, theirs = UNARY[name]
    x = _args(name)
    got = ours(hx.tensor(x)).numpy()
    assert got.dtype == np.float64
    # (digamma 1e-12: PyTorch's own is 4e-14 off mpmath's near its root; the zeta-based
    # polygammas lose digits to cancellation below 0, on both sides)
    tol = {"lgamma": 1e-13, "erfinv": 1e-13, "digamma": 1e-12}.get(name, 1e-11)
    _close_to_scale(got, theirs(torch.tensor(x)).numpy(), tol, name)


def test_float64_trigamma_is_mpmaths_where_pytorchs_is_5e10_off():
    x = GRID[np.abs(GRID) < 100]
    got = hx.polygamma(1, hx.tensor(x)).numpy()
    exact = _mpmath_values(lambda mp, v: mp.polygamma(1, v), x)
    np.testing.assert_allclose(got, exact, rtol=1e-14)
    # (the reason: PyTorch's own trigamma, beside the same values)
    theirs = torch.polygamma(1, torch.tensor(x)).numpy()
    np.testing.assert_allclose(theirs, exact, rtol=1e-9)
    assert np.abs(theirs / exact - 1).max() > 1e-11
    # and through digamma's gradient
    t = hx.tensor(x[:50], requires_grad=True)
    t.digamma().sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), exact[:50], rtol=1e-14)


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfinv", "polygamma1", "polygamma3"])
def test_float64_values_against_mpmath(name):
    x = _args(name)[::3]
    f = {"lgamma": lambda mp, v: mp.log(abs(mp.gamma(v))),
         "digamma": lambda mp, v: mp.digamma(v), "erfinv": lambda mp, v: mp.erfinv(v),
         "polygamma1": lambda mp, v: mp.polygamma(1, v),
         "polygamma3": lambda mp, v: mp.polygamma(3, v)}[name]
    _close_to_scale(UNARY[name][0](hx.tensor(x)).numpy(), _mpmath_values(f, x), 2e-15, name)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_float32_values_are_the_float64_ones_rounded(name):
    ours, theirs = UNARY[name]
    x = _args(name)
    got = ours(hx.tensor(x, dtype=hx.float32)).numpy()
    assert got.dtype == np.float32
    want = theirs(torch.tensor(x)).numpy()
    if name == "polygamma1":  # (PyTorch's float64 trigamma: see above)
        want = hx.polygamma(1, hx.tensor(x)).numpy()
    want32 = want.astype(np.float32)
    finite = np.isfinite(want32)
    np.testing.assert_array_equal(got[~finite], want32[~finite], err_msg=name)
    ulps = np.abs(got[finite].astype(np.float64) - want32[finite]) / \
        np.spacing(np.abs(want32[finite]))
    assert ulps.max() <= 2, f"{name}: {ulps.max()} ulp from PyTorch's float64 rounded"


@pytest.mark.parametrize("name", sorted(UNARY))
def test_float32_values_match_pytorchs_float32(name):
    ours, theirs = UNARY[name]
    x = _args(name)
    if name == "polygamma1":  # (PyTorch's float32 reflection, below 1/2, loses digits)
        x = x[x >= 0.5]
    got = ours(hx.tensor(x, dtype=hx.float32)).numpy()
    want = theirs(torch.tensor(x, dtype=torch.float32)).numpy()
    _close_to_scale(got, want, 2e-6, name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_poles_zeros_infinities_and_nan_are_pytorchs(name, dtype):
    ours, theirs = UNARY[name]
    edges = EDGES + ([1.0, -1.0, 2.0, -2.0, 0.999999] if name == "erfinv" else [])
    got = ours(hx.tensor(edges, dtype=getattr(hx, dtype))).numpy()
    want = theirs(torch.tensor(edges, dtype=getattr(torch, dtype))).numpy()
    # (trigamma's values at the negative integers are finite there: pi^2 / sin(pi x)^2)
    np.testing.assert_allclose(got, want, rtol=2e-6, err_msg=name)
    signed = ~np.isnan(want)  # (the signs of zeros and infinities; a NaN's is the CPU's)
    np.testing.assert_array_equal(np.signbit(got)[signed], np.signbit(want)[signed],
                                  err_msg=name)


def test_trigamma_at_the_negative_integers_is_pytorchs_large_number():
    for dtype, want in ((torch.float64, 6.5808e32), (torch.float32, 1.2914e15)):
        t = torch.polygamma(1, torch.tensor([-1.0], dtype=dtype)).item()
        got = hx.polygamma(1, hx.tensor([-1.0], dtype=getattr(hx, str(dtype)[6:]))).item()
        assert got == pytest.approx(t, rel=1e-6) and t == pytest.approx(want, rel=1e-4)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "int16", "bool"])
@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfinv", "polygamma1", "polygamma2"])
def test_integer_and_bool_inputs_compute_in_the_default_float(name, dtype):
    ours, theirs = UNARY[name]
    a = np.array([0, 1, 2, 3, 7] if dtype in ("uint8", "bool") else [-3, -1, 0, 1, 2, 5])
    a = a.astype(bool) if dtype == "bool" else a
    got = ours(hx.tensor(a, dtype=getattr(hx, dtype)))
    want = theirs(torch.tensor(a, dtype=getattr(torch, dtype)))
    assert got.dtype is hx.float32 and want.dtype is torch.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_16_bit_inputs_round_once_as_pytorch(name, dtype):
    ours, theirs = UNARY[name]
    x = _args(name)[::7]
    t = torch.tensor(x, dtype=getattr(torch, dtype))
    got = ours(hx.tensor(t.float().numpy(), dtype=getattr(hx, dtype)))
    want = theirs(t)
    assert got.dtype.name == dtype
    # (PyTorch computes in float32 and rounds; a tie may round either way: an ulp)
    tol = {"float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    _close_to_scale(got.float().numpy(), want.float().numpy(), tol, f"{name} {dtype}")


@pytest.mark.parametrize("name", sorted(UNARY))
def test_views_zero_d_and_empty_inputs(name):
    ours, theirs = UNARY[name]
    a = _args(name)[:24].reshape(4, 6)
    for view in (lambda t: t.T, lambda t: t[::2, 1::2], lambda t: t.flip(1), lambda t: t[1],
                 lambda t: t[0, 0], lambda t: t[:0]):
        got, want = ours(view(hx.tensor(a))), theirs(view(torch.tensor(a)))
        assert got.shape == tuple(want.shape)
        _close_to_scale(got.numpy(), want.numpy(), 1e-9, name)


# -- polygamma's surfaces and errors ------------------------------------------------------------
def test_polygamma_surfaces_take_pytorchs_arguments():
    a = np.array([[0.5, 2.0, -1.5], [3.0, 7.25, -0.25]])
    x, t = hx.tensor(a), torch.tensor(a)
    for n in range(5):
        want = torch.polygamma(n, t).numpy()
        for got in (hx.polygamma(n, x), x.polygamma(n), hx.polygamma(n=n, input=x),
                    x.polygamma(n=n), hx.polygamma(np.int64(n), x)):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-9)
        y = x.clone()
        assert y.polygamma_(n) is y
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-9)
    np.testing.assert_allclose(hx.polygamma(0, x).numpy(), hx.digamma(x).numpy(), rtol=0)
    with pytest.raises(RuntimeError, match="n must be >= 0"):
        hx.polygamma(-1, x)
    with pytest.raises(RuntimeError, match="n must be >= 0"):
        x.clone().polygamma_(-2)
    for bad in (1.5, True, None):
        with pytest.raises(TypeError, match="n must be an int"):
            hx.polygamma(bad, x)
    with pytest.raises(TypeError, match="input must be a Tensor"):
        hx.polygamma(1, 2.0)
    with pytest.raises(RuntimeError, match="polygamma_: result type"):
        hx.tensor([3, 4]).polygamma_(1)  # (an int tensor cannot hold it: PyTorch's error)


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfinv"])
def test_in_place_forms(name):
    a = _args(name)[:12].reshape(3, 4)
    x = hx.tensor(a, dtype=hx.float32)
    view = x[1:]
    assert getattr(x, name + "_")() is x
    np.testing.assert_allclose(view.numpy(), getattr(torch, name)(
        torch.tensor(a, dtype=torch.float32)).numpy()[1:], rtol=2e-6)
    with pytest.raises(RuntimeError, match="can't be cast"):
        getattr(hx.tensor([1, 2]), name + "_")()
    with pytest.raises(RuntimeError):
        getattr(torch.tensor([1, 2]), name + "_")()


# -- gradients -----------------------------------------------------------------------------------
GRADIENT_ARGS = np.array([[0.3, 1.4616, 2.0, 5.5], [-0.5, -1.25, -2.7, 13.0],
                          [40.0, 0.01, 3.3, -6.6]])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_float64_gradients_match_pytorch(name):
    ours, theirs = UNARY[name]
    a = np.tanh(GRADIENT_ARGS) * 0.97 if name == "erfinv" else GRADIENT_ARGS
    g = np.random.default_rng(2).standard_normal(a.shape)
    x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ours(x).backward(hx.tensor(g))
    theirs(t).backward(torch.tensor(g))
    # (the gradients of digamma and polygamma(0) are trigamma: PyTorch's is 5e-10 off)
    rtol = 1e-9 if name in ("digamma", "polygamma0") else 1e-12
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=1e-15,
                               err_msg=name)  # (atol: lgamma's gradient at digamma's root)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_gradcheck_and_gradgradcheck(name):
    ours, _ = UNARY[name]
    a = np.tanh(GRADIENT_ARGS[:2]) * 0.9 if name == "erfinv" else GRADIENT_ARGS[:2]
    x = hx.tensor(a, requires_grad=True)
    assert gradcheck(ours, [x], name=name)
    assert gradgradcheck(ours, [x], name=name)


def test_second_derivatives_match_pytorchs():
    a = np.array([0.7, 2.5, -0.3, 9.0])
    for n in (0, 1, 2):
        x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        (gx,) = hx.autograd.grad(hx.polygamma(n, x).sum(), [x], create_graph=True)
        (gt,) = torch.autograd.grad(torch.polygamma(n, t).sum(), [t], create_graph=True)
        gx.sum().backward()
        gt.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-11)
    x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (gx,) = hx.autograd.grad(x.lgamma().sum(), [x], create_graph=True)
    (gt,) = torch.autograd.grad(t.lgamma().sum(), [t], create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), gt.detach().numpy(), rtol=1e-13)
    gx.sum().backward()
    gt.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9)  # (trigamma)
    u = np.array([-0.9, 0.1, 0.6])
    x, t = hx.tensor(u, requires_grad=True), torch.tensor(u, requires_grad=True)
    (gx,) = hx.autograd.grad(x.erfinv().sum(), [x], create_graph=True)
    (gt,) = torch.autograd.grad(t.erfinv().sum(), [t], create_graph=True)
    gx.sum().backward()
    gt.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)


# -- mvlgamma --------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [1, 2, 3, 5])
def test_mvlgamma_matches_pytorch(p):
    a = np.abs(GRID[::9]) + 0.5 * (p - 1) + 1e-3
    for dtype in ("float64", "float32"):
        got = hx.mvlgamma(hx.tensor(a, dtype=getattr(hx, dtype)), p)
        want = torch.mvlgamma(torch.tensor(a, dtype=getattr(torch, dtype)), p)
        assert got.dtype.name == dtype
        _close_to_scale(got.numpy(), want.numpy(), 1e-13 if dtype == "float64" else 2e-6,
                        f"mvlgamma p={p} {dtype}")
    # (below (p - 1) / 2 PyTorch computes the formula too, lgamma's poles included)
    low = np.array([0.4, -0.3, 0.0, -1.0, 1.5])
    _close_to_scale(hx.mvlgamma(hx.tensor(low), p).numpy(),
                    torch.mvlgamma(torch.tensor(low), p).numpy(), 1e-13, "below")
    x, t = hx.tensor(a[:8], requires_grad=True), torch.tensor(a[:8], requires_grad=True)
    x.mvlgamma(p).sum().backward()
    t.mvlgamma(p).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9)
    assert gradcheck(lambda v: hx.mvlgamma(v, p), [hx.tensor(a[:4], requires_grad=True)])


def test_mvlgamma_shapes_dtypes_in_place_and_errors():
    ints = hx.mvlgamma(hx.tensor([[3, 4], [5, 6]]), 3)
    want = torch.mvlgamma(torch.tensor([[3, 4], [5, 6]]), 3)
    assert ints.dtype is hx.float32 and ints.shape == (2, 2)
    np.testing.assert_allclose(ints.numpy(), want.numpy(), rtol=1e-6)
    assert hx.mvlgamma(hx.tensor(2.5), 2).shape == ()
    assert hx.mvlgamma(hx.zeros(0, 3), 4).shape == (0, 3)
    x = hx.tensor([2.0, 3.5], dtype=hx.float64)
    assert x.mvlgamma_(2) is x
    np.testing.assert_allclose(x.numpy(), torch.mvlgamma(torch.tensor([2.0, 3.5],
                                                                      dtype=torch.float64), 2))
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        hx.mvlgamma(x, 0)
    with pytest.raises(TypeError, match="p must be an int"):
        hx.mvlgamma(x, 1.0)
    with pytest.raises(RuntimeError, match="may not be a bool tensor"):
        hx.mvlgamma(hx.tensor([True]), 1)
    with pytest.raises(RuntimeError, match="can't be cast"):
        hx.tensor([3, 4]).mvlgamma_(1)


# -- the GPU (software adapter in CI) against the CPU ---------------------------------------------
def _reflected_terms(n, x):
    """n! times the two largest terms of polygamma(n, x) below 0, (x - floor(x))^-(n+1)
    and (ceil(x) - x)^-(n+1): the size of what its value is a difference of."""
    r = x - np.floor(x)
    return math.factorial(n) * (r ** -(n + 1.0) + (1.0 - r) ** -(n + 1.0))


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(UNARY))
def test_gpu_equals_cpu(be, name):
    ours, _ = UNARY[name]
    edges = np.array(EDGES + [1.0, -1.0, 2.0, 0.999999]) if name == "erfinv" else \
        np.array(EDGES)
    x = np.concatenate([_args(name), edges])
    cpu = ours(hx.tensor(x, dtype=hx.float32)).numpy().astype(np.float64)
    gpu = ours(hx.tensor(x, dtype=hx.float32, device="gpu"))
    assert gpu.device.type == "gpu" and gpu.dtype is hx.float32
    gpu = gpu.cpu().numpy().astype(np.float64)
    finite = np.isfinite(cpu)
    np.testing.assert_array_equal(gpu[~finite], cpu[~finite], err_msg=name)
    if name == "polygamma1":  # (its pole values read sin(pi x), which the GPU computes
        finite &= np.abs(x) < 1e3  # less exactly far from 0: -1e10 is left out)
    x, cpu, gpu = x[finite], cpu[finite], gpu[finite]
    scale = np.maximum(np.abs(cpu), 1.0)
    if name.startswith("polygamma") and name != "polygamma0":
        below = (x < 0) & (x != np.floor(x))  # (trigamma's poles: their finite values)
        scale[below] = np.maximum(scale[below], _reflected_terms(int(name[-1]), x[below]))
    error = np.abs(gpu - cpu) / scale
    assert error.max() <= 2e-6, f"{name}: {error.max():.3g} at {x[error.argmax()]}"


@pytest.mark.gpu
def test_gpu_gradients_and_mvlgamma_equal_cpus(be):
    a = GRADIENT_ARGS.astype(np.float32)
    for name, (ours, _) in sorted(UNARY.items()):
        v = np.tanh(a) * 0.97 if name == "erfinv" else a
        xc = hx.tensor(v, requires_grad=True)
        xg = hx.tensor(v, device="gpu", requires_grad=True)
        ours(xc).sum().backward()
        ours(xg).sum().backward()
        np.testing.assert_allclose(xg.grad.cpu().numpy(), xc.grad.numpy(), rtol=2e-5,
                                   atol=1e-6, err_msg=name)
    y = hx.tensor(np.abs(a) + 1.5, device="gpu")
    np.testing.assert_allclose(hx.mvlgamma(y, 3).cpu().numpy(),
                               hx.mvlgamma(y.cpu(), 3).numpy(), rtol=2e-6)
    z = y.clone()
    z.polygamma_(2)
    np.testing.assert_allclose(z.cpu().numpy(), hx.polygamma(2, y.cpu()).numpy(), rtol=2e-6)
