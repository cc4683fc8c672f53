"""The base class of every distribution: its shapes, argument validation and the
methods a subclass fills in, with ``torch.distributions.Distribution``'s names and
semantics.

Shapes are tuples (Haelixe's ``Tensor.shape``), which compare equal to PyTorch's
``torch.Size``. Validation is on by default (off under ``python -O``), as in PyTorch:
it reads the parameters back to check their constraints once, at construction, and
each value given to ``log_prob`` / ``cdf``.
"""

from __future__ import annotations

import math
import warnings

from ..autograd.mode import no_grad
from ..tensor import Tensor
from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


def as_shape(sample_shape) -> tuple:
    """A sample shape (tuple, list, torch.Size) as a tuple of ints."""
    if isinstance(sample_shape, int):
        raise TypeError(f"sample_shape must be a tuple of sizes such as ({sample_shape},), "
                        f"got the int {sample_shape}")
    return tuple(int(n) for n in sample_shape)


class Distribution:
    """A batch of probability distributions over events of ``event_shape``."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for every distribution made afterwards
        without an explicit ``validate_args``."""
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args: expected True or False, got "
                             f"{value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = tuple(batch_shape)
        self._event_shape = tuple(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._check_parameters()
        super().__init__()

    def _check_parameters(self) -> None:
        try:
            arg_constraints = self.arg_constraints
        except NotImplementedError:
            arg_constraints = {}
            warnings.warn(f"{type(self)} does not define `arg_constraints`. Please set "
                          f"`arg_constraints = {{}}` or initialize the distribution with "
                          f"`validate_args=False` to turn off validation.", stacklevel=3)
        for param, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue  # depends on other parameters: nothing to check alone
            if param not in self.__dict__ and \
                    isinstance(getattr(type(self), param, None), lazy_property):
                continue  # not computed yet (probs of a Categorical made from logits)
            value = getattr(self, param)
            if not bool(constraint.check(value).all()):
                raise ValueError(
                    f"Expected parameter {param} ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                    f"constraint {constraint!r}, but found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        """A distribution with the batch dims expanded to ``batch_shape`` (views of
        the parameters; no validation repeated)."""
        raise NotImplementedError

    @property
    def batch_shape(self) -> tuple:
        return self._batch_shape

    @property
    def event_shape(self) -> tuple:
        return self._event_shape

    @property
    def arg_constraints(self) -> dict:
        raise NotImplementedError

    @property
    def support(self):
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        raise NotImplementedError

    @property
    def mode(self) -> Tensor:
        raise NotImplementedError(f"{type(self)} does not implement mode")

    @property
    def variance(self) -> Tensor:
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape=()) -> Tensor:
        """Draws of shape ``sample_shape + batch_shape + event_shape``, without
        gradients."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()) -> Tensor:
        """Reparameterized draws: differentiable with respect to the parameters."""
        raise NotImplementedError

    def sample_n(self, n: int) -> Tensor:
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.",
                      FutureWarning, stacklevel=2)
        return self.sample((n,))

    def log_prob(self, value) -> Tensor:
        raise NotImplementedError

    def cdf(self, value) -> Tensor:
        raise NotImplementedError

    def icdf(self, value) -> Tensor:
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        raise NotImplementedError

    def entropy(self) -> Tensor:
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()) -> tuple:
        return as_shape(sample_shape) + self._batch_shape + self._event_shape

    def _validate_sample(self, value) -> None:
        """PyTorch's checks of a value given to log_prob / cdf: a tensor, its rightmost
        dims the event shape, broadcastable with the batch, within the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        start = value.ndim - len(self._event_shape)
        if tuple(value.shape[start:]) != self._event_shape:
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{tuple(value.shape)} vs {self._event_shape}.")
        expected = self._batch_shape + self._event_shape
        for i, j in zip(reversed(value.shape), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with "
                                 f"batch_shape+event_shape: {tuple(value.shape)} vs "
                                 f"{expected}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{type(self)} does not define `support` to enable sample "
                          f"validation. Please initialize the distribution with "
                          f"`validate_args=False` to turn off validation.", stacklevel=3)
            return
        if not bool(support.check(value).all()):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) to be within the support ({support!r}) of the "
                f"distribution {self!r}, but found invalid values:\n{value}")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                f"__init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def _expanded(self, new, batch_shape, event_shape=None):
        """Finish ``new`` (made by expand) without validating it again."""
        Distribution.__init__(new, batch_shape,
                              self._event_shape if event_shape is None else event_shape,
                              validate_args=False)
        new._validate_args = self._validate_args
        return new

    def __repr__(self) -> str:
        try:
            names = [k for k in self.arg_constraints if k in self.__dict__]
        except NotImplementedError:
            names = []
        shown = []
        for p in names:
            v = self.__dict__[p]
            shown.append(f"{p}: {v if math.prod(v.shape) == 1 else tuple(v.shape)}")
        return f"{type(self).__name__}({', '.join(shown)})"
