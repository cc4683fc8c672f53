"""Haelixe: a deep-learning engine written from the ground up in Python.

    import haelixe as hx
    x = hx.randn(4, 3, requires_grad=True)
    (x.T @ x).sum().backward()
"""

# The op modules attach the Tensor methods and list the function forms as they load.
from . import aten_forms as _aten_forms
from . import aten_native as _aten_native
from . import (
    autograd,  # noqa: E402  (Tensor.backward, hooks)
    linalg,  # noqa: E402  (hx.linalg: torch.linalg)
    sparse,  # noqa: E402  (hx.sparse: torch.sparse; Tensor.to_sparse)
)
from . import dtype as _dtype_module
from .amp import (
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cpu_dtype,
    set_autocast_cpu_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
    set_autocast_gpu_dtype,
)
from .autograd.mode import (
    enable_grad,
    inference_mode,
    is_anomaly_enabled,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_anomaly_enabled,
    set_grad_enabled,
)
from .backends.threads import get_num_threads, set_num_threads
from .capture_replay import CaptureError, capture
from .creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    logspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    tensor,
    tril_indices,
    triu_indices,
    zeros,
    zeros_like,
)
from .device import Device, get_default_device, set_default_device
from .dtype import (
    BF16,
    BOOL,
    F16,
    F32,
    F64,
    I32,
    I64,
    DType,
    bfloat16,
    can_cast,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    promote_types,
    set_default_dtype,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .dtype_info import finfo, iinfo
from .layout import Size  # noqa: E402,F401  (torch.Size)
from .ops import (  # noqa: E402,F401
    aliases,
    arranging,
    bilinear,
    binning,
    blas,
    calculus,
    composite,
    conv,
    convert,
    einstein,
    elementwise,
    factories,
    frexp,
    fused,
    gamma_sampling,
    indexing,
    inplace,
    inplace_compare,
    inplace_forms,
    inplace_functions,
    linalg_legacy,
    linalg_lu_legacy,
    linalg_toplevel,
    ordering,
    pooling,
    predicates,
    real_conjugates,
    reduce,
    sampling,
    scatter_reduce,
    scatter_views,
    shape_compose,
    shape_helpers,
    special_functions,
    statistics,
    tensor_legacy,
    tensor_memory,
    view_copies,
    views,
    window_functions,
)
from .ops import linalg as _matmul_module  # noqa: F401  (matmul, bmm, mm, outer)
from .ops.convert import EXPORTED_LEGACY as _EXPORTED_LEGACY
from .ops.convert import LEGACY_NAMES as _LEGACY_NAMES
from .ops.convert import LEGACY_TYPES as _LEGACY_TYPES
from .ops.registry import FUNCTIONS as _FUNCTIONS  # noqa: E402
from .printing import get_printoptions, set_printoptions
from .random import (
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from .settings import (
    are_deterministic_algorithms_enabled,
    get_deterministic_debug_mode,
    get_float32_matmul_precision,
    get_num_interop_threads,
    init_num_threads,
    is_deterministic_algorithms_warn_only_enabled,
    is_warn_always_enabled,
    set_deterministic_debug_mode,
    set_float32_matmul_precision,
    set_flush_denormal,
    set_num_interop_threads,
    set_warn_always,
    use_deterministic_algorithms,
)
from .sparse import sparse_coo_tensor, spmm
from .tensor import Tensor

globals().update(_FUNCTIONS)  # hx.exp(x), hx.where(c, a, b), hx.cat([...]) ...
# torch.layer_norm, torch.dropout, torch.max_pool2d...: F's ops under ATen's signatures
globals().update({_n: getattr(_aten_forms, _n) for _n in _aten_forms.__all__})
# torch.native_layer_norm, torch.lstm_cell, torch.embedding_bag...: ATen's native forms
globals().update({_n: getattr(_aten_native, _n) for _n in _aten_native.__all__})
# PyTorch's legacy tensor types: hx.LongTensor([1, 2]), isinstance(x, hx.FloatTensor)
globals().update({_LEGACY_NAMES[d]: t for d, t in _LEGACY_TYPES.items() if d in _EXPORTED_LEGACY})

bool = _dtype_module.bool_  # noqa: A001  (hx.bool, as torch.bool)
half = float16
float = float32  # noqa: A001
double = float64
long = int64
int = int32  # noqa: A001
short = int16

device = Device  # hx.device("cpu"), as torch.device

__version__ = "0.1.0"


def __getattr__(name):
    # Heavier subpackages load on first use so `import haelixe` stays quick.
    import importlib

    if name in ("nn", "optim", "data", "viz", "memory", "amp", "denoise", "cuda",
                "accelerator", "onnx", "pickled", "distributions", "special", "func"):
        return importlib.import_module(f".{name}", __name__)
    if name == "vmap":  # (torch.vmap is torch.func.vmap)
        return importlib.import_module(".func", __name__).vmap
    if name == "compile":
        return importlib.import_module(".compiling", __name__).compile
    if name in ("install_as_torch", "uninstall_as_torch"):
        return getattr(importlib.import_module(".torch_alias", __name__), name)
    if name in ("autocast",):
        return importlib.import_module(".amp", __name__).autocast
    if name in ("memory_snapshot", "record_memory_history", "save_memory_snapshot",
                "load_memory_snapshot"):
        return getattr(importlib.import_module(".memory_history", __name__), name)
    if name == "profile":
        return importlib.import_module(".profiler", __name__).profile
    if name in ("memory_stats", "empty_cache", "reset_peak_stats"):
        return getattr(importlib.import_module(".memory", __name__), name)
    if name in ("save", "load"):
        return getattr(importlib.import_module(".serialization", __name__), name)
    from .closest import missing_attribute

    raise missing_attribute("haelixe", name, globals())


def allclose(a, b, rtol=1e-5, atol=1e-8):
    import builtins

    import numpy as np

    # builtins.bool: this module's `bool` is the dtype hx.bool
    return builtins.bool(np.allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol))
