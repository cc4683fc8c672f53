"""``torch.nn.utils.parametrizations``: ready-made parametrizations (see parametrize)."""

from __future__ import annotations

from .weight_norm import weight_norm_parametrized as weight_norm

__all__ = ["weight_norm"]

_HINTS = {
    "orthogonal": "parametrize.register_parametrization with a module whose forward "
                  "returns hx.linalg.qr(X).Q",
    "spectral_norm": "weight_norm, or divide the weight by hx.linalg.matrix_norm(W, 2) in "
                     "a parametrization",
}


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), _HINTS)
