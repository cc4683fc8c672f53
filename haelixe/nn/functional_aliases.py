"""torch.nn.functional's other names for existing ops: the deprecated upsample forms of
interpolate, the ``_with_indices`` forms of the max pools (the pooled values and their
indices, always), conv_tbc (torch.conv_tbc's), and gumbel_softmax (a softmax of noisy logits)."""

from __future__ import annotations

import warnings

from .. import creation
from ..aten_forms import conv_tbc  # noqa: F401 (F.conv_tbc is torch.conv_tbc)
from ..autograd.mode import no_grad
from ..errors import OpError
from ..ops.fractional_pooling import fractional_max_pool2d, fractional_max_pool3d
from ..ops.pooling import (
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    max_pool1d,
    max_pool2d,
    max_pool3d,
)
from ..ops.resample import interpolate
from ..tensor import Tensor


def _deprecated(name):
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` "
                  f"instead.", stacklevel=3)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):  # noqa: A002
    """upsample(input, size=None, scale_factor=None, mode='nearest', align_corners=None)
    -> Tensor

    F.interpolate's deprecated name (it warns, as PyTorch's does)."""
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):  # noqa: A002
    """upsample_nearest(input, size=None, scale_factor=None) -> Tensor

    F.interpolate(..., mode='nearest'), under its deprecated name."""
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):  # noqa: A002
    """upsample_bilinear(input, size=None, scale_factor=None) -> Tensor

    F.interpolate(..., mode='bilinear', align_corners=True), under its deprecated name:
    (N, C, H, W) inputs."""
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def _with_indices(pool):
    """``pool`` with return_indices=True whatever is passed for it, as PyTorch's
    ``_with_indices`` functions (which take the flag and ignore it)."""
    def with_indices(input, kernel_size, stride=None, padding=0, dilation=1,  # noqa: A002
                     ceil_mode=False, return_indices=False):
        return pool(input, kernel_size, stride, padding, dilation, ceil_mode, True)

    name = f"{pool.__name__}_with_indices"
    with_indices.__name__ = with_indices.__qualname__ = name
    with_indices.__doc__ = (f"{name}(input, kernel_size, stride=None, padding=0, dilation=1, "
                            f"ceil_mode=False, return_indices=False) -> (Tensor, Tensor)\n\n"
                            f"F.{pool.__name__} with return_indices=True: the pooled values "
                            f"and the flat index of each one in its input plane.")
    return with_indices


def _adaptive_with_indices(pool):
    def with_indices(input, output_size, return_indices=False):  # noqa: A002
        return pool(input, output_size, True)

    name = f"{pool.__name__}_with_indices"
    with_indices.__name__ = with_indices.__qualname__ = name
    with_indices.__doc__ = (f"{name}(input, output_size, return_indices=False) -> "
                            f"(Tensor, Tensor)\n\nF.{pool.__name__} with "
                            f"return_indices=True: the pooled values and their indices.")
    return with_indices


def _fractional_with_indices(pool):
    def with_indices(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                     return_indices=False, _random_samples=None):
        return pool(input, kernel_size, output_size, output_ratio, True, _random_samples)

    name = f"{pool.__name__}_with_indices"
    with_indices.__name__ = with_indices.__qualname__ = name
    with_indices.__doc__ = (f"{name}(input, kernel_size, output_size=None, output_ratio=None, "
                            f"return_indices=False, _random_samples=None) -> (Tensor, "
                            f"Tensor)\n\nF.{pool.__name__} with return_indices=True: the "
                            f"pooled values and their indices.")
    return with_indices


max_pool1d_with_indices = _with_indices(max_pool1d)
max_pool2d_with_indices = _with_indices(max_pool2d)
max_pool3d_with_indices = _with_indices(max_pool3d)
adaptive_max_pool1d_with_indices = _adaptive_with_indices(adaptive_max_pool1d)
adaptive_max_pool2d_with_indices = _adaptive_with_indices(adaptive_max_pool2d)
adaptive_max_pool3d_with_indices = _adaptive_with_indices(adaptive_max_pool3d)
fractional_max_pool2d_with_indices = _fractional_with_indices(fractional_max_pool2d)
fractional_max_pool3d_with_indices = _fractional_with_indices(fractional_max_pool3d)


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1) -> Tensor

    A sample of the Gumbel-softmax (concrete) distribution: softmax((logits + g) / tau)
    over ``dim``, g standard Gumbel noise (-log of an exponential draw). With ``hard``
    the result is the one-hot of each sample's largest entry, whose gradient is the soft
    sample's (the straight-through estimator). ``eps`` is deprecated and unused, as in
    PyTorch (passing another value warns)."""
    op = "gumbel_softmax"
    if not isinstance(logits, Tensor):
        raise TypeError(f"{op}: logits must be a tensor, got {type(logits).__name__}")
    if not logits.dtype.is_floating_point:
        raise TypeError(f"{op}: logits must be floating point, got {logits.dtype.name}; "
                        f"convert with .float() first")
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    if logits.ndim == 0:
        raise OpError(f"{op}: a 0-d input has no dim to take the softmax over; give it at "
                      f"least one dim")
    with no_grad():
        noise = -creation.empty_like(logits).exponential_().log()
    soft = ((logits + noise) / tau).softmax(dim)
    if not hard:
        return soft
    with no_grad():
        picked = soft.argmax(dim, keepdim=True)
        one_hot = creation.zeros_like(logits).scatter_(dim, picked, 1.0)
    # (the one-hot values, the soft sample's gradient)
    return one_hot - soft.detach() + soft


__all__ = ["upsample", "upsample_nearest", "upsample_bilinear", "max_pool1d_with_indices",
           "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "fractional_max_pool2d_with_indices", "conv_tbc",
           "fractional_max_pool3d_with_indices", "gumbel_softmax"]
