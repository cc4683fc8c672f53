"""CPU kernels on numpy arrays. Every kernel reads its inputs through their strides
(numpy does that natively), so transposed, sliced, broadcast and flipped views are read
in place; matmul hands transposed operands to BLAS with a transpose flag, not a copy."""

from __future__ import annotations

import functools
import math
import platform
import warnings

import numpy as np

from ..device import CPU
from ..dtype import LOW_FLOATS_NP, from_numpy
from ..storage import Storage, StorageAlias
from . import (
    airy_math,
    bessel_math,
    bessel_second_kind,
    cpu_jit,
    error_math,
    gamma_incomplete,
    orthogonal_polynomials,
    special_math,
    threads,
    tuning,
)
from .base import K_ADD, Backend, Kernel
from .cpu_graph import CpuGraph, recording_here

if tuning.on("malloc"):
    tuning.keep_freed_memory()

# Float edge cases (log 0, overflow, 0/0) give inf and NaN silently, as in PyTorch; the
# filter names only this package's modules, so a user's own numpy code still warns.
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"haelixe(\.|$)")

_exact_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """erf without scipy: exact (math.erf) in float64, where gradient checks need every
    digit; elsewhere the rational approximation of cpu_kernels.erf32 (a few float32
    ulp), evaluated in place to keep temporaries few."""
    x = np.asarray(x)
    if x.ndim == 0:
        return erf(x.reshape(1)).reshape(())
    if x.dtype == np.float64:
        return _exact_erf(x).astype(np.float64)
    f32 = np.float32
    x = np.clip(x, f32(-4.0), f32(4.0), dtype=np.float32)
    x2 = x * x
    p = x2 * f32(_ERF_P[0])
    for c in _ERF_P[1:]:
        p += f32(c)
        if c is not _ERF_P[-1]:
            p *= x2
    q = x2 * f32(_ERF_Q[0])
    for c in _ERF_Q[1:]:
        q += f32(c)
        if c is not _ERF_Q[-1]:
            q *= x2
    p *= x
    p /= q
    return p


# the numerator and denominator of erf32, highest power first
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
          -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
          -1.60960333262415e-02)
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
          -7.37332916720468e-03, -1.42647390514189e-02)


def _sigmoid(x):
    # Two branches so neither exp overflows (one denominator for both).
    e = np.exp(-np.abs(x))
    d = 1.0 + e
    return np.where(x >= 0, 1.0 / d, e / d).astype(x.dtype, copy=False)


class NumpyMath:
    """The math namespace a Kernel's function sees on the CPU: numpy on arrays."""

    exp, log, log1p, expm1, sqrt = np.exp, np.log, np.log1p, np.expm1, np.sqrt
    sin, cos, tanh, abs, sign = np.sin, np.cos, np.tanh, np.abs, np.sign
    atan, tan, sinh, cosh, exp2 = np.arctan, np.tan, np.sinh, np.cosh, np.exp2
    asin, acos, asinh, acosh, atanh = np.arcsin, np.arccos, np.arcsinh, np.arccosh, np.arctanh
    fmod, copysign, atan2, nextafter = np.fmod, np.copysign, np.arctan2, np.nextafter
    left_shift, right_shift = np.left_shift, np.right_shift
    floor, ceil, trunc = np.floor, np.ceil, np.trunc
    maximum, minimum, pow = np.maximum, np.minimum, np.power
    floor_divide, remainder, isnan = np.floor_divide, np.remainder, np.isnan
    # (the plain forms: the gcd, lcm and ldexp entries name numpy functions of their own,
    # with PyTorch's wrap-around and exactness, in ops/elementwise.py)
    gcd, lcm = np.gcd, np.lcm
    ldexp = staticmethod(lambda a, b: a * np.exp2(b))
    # (plain functions, not numpy's dispatchers, which would bind as methods)
    where = staticmethod(lambda c, a, b: np.where(c, a, b))
    round = staticmethod(lambda x: np.round(x))
    sigmoid = staticmethod(_sigmoid)
    erf = staticmethod(erf)
    lgamma, digamma = staticmethod(special_math.lgamma), staticmethod(special_math.digamma)
    polygamma, erfinv = staticmethod(special_math.polygamma), staticmethod(special_math.erfinv)
    zeta = staticmethod(special_math.zeta)
    gammainc = staticmethod(gamma_incomplete.gammainc)
    gammaincc = staticmethod(gamma_incomplete.gammaincc)
    erfc, erfcx = staticmethod(error_math.erfc), staticmethod(error_math.erfcx)
    ndtr, log_ndtr = staticmethod(error_math.ndtr), staticmethod(error_math.log_ndtr)
    ndtri = staticmethod(error_math.ndtri)
    i0, i0e = staticmethod(bessel_math.i0), staticmethod(bessel_math.i0e)
    i1, i1e = staticmethod(bessel_math.i1), staticmethod(bessel_math.i1e)
    bessel_j0, bessel_j1 = staticmethod(bessel_math.bessel_j0), staticmethod(bessel_math.bessel_j1)
    spherical_bessel_j0 = staticmethod(bessel_math.spherical_bessel_j0)
    airy_ai = staticmethod(airy_math.airy_ai)

    @staticmethod
    def rsqrt(x):
        return 1.0 / np.sqrt(x)


# (bessel_y0 ... scaled_modified_bessel_k1; chebyshev_polynomial_t ...
# legendre_polynomial_p, each a function of (x, n))
for _module in (bessel_second_kind, orthogonal_polynomials):
    for _name in _module.NAMES:
        setattr(NumpyMath, _name, staticmethod(getattr(_module, _name)))


_MATH = NumpyMath
# (a hash lookup: no dtype comparisons on every op). The set is dtype.py's, which gains
# bfloat16 when that is resolved, as it is before a bfloat16 array becomes a tensor
_LOW_SET = LOW_FLOATS_NP


def _low(x) -> bool:
    return isinstance(x, np.ndarray) and x.dtype in _LOW_SET


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
        # the first array (x, q) sets the dtype: a norm's float32 input with a 16-bit
        # weight runs as float32, the weight read (and its gradient given) as it is
        first = args[0]
        if first.__class__ is not np.ndarray or first.dtype not in _LOW_SET:
            return kernel(self, *args, **kwargs)
        low = first.dtype
        out = kernel(self, *(up(a) for a in args), **kwargs)
        return down(out, low)

    return wrapper


def _rows(a, n: int):
    """``a`` as (rows, n) over its leading dims: numpy's reshape(-1, n) cannot tell the
    rows of an empty array whose last dim is 0, so that case counts them."""
    return a.reshape(-1, n) if n else a.reshape(math.prod(a.shape[:-1]), 0)


def _matmul(a, b):
    """np.matmul on the threads its size calls for (threads.matmul), with float16 /
    bfloat16 operands multiplied in float32 (BLAS, and PyTorch's accumulation) and the
    result cast back: ml_dtypes' bfloat16 matmul returns float32, and float16 has no
    BLAS path."""
    if a.dtype in _LOW_SET:
        return _matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    na, nb = a.ndim, b.ndim
    if na > 1 and nb > 1 and a.shape[-1] == 1 == b.shape[-2]:
        # K = 1 (a Linear from one feature): an outer product, the same products with
        # no sum; numpy's matmul takes a slow generic loop on such strided operands
        return np.multiply(a, b)
    if nb == 2 and na > 2:
        # a batch against one matrix: one product over the folded rows, where numpy
        # makes a product per batch item (16 x 32 x 64 @ 64 x 32: 13 against 21 us)
        lead = a.shape[:-1]
        return threads.matmul(a.reshape(math.prod(lead), a.shape[-1]), b).reshape(
            lead + (b.shape[-1],))
    return threads.matmul(a, b)


#: elements from which a compiled kernel replaces numpy's passes. Once compiled it wins
#: at every size (a 4-operation gradient: 0.6 against 3.2 us at 4096 elements, 0.9
#: against 4.1 at 8192; a sigmoid on a recurrent cell's (32, 64) gates: 5 against
#: 13 us); the floor only spares tiny tensors (tests, toy examples) the first
#: compilation, 0.1-0.4 s per kernel and dtype before the disk cache has it
JIT_MIN_SIZE = 1 << 10


_DIRECT: dict = {}  # kernel -> its numpy ufunc, once compiled (Backend.direct)


def _compile(kernel: Kernel):
    """The CPU callable of ``kernel``: its ufunc where it names one or is one operation;
    a compiled one-pass ufunc (cpu_jit, where numba is installed) for float inputs of
    JIT_MIN_SIZE elements or more where it compiles; else its function over the numpy
    namespace, run in float32 for 16-bit inputs (numpy has no 16-bit arithmetic of its
    own worth the name, and PyTorch also rounds once at the end: map does that). Also
    records the ufunc that can write in place (``out=``), if any."""
    from .cpu_jit import FLOATS, Unsupported, single_ufunc, trace, worth_compiling

    compiles = cpu_jit.numba_installed()
    ufunc = kernel.cpu if kernel.cpu is not None else single_ufunc(kernel)
    if ufunc is not None:
        kernel.compiled["cpu"] = ufunc
        kernel.compiled["cpu_inplace"] = ufunc if isinstance(ufunc, np.ufunc) else None
        if isinstance(ufunc, np.ufunc) and ufunc.nout == 1 and \
                {"f" * ufunc.nin + "->f", "d" * ufunc.nin + "->d"} <= set(ufunc.types):
            _DIRECT[kernel] = ufunc  # (see Backend.direct)
        return ufunc
    fn = kernel.fn

    def numpy_path(*xs):
        x = xs[0]
        if x.__class__ is np.ndarray and x.size < _PIECEWISE_FROM:
            return fn(_MATH, *xs)  # (most calls, a small first array: no call to ask)
        return _by_pieces(fn, xs)

    def numpy_widened(*xs):
        # 16-bit operands beside wider ones (a float32 op reading them as they are): in
        # float32, or numpy would run a ufunc of the formula (log, exp) in their width
        return _by_pieces(fn, [x.astype(np.float32) if getattr(x, "dtype", None) in _LOW_SET
                               else x for x in xs])

    f = numpy_widened
    try:
        src, ops = trace(kernel)
        jit = compiles and worth_compiling(src, ops)
    except Unsupported:
        jit = False
    if jit:
        ufuncs = {}

        def f(*xs):
            dt = xs[0].dtype if hasattr(xs[0], "dtype") else None
            big = False
            for x in xs:
                if getattr(x, "dtype", None) != dt:
                    return numpy_widened(*xs)
                if x.__class__ is np.ndarray and x.size >= JIT_MIN_SIZE:
                    big = True
            if big and dt in FLOATS:
                # (numpy's expression until the ufunc has compiled: cpu_jit.soon)
                u = ufuncs.get(dt) or cpu_jit.soon(
                    ufuncs, dt, lambda: _jit_ufunc(kernel, dt) or numpy_path)
                if u is not None:
                    return u(*xs)
            return numpy_path(*xs)

    kernel.compiled["cpu"] = f
    kernel.compiled["cpu_inplace"] = None
    return f


#: elements a kernel's numpy form evaluates at a time where its arrays are one shape,
#: contiguous and a few times larger: its temporaries stay in cache, in memory malloc
#: has mapped already, where the whole at once faults in fresh pages for every
#: temporary (docs/cpu_tuning.md gives AdamW's figures)
PIECE = 1 << 16
_PIECEWISE_FROM = 4 * PIECE  # (the fewest elements that go in pieces)


def _pieces(xs):
    """(the flat form of each of ``xs``, their shape) where the arrays among them
    are of one shape, C-contiguous, with at least 4 * PIECE elements (numbers and 0-d
    arrays as they are), or None. A small first array answers at once: this runs for
    every call of a kernel's numpy form."""
    shape = None
    for x in xs:
        if x.__class__ is np.ndarray and x.ndim:
            if shape is None:
                if x.size < _PIECEWISE_FROM:
                    return None
                shape = x.shape
            elif x.shape != shape:
                return None
            if not x.flags.c_contiguous:
                return None
    if shape is None:
        return None
    return [x.reshape(-1) if x.__class__ is np.ndarray and x.ndim else x for x in xs], shape


def _piece(flat, s: int) -> list:
    """Elements s to s + PIECE of each flat array of ``flat`` (numbers as they are)."""
    return [x[s:s + PIECE] if x.__class__ is np.ndarray and x.ndim else x for x in flat]


def _by_pieces(fn, xs):
    """``fn(_MATH, *xs)``, an elementwise formula, evaluated PIECE elements at a time
    where ``_pieces`` allows, else at once."""
    split = _pieces(xs)
    if split is None:
        return fn(_MATH, *xs)
    flat, shape = split
    n = math.prod(shape)
    out = None
    for s in range(0, n, PIECE):
        part = fn(_MATH, *_piece(flat, s))
        if out is None:
            if part.__class__ is not np.ndarray or part.shape != (PIECE,):
                return fn(_MATH, *xs)  # (a formula that is not elementwise in form)
            out = np.empty(n, part.dtype)
        out[s:s + PIECE] = part
    return out.reshape(shape)


def _jit_ufunc(kernel, dtype):
    from .cpu_jit import compile_ufunc

    try:
        return compile_ufunc(kernel, dtype)
    except Exception as e:  # a compiler failure must not stop training: numpy runs it
        warnings.warn(f"haelixe: kernel {kernel.name} did not compile for {dtype} ({e}); "
                      f"running it with numpy", stacklevel=3)
        return None


def _in_f32(f, xs):
    """``f`` on 16-bit inputs computed in float32 (numpy has no 16-bit arithmetic worth
    the name, and PyTorch also rounds once at the end)."""
    return f(*(x.astype(np.float32) if getattr(x, "dtype", None) in _LOW_SET else x
               for x in xs))


_DOT_SUMS = tuning.on("dot_sums")  # (tuning.py)
_DOT_SUM_MAX = 1 << 16
_DOT_SUM = {np.dtype(t): np.ones(_DOT_SUM_MAX, t) for t in (np.float32, np.float64)}


def _sum_by_products(x, axes, keepdim):
    """A sum over ``axes`` as products with ones (BLAS), where x, read in its memory
    order, is dense and its kept dims are one block there: (A, K, B) in memory, the
    reduced dims A before and B after, is (A*K, B) @ ones(B), then ones(A) @ (A, K). A
    batch norm's moments over (N, H, W): 3-7x faster than numpy's reduction on 8x8
    images, whose rows (16 channels channels-last, 64 pixels otherwise) are short.
    None where the layout does not allow it (numpy's reduction runs)."""
    dims = [i for i in range(x.ndim) if x.shape[i] != 1]
    order = sorted(dims, key=lambda i: -x.strides[i])
    if any(x.strides[i] <= 0 for i in dims):
        return None
    kept = [i for i in order if i not in axes]
    if kept != sorted(kept):  # (the result's dims in memory order, as they are in x)
        return None
    flags = [i in axes for i in order]
    lead = flags.index(False) if kept else len(flags)
    trail = flags[::-1].index(False) if kept else 0
    if not kept or any(flags[lead:len(flags) - trail]):
        return None
    xt = x.transpose(order + [i for i in range(x.ndim) if x.shape[i] == 1])
    if not xt.flags.c_contiguous:
        return None
    a = math.prod(x.shape[i] for i in order[:lead])
    b = math.prod(x.shape[i] for i in order[len(order) - trail:])
    if a * b > _DOT_SUM_MAX:  # (longer sums: numpy's pairwise summation is more exact)
        return None
    k = x.size // (a * b)
    m = xt.reshape(a * k, b).dot(_DOT_SUM[x.dtype][:b]) if b > 1 else xt.reshape(a * k)
    m = _DOT_SUM[x.dtype][:a].dot(m.reshape(a, k)) if a > 1 else m
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if keepdim else \
        tuple(n for i, n in enumerate(x.shape) if i not in axes)
    return m.reshape(shape)


class CPUBackend(Backend):
    name = "cpu"
    device = CPU
    raw_type = np.ndarray
    matmul = staticmethod(_matmul)
    direct = _DIRECT

    @property
    def info(self) -> dict:
        return {"type": "cpu", "processor": platform.processor() or platform.machine(),
                "numpy": np.__version__}

    # -- elementwise ---------------------------------------------------------------------
    def map(self, kernel, inputs, dtype):
        f = kernel.compiled.get("cpu") or _compile(kernel)
        out = f(*inputs) if dtype not in _LOW_SET or kernel.cpu is not None else \
            _in_f32(f, inputs)
        if out.__class__ is not np.ndarray:
            out = np.asarray(out)
        odt = out.dtype
        return out if odt is dtype or odt == dtype else out.astype(dtype)

    def add_into(self, dst, src):
        if dst.dtype in _LOW_SET:  # added in float32, rounded once (as map_into does)
            self.map_into(K_ADD, dst, (src,))
        else:
            np.add(dst, src, dst)

    def map_into(self, kernel, dst, inputs):
        compiled = kernel.compiled
        inplace = compiled.get("cpu_inplace")
        if inplace is None and "cpu" not in compiled:
            _compile(kernel)
            inplace = compiled["cpu_inplace"]
        if inplace is not None and dst.dtype not in _LOW_SET:  # writes in place
            if len(inputs) == 1 and getattr(inputs[0], "dtype", None) is dst.dtype:
                inplace(dst, inputs[0], dst)  # (no casting to allow: no keywords to parse)
            else:
                inplace(dst, *inputs, out=dst, casting="unsafe")
            return
        split = _pieces([dst, *inputs])
        if split is None:
            np.copyto(dst, self.map(kernel, [dst, *inputs], dst.dtype), casting="unsafe")
            return
        # a large update (an optimizer's over its flat buffers) piece by piece: no
        # result of dst's size to make and copy
        flat, _ = split
        for s in range(0, dst.size, PIECE):
            part = _piece(flat, s)
            np.copyto(part[0], self.map(kernel, part, dst.dtype), casting="unsafe")

    # -- creation and transfer -----------------------------------------------------------
    def empty(self, shape, dtype, tag=None):
        return np.empty(shape, dtype)

    def full(self, shape, value, dtype, tag=None):
        if not shape and dtype.kind == "f":  # every implicit backward() starts from one
            out = np.empty((), dtype)  # (np.full's unsafe copy costs 0.4 us more)
            out[()] = value
            return out
        if value == 0 and math.copysign(1.0, value) > 0 and dtype.kind != "V":
            return np.zeros(shape, dtype)  # (calloc: 3x faster than np.full's fill)
        return np.full(shape, value, dtype)

    def from_numpy(self, array, tag=None):
        return array

    def to_numpy(self, x):
        return x

    def adopt(self, raw):
        raw = np.asarray(raw)
        return storage_for(raw, CPU, from_numpy(raw.dtype))

    def make_view(self, storage, shape, strides, offset):
        isz = storage.dtype.itemsize
        if 0 in shape:  # no element to reach: numpy would still check the offset
            return np.ndarray(shape, storage.dtype.np, buffer=storage.data.reshape(-1)[:0])
        byte_strides = []
        for s in strides:  # (a loop: a comprehension is one more call, on every view)
            byte_strides.append(s * isz)
        # (positional: ndarray's keyword parsing costs more than the view itself)
        return np.ndarray(shape, storage.dtype.np, storage.data, offset * isz, byte_strides)

    def reinterpret(self, storage, dtype):
        flat = storage.data.reshape(-1).view(np.uint8)
        whole = flat.size - flat.size % dtype.itemsize  # (a tail too short for one element)
        return StorageAlias(storage, flat[:whole].view(dtype.np), dtype, whole)

    def index_view(self, x, key, storage, shape, strides, offset):
        # numpy's own basic indexing of the raw view: a fifth of make_view's time. Not
        # where it gives a scalar (ints for every dim: a 0-d view is wanted) or nothing
        # (a view of no elements then has make_view's strides, not numpy's)
        out = x[key]
        if out.__class__ is np.ndarray and out.size:
            return out
        return self.make_view(storage, shape, strides, offset)

    def permute_view(self, x, dims, storage, shape, strides, offset):
        # numpy's own transpose of the raw view (a view for every layout): a fifth of
        # make_view's time
        return x.transpose(dims)

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
        dst[...] = src  # (np.copyto(casting="unsafe") runs a Python dispatcher first)

    def cast(self, x, dtype):
        return x.astype(dtype)

    def join(self, arrays, axis, stacked):
        # numpy's one call: a quarter of the per-part copies' time for a few small parts.
        # It lays the result out as its inputs are (transposed ones: transposed), and a
        # join is C-contiguous, as the base's is
        out = np.stack(arrays, axis) if stacked else np.concatenate(arrays, axis)
        return out if out.flags.c_contiguous else np.ascontiguousarray(out)

    # -- reductions ----------------------------------------------------------------------
    def sum(self, x, axes, keepdim):
        if (_DOT_SUMS and len(axes) == x.ndim and x.dtype in _DOT_SUM
                and x.size <= _DOT_SUM_MAX and x.flags.c_contiguous):
            # A full sum of a short contiguous buffer as a dot product with ones: BLAS
            # does it in half the time of numpy's reduction machinery, and its blocked
            # accumulation is as accurate at these sizes.
            # (the method: np.dot runs a Python dispatcher first)
            total = x.reshape(-1).dot(_DOT_SUM[x.dtype][:x.size])
            return np.full((1,) * x.ndim, total, x.dtype) if keepdim else total
        n = x.shape[-1] if x.ndim else 0
        if (_DOT_SUMS and axes == (x.ndim - 1,) and x.dtype in _DOT_SUM
                and 0 < n <= _DOT_SUM_MAX and x.size and x.flags.c_contiguous):
            # the rows' sums as one matrix-vector product with ones, the same way: 1.1
            # against numpy's 3.4 us on 4x32x64 (its reduction machinery per short row)
            out = x.reshape(-1, n).dot(_DOT_SUM[x.dtype][:n])
            return out.reshape(x.shape[:-1] + ((1,) if keepdim else ()))
        if _DOT_SUMS and x.dtype in _DOT_SUM and x.size and len(axes) < x.ndim:
            out = _sum_by_products(x, axes, keepdim)
            if out is not None:
                return out
        if x.dtype in _LOW_SET:
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

    # -- ordering, scans, scatter ----------------------------------------------------------
    def sort(self, x, axis, descending, stable):
        # ~x reverses the order of every integer (and bool) exactly; -x overflows at the
        # least value (-128 of int8 stays least) and is 0 - x for unsigned ones
        key = (-x if x.dtype.kind == "f" or x.dtype in _LOW_SET else ~x) if descending else x
        idx = np.argsort(key, axis=axis, kind="stable" if stable or descending else None)
        return np.take_along_axis(x, idx, axis), idx

    def cumsum(self, x, axis):
        if x.dtype in _LOW_SET:
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
        if index.shape[axis] == 1 and src.shape == index.shape:
            # one index per slice along the axis (the gradient of a gather that picked
            # one value: a max-pool's, a loss's target): no two values meet, so each is
            # put, not added; np.add.at's unbuffered loop costs 10x more
            part = out[tuple(slice(None) if d == axis else slice(0, n)
                             for d, n in enumerate(index.shape))]
            np.put_along_axis(part, index, src, axis)
            return out
        key = list(np.indices(index.shape, sparse=True))
        key[axis] = index
        np.add.at(out, tuple(key), src)
        return out

    def take(self, x, key):
        if len(key) == 1 and key[0].__class__ is np.ndarray and key[0].dtype.kind in "iu":
            # rows at one integer array (an embedding's lookup): always a copy, and
            # np.take makes it faster than x[key]
            return np.take(x, key[0], axis=0)
        out = x[key]  # (advanced indexing copies already: a second copy only of a view)
        return np.array(out) if np.may_share_memory(out, x) else np.asarray(out)

    def index_put(self, x, key, values):
        x[key] = values

    def index_add(self, shape, key, values):
        out = np.zeros(shape, values.dtype)
        np.add.at(out, key, values)
        return out

    # -- fused neural-network kernels ----------------------------------------------------
    @computes_in_f32
    def linear(self, x, w, b, activation=None):
        if x.dtype != w.dtype:  # float32 x, 16-bit w (autocast): x rounded to w's dtype
            return self.linear(x.astype(w.dtype), w, b, activation)
        # Fold leading dims into one GEMM (numpy would loop over a 3-D batch); w.T is
        # a transposed view that BLAS reads with a transpose flag.
        x2 = _rows(x, x.shape[-1])
        y = _matmul(x2, w.T)
        if b is not None:
            y += b
        y = y.reshape(x.shape[:-1] + (w.shape[0],))
        if activation is None:
            return y, None
        return self.map(activation.forward, [y], y.dtype), y

    def linear_backward(self, x, w, pre, gy, activation, need_bias, need_input=True):
        if x.dtype != w.dtype:  # as linear read it: rounded; dx back in x's dtype
            dx, dw, db = self._linear_backward(x.astype(w.dtype), w, pre, gy, activation,
                                               need_bias, need_input)
            return (None if dx is None else dx.astype(x.dtype)), dw, db
        return self._linear_backward(x, w, pre, gy, activation, need_bias, need_input)

    @computes_in_f32
    def _linear_backward(self, x, w, pre, gy, activation, need_bias, need_input=True):
        if activation is not None:
            gy = self.map(activation.backward, [gy, pre], gy.dtype)
        n_in, n_out = w.shape[1], w.shape[0]
        x2 = _rows(x, n_in)
        g2 = _rows(gy, n_out)
        dx = _matmul(g2, w).reshape(x.shape) if need_input else None
        dw = _matmul(g2.T, x2)
        db = np.add.reduce(g2, axis=0) if need_bias else None
        return dx, dw, db

    # The other fused ops (the softmax family, the norms, RoPE, attention, AdamW) are
    # base's composed defaults here, computed in float32 for 16-bit inputs and rounded
    # once, as PyTorch does; cpu_fused.CompiledCPUBackend runs them as compiled
    # one-pass kernels where numba is installed.
    softmax = computes_in_f32(Backend.softmax)
    log_softmax = computes_in_f32(Backend.log_softmax)
    softmax_backward = computes_in_f32(Backend.softmax_backward)
    rmsnorm = computes_in_f32(Backend.rmsnorm)
    rmsnorm_backward = computes_in_f32(Backend.rmsnorm_backward)
    layernorm = computes_in_f32(Backend.layernorm)
    layernorm_backward = computes_in_f32(Backend.layernorm_backward)
    moments = computes_in_f32(Backend.moments)
    normalize = computes_in_f32(Backend.normalize)
    normalize_backward = computes_in_f32(Backend.normalize_backward)
    attention = computes_in_f32(Backend.attention)
    attention_backward = computes_in_f32(Backend.attention_backward)

    @computes_in_f32
    def rope(self, x, cos, sin, inverse=False):
        _check_rope_dtype(x)
        return super().rope(x, cos, sin, inverse)

    # -- capture (hx.capture) -------------------------------------------------------------
    def new_graph(self):
        """A recorder and replayer of one captured step's backend calls (hx.capture; see
        cpu_graph.py)."""
        return CpuGraph(self)

    def _direct_of(self, kernel):
        """``direct.get(kernel)`` as it will be once the kernel is compiled (a captured
        step's two recordings must take the same path through the op)."""
        if "cpu" not in kernel.compiled:
            _compile(kernel)
        return _DIRECT.get(kernel)

    def checks_on_device(self) -> bool:
        # while a step is captured on this thread, index checks are backend calls (which
        # its replays make again), not reads of the indices by the op's Python
        return recording_here()

    # -- optimizers ----------------------------------------------------------------------
    def sgd_step(self, p, g, buf, lr, momentum, nesterov, weight_decay):
        d = g
        if weight_decay:
            d = g + weight_decay * p
        if momentum:
            buf *= momentum
            buf += d
            d = d + momentum * buf if nesterov else buf
        p -= lr * d


def _check_rope_dtype(x):
    if x.dtype == np.bool_:
        raise TypeError("rope: not defined for bool tensors (as in PyTorch, whose "
                        "rotation subtracts); convert with .float() first")


def _the_backend() -> CPUBackend:
    """The compiled kernels' backend where numba can be imported, else numpy's."""
    if not cpu_jit.numba_installed():
        return CPUBackend()
    from .cpu_fused import CompiledCPUBackend  # (it builds on this module's names)

    return CompiledCPUBackend()


CPU_BACKEND = _the_backend()


def storage_for(array: np.ndarray, device, dtype) -> tuple[Storage, tuple, int]:
    """A Storage over the memory of ``array`` and the array's (strides, offset) in
    elements within it. Fresh C-contiguous arrays are the common case; other arrays
    share the buffer of the array that owns their memory when its layout is expressible
    in whole elements, and are copied otherwise."""
    if array.flags.c_contiguous:
        return Storage(array, device, dtype, array.nbytes), None, 0
    isz = array.itemsize
    base = array.base
    if base.__class__ is np.ndarray and base.size == 1 and base.dtype == array.dtype:
        # one element seen over a shape (a broadcast scalar): it starts at that element,
        # every stride 0, found without reading data addresses
        flat = base.reshape(-1)
        return Storage(flat, device, dtype, flat.nbytes), \
            tuple(s // isz for s in array.strides), 0
    if array.base is None and all(s > 0 for s in array.strides) and \
            _dense_in_some_order(array):
        # a fresh result laid out in another order (a ufunc's on a channels-last image):
        # its own buffer, which starts at its first element
        flat = array.ravel(order="K")
        return Storage(flat, device, dtype, flat.nbytes), \
            tuple(s // isz for s in array.strides), 0
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
