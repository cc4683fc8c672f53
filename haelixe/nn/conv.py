"""Convolution layers (PyTorch's signatures, initialisation and state-dict names):
nn.Conv1d/2d/3d and nn.ConvTranspose1d/2d/3d made from the declarations of F.conv1d/2d/3d
and F.conv_transpose1d/2d/3d here (nn/fused_layers.py)."""

from __future__ import annotations

import math

from .. import creation
from ..autograd.mode import no_grad
from ..ops import conv as C
from ..ops.registry import Layer, fused
from . import functional as F

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


def _conv_transpose_layer(d):
    def state(in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
              groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
              dtype=None):
        """Weight (in, out / groups, *kernel) and bias uniform in +-1/sqrt(fan_in)."""
        name = f"ConvTranspose{d}d"
        if padding_mode != "zeros":
            raise ValueError(f"{name}: only padding_mode='zeros' is supported (as in "
                             f"PyTorch), got {padding_mode!r}")
        return conv_state(name, d, True, in_channels, out_channels, kernel_size, stride,
                          padding, dilation, groups, bias, padding_mode, output_padding,
                          device=device, dtype=dtype)
    return state


def _output_padding(layer, input, output_size):
    """The output_padding that gives ``output_size`` (the last dims), as PyTorch's."""
    if output_size is None:
        return layer.output_padding
    name, d = type(layer).__name__, len(layer.kernel_size)
    size = tuple(output_size)[-d:]
    if len(size) != d:
        raise ValueError(f"{name}: output_size must have {d} or more entries, got "
                         f"{output_size!r}")
    pads = []
    for i in range(d):
        n = input.shape[input.ndim - d + i]
        least = ((n - 1) * layer.stride[i] - 2 * layer.padding[i]
                 + layer.dilation[i] * (layer.kernel_size[i] - 1) + 1)
        if not least <= size[i] < least + layer.stride[i]:
            raise ValueError(f"{name}: requested an output size of {size}, but valid "
                             f"sizes range from {least} to {least + layer.stride[i] - 1} "
                             f"in dim {i} (for an input of shape {input.shape})")
        pads.append(size[i] - least)
    return tuple(pads)


def _sized_forward(conv_transpose):
    """The layer's forward: ``conv_transpose`` with its attributes, its output_padding
    the one that gives ``output_size`` where forward is given one (as PyTorch's)."""
    def forward(self, input, output_size=None):  # noqa: A002 (PyTorch's name)
        return conv_transpose(input, self.weight, self.bias, self.stride, self.padding,
                              _output_padding(self, input, output_size), self.groups,
                              self.dilation)
    return forward


for _d, _form in ((1, C.conv_transpose1d), (2, C.conv_transpose2d), (3, C.conv_transpose3d)):
    # (no Function of their own: a product, then the windows summed back, recorded ops)
    fused(None, arity=3, layer=Layer(f"ConvTranspose{_d}d", _conv_transpose_layer(_d),
                                     parameters=("weight", "bias"), shown=conv_repr,
                                     forward=_sized_forward))(_form)


#: layers made from the declarations here that pickled models name as this module's
_PICKLED_HERE = ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                 "ConvTranspose3d")


def __getattr__(name):
    # (looked up when asked for: nn/fused_layers, which makes them, imports this module
    # first)
    if name in _PICKLED_HERE:
        from . import fused_layers

        return getattr(fused_layers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
