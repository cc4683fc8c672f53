"""The location-scale families: a real-valued variable loc + scale * (a standard draw),
whose mean and mode are loc (Normal, Laplace)."""

from __future__ import annotations

from . import constraints
from .distribution import Distribution
from .utils import _is_number, broadcast_all

__all__ = ["LocationScale"]


class LocationScale(Distribution):
    """The parameters, their constraints, broadcasting, ``expand``, ``mean`` and ``mode``
    of a location-scale family; a subclass gives the rest (its draws, density, cdf)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        batch = () if _is_number(loc) and _is_number(scale) else self.loc.shape
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        # (the family itself, Normal or Laplace, is what a subclass of it with an
        # __init__ of its own must also write expand for)
        family = next(c for c in type(self).__mro__ if LocationScale in c.__bases__)
        new = self._get_checked_instance(family, _instance)
        batch_shape = tuple(batch_shape)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc
