"""Mixed precision: autocast at the compute boundary, rounding, memory accounting, and
(``GradScaler``, from amp_scaler.py) dynamic loss scaling for float16.

Weights live in bfloat16 (or float16) to halve memory and bandwidth. Inside ``hx.autocast`` each op
follows one policy row. A cast it makes is a Cast node in the autograd graph, so the
graph widget shows where precision changes; where the cast is done inside the consuming
kernel instead (a Linear whose weight is 16-bit already reads a float32 input rounded
to the weight's dtype, and its gradient comes back rounded the same way) the node's name
shows it, as in ``Linear(float32->bfloat16)``:

==========================================  ===============  ========  =========
op                                          reads            computes  returns
==========================================  ===============  ========  =========
matmul, Linear (+GELU), attention           low (cast in)    F32       low
RMSNorm, LayerNorm                          F32 (input cast  F32       F32
                                            in; weight and
                                            bias as they are)
softmax, log_softmax                        F32 (cast in)    F32       F32
sum, mean, var, losses (mse, l1, x-entropy) F32 (cast in)    F32       F32
elementwise (+, *, gelu, rope...)           as given         as given  promoted
==========================================  ===============  ========  =========

"low" is the autocast dtype, bfloat16 or float16. The BF16-reading kernels upcast to F32
inside the kernel (numpy BLAS and WGSL have no BF16 arithmetic), accumulate in F32 and
round the result once, to nearest even. Float16 kernels on a GPU with the shader-f16
feature multiply in f16 and accumulate in F32. Under float16 autocast, scale the loss
with ``GradScaler`` so small gradients do not underflow.
Gradients flow back through each Cast in the dtype of the tensor it came from, so a BF16
parameter receives a BF16 gradient; ``AdamW(master_weights=True)`` keeps the F32 copy.
"""

from __future__ import annotations

import warnings

import numpy as np

from .autograd.mode import STATE
from .device import Device
from .dtype import DType, as_dtype, bfloat16, float32
from .tensor import Tensor

#: the table above, as data: op family -> dtype its inputs are cast to
POLICY = {
    "matmul": "low", "linear": "low", "attention": "low",
    "norm": "f32", "softmax": "f32", "reduction": "f32", "loss": "f32",
}


class autocast:
    """``with hx.autocast(dtype=hx.bfloat16):`` runs the ops inside by the policy table.
    ``enabled=False`` switches it off for a region."""

    def __init__(self, dtype=bfloat16, enabled: bool = True):
        self.dtype = as_dtype(dtype)
        if self.dtype.name not in ("bfloat16", "float16"):
            raise ValueError(f"autocast: dtype must be bfloat16 or float16, got "
                             f"{self.dtype.name}")
        self.enabled = enabled

    def __enter__(self):
        self._prev = STATE.autocast, STATE.autocast_dtype
        STATE.autocast = self.dtype if self.enabled else None
        STATE.autocast_dtype = self.dtype  # (get_autocast_dtype inside, as PyTorch's)
        return self

    def __exit__(self, *exc):
        STATE.autocast, STATE.autocast_dtype = self._prev
        return False


def autocast_dtype():
    """The low dtype of the active autocast region, or None outside one (PyTorch's
    torch.get_autocast_dtype where torch.is_autocast_enabled())."""
    return STATE.autocast


def is_autocast_enabled(device_type=None) -> bool:
    """is_autocast_enabled(device_type=None) -> bool

    True inside an enabled autocast region (Haelixe's autocast covers every device,
    so device_type, "cpu" or "cuda", does not change the answer)."""
    return STATE.autocast is not None


def set_autocast_enabled(device_type, enabled=None) -> None:
    """set_autocast_enabled(device_type, enabled)

    Switches autocast on (in get_autocast_dtype's dtype, bfloat16 unless
    set_autocast_dtype changed it) or off for good, in this thread;
    ``set_autocast_enabled(enabled)``, PyTorch's older form, works too."""
    if enabled is None:
        device_type, enabled = None, device_type
    if not isinstance(enabled, bool):
        raise TypeError(f"set_autocast_enabled: enabled must be a bool, got "
                        f"{type(enabled).__name__}")
    STATE.autocast = (STATE.autocast or STATE.autocast_dtype) if enabled else None


# -- the autocast dtype: one for every device (Haelixe's autocast covers them all) --------
def _device_type(op, device_type):
    if not isinstance(device_type, str):
        raise TypeError(f"{op}: device_type must be a str ('cpu' or 'cuda'), got "
                        f"{type(device_type).__name__}")
    try:
        Device(device_type)
    except ValueError:
        raise RuntimeError(f"{op}: unknown device type {device_type!r}; expected 'cpu', "
                           f"'cuda' or 'gpu'") from None


def get_autocast_dtype(device_type):
    """get_autocast_dtype(device_type) -> dtype

    The dtype autocast computes in: the region's inside hx.autocast, else what
    set_autocast_dtype last set (bfloat16 at the start). Haelixe's autocast covers every
    device with one dtype, so it is the same for "cpu" and "cuda" (PyTorch starts CUDA's
    at float16)."""
    _device_type("get_autocast_dtype", device_type)
    return STATE.autocast_dtype


def set_autocast_dtype(device_type, dtype) -> None:
    """set_autocast_dtype(device_type, dtype)

    The dtype autocast computes in (bfloat16 or float16), for every device: inside an
    autocast region until it ends, outside it for set_autocast_enabled(True) (per
    thread, as PyTorch's)."""
    _device_type("set_autocast_dtype", device_type)
    want = _low_dtype("set_autocast_dtype", dtype)
    STATE.autocast_dtype = want
    if STATE.autocast is not None:
        STATE.autocast = want


def _low_dtype(op, dtype):
    if not isinstance(dtype, DType) or dtype.name not in ("bfloat16", "float16"):
        raise ValueError(f"{op}: Haelixe's autocast computes in bfloat16 or float16, got "
                         f"{dtype!r}")
    return dtype


def _deprecated(old, new):
    warnings.warn(f"torch.{old} is deprecated. Please use torch.{new} instead.",
                  DeprecationWarning, stacklevel=3)


def get_autocast_cpu_dtype():
    """get_autocast_cpu_dtype() -> dtype

    Deprecated, as in PyTorch: get_autocast_dtype("cpu")."""
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return STATE.autocast_dtype


def get_autocast_gpu_dtype():
    """get_autocast_gpu_dtype() -> dtype

    Deprecated, as in PyTorch: get_autocast_dtype("cuda") (the same dtype as the CPU's
    here)."""
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return STATE.autocast_dtype


def set_autocast_cpu_dtype(dtype) -> None:
    """set_autocast_cpu_dtype(dtype)

    Deprecated, as in PyTorch: set_autocast_dtype("cpu", dtype)."""
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def set_autocast_gpu_dtype(dtype) -> None:
    """set_autocast_gpu_dtype(dtype)

    Deprecated, as in PyTorch: set_autocast_dtype("cuda", dtype)."""
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)


def is_autocast_cpu_enabled() -> bool:
    """is_autocast_cpu_enabled() -> bool

    Deprecated, as in PyTorch: is_autocast_enabled("cpu")."""
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return STATE.autocast is not None


def set_autocast_cpu_enabled(enabled) -> None:
    """set_autocast_cpu_enabled(enabled)

    Deprecated, as in PyTorch: set_autocast_enabled("cpu", enabled)."""
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", enabled)


def cast_inputs(family: str, *tensors):
    """Cast floating inputs by the policy row of ``family`` (no-op outside autocast)."""
    low = STATE.autocast
    if low is None:
        return tensors
    target = low if POLICY[family] == "low" else float32
    return tuple(t if t is None or not t.dtype.is_floating_point else t.to(target)
                 for t in tensors)


def round_to(x, dtype, stochastic: bool = False):
    """F32 -> ``dtype``. Round to nearest even (exactly ml_dtypes' cast), or
    stochastically: add uniform random bits below the kept mantissa, then truncate, so
    the expected value of the result equals the input."""
    dtype = as_dtype(dtype)
    if not stochastic or dtype.name != "bfloat16":
        return x.to(dtype)
    from .random import generator

    host = x._be.to_numpy(x._data).astype(np.float32)
    bits = host.view(np.uint32).copy()
    noise = generator().integers(0, 1 << 16, size=bits.shape, dtype=np.uint32)
    finite = np.isfinite(host)
    bits[finite] += noise[finite]
    bits &= np.uint32(0xFFFF0000)
    out = bits.view(np.float32).astype(bfloat16.np)  # exact: the low bits are zero
    return Tensor._wrap(x._be.from_numpy(out))


def memory_report(model=None, optimizer=None) -> dict:
    """Bytes held by parameters, gradients and optimizer state, per dtype:
    {"parameters": {"bfloat16": n, ...}, "gradients": {...}, "optimizer_state": {...},
    "total": n}."""
    report = {"parameters": {}, "gradients": {}, "optimizer_state": {}}

    def add(kind, t):
        d = report[kind]
        d[t.dtype.name] = d.get(t.dtype.name, 0) + t.numel() * t.dtype.itemsize

    if model is not None:
        for p in model.parameters():
            add("parameters", p)
            if p.grad is not None:
                add("gradients", p.grad)
    if optimizer is not None:
        for t in optimizer._state_tensors().values():
            add("optimizer_state", t)
    report["total"] = sum(sum(d.values()) for d in report.values() if isinstance(d, dict))
    return report


from .amp_scaler import GradScaler  # noqa: E402, F401  (hx.amp.GradScaler, as torch.amp)
