"""The one process-wide GPU context: adapter, device and queue, started on first use."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

__all__ = ["GpuUnavailableError", "GpuContext", "get_context", "gpu_available"]

# Limits the kernels rely on. Each is raised to what the adapter offers (never above),
# so large tensors can be bound whole and the row kernels can use 256-wide workgroups.
_WANTED_LIMITS = (
    "max-buffer-size",
    "max-storage-buffer-binding-size",
    "max-storage-buffers-per-shader-stage",
    "max-compute-workgroup-storage-size",
    "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-size-x",
    "max-compute-workgroup-size-y",
    "max-compute-workgroups-per-dimension",
)
# Minimums without which some kernel cannot run at all.
_REQUIRED_LIMITS = {
    "max-storage-buffers-per-shader-stage": 9,  # attention backward binds 9
    "max-compute-invocations-per-workgroup": 256,
    "max-compute-workgroup-size-x": 256,
    "max-compute-workgroup-storage-size": 32768,  # attention with head_dim 128
}
# Optional features the kernels use where the adapter has them, each with a fallback:
#   shader-f16    float16 arithmetic (matmul, Linear and attention in packed f16)
#   shader-int64  int64 tensors stored as int64 (otherwise narrowed to int32 words)
#   subgroup      subgroup reductions in the row kernels
OPTIONAL_FEATURES = ("shader-f16", "shader-int64", "subgroup")
# asked for where the adapter has them: the device's clock around each dispatch, for
# hx.profile (see dispatch.DispatchTimer), read inside the open compute pass where the
# adapter allows it (a native feature; else each timed dispatch gets a pass of its own);
# kernels never need them
TIMING_FEATURES = ("timestamp-query", "timestamp-query-inside-passes")
# HAELIXE_GPU_DISABLE="shader-f16,subgroup" (or "all") leaves features unused, to run and
# test the fallbacks on an adapter that has them.
DISABLE_ENV = "HAELIXE_GPU_DISABLE"
_SOFTWARE_NAMES = ("llvmpipe", "lavapipe", "swiftshader", "softpipe", "basic render", "warp")
_TYPE_RANK = {"DiscreteGPU": 3, "IntegratedGPU": 2, "VirtualGPU": 1, "Unknown": 1, "CPU": 0}
_NATIVE_BACKENDS = ("Vulkan", "Metal", "D3D12", "DX12")

INSTALL_HINT = (
    "No GPU adapter was found by wgpu. On Debian/Ubuntu install a Vulkan driver "
    "(`apt-get install mesa-vulkan-drivers` gives the lavapipe software adapter; a real "
    "GPU needs its vendor's Vulkan driver), or run on the CPU with device=\"cpu\"."
)


class GpuUnavailableError(RuntimeError):
    """No usable wgpu adapter (or wgpu itself is missing)."""


class GpuContext:
    """Adapter, device and queue of the process, with a description in :attr:`info`."""

    def __init__(self, adapter, device):
        self.adapter = adapter
        self.device = device
        self.queue = device.queue
        self.limits = dict(device.limits)
        self.info = _describe(adapter, device)
        #: the optional features (OPTIONAL_FEATURES) that kernels may use; kernels read
        #: it when they are specialised, so a test may narrow it to reach a fallback.
        #: Storage formats are fixed at start: :attr:`int64_native` does not follow it.
        self.features = frozenset(f for f in OPTIONAL_FEATURES if f in self.info["features"])
        self.int64_native = "shader-int64" in self.features
        #: whether the device writes timestamps (hx.profile's device times)
        self.timestamps = "timestamp-query" in self.info["features"]
        #: whether it writes them between two dispatches of one compute pass
        self.timestamps_in_passes = (self.timestamps and "timestamp-query-inside-passes"
                                     in self.info["features"])

    def has(self, feature: str) -> bool:
        """Whether kernels may use the optional ``feature`` on this device."""
        return feature in self.features

    @property
    def software(self) -> bool:
        """True on a CPU-emulated adapter (llvmpipe, lavapipe, SwiftShader, WARP)."""
        return self.info["software"]

    def __repr__(self) -> str:
        i = self.info
        return f"GpuContext({i['device']!r}, backend={i['backend']}, type={i['adapter_type']})"


_context: GpuContext | None = None
_lock = threading.Lock()


def get_context() -> GpuContext:
    """The process-wide context, created on the first call.

    Picks the highest-ranked adapter (discrete GPU, then integrated, then software; a
    native API before OpenGL), requests a device with the limits the kernels need and
    raises :class:`GpuUnavailableError` when there is no adapter.
    """
    global _context
    if _context is None:
        with _lock:
            if _context is None:
                _context = _create_context()
    return _context


def gpu_available() -> bool:
    """Whether :func:`get_context` succeeds (starting the context if it can)."""
    try:
        get_context()
    except GpuUnavailableError:
        return False
    return True


def ensure_runtime_dir() -> str | None:
    """Point ``XDG_RUNTIME_DIR`` at a private directory when it is unset or missing.

    Mesa's Vulkan drivers print "XDG_RUNTIME_DIR is invalid or not set" to stderr at
    adapter creation (into notebooks and test logs) when it is absent, as in containers
    and CI. The directory is ``<tmp>/haelixe-runtime-<uid>``, mode 0700 and owned by this
    user; if another user holds that name, a fresh private one is made instead. Returns
    the directory set, or None when the variable was already valid (it is then kept).
    """
    current = os.environ.get("XDG_RUNTIME_DIR")
    if current and os.path.isdir(current):
        return None
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # not a POSIX system: no Mesa runtime dir to care about
        return None
    path = Path(tempfile.gettempdir()) / f"haelixe-runtime-{getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = path.lstat()
        if not path.is_dir() or path.is_symlink() or st.st_uid != getuid():
            raise PermissionError(path)
        if st.st_mode & 0o077:
            path.chmod(0o700)
    except OSError:
        path = Path(tempfile.mkdtemp(prefix="haelixe-runtime-"))  # 0700, ours
    os.environ["XDG_RUNTIME_DIR"] = str(path)
    return str(path)


def _create_context() -> GpuContext:
    ensure_runtime_dir()
    try:
        import wgpu
    except ImportError as err:  # wgpu is optional (the "gpu" extra)
        raise GpuUnavailableError(f"the GPU needs the wgpu package, which is not "
                                  f"installed ({err}): pip install 'haelixe[gpu]' (or "
                                  f"pip install wgpu), or use device=\"cpu\"") from err
    try:
        adapters = list(wgpu.gpu.enumerate_adapters_sync())
    except Exception as err:  # the native library can fail to start at all
        raise GpuUnavailableError(f"{INSTALL_HINT} (wgpu said: {err})") from err
    if not adapters:
        raise GpuUnavailableError(INSTALL_HINT)
    adapter = max(adapters, key=_adapter_rank)
    limits = dict(adapter.limits)
    missing = {k: (limits.get(k, 0), v) for k, v in _REQUIRED_LIMITS.items()
               if limits.get(k, 0) < v}
    if missing:
        raise GpuUnavailableError(
            f"the adapter {adapter.info.get('device')!r} is too limited for Haelixe's "
            f"kernels (limit: (has, needs) = {missing}); use device=\"cpu\"")
    required = {k: limits[k] for k in _WANTED_LIMITS if k in limits}
    device = adapter.request_device_sync(required_limits=required,
                                         required_features=_features_to_request(adapter))
    return GpuContext(adapter, device)


def disabled_features() -> set:
    """The optional features that ``HAELIXE_GPU_DISABLE`` switches off."""
    names = {n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip()}
    return set(OPTIONAL_FEATURES + TIMING_FEATURES) if "all" in names else names


def _features_to_request(adapter) -> list:
    have = {str(f) for f in adapter.features}
    off = disabled_features()
    return [f for f in OPTIONAL_FEATURES + TIMING_FEATURES if f in have and f not in off]


def _adapter_rank(adapter) -> tuple:
    info = adapter.info
    native = info.get("backend_type", "") in _NATIVE_BACKENDS
    return (_TYPE_RANK.get(info.get("adapter_type", "Unknown"), 1), native)


def _describe(adapter, device) -> dict:
    info = adapter.info
    name = info.get("device", "") or info.get("description", "")
    adapter_type = info.get("adapter_type", "Unknown")
    software = adapter_type == "CPU" or any(s in name.lower() for s in _SOFTWARE_NAMES)
    limits = dict(device.limits)
    return {
        "type": "gpu",
        "device": name,
        "name": name,
        "vendor": info.get("vendor", ""),
        "vendor_id": info.get("vendor_id", 0),
        "description": info.get("description", ""),
        "backend": info.get("backend_type", ""),
        "adapter_type": adapter_type,
        "software": software,
        "features": sorted(str(f) for f in device.features),
        "limits": {k: limits[k] for k in _WANTED_LIMITS if k in limits},
    }
