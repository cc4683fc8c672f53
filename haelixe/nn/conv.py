"""Convolution layers: Conv1d/2d/3d and ConvTranspose1d/2d/3d (PyTorch's signatures,
initialisation and state-dict names)."""

from __future__ import annotations

import math

from .. import creation
from ..autograd.mode import no_grad
from ..ops import conv as C
from . import functional as F
from .module import Module, Parameter

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """What the convolution layers share: the geometry, the weight and bias (uniform in
    +-1/sqrt(fan_in), PyTorch's kaiming_uniform with a=sqrt(5)), and the repr."""

    dims = 2
    transposed = False
    function = None  # the functional form (conv2d...), set by each layer

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 groups, bias, padding_mode, output_padding=0, device=None, dtype=None):
        super().__init__()
        name, d = type(self).__name__, self.dims
        if not isinstance(groups, int) or groups < 1:
            raise ValueError(f"{name}: groups must be a positive int, got {groups!r}")
        if in_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by "
                             f"groups ({groups})")
        if out_channels % groups:
            raise ValueError(f"{name}: out_channels ({out_channels}) must be divisible by "
                             f"groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got "
                             f"{padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = C.ntuple(kernel_size, d, "kernel_size", name)
        self.stride = C.ntuple(stride, d, "stride", name)
        self.dilation = C.ntuple(dilation, d, "dilation", name)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding must be an int, a tuple, 'same' or "
                                 f"'valid', got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided "
                                 f"convolutions (stride {self.stride})")
            self.padding = padding
        else:
            self.padding = C.ntuple(padding, d, "padding", name)
        self.output_padding = C.ntuple(output_padding, d, "output_padding", name)
        self.padding_mode = padding_mode
        if self.transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        fan_in = shape[1] * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in else 0.0
        with no_grad():
            self.weight = Parameter(creation.empty(*shape).uniform_(-bound, bound))
            self.bias = Parameter(creation.empty(out_channels).uniform_(-bound, bound)) \
                if bias else None
        if device is not None or dtype is not None:
            self.to(device=device, dtype=dtype)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        zero = (0,) * self.dims
        if self.padding != zero:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self.dims:
            s += f", dilation={self.dilation}"
        if self.output_padding != zero:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device=device, dtype=dtype)

    def forward(self, input):
        fn = type(self).function
        if self.padding_mode == "zeros":
            return fn(input, self.weight, self.bias, self.stride, self.padding,
                      self.dilation, self.groups)
        if self.padding == "same":
            pads = C.same_padding(self.kernel_size, self.dilation)
        elif self.padding == "valid":
            pads = ((0, 0),) * self.dims
        else:
            pads = tuple((p, p) for p in self.padding)
        flat = tuple(n for before_after in reversed(pads) for n in before_after)
        return fn(F.pad(input, flat, mode=self.padding_mode), self.weight, self.bias,
                  self.stride, 0, self.dilation, self.groups)


class Conv1d(_Conv):
    """1-D convolution over (N, C, L); weight (out, in / groups, k)."""

    dims = 1
    function = staticmethod(C.conv1d)


class Conv2d(_Conv):
    """2-D convolution over (N, C, H, W); weight (out, in / groups, kh, kw). The
    windows of the input are one strided view of it and the layer one product per group
    with them (haelixe/ops/conv.py)."""

    dims = 2
    function = staticmethod(C.conv2d)


class Conv3d(_Conv):
    """3-D convolution over (N, C, D, H, W); weight (out, in / groups, kd, kh, kw)."""

    dims = 3
    function = staticmethod(C.conv3d)


class _ConvTranspose(_ConvNd):
    transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f"{type(self).__name__}: only padding_mode='zeros' is supported "
                             f"(as in PyTorch), got {padding_mode!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, device=device,
                         dtype=dtype)

    def _output_padding(self, input, output_size):
        """The output_padding that gives ``output_size`` (the last dims), as PyTorch's."""
        if output_size is None:
            return self.output_padding
        d = self.dims
        size = tuple(output_size)[-d:]
        if len(size) != d:
            raise ValueError(f"{type(self).__name__}: output_size must have {d} or more "
                             f"entries, got {output_size!r}")
        pads = []
        for i in range(d):
            n = input.shape[input.ndim - d + i]
            least = ((n - 1) * self.stride[i] - 2 * self.padding[i]
                     + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            if not least <= size[i] < least + self.stride[i]:
                raise ValueError(f"{type(self).__name__}: requested an output size of "
                                 f"{size}, but valid sizes range from {least} to "
                                 f"{least + self.stride[i] - 1} in dim {i} (for an input "
                                 f"of shape {input.shape})")
            pads.append(size[i] - least)
        return tuple(pads)

    def forward(self, input, output_size=None):
        return type(self).function(input, self.weight, self.bias, self.stride, self.padding,
                  self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """The adjoint of Conv1d; weight (in, out / groups, k)."""

    dims = 1
    function = staticmethod(C.conv_transpose1d)


class ConvTranspose2d(_ConvTranspose):
    """The adjoint of Conv2d (an upsampling layer); weight (in, out / groups, kh, kw)."""

    dims = 2
    function = staticmethod(C.conv_transpose2d)


class ConvTranspose3d(_ConvTranspose):
    """The adjoint of Conv3d; weight (in, out / groups, kd, kh, kw)."""

    dims = 3
    function = staticmethod(C.conv_transpose3d)
