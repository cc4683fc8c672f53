"""Laplace(loc, scale): density exp(-|x - loc| / scale) / (2 scale), reparameterized
through its inverse cdf."""

from __future__ import annotations

from .. import creation
from . import constraints
from .distribution import Distribution
from .utils import _is_number, broadcast_all, finfo

__all__ = ["Laplace"]


class Laplace(Distribution):
    """Laplace(loc, scale, validate_args=None): mean ``loc``, variance 2 scale**2."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch = () if _is_number(loc) and _is_number(scale) else self.loc.shape
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Laplace, _instance)
        batch_shape = tuple(batch_shape)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

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
