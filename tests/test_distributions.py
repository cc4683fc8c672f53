"""haelixe.distributions against torch.distributions: log_prob, entropy, moments,
cdf/icdf and KL values with their float64 gradients, sample shapes, the statistics of
the draws, validation errors, broadcasting, and a REINFORCE step."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import haelixe as hx
import haelixe.distributions as D
from haelixe.distributions import constraints

torch = pytest.importorskip("torch")
TD = torch.distributions

RNG = np.random.default_rng(7)
LOC = RNG.standard_normal((2, 3))
SCALE = np.abs(RNG.standard_normal(3)) + 0.3  # broadcasts against LOC
COV = np.array([[2.0, 0.6, -0.3], [0.6, 1.5, 0.2], [-0.3, 0.2, 0.8]])
PROBS = np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.0, 0.25, 0.25]])
LOGITS = RNG.standard_normal((2, 4))


def _one_hot(indices, n):
    return np.eye(n)[indices]


#: name -> (constructor over a distributions module and its parameters, parameters,
#: a value to score (batch dims broadcast against it), its dtype)
SPECS = {
    "Normal": (lambda M, p: M.Normal(p["loc"], p["scale"]),
               {"loc": LOC, "scale": SCALE}, RNG.standard_normal((4, 2, 3)), "float64"),
    "Laplace": (lambda M, p: M.Laplace(p["loc"], p["scale"]),
                {"loc": LOC, "scale": SCALE}, RNG.standard_normal((4, 1, 3)), "float64"),
    "Uniform": (lambda M, p: M.Uniform(p["low"], p["high"]),
                {"low": LOC - 2.0, "high": LOC + SCALE}, LOC - 0.5, "float64"),
    "Exponential": (lambda M, p: M.Exponential(p["rate"]), {"rate": SCALE + LOC ** 2},
                    np.abs(RNG.standard_normal((5, 2, 3))), "float64"),
    "Bernoulli(probs)": (lambda M, p: M.Bernoulli(probs=p["probs"]),
                         {"probs": np.array([0.1, 0.5, 0.8])},
                         np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]]), "float64"),
    "Bernoulli(logits)": (lambda M, p: M.Bernoulli(logits=p["logits"]), {"logits": LOC},
                          np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]), "float64"),
    "Categorical(probs)": (lambda M, p: M.Categorical(probs=p["probs"]), {"probs": PROBS},
                           np.array([[3, 2], [0, 3], [1, 0]]), "int64"),
    "Categorical(logits)": (lambda M, p: M.Categorical(logits=p["logits"]),
                            {"logits": LOGITS}, np.array([[3, 2], [0, 1]]), "int64"),
    "OneHotCategorical": (lambda M, p: M.OneHotCategorical(logits=p["logits"]),
                          {"logits": LOGITS}, _one_hot(np.array([[3, 2], [0, 1]]), 4),
                          "float64"),
    "MultivariateNormal(cov)": (
        lambda M, p: M.MultivariateNormal(p["loc"], covariance_matrix=p["cov"]),
        {"loc": LOC, "cov": COV}, RNG.standard_normal((4, 2, 3)), "float64"),
    "MultivariateNormal(precision)": (
        lambda M, p: M.MultivariateNormal(p["loc"], precision_matrix=p["prec"]),
        {"loc": LOC[0], "prec": np.linalg.inv(COV)}, RNG.standard_normal((4, 3)), "float64"),
    "MultivariateNormal(scale_tril)": (
        lambda M, p: M.MultivariateNormal(p["loc"], scale_tril=p["tril"]),
        {"loc": LOC, "tril": np.linalg.cholesky(COV)}, RNG.standard_normal((2, 3)),
        "float64"),
    "Independent": (lambda M, p: M.Independent(M.Normal(p["loc"], p["scale"]), 1),
                    {"loc": LOC, "scale": SCALE}, RNG.standard_normal((4, 2, 3)), "float64"),
}


def build(name, lib):
    ctor, params, _, _ = SPECS[name]
    if lib == "hx":
        leaves = {k: hx.tensor(v, requires_grad=True) for k, v in params.items()}
        return ctor(D, leaves), leaves
    leaves = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    return ctor(TD, leaves), leaves


def value_of(name, lib):
    v, dtype = SPECS[name][2], SPECS[name][3]
    if lib == "hx":
        return hx.tensor(v, dtype=dtype)
    return torch.tensor(v, dtype=getattr(torch, dtype))


def close(got, want, rtol=1e-10, atol=1e-10, what=""):
    assert got.dtype.name == str(want.dtype).replace("torch.", ""), what
    assert got.shape == tuple(want.shape), (what, got.shape, want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol,
                               atol=atol, err_msg=what, equal_nan=True)


def outcome(f):
    try:
        return f()
    except NotImplementedError as e:
        return e


# -- values and gradients against PyTorch ------------------------------------------------

QUANTITIES = {
    "log_prob": lambda d, v: d.log_prob(v),
    "entropy": lambda d, v: d.entropy(),
    "mean": lambda d, v: d.mean,
    "mode": lambda d, v: d.mode,
    "variance": lambda d, v: d.variance,
    "stddev": lambda d, v: d.stddev,
    "perplexity": lambda d, v: d.perplexity(),
    "cdf": lambda d, v: d.cdf(v),
}


@pytest.mark.parametrize("quantity", sorted(QUANTITIES))
@pytest.mark.parametrize("name", sorted(SPECS))
def test_values_and_gradients_match_pytorch(name, quantity):
    f = QUANTITIES[quantity]
    hd, hp = build(name, "hx")
    td, tp = build(name, "torch")
    want = outcome(lambda: f(td, value_of(name, "torch")))
    got = outcome(lambda: f(hd, value_of(name, "hx")))
    if isinstance(want, Exception):
        assert isinstance(got, NotImplementedError), f"{name}.{quantity}: gave {got}"
        return
    assert not isinstance(got, Exception), f"{name}.{quantity}: raised {got!r}"
    close(got, want, what=f"{name}.{quantity}")
    if not (want.requires_grad and want.dtype.is_floating_point):
        assert not got.requires_grad
        return
    weights = np.linspace(0.5, 1.5, int(np.prod(want.shape))).reshape(want.shape)
    finite = np.isfinite(want.detach().numpy())
    weights = np.where(finite, weights, 0.0)  # (Uniform's -inf outside: no gradient)
    masked_t = torch.where(torch.tensor(finite), want, torch.zeros_like(want))
    masked_h = hx.where(hx.tensor(finite), got, hx.zeros_like(got))
    (masked_t * torch.tensor(weights)).sum().backward()
    (masked_h * hx.tensor(weights)).sum().backward()
    for k in tp:
        tg = tp[k].grad
        hg = hp[k].grad
        if tg is None:
            assert hg is None or not np.any(hg.numpy()), f"{name}.{quantity} d/d{k}"
            continue
        assert hg is not None, f"{name}.{quantity}: no gradient for {k}"
        close(hg, tg, rtol=1e-8, atol=1e-9, what=f"{name}.{quantity} d/d{k}")


def test_categorical_with_impossible_classes_as_pytorchs():
    """A logit of -inf is a class of probability 0: its log_prob is -inf, and the
    entropy, mean and KL stay finite."""
    logits = np.array([[0.0, -math.inf, 1.0], [2.0, 0.5, -math.inf]])
    hl, tl = hx.tensor(logits, requires_grad=True), torch.tensor(logits, requires_grad=True)
    hd, td = D.Categorical(logits=hl), TD.Categorical(logits=tl)
    close(hd.entropy(), td.entropy())
    close(hd.log_prob(hx.tensor([1, 1])), td.log_prob(torch.tensor([1, 1])))
    close(hd.probs, td.probs)
    hd.entropy().sum().backward()
    td.entropy().sum().backward()
    close(hl.grad, tl.grad)
    q = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    close(D.kl_divergence(hd, D.Categorical(probs=hx.tensor(q))),
          TD.kl_divergence(td, TD.Categorical(probs=torch.tensor(q))))


ICDF = ["Normal", "Laplace", "Uniform", "Exponential"]


@pytest.mark.parametrize("name", ICDF)
def test_icdf_and_cdf_invert_each_other_as_pytorchs(name):
    q = np.array([[0.01, 0.3, 0.5], [0.7, 0.95, 0.999]])
    hd, hp = build(name, "hx")
    td, tp = build(name, "torch")
    hq = hx.tensor(q, requires_grad=True)
    tq = torch.tensor(q, requires_grad=True)
    got, want = hd.icdf(hq), td.icdf(tq)
    close(got, want, rtol=1e-9, atol=1e-12, what=f"{name}.icdf")
    close(hd.cdf(got.detach()), torch.tensor(q), rtol=1e-9, atol=1e-12)
    got.sum().backward()
    want.sum().backward()
    close(hq.grad, tq.grad, rtol=1e-8, what=f"{name}.icdf d/dq")
    for k in tp:
        close(hp[k].grad, tp[k].grad, rtol=1e-8, atol=1e-12, what=f"{name}.icdf d/d{k}")


def test_float32_parameters_give_float32_and_numbers_give_a_scalar_batch():
    d = D.Normal(0.0, 1.0)
    assert d.batch_shape == () and d.loc.dtype is hx.float32
    assert d.log_prob(hx.tensor(0.5)).dtype is hx.float32
    np.testing.assert_allclose(d.log_prob(hx.tensor(0.5)).item(),
                               TD.Normal(0.0, 1.0).log_prob(torch.tensor(0.5)).item(),
                               rtol=1e-6)
    n = D.Normal(hx.tensor([0.0, 1.0]), 2.0)  # a number takes the tensor's dtype
    assert n.scale.dtype is hx.float32 and n.batch_shape == (2,)
    e = D.Exponential(hx.tensor([1.0, 2.0], dtype=hx.float64))
    assert e.rsample((3,)).dtype is hx.float64


def test_parameters_broadcast_as_pytorchs():
    for make in (lambda M, t: M.Normal(t(np.zeros((4, 1))), t(np.ones(3))),
                 lambda M, t: M.Laplace(t(np.zeros(3)), t(np.ones((2, 1)))),
                 lambda M, t: M.Uniform(t(np.zeros((2, 1, 1))), t(np.ones(3))),
                 lambda M, t: M.MultivariateNormal(t(np.zeros((4, 1, 3))),
                                                   scale_tril=t(np.eye(3)[None].repeat(2, 0)))):
        h, w = make(D, hx.tensor), make(TD, torch.tensor)
        assert h.batch_shape == w.batch_shape and h.event_shape == w.event_shape
        assert h.sample((5,)).shape == tuple(w.sample((5,)).shape)
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        D.Normal(hx.zeros(2), hx.ones(3))


def test_expand_matches_pytorch():
    for name in ("Normal", "Categorical(logits)", "Bernoulli(probs)", "Independent",
                 "MultivariateNormal(cov)", "Uniform", "OneHotCategorical"):
        hd, _ = build(name, "hx")
        td, _ = build(name, "torch")
        shape = (5,) + tuple(td.batch_shape)
        he, te = hd.expand(shape), td.expand(shape)
        assert he.batch_shape == te.batch_shape and he.event_shape == te.event_shape
        # (a value with more sample dims than the batch: its first sample, which
        # broadcasts against the expanded batch)
        hv, tv = value_of(name, "hx"), value_of(name, "torch")
        if hv.ndim > len(hd.batch_shape + hd.event_shape):
            hv, tv = hv[0], tv[0]
        close(he.log_prob(hv), te.log_prob(tv), what=name)
        assert he._validate_args == hd._validate_args


@pytest.mark.parametrize("name", ["Categorical(probs)", "Bernoulli(probs)",
                                  "OneHotCategorical"])
@pytest.mark.parametrize("expand", [True, False])
def test_enumerate_support_matches_pytorch(name, expand):
    hd, _ = build(name, "hx")
    td, _ = build(name, "torch")
    close(hd.enumerate_support(expand), td.enumerate_support(expand), what=name)


# -- KL divergence ------------------------------------------------------------------------

KL_PAIRS = {
    "Normal": (lambda M, a, b: M.Normal(a, b), (LOC, SCALE), (LOC[::-1] * 0.5, SCALE + 1.0)),
    "Laplace": (lambda M, a, b: M.Laplace(a, b), (LOC, SCALE), (LOC * 0.3, SCALE[::-1])),
    "Exponential": (lambda M, a: M.Exponential(a), (SCALE,), (SCALE[::-1] + 0.1,)),
    "Uniform": (lambda M, a, b: M.Uniform(a, b), (np.array([0.0, 0.5, -1.0]),
                                                  np.array([1.0, 2.0, 0.0])),
                (np.array([-1.0, 0.0, -0.5]), np.array([2.0, 3.0, 1.0]))),  # last: inf
    "Bernoulli": (lambda M, a: M.Bernoulli(probs=a), (np.array([0.2, 0.0, 1.0, 0.6, 0.3]),),
                  (np.array([0.5, 0.3, 0.4, 0.0, 1.0]),)),  # 0 and 1 on either side
    "Categorical": (lambda M, a: M.Categorical(probs=a), (PROBS,),
                    # (a 0 in q alone gives inf; in both, 0)
                    (np.array([[0.3, 0.3, 0.0, 0.4], [0.4, 0.0, 0.3, 0.3]]),)),
    "OneHotCategorical": (lambda M, a: M.OneHotCategorical(logits=a), (LOGITS,),
                          (LOGITS[::-1] * 2.0,)),
    "MultivariateNormal": (lambda M, a, b: M.MultivariateNormal(a, covariance_matrix=b),
                           (LOC, COV), (LOC[0] * -1.0, np.diag([1.0, 2.0, 0.5]) + 0.1)),
    "Independent": (lambda M, a, b: M.Independent(M.Normal(a, b), 1), (LOC, SCALE),
                    (LOC * 2.0, SCALE + 0.5)),
}


@pytest.mark.parametrize("name", sorted(KL_PAIRS))
def test_kl_divergence_and_its_gradients_match_pytorch(name):
    ctor, pa, qa = KL_PAIRS[name]
    hxs = [hx.tensor(np.ascontiguousarray(a), requires_grad=True) for a in pa + qa]
    ts = [torch.tensor(np.ascontiguousarray(a), requires_grad=True) for a in pa + qa]
    n = len(pa)
    got = D.kl_divergence(ctor(D, *hxs[:n]), ctor(D, *hxs[n:]))
    want = TD.kl_divergence(ctor(TD, *ts[:n]), ctor(TD, *ts[n:]))
    close(got, want, what=name)
    finite = torch.isfinite(want)
    want[finite].sum().backward()
    got.masked_fill(hx.tensor(~finite.numpy()), 0.0).sum().backward()
    for i, (h, t) in enumerate(zip(hxs, ts)):
        if t.grad is None:
            continue
        np.testing.assert_allclose(np.nan_to_num(h.grad.numpy()), np.nan_to_num(t.grad.numpy()),
                                   rtol=1e-8, atol=1e-10, err_msg=f"{name} grad {i}")


def test_kl_dispatch_finds_the_most_specific_pair_and_register_kl_adds_one():
    class MyNormal(D.Normal):
        pass

    p, q = MyNormal(0.0, 1.0), D.Normal(1.0, 2.0)
    assert D.kl_divergence(p, q).item() == pytest.approx(
        TD.kl_divergence(TD.Normal(0.0, 1.0), TD.Normal(1.0, 2.0)).item(), rel=1e-6)

    @D.register_kl(MyNormal, D.Normal)
    def _mine(p, q):
        return hx.tensor(-1.0)

    assert D.kl_divergence(p, q).item() == -1.0
    assert D.kl_divergence(D.Normal(0.0, 1.0), q).item() != -1.0  # the base pair stays
    with pytest.raises(NotImplementedError,
                       match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q "
                             "type Laplace"):
        D.kl_divergence(q, D.Laplace(0.0, 1.0))
    with pytest.raises(TypeError, match="Distribution subclass"):
        D.register_kl(int, D.Normal)


# -- sampling -------------------------------------------------------------------------------

@pytest.mark.parametrize("sample_shape", [(), (5,), (2, 3), [4], torch.Size([2, 1])])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_sample_shapes_and_dtypes_match_pytorch(name, sample_shape):
    hd, _ = build(name, "hx")
    td, _ = build(name, "torch")
    want = td.sample(sample_shape)
    got = hd.sample(sample_shape)
    assert got.shape == tuple(want.shape), name
    assert got.dtype.name == str(want.dtype).replace("torch.", "")
    assert not got.requires_grad
    assert hd.has_rsample == td.has_rsample
    if td.has_rsample:
        r = hd.rsample(sample_shape)
        assert r.shape == tuple(want.shape) and r.requires_grad
    assert hd._extended_shape(sample_shape) == tuple(td._extended_shape(sample_shape))


def test_a_zero_size_batch_or_sample_draws_nothing():
    assert D.Normal(hx.zeros(0), hx.ones(0)).sample((2,)).shape == (2, 0)
    assert D.Categorical(logits=hx.zeros(2, 3)).sample((0,)).shape == (0, 2)
    empty = D.Categorical(logits=hx.zeros(0, 3), validate_args=False)
    assert empty.sample((4,)).shape == (4, 0)


def test_the_default_generator_makes_draws_repeatable():
    d = D.Normal(hx.zeros(3), hx.ones(3))
    c = D.Categorical(logits=hx.zeros(10))
    hx.manual_seed(11)
    a = (d.sample((4,)), c.sample((20,)), D.Laplace(0.0, 1.0).rsample((5,)))
    hx.manual_seed(11)
    b = (d.sample((4,)), c.sample((20,)), D.Laplace(0.0, 1.0).rsample((5,)))
    for x, y in zip(a, b):
        assert np.array_equal(x.numpy(), y.numpy())
    hx.manual_seed(12)
    assert not np.array_equal(d.sample((4,)).numpy(), a[0].numpy())


N = 40000
# the Kolmogorov-Smirnov bound at the 0.1% level: a wrong law (Laplace for Normal of
# the same variance differs by 0.03 somewhere) is well beyond it
KS = 1.95 / math.sqrt(N)
CONTINUOUS = {
    "Normal": (lambda M, t: M.Normal(t(1.5), t(0.7)), "Laplace"),
    "Laplace": (lambda M, t: M.Laplace(t(-1.0), t(0.5)), "Normal"),
    "Uniform": (lambda M, t: M.Uniform(t(-1.0), t(3.0)), "Normal"),
    "Exponential": (lambda M, t: M.Exponential(t(2.5)), "Laplace"),
}


@pytest.mark.parametrize("method", ["sample", "rsample"])
@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_draws_follow_the_distribution(name, method):
    make, other = CONTINUOUS[name]
    d = make(D, lambda v: hx.tensor(v, dtype=hx.float64))
    ref = make(TD, lambda v: torch.tensor(v, dtype=torch.float64))
    hx.manual_seed(0)
    x = np.sort(getattr(d, method)((N,)).detach().numpy())
    empirical = np.arange(1, N + 1) / N
    cdf = ref.cdf(torch.tensor(x)).numpy()
    assert np.abs(cdf - empirical).max() < KS, name
    mean, var = float(ref.mean), float(ref.variance)
    assert abs(x.mean() - mean) < 4 * math.sqrt(var / N)
    assert abs(x.var() - var) < 0.05 * var
    # the same test rejects a different law with these moments
    wrong = {"Normal": TD.Normal(mean, math.sqrt(var)),
             "Laplace": TD.Laplace(mean, math.sqrt(var / 2))}[other]
    if other != name:
        lo, hi = (0.0, math.inf) if name == "Exponential" else (-math.inf, math.inf)
        cdf_wrong = wrong.cdf(torch.tensor(np.clip(x, lo, hi))).numpy()
        assert np.abs(cdf_wrong - empirical).max() > 2 * KS


def test_categorical_bernoulli_and_one_hot_draw_their_probabilities():
    probs = np.array([[0.1, 0.6, 0.3], [0.5, 0.0, 0.5]])
    hx.manual_seed(1)
    idx = D.Categorical(probs=hx.tensor(probs)).sample((N,)).numpy()
    freq = np.stack([(idx == k).mean(0) for k in range(3)], -1)
    assert np.abs(freq - probs).max() < 4 * math.sqrt(0.25 / N)
    assert (idx[:, 1] != 1).all()
    oh = D.OneHotCategorical(probs=hx.tensor(probs)).sample((N,)).numpy()
    assert (oh.sum(-1) == 1).all()
    assert np.abs(oh.mean(0) - probs).max() < 4 * math.sqrt(0.25 / N)
    p = np.array([0.05, 0.5, 0.9])
    b = D.Bernoulli(probs=hx.tensor(p)).sample((N,)).numpy()
    assert set(np.unique(b)) <= {0.0, 1.0}
    assert np.abs(b.mean(0) - p).max() < 4 * math.sqrt(0.25 / N)
    logits = D.Bernoulli(logits=hx.tensor([-2.0])).sample((N,)).numpy()
    assert abs(logits.mean() - 1 / (1 + math.e ** 2)) < 4 * math.sqrt(0.25 / N)


def test_multivariate_normal_draws_have_its_mean_and_covariance():
    loc = np.array([1.0, -2.0, 0.5])
    for kw in ({"covariance_matrix": COV}, {"precision_matrix": np.linalg.inv(COV)},
               {"scale_tril": np.linalg.cholesky(COV)}):
        d = D.MultivariateNormal(hx.tensor(loc), **{k: hx.tensor(v) for k, v in kw.items()})
        hx.manual_seed(2)
        x = d.rsample((N,)).detach().numpy()
        assert np.abs(x.mean(0) - loc).max() < 4 * math.sqrt(2.0 / N)
        np.testing.assert_allclose(np.cov(x.T), COV, atol=0.05)
        close(d.covariance_matrix, torch.tensor(COV), rtol=1e-12, atol=1e-12)
        close(d.precision_matrix, torch.tensor(np.linalg.inv(COV)), rtol=1e-10,
              atol=1e-12)
        close(d.scale_tril, torch.tensor(np.linalg.cholesky(COV)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["Normal", "Laplace", "Uniform", "Exponential",
                                  "MultivariateNormal(scale_tril)"])
def test_rsample_is_differentiable_in_the_parameters(name):
    """The gradient of sum(f(x)) for x = rsample() is what PyTorch's rsample gives with
    the same base noise, recovered from Haelixe's draw."""
    hd, hp = build(name, "hx")
    hx.manual_seed(3)
    x = hd.rsample((6,))
    (x * x).sum().backward()
    xs = x.detach().numpy()
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in SPECS[name][1].items()}
    p = {k: v.detach().numpy() for k, v in tp.items()}
    if name in ("Normal", "Laplace"):
        noise = torch.tensor((xs - p["loc"]) / p["scale"])
        tx = tp["loc"] + noise * tp["scale"]
    elif name == "Uniform":
        tx = tp["low"] + torch.tensor((xs - p["low"]) / (p["high"] - p["low"])) * (
            tp["high"] - tp["low"])
    elif name == "Exponential":
        tx = torch.tensor(xs * p["rate"]) / tp["rate"]
    else:
        eps = np.linalg.solve(p["tril"], (xs - p["loc"])[..., None])[..., 0]
        tx = tp["loc"] + (tp["tril"] @ torch.tensor(eps)[..., None])[..., 0]
    (tx * tx).sum().backward()
    for k in tp:
        close(hp[k].grad, tp[k].grad, rtol=1e-8, atol=1e-10, what=f"{name} d/d{k}")


# -- validation -----------------------------------------------------------------------------

def _message(f):
    try:
        f()
    except (ValueError, TypeError, RuntimeError, NotImplementedError) as e:
        return type(e), str(e)
    return None, "no error"


def _torch_text(text: str) -> str:
    """PyTorch's message in Haelixe's spelling: shapes are tuples, dtypes hx.'s."""
    text = re.sub(r"torch\.Size\(\[([^\]]*)\]\)",
                  lambda m: str(tuple(int(v) for v in m.group(1).split(", ") if v)), text)
    return text.replace("dtype=torch.", "dtype=hx.")


INVALID = {
    "negative scale": lambda M, t: M.Normal(t([0.0, 1.0]), t([1.0, -1.0])),
    "probs above 1": lambda M, t: M.Bernoulli(probs=t([0.5, 1.5])),
    "negative probs": lambda M, t: M.Categorical(probs=t([[0.5, -0.1, 0.6]])),
    "nan logits": lambda M, t: M.Categorical(logits=t([0.0, math.nan])),
    "zero rate": lambda M, t: M.Exponential(t([1.0, 0.0])),
    "low above high": lambda M, t: M.Uniform(t([0.0, 2.0]), t([1.0, 1.0])),
    "not positive definite": lambda M, t: M.MultivariateNormal(
        t([0.0, 0.0]), covariance_matrix=t([[1.0, 2.0], [2.0, 1.0]])),
    "not lower triangular": lambda M, t: M.MultivariateNormal(
        t([0.0, 0.0]), scale_tril=t([[1.0, 0.5], [0.0, 1.0]])),
    "both probs and logits": lambda M, t: M.Categorical(t([0.5, 0.5]), t([0.0, 0.0])),
    "neither": lambda M, t: M.Bernoulli(),
    "0-d probs": lambda M, t: M.Categorical(probs=t(0.5)),
    "0-d loc": lambda M, t: M.MultivariateNormal(t(0.0), covariance_matrix=t([[1.0]])),
    "two matrices": lambda M, t: M.MultivariateNormal(t([0.0]), covariance_matrix=t([[1.0]]),
                                                      scale_tril=t([[1.0]])),
    "1-d scale_tril": lambda M, t: M.MultivariateNormal(t([0.0]), scale_tril=t([1.0])),
    "Independent too deep": lambda M, t: M.Independent(M.Normal(t([0.0]), t([1.0])), 2),
    "value outside support": lambda M, t: M.Exponential(t([1.0])).log_prob(t([-1.0])),
    "class outside support": lambda M, t: M.Categorical(logits=t([0.0, 0.0])).log_prob(
        t([2])),
    "not one-hot": lambda M, t: M.OneHotCategorical(logits=t([0.0, 0.0])).log_prob(
        t([1.0, 1.0])),
    "not a tensor": lambda M, t: M.Normal(t(0.0), t(1.0)).log_prob(0.5),
    "wrong event shape": lambda M, t: M.MultivariateNormal(
        t([0.0, 0.0]), scale_tril=t([[1.0, 0.0], [0.0, 1.0]])).log_prob(t([1.0, 2.0, 3.0])),
    "not broadcastable": lambda M, t: M.Normal(t([0.0, 0.0]), t([1.0, 1.0])).log_prob(
        t([1.0, 2.0, 3.0])),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_validation_raises_pytorchs_errors(case):
    want_type, want = _message(lambda: INVALID[case](TD, torch.tensor))
    got_type, got = _message(lambda: INVALID[case](D, hx.tensor))
    assert want_type is not None
    assert got_type is want_type or issubclass(got_type, want_type), (case, got)
    if want_type is ValueError:
        # up to the printed values, whose formatting is each library's own
        head = _torch_text(want).split(", but found invalid values")[0]
        if "support (Interval" not in head:
            assert got.split(", but found invalid values")[0] == head, case


def test_validation_can_be_turned_off():
    assert D.Normal(hx.tensor([0.0]), hx.tensor([-1.0]), validate_args=False).scale.item() == -1
    lp = D.Exponential(hx.tensor([1.0]), validate_args=False).log_prob(hx.tensor([-1.0]))
    assert lp.item() == 1.0  # log(1) - 1 * -1, unchecked as in PyTorch
    try:
        D.Distribution.set_default_validate_args(False)
        assert D.Normal(hx.tensor([0.0]), hx.tensor([-1.0])).scale.item() == -1
        assert D.Normal(0.0, 1.0, validate_args=True)._validate_args
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(hx.tensor([0.0]), hx.tensor([-1.0]))
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")


def test_a_non_positive_definite_covariance_without_validation_raises_pytorchs_error():
    cov = [[1.0, 2.0], [2.0, 1.0]]
    with pytest.raises(RuntimeError, match="leading minor of order 2 is not positive"):
        TD.MultivariateNormal(torch.zeros(2), torch.tensor(cov), validate_args=False)
    with pytest.raises(RuntimeError, match="leading minor of order 2 is not positive"):
        D.MultivariateNormal(hx.zeros(2), hx.tensor(cov), validate_args=False)


# -- constraints and helpers ----------------------------------------------------------------

CONSTRAINT_VALUES = [[-1.0, 0.0, 0.5, 1.0, 2.0, math.nan], [0.0, 0.2, 0.8, 0.0, 1.0, 3.0]]
CONSTRAINTS = ["real", "positive", "nonnegative", "unit_interval", "boolean", "simplex",
               "real_vector", "one_hot", "nonnegative_integer", "positive_integer"]


@pytest.mark.parametrize("name", CONSTRAINTS)
def test_constraints_check_as_pytorchs(name):
    hc, tc = getattr(constraints, name), getattr(TD.constraints, name)
    assert repr(hc) == repr(tc) and hc.event_dim == tc.event_dim
    assert hc.is_discrete == tc.is_discrete
    for v in (CONSTRAINT_VALUES, [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], [[0.3, 0.7]]):
        got = hc.check(hx.tensor(v)).numpy()
        want = tc.check(torch.tensor(v)).numpy()
        assert np.array_equal(got, want), (name, v)


def test_parametrised_constraints_check_as_pytorchs():
    v = [[-1.0, 0.0, 0.5, 1.0, 2.0], [3.0, 1.0, 0.0, -2.0, 1.5]]
    for make in (lambda c: c.interval(0.0, 1.0), lambda c: c.half_open_interval(0.0, 1.0),
                 lambda c: c.greater_than(0.5), lambda c: c.greater_than_eq(0.5),
                 lambda c: c.less_than(1.0), lambda c: c.integer_interval(0, 2),
                 lambda c: c.independent(c.positive, 1),
                 lambda c: c.independent(c.real, 2)):
        hc, tc = make(constraints), make(TD.constraints)
        assert repr(hc) == repr(tc) and hc.event_dim == tc.event_dim
        assert np.array_equal(hc.check(hx.tensor(v)).numpy(), tc.check(torch.tensor(v)).numpy())
    mats = [[[2.0, 0.0], [1.0, 3.0]], [[1.0, 2.0], [2.0, 1.0]], [[1.0, 0.5], [0.5, 1.0]]]
    for name in ("lower_cholesky", "lower_triangular", "positive_definite", "symmetric",
                 "square"):
        got = getattr(constraints, name).check(hx.tensor(mats)).numpy()
        want = getattr(TD.constraints, name).check(torch.tensor(mats)).numpy()
        assert np.array_equal(got, want), name
    assert constraints.is_dependent(constraints.dependent)
    assert not constraints.is_dependent(constraints.real)
    with pytest.raises(ValueError, match="Cannot determine validity"):
        constraints.dependent.check(hx.zeros(1))
    d = D.Uniform(hx.tensor([0.0]), hx.tensor([2.0]))
    assert np.array_equal(d.support.check(hx.tensor([1.0, 2.5])).numpy(), [True, False])
    assert D.Categorical(logits=hx.zeros(3)).support.upper_bound == 2


def test_probs_and_logits_helpers_match_pytorchs():
    from haelixe.distributions import utils

    p = np.array([[0.0, 0.3, 0.7], [0.5, 0.5, 1.0]])
    for binary in (False, True):
        hp, tp = hx.tensor(p, requires_grad=True), torch.tensor(p, requires_grad=True)
        got = utils.probs_to_logits(hp, is_binary=binary)
        want = TD.utils.probs_to_logits(tp, is_binary=binary)
        close(got, want)
        got.sum().backward()
        want.sum().backward()
        close(hp.grad, tp.grad)
        hl, tl = hx.tensor(p * 3 - 1, requires_grad=True), torch.tensor(p * 3 - 1)
        close(utils.logits_to_probs(hl, is_binary=binary),
              TD.utils.logits_to_probs(tl, is_binary=binary))
    for dt in ("float32", "float64"):
        close(utils.clamp_probs(hx.tensor(p, dtype=dt)),
              TD.utils.clamp_probs(torch.tensor(p, dtype=getattr(torch, dt))), rtol=0, atol=0)


def test_reprs_read_as_pytorchs():
    assert repr(D.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"
    assert repr(D.Normal(hx.tensor([0.0]), 1.0)) == \
        "Normal(loc: tensor([0.]), scale: tensor([1.]))"
    assert repr(D.Normal(hx.zeros(3), 1.0)) == "Normal(loc: (3,), scale: (3,))"
    assert repr(D.Independent(D.Normal(hx.zeros(3), 1.0), 1)) == \
        "Independent(Normal(loc: (3,), scale: (3,)), 1)"


def test_a_name_haelixe_lacks_says_what_it_has():
    with pytest.raises(AttributeError, match="hx.distributions has no VonMises; it has: "
                                             "Bernoulli, Beta, Binomial, Categorical"):
        D.VonMises  # noqa: B018
    with pytest.raises(AttributeError,
                       match="the closest is hx.distributions.MultivariateNormal"):
        D.LowRankMultivariateNormal  # noqa: B018


# -- a policy-gradient step -----------------------------------------------------------------

def test_reinforce_step_matches_pytorchs_gradients():
    """Categorical over a policy net's logits, loss = -log_prob(action) * reward (with
    an entropy bonus): the same weights and actions give PyTorch's gradients."""
    hx.manual_seed(5)
    net = hx.nn.Sequential(hx.nn.Linear(4, 8), hx.nn.Tanh(), hx.nn.Linear(8, 3)).double()
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(),
                              torch.nn.Linear(8, 3)).double()
    with torch.no_grad():
        for (_, p), (_, q) in zip(net.named_parameters(), ref.named_parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))
    obs = np.random.default_rng(0).standard_normal((16, 4))
    reward = np.random.default_rng(1).standard_normal(16)
    dist = D.Categorical(logits=net(hx.tensor(obs)))
    action = dist.sample()
    assert action.shape == (16,) and action.dtype is hx.int64
    loss = -(dist.log_prob(action) * hx.tensor(reward)).mean() - 0.01 * dist.entropy().mean()
    loss.backward()
    tdist = TD.Categorical(logits=ref(torch.tensor(obs)))
    tloss = -(tdist.log_prob(torch.tensor(action.numpy())) * torch.tensor(reward)).mean() \
        - 0.01 * tdist.entropy().mean()
    tloss.backward()
    assert loss.item() == pytest.approx(tloss.item(), rel=1e-12)
    for (name, p), (_, q) in zip(net.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=name)


# -- the GPU --------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["Normal", "Laplace", "Exponential", "Uniform",
                                  "Categorical(logits)", "Bernoulli(logits)",
                                  "MultivariateNormal(scale_tril)"])
def test_on_the_gpu_equals_the_cpu(be, name):
    ctor, params, value, dtype = SPECS[name]
    out = {}
    for device in ("cpu", "gpu"):
        leaves = {k: hx.tensor(v, dtype=hx.float32, device=device, requires_grad=True)
                  for k, v in params.items()}
        d = ctor(D, leaves)
        v = hx.tensor(value, dtype=hx.float32 if dtype == "float64" else dtype,
                      device=device)
        lp = d.log_prob(v)
        total = lp.sum() + d.entropy().sum()
        if d.has_rsample:
            hx.manual_seed(4)
            draw = d.rsample((3,))
            assert draw.device.type == device
            total = total + (draw * draw).sum()
        else:
            assert d.sample((3,)).device.type == device
        total.backward()
        out[device] = (lp.detach().cpu().numpy(), total.item(),
                       {k: t.grad.cpu().numpy() for k, t in leaves.items()})
    np.testing.assert_allclose(out["gpu"][0], out["cpu"][0], rtol=2e-5, atol=2e-5)
    assert out["gpu"][1] == pytest.approx(out["cpu"][1], rel=2e-5, abs=2e-5)
    for k in params:
        np.testing.assert_allclose(out["gpu"][2][k], out["cpu"][2][k], rtol=2e-4, atol=2e-4)
