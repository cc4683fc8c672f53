"""Gamma(concentration, rate) and Chi2(df) = Gamma(df / 2, 1 / 2): reparameterized
through hx._standard_gamma, whose gradient in the concentration is the implicit one."""

from __future__ import annotations

from ..ops.gamma_sampling import _standard_gamma, regularized_lower_gamma_of
from . import constraints
from .distribution import Distribution
from .utils import _is_number, broadcast_all

__all__ = ["Chi2", "Gamma"]


class Gamma(Distribution):
    """Gamma(concentration, rate, validate_args=None): density proportional to
    x^(concentration - 1) exp(-rate x) on x >= 0; mean concentration / rate."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        batch = () if _is_number(concentration) and _is_number(rate) \
            else self.concentration.shape
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = tuple(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return _standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        return c.xlogy(r) + (c - 1).xlogy(value) - r * value - c.lgamma()

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + c.lgamma() + (1.0 - c) * c.digamma()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return regularized_lower_gamma_of(self.concentration, self.rate * value)


class Chi2(Gamma):
    """Chi2(df, validate_args=None): the sum of df squared standard normals,
    Gamma(df / 2, 1 / 2)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return super().expand(batch_shape, self._get_checked_instance(Chi2, _instance))

    @property
    def df(self):
        return self.concentration * 2
