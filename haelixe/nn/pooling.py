"""The pooling layers no declaration makes (max-unpooling, the adaptive pools: PyTorch's
names, arguments and reprs); nn.MaxPool*d and nn.AvgPool*d are made from their ops'
declarations (ops/pooling.py, nn/fused_layers.py). The work is in ops/pooling.py."""

from __future__ import annotations

from ..ops import pooling as P
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


class _AdaptivePool(Module):
    function = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return type(self).function(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    function = staticmethod(P.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptivePool):
    function = staticmethod(P.adaptive_avg_pool2d)


class _AdaptiveMaxPool(_AdaptivePool):
    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return type(self).function(input, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    """The largest value of each of output_size windows of (nearly) equal size."""

    function = staticmethod(P.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    """The largest value of each cell of an output_size grid laid over the image."""

    function = staticmethod(P.adaptive_max_pool2d)
