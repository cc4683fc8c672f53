"""The pooling layers by the module that models pickled with them name: each is made from
its op's declaration (ops/pooling.py, nn/fused_layers.py) and named here too, so that
such a model loads."""

from __future__ import annotations

from .fused_layers import (  # noqa: F401
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
)
