"""Haelixe's dtypes and their mapping to numpy / ml_dtypes, with PyTorch's promotion rules."""

from __future__ import annotations

import numbers
import sys

import numpy as np

from .errors import OpTypeError


class DType:
    """A Haelixe element type. ``np`` is the numpy dtype that stores it on the CPU."""

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_signed", "kind", "rank",
                 "limited")

    def __init__(self, name: str, np_dtype, kind: str, rank: int, limited: bool = False,
                 itemsize: int | None = None):
        self.name = name
        if np_dtype is not None:  # (None: a _DeferredDType, whose numpy dtype comes later)
            self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize if itemsize is None else itemsize
        self.is_floating_point = kind == "float"
        # as torch.dtype.is_signed: the floats and the signed ints
        self.is_signed = self.is_floating_point or (np_dtype is not None and self.np.kind == "i")
        self.kind = kind  # "bool" < "int" < "float" in promotion order
        self.rank = rank  # order within a kind: wider is higher
        # PyTorch's uint16, uint32 and uint64 ("limited support"): they promote only with
        # themselves and the floats, and most integer arithmetic refuses them
        self.limited = limited

    def __repr__(self) -> str:
        return f"hx.{self.name}"

    def __reduce__(self):
        return (from_name, (self.name,))


class _DeferredDType(DType):
    """A dtype whose numpy dtype is ml_dtypes' (bfloat16): importing ml_dtypes registers
    its ufunc loops with numpy, most of a second, so it happens on the first use of
    ``.np`` (or of a numpy array of it, see _ByNumpy) rather than at ``import haelixe``."""

    __slots__ = ("_np",)

    def __init__(self, name: str, kind: str, rank: int, itemsize: int):
        self._np = None
        super().__init__(name, None, kind, rank, itemsize=itemsize)

    @property
    def np(self) -> np.dtype:
        if self._np is None:
            _resolve_deferred()
        return self._np


class _ByNumpy(dict):
    """DTypes by numpy dtype. A miss on a dtype of ml_dtypes (imported by then, or no
    array of it could exist) resolves the deferred dtypes first."""

    def __missing__(self, np_dtype):
        if "ml_dtypes" in sys.modules and any(d._np is None for d in _DEFERRED):
            _resolve_deferred()
            return self[np_dtype]
        raise KeyError(np_dtype)


bool_ = DType("bool", np.bool_, "bool", 0)
uint8 = DType("uint8", np.uint8, "int", 1)
int8 = DType("int8", np.int8, "int", 1)
int16 = DType("int16", np.int16, "int", 2)
int32 = DType("int32", np.int32, "int", 3)
int64 = DType("int64", np.int64, "int", 4)
uint16 = DType("uint16", np.uint16, "int", 2, limited=True)
uint32 = DType("uint32", np.uint32, "int", 3, limited=True)
uint64 = DType("uint64", np.uint64, "int", 4, limited=True)
bfloat16 = _DeferredDType("bfloat16", "float", 1, itemsize=2)
float16 = DType("float16", np.float16, "float", 1)
float32 = DType("float32", np.float32, "float", 2)
float64 = DType("float64", np.float64, "float", 3)

# The short names the design notes use.
BOOL, I32, I64, BF16, F16, F32, F64 = bool_, int32, int64, bfloat16, float16, float32, float64

ALL = (bool_, uint8, int8, int16, int32, int64, uint16, uint32, uint64, bfloat16, float16,
       float32, float64)
#: the integer dtypes narrower than 32 bits (the GPU stores them widened, see backends/wgpu)
NARROW_INTS = (uint8, int8, int16, uint16)
_DEFERRED = tuple(d for d in ALL if isinstance(d, _DeferredDType))
_BY_NP = _ByNumpy((d.np, d) for d in ALL if d not in _DEFERRED)
#: the numpy dtypes of the 16-bit floats (bfloat16's joins when it is resolved)
LOW_FLOATS_NP = {np.dtype(np.float16)}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"bool_": bool_, "bf16": bfloat16, "f16": float16, "f32": float32,
                 "f64": float64, "i32": int32, "i64": int64, "half": float16,
                 "float": float32, "double": float64, "long": int64, "int": int32,
                 "short": int16, "char": int8, "byte": uint8})

_KIND_ORDER = {"bool": 0, "int": 1, "float": 2}
#: the float dtype of Python floats and of integer inputs to float ops (PyTorch's default
#: dtype); read as ``dtype.default_float`` at each use, so set_default_dtype reaches it
default_float = float32


def set_default_dtype(d) -> None:
    """set_default_dtype(d)

    The float dtype Python floats become and float factories (zeros, rand, arange of
    floats...) make without a dtype: float32 (the start), float64, float16 or bfloat16,
    as PyTorch allows. Haelixe has no complex dtypes, so there is no complex default."""
    global default_float
    try:
        want = as_dtype(d)
    except TypeError:
        want = None
    if want is None or not want.is_floating_point:
        named = getattr(d, "name", d)
        extra = " (Haelixe has no complex dtypes)" if "complex" in str(named) else ""
        raise TypeError(f"set_default_dtype: only floating-point types are supported as "
                        f"the default type, got {named!r}{extra}; use float32, float64, "
                        f"float16 or bfloat16")
    default_float = want


def get_default_dtype() -> DType:
    """get_default_dtype() -> dtype

    The default float dtype (float32 unless set_default_dtype changed it)."""
    return default_float


def _resolve_deferred() -> None:
    """Import ml_dtypes and give the deferred dtypes their numpy dtypes."""
    import ml_dtypes

    for d in _DEFERRED:
        d._np = np.dtype(getattr(ml_dtypes, d.name))
        _BY_NP[d._np] = d
        LOW_FLOATS_NP.add(d._np)


def from_name(name: str) -> DType:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise TypeError(f"unknown dtype name {name!r}; known: {sorted(_BY_NAME)}") from None


def from_numpy(np_dtype) -> DType:
    """The DType stored as ``np_dtype``; float64 and int64 stay as they are."""
    try:
        return _BY_NP[np.dtype(np_dtype)]
    except KeyError:
        raise TypeError(
            f"numpy dtype {np.dtype(np_dtype)} has no Haelixe equivalent; "
            f"convert with .astype() to one of {[x.name for x in ALL]}"
        ) from None


def as_dtype(x) -> DType:
    """Accept a DType, a name ('float32', 'bf16') or anything numpy calls a dtype."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        return from_name(x)
    return from_numpy(x)


def promote_types(a: DType, b: DType) -> DType:
    """PyTorch's rules (torch.promote_types): a higher kind wins (bool < int < float);
    within a kind the wider type wins; bfloat16 with float16 gives float32 and uint8 with
    int8 int16 (neither holds the other); uint16, uint32 and uint64 promote only with
    themselves and the floats (PyTorch refuses the rest)."""
    if a is b:
        return a
    ka, kb = _KIND_ORDER[a.kind], _KIND_ORDER[b.kind]
    if ka == kb == 2 or (ka != kb and max(ka, kb) == 2):
        if ka != kb:
            return a if ka > kb else b
        return float32 if a.rank == b.rank else (a if a.rank > b.rank else b)
    if a.limited or b.limited:
        raise OpTypeError(f"promote_types: promotion for uint16, uint32, uint64 types is not "
                        f"supported (as in PyTorch), attempted to promote {a.name} and "
                        f"{b.name}; convert one of them with .to() first")
    if ka != kb:
        return a if ka > kb else b
    if a.rank == b.rank:  # uint8 vs int8
        return int16
    return a if a.rank > b.rank else b


def result_type_scalar(t: DType, scalar) -> DType:
    """Tensor-with-Python-scalar promotion: a scalar only changes the kind (int tensor +
    2.5 -> default float), never the width (bf16 tensor * 2.0 stays bf16)."""
    # numbers.* so numpy scalars (np.int64(2), np.float32(0.5)) count as Python's do
    if isinstance(scalar, (bool, np.bool_)):
        return t
    if isinstance(scalar, numbers.Integral):
        return t if t.kind != "bool" else int64
    if isinstance(scalar, numbers.Real):
        return t if t.is_floating_point else default_float
    raise TypeError(f"unsupported scalar {scalar!r} of type {type(scalar).__name__}")


def _scalar_dtype(scalar) -> DType:
    """The dtype PyTorch gives a Python number taking part in an op (a "wrapped number"):
    bool, int64, or the default float."""
    if isinstance(scalar, (bool, np.bool_)):
        return bool_
    if isinstance(scalar, numbers.Integral):
        return int64
    if isinstance(scalar, numbers.Real):
        return default_float
    raise TypeError(f"unsupported scalar {scalar!r} of type {type(scalar).__name__}")


def _combine(higher: DType | None, lower: DType | None) -> DType | None:
    # PyTorch's combine_categories: a lower-priority operand counts only when it is of a
    # higher kind (a float 0-d tensor or scalar makes an int tensor's result float)
    if higher is None:
        return lower
    if lower is None or higher.is_floating_point:
        return higher
    if higher.kind == "bool" or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def result_type(*operands) -> DType:
    """PyTorch's result type of an op over ``operands``: each a ``(dtype, is_0d)`` pair
    for a tensor, or a Python number. Tensors with dims set the dtype; 0-d tensors, then
    Python numbers, change it only when they are of a higher kind (f16 tensor * float64
    0-d tensor is f16; int32 tensor * 2.5 is float32)."""
    dims = zeros = scalars = None
    for op in operands:
        if isinstance(op, tuple):
            dt, is_0d = op
            if is_0d:
                zeros = dt if zeros is None else promote_types(zeros, dt)
            else:
                dims = dt if dims is None else promote_types(dims, dt)
        else:
            dt = _scalar_dtype(op)
            scalars = dt if scalars is None else promote_types(scalars, dt)
    return _combine(dims, _combine(zeros, scalars))


def can_cast(src: DType, dst: DType) -> bool:
    """Whether an in-place op may write a ``src`` result into a ``dst`` tensor (PyTorch's
    rule: never to a lower kind, float into int or anything into bool)."""
    return _KIND_ORDER[src.kind] <= _KIND_ORDER[dst.kind]


def number_as(np_dtype, value, op: str, wrap: bool = False):
    """The Python number ``value`` as a numpy scalar of ``np_dtype`` for ``op``'s kernel.
    An integer outside an integer dtype's range is refused with PyTorch's message, or,
    with ``wrap``, wraps around as PyTorch's arithmetic with a Python int does (int32 +
    2**40 adds 0); beyond 64 bits (or below int64's least) it is refused either way. A
    negative int down to minus an unsigned dtype's greatest value wraps as in PyTorch's
    checked conversion (uint8's fill with -1 writes 255)."""
    try:
        return np_dtype.type(value)
    except OverflowError:
        pass
    if np_dtype.kind in "iu" and isinstance(value, numbers.Integral):
        bits = 8 * np_dtype.itemsize
        if (wrap and -(1 << 63) <= value < (1 << 64)) or (
                np_dtype.kind == "u" and -(1 << bits) < value < 0):
            return np_dtype.type(wrapped_int(int(value), np_dtype))
    raise RuntimeError(f"{op}: value {value} cannot be converted to {np_dtype.name} "
                       f"without overflow (as in PyTorch); use a wider dtype or a value "
                       f"in range")


def stored_number(np_dtype, value, op: str):
    """``number_as`` for a Python number written into a tensor (``fill_``, ``full``,
    ``x[key] = v``): there PyTorch also refuses a finite float beyond a floating dtype's
    range (1e40 into float32, 70000.0 into float16), which arithmetic rounds to inf."""
    with np.errstate(over="ignore"):
        out = number_as(np_dtype, value, op)
    if isinstance(value, float) and np_dtype.kind not in "iub" and abs(value) != float("inf") \
            and value == value and abs(float(out)) == float("inf"):
        raise RuntimeError(f"{op}: value {value} cannot be converted to {np_dtype.name} "
                           f"without overflow (as in PyTorch); use a wider dtype or a "
                           f"value in range")
    return out


def wrapped_int(value: int, np_dtype) -> int:
    """``value`` modulo 2**bits of the integer ``np_dtype``, in its range."""
    bits = 8 * np_dtype.itemsize
    v = value & ((1 << bits) - 1)
    return v - (1 << bits) if np_dtype.kind == "i" and v >= 1 << (bits - 1) else v
