"""Probability distributions with PyTorch's ``torch.distributions`` API: parameters,
sampling from Haelixe's default generator (``hx.manual_seed`` repeats the draws),
``log_prob`` / ``entropy`` / ``cdf`` differentiable through Haelixe's ops on either
device, reparameterized ``rsample`` where PyTorch has one, and ``kl_divergence``.

    import haelixe as hx
    from haelixe.distributions import Categorical
    dist = Categorical(logits=policy(obs))
    action = dist.sample()
    loss = -(dist.log_prob(action) * reward).mean()
"""

from __future__ import annotations

from . import constraints, utils
from .bernoulli import Bernoulli
from .categorical import Categorical, OneHotCategorical, OneHotCategoricalStraightThrough
from .cauchy import Cauchy, Gumbel
from .counts import Binomial, Geometric, Poisson
from .dirichlet import Beta, Dirichlet
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Chi2, Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .log_normal import HalfNormal, LogNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .studentt import StudentT
from .uniform import Uniform

__all__ = [
    "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "Dirichlet",
    "Distribution", "Exponential", "Gamma", "Geometric", "Gumbel", "HalfNormal",
    "Independent", "Laplace", "LogNormal", "MultivariateNormal", "Normal",
    "OneHotCategorical", "OneHotCategoricalStraightThrough", "Poisson", "StudentT",
    "Uniform", "constraints",
    "kl_divergence", "register_kl", "utils",
]

#: PyTorch distributions Haelixe lacks that one here stands in for
_HINTS: dict = {}


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), _HINTS)
