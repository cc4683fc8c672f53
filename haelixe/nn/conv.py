"""Convolution layers (PyTorch's signatures, initialisation and state-dict names):
nn.Conv1d/2d/3d made from the declarations of F.conv1d/2d/3d here (nn/fused_layers.py),
ConvTranspose1d/2d/3d written out."""

from __future__ import annotations

import math

from .. import creation
from ..autograd.mode import no_grad
from ..ops import conv as C
from ..ops.registry import Layer, fused
from . import functional as F
from .module import Module, Parameter

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def conv_state(name, d, transposed, in_channels, out_channels, kernel_size, stride, padding,
               dilation, groups, bias, padding_mode, output_padding=0, device=None,
               dtype=None):
    """What the convolution layers share: the geometry checked, the weight and bias
    (uniform in +-1/sqrt(fan_in), PyTorch's kaiming_uniform with a=sqrt(5)), by name."""
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
    kernel = C.ntuple(kernel_size, d, "kernel_size", name)
    strides = C.ntuple(stride, d, "stride", name)
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"{name}: padding must be an int, a tuple, 'same' or "
                             f"'valid', got {padding!r}")
        if padding == "same" and any(s != 1 for s in strides):
            raise ValueError(f"{name}: padding='same' is not supported for strided "
                             f"convolutions (stride {strides})")
    else:
        padding = C.ntuple(padding, d, "padding", name)
    if transposed:
        shape = (in_channels, out_channels // groups) + kernel
    else:
        shape = (out_channels, in_channels // groups) + kernel
    fan_in = shape[1] * math.prod(kernel)
    bound = 1.0 / math.sqrt(fan_in) if fan_in else 0.0
    with no_grad():
        weight = creation.empty(*shape).uniform_(-bound, bound)
        bias = creation.empty(out_channels).uniform_(-bound, bound) if bias else None
    if device is not None or dtype is not None:
        weight = weight.to(device=device, dtype=dtype)
        bias = None if bias is None else bias.to(device=device, dtype=dtype)
    return {"in_channels": in_channels, "out_channels": out_channels, "groups": groups,
            "kernel_size": kernel, "stride": strides, "padding": padding,
            "dilation": C.ntuple(dilation, d, "dilation", name),
            "output_padding": C.ntuple(output_padding, d, "output_padding", name),
            "padding_mode": padding_mode, "weight": weight, "bias": bias}


def conv_repr(layer) -> str:
    """A convolution layer's extra_repr, as PyTorch's."""
    d = len(layer.kernel_size)
    s = (f"{layer.in_channels}, {layer.out_channels}, kernel_size={layer.kernel_size}, "
         f"stride={layer.stride}")
    zero = (0,) * d
    if layer.padding != zero:
        s += f", padding={layer.padding}"
    if layer.dilation != (1,) * d:
        s += f", dilation={layer.dilation}"
    if layer.output_padding != zero:
        s += f", output_padding={layer.output_padding}"
    if layer.groups != 1:
        s += f", groups={layer.groups}"
    if layer.bias is None:
        s += ", bias=False"
    if layer.padding_mode != "zeros":
        s += f", padding_mode={layer.padding_mode}"
    return s


class _ConvNd(Module):
    """A transposed convolution layer's state (conv_state) as its attributes."""

    dims = 2

    def __init__(self, *args, **kwargs):
        super().__init__()
        for name, value in conv_state(type(self).__name__, self.dims, True,
                                      *args, **kwargs).items():
            setattr(self, name, Parameter(value) if name in ("weight", "bias") and
                    value is not None else value)

    extra_repr = conv_repr


def _conv_layer(d):
    def state(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
              groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        """Weight (out, in / groups, *kernel) and bias uniform in +-1/sqrt(fan_in)."""
        return conv_state(f"Conv{d}d", d, False, in_channels, out_channels, kernel_size,
                          stride, padding, dilation, groups, bias, padding_mode,
                          device=device, dtype=dtype)
    return state


def _padded_forward(conv):
    """The layer's forward: ``conv`` with its attributes, after padding the input by
    padding_mode where it is not zeros (F.conv*d pads with zeros only)."""
    def forward(self, input):  # noqa: A002 (PyTorch's name)
        if self.padding_mode == "zeros":
            return conv(input, self.weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)
        if self.padding == "same":
            pads = C.same_padding(self.kernel_size, self.dilation)
        elif self.padding == "valid":
            pads = ((0, 0),) * len(self.kernel_size)
        else:
            pads = tuple((p, p) for p in self.padding)
        flat = tuple(n for before_after in reversed(pads) for n in before_after)
        return conv(F.pad(input, flat, mode=self.padding_mode), self.weight, self.bias,
                    self.stride, 0, self.dilation, self.groups)
    return forward


for _d, _form in ((1, C.conv1d), (2, C.conv2d), (3, C.conv3d)):
    # (no Function of their own beside ops/conv.py's Conv node: each records one)
    fused(C.Conv, arity=3, layer=Layer(f"Conv{_d}d", _conv_layer(_d),
                                       parameters=("weight", "bias"), shown=conv_repr,
                                       forward=_padded_forward))(_form)


class _ConvTranspose(_ConvNd):
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
