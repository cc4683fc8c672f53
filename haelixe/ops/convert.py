"""Copies and conversions: clone, dtype casts, device moves."""

from __future__ import annotations

from ..autograd.function import Function
from ..device import backend_for


class Clone(Function):
    @staticmethod
    def forward(ctx, x):
        return x._be.copy(x._data)

    @staticmethod
    def backward(ctx, g):
        return g


class Cast(Function):
    """dtype conversion; the gradient flows back in the input's dtype."""

    label = "Cast"

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.src = x.dtype
        ctx.label = f"Cast({x.dtype.name}->{dtype.name})"
        return x._be.cast(x._data, dtype.np)

    @staticmethod
    def backward(ctx, g):
        return cast(g, ctx.src), None


def cast(x, dtype):
    if x.dtype is dtype:
        return x
    if x._requires_grad and not dtype.is_floating_point:
        # Integer results carry no gradient; cut the graph rather than fail later.
        from ..autograd.mode import no_grad

        with no_grad():
            return Cast.apply(x, dtype)
    return Cast.apply(x, dtype)


class ToDevice(Function):
    @staticmethod
    def forward(ctx, x, device):
        ctx.src = x.device
        ctx.label = f"To({device.type})"
        host = x._be.to_numpy(x._data)
        return backend_for(device).from_numpy(host)

    @staticmethod
    def backward(ctx, g):
        return to_device(g, ctx.src), None


def to_device(x, device):
    if x.device is device:
        return x
    return ToDevice.apply(x, device)
