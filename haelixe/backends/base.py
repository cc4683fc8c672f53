"""The kernel contract every backend implements, and the one shape of an elementwise
kernel that all of them compile.

The ops layer (haelixe/ops) never touches numpy or wgpu: it calls the tensor's backend by
kernel name and hands it *raw arrays*. A raw array is whatever the backend stores data in:

- CPU: a numpy ``ndarray`` (any strides, negative and zero included).
- GPU: a ``GpuArray`` (storage + shape + strides + offset, counted in elements).

Both expose ``.shape`` (tuple) and ``.dtype`` (a numpy dtype; bfloat16 is
``haelixe.dtype.bfloat16.np``, ml_dtypes', imported on its first use).
Every kernel reads inputs of any layout and returns a *new* C-contiguous raw array unless
it says it works in place. Elementwise kernels broadcast like numpy. Axes are
non-negative ints, already normalised.

A new backend implements the *primitives* (creation and transfer, ``map``, the three
reductions, ``argmax``, ``matmul``, the four indexing kernels). Every other kernel has a
default here composed from those primitives; a backend overrides it where a fused version
pays (both shipped backends override all of them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np


class Kernel:
    """An elementwise function written once, as ``fn(m, *xs)`` over a math namespace ``m``.

    Each backend compiles it its own way: the CPU calls ``fn`` with numpy's functions on
    arrays, the GPU calls it with symbols and gets a WGSL expression back, and the ops
    layer calls it with Haelixe ops on tensors (a derivative that itself has a graph).
    The namespace offers: exp exp2 log log1p expm1 sqrt rsqrt sin cos tan tanh atan atan2
    sinh cosh asin acos asinh acosh atanh sigmoid erf erfinv lgamma digamma polygamma(n, x)
    zeta(x, q) erfc erfcx ndtr log_ndtr ndtri i0 i0e i1 i1e bessel_j0 bessel_j1
    spherical_bessel_j0 bessel_y0 bessel_y1 modified_bessel_k0 modified_bessel_k1
    scaled_modified_bessel_k0 scaled_modified_bessel_k1 airy_ai, the polynomials of
    (x, n) chebyshev_polynomial_t/u/v/w shifted_chebyshev_polynomial_t/u/v/w
    hermite_polynomial_h hermite_polynomial_he laguerre_polynomial_l
    legendre_polynomial_p, abs sign floor ceil trunc round where maximum minimum pow
    floor_divide remainder fmod copysign left_shift right_shift isnan gcd lcm ldexp
    nextafter gammainc(a, x) gammaincc(a, x), plus the arithmetic, comparison and
    logical operators.

    ``cpu`` optionally names one numpy function that computes the whole kernel (a
    ufunc), which the CPU then calls directly; ``wgsl_lib`` holds WGSL helper functions
    the expression calls.
    """

    __slots__ = ("name", "fn", "arity", "cpu", "wgsl_lib", "compiled")

    def __init__(self, name: str, fn, arity: int, cpu=None, wgsl_lib: str = ""):
        self.name = name
        self.fn = fn
        self.arity = arity
        self.cpu = cpu
        self.wgsl_lib = wgsl_lib
        self.compiled = {}  # backend name -> its compiled form (filled by the backend)

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, arity={self.arity})"


# -- kernels the composed defaults below use ----------------------------------------------
K_SUB = Kernel("sub", lambda m, a, b: a - b, 2, cpu=np.subtract)
K_MUL = Kernel("mul", lambda m, a, b: a * b, 2, cpu=np.multiply)
K_DIV = Kernel("div", lambda m, a, b: a / b, 2, cpu=np.divide)
K_SQUARE = Kernel("square", lambda m, x: x * x, 1)
K_EXP_SHIFTED = Kernel("exp_shifted", lambda m, x, mx: m.exp(x - mx), 2)
K_LOG_SOFTMAX = Kernel("log_softmax_finish", lambda m, x, mx, s: x - mx - m.log(s), 3)
K_RSTD = Kernel("rstd", lambda m, ms, eps: m.rsqrt(ms + eps), 2)
K_SCALE = Kernel("scale", lambda m, x, r, w: x * r * w, 3)
K_CENTER_SCALE = Kernel("center_scale", lambda m, x, mu, r, w, b: (x - mu) * r * w + b, 5)
K_RMS_DX = Kernel("rmsnorm_dx", lambda m, r, gx, xhat, proj: r * (gx - xhat * proj), 4)
K_LN_DX = Kernel("layernorm_dx",
                 lambda m, r, gx, m1, xhat, m2: r * (gx - m1 - xhat * m2), 5)
K_ROPE_A = Kernel("rope_a", lambda m, x1, x2, c, s: x1 * c - x2 * s, 4)
K_ROPE_B = Kernel("rope_b", lambda m, x1, x2, c, s: x2 * c + x1 * s, 4)
K_MSE_GRAD = Kernel("mse_grad", lambda m, x, y, g, k: (x - y) * (g * k), 4)
# (1 - beta) is an argument, rounded once from float64: 1 - float32(0.999) is 5e-5 off
K_ADAMW_M = Kernel("adam_m", lambda m, mo, g, b1, c1: mo * b1 + g * c1, 4)
K_ADAMW_V = Kernel("adam_v", lambda m, v, g, b2, c2: v * b2 + g * g * c2, 4)
K_ADAMW_P = Kernel(
    "adamw_p", lambda m, p, mo, v, decay, lr_bc1, inv_sqrt_bc2, eps:
    p * decay - lr_bc1 * mo / (m.sqrt(v) * inv_sqrt_bc2 + eps), 7)
# capturable AdamW: lr and the step count t read from 1-element arrays on the device
K_ADAMW_P_CAPTURABLE = Kernel(
    "adamw_p_capturable", lambda m, p, mo, v, lr, t, b1, b2, eps, wd:
    p * (1.0 - lr * wd) - lr / (1.0 - m.pow(b1, t)) * mo
    / (m.sqrt(v) / m.sqrt(1.0 - m.pow(b2, t)) + eps), 9)
K_SGD_D = Kernel("sgd_d", lambda m, g, p, wd: g + p * wd, 3)
K_SGD_BUF = Kernel("sgd_buf", lambda m, buf, d, mom: buf * mom + d, 3)
K_SGD_P = Kernel("sgd_p", lambda m, p, d, lr: p - d * lr, 3)
K_NESTEROV = Kernel("nesterov", lambda m, d, buf, mom: d + buf * mom, 3)


def _last(x) -> int:
    return len(x.shape) - 1


class Backend:
    """The contract. Primitives raise NotImplementedError; the rest are defaults composed
    from them, which a backend may override with a fused kernel."""

    name = "abstract"
    # the methods that only lay another shape over the same memory: no kernel runs and
    # no byte moves (the profiler leaves them out of a step's kernels)
    layout_only = frozenset(("make_view", "index_view", "permute_view"))

    def __reduce__(self):
        # one backend per device: a copied or unpickled tensor (which holds its
        # backend) gets the registered one, not a second instance
        from . import backend_for

        return backend_for, (self.device,)

    # -- primitives: creation and transfer ------------------------------------------------
    def empty(self, shape, dtype, tag=None):
        """Uninitialised C-contiguous array of a numpy ``dtype``. ``tag`` names what
        the memory is for (the GPU allocator's accounting)."""
        raise NotImplementedError

    def full(self, shape, value, dtype, tag=None):
        raise NotImplementedError

    def from_numpy(self, array, tag=None):
        """Raw array holding ``array``'s values (GPU: an upload; CPU: may share it)."""
        raise NotImplementedError

    def to_numpy(self, x):
        """numpy array with the values of ``x`` (GPU: a read-back, flushing queued work)."""
        raise NotImplementedError

    def adopt(self, raw):
        """(Storage, strides or None, offset) for a raw array this backend made: the
        one place a tensor learns which buffer its data lives in."""
        raise NotImplementedError

    def make_view(self, storage, shape, strides, offset):
        """Raw array over ``storage`` with the given layout (elements). Zero copy."""
        raise NotImplementedError

    def reinterpret(self, storage, dtype):
        """A Storage over ``storage``'s memory read as the Haelixe ``dtype`` (a
        :class:`haelixe.storage.StorageAlias`), or a TypeError where this backend lays
        the two dtypes out differently."""
        raise NotImplementedError

    def index_view(self, x, key, storage, shape, strides, offset):
        """The raw view ``x[key]`` for a basic key (ints, slices, None, Ellipsis), whose
        layout over ``storage`` the caller has worked out: make_view of that layout."""
        return self.make_view(storage, shape, strides, offset)

    def permute_view(self, x, dims, storage, shape, strides, offset):
        """The raw view of ``x`` with its dims in the order ``dims``, whose layout the
        caller has worked out: make_view of that layout."""
        return self.make_view(storage, shape, strides, offset)

    # -- primitives: layout and conversion ------------------------------------------------
    def reshape(self, x, shape):
        """``x`` with another shape of the same size: a view where the strides allow
        it, else a contiguous copy."""
        raise NotImplementedError

    def mT(self, x):
        """A view with the last two dims swapped."""
        raise NotImplementedError

    def narrow(self, x, axis, start, length):
        """A view of ``length`` entries from ``start`` along ``axis`` (negative axis
        counts from the end)."""
        raise NotImplementedError

    def copy(self, x):
        """C-contiguous copy of ``x`` (any strides)."""
        raise NotImplementedError

    def copy_into(self, dst, src):
        """In place ``dst[...] = src``: ``dst`` any strided view, ``src`` a raw array or
        a host scalar broadcasting to it, converted to dst's dtype."""
        raise NotImplementedError

    def cast(self, x, dtype):
        """Copy converted to a numpy ``dtype``; to bfloat16 rounds to nearest even."""
        raise NotImplementedError

    def join(self, arrays, axis, stacked):
        """A new array of ``arrays`` (one dtype, ndim and shape outside ``axis``) side by
        side along ``axis`` (cat), or, ``stacked``, each as one entry of a new dim
        ``axis`` (stack; the arrays of one shape): each copied into its part."""
        first = arrays[0]
        shape = first.shape
        if stacked:
            sizes = [1] * len(arrays)
            out_shape = shape[:axis] + (len(arrays),) + shape[axis:]
            part = shape[:axis] + (1,) + shape[axis:]
        else:
            sizes = [a.shape[axis] for a in arrays]
            out_shape = shape[:axis] + (sum(sizes),) + shape[axis + 1:]
        out = self.empty(out_shape, first.dtype)
        start = 0
        for a, n in zip(arrays, sizes):
            self.copy_into(self.narrow(out, axis, start, n),
                           self.reshape(a, part) if stacked else a)
            start += n
        return out

    #: kernel -> a callable computing it on raw float32 or float64 arrays (or one array
    #: and a numpy scalar) of one dtype, giving that dtype: what the elementwise ops'
    #: hot path calls instead of ``map``. Filled by the backends that have one (the CPU's
    #: numpy ufuncs); empty here, so every other backend takes ``map``.
    direct: Mapping = MappingProxyType({})

    # -- primitives: compute --------------------------------------------------------------
    def map(self, kernel: Kernel, inputs, dtype):
        """A new array of numpy ``dtype``: ``kernel`` applied elementwise to ``inputs``
        (raw arrays or host scalars, broadcast together). An input may be of a narrower
        float dtype than ``dtype`` (bfloat16 or float16 beside float32): it is read as
        it is and computed in ``dtype``."""
        raise NotImplementedError

    def map_into(self, kernel: Kernel, dst, inputs):
        """In place ``dst[...] = kernel(dst, *inputs)``; inputs broadcast to dst."""
        self.copy_into(dst, self.map(kernel, [dst, *inputs], dst.dtype))

    def add_into(self, dst, src):
        """In place ``dst += src`` (src of dst's shape and dtype): gradient accumulation,
        the one in-place add every backward pass runs."""
        self.map_into(K_ADD, dst, (src,))

    def sum(self, x, axes, keepdim):
        """Sum over ``axes`` (a tuple); float16/bfloat16 accumulate in float32."""
        raise NotImplementedError

    #: whether the backend has conv2d, conv2d_weight_grad and conv2d_input_grad (a
    #: convolution read straight from the image, no im2col copy; the GPU's). Without
    #: them convolutions compose the windows view, a copy and a product (ops/conv.py).
    implicit_conv2d = False

    def sum_windows_into(self, out, cols, kernel, stride, dilation):
        """col2im where the backend has a kernel for it: ``out`` (lead, *spatial) +=
        each window of ``cols`` (lead, *kernel, *positions) where the windows view of
        out reads it; True if done. The default, False, leaves it to SumWindows's
        strided adds (one per kernel offset, on every backend)."""
        return False

    def windows_into(self, out, x, before, kernel, stride, dilation):
        """im2col where the backend has a kernel for it: ``out`` (lead, *kernel,
        *positions) = the windows of x (lead, *spatial) zero-padded by ``before`` cells
        before each windowed dim (and after it as far as out's positions reach); True
        if done. The default, False, leaves it to a padded copy of x and a copy of its
        windows view (on every backend)."""
        return False

    def window_max(self, x, kernel, stride, dilation):
        """Each window's largest cell where the backend has a kernel for it: the windows
        (N, C, *kernel, *out) of x (N, C, *spatial, already padded); (values (N, C, *out),
        int64 offsets inside the windows), the first of equal cells and a NaN winning.
        The default, None, leaves it to max_pool's composition (argmax and gather)."""
        return None

    def route_max_into(self, out, g, picked, kernel, stride, dilation):
        """max-pool's backward where the backend has a kernel for it: ``out`` (N, C,
        *spatial) += each value of ``g`` (N, C, *positions) on the cell its window
        picked (``picked``, window_max's offsets); True if done. The default, False,
        leaves it to a scatter and SumWindows."""
        return False

    def max(self, x, axes, keepdim):
        raise NotImplementedError

    def min(self, x, axes, keepdim):
        raise NotImplementedError

    def argmax(self, x, axis, keepdim):
        """First index of the maximum along ``axis``, as int64."""
        raise NotImplementedError

    def argmin(self, x, axis, keepdim):
        """First index of the minimum: argmax of the order reversed (-1 - x for an
        integer: -x overflows at the least value, which would then stay least)."""
        kind = np.dtype(x.dtype).kind
        flip = _K_NOT if kind == "b" else _K_REVERSE if kind in "iu" else _K_NEG
        return self.argmax(self.map(flip, [x], x.dtype), axis, keepdim)

    def matmul(self, a, b):
        """numpy.matmul for ndim >= 2 (batched, broadcast batch dims); transposed
        operands are read through their strides, not copied."""
        raise NotImplementedError

    def gather(self, x, axis, index):
        """torch.gather: out[i][j] = x[i][index[i][j]] along ``axis``."""
        raise NotImplementedError

    def scatter_add(self, shape, axis, index, src):
        """Zeros of ``shape`` with ``src`` added at ``index`` along ``axis``."""
        raise NotImplementedError

    def take(self, x, key):
        """numpy advanced indexing ``x[key]``; key entries are raw int arrays, slices,
        None or Ellipsis."""
        raise NotImplementedError

    def index_add(self, shape, key, values):
        """Zeros of ``shape`` with ``values`` added at ``[key]``, repeats accumulating."""
        raise NotImplementedError

    # -- composed: ordering, scans, scatter --------------------------------------------
    def sort(self, x, axis, descending, stable):
        """(values, int64 indices) sorted along ``axis``. The default sorts on the host
        (a read-back and an upload): correct everywhere, fast nowhere special."""
        host = self.to_numpy(x)
        # ~ reverses any integer's order exactly (-x overflows at the least value); kind
        # "V" is bfloat16
        key = (-host if host.dtype.kind in "fV" else ~host) if descending else host
        idx = np.argsort(key, axis=axis, kind="stable" if stable or descending else None)
        return (self.from_numpy(np.take_along_axis(host, idx, axis)),
                self.from_numpy(idx.astype(np.int64)))

    def cumsum(self, x, axis):
        """Inclusive prefix sums along ``axis``: log2(n) passes of shifted adds."""
        out = self.copy(x)
        n, shift = x.shape[axis], 1
        while shift < n:
            head = self.copy(self.narrow(out, axis, 0, n - shift))
            tail = self.narrow(out, axis, shift, n - shift)
            self.map_into(K_ADD, tail, [head])
            shift *= 2
        return out

    def scatter(self, x, axis, index, src):
        """A copy of ``x`` with ``src`` written at ``index`` along ``axis`` (where an
        index repeats, this default adds the values; PyTorch leaves it unspecified)."""
        if np.ndim(src) == 0 and not hasattr(src, "offset"):  # a host scalar
            src = self.full(index.shape, src, x.dtype)
        hit = self.scatter_add(x.shape, axis, index, self.full(index.shape, 1, x.dtype))
        put = self.scatter_add(x.shape, axis, index, src)
        return self.map(_K_SCATTER, [hit, put, x], x.dtype)

    def scatter_reduce(self, x, axis, index, src, reduce, include_self):
        """A copy of ``x`` with ``src`` reduced into it at ``index`` along ``axis``
        (torch.scatter_reduce; ``reduce`` is 'sum', 'prod', 'mean', 'amax' or 'amin';
        ``include_self``: whether x's own value takes part where an index points; an
        integer mean rounds down). 'sum' and 'mean' compose from :meth:`scatter_add`;
        'prod', 'amax' and 'amin' start from a copy of x (without include_self, the
        reduction's identity where an index points) and combine src in with
        :meth:`scatter_combine_`."""
        if reduce in ("sum", "mean"):
            put = self.scatter_add(x.shape, axis, index, src)
            hit = self.scatter_add(x.shape, axis, index, self.full(index.shape, 1, x.dtype))
            if include_self:
                one = np.dtype(x.dtype).type(1)
                put, hit = self.map(K_ADD, [put, x], x.dtype), self.map(K_ADD, [hit, one], x.dtype)
            if reduce == "mean":
                kernel = _K_MEAN_INT if np.dtype(x.dtype).kind in "iub" else _K_MEAN
                put = self.map(kernel, [put, hit], x.dtype)
            return self.map(_K_SCATTER, [hit, put, x], x.dtype)
        if include_self:
            out = self.copy(x)
        else:  # (counted in int32: a bool tensor's hits cannot be summed as bools)
            hit = self.scatter_add(x.shape, axis, index, self.full(index.shape, 1, np.int32))
            identity = self.full(x.shape, _identity(reduce, x.dtype), x.dtype)
            out = self.map(_K_SCATTER, [hit, identity, x], x.dtype)
        self.scatter_combine_(out, axis, index, src, reduce)
        return out

    def scatter_combine_(self, out, axis, index, src, reduce):
        """In place: ``src`` combined into ``out`` (a fresh C-contiguous array) at
        ``index`` along ``axis`` by ``reduce`` ('prod', 'amax' or 'amin'), every repeat of
        an index taking part. This default combines on the host (a read-back and an
        upload: correct everywhere, fast nowhere special; a step captured on a device that
        needs the read-back refuses it with CaptureError, naming the op)."""
        host = np.array(self.to_numpy(out), copy=True)
        key = list(np.indices(index.shape, sparse=True))
        key[axis] = self.to_numpy(index)
        _SCATTER_UFUNCS[reduce].at(host, tuple(key), self.to_numpy(src))
        self.copy_into(out, self.from_numpy(host))

    def index_put(self, x, key, values):
        """In place ``x[key] = values`` (numpy's advanced indexing; ``values`` broadcast
        to the indexed shape). Where an index repeats, this default adds the values."""
        shape = self.take(x, key).shape
        full = self.copy(self.map(K_ADD, [self.full(shape, 0, x.dtype), values], x.dtype))
        hit = self.index_add(x.shape, key, self.full(shape, 1, x.dtype))
        put = self.index_add(x.shape, key, full)
        self.copy_into(x, self.map(_K_SCATTER, [hit, put, x], x.dtype))

    def multinomial(self, probs, num_samples, replacement, rng):
        """int64 samples of category indices, one row per row of ``probs`` (2-D),
        drawn on the host with ``rng`` (a numpy Generator)."""
        p = self.to_numpy(probs).astype(np.float64)
        out = np.empty((p.shape[0], num_samples), np.int64)
        for r in range(p.shape[0]):
            out[r] = rng.choice(p.shape[1], num_samples, replace=replacement,
                                p=p[r] / p[r].sum())
        return self.from_numpy(out)

    # -- conveniences for custom Functions: one map each ---------------------------------
    def add(self, a, b):
        return self.map(K_ADD, [a, b], _dtype_of(a, b))

    def sub(self, a, b):
        return self.map(K_SUB, [a, b], _dtype_of(a, b))

    def mul(self, a, b):
        return self.map(K_MUL, [a, b], _dtype_of(a, b))

    def div(self, a, b):
        return self.map(K_DIV, [a, b], _dtype_of(a, b))

    def neg(self, x):
        return self.map(_K_NEG, [x], x.dtype)

    def exp(self, x):
        return self.map(_K_EXP, [x], x.dtype)

    # -- composed: softmax family --------------------------------------------------------
    def softmax(self, x, axis):
        mx = self.max(x, (axis,), True)
        e = self.map(K_EXP_SHIFTED, [x, mx], x.dtype)
        return self.map(K_DIV, [e, self.sum(e, (axis,), True)], x.dtype)

    def log_softmax(self, x, axis):
        mx = self.max(x, (axis,), True)
        s = self.sum(self.map(K_EXP_SHIFTED, [x, mx], x.dtype), (axis,), True)
        return self.map(K_LOG_SOFTMAX, [x, mx, s], x.dtype)

    def softmax_backward(self, y, g, axis, log):
        """The gradient of softmax along ``axis`` (log_softmax where ``log``) from its
        output ``y`` (p, or log p) and the output's gradient ``g``: p * (g - sum(g * p)),
        or g - exp(y) * sum(g)."""
        if log:
            return self.map(_K_LOG_SOFTMAX_GRAD, [g, y, self.sum(g, (axis,), True)], y.dtype)
        dot = self.sum(self.map(K_MUL, [g, y], y.dtype), (axis,), True)
        return self.map(_K_SOFTMAX_GRAD_ROWS, [y, g, dot], y.dtype)

    # -- composed: fused neural-network kernels ------------------------------------------
    def linear(self, x, w, b, activation=None):
        """y = act(x @ w.T + b) over any leading dims; ``activation`` is None or an
        Activation (a Kernel and its derivative Kernel). Returns (y, saved): what
        linear_backward needs to differentiate the activation (the pre-activation).
        A float32 x with a 16-bit w (autocast) is rounded to w's dtype first, and y has
        w's dtype; linear_backward's dx then comes rounded the same way, in x's dtype."""
        if x.dtype != w.dtype:
            x = self.cast(x, w.dtype)
        y = self.matmul(x, self.mT(w))
        if b is not None:
            y = self.map(K_ADD, [y, b], y.dtype)
        if activation is None:
            return y, None
        return self.map(activation.forward, [y], y.dtype), y

    def linear_backward(self, x, w, pre, gy, activation, need_bias, need_input=True):
        """(dx, dw, db) of ``linear``; db None unless need_bias, dx None unless
        need_input (a first layer fed with data needs no input gradient)."""
        if activation is not None:
            gy = self.map(activation.backward, [gy, pre], gy.dtype)
        n_out, n_in = w.shape
        rows = math.prod(gy.shape[:-1])
        g2 = self.reshape(gy, (rows, n_out))
        dx = self.reshape(self.matmul(g2, w), x.shape) if need_input else None
        if x.dtype != w.dtype:  # x was read rounded to w's dtype (see linear)
            dx = None if dx is None else self.cast(dx, x.dtype)
            x = self.cast(x, w.dtype)
        dw = self.matmul(self.mT(g2), self.reshape(x, (rows, n_in)))
        db = self.sum(g2, (0,), False) if need_bias else None
        return dx, dw, db

    def rmsnorm(self, x, w, eps):
        """y = x * rsqrt(mean(x^2, -1) + eps) * w. Returns (y, rstd), rstd shaped
        x.shape[:-1] + (1,). The weight (and a layer norm's bias) may be of another float
        dtype than x: read as it is; y and the statistics have x's dtype."""
        d = x.shape[-1]
        ms = self.map(K_MUL, [self.sum(self.map(K_SQUARE, [x], x.dtype), (_last(x),), True),
                              x.dtype.type(1.0 / d if d else math.nan)], x.dtype)  # (no
        # features: an empty mean, NaN, as PyTorch's; the output is empty anyway)
        rstd = self.map(K_RSTD, [ms, x.dtype.type(eps)], x.dtype)
        return self.map(K_SCALE, [x, rstd, x.dtype.type(1) if w is None else w], x.dtype), rstd

    def rmsnorm_backward(self, x, w, rstd, gy):
        """(dx, dw): dx in x's dtype, dw in w's."""
        xhat = self.map(K_MUL, [x, rstd], x.dtype)
        dw = None if w is None else self._weight_grad(self.map(K_MUL, [gy, xhat], x.dtype), w)
        gx = gy if w is None else self.map(K_MUL, [gy, w], x.dtype)
        proj = self._row_mean(self.map(K_MUL, [gx, xhat], x.dtype))
        return self.map(K_RMS_DX, [rstd, gx, xhat, proj], x.dtype), dw

    def layernorm(self, x, w, b, eps):
        """Returns (y, mean, rstd), the statistics shaped x.shape[:-1] + (1,)."""
        mean, var = self.moments(x, (_last(x),))
        y, rstd = self.normalize(x, w, b, mean, var, eps)
        return y, mean, rstd

    def layernorm_backward(self, x, w, mean, rstd, gy):
        """(dx, dw, db): dx and db in x's dtype, dw in w's."""
        return self.normalize_backward(x, w, mean, rstd, gy, (_last(x),),
                                       tuple(range(len(x.shape) - 1)))

    def moments(self, x, axes):
        """(mean, var) of x over ``axes``, kept as dims of 1; the variance biased (the
        mean of the squared deviations), as the norms divide by it."""
        mean = self._mean_over(x, axes)
        var = self._mean_over(self.map(K_SQUARE, [self.map(K_SUB, [x, mean], x.dtype)],
                                       x.dtype), axes)
        return mean, var

    def normalize(self, x, w, b, mean, var, eps):
        """(y, rstd): y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps), every
        operand broadcasting against x (a layer norm's weight along the last dim, a
        batch norm's along the channels); w and b may be None."""
        rstd = self.map(K_RSTD, [var, x.dtype.type(eps)], x.dtype)
        one, zero = x.dtype.type(1), x.dtype.type(0)
        y = self.map(K_CENTER_SCALE, [x, mean, rstd, one if w is None else w,
                                      zero if b is None else b], x.dtype)
        return y, rstd

    def normalize_backward(self, x, w, mean, rstd, gy, axes, param_axes):
        """(dx, dw, db) of normalize with statistics over ``axes`` (their gradient
        included), dw and db summed over ``param_axes`` (the dims the weight broadcasts
        along): dx and db in x's dtype, dw in w's."""
        xhat = self.map(K_SCALE, [self.map(K_SUB, [x, mean], x.dtype), rstd,
                                  x.dtype.type(1)], x.dtype)
        dw = None
        if w is not None:
            dw = self.sum(self.map(K_MUL, [gy, xhat], x.dtype), param_axes, False)
            dw = self.reshape(dw if dw.dtype == w.dtype else self.cast(dw, w.dtype), w.shape)
        db = self.sum(gy, param_axes, False)
        gx = gy if w is None else self.map(K_MUL, [gy, w], x.dtype)
        m1 = self._mean_over(gx, axes)
        m2 = self._mean_over(self.map(K_MUL, [gx, xhat], x.dtype), axes)
        return self.map(K_LN_DX, [rstd, gx, m1, xhat, m2], x.dtype), dw, db

    def rope(self, x, cos, sin, inverse=False):
        """Rotate-half RoPE on the last dim of x (..., seq, d); cos/sin are (seq, d/2).
        inverse=True rotates the other way (the backward)."""
        h = x.shape[-1] // 2
        x1, x2 = self.narrow(x, -1, 0, h), self.narrow(x, -1, h, h)
        if inverse:
            sin = self.map(_K_NEG, [sin], sin.dtype)
        out = self.empty(x.shape, x.dtype)
        out1, out2 = self.narrow(out, -1, 0, h), self.narrow(out, -1, h, h)
        self.copy_into(out1, self.map(K_ROPE_A, [x1, x2, cos, sin], x.dtype))
        self.copy_into(out2, self.map(K_ROPE_B, [x1, x2, cos, sin], x.dtype))
        return out

    def attention(self, q, k, v, causal, scale, mask=None):
        """Softmax attention over (..., seq, head_dim). ``mask`` is None, a bool array
        (True attends) or an additive float array, broadcast to (..., seq_q, seq_k).
        Returns (out, lse): lse is each query's log-sum-exp of its scaled, masked
        scores, shape (..., seq_q)."""
        s = self._scores(q, k, causal, scale, mask)
        lse = self._logsumexp_last(s)
        p = self.map(K_EXP_SHIFTED, [s, lse], s.dtype)
        out = self.matmul(p, v)
        return out, self.reshape(lse, lse.shape[:-1])

    def attention_for_backward(self, q, k, v, causal, scale, mask=None):
        """attention for an op that records a graph node: (out, lse, saved). ``saved``
        is anything more the backend wants handed back to attention_backward (the CPU
        keeps the probabilities where they are small), or None. The node holds it like
        its other saved state and drops it when backward releases the node; an op that
        records no node calls attention instead, so nothing is made or kept for it."""
        out, lse = self.attention(q, k, v, causal, scale, mask)
        return out, lse, None

    def attention_backward(self, q, k, v, out, lse, gout, causal, scale, mask=None,
                           saved=None):
        """(dq, dk, dv), recomputing the probabilities from lse. ``saved``: what
        attention_for_backward returned with this lse (unused here)."""
        s = self._scores(q, k, causal, scale, mask)
        lse = self.reshape(lse, lse.shape + (1,))
        p = self.map(K_EXP_SHIFTED, [s, lse], s.dtype)
        dv = self.matmul(self.mT(p), gout)
        dp = self.matmul(gout, self.mT(v))
        rowdot = self.sum(self.map(K_MUL, [gout, out], out.dtype), (_last(out),), True)
        ds = self.map(_K_SOFTMAX_GRAD, [p, dp, rowdot, s.dtype.type(scale)], s.dtype)
        return self.matmul(ds, k), self.matmul(self.mT(ds), q), dv

    def mse_loss(self, x, y):
        """mean((x - y)^2) as a 0-d array."""
        sq = self.map(_K_SQDIFF, [x, y], x.dtype)
        total = self.sum(sq, tuple(range(len(sq.shape))), False)
        n = math.prod(x.shape)
        return self.map(K_MUL, [total, x.dtype.type(1.0 / n if n else math.nan)], x.dtype)

    def mse_loss_backward(self, x, y, g):
        """d mean((x - y)^2) / dx given the 0-d upstream gradient g."""
        n = math.prod(x.shape)
        return self.map(K_MSE_GRAD, [x, y, g, x.dtype.type(2.0 / n)], x.dtype)

    def cross_entropy(self, x, target, weight, ignore_index, reduction, label_smoothing):
        """Cross-entropy of (M, C) logits ``x`` at (M,) integer class indices ``target``:
        per row -w_i * log_softmax(x)[i, t_i], where w_i is ``weight[t_i]`` (1 without
        a weight) and 0 where t_i equals ``ignore_index``; with ``label_smoothing`` l,
        (1 - l) times that plus l / C times -sum_c weight_c * log_softmax(x)[i, c] (0 on
        ignored rows), as PyTorch's. Reduced by ``reduction`` ('mean' divides by the sum
        of the w_i). Returns (loss, saved): saved is what cross_entropy_backward reads."""
        m, c = x.shape
        logp = self.log_softmax(x, 1)
        dtype = logp.dtype
        kept = self.map(_K_NOT_EQUAL, [target, target.dtype.type(ignore_index)],
                        np.dtype(np.bool_))
        safe = self.map(_K_PICK, [kept, target, target.dtype.type(0)], target.dtype)
        kept = self.cast(kept, dtype)
        if weight is not None and weight.dtype != dtype:
            weight = self.cast(weight, dtype)
        w = kept if weight is None else self.mul(self.take(weight, (safe,)), kept)
        picked = self.reshape(self.gather(logp, 1, self.reshape(safe, (m, 1))), (m,))
        rows = self.map(_K_NEG_MUL, [picked, w], dtype)
        if label_smoothing:
            spread = self.sum(logp if weight is None else self.mul(logp, weight), (1,), False)
            rows = self.map(_K_SMOOTHED, [rows, spread, kept, dtype.type(1 - label_smoothing),
                                          dtype.type(label_smoothing / c)], dtype)
        loss, total = self._reduce_rows(rows, reduction, lambda: self.sum(w, (0,), False))
        return loss, (logp, safe, w, total, kept, weight, label_smoothing)

    def _reduce_rows(self, rows, reduction, divisor):
        """(loss, the mean's divisor or None): the per-row losses as they are ('none'),
        their sum, or their sum over ``divisor()`` ('mean')."""
        if reduction == "none":
            return rows, None
        loss = self.sum(rows, (0,), False)
        if reduction == "sum":
            return loss, None
        total = divisor()
        return self.div(loss, total), total

    def cross_entropy_backward(self, saved, g):
        """d loss / dx from cross_entropy's ``saved`` and the loss's gradient ``g`` (0-d,
        or (M,) for reduction 'none'): q_i-weighted softmax(x) - q_i, where q_i is the
        row's target (one_hot(t_i) * w_i, mixed with the smoothing's weight / C) scaled
        by g_i, over the mean's divisor where there is one."""
        logp, safe, w, total, kept, weight, smoothing = saved
        m, c = logp.shape
        dtype = logp.dtype
        if total is not None:
            g = self.div(g, total)
        s = self.reshape(self.map(K_MUL, [w, g], dtype), (m, 1))
        hot = self.scatter_add(logp.shape, 1, self.reshape(safe, (m, 1)), s)
        if not smoothing:
            return self.map(_K_XENT_GRAD, [logp, s, hot], dtype)
        u = self.reshape(self.map(K_MUL, [kept, g], dtype), (m, 1))  # g_i on kept rows
        a, b = dtype.type(1 - smoothing), dtype.type(smoothing / c)
        spread = dtype.type(c) if weight is None else self.sum(weight, (0,), False)
        mass = self.map(_K_SMOOTH_MASS, [s, u, spread, a, b], dtype)  # the sum of q_i
        # q_i itself: (1 - l) hot + l / C * u * weight. (Products of two operands, each its
        # own pass: the CPU's compiled kernels are slow with a scalar beside broadcast
        # rows, so the final kernel reads only arrays.)
        uniform = self.map(K_MUL, [u, b], dtype)
        if weight is not None:
            uniform = self.map(K_MUL, [uniform, weight], dtype)
        q = self.add(self.map(K_MUL, [hot, a], dtype), uniform)
        return self.map(_K_XENT_GRAD, [logp, mass, q], dtype)

    def cross_entropy_soft(self, x, target, weight, reduction, label_smoothing):
        """Cross-entropy of (M, C) logits ``x`` against (M, C) class probabilities
        ``target``: per row -sum_c q_ic * log_softmax(x)[i, c], q the target mixed
        with the uniform distribution by ``label_smoothing`` and times the per-class
        ``weight``; 'mean' divides by M. Returns (loss, saved) for
        cross_entropy_soft_backward."""
        m, c = x.shape
        logp = self.log_softmax(x, 1)
        dtype = logp.dtype
        q = target if target.dtype == dtype else self.cast(target, dtype)
        if label_smoothing:
            q = self.map(_K_MIX, [q, dtype.type(1 - label_smoothing),
                                  dtype.type(label_smoothing / c)], dtype)
        if weight is not None:
            q = self.mul(q, weight if weight.dtype == dtype else self.cast(weight, dtype))
        rows = self.sum(self.map(_K_NEG_MUL, [q, logp], dtype), (1,), False)
        loss, total = self._reduce_rows(rows, reduction, lambda: dtype.type(m))
        return loss, (logp, q, total)

    def cross_entropy_soft_backward(self, saved, g):
        """d loss / dx from cross_entropy_soft's ``saved`` and the loss's gradient ``g``
        (0-d, or (M,) for reduction 'none'): (softmax(x) * sum_c q_ic - q_i) * g_i."""
        logp, q, total = saved
        if total is not None:
            g = self.div(g, total)
        if g.shape:
            g = self.reshape(g, (logp.shape[0], 1))
        dtype = logp.dtype
        mass = self.map(K_MUL, [self.sum(q, (1,), True), g], dtype)
        return self.map(_K_XENT_GRAD, [logp, mass, self.map(K_MUL, [q, g], dtype)], dtype)

    # -- composed: a recurrent step's pointwise part ------------------------------------
    def lstm_cell(self, gates, c):
        """One LSTM step after its products: ``gates`` (batch, 4n) are the gates'
        pre-activations in PyTorch's order (i, f, g, o), ``c`` (batch, n) the previous
        cell. Returns (hc, act): hc (batch, 2n) holds h = o * tanh(c') and then
        c' = f * c + i * g; act (batch, 4n) the activations sigmoid(i, f, o), tanh(g)
        that lstm_cell_backward reads."""
        n = c.shape[-1]
        act = self.map(_K_SIGMOID, [gates], gates.dtype)  # (g's block then replaced)
        self.copy_into(self.narrow(act, -1, 2 * n, n),
                       self.map(_K_TANH, [self.narrow(gates, -1, 2 * n, n)], gates.dtype))
        i, f, g, o = (self.narrow(act, -1, k * n, n) for k in range(4))
        hc = self.empty(c.shape[:-1] + (2 * n,), c.dtype)
        c2 = self.narrow(hc, -1, n, n)
        self.copy_into(c2, self.map(_K_LSTM_C, [f, c, i, g], c.dtype))
        self.copy_into(self.narrow(hc, -1, 0, n), self.map(_K_LSTM_H, [o, c2], c.dtype))
        return hc, act

    def lstm_cell_backward(self, act, c, hc, ghc):
        """(dgates, dc) of lstm_cell from the gradient ``ghc`` of its hc (dh, then the
        gradient of c')."""
        n = c.shape[-1]
        i, f, g, o = (self.narrow(act, -1, k * n, n) for k in range(4))
        c2, dh = self.narrow(hc, -1, n, n), self.narrow(ghc, -1, 0, n)
        dc2 = self.map(_K_LSTM_DC, [self.narrow(ghc, -1, n, n), dh, o, c2], c.dtype)
        dgates = self.empty(act.shape, act.dtype)
        for k, part in enumerate((self.map(_K_DSIGMOID, [dc2, g, i], c.dtype),
                                  self.map(_K_DSIGMOID, [dc2, c, f], c.dtype),
                                  self.map(_K_DTANH, [dc2, i, g], c.dtype),
                                  self.map(_K_LSTM_DO, [dh, c2, o], c.dtype))):
            self.copy_into(self.narrow(dgates, -1, k * n, n), part)
        return dgates, self.map(K_MUL, [dc2, f], c.dtype)

    def gru_cell(self, xp, hp, h):
        """One GRU step after its products: ``xp`` and ``hp`` (batch, 3n) are the input's
        and the previous state's projections in PyTorch's order (r, z, n), ``h`` (batch,
        n) the previous state. Returns (h', act): h' = c + z * (h - c), where r, z =
        sigmoid(xp + hp) and c = tanh(xp_n + r * hp_n); act (batch, 3n) holds r, z, c
        for gru_cell_backward."""
        n = h.shape[-1]
        act = self.empty(xp.shape, xp.dtype)
        rz = self.narrow(act, -1, 0, 2 * n)
        self.copy_into(rz, self.map(_K_SIGMOID_SUM, [self.narrow(xp, -1, 0, 2 * n),
                                                     self.narrow(hp, -1, 0, 2 * n)], h.dtype))
        r, z, cand = (self.narrow(act, -1, k * n, n) for k in range(3))
        self.copy_into(cand, self.map(_K_GRU_CAND, [self.narrow(xp, -1, 2 * n, n), r,
                                                    self.narrow(hp, -1, 2 * n, n)], h.dtype))
        return self.map(_K_GRU_H, [cand, z, h], h.dtype), act

    def gru_cell_backward(self, act, hp, h, g):
        """(dxp, dhp, dh) of gru_cell from the gradient ``g`` of its h'."""
        n = h.shape[-1]
        r, z, cand = (self.narrow(act, -1, k * n, n) for k in range(3))
        dpre = self.map(_K_GRU_DCAND, [g, z, cand], h.dtype)  # of c's pre-activation
        dr = self.map(_K_DSIGMOID, [dpre, self.narrow(hp, -1, 2 * n, n), r], h.dtype)
        dz = self.map(_K_DSIGMOID, [g, self.map(K_SUB, [h, cand], h.dtype), z], h.dtype)
        dxp, dhp = self.empty(act.shape, act.dtype), self.empty(act.shape, act.dtype)
        for k, (dx, dh) in enumerate(((dr, dr), (dz, dz),
                                      (dpre, self.map(K_MUL, [dpre, r], h.dtype)))):
            self.copy_into(self.narrow(dxp, -1, k * n, n), dx)
            self.copy_into(self.narrow(dhp, -1, k * n, n), dh)
        return dxp, dhp, self.map(K_MUL, [g, z], h.dtype)

    # -- composed: optimizers (in place on flat contiguous buffers) -----------------------
    def adamw_step(self, p, g, m, v, lr, beta1, beta2, eps, weight_decay, step):
        t = p.dtype.type
        self.map_into(K_ADAMW_M, m, [g, t(beta1), t(1.0 - beta1)])
        self.map_into(K_ADAMW_V, v, [g, t(beta2), t(1.0 - beta2)])
        bc1, bc2 = 1.0 - beta1 ** step, 1.0 - beta2 ** step
        self.map_into(K_ADAMW_P, p, [m, v, t(1.0 - lr * weight_decay), t(lr / bc1),
                                     t(1.0 / math.sqrt(bc2)), t(eps)])

    def sgd_step(self, p, g, buf, lr, momentum, nesterov, weight_decay):
        """buf may be None when momentum == 0."""
        self.sgd_step_capturable(p, g, buf, p.dtype.type(lr), momentum, nesterov,
                                 weight_decay)

    # capturable forms: what changes from step to step is read from 1-element arrays on
    # the device, so a captured step replays with the current values (hx.capture)
    def adamw_step_capturable(self, p, g, m, v, lr, step, beta1, beta2, eps, weight_decay):
        """adamw_step with ``lr`` and ``step`` (the count, this step included) read from
        1-element arrays; the bias corrections are computed in p's dtype."""
        t = p.dtype.type
        self.map_into(K_ADAMW_M, m, [g, t(beta1), t(1.0 - beta1)])
        self.map_into(K_ADAMW_V, v, [g, t(beta2), t(1.0 - beta2)])
        self.map_into(K_ADAMW_P_CAPTURABLE, p, [m, v, lr, step, t(beta1), t(beta2), t(eps),
                                                t(weight_decay)])

    def sgd_step_capturable(self, p, g, buf, lr, momentum, nesterov, weight_decay):
        """sgd_step with ``lr`` read from a 1-element array (or a host scalar)."""
        t = p.dtype.type
        d = self.map(K_SGD_D, [g, p, t(weight_decay)], p.dtype) if weight_decay else g
        if momentum:
            self.map_into(K_SGD_BUF, buf, [d, t(momentum)])
            d = self.map(K_NESTEROV, [d, buf, t(momentum)], p.dtype) if nesterov else buf
        self.map_into(K_SGD_P, p, [d, lr])

    def device_timer(self):
        """A timer of this device's own clock around each kernel, for hx.profile:
        ``start()``; each kernel launch then returns its slot; ``stop()`` returns the
        nanoseconds of each slot. None (the default) where there is none: a CPU
        kernel's host time is its time."""
        return None

    # -- capture (hx.capture) -------------------------------------------------------------
    def new_graph(self):
        """A recorder and replayer of this backend's launches for one captured step (see
        graph.py); the default records nothing and replays by running the step again."""
        from .graph import EagerGraph

        return EagerGraph(self)

    def checks_on_device(self) -> bool:
        """Whether index checks must run on the device now, because nothing may be read
        back (a step being captured on this thread): ops then call :meth:`check_range`
        instead of reading indices to the host. False by default."""
        return False

    def check_range(self, index, lo: int, hi: int, ignore, error, message: str) -> None:
        """Check that every value v of the raw integer array ``index`` lies in [lo, hi)
        or equals ``ignore`` (None: none is skipped); else raise
        ``error(message.format(value=v))``. A device may check later, on the device, and
        raise at the next read-back from it. The default reads ``index`` back now."""
        values = self.to_numpy(index)
        # min and max first: the usual case, every value in range, needs no mask
        if not values.size or (lo <= values.min() and values.max() < hi):
            return
        bad = (values < lo) | (values >= hi)
        if ignore is not None:
            bad &= values != ignore
        if bad.any():
            raise error(message.format(value=int(values[bad][0])))

    # -- helpers for the defaults --------------------------------------------------------
    def _row_mean(self, x):
        return self._mean_over(x, (_last(x),))

    def _mean_over(self, x, axes):
        count = math.prod(x.shape[a] for a in axes)
        return self.map(K_MUL, [self.sum(x, axes, True), x.dtype.type(1.0 / max(count, 1))],
                        x.dtype)

    def _sum_rows(self, x):
        return self.sum(x, tuple(range(len(x.shape) - 1)), False)

    def _weight_grad(self, rows, w):
        """A norm's weight gradient: ``rows`` summed over its rows, in w's dtype."""
        dw = self._sum_rows(rows)
        return dw if dw.dtype == w.dtype else self.cast(dw, w.dtype)

    def _logsumexp_last(self, s):
        mx = self.max(s, (_last(s),), True)
        e = self.sum(self.map(K_EXP_SHIFTED, [s, mx], s.dtype), (_last(s),), True)
        return self.map(_K_LSE_FINISH, [mx, e], s.dtype)

    def _scores(self, q, k, causal, scale, mask):
        s = self.map(K_MUL, [self.matmul(q, self.mT(k)), q.dtype.type(scale)], q.dtype)
        if mask is not None:
            kern = _K_MASK_BOOL if np.dtype(mask.dtype) == np.bool_ else _K_MASK_ADD
            s = self.map(kern, [s, mask], s.dtype)
        if causal:
            nq, nk = s.shape[-2], s.shape[-1]
            keep = np.tril(np.ones((nq, nk), np.bool_))  # top-left aligned, as PyTorch
            s = self.map(_K_MASK_BOOL, [s, self.from_numpy(keep)], s.dtype)
        return s


K_ADD = Kernel("add", lambda m, a, b: a + b, 2, cpu=np.add)
_K_NEG = Kernel("neg", lambda m, x: -x, 1)
_K_NOT = Kernel("not", lambda m, x: x == 0, 1)
_K_REVERSE = Kernel("reverse", lambda m, x: -1 - x, 1)
_K_EXP = Kernel("exp", lambda m, x: m.exp(x), 1)
_K_SCATTER = Kernel("scatter_pick", lambda m, hit, put, x: m.where(hit > 0, put, x), 3)
# a mean's total over its count (a count of 0 keeps the total: scatter_pick drops it)
_K_MEAN = Kernel("scatter_mean", lambda m, total, n: total / m.maximum(n, 1), 2)
_K_MEAN_INT = Kernel("scatter_mean_int",
                     lambda m, total, n: m.floor_divide(total, m.maximum(n, 1)), 2)
_SCATTER_UFUNCS = {"prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def _identity(reduce, dtype):
    """The value that leaves every other unchanged under ``reduce``, in ``dtype``."""
    if reduce == "prod":
        return 1
    return _lowest(dtype) if reduce == "amax" else _highest(dtype)


def _lowest(dtype):
    dtype = np.dtype(dtype)  # (bfloat16's kind is "V": a float, as every non-integer)
    return np.iinfo(dtype).min if dtype.kind in "iu" else False if dtype.kind == "b" \
        else -np.inf


def _highest(dtype):
    dtype = np.dtype(dtype)
    return np.iinfo(dtype).max if dtype.kind in "iu" else True if dtype.kind == "b" \
        else np.inf


def _dtype_of(a, b):
    return a.dtype if hasattr(a, "shape") and a.shape is not None and not np.isscalar(a) \
        else b.dtype
_K_SQDIFF = Kernel("sqdiff", lambda m, x, y: (x - y) * (x - y), 2)
_K_NOT_EQUAL = Kernel("not_equal", lambda m, a, b: a != b, 2)
_K_PICK = Kernel("pick", lambda m, c, a, b: m.where(c, a, b), 3)
_K_NEG_MUL = Kernel("neg_mul", lambda m, a, b: -(a * b), 2)
_K_XENT_GRAD = Kernel("cross_entropy_grad", lambda m, logp, s, hot: m.exp(logp) * s - hot, 3)
_K_MIX = Kernel("mix", lambda m, q, a, b: q * a + b, 3)
_K_SMOOTHED = Kernel("smoothed_rows", lambda m, r, sp, k, a, b: r * a - sp * k * b, 5)
_K_SMOOTH_MASS = Kernel("smoothed_mass", lambda m, s, u, sp, a, b: s * a + u * sp * b, 5)
_K_LSE_FINISH = Kernel("lse_finish", lambda m, mx, e: mx + m.log(e), 2)
_K_SOFTMAX_GRAD = Kernel("attention_ds", lambda m, p, dp, rd, sc: p * (dp - rd) * sc, 4)
_K_SOFTMAX_GRAD_ROWS = Kernel("softmax_grad", lambda m, p, g, dot: p * (g - dot), 3)
_K_LOG_SOFTMAX_GRAD = Kernel("log_softmax_grad", lambda m, g, y, s: g - m.exp(y) * s, 3)
_K_MASK_BOOL = Kernel("mask_bool", lambda m, s, keep: m.where(keep, s, -math.inf), 2)
_K_MASK_ADD = Kernel("mask_add", lambda m, s, bias: s + bias, 2)
# the recurrent steps (lstm_cell, gru_cell): s is a sigmoid's output, t a tanh's
_K_SIGMOID = Kernel("rnn_sigmoid", lambda m, x: m.sigmoid(x), 1)
_K_TANH = Kernel("rnn_tanh", lambda m, x: m.tanh(x), 1)
_K_SIGMOID_SUM = Kernel("rnn_sigmoid_sum", lambda m, a, b: m.sigmoid(a + b), 2)
_K_LSTM_C = Kernel("lstm_c", lambda m, f, c, i, g: f * c + i * g, 4)
_K_LSTM_H = Kernel("lstm_h", lambda m, o, c2: o * m.tanh(c2), 2)


def _lstm_dc(m, gc, dh, o, c2):
    t = m.tanh(c2)
    return gc + dh * o * (1.0 - t * t)


_K_LSTM_DC = Kernel("lstm_dc", _lstm_dc, 4)
_K_LSTM_DO = Kernel("lstm_do", lambda m, dh, c2, o: dh * m.tanh(c2) * o * (1.0 - o), 3)
_K_DSIGMOID = Kernel("rnn_dsigmoid", lambda m, g, x, s: g * x * s * (1.0 - s), 3)
_K_DTANH = Kernel("rnn_dtanh", lambda m, g, x, t: g * x * (1.0 - t * t), 3)
_K_GRU_CAND = Kernel("gru_cand", lambda m, xn, r, hn: m.tanh(xn + r * hn), 3)
_K_GRU_H = Kernel("gru_h", lambda m, c, z, h: c + z * (h - c), 3)
_K_GRU_DCAND = Kernel("gru_dcand", lambda m, g, z, t: g * (1.0 - z) * (1.0 - t * t), 3)


class Activation:
    """An activation a fused Linear applies: its forward Kernel f(m, x) and the kernel of
    its backward, g * f'(x), as b(m, g, x)."""

    __slots__ = ("name", "forward", "backward")

    def __init__(self, name: str, forward: Kernel, backward: Kernel):
        self.name, self.forward, self.backward = name, forward, backward

    def __repr__(self) -> str:
        return f"Activation({self.name!r})"
