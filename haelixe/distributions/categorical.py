"""Categorical and OneHotCategorical: one draw from K classes per batch element, as a
class index or as a one-hot vector."""

from __future__ import annotations

import math

from .. import creation
from .. import dtype as dt
from ..autograd.mode import no_grad
from ..ops.ordering import multinomial
from ..tensor import Tensor
from . import constraints
from .distribution import Distribution, as_shape
from .utils import broadcast_tensors, finfo, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Categorical", "OneHotCategorical", "OneHotCategoricalStraightThrough"]


def _one_hot(indices, num_classes):
    from ..nn.functional import one_hot

    return one_hot(indices, num_classes)


class Categorical(Distribution):
    """Categorical(probs=None, logits=None, validate_args=None): class indices in
    0..K-1 with K the last dim of ``probs`` (non-negative weights, normalised here) or
    ``logits`` (unnormalised log probabilities, normalised here); the dims before it are
    the batch."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        for name, v in (("probs", probs), ("logits", logits)):
            if v is not None and not isinstance(v, Tensor):
                raise TypeError(f"Categorical: `{name}` must be a Tensor, got "
                                f"{type(v).__name__}")
        if probs is not None:
            if probs.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self._param = self.probs
        else:
            if logits.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            self._param = self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = tuple(batch_shape)
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape
                                                              + (self._num_events,)))
                new._param = new.__dict__[name]
        new._num_events = self._num_events
        return self._expanded(new, batch_shape)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> tuple:
        return self._param.shape

    def _nan(self):
        return creation.full(self._extended_shape(), math.nan, dtype=self.probs.dtype,
                             device=self.probs.device)

    @property
    def mean(self):
        return self._nan()

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return self._nan()

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        n = math.prod(as_shape(sample_shape))
        probs = self.probs
        if n == 0 or math.prod(self._batch_shape) == 0:
            return creation.zeros(shape, dtype=dt.int64, device=probs.device)
        with no_grad():
            rows = multinomial(probs.reshape(-1, self._num_events), n, True)
        return rows.T.reshape(shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, log_pmf = broadcast_tensors(value.long().unsqueeze(-1), self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        # a probability of 0 has logit -inf: clamped, so that 0 * logit is 0, not NaN
        logits = self.logits.clamp(min=finfo(self.logits.dtype)[2])
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = creation.arange(self._num_events, dtype=dt.int64, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((self._num_events,) + self._batch_shape) if expand else values


class OneHotCategorical(Distribution):
    """OneHotCategorical(probs=None, logits=None, validate_args=None): Categorical's
    draws as one-hot vectors of length K (the event shape is (K,))."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        batch_shape = tuple(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        return self._expanded(new, batch_shape)

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self) -> tuple:
        return self._categorical.param_shape

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return _one_hot(probs.argmax(dim=-1), probs.shape[-1]).to(probs.dtype)

    @property
    def variance(self):
        p = self._categorical.probs
        return p * (1 - p)

    def sample(self, sample_shape=()):
        probs = self._categorical.probs
        indices = self._categorical.sample(sample_shape)
        return _one_hot(indices, self._categorical._num_events).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self._event_shape[0]
        values = creation.eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((n,) + (1,) * len(self._batch_shape) + (n,))
        return values.expand((n,) + self._batch_shape + (n,)) if expand else values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical whose rsample passes the gradient of the probabilities
    through the one-hot draw (the straight-through estimator)."""

    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
