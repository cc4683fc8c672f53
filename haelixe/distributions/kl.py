"""kl_divergence(p, q) and register_kl: KL(p || q) looked up by the two
distributions' types, the most specific registered pair winning (a subclass of
Normal uses Normal's formula unless one is registered for it)."""

from __future__ import annotations

import math
import warnings

from ..layout import broadcast_shapes
from ..ops.indexing import where
from .bernoulli import Bernoulli
from .categorical import Categorical, OneHotCategorical
from .cauchy import Cauchy, Gumbel
from .counts import Binomial, Geometric, Poisson
from .dirichlet import Beta, Dirichlet
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Gamma
from .independent import Independent
from .laplace import Laplace
from .log_normal import HalfNormal, LogNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .triangular import mahalanobis, solve_lower
from .uniform import Uniform
from .utils import sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

#: Euler-Mascheroni: -digamma(1), the mean of log of a standard exponential's inverse
_EULER = 0.5772156649015329
_REGISTRY: dict = {}  # (type_p, type_q) -> function, as registered
_LOOKUP: dict = {}  # (type(p), type(q)) -> the function chosen, or NotImplemented


def register_kl(type_p, type_q):
    """Decorator registering ``fun(p, q)`` as KL(p || q) for distributions of these
    types (and their subclasses, where nothing more specific is registered)."""
    for t, name in ((type_p, "type_p"), (type_q, "type_q")):
        if not (isinstance(t, type) and issubclass(t, Distribution)):
            raise TypeError(f"Expected {name} to be a Distribution subclass but got {t}")

    def decorator(fun):
        _REGISTRY[type_p, type_q] = fun
        _LOOKUP.clear()  # a new pair may be more specific than what was chosen
        return fun

    return decorator


def _distance(sub: type, sup: type) -> int:
    return sub.__mro__.index(sup)


def _dispatch(type_p, type_q):
    """The most specific registered pair: nearest in p's ancestry first (ties broken
    by q's), and the same the other way round; where the two orders disagree, the
    first wins and the ambiguity is warned about, as PyTorch does."""
    matches = [(a, b) for a, b in _REGISTRY if issubclass(type_p, a) and issubclass(type_q, b)]
    if not matches:
        return NotImplemented
    left = min(matches, key=lambda m: (_distance(type_p, m[0]), _distance(type_q, m[1])))
    right = min(matches, key=lambda m: (_distance(type_q, m[1]), _distance(type_p, m[0])))
    if _REGISTRY[left] is not _REGISTRY[right]:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). "
                      f"Please register_kl({left[0].__name__}, {right[1].__name__})",
                      RuntimeWarning, stacklevel=3)
    return _REGISTRY[left]


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)], batched over the broadcast batch shape."""
    key = (type(p), type(q))
    if key not in _LOOKUP:
        _LOOKUP[key] = _dispatch(*key)
    fun = _LOOKUP[key]
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{type(p).__name__} and q type {type(q).__name__}")
    return fun(p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    # p log(p/q) + (1-p) log((1-p)/(1-q)) through softplus of the logits (finite
    # where the probabilities round to 0 or 1); infinite where q rules out what p has
    t1 = p.probs * ((-q.logits).softplus() - (-p.logits).softplus())
    t1 = where(p.probs == 0, 0.0, where(q.probs == 0, math.inf, t1))
    t2 = (1 - p.probs) * (q.logits.softplus() - p.logits.softplus())
    t2 = where(p.probs == 1, 0.0, where(q.probs == 1, math.inf, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = where(p.probs == 0, 0.0, where(q.probs == 0, math.inf, t))
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return where((q.low > p.low) | (q.high < p.high), math.inf, result)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    ratio = q.rate / p.rate
    return ratio - ratio.log() - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_gap = (p.loc - q.loc).abs()
    return -scale_ratio.log() + loc_gap / q.scale \
        + scale_ratio * (-loc_gap / p.scale).exp() - 1


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different "
                         "event shapes cannot be computed")
    pl, ql = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    n = p.event_shape[0]
    half_log_det = ql.diagonal(dim1=-2, dim2=-1).log().sum(-1) \
        - pl.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    batch = broadcast_shapes(ql.shape[:-2], pl.shape[:-2], op="kl_divergence")
    # trace(Sq^-1 Sp) = ||ql^-1 pl||_F^2
    trace = solve_lower(ql.expand(batch + (n, n)), pl.expand(batch + (n, n))).pow(2) \
        .sum((-2, -1))
    return half_log_det + 0.5 * (trace + mahalanobis(ql, q.loc - p.loc) - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(
            f"kl_divergence: Independent distributions that reinterpret different "
            f"numbers of batch dims ({p.reinterpreted_batch_ndims} and "
            f"{q.reinterpreted_batch_ndims}) have no KL implemented")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist),
                         p.reinterpreted_batch_ndims)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = q.concentration.lgamma() - p.concentration.lgamma()
    t3 = (p.concentration - q.concentration) * p.concentration.digamma()
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    return -q.concentration * ratio.log() + ratio + q.concentration.lgamma() \
        + q.concentration * _EULER - (1 + _EULER)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration / p.rate)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p, sum_q = p.concentration.sum(-1), q.concentration.sum(-1)
    t1 = sum_p.lgamma() - sum_q.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    return _kl_dirichlet_dirichlet(p._dirichlet, q._dirichlet)


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p, q):
    # (exp is one bijection for both: the KL of the Normals beneath)
    return _kl_normal_normal(p, q)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t3 = (ct2 + (1 + ct1).lgamma() - ct3).exp()
    return t1 + ct1 * _EULER + t3 - (1 + _EULER)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    return (((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2))
            / (4 * p.scale * q.scale)).log()


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > "
                                  "p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p()
                          - (-q.probs).log1p())
    return where(p.total_count > q.total_count, math.inf, kl)
