"""The loss modules of losses declared without a layer (BCELoss, BCEWithLogitsLoss): the
functional losses with their options held as attributes (class weights as buffers, so
they follow .to() and appear in the state dict, as in PyTorch); and NLLLoss2d,
NLLLoss's deprecated name."""

from __future__ import annotations

import warnings

from ..tensor import Tensor
from . import losses

# (made from their ops' declarations; named here too, so that a model pickled when they
# lived here loads)
from .fused_layers import (  # noqa: F401
    CrossEntropyLoss,
    HuberLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from .module import Module


class _Loss(Module):
    """Calls ``fn(input, target, reduction=..., **options)``; options that are tensors
    (or None where a tensor may go) are buffers."""

    fn = None
    tensor_options = ("weight", "pos_weight")

    def __init__(self, reduction: str = "mean", **options):
        super().__init__()
        losses._check_reduction(reduction, type(self).__name__)
        self.reduction = reduction
        self._options = tuple(options)
        for name, value in options.items():
            if name in self.tensor_options and (value is None or isinstance(value, Tensor)):
                self.register_buffer(name, value)
            else:
                setattr(self, name, value)

    def forward(self, input, target):
        options = {name: getattr(self, name) for name in self._options}
        return type(self).fn(input, target, reduction=self.reduction, **options)

    def extra_repr(self) -> str:
        shown = [f"{n}={getattr(self, n)!r}" for n in self._options
                 if n not in self.tensor_options]
        return ", ".join([f"reduction={self.reduction!r}", *shown])


class BCELoss(_Loss):
    fn = losses.binary_cross_entropy

    def __init__(self, weight=None, reduction: str = "mean"):
        super().__init__(reduction, weight=weight)


class BCEWithLogitsLoss(_Loss):
    fn = losses.binary_cross_entropy_with_logits

    def __init__(self, weight=None, reduction: str = "mean", pos_weight=None):
        super().__init__(reduction, weight=weight, pos_weight=pos_weight)


class NLLLoss2d(NLLLoss):
    """NLLLoss by its deprecated name, which PyTorch keeps: the same loss over (N, C, d1,
    ...) inputs, with a FutureWarning when one is made."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a "
                      "drop-in replacement", FutureWarning, stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)
