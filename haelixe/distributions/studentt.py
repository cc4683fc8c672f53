"""StudentT(df, loc, scale): loc + scale * X / sqrt(Z / df), X standard normal and Z a
Chi2(df) draw, so rsample is differentiable in all three parameters."""

from __future__ import annotations

import math

from ..ops.indexing import where
from . import constraints
from .distribution import Distribution
from .gamma import Chi2
from .normal import standard_normal
from .utils import _is_number, broadcast_all

__all__ = ["StudentT"]


class StudentT(Distribution):
    """StudentT(df, loc=0.0, scale=1.0, validate_args=None): Student's t with ``df``
    degrees of freedom, shifted by ``loc`` and scaled by ``scale``."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        batch = () if all(_is_number(v) for v in (df, loc, scale)) else self.df.shape
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = tuple(batch_shape)
        new.df, new.loc = self.df.expand(batch_shape), self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def mean(self):
        return where(self.df > 1, self.loc, math.nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2)
        return where(df > 2, finite, where(df > 1, math.inf, math.nan))

    def rsample(self, sample_shape=()):
        x = standard_normal(self._extended_shape(sample_shape), self.df)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * x * (z / self.df).rsqrt()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        half = 0.5 * self.df
        norm = self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) \
            + half.lgamma() - (half + 0.5).lgamma()
        return -(half + 0.5) * (y.pow(2) / self.df).log1p() - norm

    def entropy(self):
        half = 0.5 * self.df
        lbeta = half.lgamma() + math.lgamma(0.5) - (half + 0.5).lgamma()
        return self.scale.log() + (half + 0.5) * ((half + 0.5).digamma() - half.digamma()) \
            + 0.5 * self.df.log() + lbeta
