"""The GPU backend: every kernel of ``haelixe.backends.base.Backend`` on wgpu.

Raw arrays are :class:`GpuArray`. Kernels are recorded, not run: see ``dispatch.py``.
Work reaches the GPU on ``to_numpy`` (or every ``max_pending`` dispatches); ``stats()``
counts dispatches and submits so a training step can be measured.
"""

from __future__ import annotations

import math
import threading

import ml_dtypes
import numpy as np

from ... import layout
from ...device import GPU
from ...storage import Storage
from ..base import Backend
from . import attention as at
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
        dt = gd.storage_dtype(np.dtype(dtype) if not hasattr(dtype, "np") else dtype.np,
                              "empty")
        shape = tuple(int(n) for n in shape)
        n = math.prod(shape)
        block = self.allocator.allocate(gd.nbytes_physical(dt, n),
                                        None if tag in (None, "activation") else tag)
        storage = Storage(block, GPU, gd.haelixe_dtype(dt), n * dt.itemsize)
        return GpuArray(storage, shape)

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
    def copy(self, x):
        return ew.copy(self, x)

    def copy_into(self, dst, src):
        ew.copy_into(self, dst, src)

    def cast(self, x, dtype):
        return ew.cast(self, x, dtype)

    # -- elementwise ---------------------------------------------------------------------
    def map(self, kernel, inputs, dtype):
        """``kernel`` traced into one WGSL dispatch (see expr.py)."""
        return ew.map_kernel(self, kernel, inputs, dtype)

    def map_into(self, kernel, dst, inputs):
        ew.map_into(self, kernel, dst, inputs)

    # -- reductions ----------------------------------------------------------------------
    def unreduce(self, x, shape, dims):
        strides = layout.unreduced_strides(x.shape, x.strides, shape, dims)
        return x.view(tuple(shape), strides, x.offset)

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
    def gather(self, x, axis, index):
        """take_along_axis; ``index`` is an int32 GpuArray (or host ints, narrowed)."""
        return ix.gather(self, x, axis, index)

    def scatter_add(self, shape, axis, index, src):
        return ix.scatter_add(self, shape, axis, index, src)

    def take(self, x, key):
        """``x[key]``: key entries are int32 GpuArrays (bool ones act as masks, read
        back), host int arrays, ints, slices, None or Ellipsis."""
        return ix.take(self, x, key)

    def index_add(self, shape, key, values):
        return ix.index_add(self, shape, key, values)

    def checks_on_device(self) -> bool:
        rec = self.dispatcher.recording
        return rec is not None and rec.thread == threading.get_ident()

    def check_range(self, index, lo, hi, ignore, error, message):
        ix.check_range(self, index, lo, hi, ignore, error, message)

    # -- fused neural-network kernels ----------------------------------------------------
    def linear(self, x, w, b, activation=None):
        """(y, pre): y = act(x @ w.T + b) in one tiled matmul with the epilogue fused."""
        return nn.linear(self, x, w, b, activation)

    def linear_backward(self, x, w, pre, gy, activation, need_bias, need_input=True):
        return nn.linear_backward(self, x, w, pre, gy, activation, need_bias, need_input)

    def rmsnorm(self, x, w, eps):
        if not rd.row_fits(x.shape[-1]):
            return super().rmsnorm(x, w, eps)
        return nn.rmsnorm(self, x, w, eps)

    def rmsnorm_backward(self, x, w, rstd, gy):
        if not rd.row_fits(x.shape[-1]):
            return super().rmsnorm_backward(x, w, rstd, gy)
        return nn.rmsnorm_backward(self, x, w, rstd, gy)

    def layernorm(self, x, w, b, eps):
        if not rd.row_fits(x.shape[-1]):
            return super().layernorm(x, w, b, eps)
        return nn.layernorm(self, x, w, b, eps)

    def layernorm_backward(self, x, w, mean, rstd, gy):
        if not rd.row_fits(x.shape[-1]):
            return super().layernorm_backward(x, w, mean, rstd, gy)
        return nn.layernorm_backward(self, x, w, mean, rstd, gy)

    def rope(self, x, cos, sin, inverse=False):
        return nn.rope(self, x, cos, sin, inverse)

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

    def mse_loss(self, x, y):
        """mean((x - y)^2) as a 0-d array (float sums in f32)."""
        return nn.mse_loss(self, x, y)

    def mse_loss_backward(self, x, y, g):
        """The gradient of :meth:`mse_loss` for x, given its 0-d upstream gradient g."""
        return nn.mse_loss_backward(self, x, y, g)

    # -- optimizers ----------------------------------------------------------------------
    def adamw_step(self, p, g, m, v, lr, beta1, beta2, eps, weight_decay, step):
        op.adamw_step(self, p, g, m, v, lr, beta1, beta2, eps, weight_decay, step)

    def sgd_step(self, p, g, buf, lr, momentum, nesterov, weight_decay):
        op.sgd_step(self, p, g, buf, lr, momentum, nesterov, weight_decay)

    # extra: GradScaler's unscale and inf / NaN check in one pass
    def unscale_and_check(self, g, inv_scale, flag):
        """g *= inv_scale in place, flag = 1 if g held an inf or NaN; False (nothing done)
        where g is not contiguous float32."""
        return op.unscale_and_check(self, g, inv_scale, flag)


def _word_of(value, dt):
    """The 32-bit word (as int32) that fills a buffer of ``dt`` with ``value``, or the
    (low, high) pair of words of a 64-bit element."""
    k = gd.kind(dt)
    if k == "f32":
        return f32_bits(float(value))
    if k in ("bf16", "f16"):
        half = ml_dtypes.bfloat16 if k == "bf16" else np.float16
        h = int(np.array(float(value), np.float32).astype(half).view(np.uint16))
        return int(np.array(h | (h << 16), np.uint32).view(np.int32))
    if k == "i32":
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
