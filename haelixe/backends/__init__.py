"""Backends by device, and by the raw array type they produce.

Only this package knows the concrete backends: everything above asks ``backend_for``
for a device's backend and ``backend_of`` for the backend that made a raw array, and
calls the kernels of the contract in ``base.py``.
"""

from __future__ import annotations

from ..device import CPU, Device
from .cpu_graph import unwrap_methods, wrap_methods  # noqa: F401  (hx.profile's wrappers)

_BY_DEVICE: dict = {}
_BY_RAW_TYPE: dict = {}


def backend_for(device: Device):
    """The backend of ``device`` (the GPU's starts its wgpu context on first call)."""
    be = _BY_DEVICE.get(device)
    if be is None:
        be = _load(device)
    return be


def backend_of(raw):
    """The backend whose raw array type ``raw`` is (numpy arrays and scalars: the CPU)."""
    be = _BY_RAW_TYPE.get(raw.__class__)
    if be is None:
        from .cpu import CPU_BACKEND

        be = CPU_BACKEND  # numpy scalars and 0-d results of numpy reductions
    return be


def _load(device: Device):
    if device is CPU:
        from .cpu import CPU_BACKEND as be
    else:
        from .wgpu.backend import get_backend

        be = get_backend()
    register(device, be)
    return be


def loaded_backends() -> list:
    """(device, backend) of each backend started so far (the GPU's once something used
    it)."""
    return list(_BY_DEVICE.items())


def register(device: Device, backend) -> None:
    _BY_DEVICE[device] = backend
    object.__setattr__(device, "_be", backend)  # the tensor's fast path to its backend
    _BY_RAW_TYPE[backend.raw_type] = backend


def device_info(device: Device) -> dict:
    """Adapter information and features (GPU) or a short description (CPU)."""
    return backend_for(device).info


# device.py sits below this package: the backend-facing properties are installed here
Device._describe = device_info
Device.backend = property(backend_for, doc="The backend that runs this device's kernels.")


def gpu_adapter_info() -> dict | None:
    """The GPU's adapter information (``info["software"]`` says whether it is emulated
    on the CPU), or None where no wgpu adapter exists (or wgpu is not installed)."""
    try:
        from .wgpu.context import GpuUnavailableError
    except ImportError:
        return None
    try:
        return device_info(Device.gpu())
    except (GpuUnavailableError, ImportError):
        return None


def synchronize(device: Device) -> None:
    """Wait until the device has finished every kernel queued so far (the CPU runs each
    kernel at its call, so there it returns at once)."""
    sync = getattr(backend_for(device), "synchronize", None)
    if sync is not None:
        sync()
