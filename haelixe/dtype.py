"""Haelixe's dtypes and their mapping to numpy / ml_dtypes, with PyTorch's promotion rules."""

from __future__ import annotations

import numbers

import ml_dtypes
import numpy as np


class DType:
    """A Haelixe element type. ``np`` is the numpy dtype that stores it on the CPU."""

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "kind", "rank")

    def __init__(self, name: str, np_dtype, kind: str, rank: int):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.is_floating_point = kind == "float"
        self.kind = kind  # "bool" < "int" < "float" in promotion order
        self.rank = rank  # order within a kind: wider is higher

    def __repr__(self) -> str:
        return f"hx.{self.name}"

    def __reduce__(self):
        return (from_name, (self.name,))


bool_ = DType("bool", np.bool_, "bool", 0)
int32 = DType("int32", np.int32, "int", 1)
int64 = DType("int64", np.int64, "int", 2)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16, "float", 1)
float16 = DType("float16", np.float16, "float", 1)
float32 = DType("float32", np.float32, "float", 2)
float64 = DType("float64", np.float64, "float", 3)

# The short names the design notes use.
BOOL, I32, I64, BF16, F16, F32, F64 = bool_, int32, int64, bfloat16, float16, float32, float64

ALL = (bool_, int32, int64, bfloat16, float16, float32, float64)
_BY_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"bool_": bool_, "bf16": bfloat16, "f16": float16, "f32": float32,
                 "f64": float64, "i32": int32, "i64": int64, "half": float16,
                 "float": float32, "double": float64, "long": int64, "int": int32})

_KIND_ORDER = {"bool": 0, "int": 1, "float": 2}
default_float = float32


def from_name(name: str) -> DType:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise TypeError(f"unknown dtype name {name!r}; known: {sorted(_BY_NAME)}") from None


def from_numpy(np_dtype) -> DType:
    """The DType stored as ``np_dtype``; float64 and int64 stay as they are."""
    d = _BY_NP.get(np.dtype(np_dtype))
    if d is None:
        raise TypeError(
            f"numpy dtype {np.dtype(np_dtype)} has no Haelixe equivalent; "
            f"convert with .astype() to one of {[x.name for x in ALL]}"
        )
    return d


def as_dtype(x) -> DType:
    """Accept a DType, a name ('float32', 'bf16') or anything numpy calls a dtype."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        return from_name(x)
    return from_numpy(x)


def promote_types(a: DType, b: DType) -> DType:
    """PyTorch's rules: a higher kind wins (bool < int < float); within a kind the wider
    type wins; bfloat16 with float16 gives float32 (neither holds the other)."""
    if a is b:
        return a
    ka, kb = _KIND_ORDER[a.kind], _KIND_ORDER[b.kind]
    if ka != kb:
        return a if ka > kb else b
    if a.rank == b.rank:  # bfloat16 vs float16
        return float32
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
