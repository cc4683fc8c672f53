"""``torch.nn.utils.parametrizations``: ready-made parametrizations (see parametrize)."""

from __future__ import annotations

from .orthogonal import orthogonal
from .spectral_norm import spectral_norm_parametrized as spectral_norm
from .weight_norm import weight_norm_parametrized as weight_norm

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals())
