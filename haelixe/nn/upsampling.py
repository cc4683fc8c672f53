"""nn.UpsamplingNearest2d and nn.UpsamplingBilinear2d: PyTorch's fixed-mode forms of
nn.Upsample (made from F.interpolate's declaration), as its subclasses are there."""

from __future__ import annotations

from .fused_layers import Upsample


class UpsamplingNearest2d(Upsample):
    """nn.UpsamplingNearest2d(size=None, scale_factor=None): nn.Upsample with
    mode='nearest', over (N, C, H, W)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """nn.UpsamplingBilinear2d(size=None, scale_factor=None): nn.Upsample with
    mode='bilinear' and align_corners=True (PyTorch's choice for this layer), over
    (N, C, H, W)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


__all__ = ["UpsamplingNearest2d", "UpsamplingBilinear2d"]
