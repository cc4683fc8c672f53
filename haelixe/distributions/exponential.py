"""Exponential(rate): density rate * exp(-rate * x) on x >= 0, reparameterized as
E / rate with E a standard exponential draw."""

from __future__ import annotations

from .. import creation
from . import constraints
from .distribution import Distribution
from .utils import _is_number, broadcast_all

__all__ = ["Exponential"]


class Exponential(Distribution):
    """Exponential(rate, validate_args=None): mean 1 / rate."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(() if _is_number(rate) else self.rate.shape,
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Exponential, _instance)
        batch_shape = tuple(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return creation.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        # -log(1 - u) for u uniform on [0, 1) is a standard exponential draw
        u = creation.rand(self._extended_shape(sample_shape), dtype=self.rate.dtype,
                          device=self.rate.device)
        return -(-u).log1p() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()
