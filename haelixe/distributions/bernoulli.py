"""Bernoulli(probs=None, logits=None): one coin per batch element, valued 0 or 1."""

from __future__ import annotations

import math

from .. import creation
from ..autograd.mode import no_grad
from . import constraints
from .probs_or_logits import ProbsOrLogits
from .utils import _is_number, broadcast_all

__all__ = ["Bernoulli"]


class Bernoulli(ProbsOrLogits):
    """Bernoulli(probs=None, logits=None, validate_args=None): exactly one of the
    probability of a 1 or its log odds; the other is computed when first read."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._set_probs_or_logits(probs, logits)
        given = probs if probs is not None else logits
        super().__init__(() if _is_number(given) else self._param.shape,
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = tuple(batch_shape)
        self._expand_param(new, batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        p = self.probs
        return (p >= 0.5).to(p.dtype).masked_fill(p == 0.5, math.nan)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            p = self.probs
            u = creation.rand(shape, dtype=p.dtype, device=p.device)
            return (u < p.expand(shape)).to(p.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        # -binary_cross_entropy_with_logits(logits, value): its gradient is
        # value - sigmoid(logits) everywhere, logits 0 included
        return value * logits - logits.softplus()

    def entropy(self):
        return self.logits.softplus() - self.probs * self.logits

    def enumerate_support(self, expand=True):
        values = creation.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((2,) + self._batch_shape) if expand else values
