"""MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None,
scale_tril=None): the Gaussian over vectors, kept as its Cholesky factor."""

from __future__ import annotations

import math

from .. import creation
from ..layout import broadcast_shapes
from ..tensor import Tensor
from . import constraints
from .distribution import Distribution
from .normal import standard_normal
from .triangular import cholesky, mahalanobis, solve_lower
from .utils import lazy_property

__all__ = ["MultivariateNormal"]


def precision_to_scale_tril(p: Tensor) -> Tensor:
    """The lower factor L of P^-1 = L L.T: P = U U.T with U upper triangular (the
    Cholesky factor of P with its rows and columns reversed, reversed back), so
    L = U.T^-1."""
    u_t = cholesky(p.flip(-2, -1)).flip(-2, -1).mT
    eye = creation.eye(p.shape[-1], dtype=p.dtype, device=p.device)
    return solve_lower(u_t, eye)


class MultivariateNormal(Distribution):
    """MultivariateNormal(loc, covariance_matrix=None, precision_matrix=None,
    scale_tril=None, validate_args=None): mean ``loc`` (..., n) and exactly one of
    the covariance, its inverse, or its lower Cholesky factor (..., n, n); their batch
    dims broadcast."""

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [(n, m) for n, m in (("scale_tril", scale_tril),
                                      ("covariance_matrix", covariance_matrix),
                                      ("precision_matrix", precision_matrix))
                 if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        name, matrix = given[0]
        if matrix.ndim < 2:
            shown = "scale_tril matrix" if name == "scale_tril" else name
            raise ValueError(f"{shown} must be at least two-dimensional, with optional "
                             f"leading batch dimensions")
        batch = broadcast_shapes(matrix.shape[:-2], loc.shape[:-1], op="MultivariateNormal")
        setattr(self, name, matrix.expand(batch + matrix.shape[-2:]))
        self.loc = loc.expand(batch + loc.shape[-1:])
        super().__init__(batch, self.loc.shape[-1:], validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = precision_to_scale_tril(matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = tuple(batch_shape)
        n = self._event_shape
        new.loc = self.loc.expand(batch_shape + n)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape + n + n))
        return self._expanded(new, batch_shape)

    def _matrix_shape(self) -> tuple:
        return self._batch_shape + self._event_shape + self._event_shape

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        lower = self._unbroadcasted_scale_tril
        return (lower @ lower.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        lower = self._unbroadcasted_scale_tril
        eye = creation.eye(lower.shape[-1], dtype=lower.dtype, device=lower.device)
        inv = solve_lower(lower, eye)
        return (inv.mT @ inv).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(
            self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        eps = standard_normal(self._extended_shape(sample_shape), self.loc)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        m = mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) \
            - self._half_log_det()

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(self._batch_shape) if self._batch_shape else h
