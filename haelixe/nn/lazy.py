"""Lazy modules (PyTorch's torch.nn.modules.lazy): layers that read their input size
(in_features, in_channels, num_features) from their first input.

Until that first call a lazy layer holds UninitializedParameters (and, for the norms,
UninitializedBuffers). A forward pre-hook then materializes them in place (the same
objects, so what holds them keeps them), initialises them as the non-lazy layer does
(a LazyLinear's weight is what Linear(in_features, ...) would draw from the generator at
that moment), removes itself, and the module becomes that layer (``cls_to_become``):
``type(m)`` is Linear from then on. ``load_state_dict`` of an initialized state gives
the placeholders the loaded shapes first.
"""

from __future__ import annotations

from .. import creation
from ..autograd.mode import no_grad
from .fused_layers import LAYERS
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)
from .uninitialized import UninitializedBuffer, UninitializedParameter, is_lazy


class LazyModuleMixin:
    """A module whose parameters wait for its first input: subclasses implement
    ``initialize_parameters(*args, **kwargs)``, which sees forward's arguments and
    materializes every placeholder."""

    cls_to_become: type | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{type(self).__name__}")

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer is still a placeholder."""
        return any(is_lazy(t) for t in (*self._parameters.values(),
                                        *self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {type(module).__name__} has not been fully "
                               f"initialized")
        module._initialize_hook.remove()
        del module._initialize_hook
        hooks = module._hooks
        if not (hooks.forward_pre or hooks.forward or hooks.backward_pre or hooks.backward):
            del module.__dict__["_hooks"]  # (a module without hooks: the plain call)
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _before_load(self, state_dict, prefix):
        """Each placeholder the state dict holds an initialized tensor for is given its
        shape (Module.load_state_dict then copies the values in)."""
        with no_grad():
            for store in (self._parameters, self._buffers):
                for name, t in store.items():
                    src = state_dict.get(prefix + name)
                    if is_lazy(t) and src is not None and not is_lazy(src):
                        t.materialize(tuple(src.shape))


def _fill(placeholder, value):
    """The placeholder materialized and holding ``value``'s values."""
    with no_grad():
        placeholder.materialize(value.shape)
        placeholder.copy_(value)


def _placeholders(module, names, device, dtype):
    """The parameters ``names`` (those not None) replaced by placeholders."""
    for name in names:
        if getattr(module, name) is not None:
            setattr(module, name, UninitializedParameter(device=device, dtype=dtype))


Linear = LAYERS["Linear"]


class LazyLinear(LazyModuleMixin, Linear):
    """nn.Linear with ``in_features`` read from the first input's last dim."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, out_features, bias, device, dtype)
        _placeholders(self, ("weight", "bias"), device, dtype)

    def initialize_parameters(self, input, *args, **kwargs):  # noqa: A002
        w = self.weight
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            fresh = Linear(self.in_features, self.out_features, self.bias is not None,
                           device=w.device, dtype=w.dtype)
            _fill(w, fresh.weight)
            if self.bias is not None:
                _fill(self.bias, fresh.bias)
        if self.in_features == 0:  # (a loaded state: its size, as PyTorch's reads it)
            if input.shape[-1] != w.shape[-1]:
                raise RuntimeError(f"The in_features inferred from input: "
                                   f"{input.shape[-1]} is not equal to in_features from "
                                   f"self.weight: {w.shape[-1]}")
            self.in_features = input.shape[-1]


class _LazyConv(LazyModuleMixin):
    """in_channels read from the first input's channel dim (dim 0 of an unbatched one)."""

    def initialize_parameters(self, input, *args, **kwargs):  # noqa: A002
        if not self.has_uninitialized_params():
            return
        d, name = len(self.kernel_size), type(self).__name__
        if input.ndim not in (d + 1, d + 2):
            raise RuntimeError(f"Expected {d + 1}D (unbatched) or {d + 2}D (batched) input "
                               f"to {name}, but got input of size: {input.shape}")
        channels = input.shape[1] if input.ndim == d + 2 else input.shape[0]
        if channels % self.groups:
            raise ValueError(f"{name}: in_channels ({channels}, the input's channels: "
                             f"shape {input.shape}) must be divisible by groups "
                             f"({self.groups})")
        self.in_channels = channels
        w = self.weight
        fresh = self._fresh(device=w.device, dtype=w.dtype)
        _fill(w, fresh.weight)
        if self.bias is not None:
            _fill(self.bias, fresh.bias)


def _lazy_conv(d):
    conv = LAYERS[f"Conv{d}d"]

    class LazyConv(_LazyConv, conv):
        cls_to_become = conv

        def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                     groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
            super().__init__(0, out_channels, kernel_size, stride, padding, dilation,
                             groups, bias, padding_mode, device, dtype)
            _placeholders(self, ("weight", "bias"), device, dtype)

        def _fresh(self, device, dtype):
            return conv(self.in_channels, self.out_channels, self.kernel_size, self.stride,
                        self.padding, self.dilation, self.groups, self.bias is not None,
                        self.padding_mode, device=device, dtype=dtype)

    return _named(LazyConv, f"LazyConv{d}d", f"nn.Conv{d}d with ``in_channels`` read "
                                            f"from the first input.")


def _lazy_conv_transpose(d):
    conv = LAYERS[f"ConvTranspose{d}d"]

    class LazyConvTranspose(_LazyConv, conv):
        cls_to_become = conv

        def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                     groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                     dtype=None):
            super().__init__(0, out_channels, kernel_size, stride, padding, output_padding,
                             groups, bias, dilation, padding_mode, device, dtype)
            _placeholders(self, ("weight", "bias"), device, dtype)

        def _fresh(self, device, dtype):
            return conv(self.in_channels, self.out_channels, self.kernel_size, self.stride,
                        self.padding, self.output_padding, self.groups,
                        self.bias is not None, self.dilation, self.padding_mode,
                        device=device, dtype=dtype)

    return _named(LazyConvTranspose, f"LazyConvTranspose{d}d",
                  f"nn.ConvTranspose{d}d with ``in_channels`` read from the first input.")


class _LazyNorm(LazyModuleMixin):
    """num_features read from the first input's dim 1 (as PyTorch reads it, an
    unbatched input's too); weight ones, bias zeros, running statistics 0 and 1."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__(0, eps, momentum, False, False, device, dtype)
        self.affine, self.track_running_stats = affine, track_running_stats
        on = {"device": device, "dtype": dtype}
        if affine:
            self.weight = UninitializedParameter(**on)
            if bias:
                self.bias = UninitializedParameter(**on)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(**on)
            self.running_var = UninitializedBuffer(**on)
            self.num_batches_tracked = creation.tensor(0, dtype="int64", device=device)

    def initialize_parameters(self, input, *args, **kwargs):  # noqa: A002
        if not self.has_uninitialized_params():
            return
        n = self.num_features = input.shape[1]
        for name, value in (("weight", 1.0), ("bias", 0.0), ("running_mean", 0.0),
                            ("running_var", 1.0)):
            t = getattr(self, name)
            if t is not None:
                with no_grad():
                    t.materialize((n,))
                    t.fill_(value)
        if self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.fill_(0)


def _lazy_norm(norm):
    class LazyNorm(_LazyNorm, norm):
        cls_to_become = norm

    return _named(LazyNorm, f"Lazy{norm.__name__}",
                  f"nn.{norm.__name__} with ``num_features`` read from the first input.")


def _named(cls, name, doc):
    cls.__name__ = cls.__qualname__ = name
    cls.__doc__ = doc
    return cls


LazyConv1d, LazyConv2d, LazyConv3d = (_lazy_conv(d) for d in (1, 2, 3))
LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d = (
    _lazy_conv_transpose(d) for d in (1, 2, 3))
LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d = (
    _lazy_norm(n) for n in (BatchNorm1d, BatchNorm2d, BatchNorm3d))
LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d = (
    _lazy_norm(n) for n in (InstanceNorm1d, InstanceNorm2d, InstanceNorm3d))
