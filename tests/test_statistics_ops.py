"""ops/statistics.py against PyTorch: nansum, nanmean, var_mean (and std_mean's
PyTorch forms), aminmax, cov, corrcoef and cdist: values and dtypes on views, 0-d and
0-size inputs, float64 gradients, errors, and the GPU against the CPU.

(tests/test_op_registry.py runs each over every dtype and layout as well.)"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

NAN = float("nan")


def _pair(a, grad=False):
    h, t = hx.tensor(a), torch.tensor(a)
    if grad:
        h.requires_grad_()
        t.requires_grad_()
    return h, t


def _same(got, want, rtol=1e-12, atol=1e-12):
    assert got.shape == tuple(want.shape), (got.shape, want.shape)
    assert got.dtype.name == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=rtol,
                               atol=atol, equal_nan=True)


def _grads_match(fh, ft, a, seed=0, rtol=1e-10, atol=1e-12):
    """fh and ft's float64 gradients at a for one random incoming gradient."""
    h, t = _pair(a, grad=True)
    oh, ot = fh(h), ft(t)
    gy = np.random.default_rng(seed).standard_normal(tuple(ot.shape))
    oh.backward(hx.tensor(gy))
    ot.backward(torch.tensor(gy))
    np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


WITH_NAN = np.array([[1.5, NAN, -2.0, 0.25], [NAN, NAN, NAN, NAN], [3.0, 4.0, NAN, -1.0]])


# -- nansum and nanmean ---------------------------------------------------------------------
@pytest.mark.parametrize("view", [lambda t: t, lambda t: t.transpose(0, 1),
                                  lambda t: t[:, ::2], lambda t: t.flip(0)])
@pytest.mark.parametrize("args", [{}, {"dim": 1}, {"dim": 0, "keepdim": True},
                                  {"dim": (0, 1)}, {"dim": -1, "dtype": "float32"},
                                  {"keepdim": True}])
def test_nansum_and_nanmean_skip_nans_as_pytorch(view, args):
    h, t = _pair(WITH_NAN)
    kw = dict(args)
    tkw = dict(kw, dtype=getattr(torch, kw["dtype"])) if "dtype" in kw else kw
    hkw = dict(kw, dtype=getattr(hx, kw["dtype"])) if "dtype" in kw else kw
    for name in ("nansum", "nanmean"):
        _same(getattr(hx, name)(view(h), **hkw), getattr(torch, name)(view(t), **tkw),
              rtol=1e-6 if "dtype" in kw else 1e-12)
        _same(getattr(view(h), name)(**hkw), getattr(view(t), name)(**tkw),
              rtol=1e-6 if "dtype" in kw else 1e-12)


def test_nanmean_of_all_nans_is_nan_and_nansum_is_zero():
    h, t = _pair(WITH_NAN)
    got = hx.nanmean(h, 1).numpy()
    assert math.isnan(got[1]) and not math.isnan(got[0])
    assert hx.nansum(h, 1).numpy()[1] == 0.0


@pytest.mark.parametrize("a", [np.array(2.5), np.array(NAN), np.zeros(0), np.zeros((0, 3)),
                               np.zeros((2, 0))])
def test_nansum_and_nanmean_on_0d_and_empty_inputs(a):
    h, t = _pair(a)
    for name in ("nansum", "nanmean"):
        _same(getattr(hx, name)(h), getattr(torch, name)(t))
        if a.ndim:
            _same(getattr(hx, name)(h, -1), getattr(torch, name)(t, -1))


@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool", "int8"])
def test_nansum_adds_integers_in_int64_and_nanmean_refuses_them(dtype):
    a = np.array([[1, 0, 3], [2, 2, 1]]).astype(dtype)
    h, t = hx.tensor(a), torch.tensor(a)
    _same(hx.nansum(h, 0), torch.nansum(t, 0))
    _same(hx.nansum(h, dtype=hx.float64), torch.nansum(t, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="nanmean: expected input to have a floating"):
        hx.nanmean(h)
    with pytest.raises(RuntimeError):
        torch.nanmean(t)


def test_nansum_and_nanmean_gradients_are_zero_at_the_nans():
    for name, kw in (("nansum", {"dim": 1}), ("nanmean", {"dim": 0}), ("nanmean", {})):
        _grads_match(lambda x, name=name, kw=kw: getattr(hx, name)(x, **kw),
                     lambda x, name=name, kw=kw: getattr(torch, name)(x, **kw), WITH_NAN)
    x = hx.tensor(WITH_NAN, requires_grad=True)
    hx.nansum(x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), (~np.isnan(WITH_NAN)).astype(float))


# -- var_mean and std_mean ------------------------------------------------------------------
FORMS = [((), {}), ((1,), {}), ((1, False), {}), ((False,), {}), ((), {"unbiased": False}),
         ((1, True, True), {}), ((0,), {"correction": 0, "keepdim": True}),
         (([0, 1],), {"correction": 2}), ((1,), {"correction": None}),
         ((), {"dim": 1, "correction": 2.5}), ((None, False),  {"keepdim": True})]


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
@pytest.mark.parametrize("args,kwargs", FORMS, ids=[str(f) for f in FORMS])
def test_var_mean_and_std_mean_take_each_of_pytorchs_forms(name, args, kwargs):
    a = np.random.default_rng(0).standard_normal((3, 5))
    h, t = _pair(a)
    got, want = getattr(hx, name)(h.mT, *args, **kwargs), getattr(torch, name)(t.mT, *args,
                                                                                 **kwargs)
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want):
        _same(g, w)


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
def test_var_mean_and_std_mean_gradients_flow_through_both_results(name):
    a = np.random.default_rng(1).standard_normal((4, 3))

    def spread(mod):
        return lambda x: (lambda v, m: v * 2.0 + m * m)(*getattr(mod, name)(x, 0, False))

    _grads_match(spread(hx), spread(torch), a)
    assert gradcheck(spread(hx), (hx.tensor(a, requires_grad=True),))


@pytest.mark.parametrize("call,error", [
    (lambda f, x: f(x, 1, unbiased=False, correction=0), TypeError),
    (lambda f, x: f(x, 1, 1), TypeError),
    (lambda f, x: f(x, 1, True, False, 3), TypeError),
    (lambda f, x: f(x, dims=1), TypeError),
    (lambda f, x: f(x.int()), RuntimeError),
])
def test_var_mean_refuses_what_pytorch_refuses(call, error):
    x = hx.tensor([[1.0, 2.0, 4.0]])
    with pytest.raises(error):
        call(torch.var_mean, torch.tensor([[1.0, 2.0, 4.0]]))
    with pytest.raises(error, match="var_mean"):
        call(hx.var_mean, x)


def test_var_mean_on_0d_and_empty_inputs():
    for a in (np.array(1.5), np.zeros(0), np.zeros((2, 0))):
        h, t = _pair(a)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = torch.var_mean(t)
        for g, w in zip(hx.var_mean(h), want):
            _same(g, w)


# -- aminmax -------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [{}, {"keepdim": True}, {"dim": 0}, {"dim": -1},
                                    {"dim": 1, "keepdim": True}])
def test_aminmax_is_pytorchs_named_pair(kwargs):
    a = np.array([[3.0, -1.0, 2.0], [0.5, 7.0, -4.0]])
    h, t = _pair(a)
    for got, want in ((hx.aminmax(h.mT, **kwargs), torch.aminmax(t.mT, **kwargs)),
                      (h.mT.aminmax(**kwargs), t.mT.aminmax(**kwargs))):
        assert type(got).__name__ == "aminmax" and got._fields == ("min", "max")
        _same(got.min, want.min)
        _same(got.max, want.max)
        _same(got[0], want[0])


@pytest.mark.parametrize("dtype", ["int8", "uint8", "bool", "int64", "float16"])
def test_aminmax_keeps_the_dtype(dtype):
    a = np.array([[1, 0, 3], [2, 2, 1]]).astype(dtype)
    got, want = hx.aminmax(hx.tensor(a), dim=1), torch.aminmax(torch.tensor(a), dim=1)
    _same(got.min, want.min)
    _same(got.max, want.max)


def test_aminmax_of_a_0d_tensor_keeps_it_0d():
    for kw in ({}, {"dim": 0}, {"dim": -1, "keepdim": True}):
        got, want = hx.aminmax(hx.tensor(2.5), **kw), torch.aminmax(torch.tensor(2.5), **kw)
        _same(got.min, want.min)
        _same(got.max, want.max)


def test_aminmax_gradients_share_ties_as_amin_and_amax_do():
    a = np.array([[1.0, 2.0, 2.0], [0.5, 0.5, 0.1], [3.0, 3.0, 3.0]])

    def both(mod):
        return lambda x: (lambda r: r.min * 3.0 + r.max * r.max)(mod.aminmax(x, dim=1))

    _grads_match(both(hx), both(torch), a)
    _grads_match(lambda x: hx.aminmax(x).max, lambda x: torch.aminmax(x).max, a)


def test_aminmax_refuses_empty_reductions_and_several_dims():
    with pytest.raises(RuntimeError, match="aminmax: cannot compute over an empty"):
        hx.aminmax(hx.zeros(0))
    with pytest.raises(IndexError, match="aminmax: dim 1 of the input"):
        hx.aminmax(hx.zeros(2, 0), dim=1)
    for got, want in zip(hx.aminmax(hx.zeros(2, 0), dim=0),
                         torch.aminmax(torch.zeros(2, 0), dim=0)):
        _same(got, want)
    with pytest.raises(TypeError, match="aminmax: dim must be an int"):
        hx.aminmax(hx.zeros(2, 3), dim=(0, 1))


# -- cov and corrcoef ------------------------------------------------------------------------
OBS = np.array([[0.0, 1.0, 2.0, 5.0, -1.0], [2.0, 1.0, 0.0, 3.0, 0.5], [1.0, -2.0, 4.0, 0.0, 2.0]])
FW = np.array([1, 2, 0, 1, 3])
AW = np.array([0.5, 2.0, 1.0, 1.0, 0.25])


@pytest.mark.parametrize("kwargs", [
    {}, {"correction": 0}, {"correction": 2}, {"fweights": FW}, {"aweights": AW},
    {"fweights": FW, "aweights": AW}, {"fweights": FW, "aweights": AW, "correction": 0},
    {"fweights": FW, "aweights": AW, "correction": 3}])
@pytest.mark.parametrize("view", [lambda t: t, lambda t: t.flip(1), lambda t: t[:1],
                                  lambda t: t[1]])
def test_cov_matches_pytorch_with_weights_and_corrections(kwargs, view):
    h, t = _pair(OBS)
    hk = {k: hx.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    tk = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    _same(hx.cov(view(h), **hk), torch.cov(view(t), **tk))
    _same(view(h).cov(**hk), view(t).cov(**tk))


def test_cov_gradients_reach_the_input_and_the_observation_weights():
    def weighted(mod):
        w = mod.tensor(FW)
        return lambda x: mod.cov(x, fweights=w, aweights=x[0].abs() + 0.5)

    _grads_match(lambda x: hx.cov(x), lambda x: torch.cov(x), OBS)
    _grads_match(weighted(hx), weighted(torch), OBS)
    _grads_match(lambda x: hx.cov(x, correction=0, aweights=x[1] ** 2),
                 lambda x: torch.cov(x, correction=0, aweights=x[1] ** 2), OBS[:2])
    assert gradcheck(lambda x: hx.cov(x, aweights=x[2] ** 2 + 0.1),
                     (hx.tensor(OBS, requires_grad=True),))


@pytest.mark.parametrize("dtype,weights", [("int64", None), ("int8", "fw"),
                                           ("float32", "aw64"), ("float16", None),
                                           ("int32", "aw16")])
def test_cov_promotes_as_pytorch(dtype, weights):
    a = np.array([[1, 2, 4, 0], [3, 1, 1, 2]]).astype(dtype)
    extra = {None: {}, "fw": {"fweights": np.array([1, 1, 2, 3])},
             "aw64": {"aweights": np.array([1.0, 0.5, 2.0, 1.0])},
             "aw16": {"aweights": np.array([1.0, 0.5, 2.0, 1.0], np.float16)}}[weights]
    got = hx.cov(hx.tensor(a), **{k: hx.tensor(v) for k, v in extra.items()})
    want = torch.cov(torch.tensor(a), **{k: torch.tensor(v) for k, v in extra.items()})
    _same(got, want, rtol=2e-3 if "16" in dtype + str(weights) else 1e-6)


@pytest.mark.parametrize("a,kwargs", [(np.ones((3, 1)), {}), (OBS, {"correction": 5}),
                                      (np.array(3.0), {}), (np.zeros(0), {}),
                                      (np.zeros((2, 0)), {})])
def test_cov_without_degrees_of_freedom_warns_and_gives_inf_or_nan(a, kwargs):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = hx.cov(hx.tensor(a), **kwargs)
    assert [w for w in seen if w.category is RuntimeWarning and
            str(w.message).startswith("cov: degrees of freedom <= 0")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.cov(torch.tensor(a), **kwargs)
    _same(got, want)


def test_cov_of_no_variables_is_empty():
    _same(hx.cov(hx.zeros(0, 3)), torch.cov(torch.zeros(0, 3)))


@pytest.mark.parametrize("kwargs,error,match", [
    ({"fweights": np.array([1.0, 2, 0, 1, 1])}, TypeError, "fweights must have an integer"),
    ({"fweights": np.array([True] * 5)}, TypeError, "fweights must have an integer"),
    ({"fweights": np.array([1, -2, 0, 1, 1])}, RuntimeError, "fweights cannot be negative"),
    ({"fweights": np.array([[1, 2, 0, 1, 1]])}, RuntimeError, "at most one dim"),
    ({"fweights": np.array([1, 2])}, RuntimeError, "2 entries for 5 observations"),
    ({"aweights": np.array([1, 2, 0, 1, 1])}, TypeError, "aweights must have a floating"),
    ({"aweights": np.array([1.0, -2, 0, 1, 1])}, RuntimeError, "aweights cannot be neg"),
    ({"fweights": np.zeros(5, np.int64)}, RuntimeError, "weights sum to zero"),
    ({"correction": 0.5}, TypeError, "correction must be an int"),
])
def test_cov_refuses_bad_weights_as_pytorch(kwargs, error, match):
    hk = {k: hx.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    tk = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    with pytest.raises((RuntimeError, TypeError)):
        torch.cov(torch.tensor(OBS), **tk)
    with pytest.raises(error, match=f"cov: .*{match}"):
        hx.cov(hx.tensor(OBS), **hk)


def test_cov_refuses_bool_and_3d_inputs():
    with pytest.raises(RuntimeError, match="cov: bool input"):
        hx.cov(hx.tensor([[True, False]]))
    with pytest.raises(RuntimeError, match="at most two dims"):
        hx.cov(hx.zeros(2, 2, 2))


@pytest.mark.parametrize("a", [OBS, OBS[0], OBS.T, np.array([[1.0, 1.0, 1.0], [0.0, 1.0, 2.0]]),
                               np.array([[1, 2, 4], [3, 3, 0]])])
def test_corrcoef_matches_pytorch(a):
    h, t = _pair(a)
    _same(hx.corrcoef(h), torch.corrcoef(t), rtol=1e-6, atol=1e-7)
    _same(h.corrcoef(), t.corrcoef(), rtol=1e-6, atol=1e-7)


def test_corrcoef_gradient_and_its_clip_to_one():
    _grads_match(hx.corrcoef, torch.corrcoef, OBS, rtol=1e-8, atol=1e-10)
    got = hx.corrcoef(hx.tensor([[0.0, 1.0, 2.0], [0.0, 2.0, 4.0]])).numpy()
    assert np.all(np.abs(got) <= 1.0) and np.allclose(got, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert math.isnan(hx.corrcoef(hx.tensor(2.0)).item())


# -- cdist ---------------------------------------------------------------------------------
# rows that coincide (a zero distance), ties of the largest difference, zero coordinates
A1 = np.array([[0.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
A2 = np.array([[0.0, 1.0, 1.0], [1.0, 3.0, 2.0], [2.0, 0.0, 2.0]])
PS = [0, 0.5, 1, 1.5, 2, 3, math.inf]


@pytest.mark.parametrize("p", PS)
def test_cdist_values_and_subgradients_are_pytorchs_at_zeros_and_ties(p):
    h1, t1 = _pair(A1, grad=True)
    h2, t2 = _pair(A2, grad=True)
    got, want = hx.cdist(h1, h2, p=p), torch.cdist(t1, t2, p=p)
    _same(got, want)
    gy = np.arange(6.0).reshape(2, 3) + 1
    got.backward(hx.tensor(gy))
    want.backward(torch.tensor(gy))
    np.testing.assert_allclose(h1.grad.numpy(), t1.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h2.grad.numpy(), t2.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("p", PS)
def test_cdist_broadcasts_batch_dims_with_gradients(p):
    r = np.random.default_rng(2)
    a, b = r.standard_normal((2, 1, 3, 4)), r.standard_normal((3, 5, 4))
    h1, t1 = _pair(a, grad=True)
    h2, t2 = _pair(b, grad=True)
    got, want = hx.cdist(h1, h2.transpose(-1, -2).transpose(-1, -2), p), torch.cdist(t1, t2, p)
    _same(got, want)
    gy = r.standard_normal(tuple(want.shape))
    got.backward(hx.tensor(gy))
    want.backward(torch.tensor(gy))
    np.testing.assert_allclose(h1.grad.numpy(), t1.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h2.grad.numpy(), t2.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("p", [0.5, 1.5, 2, 3])
def test_cdist_passes_gradcheck_and_gradgradcheck_where_it_is_smooth(p):
    r = np.random.default_rng(3)
    x1 = hx.tensor(r.standard_normal((3, 2)), requires_grad=True)
    x2 = hx.tensor(r.standard_normal((4, 2)), requires_grad=True)
    assert gradcheck(lambda a, b: hx.cdist(a, b, p), (x1, x2))
    assert gradgradcheck(lambda a, b: hx.cdist(a, b, p), (x1, x2))


@pytest.mark.parametrize("rows,mode", [(30, "use_mm_for_euclid_dist_if_necessary"),
                                       (4, "use_mm_for_euclid_dist"),
                                       (30, "donot_use_mm_for_euclid_dist")])
def test_cdist_euclidean_by_matrix_products_as_pytorch_chooses(rows, mode):
    r = np.random.default_rng(4)
    a, b = r.standard_normal((rows, 3)), r.standard_normal((5, 3))
    h1, t1 = _pair(a, grad=True)
    h2, t2 = _pair(b, grad=True)
    got, want = hx.cdist(h1, h2, compute_mode=mode), torch.cdist(t1, t2, compute_mode=mode)
    _same(got, want, rtol=1e-9)
    by_products = mode == "use_mm_for_euclid_dist" or (
        rows > 25 and mode == "use_mm_for_euclid_dist_if_necessary")
    assert (got.grad_fn.name == "EuclideanDist") == by_products
    gy = r.standard_normal((rows, 5))
    got.backward(hx.tensor(gy))
    want.backward(torch.tensor(gy))
    np.testing.assert_allclose(h1.grad.numpy(), t1.grad.numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(h2.grad.numpy(), t2.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_cdist_by_products_gives_zero_gradient_where_a_distance_floors_at_zero():
    a = np.zeros((30, 2))
    x = hx.tensor(a, requires_grad=True)
    d = hx.cdist(x, x)
    assert np.all(d.detach().numpy() == 0.0)
    d.sum().backward()
    assert np.all(x.grad.numpy() == 0.0)


def test_cdist_on_empty_and_featureless_inputs_keeps_the_graph():
    for a, b in (((0, 4), (5, 4)), ((3, 0), (2, 0)), ((2, 3, 2), (1, 0, 2)), ((0, 3, 2), (4, 2))):
        h1, t1 = _pair(np.ones(a), grad=True)
        h2, t2 = _pair(np.ones(b), grad=True)
        got, want = hx.cdist(h1, h2), torch.cdist(t1, t2)
        _same(got, want)
        got.sum().backward()
        want.sum().backward()
        np.testing.assert_array_equal(h1.grad.numpy(), t1.grad.numpy())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_cdist_of_narrow_floats_keeps_the_dtype(dtype):
    r = np.random.default_rng(5)
    a, b = r.standard_normal((3, 4)), r.standard_normal((2, 4))
    got = hx.cdist(hx.tensor(a, dtype=dtype), hx.tensor(b, dtype=dtype))
    assert got.dtype.name == dtype
    want = torch.cdist(torch.tensor(a), torch.tensor(b))
    tol = {"float32": 1e-6, "bfloat16": 2e-2, "float16": 2e-3}[dtype]
    np.testing.assert_allclose(got.float().numpy(), want.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("call,error,match", [
    (lambda m: m.cdist(m.ones(3), m.ones(2, 3)), RuntimeError, "at least 2 dims"),
    (lambda m: m.cdist(m.ones(2, 3), m.ones(2, 4)), RuntimeError, "same number of columns"),
    (lambda m: m.cdist(m.ones(2, 3), m.ones(2, 3), p=-1), RuntimeError, "non-negative"),
    (lambda m: m.cdist(m.ones(2, 3), m.ones(2, 3), p=NAN), RuntimeError, "non-negative"),
    (lambda m: m.cdist(m.ones(2, 3), m.ones(2, 3), compute_mode="fast"), ValueError,
     "not a valid value for compute_mode"),
    (lambda m: m.cdist(m.ones(2, 3, dtype=m.int64), m.ones(2, 3, dtype=m.int64)),
     RuntimeError, "only floating point"),
    (lambda m: m.cdist(m.ones(2, 3, dtype=m.float64), m.ones(2, 3)), RuntimeError,
     "same dtype"),
    (lambda m: m.cdist(m.ones(2, 2, 3), m.ones(3, 2, 3)), RuntimeError, ""),
])
def test_cdist_refuses_what_pytorch_refuses(call, error, match):
    with pytest.raises(error):
        call(torch)
    with pytest.raises(error, match=f"cdist{'.*' + match if match else ''}"):
        call(hx)


# -- the GPU against the CPU -----------------------------------------------------------------
GPU_CASES = {
    "nansum": lambda x: hx.nansum(x, 1),
    "nanmean": lambda x: hx.nanmean(x, 0),
    "var_mean": lambda x: hx.var_mean(x, 1, True)[0],
    "aminmax": lambda x: hx.aminmax(x, dim=0).max,
    "cov": lambda x: hx.cov(x, aweights=x[0].abs()),
    "corrcoef": lambda x: hx.corrcoef(x),
    "cdist": lambda x: hx.cdist(x, x[:2] * 2.0, p=1.5),
    "cdist_inf": lambda x: hx.cdist(x, x[:2] * 2.0, p=math.inf),
    "cdist_mm": lambda x: hx.cdist(x, x[:2], compute_mode="use_mm_for_euclid_dist"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GPU_CASES))
def test_statistics_on_the_gpu_match_the_cpu(be, name):
    a = np.random.default_rng(6).standard_normal((3, 4)).astype(np.float32)
    a[1, 2] = NAN if name.startswith("nan") else a[1, 2]
    f = GPU_CASES[name]
    cpu = hx.tensor(a, requires_grad=True)
    gpu = hx.tensor(a, device="gpu", requires_grad=True)
    yc, yg = f(cpu), f(gpu)
    assert yg.device.type == "gpu"
    np.testing.assert_allclose(yg.detach().cpu().numpy(), yc.detach().numpy(), rtol=3e-5,
                               atol=3e-5, equal_nan=True)
    if name != "nanmean":  # (its NaN column's gradient is NaN on both)
        yc.sum().backward()
        yg.sum().backward()
        np.testing.assert_allclose(gpu.grad.cpu().numpy(), cpu.grad.numpy(), rtol=3e-4,
                                   atol=3e-5)
