"""CPU kernels on numpy arrays. Every kernel reads its inputs through their strides
(numpy does that natively), so transposed, sliced, broadcast and flipped views are read
in place; matmul hands transposed operands to BLAS with a transpose flag, not a copy."""

from __future__ import annotations

import functools
import math
import platform
import warnings

import ml_dtypes
import numpy as np

from ..device import CPU
from ..storage import Storage
from .base import Backend, Kernel

# Float edge cases (log 0, overflow, 0/0) give inf and NaN silently, as in PyTorch; the
# filter names only this package's modules, so a user's own numpy code still warns.
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"haelixe(\.|$)")

_exact_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """erf without scipy: exact (math.erf) in float64, where gradient checks need every
    digit; elsewhere Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7, about float32
    resolution), evaluated in place to keep temporaries few."""
    x = np.asarray(x)
    if x.ndim == 0:
        return erf(x.reshape(1)).reshape(())
    if x.dtype == np.float64:
        return _exact_erf(x).astype(np.float64)
    a = np.abs(x)
    t = a * np.float32(0.3275911)
    t += 1
    np.reciprocal(t, out=t)
    y = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        y += np.float32(c)
        y *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    y *= a
    np.subtract(1, y, out=y)
    np.copysign(y, x, out=y)
    return y.astype(x.dtype, copy=False)


def _sigmoid(x):
    # Two branches so neither exp overflows.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


class NumpyMath:
    """The math namespace a Kernel's function sees on the CPU: numpy on arrays."""

    exp, log, log1p, expm1, sqrt = np.exp, np.log, np.log1p, np.expm1, np.sqrt
    sin, cos, tanh, abs, sign = np.sin, np.cos, np.tanh, np.abs, np.sign
    floor, ceil, trunc = np.floor, np.ceil, np.trunc
    maximum, minimum, pow = np.maximum, np.minimum, np.power
    floor_divide, remainder, isnan = np.floor_divide, np.remainder, np.isnan
    # (plain functions, not numpy's dispatchers, which would bind as methods)
    where = staticmethod(lambda c, a, b: np.where(c, a, b))
    round = staticmethod(lambda x: np.round(x))
    sigmoid = staticmethod(_sigmoid)
    erf = staticmethod(erf)

    @staticmethod
    def rsqrt(x):
        return 1.0 / np.sqrt(x)


_MATH = NumpyMath
_LOW = (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16))


def _low(x) -> bool:
    return isinstance(x, np.ndarray) and x.dtype in _LOW


def computes_in_f32(kernel):
    """Run a kernel on BF16/F16 arrays in F32 and round its array results back once:
    BLAS has no 16-bit arithmetic, and F32 accumulation is the point of autocast."""

    def up(v):
        if isinstance(v, tuple):
            return tuple(up(e) for e in v)
        return v.astype(np.float32) if _low(v) else v

    def down(v, dtype):
        if isinstance(v, tuple):
            return tuple(down(e, dtype) for e in v)
        if isinstance(v, np.ndarray) and v.dtype == np.float32:
            return v.astype(dtype)
        return v

    @functools.wraps(kernel)
    def wrapper(self, *args, **kwargs):
        low = next((a.dtype for a in args if _low(a)), None)
        if low is None:
            return kernel(self, *args, **kwargs)
        out = kernel(self, *(up(a) for a in args), **kwargs)
        return down(out, low)

    return wrapper


def _matmul(a, b):
    """np.matmul, with float16 / bfloat16 operands multiplied in float32 (BLAS, and
    PyTorch's accumulation) and the result cast back: ml_dtypes' bfloat16 matmul
    returns float32, and float16 has no BLAS path."""
    if a.dtype in _LOW:
        return np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    return np.matmul(a, b)


def _compile(kernel: Kernel):
    """The numpy callable of ``kernel``: its ufunc where it names one, else its function
    over the numpy namespace."""
    f = kernel.cpu
    if f is None:
        fn = kernel.fn

        def f(*xs):
            return fn(_MATH, *xs)

    kernel.compiled["cpu"] = f
    return f


def _in_f32(f, xs):
    """``f`` on 16-bit inputs computed in float32 (numpy has no 16-bit arithmetic worth
    the name, and PyTorch also rounds once at the end)."""
    return f(*(x.astype(np.float32) if getattr(x, "dtype", None) in _LOW else x
               for x in xs))


_DOT_SUM_MAX = 1 << 16
_DOT_SUM = {np.dtype(t): np.ones(_DOT_SUM_MAX, t) for t in (np.float32, np.float64)}


class CPUBackend(Backend):
    name = "cpu"
    device = CPU
    raw_type = np.ndarray
    matmul = staticmethod(_matmul)

    @property
    def info(self) -> dict:
        return {"type": "cpu", "processor": platform.processor() or platform.machine(),
                "numpy": np.__version__}

    # -- elementwise ---------------------------------------------------------------------
    def map(self, kernel, inputs, dtype):
        f = kernel.compiled.get("cpu") or _compile(kernel)
        out = f(*inputs) if dtype not in _LOW or kernel.cpu is not None else \
            _in_f32(f, inputs)
        if out.__class__ is not np.ndarray:
            out = np.asarray(out)
        odt = out.dtype
        return out if odt is dtype or odt == dtype else out.astype(dtype)

    def map_into(self, kernel, dst, inputs):
        f = kernel.compiled.get("cpu") or _compile(kernel)
        if isinstance(kernel.cpu, np.ufunc) and dst.dtype not in _LOW:  # writes in place
            f(dst, *inputs, out=dst, casting="unsafe")
        else:
            np.copyto(dst, self.map(kernel, [dst, *inputs], dst.dtype), casting="unsafe")

    # -- creation and transfer -----------------------------------------------------------
    def empty(self, shape, dtype, tag=None):
        return np.empty(shape, dtype)

    def full(self, shape, value, dtype, tag=None):
        return np.full(shape, value, dtype)

    def from_numpy(self, array, tag=None):
        return array

    def to_numpy(self, x):
        return x

    def adopt(self, raw):
        raw = np.asarray(raw)
        from ..dtype import from_numpy

        return storage_for(raw, CPU, from_numpy(raw.dtype))

    def make_view(self, storage, shape, strides, offset):
        isz = storage.dtype.itemsize
        if 0 in shape:  # no element to reach: numpy would still check the offset
            return np.ndarray(shape, storage.dtype.np, buffer=storage.data[:0])
        return np.ndarray(shape, storage.dtype.np, buffer=storage.data, offset=offset * isz,
                          strides=tuple(s * isz for s in strides))

    # -- layout --------------------------------------------------------------------------
    def reshape(self, x, shape):
        return x.reshape(shape)

    def mT(self, x):
        return x.swapaxes(-1, -2)

    def narrow(self, x, axis, start, length):
        key = [slice(None)] * x.ndim
        key[axis] = slice(start, start + length)
        return x[tuple(key)]

    def copy(self, x):
        return np.array(x, order="C", copy=True)

    def copy_into(self, dst, src):
        np.copyto(dst, src, casting="unsafe")

    def cast(self, x, dtype):
        return x.astype(dtype)

    # -- reductions ----------------------------------------------------------------------
    def sum(self, x, axes, keepdim):
        if (len(axes) == x.ndim and x.dtype in _DOT_SUM and x.size <= _DOT_SUM_MAX
                and x.flags.c_contiguous):
            # A full sum of a short contiguous buffer as a dot product with ones: BLAS
            # does it in half the time of numpy's reduction machinery, and its blocked
            # accumulation is as accurate at these sizes.
            total = np.dot(x.reshape(-1), _DOT_SUM[x.dtype][:x.size])
            return np.full((1,) * x.ndim, total, x.dtype) if keepdim else total
        if x.dtype in _LOW:
            # add up in float32, as PyTorch does: numpy sums bfloat16 element by element
            # in bfloat16, where 256 + 1 rounds back to 256
            out = np.add.reduce(x, axis=axes, keepdims=keepdim, dtype=np.float32)
            return np.asarray(out).astype(x.dtype)
        return np.add.reduce(x, axis=axes, keepdims=keepdim, dtype=x.dtype)

    def max(self, x, axes, keepdim):
        return np.maximum.reduce(x, axis=axes, keepdims=keepdim)

    def min(self, x, axes, keepdim):
        return np.minimum.reduce(x, axis=axes, keepdims=keepdim)

    def argmax(self, x, axis, keepdim):
        return np.argmax(x, axis=axis, keepdims=keepdim)

    def argmin(self, x, axis, keepdim):
        return np.argmin(x, axis=axis, keepdims=keepdim)

    def softmax(self, x, axis):
        if x.dtype in _LOW:  # float32 inside (see sum), rounded once at the end
            return self.softmax(x.astype(np.float32), axis).astype(x.dtype)
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        e /= e.sum(axis=axis, keepdims=True)
        return e

    def log_softmax(self, x, axis):
        if x.dtype in _LOW:
            return self.log_softmax(x.astype(np.float32), axis).astype(x.dtype)
        shifted = x - np.max(x, axis=axis, keepdims=True)
        shifted -= np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
        return shifted

    # -- ordering, scans, scatter ----------------------------------------------------------
    def sort(self, x, axis, descending, stable):
        key = (~x if x.dtype == np.bool_ else -x) if descending else x
        idx = np.argsort(key, axis=axis, kind="stable" if stable or descending else None)
        return np.take_along_axis(x, idx, axis), idx

    def cumsum(self, x, axis):
        if x.dtype in _LOW:
            return np.cumsum(x, axis=axis, dtype=np.float32).astype(x.dtype)
        return np.cumsum(x, axis=axis, dtype=x.dtype)

    def scatter(self, x, axis, index, src):
        out = np.array(x, copy=True)
        x_view = out[tuple(slice(0, n) if d != axis else slice(None)
                           for d, n in enumerate(index.shape))]
        np.put_along_axis(x_view, index, np.broadcast_to(src, index.shape), axis)
        return out

    # -- indexing ------------------------------------------------------------------------
    def gather(self, x, axis, index):
        # torch.gather reads only index.shape of x along the other dims (numpy would
        # broadcast a smaller index against x instead)
        x = x[tuple(slice(None) if d == axis else slice(0, n)
                    for d, n in enumerate(index.shape))]
        return np.take_along_axis(x, index, axis=axis)

    def scatter_add(self, shape, axis, index, src):
        out = np.zeros(shape, src.dtype)
        key = list(np.indices(index.shape, sparse=True))
        key[axis] = index
        np.add.at(out, tuple(key), src)
        return out

    def take(self, x, key):
        return np.array(x[key], copy=True)

    def index_put(self, x, key, values):
        x[key] = values

    def index_add(self, shape, key, values):
        out = np.zeros(shape, values.dtype)
        np.add.at(out, key, values)
        return out

    # -- fused neural-network kernels ----------------------------------------------------
    @computes_in_f32
    def linear(self, x, w, b, activation=None):
        # Fold leading dims into one GEMM (numpy would loop over a 3-D batch); w.T is
        # a transposed view that BLAS reads with a transpose flag.
        x2 = x.reshape(-1, x.shape[-1])
        y = np.matmul(x2, w.T)
        if b is not None:
            y += b
        y = y.reshape(x.shape[:-1] + (w.shape[0],))
        if activation is None:
            return y, None
        return self.map(activation.forward, [y], y.dtype), y

    @computes_in_f32
    def linear_backward(self, x, w, pre, gy, activation, need_bias, need_input=True):
        if activation is not None:
            gy = self.map(activation.backward, [gy, pre], gy.dtype)
        n_in, n_out = w.shape[1], w.shape[0]
        x2 = x.reshape(-1, n_in)
        g2 = gy.reshape(-1, n_out)
        dx = np.matmul(g2, w).reshape(x.shape) if need_input else None
        dw = np.matmul(g2.T, x2)
        db = np.add.reduce(g2, axis=0) if need_bias else None
        return dx, dw, db

    @computes_in_f32
    def rmsnorm(self, x, w, eps):
        ms = np.einsum("...i,...i->...", x, x)[..., None] / x.shape[-1]
        rstd = 1.0 / np.sqrt(ms + eps)
        y = x * rstd
        if w is not None:
            y *= w
        return y, rstd.astype(x.dtype, copy=False)

    @computes_in_f32
    def rmsnorm_backward(self, x, w, rstd, gy):
        xhat = x * rstd
        n = x.shape[-1]
        dw = (gy * xhat).reshape(-1, n).sum(axis=0) if w is not None else None
        gx = gy * w if w is not None else gy
        proj = np.einsum("...i,...i->...", gx, xhat)[..., None] / x.shape[-1]
        dx = rstd * (gx - xhat * proj)
        return dx, dw

    @computes_in_f32
    def layernorm(self, x, w, b, eps):
        mean = x.mean(axis=-1, keepdims=True)
        xc = x - mean
        var = np.einsum("...i,...i->...", xc, xc)[..., None] / x.shape[-1]
        rstd = 1.0 / np.sqrt(var + eps)
        y = xc * rstd
        if w is not None:
            y *= w
        if b is not None:
            y += b
        return y, mean, rstd

    @computes_in_f32
    def layernorm_backward(self, x, w, mean, rstd, gy):
        xhat = (x - mean) * rstd
        n = x.shape[-1]
        dw = (gy * xhat).reshape(-1, n).sum(axis=0) if w is not None else None
        db = gy.reshape(-1, n).sum(axis=0)
        gx = gy * w if w is not None else gy
        m1 = gx.mean(axis=-1, keepdims=True)
        m2 = np.einsum("...i,...i->...", gx, xhat)[..., None] / n
        dx = rstd * (gx - m1 - xhat * m2)
        return dx, dw, db

    def rope(self, x, cos, sin, inverse=False):
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]
        if inverse:
            sin = -sin
        out = np.empty(x.shape, x.dtype)
        np.subtract(x1 * cos, x2 * sin, out=out[..., :h])
        np.add(x2 * cos, x1 * sin, out=out[..., h:])
        return out

    @computes_in_f32
    def attention(self, q, k, v, causal, scale, mask=None):
        from .cpu_attention import attention_forward

        return attention_forward(q, k, v, causal, scale, mask)

    @computes_in_f32
    def attention_backward(self, q, k, v, out, lse, gout, causal, scale, mask=None):
        from .cpu_attention import attention_backward

        return attention_backward(q, k, v, out, lse, gout, causal, scale, mask)

    # -- optimizers ----------------------------------------------------------------------
    def adamw_step(self, p, g, m, v, lr, beta1, beta2, eps, weight_decay, step):
        # One pass of whole-buffer numpy ops over every parameter at once; temporaries
        # are reused through out= so the step allocates one scratch buffer.
        if weight_decay:
            p *= 1.0 - lr * weight_decay
        m *= beta1
        m += (1.0 - beta1) * g
        v *= beta2
        tmp = np.multiply(g, g)
        tmp *= 1.0 - beta2
        v += tmp
        bc1 = 1.0 - beta1 ** step
        bc2 = 1.0 - beta2 ** step
        np.sqrt(v, out=tmp)
        tmp *= 1.0 / math.sqrt(bc2)
        tmp += eps
        np.divide(m, tmp, out=tmp)
        tmp *= lr / bc1
        p -= tmp

    def sgd_step(self, p, g, buf, lr, momentum, nesterov, weight_decay):
        d = g
        if weight_decay:
            d = g + weight_decay * p
        if momentum:
            buf *= momentum
            buf += d
            d = d + momentum * buf if nesterov else buf
        p -= lr * d


CPU_BACKEND = CPUBackend()


def storage_for(array: np.ndarray, device, dtype) -> tuple[Storage, tuple, int]:
    """A Storage over the memory of ``array`` and the array's (strides, offset) in
    elements within it. Fresh C-contiguous arrays are the common case; other arrays
    share the buffer of the array that owns their memory when its layout is expressible
    in whole elements, and are copied otherwise."""
    if array.flags.c_contiguous:
        return Storage(array, device, dtype, array.nbytes), None, 0
    isz = array.itemsize
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not root.flags.c_contiguous and _dense_in_some_order(root) and \
            root.dtype == array.dtype:
        root = root.ravel(order="K")  # a view: a Fortran-ordered (or permuted) dense root
    if root.flags.c_contiguous and all(s % isz == 0 for s in array.strides):
        start = array.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        if start % isz == 0:
            flat = root.reshape(-1)
            if flat.dtype != array.dtype:  # a view that reinterprets the bytes
                whole = flat.nbytes // isz * isz
                flat = flat.view(np.uint8)[:whole].view(array.dtype)
            strides = tuple(s // isz for s in array.strides)
            return Storage(flat, device, dtype, flat.nbytes), strides, start // isz
    if array.flags.f_contiguous or _dense_in_some_order(array):
        flat = array.ravel(order="K")
        if np.shares_memory(flat, array):
            start = array.__array_interface__["data"][0] - flat.__array_interface__["data"][0]
            strides = tuple(s // isz for s in array.strides)
            return Storage(flat, device, dtype, flat.nbytes), strides, start // isz
    copy = np.ascontiguousarray(array)
    return Storage(copy, device, dtype, copy.nbytes), None, 0


def _dense_in_some_order(a: np.ndarray) -> bool:
    pairs = sorted((abs(s), n) for n, s in zip(a.shape, a.strides) if n > 1)
    expect = a.itemsize
    for s, n in pairs:
        if s != expect:
            return False
        expect *= n
    return True
