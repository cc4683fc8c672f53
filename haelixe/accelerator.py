"""``torch.accelerator``: the device-neutral questions, answered for Haelixe's GPU by the
rule of :mod:`haelixe.cuda` (a hardware adapter counts; a software one does not)."""

from __future__ import annotations

from . import cuda
from .device import GPU


def is_available() -> bool:
    return cuda.is_available()


def device_count() -> int:
    return cuda.device_count()


def current_accelerator(check_available: bool = False):
    """The GPU device where one is available, else None (as PyTorch with no accelerator)."""
    return GPU if cuda.is_available() else None


def current_device_index() -> int:
    return cuda.current_device()


current_device_idx = current_device_index


def set_device_index(device) -> None:
    cuda.set_device(device)


set_device_idx = set_device_index


def synchronize(device=None) -> None:
    cuda.synchronize(device)


def __getattr__(name):
    from .closest import missing_attribute

    raise missing_attribute(__name__, name, globals())
