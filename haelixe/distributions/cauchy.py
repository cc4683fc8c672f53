"""Cauchy(loc, scale) and Gumbel(loc, scale): location-scale families drawn through
their inverse cdfs, so rsample is differentiable in both parameters."""

from __future__ import annotations

import math

from .. import creation
from .location_scale import LocationScale
from .utils import finfo

__all__ = ["Cauchy", "Gumbel"]

_EULER = 0.5772156649015329


def _uniform(d, sample_shape):
    return creation.rand(d._extended_shape(sample_shape), dtype=d.loc.dtype,
                         device=d.loc.device)


class Cauchy(LocationScale):
    """Cauchy(loc, scale, validate_args=None): median ``loc``, half width at half
    maximum ``scale``; its mean and variance do not exist (NaN and inf, as PyTorch)."""

    @property
    def mean(self):
        return math.nan * self.loc

    @property
    def variance(self):
        return creation.full(self._batch_shape, math.inf, dtype=self.loc.dtype,
                             device=self.loc.device)

    def rsample(self, sample_shape=()):
        return self.icdf(_uniform(self, sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -math.log(math.pi) - self.scale.log() - z.pow(2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class Gumbel(LocationScale):
    """Gumbel(loc, scale, validate_args=None): the type-I extreme value law, cdf
    exp(-exp(-(x - loc) / scale)); mode ``loc``, mean loc + scale * Euler's gamma."""

    @property
    def mean(self):
        return self.loc + self.scale * _EULER

    @property
    def stddev(self):
        return math.pi / math.sqrt(6) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=()):
        eps, tiny, _ = finfo(self.loc.dtype)
        # u inside (tiny, 1 - eps): both logs finite
        u = _uniform(self, sample_shape).clamp(min=tiny, max=1 - eps)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (self.loc - value) / self.scale
        return (z - z.exp()) - self.scale.log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (-((self.loc - value) / self.scale).exp()).exp()

    def icdf(self, value):
        return self.loc - self.scale * (-value.log()).log()

    def entropy(self):
        return self.scale.log() + (1 + _EULER)
