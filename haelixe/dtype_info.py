"""finfo and iinfo: the numeric limits of a dtype, as torch.finfo and torch.iinfo give
them (Python numbers; ``dtype`` the dtype's name, a string, as PyTorch's)."""

from __future__ import annotations

import math

from . import dtype as _dtypes

#: the float formats: name -> (bits, mantissa bits, exponent bits)
_FLOATS = {"float16": (16, 10, 5), "bfloat16": (16, 7, 8), "float32": (32, 23, 8),
           "float64": (64, 52, 11)}


def _dtype_argument(cls, value):
    # (PyTorch takes a dtype object only: not its name, not a numpy dtype)
    if not isinstance(value, _dtypes.DType):
        raise TypeError(f"{cls}(): argument 'type' (position 1) must be a dtype such as "
                        f"hx.float32, not {type(value).__name__}")
    return value


def _shown(value) -> str:
    # (PyTorch prints each limit as C++'s default stream does: %g, six digits)
    return format(float(value), "g")


class finfo:  # noqa: N801 (PyTorch's name)
    """finfo(type=None): the limits of a float dtype (the default dtype when none is
    given): bits, eps (the gap from 1 to the next value), max, min (= -max), tiny and
    smallest_normal (the least positive normal value), resolution (10 ** -digits) and
    dtype (its name). An integer or bool dtype raises TypeError, as PyTorch's."""

    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution",
                 "dtype")

    def __init__(self, type=None):  # noqa: A002 (PyTorch's name)
        dt = _dtypes.get_default_dtype() if type is None else _dtype_argument("finfo", type)
        if dt.name not in _FLOATS:
            raise TypeError(f"finfo() requires a floating point input type, got "
                            f"{dt!r}; use hx.iinfo for integer and bool dtypes")
        bits, mantissa, exponent = _FLOATS[dt.name]
        bias = 2 ** (exponent - 1) - 1
        self.bits, self.dtype = bits, dt.name
        self.eps = 2.0 ** -mantissa
        self.max = (2.0 - self.eps) * 2.0 ** bias
        self.min = -self.max
        self.tiny = self.smallest_normal = 2.0 ** (1 - bias)
        self.resolution = float(f"1e-{math.floor(-math.log10(self.eps))}")

    def __eq__(self, other) -> bool:
        return isinstance(other, finfo) and other.dtype == self.dtype

    __hash__ = None  # (unhashable, as PyTorch's)

    def __repr__(self) -> str:
        return (f"finfo(resolution={_shown(self.resolution)}, min={_shown(self.min)}, "
                f"max={_shown(self.max)}, eps={_shown(self.eps)}, "
                f"smallest_normal={_shown(self.smallest_normal)}, tiny={_shown(self.tiny)}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801
    """iinfo(type): the limits of an integer dtype: bits, min, max (Python ints) and
    dtype (its name). bool and the float dtypes raise TypeError, as PyTorch's."""

    __slots__ = ("bits", "min", "max", "dtype")

    def __init__(self, type):  # noqa: A002
        dt = _dtype_argument("iinfo", type)
        if dt is _dtypes.bool_:
            raise TypeError("iinfo: hx.bool is not supported (as in PyTorch); it holds "
                            "False and True only")
        if dt.kind != "int":
            raise TypeError(f"iinfo() requires an integer input type, got {dt!r}; use "
                            f"hx.finfo for float dtypes")
        self.bits, self.dtype = 8 * dt.itemsize, dt.name
        if dt.is_signed:
            self.min, self.max = -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        else:
            self.min, self.max = 0, (1 << self.bits) - 1

    def __eq__(self, other) -> bool:
        return isinstance(other, iinfo) and other.dtype == self.dtype

    __hash__ = None

    def __repr__(self) -> str:
        return f"iinfo(min={_shown(self.min)}, max={_shown(self.max)}, dtype={self.dtype})"
