"""The pooling layers no declaration makes (max-unpooling: PyTorch's names, arguments and
reprs); nn.MaxPool*d, nn.AvgPool*d and the adaptive pools are made from their ops'
declarations (ops/pooling.py, nn/fused_layers.py). The work is in ops/pooling.py."""

from __future__ import annotations

from ..ops import pooling as P

# (made from their ops' declarations; named here too, so that a model pickled when they
# lived here loads)
from .fused_layers import (  # noqa: F401
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
)
from .module import Module


class _MaxUnpoolNd(Module):
    function = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding

    def forward(self, input, indices, output_size=None):
        return type(self).function(input, indices, self.kernel_size, self.stride,
                                   self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    function = staticmethod(P.max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    """Each value back at the index MaxPool2d(return_indices=True) gave it; zeros
    elsewhere."""

    function = staticmethod(P.max_unpool2d)
