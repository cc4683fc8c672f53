"""Pooling layers (PyTorch's names, arguments and reprs); the work is in ops/pooling.py."""

from __future__ import annotations

from ..ops import pooling as P
from ..ops.conv import ntuple
from .module import Module


class _MaxPoolNd(Module):
    function = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return type(self).function(input, self.kernel_size, self.stride, self.padding,
                                   self.dilation, self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding="
                f"{self.padding}, dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    function = staticmethod(P.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    function = staticmethod(P.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    function = staticmethod(P.max_pool3d)


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


class AvgPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = self._size(kernel_size)  # (as PyTorch keeps them: 1-tuples)
        self.stride = self.kernel_size if stride is None else self._size(stride)
        self.padding, self.ceil_mode = self._size(padding), ceil_mode
        self.count_include_pad = count_include_pad

    @staticmethod
    def _size(value):
        return ntuple(value, 1, "size", "AvgPool1d")

    def forward(self, input):
        return P.avg_pool1d(input, self.kernel_size, self.stride, self.padding,
                            self.ceil_mode, self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(AvgPool1d):
    function = staticmethod(P.avg_pool2d)

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    @staticmethod
    def _size(value):
        return value

    def forward(self, input):
        return type(self).function(input, self.kernel_size, self.stride, self.padding,
                            self.ceil_mode, self.count_include_pad, self.divisor_override)


class AvgPool3d(AvgPool2d):
    function = staticmethod(P.avg_pool3d)


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
