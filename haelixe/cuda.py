"""``torch.cuda`` answered for Haelixe's GPU.

The rule: ``is_available()`` is True only where a hardware wgpu adapter exists (a
discrete or integrated GPU; not a software adapter such as llvmpipe, lavapipe or
SwiftShader, which runs on the CPU and would be slower than the CPU backend). Where it
is True, ``"cuda"``, ``"cuda:0"`` and ``torch.device("cuda")`` name Haelixe's GPU, so a
program that picks ``"cuda" if torch.cuda.is_available() else "cpu"`` trains on the GPU
when there is one and on the CPU otherwise. A program that names "cuda" without asking
gets the GPU device on whatever adapter exists.

Haelixe has one random generator for both devices (GPU draws are made on the host), so
``manual_seed`` / ``manual_seed_all`` seed it as ``hx.manual_seed`` does; where no GPU is
available they do nothing, as PyTorch documents ("silently ignored").
"""

from __future__ import annotations

from . import random as _random
from .backends import gpu_adapter_info
from .backends import synchronize as _synchronize
from .device import GPU, as_device
from .ops.convert import LEGACY_GPU_TYPES as _LEGACY_GPU_TYPES
from .ops.convert import LEGACY_NAMES as _LEGACY_NAMES

# torch.cuda.FloatTensor and its kin: tensors of that dtype on the GPU
globals().update({_LEGACY_NAMES[d]: t for d, t in _LEGACY_GPU_TYPES.items()})


def is_available() -> bool:
    """Whether a hardware GPU adapter exists (see the module docstring for the rule)."""
    info = gpu_adapter_info()
    return info is not None and not info["software"]


def device_count() -> int:
    """1 where :func:`is_available` (Haelixe drives one GPU), else 0."""
    return int(is_available())


def _require(what: str) -> dict:
    if not is_available():
        info = gpu_adapter_info()
        why = ("no wgpu adapter exists" if info is None else
               f"the only adapter is the software one {info['name']!r}")
        raise RuntimeError(f"torch.cuda.{what}: no GPU is available ({why}); "
                           f"torch.cuda.is_available() says so first")
    return gpu_adapter_info()


def current_device() -> int:
    _require("current_device")
    return 0


def set_device(device) -> None:
    """Only device 0 (the one GPU) can be chosen."""
    index = device if isinstance(device, int) else getattr(as_device(device), "index", 0)
    if index not in (0, None):
        raise ValueError(f"torch.cuda.set_device({device!r}): Haelixe drives one GPU, "
                         f"device 0")
    _require("set_device")


def get_device_name(device=None) -> str:
    return _require("get_device_name")["name"]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Haelixe's GPU kernels read and write bfloat16 on every adapter."""
    return is_available()


def manual_seed(seed: int) -> None:
    """Seed the generator GPU draws come from (see the module docstring)."""
    if is_available():
        _random.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def synchronize(device=None) -> None:
    """Wait for the GPU's queued kernels to finish."""
    _require("synchronize")
    _synchronize(GPU)


def empty_cache() -> None:
    from .memory import empty_cache as empty

    if is_available():
        empty("gpu")


def _memory(key: str, device=None) -> int:
    from .memory import memory_stats

    return memory_stats("gpu")[key] if is_available() else 0


def memory_allocated(device=None) -> int:
    return _memory("allocated_bytes")


def max_memory_allocated(device=None) -> int:
    return _memory("peak_allocated_bytes")


def memory_reserved(device=None) -> int:
    return _memory("reserved_bytes")


def __getattr__(name):
    from .closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), {
        "Stream": "nothing: Haelixe's GPU runs one queue in order",
        "Event": "time.perf_counter() around torch.cuda.synchronize()",
        "graphs": "hx.capture, which records a step and replays it",
        "CUDAGraph": "hx.capture, which records a step and replays it"})
