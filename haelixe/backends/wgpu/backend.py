"""The GPU backend: every kernel of ``haelixe.backends.base.Backend`` on wgpu.

Raw arrays are :class:`GpuArray`. Kernels are recorded, not run: see ``dispatch.py``.
Work reaches the GPU on ``to_numpy`` (or every ``max_pending`` dispatches); ``stats()``
counts dispatches and submits so a training step can be measured.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from ...device import GPU
from ...storage import Storage, StorageAlias
from ..base import Backend
from . import attention as at
from . import conv as cv
from . import dtypes as gd
from . import elementwise as ew
from . import indexing as ix
from . import matmul as mm
from . import nn
from . import optim as op
from . import reduce as rd
from .allocator import gpu_allocator
from .array import GpuArray
from .context import get_context
from .dispatch import Dispatcher
from .geometry import f32_bits, grid, reshape_view, swap_last2
from .graph import WgpuGraph
from .shaders import kernel

__all__ = ["WGPU", "get_backend"]


class WGPU(Backend):
    """Kernels on the process's wgpu device (see the module docstring)."""

    name = "wgpu"
    device = GPU
    raw_type = GpuArray

    def __init__(self):
        self.context = get_context()
        self.allocator = gpu_allocator()
        self.dispatcher = Dispatcher(self.context)
        self.allocator.driver.before_free = self.dispatcher.release

    # -- introspection -------------------------------------------------------------------
    @property
    def info(self) -> dict:
        return self.context.info

    def stats(self) -> dict:
        """Counters since the last :meth:`reset_stats`: dispatches, submits, uploads,
        downloads (and their bytes), pipelines compiled, dispatches pending."""
        return self.dispatcher.stats()

    def reset_stats(self) -> None:
        self.dispatcher.reset_stats()

    def device_timer(self):
        """The device's clock around each dispatch (dispatch.DispatchTimer), or None
        where the adapter lacks 'timestamp-query'."""
        return self.dispatcher.device_timer()

    def new_graph(self):
        """A recorder and replayer of one captured step (hx.capture; see graph.py)."""
        return WgpuGraph(self)

    def synchronize(self) -> None:
        """Submit recorded work and wait for the GPU to finish it (for timing)."""
        self.dispatcher.synchronize()

    def flush(self) -> None:
        """Submit recorded work without waiting."""
        self.dispatcher.flush()

    # -- creation and transfer -----------------------------------------------------------
    def empty(self, shape, dtype, tag=None):
        """Uninitialised C-contiguous array. ``tag`` None or "activation" takes the tag of
        the enclosing ``memory.tagged`` block."""
        dt, hdtype = gd.stored(dtype)
        shape = tuple(map(int, shape))
        n = math.prod(shape)
        block = self.allocator.allocate(gd.nbytes_physical(dt, n),
                                        None if tag is None or tag == "activation" else tag)
        return GpuArray(Storage(block, GPU, hdtype, n * dt.itemsize), shape)

    def full(self, shape, value, dtype, tag=None):
        out = self.empty(shape, dtype, tag)
        self._fill_words(out, _word_of(value, out.dtype))
        return out

    def _fill_words(self, out, word) -> None:
        """Fill with one word, or a (even, odd) pair of words (64-bit elements)."""
        words = gd.nbytes_physical(out.dtype, out.size) // 4
        if words == 0:
            return
        pair = word if isinstance(word, tuple) else (word, word)
        spec = kernel("fill.wgsl", "fill_words", [("out", "u32", "write")])
        self.dispatcher.dispatch(spec, [out.buffer], [words, *pair], grid(-(-words // 256)))

    def from_numpy(self, array, tag=None):
        """Upload a copy of ``array``. int64 is narrowed to int32 (OverflowError when a
        value does not fit); float64 raises TypeError: cast it to float32 first (WGSL has
        no 64-bit types)."""
        a = gd.narrow(np.asarray(array), "from_numpy")
        gd.check_dtype(a.dtype, "from_numpy")
        if not a.flags.c_contiguous:  # (ascontiguousarray would make 0-d arrays 1-d)
            a = np.ascontiguousarray(a)
        out = self.empty(a.shape, a.dtype, tag)
        if a.size:
            self.dispatcher.upload(out.buffer, gd.to_words(a))
        return out

    def to_numpy(self, x):
        """Read ``x`` back (submits recorded work first)."""
        if x.size == 0:
            return np.empty(x.shape, x.dtype)
        if not x.is_contiguous():
            x = self.copy(x)
        start, nbytes, first = gd.word_span(x.dtype, x.offset, x.size)
        raw = self.dispatcher.download(x.buffer, start, nbytes)
        flat = gd.from_words(raw, x.dtype, first, x.size)
        return flat.reshape(x.shape)

    def adopt(self, raw):
        return raw.storage, tuple(raw.strides), raw.offset

    def make_view(self, storage, shape, strides, offset):
        return GpuArray(storage, shape, strides, offset)

    def reinterpret(self, storage, dtype):
        gd.check_same_words(storage.dtype.np, dtype.np)
        return StorageAlias(storage, storage.data, dtype, storage.nbytes)

    def reshape(self, x, shape):
        v = reshape_view(x, tuple(shape))
        return v if v is not None else reshape_view(self.copy(x), tuple(shape))

    def mT(self, x):
        return swap_last2(x)

    def narrow(self, x, axis, start, length):
        axis %= x.ndim
        shape = list(x.shape)
        shape[axis] = length
        return x.view(tuple(shape), x.strides, x.offset + start * x.strides[axis])

    # -- layout --------------------------------------------------------------------------
    # (a method that is a kernel module's function of ``be`` is named here, not wrapped)
    copy = ew.copy
    copy_into = ew.copy_into
    cast = ew.cast

    # -- elementwise ---------------------------------------------------------------------
    map = ew.map_kernel  # the kernel traced into one WGSL dispatch (see expr.py)
    map_into = ew.map_into

    # -- reductions ----------------------------------------------------------------------
    def sum(self, x, axes, keepdim=False):
        """Sum in the dtype of x (float accumulation in f32; int32 stays int32)."""
        return rd.reduce(self, "sum", x, axes, keepdim)

    def max(self, x, axes, keepdim=False):
        return rd.reduce(self, "max", x, axes, keepdim)

    def min(self, x, axes, keepdim=False):
        return rd.reduce(self, "min", x, axes, keepdim)

    def argmax(self, x, axis, keepdim=False):
        """First index of the maximum, as int32 (int64 does not exist in WGSL)."""
        return rd.argmax(self, x, axis, keepdim)

    # (rows too long for one workgroup: composed from the chunked reductions)
    def softmax(self, x, axis):
        if not rd.row_fits(x.shape[axis]):
            return super().softmax(x, axis)
        return rd.softmax(self, x, axis)

    def log_softmax(self, x, axis):
        if not rd.row_fits(x.shape[axis]):
            return super().log_softmax(x, axis)
        return rd.softmax(self, x, axis, log=True)

    # -- linear algebra ------------------------------------------------------------------
    def matmul(self, a, b):
        """numpy.matmul (batched, broadcast batch dims); strided operands read in place."""
        return mm.matmul(self, a, b)

    # -- indexing ------------------------------------------------------------------------
    gather = ix.gather  # take_along_axis; the index an int32 GpuArray (or host ints)
    scatter_add = ix.scatter_add
    scatter = ix.scatter  # the last writer wins where an index repeats, as on the CPU
    take = ix.take  # x[key] (see indexing.take for the keys it reads)
    index_add = ix.index_add

    def scatter_combine_(self, out, axis, index, src, reduce):
        if ix.combines_on_device(reduce, out.dtype):
            ix.scatter_combine_(self, out, axis, index, src, reduce)
        else:  # int64, bool, float16 and a bfloat16 product: on the host
            super().scatter_combine_(out, axis, index, src, reduce)

    def checks_on_device(self) -> bool:
        rec = self.dispatcher.recording
        return rec is not None and rec.thread == threading.get_ident()

    check_range = ix.check_range

    # -- fused neural-network kernels ----------------------------------------------------
    linear = nn.linear  # (y, pre): y = act(x @ w.T + b), the epilogue fused into the matmul
    linear_backward = nn.linear_backward
    rmsnorm = nn.rmsnorm
    rmsnorm_backward = nn.rmsnorm_backward
    layernorm = nn.layernorm
    layernorm_backward = nn.layernorm_backward
    rope = nn.rope
    mse_loss = nn.mse_loss  # mean((x - y)^2) as a 0-d array (float sums in f32)
    mse_loss_backward = nn.mse_loss_backward

    def attention(self, q, k, v, causal, scale, mask=None):
        """Flash attention: (out, lse); lse is float32. ``mask``: None, bool (True =
        attend) or float (added to the scores), broadcast to (batch..., q, k)."""
        if _too_long_for_flash(q, k):
            return super().attention(q, k, v, causal, scale, mask)
        return at.attention(self, q, k, v, causal, scale, mask)

    def attention_backward(self, q, k, v, out, lse, gout, causal, scale, mask=None,
                           saved=None):  # (attention_for_backward saves nothing here)
        if _too_long_for_flash(q, k):
            return super().attention_backward(q, k, v, out, lse, gout, causal, scale, mask)
        return at.attention_backward(self, q, k, v, out, lse, gout, causal, scale, mask)

    # extras: conv2d as implicit-GEMM matmuls (conv.py); the ops layer takes them for
    # float32 stride-1 convolutions, where the input's gradient is a convolution too
    implicit_conv2d = True
    conv2d = cv.conv2d
    conv2d_weight_grad = cv.conv2d_weight_grad
    conv2d_input_grad = cv.conv2d_input_grad

    # -- optimizers ----------------------------------------------------------------------
    adamw_step = op.adamw_step
    sgd_step = op.sgd_step
    unscale_and_check = op.unscale_and_check  # (extra: GradScaler's unscale and check)


def _word_of(value, dt):
    """The 32-bit word (as int32) that fills a buffer of ``dt`` with ``value``, or the
    (low, high) pair of words of a 64-bit element."""
    k = gd.storage_kind(dt)
    if k == "f32":
        return f32_bits(float(value))
    if k in ("bf16", "f16"):
        half = gd.BF16 if k == "bf16" else np.float16
        h = int(np.array(float(value), np.float32).astype(half).view(np.uint16))
        return int(np.array(h | (h << 16), np.uint32).view(np.int32))
    if k == "i32":  # (a widened dtype's value: in its range already, from the ops layer)
        return int(gd.narrow(np.array(value, dt), "fill").astype(np.int32))
    if k == "i64":
        lo, hi = np.array(value, np.int64).reshape(1).view(np.int32)
        return int(lo), int(hi)
    return 1 if value else 0


_backend = None
_lock = threading.Lock()


def get_backend() -> WGPU:
    """The process's GPU backend (starts the GPU context on first call)."""
    global _backend
    if _backend is None:
        with _lock:
            if _backend is None:
                _backend = WGPU()
    return _backend


#: The longest sequence the flash kernels walk in one invocation: past it their loops
#: over key (and query) blocks, with the loops inside each block, would pass the software
#: adapter's 65535 iterations (see geometry.STEPS_PER_INVOCATION); the composed attention
#: (scores as a product, chunked reductions) takes over.
FLASH_MAX_SEQUENCE = 1 << 16


def _too_long_for_flash(q, k) -> bool:
    return max(q.shape[-2], k.shape[-2]) > FLASH_MAX_SEQUENCE
