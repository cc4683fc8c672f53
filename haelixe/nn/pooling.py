"""The pooling layers' former home: every one is made from its op's declaration now
(ops/pooling.py, nn/fused_layers.py); they are named here too, so that a model pickled
when they lived here loads."""

from __future__ import annotations

from .fused_layers import (  # noqa: F401
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    MaxUnpool1d,
    MaxUnpool2d,
)
