"""PyTorch's top-level in-place functions (``torch.exp_(x)``, ``torch.clamp_(x, 0)``,
``torch.zero_(x)``...) and ``torch.fill``: each is the Tensor method itself, called on
its first argument, so it records on autograd (and refuses a leaf that requires grad)
exactly as ``x.exp_()`` does."""

from __future__ import annotations

import inspect

from ..errors import OpError
from ..tensor import Tensor

# (the modules declaring the methods it makes functions of)
from . import (  # noqa: F401
    aliases,
    blas,
    composite,
    elementwise,
    inplace,
    inplace_forms,
    scatter_views,
    views,
)
from .registry import FUNCTIONS, function

#: the in-place methods PyTorch also has as ``torch.<name>`` (those whose op Haelixe has)
NAMES = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_",
    "arctan_", "arctanh_", "as_strided_", "asin_", "asinh_", "atan_", "atanh_", "ceil_",
    "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "erf_",
    "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_", "i0_",
    "index_put_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_",
    "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_", "round_", "rsqrt_",
    "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_",
    "xlogy_", "zero_",
)


def _as_function(name):
    method = getattr(Tensor, name)
    sig = inspect.signature(method)
    first, *rest = sig.parameters.values()
    # (PyTorch's function names the tensor input; the method calls it self or x)
    sig = sig.replace(parameters=[first.replace(name="input"), *rest])

    def in_place(input, *args, **kwargs):  # noqa: A002
        return method(input, *args, **kwargs)

    in_place.__name__ = in_place.__qualname__ = name
    in_place.__signature__ = sig
    in_place.__doc__ = f"{name}{sig} -> Tensor\n\nIn-place {name[:-1]} of input: writes " \
                      f"the result into input's memory and returns input (Tensor.{name})."
    return in_place


for _name in NAMES:
    if _name not in FUNCTIONS:
        FUNCTIONS[_name] = _as_function(_name)


@function
def fill(input, value):  # noqa: A002
    """fill(input, value) -> Tensor

    A new tensor of input's shape, dtype and device holding value (a number or a 0-d
    tensor): input.clone().fill_(value), so autograd records it as fill_ does."""
    if isinstance(value, Tensor) and value.ndim:
        raise OpError(f"fill: only supports a 0-dimension value tensor, got one of shape "
                      f"{value.shape}; pass value.item() or a 0-d tensor")
    return input.clone().fill_(value)
