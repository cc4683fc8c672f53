"""Layers for images that hold no weights: Unfold, Unflatten (Dropout2d, Upsample and
Fold are made from their ops' declarations: nn/fused_layers)."""

from __future__ import annotations

from ..ops.conv import unfold

# (made from their ops' declarations; named here too, so that a model pickled when they
# lived here loads)
from .fused_layers import Dropout2d, Fold, Upsample  # noqa: F401
from .module import Module


# (written out: the registry's "unfold" is Tensor.unfold, the sliding-window view with its
# own declaration and spec, so F.unfold is not declared under the same name)
class Unfold(Module):
    """im2col as a layer: (N, C, H, W) -> (N, C*kh*kw, L)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding="
                f"{self.padding}, stride={self.stride}")


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size``: the inverse of Flatten."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
