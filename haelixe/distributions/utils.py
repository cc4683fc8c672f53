"""Helpers the distributions share, under the names ``torch.distributions.utils`` gives
them: parameters broadcast to one shape, logits and probabilities converted, a
property computed once per instance."""

from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from .. import creation
from .. import dtype as dt
from ..autograd.mode import enable_grad
from ..layout import broadcast_shapes
from ..tensor import Tensor

__all__ = ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs",
           "probs_to_logits"]

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
#: (eps, tiny, min) of each float dtype; bfloat16 has no numpy finfo of its own
_BF16_FINFO = (2.0 ** -7, 2.0 ** -126, -(2.0 - 2.0 ** -7) * 2.0 ** 127)


def finfo(dtype) -> tuple[float, float, float]:
    """(eps, smallest normal, most negative finite) of a float dtype."""
    if dtype.name == "bfloat16":
        return _BF16_FINFO
    info = np.finfo(dtype.np)
    return float(info.eps), float(info.tiny), float(info.min)


def _is_number(v) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, Tensor)


def broadcast_all(*values):
    """The tensors broadcast to their common shape (views, no copies); a Python number
    becomes a tensor of the first tensor's dtype and device (the default float dtype
    when every value is a number)."""
    if not all(isinstance(v, Tensor) or _is_number(v) for v in values):
        raise ValueError("Input arguments must all be instances of Number, torch.Tensor "
                         "or objects implementing __torch_function__.")
    first = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = first.dtype if first is not None else dt.default_float
    device = first.device if first is not None else None
    tensors = [v if isinstance(v, Tensor) else creation.tensor(v, dtype=dtype, device=device)
               for v in values]
    return broadcast_tensors(*tensors)


def broadcast_tensors(*tensors):
    shape = broadcast_shapes(*(t.shape for t in tensors), op="broadcast_all")
    return tuple(t if t.shape == shape else t.expand(shape) for t in tensors)


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """``value`` summed over its ``dim`` rightmost dims."""
    if dim == 0:
        return value
    return value.reshape(value.shape[:value.ndim - dim] + (-1,)).sum(-1)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """sigmoid(logits) for a binary event (log odds), else softmax over the last dim."""
    if is_binary:
        return logits.sigmoid()
    return logits.softmax(-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """``probs`` clamped into [eps, 1 - eps] (eps of its dtype), so its logs are finite."""
    eps = finfo(probs.dtype)[0]
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """log odds of a binary event's probability, else the log of each probability
    (clamped first, as PyTorch's, so 0 and 1 give finite logits)."""
    p = clamp_probs(probs)
    if is_binary:
        return p.log() - (-p).log1p()
    return p.log()


class lazy_property:  # noqa: N801 (PyTorch's name)
    """A property computed on first read (with gradients on) and then stored on the
    instance, so later reads cost nothing. Distribution validation skips a parameter
    that is still lazy (Categorical made from logits has not computed its probs)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value

