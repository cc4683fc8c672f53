"""The gamma sampler (hx._standard_gamma, its implicit gradient _standard_gamma_grad) and
the distributions built on it (Gamma, Chi2, Beta, Dirichlet, StudentT) against PyTorch:
values and float64 gradients of log_prob / entropy / moments / cdf / KL, the statistics
of the draws, the reparameterized gradients' expectations, shapes, expand, validation."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as st

import haelixe as hx
import haelixe.distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions

RNG = np.random.default_rng(3)
CONC = np.array([[0.3, 1.0, 2.5], [7.0, 0.8, 40.0]])
RATE = np.array([0.5, 2.0, 1.3])
X = np.abs(RNG.standard_normal((4, 2, 3))) + 0.05
SIMPLEX_C = np.array([[0.4, 1.5, 3.0], [2.0, 0.7, 1.1]])
SIMPLEX_X = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])


def _ref_grad(a, x):
    """-(dP/da) / (dP/dx) at 40 digits."""
    mpmath.mp.dps = 40
    a, x = mpmath.mpf(a), mpmath.mpf(x)
    dp = mpmath.diff(lambda t: mpmath.gammainc(t, 0, x, regularized=True), a)
    return float(-dp / (x ** (a - 1) * mpmath.exp(-x) / mpmath.gamma(a)))


#: alphas from well below 1 to large, each at quantiles across its range
GRID = [(a, float(sp.gammaincinv(a, q))) for a in (0.01, 0.2, 0.9, 1.0, 3.0, 8.5, 60.0, 3e3)
        for q in (1e-4, 0.05, 0.5, 0.9, 0.9999) if sp.gammaincinv(a, q) > 0]


def test_standard_gamma_grad_is_the_implicit_derivative_to_float64_precision():
    a = np.array([p[0] for p in GRID])
    x = np.array([p[1] for p in GRID])
    got = hx._standard_gamma_grad(hx.tensor(a), hx.tensor(x)).numpy()
    want = np.array([_ref_grad(ai, xi) for ai, xi in GRID])
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_standard_gamma_grad_agrees_with_pytorchs_approximation():
    """PyTorch's is a fitted approximation (a series below x = 0.8, a saddle-point form
    above alpha = 8, a rational fit between): it is within its own error of the exact
    value, about 3e-5 at alpha in the thousands and up to 1.2e-2 at alpha = 0.01."""
    a = np.array([p[0] for p in GRID])
    x = np.array([p[1] for p in GRID])
    got = hx._standard_gamma_grad(hx.tensor(a), hx.tensor(x)).numpy()
    want = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    rel = np.abs(got / want - 1)
    assert rel[a >= 3e3].max() < 3e-5
    assert rel[(a >= 0.2) & (a < 3e3)].max() < 3e-3
    assert rel.max() < 1.5e-2
    # x = 0 (an underflowed draw): 0, as PyTorch's
    zero = hx._standard_gamma_grad(hx.tensor([0.5, 2.0]), hx.tensor([0.0, 0.0]))
    assert zero.tolist() == [0.0, 0.0]


def test_standard_gamma_grad_checks_its_arguments():
    with pytest.raises(Exception, match="same shape"):
        hx._standard_gamma_grad(hx.ones(2), hx.ones(3))
    with pytest.raises(TypeError, match="floating-point"):
        hx._standard_gamma_grad(hx.ones(2, dtype=hx.int64), hx.ones(2))


@pytest.mark.parametrize("alpha", [0.05, 0.5, 1.0, 3.0, 50.0])
def test_standard_gamma_draws_follow_the_gamma_law(alpha):
    hx.manual_seed(1)
    n = 100_000
    x = hx._standard_gamma(hx.full((n,), alpha, dtype=hx.float64)).numpy()
    # mean and variance within 5 standard errors (a few tenths of a percent to 2.5%)
    se_mean = math.sqrt(alpha / n)
    se_var = alpha * math.sqrt((2 + 6 / alpha) / n)
    assert abs(x.mean() - alpha) < 5 * se_mean
    assert abs(x.var() - alpha) < 5 * se_var
    # and the whole law: Kolmogorov-Smirnov against the gamma cdf
    assert st.kstest(x, st.gamma(alpha).cdf).pvalue > 1e-3


def test_standard_gamma_shape_dtype_seed_and_edges_as_pytorchs():
    a = hx.tensor([[0.5, 2.0, 9.0]]).expand(4, 3).t()  # strided, expanded input
    hx.manual_seed(4)
    x = hx._standard_gamma(a)
    assert x.shape == (3, 4) and x.dtype is hx.float32 and bool((x > 0).all())
    hx.manual_seed(4)
    assert np.array_equal(hx._standard_gamma(a).numpy(), x.numpy())
    g1, g2 = hx.Generator().manual_seed(9), hx.Generator().manual_seed(9)
    assert np.array_equal(hx._standard_gamma(a, g1).numpy(),
                          hx._standard_gamma(a, generator=g2).numpy())
    assert hx._standard_gamma(hx.ones(0, 2)).shape == (0, 2)
    assert hx._standard_gamma(hx.tensor(2.0)).shape == ()
    # alpha <= 0 or NaN gives the smallest normal, as PyTorch's does
    bad = hx.tensor([-1.0, 0.0, math.nan])
    np.testing.assert_array_equal(hx._standard_gamma(bad).numpy(),
                                  torch._standard_gamma(torch.tensor(bad.numpy())).numpy())
    # tiny alpha underflows to the smallest normal, never 0
    assert bool((hx._standard_gamma(hx.full((100,), 1e-3)) > 0).all())
    with pytest.raises(TypeError, match="floating-point"):
        hx._standard_gamma(hx.tensor([1, 2]))


def test_standard_gamma_gradient_is_standard_gamma_grad_at_the_draw():
    a = hx.tensor([0.05, 0.7, 2.0, 30.0], dtype=hx.float64, requires_grad=True)
    hx.manual_seed(2)
    x = hx._standard_gamma(a)
    w = hx.tensor([1.0, -2.0, 0.5, 3.0], dtype=hx.float64)
    (x * w).sum().backward()
    want = hx._standard_gamma_grad(a.detach(), x.detach()) * w
    np.testing.assert_allclose(a.grad.numpy(), want.numpy(), rtol=1e-14)
    tw = torch._standard_gamma_grad(torch.tensor(a.detach().numpy()),
                                    torch.tensor(x.detach().numpy())).numpy() * w.numpy()
    np.testing.assert_allclose(a.grad.numpy(), tw, rtol=1.5e-2)


# -- the distributions against PyTorch ------------------------------------------------------

SPECS = {
    "Gamma": (lambda M, p: M.Gamma(p["c"], p["r"]), {"c": CONC, "r": RATE}, X),
    "Chi2": (lambda M, p: M.Chi2(p["df"]), {"df": CONC * 2}, X),
    "Beta": (lambda M, p: M.Beta(p["a"], p["b"]), {"a": CONC, "b": RATE[::-1].copy()},
             np.array([[0.1, 0.5, 0.9], [0.3, 0.02, 0.7]])),
    "Dirichlet": (lambda M, p: M.Dirichlet(p["c"]), {"c": SIMPLEX_C}, SIMPLEX_X),
    "StudentT": (lambda M, p: M.StudentT(p["df"], p["loc"], p["scale"]),
                 {"df": np.array([0.7, 1.5, 4.0]), "loc": np.array([[0.0], [1.0]]),
                  "scale": np.array([1.0, 0.5, 2.0])}, RNG.standard_normal((3, 2, 3))),
}
QUANTITIES = {
    "log_prob": lambda d, v: d.log_prob(v), "entropy": lambda d, v: d.entropy(),
    "mean": lambda d, v: d.mean, "mode": lambda d, v: d.mode,
    "variance": lambda d, v: d.variance, "stddev": lambda d, v: d.stddev,
    "cdf": lambda d, v: d.cdf(v),
}


def build(name, lib, constant=()):
    ctor, params, _ = SPECS[name]
    make = hx.tensor if lib == "hx" else torch.tensor
    leaves = {k: make(v, requires_grad=k not in constant) for k, v in params.items()}
    return ctor(D if lib == "hx" else TD, leaves), leaves


def outcome(f):
    try:
        return f()
    except NotImplementedError as e:
        return e


@pytest.mark.parametrize("quantity", sorted(QUANTITIES))
@pytest.mark.parametrize("name", sorted(SPECS))
def test_values_and_gradients_match_pytorch(name, quantity):
    f = QUANTITIES[quantity]
    # (the cdf has no gradient in the concentration, on either side: the rest only)
    constant = ("c", "df") if quantity == "cdf" else ()
    hd, hp = build(name, "hx", constant)
    td, tp = build(name, "torch", constant)
    hv = hx.tensor(SPECS[name][2], requires_grad=True)
    tv = torch.tensor(SPECS[name][2], requires_grad=True)
    want = outcome(lambda: f(td, tv))
    got = outcome(lambda: f(hd, hv))
    if isinstance(want, Exception):
        assert isinstance(got, NotImplementedError), f"{name}.{quantity}: gave {got}"
        return
    assert got.shape == tuple(want.shape) and got.dtype is hx.float64
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10,
                               atol=1e-12, equal_nan=True, err_msg=f"{name}.{quantity}")
    if not want.requires_grad:
        return
    finite = np.isfinite(want.detach().numpy())
    weights = np.where(finite, np.linspace(0.5, 1.5, finite.size).reshape(finite.shape), 0)
    t_out = torch.where(torch.tensor(finite), want, 0.0).mul(torch.tensor(weights)).sum()
    h_out = hx.where(hx.tensor(finite), got, 0.0).mul(hx.tensor(weights)).sum()
    names = [k for k in tp if k not in constant]
    t_grads = torch.autograd.grad(t_out, [tp[k] for k in names] + [tv], allow_unused=True)
    h_grads = hx.autograd.grad(h_out, [hp[k] for k in names] + [hv], allow_unused=True)
    for k, t, h in zip(names + ["value"], t_grads, h_grads):
        if t is None:
            assert h is None or not np.any(h.numpy()), f"{name}.{quantity} d/d{k}"
            continue
        np.testing.assert_allclose(h.numpy(), t.numpy(), rtol=1e-8, atol=1e-10,
                                   err_msg=f"{name}.{quantity} d/d{k}")


def test_gamma_cdf_refuses_a_gradient_in_the_concentration_as_pytorch():
    c = hx.tensor([2.0], dtype=hx.float64, requires_grad=True)
    out = D.Gamma(c, 1.0).cdf(hx.tensor([1.0], dtype=hx.float64))
    with pytest.raises(NotImplementedError, match="igamma: input"):
        out.sum().backward()


def test_gamma_cdf_matches_pytorch_across_its_range():
    c = np.array([0.01, 0.5, 1.0, 4.0, 4.0, 100.0, 1e4])
    x = np.array([1e-5, 3.0, 0.2, 4.0, 20.0, 90.0, 1.01e4])
    got = D.Gamma(hx.tensor(c), 1.0).cdf(hx.tensor(x)).numpy()
    want = TD.Gamma(torch.tensor(c), 1.0).cdf(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-8)  # (PyTorch's: within 1e-9)
    mpmath.mp.dps = 30
    exact = [float(mpmath.gammainc(a, 0, v, regularized=True)) for a, v in zip(c, x)]
    np.testing.assert_allclose(got, exact, rtol=5e-11)  # (a log x at a = 1e4)
    assert D.Gamma(2.0, 1.0).cdf(hx.tensor(0.0)).item() == 0.0


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("sample_shape", [(), (5,), (2, 3)])
def test_sample_shapes_and_flags_match_pytorch(name, sample_shape):
    hd, _ = build(name, "hx")
    td, _ = build(name, "torch")
    assert hd.batch_shape == tuple(td.batch_shape) and hd.event_shape == tuple(td.event_shape)
    want = td.sample(sample_shape)
    got = hd.sample(sample_shape)
    assert got.shape == tuple(want.shape) and got.dtype is hx.float64
    assert not got.requires_grad and hd.has_rsample == td.has_rsample
    assert hd.rsample(sample_shape).requires_grad
    assert bool(hd.support.check(got).all())
    shape = (4,) + tuple(td.batch_shape)
    he, te = hd.expand(shape), td.expand(shape)
    assert he.batch_shape == tuple(te.batch_shape) and he.event_shape == tuple(te.event_shape)
    v = SPECS[name][2]
    v = v[0] if v.ndim > len(td.batch_shape + td.event_shape) else v
    np.testing.assert_allclose(he.log_prob(hx.tensor(v)).detach().numpy(),
                               te.log_prob(torch.tensor(v)).detach().numpy(), rtol=1e-10)
    assert type(he) is type(hd) and he.sample((2,)).shape == (2,) + shape + hd.event_shape


def _moments(draws):
    return draws.mean(0), draws.var(0)


@pytest.mark.parametrize("name,make,mean,var", [
    ("Gamma", lambda: D.Gamma(hx.tensor([0.3, 2.0, 20.0], dtype=hx.float64), 2.0),
     np.array([0.15, 1.0, 10.0]), np.array([0.075, 0.5, 5.0])),
    ("Chi2", lambda: D.Chi2(hx.tensor([1.0, 5.0], dtype=hx.float64)),
     np.array([1.0, 5.0]), np.array([2.0, 10.0])),
    ("Beta", lambda: D.Beta(hx.tensor([0.5, 2.0], dtype=hx.float64), 3.0),
     np.array([0.5 / 3.5, 0.4]), np.array([1.5 / (3.5 ** 2 * 4.5), 6 / (25 * 6)])),
    ("StudentT", lambda: D.StudentT(hx.tensor([6.0, 30.0], dtype=hx.float64), 1.0, 2.0),
     np.array([1.0, 1.0]), np.array([4 * 1.5, 4 * 30 / 28])),
])
def test_draws_have_the_right_mean_and_variance(name, make, mean, var):
    hx.manual_seed(6)
    n = 200_000
    m, v = _moments(make().sample((n,)).numpy())
    # the mean within 5 standard errors (a fraction of a percent), the variance 3%
    assert np.all(np.abs(m - mean) < 5 * np.sqrt(var / n)), (name, m, mean)
    np.testing.assert_allclose(v, var, rtol=0.03, err_msg=name)


def test_dirichlet_draws_have_the_right_moments():
    c = np.array([0.3, 1.0, 4.0])
    hx.manual_seed(8)
    x = D.Dirichlet(hx.tensor(c, dtype=hx.float64)).sample((200_000,)).numpy()
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-12)
    m, v = _moments(x)
    t = c.sum()
    np.testing.assert_allclose(m, c / t, rtol=0.01)
    np.testing.assert_allclose(v, c * (t - c) / (t * t * (t + 1)), rtol=0.02)
    cov = np.cov(x[:, 0], x[:, 2])[0, 1]
    np.testing.assert_allclose(cov, -c[0] * c[2] / (t * t * (t + 1)), rtol=0.04)


def _expected_gradient(make, f, n=100_000):
    """The mean over n reparameterized draws of d f(x) / d params."""
    params = make()
    hx.manual_seed(12)
    f(params[0].rsample((n,))).sum().div(n).backward()
    return [p.grad.numpy() for p in params[1:]]


def test_rsample_gradients_are_unbiased_for_the_moments():
    """d E[f(x)] / d theta in closed form against the mean pathwise gradient (the same
    estimator PyTorch's is: its draws differ, so the two agree in distribution)."""
    c = hx.tensor([0.2, 1.5, 6.0], dtype=hx.float64, requires_grad=True)
    r = hx.tensor([1.0, 0.5, 2.0], dtype=hx.float64, requires_grad=True)
    gc, gr = _expected_gradient(lambda: (D.Gamma(c, r), c, r), lambda x: x)
    cn, rn = c.detach().numpy(), r.detach().numpy()
    # E[x] = c / r
    np.testing.assert_allclose(gc, 1 / rn, rtol=0.02)
    np.testing.assert_allclose(gr, -cn / rn ** 2, rtol=0.02)
    a = hx.tensor([0.4, 2.0, 1.0], dtype=hx.float64, requires_grad=True)
    w = np.array([1.0, -2.0, 3.0])
    (ga,) = _expected_gradient(lambda: (D.Dirichlet(a), a),
                               lambda x: x * hx.tensor(w))
    an = a.detach().numpy()
    t = an.sum()
    np.testing.assert_allclose(ga, (w - (w * an).sum() / t) / t, rtol=0.03, atol=2e-3)
    b1 = hx.tensor([0.5, 3.0], dtype=hx.float64, requires_grad=True)
    b0 = hx.tensor([2.0, 0.6], dtype=hx.float64, requires_grad=True)
    g1, g0 = _expected_gradient(lambda: (D.Beta(b1, b0), b1, b0), lambda x: x)
    s = (b1 + b0).detach().numpy()
    np.testing.assert_allclose(g1, b0.detach().numpy() / s ** 2, rtol=0.03)
    np.testing.assert_allclose(g0, -b1.detach().numpy() / s ** 2, rtol=0.03)


def test_dirichlet_rsample_gradient_matches_pytorchs_in_distribution():
    a = np.array([0.5, 1.2, 3.0])
    w = np.array([2.0, -1.0, 0.5])
    ha = hx.tensor(a, requires_grad=True)
    ta = torch.tensor(a, requires_grad=True)
    hx.manual_seed(3)
    torch.manual_seed(3)
    n = 100_000
    (D.Dirichlet(ha).rsample((n,)) * hx.tensor(w)).pow(2).sum().div(n).backward()
    (TD.Dirichlet(ta).rsample((n,)) * torch.tensor(w)).pow(2).sum().div(n).backward()
    np.testing.assert_allclose(ha.grad.numpy(), ta.grad.numpy(), rtol=0.05, atol=3e-3)


KL_PAIRS = {
    "Gamma": (lambda M, a, b: M.Gamma(a, b), (CONC, RATE), (CONC[::-1] + 0.5, RATE * 2)),
    "Beta": (lambda M, a, b: M.Beta(a, b), (CONC, RATE), (CONC * 0.5, RATE[::-1] + 1)),
    "Dirichlet": (lambda M, a: M.Dirichlet(a), (SIMPLEX_C,), (SIMPLEX_C[::-1] * 2,)),
}
MIXED = {
    "Exponential-Gamma": (lambda M, r: M.Exponential(r), lambda M, c, r: M.Gamma(c, r),
                          (RATE,), (CONC, RATE[::-1])),
    "Gamma-Exponential": (lambda M, c, r: M.Gamma(c, r), lambda M, r: M.Exponential(r),
                          (CONC, RATE), (RATE[::-1],)),
}


def _kl_check(ctor_p, ctor_q, pa, qa, what):
    hs = [hx.tensor(np.ascontiguousarray(a), requires_grad=True) for a in pa + qa]
    ts = [torch.tensor(np.ascontiguousarray(a), requires_grad=True) for a in pa + qa]
    n = len(pa)
    got = D.kl_divergence(ctor_p(D, *hs[:n]), ctor_q(D, *hs[n:]))
    want = TD.kl_divergence(ctor_p(TD, *ts[:n]), ctor_q(TD, *ts[n:]))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10,
                               err_msg=what)
    got.sum().backward()
    want.sum().backward()
    for h, t in zip(hs, ts):
        np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-14,
                                   err_msg=what)


@pytest.mark.parametrize("name", sorted(KL_PAIRS))
def test_kl_divergence_matches_pytorch(name):
    ctor, pa, qa = KL_PAIRS[name]
    _kl_check(ctor, ctor, pa, qa, name)


@pytest.mark.parametrize("name", sorted(MIXED))
def test_mixed_kl_divergence_matches_pytorch(name):
    _kl_check(*MIXED[name], name)


def test_kl_estimate_agrees_with_the_closed_form():
    p, q = D.Gamma(2.0, 1.5), D.Gamma(3.0, 0.7)
    hx.manual_seed(0)
    x = p.sample((200_000,))
    mc = (p.log_prob(x) - q.log_prob(x)).mean().item()
    assert mc == pytest.approx(D.kl_divergence(p, q).item(), rel=0.02)


def test_validation_errors_as_pytorchs():
    with pytest.raises(ValueError, match="concentration"):
        D.Gamma(hx.tensor([-1.0]), 1.0)
    with pytest.raises(ValueError, match="rate"):
        D.Gamma(1.0, hx.tensor([0.0]))
    with pytest.raises(ValueError, match="df"):
        D.Chi2(hx.tensor([-2.0]))
    with pytest.raises(ValueError, match="concentration"):  # (its Dirichlet's, as PyTorch)
        D.Beta(hx.tensor([1.0]), hx.tensor([-1.0]))
    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.Dirichlet(hx.tensor(1.0))
    with pytest.raises(ValueError, match="concentration"):
        D.Dirichlet(hx.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="scale"):
        D.StudentT(3.0, 0.0, hx.tensor([-1.0]))
    with pytest.raises(ValueError, match="support"):
        D.Gamma(1.0, 1.0).log_prob(hx.tensor([-0.5]))
    with pytest.raises(ValueError, match="support"):
        D.Beta(1.0, 1.0).log_prob(hx.tensor([1.5]))
    with pytest.raises(ValueError, match="support"):
        D.Dirichlet(hx.ones(3)).log_prob(hx.tensor([0.5, 0.6, 0.1]))
    D.Gamma(hx.tensor([-1.0]), 1.0, validate_args=False)  # (off: no check)


def test_number_parameters_give_a_scalar_batch_as_pytorchs():
    for h, t in ((D.Gamma(2.0, 3.0), TD.Gamma(2.0, 3.0)), (D.Chi2(3.0), TD.Chi2(3.0)),
                 (D.Beta(2.0, 3.0), TD.Beta(2.0, 3.0)),
                 (D.StudentT(3.0), TD.StudentT(3.0))):
        assert h.batch_shape == () == tuple(t.batch_shape)
        assert h.sample().shape == () and h.sample().dtype is hx.float32
        assert h.mean.item() == pytest.approx(t.mean.item(), rel=1e-6, nan_ok=True)
    assert D.Chi2(4.0).df.item() == 4.0
    assert D.Beta(2.0, 3.0).concentration1.item() == 2.0
    assert D.Beta(2.0, 3.0).concentration0.shape == ()


@pytest.mark.gpu
def test_a_gpu_gamma_draws_on_the_gpu(be):
    c = hx.tensor([0.5, 2.0], device="gpu", requires_grad=True)
    x = D.Gamma(c, 2.0).rsample((3,))
    assert x.device.type == "gpu"
    x.sum().backward()
    assert c.grad.device.type == "gpu" and c.grad.shape == (2,)
    d = D.Dirichlet(hx.tensor([0.5, 1.0, 2.0], device="gpu"))
    s = d.sample((4,))
    assert s.device.type == "gpu"
    np.testing.assert_allclose(s.cpu().numpy().sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(d.log_prob(s).cpu().numpy(),
                               D.Dirichlet(hx.tensor([0.5, 1.0, 2.0])).log_prob(s.cpu())
                               .numpy(), rtol=1e-4)
