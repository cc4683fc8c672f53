"""Haelixe: a deep-learning engine written from the ground up in Python.

    import haelixe as hx
    x = hx.randn(4, 3, requires_grad=True)
    (x.T @ x).sum().backward()
"""

from . import dtype as _dtype_module
from .autograd.mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
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
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from .device import Device
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
    float16,
    float32,
    float64,
    int32,
    int64,
    promote_types,
)
from .ops.indexing import cat, stack, where
from .random import manual_seed
from .tensor import Tensor

bool = _dtype_module.bool_  # noqa: A001  (hx.bool, as torch.bool)
half = float16
float = float32  # noqa: A001
double = float64
long = int64
int = int32  # noqa: A001

from . import autograd  # noqa: E402

__version__ = "0.1.0"


def __getattr__(name):
    # Heavier subpackages load on first use so `import haelixe` stays quick.
    import importlib

    if name in ("nn", "optim", "data", "viz", "memory", "amp", "denoise"):
        return importlib.import_module(f".{name}", __name__)
    if name in ("autocast",):
        return importlib.import_module(".amp", __name__).autocast
    if name in ("memory_stats", "empty_cache", "reset_peak_stats"):
        return getattr(importlib.import_module(".memory", __name__), name)
    if name in ("save", "load"):
        return getattr(importlib.import_module(".serialization", __name__), name)
    raise AttributeError(f"module 'haelixe' has no attribute {name!r}")


def exp(x):
    return x.exp()


def log(x):
    return x.log()


def sqrt(x):
    return x.sqrt()


def tanh(x):
    return x.tanh()


def sigmoid(x):
    return x.sigmoid()


def relu(x):
    return x.relu()


def matmul(a, b):
    return a @ b


def softmax(x, dim):
    return x.softmax(dim)


def log_softmax(x, dim):
    return x.log_softmax(dim)


def sum(x, dim=None, keepdim=False):  # noqa: A001
    return x.sum(dim, keepdim)


def mean(x, dim=None, keepdim=False):
    return x.mean(dim, keepdim)


def maximum(a, b):
    return a.maximum(b)


def minimum(a, b):
    return a.minimum(b)


def clamp(x, min=None, max=None):  # noqa: A002
    return x.clamp(min, max)


def masked_fill(x, mask, value):
    return x.masked_fill(mask, value)


def gather(x, dim, index):
    return x.gather(dim, index)


def flip(x, dims):
    return x.flip(dims)


def permute(x, dims):
    return x.permute(dims)


def transpose(x, d0, d1):
    return x.transpose(d0, d1)


def reshape(x, shape):
    return x.reshape(shape)


def broadcast_to(x, shape):
    return x.broadcast_to(shape)


def as_strided(x, size, stride, storage_offset=None):
    return x.as_strided(size, stride, storage_offset)


def split(x, split_size_or_sections, dim=0):
    return x.split(split_size_or_sections, dim)


def chunk(x, chunks, dim=0):
    return x.chunk(chunks, dim)


def allclose(a, b, rtol=1e-5, atol=1e-8):
    import builtins

    import numpy as np

    # builtins.bool: this module's `bool` is the dtype hx.bool
    return builtins.bool(np.allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol))
