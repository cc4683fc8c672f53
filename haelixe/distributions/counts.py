"""The count distributions: Poisson(rate), Geometric(probs | logits) (failures before
the first success) and Binomial(total_count, probs | logits). Their draws are made on
the host from Haelixe's default generator and carry no gradient, as PyTorch's."""

from __future__ import annotations

import numpy as np

from .. import creation
from ..autograd.mode import no_grad
from ..ops.indexing import where
from ..ops.sampling import poisson
from ..random import generator as numpy_generator
from . import constraints
from .distribution import Distribution
from .probs_or_logits import ProbsOrLogits
from .utils import (
    _is_number,
    broadcast_all,
    finfo,
)

__all__ = ["Binomial", "Geometric", "Poisson"]


class Poisson(Distribution):
    """Poisson(rate, validate_args=None): counts of mean and variance ``rate``."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(() if _is_number(rate) else self.rate.shape,
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = tuple(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        with no_grad():
            return poisson(self.rate.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()


class Geometric(ProbsOrLogits):
    """Geometric(probs=None, logits=None, validate_args=None): the number of failures
    before the first success of Bernoulli(probs) trials (0, 1, ...)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._set_probs_or_logits(probs, logits)
        given = probs if probs is not None else logits
        super().__init__(() if _is_number(given) else self._param.shape,
                         validate_args=validate_args)
        if self._validate_args and probs is not None and not bool((self.probs > 0).all()):
            raise ValueError(f"Expected parameter probs ({type(self.probs).__name__} of "
                             f"shape {tuple(self.probs.shape)}) of distribution {self!r} "
                             f"to be positive but found invalid values:\n{self.probs}")

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Geometric, _instance)
        batch_shape = tuple(batch_shape)
        self._expand_param(new, batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return creation.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            p = self.probs
            u = creation.rand(shape, dtype=p.dtype, device=p.device)
            u = u.clamp(min=finfo(p.dtype)[1])  # (log u finite)
            return (u.log() / (-p).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # (p = 1 at value 0: 0 * log(0) is 0, its gradient too)
        safe = where((probs == 1) & (value == 0), 0.0, probs)
        return value * (-safe).log1p() + self.probs.log()

    def entropy(self):
        # the binary cross-entropy of logits against probs, over probs
        bce = self.logits.softplus() - self.probs * self.logits
        return bce / self.probs


def _clamp_by_zero(x):
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(ProbsOrLogits):
    """Binomial(total_count=1, probs=None, logits=None, validate_args=None): successes
    in ``total_count`` Bernoulli(probs) trials."""

    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        self.total_count, param = broadcast_all(total_count, given)
        self.total_count = self.total_count.to(param.dtype)
        self._set_probs_or_logits(param if probs is not None else None,
                                  param if logits is not None else None)
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Binomial, _instance)
        batch_shape = tuple(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        self._expand_param(new, batch_shape)
        return self._expanded(new, batch_shape)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            n = np.broadcast_to(self.total_count.detach().cpu().numpy(), shape)
            p = np.broadcast_to(self.probs.detach().cpu().numpy().astype(np.float64), shape)
            draws = numpy_generator(None).binomial(n.astype(np.int64), p)
            return creation.tensor(draws, dtype=self.probs.dtype,
                                   device=self.probs.device)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        normalize = n * _clamp_by_zero(logits) + n * (-logits.abs()).exp().log1p() \
            - (n + 1).lgamma()
        return value * logits - (value + 1).lgamma() - (n - value + 1).lgamma() - normalize

    def entropy(self):
        top = int(self.total_count.max().item())
        if not self.total_count.min().item() == top:
            raise NotImplementedError("Inhomogeneous total count not supported by "
                                      "`entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        top = int(self.total_count.max().item())
        if not self.total_count.min().item() == top:
            raise NotImplementedError("Inhomogeneous total count not supported by "
                                      "`enumerate_support`.")
        values = creation.arange(1 + top, dtype=self._param.dtype,
                                 device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + self._batch_shape) if expand else values
