"""Normal(loc, scale): the Gaussian, reparameterized as loc + scale * eps."""

from __future__ import annotations

import math

from .. import creation
from .location_scale import LocationScale
from .utils import HALF_LOG_2PI

__all__ = ["Normal"]


def standard_normal(shape, like):
    """N(0, 1) draws of ``shape`` in ``like``'s dtype and device, from Haelixe's
    default generator."""
    return creation.randn(shape, dtype=like.dtype, device=like.device)


class Normal(LocationScale):
    """Normal(loc, scale, validate_args=None): mean ``loc``, standard deviation
    ``scale`` (numbers or tensors, broadcast together)."""

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale.pow(2)

    def rsample(self, sample_shape=()):
        eps = standard_normal(self._extended_shape(sample_shape), self.loc)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -((value - self.loc) ** 2) / (2 * self.scale ** 2) - self.scale.log() \
            - HALF_LOG_2PI

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ((value - self.loc) / self.scale / math.sqrt(2)).erf())

    def icdf(self, value):
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)

    def entropy(self):
        return 0.5 + HALF_LOG_2PI + self.scale.log()
