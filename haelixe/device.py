"""Devices: the CPU (numpy) and the GPU (WGSL through wgpu)."""

from __future__ import annotations


class Device:
    """``Device.cpu()`` or ``Device.gpu()``; the strings "cpu" and "gpu" are accepted
    wherever a device is. Devices are interned, so ``is`` compares them."""

    __slots__ = ("type",)
    _interned: dict[str, Device] = {}

    def __new__(cls, type: str = "cpu"):
        key = {"cpu": "cpu", "gpu": "gpu", "wgpu": "gpu", "cuda": "gpu"}.get(str(type))
        if key is None:
            raise ValueError(f"unknown device {type!r}: use 'cpu' or 'gpu'")
        dev = cls._interned.get(key)
        if dev is None:
            dev = object.__new__(cls)
            object.__setattr__(dev, "type", key)
            cls._interned[key] = dev
        return dev

    @classmethod
    def cpu(cls) -> Device:
        return cls("cpu")

    @classmethod
    def gpu(cls) -> Device:
        """The GPU. Its context (adapter, device, queue) starts on first use, so this
        raises only when an op first needs an adapter and none exists."""
        return cls("gpu")

    @property
    def info(self) -> dict:
        """Adapter information and features (GPU) or a short description (CPU)."""
        if self.type == "cpu":
            import platform

            import numpy as np

            return {"type": "cpu", "processor": platform.processor() or platform.machine(),
                    "numpy": np.__version__}
        from .backends.wgpu.context import get_context

        return get_context().info

    @property
    def backend(self):
        return backend_for(self)

    def __repr__(self) -> str:
        return f"device(type='{self.type}')"

    def __str__(self) -> str:
        return self.type

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = Device(other)
            except ValueError:
                return False
        return self is other

    def __hash__(self) -> int:
        return hash(self.type)

    def __reduce__(self):
        return (Device, (self.type,))


CPU = Device.cpu()
GPU = Device.gpu()

_backends: dict[str, object] = {}


def backend_for(device: Device):
    be = _backends.get(device.type)
    if be is None:
        if device.type == "cpu":
            from .backends.cpu import CPU_BACKEND as be
        else:
            from .backends.wgpu.backend import get_backend

            be = get_backend()
        _backends[device.type] = be
    return be


def as_device(x) -> Device:
    if x is None:
        return CPU
    if isinstance(x, Device):
        return x
    return Device(x)
