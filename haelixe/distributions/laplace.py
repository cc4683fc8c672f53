"""Laplace(loc, scale): density exp(-|x - loc| / scale) / (2 scale), reparameterized
through its inverse cdf."""

from __future__ import annotations

from .. import creation
from .location_scale import LocationScale
from .utils import finfo

__all__ = ["Laplace"]


class Laplace(LocationScale):
    """Laplace(loc, scale, validate_args=None): mean ``loc``, variance 2 scale**2."""

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return 2 ** 0.5 * self.scale

    def rsample(self, sample_shape=()):
        eps = finfo(self.loc.dtype)[0]
        # u uniform on [eps - 1, 1): |u| < 1, so log1p(-|u|) stays finite
        r = creation.rand(self._extended_shape(sample_shape), dtype=self.loc.dtype,
                          device=self.loc.device)
        u = r * (2 - eps) + (eps - 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        d = value - self.loc
        return 0.5 - 0.5 * d.sign() * (-d.abs() / self.scale).expm1()

    def icdf(self, value):
        t = value - 0.5
        return self.loc - self.scale * t.sign() * (-2 * t.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()
