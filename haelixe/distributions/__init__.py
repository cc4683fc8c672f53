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
from .dirichlet import Beta, Dirichlet
from .distribution import Distribution
from .exponential import Exponential
from .gamma import Chi2, Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .studentt import StudentT
from .uniform import Uniform

__all__ = [
    "Bernoulli", "Beta", "Categorical", "Chi2", "Dirichlet", "Distribution", "Exponential",
    "Gamma", "Independent", "Laplace", "MultivariateNormal", "Normal", "OneHotCategorical",
    "OneHotCategoricalStraightThrough", "StudentT", "Uniform", "constraints",
    "kl_divergence", "register_kl", "utils",
]

#: PyTorch distributions Haelixe lacks that one here stands in for
_HINTS = {
    "LogNormal": "hx.distributions.Normal (exponentiate its samples; the log density "
                 "of x is Normal's log_prob(log x) - log x)",
    "HalfNormal": "hx.distributions.Normal (the absolute value of its samples)",
}


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), _HINTS)
