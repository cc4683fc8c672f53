"""Resampling (F.interpolate): nearest as an index along each spatial dim, (bi)linear as a
product with a (out, in) interpolation matrix per dim (linear interpolation is separable:
two weights per output row), 'area' as the adaptive average pool. Each is a composition
of differentiable ops, so the gradients come from index_select and matmul."""

from __future__ import annotations

import math

import numpy as np

from .. import creation
from ..amp import autocast
from ..errors import OpError
from ..tensor import Tensor
from .linalg import matmul
from .pooling import adaptive_avg_pool
from .registry import Layer, fused

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area")


def _sizes(x, d, size, scale_factor, recompute_scale_factor):
    """(output sizes, the scale each output index maps back by: in/out, or 1/factor
    where the factor is given and not recomputed, as PyTorch)."""
    spatial = x.shape[2:]
    if (size is None) == (scale_factor is None):
        raise OpError("interpolate: give exactly one of size and scale_factor")
    if size is not None:
        out = tuple(size) if isinstance(size, (tuple, list)) else (size,) * d
        if len(out) != d:
            raise OpError(f"interpolate: size {size!r} must have {d} entries for an "
                             f"input of shape {x.shape}")
        return tuple(int(o) for o in out), tuple(n / o for n, o in zip(spatial, out))
    factors = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else \
        (scale_factor,) * d
    if len(factors) != d:
        raise OpError(f"interpolate: scale_factor {scale_factor!r} must have {d} entries "
                         f"for an input of shape {x.shape}")
    out = tuple(int(math.floor(n * float(f))) for n, f in zip(spatial, factors))
    if recompute_scale_factor:
        return out, tuple(n / o for n, o in zip(spatial, out))
    return out, tuple(1.0 / float(f) for f in factors)


def _nearest_index(n, o, scale, exact):
    dst = np.arange(o, dtype=np.float32)
    shift = np.float32(0.5) if exact else np.float32(0.0)
    src = np.floor((dst + shift) * np.float32(scale)).astype(np.int64)
    return np.minimum(src, n - 1)


def _linear_matrix(n, o, scale, align_corners):
    """(o, n): each output row's two weights on the input cells around it."""
    dst = np.arange(o, dtype=np.float64)
    if align_corners:
        src = dst * ((n - 1) / (o - 1) if o > 1 else 0.0)
    else:
        src = np.maximum((dst + 0.5) * scale - 0.5, 0.0)
    lo = np.minimum(np.floor(src).astype(np.int64), n - 1)
    hi = np.minimum(lo + 1, n - 1)
    frac = src - lo
    m = np.zeros((o, n))
    np.add.at(m, (np.arange(o), lo), 1.0 - frac)
    np.add.at(m, (np.arange(o), hi), frac)
    return m


def _upsample_layer(size=None, scale_factor=None, mode="nearest", align_corners=None,
                    recompute_scale_factor=None):
    """nn.Upsample's state: F.interpolate's arguments, a scale factor as floats (as
    PyTorch's)."""
    if isinstance(scale_factor, (int, float)):
        scale_factor = float(scale_factor)
    elif scale_factor:
        scale_factor = tuple(float(f) for f in scale_factor)
    else:
        scale_factor = None
    return {"size": size, "scale_factor": scale_factor, "mode": mode,
            "align_corners": align_corners, "recompute_scale_factor": recompute_scale_factor}


def _upsample_shown(layer) -> str:
    what = f"scale_factor={layer.scale_factor!r}" if layer.scale_factor is not None \
        else f"size={layer.size!r}"
    return f"{what}, mode={layer.mode!r}"


# (nn.Upsample's forward is F.interpolate, as PyTorch's, which passes no antialias)
@fused(None, arity=1, dtypes="any",
       layer=Layer("Upsample", _upsample_layer, fixed={"antialias": False},
                   shown=_upsample_shown))
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,  # noqa: A002
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial dims of (N, C, *spatial), PyTorch's F.interpolate: modes
    'nearest', 'nearest-exact' (any dtype: a uint8 image too), 'linear'/'bilinear'/
    'trilinear' (with align_corners), 'area'."""
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate: input must be a Tensor, got {type(input).__name__}")
    if mode not in _MODES:
        raise OpError(f"interpolate: mode {mode!r} is not supported; use one of {_MODES}")
    if antialias:
        raise OpError("interpolate: antialias=True is not supported")
    if not input.dtype.is_floating_point and mode not in ("nearest", "nearest-exact"):
        # (nearest picks cells, exact in any dtype; PyTorch's uint8 bilinear rounds in
        # fixed point after each pass, which a float product would not reproduce)
        raise TypeError(f"interpolate: mode {mode!r} is not defined for "
                        f"{input.dtype.name} tensors here; convert with .float() first")
    d = input.ndim - 2
    if d < 1:
        raise OpError(f"interpolate: expected an input of shape (N, C, *spatial), got "
                         f"{input.shape}")
    if mode in _LINEAR:
        if _LINEAR[mode] != d:
            raise OpError(f"interpolate: mode {mode!r} needs a {_LINEAR[mode] + 2}-D "
                             f"input, got shape {input.shape}")
    elif align_corners is not None:
        raise OpError("interpolate: align_corners can only be set with the "
                         "interpolating modes (linear, bilinear, trilinear)")
    out, scales = _sizes(input, d, size, scale_factor, recompute_scale_factor)
    if any(o < 1 for o in out):
        raise OpError(f"interpolate: the output size {out} must be positive")
    if mode == "area":
        return adaptive_avg_pool("interpolate", d, input, out) if d <= 2 else \
            _unsupported(mode, d)
    y = input
    for i, (n, o, scale) in enumerate(zip(input.shape[2:], out, scales)):
        dim = 2 + i
        if mode in _LINEAR:
            m = creation.tensor(_linear_matrix(n, o, scale, bool(align_corners)),
                                dtype=input.dtype, device=input.device)
            with autocast(enabled=False):  # (an interpolation keeps the input's dtype)
                y = matmul(y.transpose(dim, -1), m.mT).transpose(dim, -1)
        elif n != o or mode == "nearest-exact":
            index = _nearest_index(n, o, scale, mode == "nearest-exact")
            y = y.index_select(dim, creation.tensor(index, device=input.device))
    return y


def _unsupported(mode, d):
    raise OpError(f"interpolate: mode {mode!r} supports 1-D and 2-D images, not {d}-D")
