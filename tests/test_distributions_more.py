"""LogNormal, HalfNormal, Cauchy, Gumbel, Poisson, Geometric and Binomial against
torch.distributions: values and float64 gradients of log_prob / entropy / moments /
cdf / icdf and KL, shapes, expand, validation, and the statistics of the draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as st

import haelixe as hx
import haelixe.distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions

RNG = np.random.default_rng(5)
LOC = RNG.standard_normal((2, 3))
SCALE = np.abs(RNG.standard_normal(3)) + 0.3
POS = np.abs(RNG.standard_normal((4, 2, 3))) + 0.05
REAL = RNG.standard_normal((4, 2, 3)) * 2
COUNTS = np.array([[0.0, 3.0, 1.0], [2.0, 0.0, 5.0]])
PROBS = np.array([0.2, 0.55, 0.9])

SPECS = {
    "LogNormal": (lambda M, p: M.LogNormal(p["loc"], p["scale"]),
                  {"loc": LOC, "scale": SCALE}, POS),
    "HalfNormal": (lambda M, p: M.HalfNormal(p["scale"]), {"scale": SCALE}, POS),
    "Cauchy": (lambda M, p: M.Cauchy(p["loc"], p["scale"]), {"loc": LOC, "scale": SCALE},
               REAL),
    "Gumbel": (lambda M, p: M.Gumbel(p["loc"], p["scale"]), {"loc": LOC, "scale": SCALE},
               REAL),
    "Poisson": (lambda M, p: M.Poisson(p["rate"]), {"rate": SCALE * 3}, COUNTS),
    "Geometric(probs)": (lambda M, p: M.Geometric(probs=p["probs"]), {"probs": PROBS},
                         COUNTS),
    "Geometric(logits)": (lambda M, p: M.Geometric(logits=p["logits"]), {"logits": LOC},
                          COUNTS),
    "Binomial(probs)": (lambda M, p: M.Binomial(5, probs=p["probs"]), {"probs": PROBS},
                        COUNTS),
    "Binomial(logits)": (lambda M, p: M.Binomial(hx_or_torch(M, [[5.0], [8.0]]),
                                                 logits=p["logits"]),
                         {"logits": LOC}, COUNTS),
}


def hx_or_torch(M, v):
    return hx.tensor(v, dtype=hx.float64) if M is D else torch.tensor(v, dtype=torch.float64)


QUANTITIES = {
    "log_prob": lambda d, v: d.log_prob(v), "entropy": lambda d, v: d.entropy(),
    "mean": lambda d, v: d.mean, "mode": lambda d, v: d.mode,
    "variance": lambda d, v: d.variance, "stddev": lambda d, v: d.stddev,
    "cdf": lambda d, v: d.cdf(v),
}


def build(name, lib):
    ctor, params, _ = SPECS[name]
    make = hx.tensor if lib == "hx" else torch.tensor
    leaves = {k: make(v, requires_grad=True) for k, v in params.items()}
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
    hd, hp = build(name, "hx")
    td, tp = build(name, "torch")
    value = SPECS[name][2]
    want = outcome(lambda: f(td, torch.tensor(value)))
    got = outcome(lambda: f(hd, hx.tensor(value)))
    if isinstance(want, Exception):
        assert isinstance(got, NotImplementedError), f"{name}.{quantity}: gave {got}"
        return
    assert not isinstance(got, Exception), f"{name}.{quantity}: raised {got!r}"
    assert got.shape == tuple(want.shape) and got.dtype is hx.float64, (got.shape, want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10,
                               atol=1e-12, equal_nan=True, err_msg=f"{name}.{quantity}")
    if not want.requires_grad:
        return
    finite = np.isfinite(want.detach().numpy())
    weights = np.where(finite, np.linspace(0.5, 1.5, finite.size).reshape(finite.shape), 0)
    torch.where(torch.tensor(finite), want, 0.0).mul(torch.tensor(weights)).sum().backward()
    hx.where(hx.tensor(finite), got, 0.0).mul(hx.tensor(weights)).sum().backward()
    for k, t in tp.items():
        if t.grad is None:
            assert hp[k].grad is None or not np.any(hp[k].grad.numpy())
            continue
        np.testing.assert_allclose(hp[k].grad.numpy(), t.grad.numpy(), rtol=1e-8,
                                   atol=1e-10, err_msg=f"{name}.{quantity} d/d{k}")


@pytest.mark.parametrize("name", ["LogNormal", "HalfNormal", "Cauchy", "Gumbel"])
def test_icdf_matches_pytorch_and_inverts_the_cdf(name):
    q = np.array([[0.01, 0.3, 0.5], [0.7, 0.95, 0.999]])
    hd, hp = build(name, "hx")
    td, tp = build(name, "torch")
    got, want = hd.icdf(hx.tensor(q)), td.icdf(torch.tensor(q))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-9)
    np.testing.assert_allclose(hd.cdf(got.detach()).detach().numpy(), q, rtol=1e-9)
    got.sum().backward()
    want.sum().backward()
    for k in tp:
        np.testing.assert_allclose(hp[k].grad.numpy(), tp[k].grad.numpy(), rtol=1e-8)


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("sample_shape", [(), (5,), (2, 3)])
def test_sample_shapes_expand_and_flags_match_pytorch(name, sample_shape):
    hd, _ = build(name, "hx")
    td, _ = build(name, "torch")
    assert hd.batch_shape == tuple(td.batch_shape) and hd.event_shape == tuple(td.event_shape)
    want, got = td.sample(sample_shape), hd.sample(sample_shape)
    assert got.shape == tuple(want.shape) and got.dtype is hx.float64
    assert not got.requires_grad and hd.has_rsample == td.has_rsample
    if td.has_rsample:
        assert hd.rsample(sample_shape).requires_grad
    assert bool(hd.support.check(got).all())
    shape = (4,) + tuple(td.batch_shape)
    he, te = hd.expand(shape), td.expand(shape)
    assert he.batch_shape == tuple(te.batch_shape) and type(he) is type(hd)
    v = SPECS[name][2]
    v = v[(0,) * (v.ndim - len(td.batch_shape))]  # (one value per batch element)
    np.testing.assert_allclose(he.log_prob(hx.tensor(v)).detach().numpy(),
                               te.log_prob(torch.tensor(v)).detach().numpy(), rtol=1e-10)


@pytest.mark.parametrize("name,make,law", [
    ("LogNormal", lambda: D.LogNormal(hx.tensor(0.3, dtype=hx.float64), 0.6),
     st.lognorm(0.6, scale=math.exp(0.3))),
    ("HalfNormal", lambda: D.HalfNormal(hx.tensor(1.7, dtype=hx.float64)),
     st.halfnorm(scale=1.7)),
    ("Cauchy", lambda: D.Cauchy(hx.tensor(-1.0, dtype=hx.float64), 0.5),
     st.cauchy(-1.0, 0.5)),
    ("Gumbel", lambda: D.Gumbel(hx.tensor(2.0, dtype=hx.float64), 3.0),
     st.gumbel_r(2.0, 3.0)),
])
def test_continuous_draws_follow_their_law(name, make, law):
    hx.manual_seed(2)
    x = make().sample((100_000,)).numpy()
    assert st.kstest(x, law.cdf).pvalue > 1e-3, name
    if name != "Cauchy":  # (no moments)
        n = x.size
        assert abs(x.mean() - law.mean()) < 5 * law.std() / math.sqrt(n)
        np.testing.assert_allclose(x.var(), law.var(), rtol=0.04)


@pytest.mark.parametrize("name,make,mean,var", [
    ("Poisson", lambda: D.Poisson(hx.tensor([0.3, 4.0, 50.0], dtype=hx.float64)),
     np.array([0.3, 4.0, 50.0]), np.array([0.3, 4.0, 50.0])),
    ("Geometric", lambda: D.Geometric(hx.tensor([0.1, 0.5, 0.9], dtype=hx.float64)),
     np.array([9.0, 1.0, 1 / 9]), np.array([90.0, 2.0, 0.1 / 0.81])),
    ("Binomial", lambda: D.Binomial(hx.tensor([3.0, 20.0, 100.0], dtype=hx.float64),
                                    hx.tensor([0.5, 0.1, 0.7], dtype=hx.float64)),
     np.array([1.5, 2.0, 70.0]), np.array([0.75, 1.8, 21.0])),
])
def test_count_draws_have_the_right_mean_and_variance(name, make, mean, var):
    hx.manual_seed(3)
    n = 200_000
    x = make().sample((n,)).numpy()
    assert np.all(x == np.floor(x)) and np.all(x >= 0)
    assert np.all(np.abs(x.mean(0) - mean) < 5 * np.sqrt(var / n)), (name, x.mean(0))
    np.testing.assert_allclose(x.var(0), var, rtol=0.03, err_msg=name)


def test_rsample_gradients_are_the_pathwise_ones():
    loc = hx.tensor([0.2, -0.5], dtype=hx.float64, requires_grad=True)
    scale = hx.tensor([0.5, 1.5], dtype=hx.float64, requires_grad=True)
    hx.manual_seed(1)
    n = 100_000
    D.LogNormal(loc, scale).rsample((n,)).sum().div(n).backward()
    mean = np.exp(loc.detach().numpy() + scale.detach().numpy() ** 2 / 2)
    np.testing.assert_allclose(loc.grad.numpy(), mean, rtol=0.02)  # dE/dloc = E
    np.testing.assert_allclose(scale.grad.numpy(), mean * scale.detach().numpy(), rtol=0.03)
    s = hx.tensor([0.7, 2.0], dtype=hx.float64, requires_grad=True)
    D.HalfNormal(s).rsample((n,)).sum().div(n).backward()
    np.testing.assert_allclose(s.grad.numpy(), math.sqrt(2 / math.pi), rtol=0.01)
    g = hx.tensor([1.0, 3.0], dtype=hx.float64, requires_grad=True)
    D.Gumbel(0.0, g).rsample((n,)).sum().div(n).backward()
    np.testing.assert_allclose(g.grad.numpy(), 0.5772156649015329, rtol=0.03)


KL = {
    "LogNormal": (lambda M, a, b: M.LogNormal(a, b), (LOC, SCALE), (LOC * 0.5, SCALE + 1)),
    "HalfNormal": (lambda M, a: M.HalfNormal(a), (SCALE,), (SCALE[::-1] + 0.2,)),
    "Gumbel": (lambda M, a, b: M.Gumbel(a, b), (LOC, SCALE), (LOC[::-1], SCALE * 2)),
    "Cauchy": (lambda M, a, b: M.Cauchy(a, b), (LOC, SCALE), (LOC * 2, SCALE[::-1])),
    "Poisson": (lambda M, a: M.Poisson(a), (SCALE * 2,), (SCALE[::-1] + 1,)),
    "Geometric": (lambda M, a: M.Geometric(a), (PROBS,), (PROBS[::-1] * 0.9,)),
    "Binomial": (lambda M, a: M.Binomial(6, a), (PROBS,), (PROBS[::-1] * 0.9,)),
}


@pytest.mark.parametrize("name", sorted(KL))
def test_kl_divergence_matches_pytorch(name):
    ctor, pa, qa = KL[name]
    hs = [hx.tensor(np.ascontiguousarray(a), requires_grad=True) for a in pa + qa]
    ts = [torch.tensor(np.ascontiguousarray(a), requires_grad=True) for a in pa + qa]
    n = len(pa)
    got = D.kl_divergence(ctor(D, *hs[:n]), ctor(D, *hs[n:]))
    want = TD.kl_divergence(ctor(TD, *ts[:n]), ctor(TD, *ts[n:]))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10)
    got.sum().backward()
    want.sum().backward()
    for h, t in zip(hs, ts):
        np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-14)


def test_binomial_kl_with_unequal_counts_as_pytorchs():
    p, q = D.Binomial(hx.tensor([5.0, 7.0]), 0.3), D.Binomial(hx.tensor([5.0, 4.0]), 0.4)
    tp = TD.Binomial(torch.tensor([5.0, 7.0]), 0.3)
    tq = TD.Binomial(torch.tensor([5.0, 4.0]), 0.4)
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(),
                               TD.kl_divergence(tp, tq).numpy(), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        D.kl_divergence(q, p)


def test_validation_errors_as_pytorchs():
    with pytest.raises(ValueError, match="scale"):
        D.LogNormal(0.0, hx.tensor([-1.0]))
    with pytest.raises(ValueError, match="scale"):
        D.HalfNormal(hx.tensor([0.0]))
    with pytest.raises(ValueError, match="rate"):
        D.Poisson(hx.tensor([-0.5]))
    with pytest.raises(ValueError, match="to be positive"):
        D.Geometric(hx.tensor([0.0, 0.5]))
    with pytest.raises(ValueError, match="but not both"):
        D.Geometric(probs=hx.tensor([0.5]), logits=hx.tensor([0.0]))
    with pytest.raises(ValueError, match="total_count"):
        D.Binomial(hx.tensor([-1.0]), hx.tensor([0.5]))
    with pytest.raises(ValueError, match="support"):
        D.Poisson(hx.tensor([1.0])).log_prob(hx.tensor([1.5]))
    with pytest.raises(ValueError, match="support"):
        D.Binomial(3, hx.tensor([0.5])).log_prob(hx.tensor([4.0]))
    with pytest.raises(ValueError, match="support"):
        D.LogNormal(0.0, 1.0).log_prob(hx.tensor([-1.0]))
    with pytest.raises(NotImplementedError, match="Inhomogeneous"):
        D.Binomial(hx.tensor([2.0, 3.0]), 0.5).entropy()


def test_binomial_enumerate_support_and_entropy_match_pytorch():
    h = D.Binomial(4, hx.tensor([0.2, 0.7], dtype=hx.float64))
    t = TD.Binomial(4, torch.tensor([0.2, 0.7], dtype=torch.float64))
    for expand in (True, False):
        np.testing.assert_array_equal(h.enumerate_support(expand).numpy(),
                                      t.enumerate_support(expand).numpy())
    np.testing.assert_allclose(h.entropy().numpy(), t.entropy().numpy(), rtol=1e-12)


def test_number_parameters_give_a_scalar_batch_as_pytorchs():
    for h, t in ((D.LogNormal(0.0, 1.0), TD.LogNormal(0.0, 1.0)),
                 (D.HalfNormal(2.0), TD.HalfNormal(2.0)),
                 (D.Cauchy(0.0, 1.0), TD.Cauchy(0.0, 1.0)),
                 (D.Gumbel(0.0, 1.0), TD.Gumbel(0.0, 1.0)),
                 (D.Poisson(3.0), TD.Poisson(3.0)), (D.Geometric(0.3), TD.Geometric(0.3))):
        assert h.batch_shape == () == tuple(t.batch_shape), type(h)
        assert h.sample().shape == () and h.sample().dtype is hx.float32
        assert h.mean.item() == pytest.approx(t.mean.item(), rel=1e-6, nan_ok=True)


def test_the_default_generator_repeats_the_draws():
    for make in (lambda: D.Poisson(hx.tensor([2.0, 9.0])),
                 lambda: D.Binomial(10, hx.tensor([0.3, 0.6])),
                 lambda: D.Geometric(hx.tensor([0.3])), lambda: D.Gumbel(0.0, 1.0)):
        hx.manual_seed(5)
        a = make().sample((50,))
        hx.manual_seed(5)
        assert np.array_equal(a.numpy(), make().sample((50,)).numpy())
