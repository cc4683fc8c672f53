"""``F.affine_grid`` and ``F.grid_sample``: sampling an image at arbitrary points (a
spatial transformer's warp), composed from gathers and elementwise ops, so the gradient
reaches both the image and the sampling grid.

Coordinates are normalised: -1 and 1 are the image's edges, the outer edges of its
corner pixels with ``align_corners=False`` and their centres with ``True`` (PyTorch's
convention; the default is False, with PyTorch's warning when it is not passed).
"""

from __future__ import annotations

import warnings

from .. import creation
from ..errors import OpError
from ..ops.arranging import take_along_dim
from ..ops.indexing import stack, where
from ..tensor import Tensor

__all__ = ["affine_grid", "grid_sample"]

_DEFAULT_CHANGED = ("Default grid_sample and affine_grid behavior has changed to "
                    "align_corners=False since 1.3.0. Please specify align_corners=True if "
                    "the old behavior is desired. See the documentation of grid_sample for "
                    "details.")


def _align_corners(align_corners) -> bool:
    if align_corners is None:
        warnings.warn(_DEFAULT_CHANGED, UserWarning, stacklevel=3)
        return False
    return bool(align_corners)


def _base_coords(n: int, align_corners: bool, like: Tensor) -> Tensor:
    """The normalised coordinates of ``n`` pixel centres along one axis."""
    if n <= 1:
        return creation.zeros(n, dtype=like.dtype, device=like.device)
    steps = creation.arange(n, dtype=like.dtype, device=like.device)
    if align_corners:
        return steps * (2.0 / (n - 1)) - 1.0
    return (steps * 2.0 + 1.0) / n - 1.0


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of a batch of affine maps: ``theta`` (N, 2, 3) for a size
    (N, C, H, W) gives (N, H, W, 2) points (x, y); (N, 3, 4) for (N, C, D, H, W) gives
    (N, D, H, W, 3) points (x, y, z)."""
    align = _align_corners(align_corners)
    size = tuple(int(s) for s in size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and "
                                  f"3D affine transforms, respectively. Got size {size}.")
    if not isinstance(theta, Tensor) or not theta.dtype.is_floating_point:
        raise TypeError(f"affine_grid: expected theta to be a floating point tensor, got "
                        f"{getattr(theta, 'dtype', type(theta).__name__)}")
    spatial = size[2:]
    k = len(spatial)
    if theta.ndim != 3 or theta.shape[0] != size[0] or theta.shape[1:] != (k, k + 1):
        raise ValueError(f"Expected a batch of {k}D affine matrices of shape "
                         f"Nx{k}x{k + 1} for size {size}. Got {theta.shape}.")
    if min(spatial) <= 0:
        raise ValueError(f"affine_grid: expected non-zero, positive output size, got {size}")
    # the points (x, y[, z], 1), x along the last dim (width), broadcast to the grid
    axes = [_base_coords(n, align, theta) for n in reversed(spatial)]
    coords = []
    for i, axis in enumerate(axes):
        shape = [1] * k
        shape[k - 1 - i] = spatial[k - 1 - i]
        coords.append(axis.reshape(shape).expand(spatial))
    coords.append(creation.ones(spatial, dtype=theta.dtype, device=theta.device))
    base = stack(coords, -1).reshape(1, -1, k + 1)
    grid = base @ theta.transpose(1, 2)
    return grid.reshape(size[0], *spatial, k)


def _reflect(coord: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """``coord`` folded back into [twice_low / 2, twice_high / 2] by reflections."""
    if twice_low == twice_high:
        return coord * 0.0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    coord = coord - low
    coord = where(coord < 0, -coord, coord)  # (slope +1 at 0, as PyTorch's fold)
    flips = (coord / span).floor()
    extra = coord - flips * span
    even = (flips - 2.0 * (flips / 2.0).floor()) == 0
    return where(even, extra + low, span - extra + low)


def _source_index(coord: Tensor, size: int, padding_mode: str, align: bool) -> Tensor:
    """Normalised coordinates as pixel indices (fractional), folded or clipped into the
    image by ``padding_mode``."""
    if align:
        coord = (coord + 1.0) / 2.0 * (size - 1)
    else:
        coord = ((coord + 1.0) * size - 1.0) / 2.0
    if padding_mode == "border":
        coord = _clip(coord, size)
    elif padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align else \
            _reflect(coord, -1, 2 * size - 1)
        coord = _clip(coord, size)
    return coord


def _clip(coord: Tensor, size: int) -> Tensor:
    """``coord`` clamped into [0, size - 1], its slope 0 on the edges too (PyTorch's)."""
    inside = (coord > 0) & (coord < size - 1)
    return where(inside, coord, coord.detach().clamp(0, size - 1))


def _gather(flat: Tensor, iy: Tensor, ix: Tensor, h: int, w: int) -> Tensor:
    """flat (N, C, H*W) at integer pixels (iy, ix), each (N, L): (N, C, L), 0 outside."""
    ix, iy = ix.detach(), iy.detach()  # (whole pixels: no gradient flows through them)
    inside = (ix >= 0) & (ix <= w - 1) & (iy >= 0) & (iy <= h - 1)
    index = (iy.clamp(0, h - 1) * w + ix.clamp(0, w - 1)).to("int64")
    n, c = flat.shape[0], flat.shape[1]
    values = take_along_dim(flat, index.unsqueeze(1).expand(n, c, index.shape[-1]), 2)
    return where(inside.unsqueeze(1), values, 0.0)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """``input`` (N, C, H, W) sampled at ``grid`` (N, Ho, Wo, 2), each point (x, y) in
    normalised coordinates: (N, C, Ho, Wo). ``mode`` 'bilinear' or 'nearest';
    ``padding_mode`` what a point outside reads: 'zeros', 'border' (the nearest edge
    pixel) or 'reflection' (the image mirrored at its edges)."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be "
                         f"'zeros', 'border', or 'reflection', but got: '{padding_mode}'")
    align = _align_corners(align_corners)
    if not isinstance(input, Tensor) or not isinstance(grid, Tensor):
        raise TypeError("grid_sample: expected input and grid to be tensors")
    if input.ndim == 5:
        raise NotImplementedError("grid_sample: volumetric (5-D) input is not supported; "
                                  "sample each depth slice as a 4-D image")
    if input.ndim != 4 or grid.ndim != 4:
        raise OpError(f"grid_sampler(): expected 4D input and grid with same number of "
                      f"dimensions, but got input with sizes {list(input.shape)} and grid "
                      f"with sizes {list(grid.shape)}")
    if grid.shape[-1] != 2:
        raise OpError(f"grid_sampler(): expected grid to have size 2 in last dimension, "
                      f"but got grid with sizes {list(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise OpError(f"grid_sampler(): expected grid and input to have same batch size, "
                      f"but got input with sizes {list(input.shape)} and grid with sizes "
                      f"{list(grid.shape)}")
    if not input.dtype.is_floating_point or grid.dtype is not input.dtype:
        raise TypeError(f"grid_sampler(): expected input and grid to be floating point "
                        f"tensors of one dtype, got {input.dtype} and {grid.dtype}")
    if input.device != grid.device:
        raise OpError(f"grid_sampler(): expected input and grid on one device, got "
                      f"{input.device} and {grid.device}; move one with .to()")
    if mode == "bicubic":
        raise NotImplementedError("grid_sample: mode='bicubic' is not supported; use "
                                  "'bilinear'")
    n, c, h, w = input.shape
    ho, wo = grid.shape[1], grid.shape[2]
    if 0 in (h, w):
        raise OpError(f"grid_sampler(): expected input to have non-empty spatial "
                      f"dimensions, but input has sizes {list(input.shape)}")
    points = grid.reshape(n, ho * wo, 2)
    ix = _source_index(points[..., 0], w, padding_mode, align)
    iy = _source_index(points[..., 1], h, padding_mode, align)
    flat = input.reshape(n, c, h * w)
    if mode == "nearest":
        out = _gather(flat, iy.round(), ix.round(), h, w)
        if grid.requires_grad:  # (the grid's gradient is zero, as PyTorch's, not None)
            keep = creation.ones((), dtype="bool", device=out.device)
            out = where(keep, out, ix.unsqueeze(1))
    else:
        x0, y0 = ix.floor(), iy.floor()
        tx, ty = (ix - x0).unsqueeze(1), (iy - y0).unsqueeze(1)
        x1, y1 = x0 + 1.0, y0 + 1.0
        out = (_gather(flat, y0, x0, h, w) * ((1 - tx) * (1 - ty))
               + _gather(flat, y0, x1, h, w) * (tx * (1 - ty))
               + _gather(flat, y1, x0, h, w) * ((1 - tx) * ty)
               + _gather(flat, y1, x1, h, w) * (tx * ty))
    return out.reshape(n, c, ho, wo)
