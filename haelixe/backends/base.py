"""The kernel interface every backend implements.

The ops layer (haelixe/ops) never touches numpy or wgpu directly: it asks the tensor's
backend for a kernel by name and hands it *raw arrays*. A raw array is whatever the
backend stores data in:

- CPU: a numpy ``ndarray`` (any strides, negative and zero included).
- GPU: a ``haelixe.backends.wgpu.GpuArray`` (storage + shape + strides + offset, strides
  and offset counted in elements).

Both expose ``.shape`` (tuple) and ``.dtype`` (a numpy dtype; bfloat16 comes from
ml_dtypes). Every kernel accepts inputs of any layout (or documents a contiguity
requirement that its caller enforces) and returns a *new* C-contiguous raw array unless
it says it works in place. Binary kernels broadcast like numpy; the ops layer has already
promoted both inputs to one dtype. Axes are non-negative ints, already normalised.

This class only documents the contract; ``haelixe.backends.cpu.CPU`` and
``haelixe.backends.wgpu.backend.WGPU`` are the implementations.
"""

from __future__ import annotations

UNARY = (
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu",
    "sin", "cos", "sign",
)
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
REDUCE = ("sum", "max", "min")


class Backend:
    """Names and signatures of every kernel. Subclasses implement them all."""

    name = "abstract"

    # -- creation and transfer -------------------------------------------------------
    def empty(self, shape, dtype, tag="activation"):
        """Uninitialised C-contiguous array. ``tag`` is the allocator tag (GPU)."""
        raise NotImplementedError

    def full(self, shape, value, dtype, tag="activation"):
        raise NotImplementedError

    def arange(self, start, stop, step, dtype):
        raise NotImplementedError

    def from_numpy(self, array, tag="activation"):
        """Raw array holding a copy of ``array`` (GPU: an upload; CPU: may share)."""
        raise NotImplementedError

    def to_numpy(self, x):
        """numpy array with the values of ``x`` (GPU: a read-back, flushing queued work)."""
        raise NotImplementedError

    def make_view(self, storage, shape, strides, offset):
        """Raw array over ``storage`` with the given layout (elements). Zero copy."""
        raise NotImplementedError

    # -- layout ------------------------------------------------------------------------
    def copy(self, x):
        """C-contiguous copy of ``x`` (any strides)."""
        raise NotImplementedError

    def copy_into(self, dst, src):
        """In place: ``dst[...] = src`` where ``dst`` is any strided view and ``src``
        broadcasts to ``dst.shape`` (same dtype)."""
        raise NotImplementedError

    def cast(self, x, dtype):
        """Copy converted to ``dtype``; float -> bfloat16 rounds to nearest even."""
        raise NotImplementedError

    # -- elementwise -------------------------------------------------------------------
    # unary: neg abs exp log sqrt rsqrt tanh sigmoid relu silu sin cos sign -> f(x)
    def gelu(self, x, approximate="none"):
        raise NotImplementedError

    # binary: add sub mul div pow maximum minimum -> f(a, b) with broadcasting
    # compare: eq ne lt le gt ge -> bool array, with broadcasting
    def where(self, cond, a, b):
        raise NotImplementedError

    def clamp(self, x, lo, hi):
        """lo / hi are Python scalars or None."""
        raise NotImplementedError

    # -- reductions --------------------------------------------------------------------
    # sum / max / min (x, axes: tuple[int, ...], keepdim: bool)
    def argmax(self, x, axis, keepdim):
        raise NotImplementedError

    def softmax(self, x, axis):
        raise NotImplementedError

    def log_softmax(self, x, axis):
        raise NotImplementedError

    # -- linear algebra ----------------------------------------------------------------
    def matmul(self, a, b):
        """numpy.matmul semantics for ndim >= 2 (batched, broadcasting batch dims);
        transposed operands are read through their strides, not copied."""
        raise NotImplementedError

    # -- indexing ----------------------------------------------------------------------
    def gather(self, x, axis, index):
        """torch.gather: out[i][j] = x[i][index[i][j]] along ``axis``."""
        raise NotImplementedError

    def scatter_add(self, shape, axis, index, src):
        """Zeros of ``shape`` with ``src`` added at ``index`` along ``axis`` (gather's
        adjoint)."""
        raise NotImplementedError

    def take(self, x, key):
        """numpy advanced indexing ``x[key]``; key entries are raw int arrays, slices,
        None or Ellipsis."""
        raise NotImplementedError

    def index_add(self, shape, key, values):
        """Zeros of ``shape`` with ``values`` added at ``[key]``, repeated indices
        accumulating (take's adjoint)."""
        raise NotImplementedError

    # -- fused neural-network kernels --------------------------------------------------
    def linear(self, x, w, b, activation=None):
        """y = act(x @ w.T + b) over any leading dims of x; w is (out, in); b may be
        None; activation None | "gelu" | "gelu_tanh". Returns (y, saved) where saved is
        whatever this backend's linear_backward needs to differentiate the activation
        (the pre-activation, perhaps with its normal CDF; None without activation)."""
        raise NotImplementedError

    def linear_backward(self, x, w, pre, gy, activation, need_bias, need_input=True):
        """Returns (dx, dw, db) for ``linear``; ``pre`` is the ``saved`` value linear
        returned; db is None when need_bias is False, dx None when need_input is False
        (a first layer fed with data: its input gradient would be thrown away)."""
        raise NotImplementedError

    def rmsnorm(self, x, w, eps):
        """y = x * rsqrt(mean(x^2, -1) + eps) * w. Returns (y, rstd) with rstd of shape
        x.shape[:-1] + (1,)."""
        raise NotImplementedError

    def rmsnorm_backward(self, x, w, rstd, gy):
        """Returns (dx, dw)."""
        raise NotImplementedError

    def layernorm(self, x, w, b, eps):
        """Returns (y, mean, rstd)."""
        raise NotImplementedError

    def layernorm_backward(self, x, w, mean, rstd, gy):
        """Returns (dx, dw, db)."""
        raise NotImplementedError

    def rope(self, x, cos, sin, inverse=False):
        """Rotate-half RoPE on the last dim of x (..., seq, d); cos/sin are (seq, d//2).
        inverse=True applies the transpose rotation (the backward)."""
        raise NotImplementedError

    def attention(self, q, k, v, causal, scale):
        """Softmax attention over (..., seq, head_dim). Returns (out, lse) where lse is
        the log-sum-exp of each query's scaled scores, shape (..., seq_q)."""
        raise NotImplementedError

    def attention_backward(self, q, k, v, out, lse, gout, causal, scale):
        """Returns (dq, dk, dv), recomputing probabilities from lse."""
        raise NotImplementedError

    # -- optimizers (in place on flat contiguous float32 buffers) ----------------------
    def adamw_step(self, p, g, m, v, lr, beta1, beta2, eps, weight_decay, step):
        raise NotImplementedError

    def sgd_step(self, p, g, buf, lr, momentum, nesterov, weight_decay):
        """buf may be None when momentum == 0."""
        raise NotImplementedError
