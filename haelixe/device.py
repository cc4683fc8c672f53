"""Devices: the CPU (numpy) and the GPU (WGSL through wgpu)."""

from __future__ import annotations


class Device:
    """``Device.cpu()`` or ``Device.gpu()``; the strings "cpu" and "gpu" are accepted
    wherever a device is. Devices are interned, so ``is`` compares them."""

    __slots__ = ("type", "_be")
    _interned: dict[str, Device] = {}

    def __new__(cls, type: str = "cpu", index: int | None = None):
        name, _, number = str(type).partition(":")
        key = {"cpu": "cpu", "gpu": "gpu", "wgpu": "gpu", "cuda": "gpu"}.get(name)
        if key is None:
            raise ValueError(f"unknown device {type!r}: use 'cpu' or 'gpu'")
        if number or index is not None:  # "cuda:0", device("cuda", 0): there is one of each
            if (number and number != "0") or index not in (None, 0):
                raise ValueError(f"device {type!r}{'' if index is None else f', {index}'}: "
                                 f"Haelixe has one {key.upper()} device, index 0")
        dev = cls._interned.get(key)
        if dev is None:
            dev = object.__new__(cls)
            object.__setattr__(dev, "type", key)
            object.__setattr__(dev, "_be", None)  # its backend, once loaded
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
    def index(self) -> int | None:
        """None, as for PyTorch's ``torch.device("cuda")`` (there is one device of each)."""
        return None

    # set by haelixe.backends, which sits above this module
    _describe = None

    @property
    def info(self) -> dict:
        """Adapter information and features (GPU) or a short description (CPU)."""
        return Device._describe(self)

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


def as_device(x) -> Device:
    """The one parser of device names: a Device, "cpu", "gpu" (also "wgpu", "cuda")
    or None (the CPU)."""
    if x is None:
        return CPU
    if isinstance(x, Device):
        return x
    return Device(x)


#: the device factories use when given none (torch.set_default_device); ops, *_like
#: factories and from_numpy do not read it, as PyTorch's do not
_DEFAULT = [CPU]


def set_default_device(device) -> None:
    """set_default_device(device)

    The device tensor factories (tensor, zeros, ones, empty, full, arange, linspace,
    rand, randn, eye...) use when they are given none; None means the CPU again."""
    _DEFAULT[0] = CPU if device is None else as_device(device)


def get_default_device() -> Device:
    """get_default_device() -> device

    The device factories use when given none (set_default_device)."""
    return _DEFAULT[0]


def factory_device(x) -> Device:
    """A factory's device argument: the default device where it is None."""
    return _DEFAULT[0] if x is None else as_device(x)
