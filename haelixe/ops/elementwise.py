"""Elementwise ops, one table entry each (see registry.py for what an entry makes).

Each entry gives the forward as a function of a math namespace ``m`` and its inputs, the
gradient of each input the same way (``g`` is the incoming gradient, ``y`` the output),
the dtype rule, and optionally the numpy ufunc that computes the whole forward on the CPU.
Binary ops broadcast like numpy and take Python numbers for either operand; mixed dtypes
promote as in PyTorch, and a Python number never widens a tensor's dtype.
"""

from __future__ import annotations

import math

import numpy as np

from ..backends.base import Activation, Kernel
from ..dtype import result_type
from ..errors import OpError, OpNotImplementedError
from ..tensor import Tensor
from .inplace import apply_elementwise
from .integer_division import check_divisor
from .registry import (
    FUNCTIONS,
    OPS,
    REQUIRED,
    SPECIAL,
    declare,
    elementwise,
    function,
    inplace_function,
    tensor_method,
)

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)
#: 1/6 as PyTorch's hardsigmoid backward holds it (a float32 constant, in every dtype)
_ONE_SIXTH_F32 = float(np.float32(1.0 / 6.0))
#: SELU's constants (Klambauer et al.), as PyTorch writes them
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _power_cpu(a, b):
    """np.power, but a float tensor cubed is two products, as PyTorch computes it: libm's
    pow takes a slow path on every negative base (GELU's tanh form cubes its inputs:
    110 ms against 2.6 ms for 786k float32 values, half of them negative)."""
    if a.__class__ is np.ndarray and a.dtype.kind == "f" and a.dtype.itemsize >= 4 and \
            np.ndim(b) == 0 and b == 3:
        return a * a * a
    return np.power(a, b)


def _sign_cpu(x):
    return x.copy() if x.dtype == np.bool_ else np.sign(x)


def _gcd_cpu(a, b):
    """np.gcd; where an operand is its dtype's most negative value (its own |.|, so numpy
    and PyTorch part ways), PyTorch's Euclid from the wrapped |a| and |b| with C's
    remainder, whose sign then shows (gcd(int32 min, 6) is -2 there)."""
    out = np.gcd(a, b)
    a, b = np.asarray(a), np.asarray(b)
    if out.dtype.kind != "i":
        return out
    low = np.iinfo(out.dtype).min
    hit = (a == low) | (b == low)
    if not hit.any():
        return out
    out = np.array(out)
    hit = np.broadcast_to(hit, out.shape)
    x = np.abs(np.broadcast_to(a, out.shape)[hit]).astype(out.dtype)
    y = np.abs(np.broadcast_to(b, out.shape)[hit]).astype(out.dtype)
    with np.errstate(all="ignore"):
        while (x != 0).any():
            going = x != 0
            step = x[going]
            x[going] = np.fmod(y[going], step)
            y[going] = step
    out[hit] = y
    return out


def _lcm_cpu(a, b):
    """np.lcm, whose |a| / gcd * |b| wraps at the dtype's width; PyTorch takes abs() of
    that wrapped product in 32 and 64 bits (narrower dtypes compute it in C's int, then
    wrap as numpy does)."""
    out = np.lcm(a, b)
    return np.abs(out) if out.dtype.kind == "i" and out.dtype.itemsize >= 4 else out


def _ldexp_cpu(a, b):
    """a * 2 ** b as PyTorch computes it: an integral exponent exactly (np.ldexp, so 2 ** b
    does not overflow before a scales it, as its kernel for integer exponents), a
    fractional one as a * 2 ** b with 2 ** b rounded to b's own dtype first (its pow)."""
    a, b = np.asarray(a), np.asarray(b)
    wide = np.dtype(np.float64 if np.float64 in (a.dtype, b.dtype) else np.float32)
    x, e = a.astype(wide, copy=False), b.astype(wide, copy=False)
    with np.errstate(over="ignore", invalid="ignore"):
        integral = np.isfinite(e) & (e == np.trunc(e))
        # (past +-2200 every finite nonzero value overflows or underflows already)
        n = np.clip(np.where(integral, e, 0), -2200, 2200).astype(np.int32)
        power = np.exp2(e)
        if b.dtype.itemsize < wide.itemsize:
            power = power.astype(b.dtype).astype(wide)
        return np.where(integral, np.ldexp(x, n), x * power)


# -- arithmetic ----------------------------------------------------------------------------
ADD = elementwise("add", lambda m, a, b: a + b, grad=(lambda m, g: g, lambda m, g: g),
                  cpu=np.add, dunders=("__add__", "__radd__"), wraps_ints=True)
SUB = elementwise("sub", lambda m, a, b: a - b, grad=(lambda m, g: g, lambda m, g: -g),
                  cpu=np.subtract, bool_ok=False, bool_operands=False,
                  dunders=("__sub__", "__rsub__"), wraps_ints=True)
MUL = elementwise("mul", lambda m, a, b: a * b,
                  grad=(lambda m, g, b: g * b, lambda m, g, a: g * a),
                  cpu=np.multiply, dunders=("__mul__", "__rmul__"), wraps_ints=True)
DIV = elementwise("div", lambda m, a, b: a / b,
                  grad=(lambda m, g, b: g / b, lambda m, g, a, b: -g * (a / b / b)),  # as PyTorch
                  dtypes="float", cpu=np.divide, dunders=("__truediv__", "__rtruediv__"))
POW = elementwise(
    "pow", lambda m, a, b: m.pow(a, b),
    grad=(lambda m, g, a, b: m.where(b == 0, 0.0, g * b * m.pow(a, b - 1)),
          lambda m, g, a, b, y: m.where((a == 0) & (b >= 0), 0.0, g * y * m.log(a))),
    cpu=_power_cpu, bool_ok=False, dunders=("__pow__", "__rpow__"), names=("input", "exponent"))


def _pow_checked(front):
    """``front`` (x ** exponent) with PyTorch's two cases on a tensor base: a bool tensor
    to a bool power stays bool (x ** True is x, x ** False all True), and an integer
    tensor to a negative integer power is refused with PyTorch's RuntimeError."""
    def pow(input, exponent):  # noqa: A001, A002 (PyTorch's names)
        x = input
        if isinstance(x, Tensor) and isinstance(exponent, (bool, np.bool_)) \
                and x.dtype.kind == "bool":
            return x.clone() if exponent else x == x
        if isinstance(x, Tensor) and x.dtype.kind == "int" and x.numel() and \
                isinstance(exponent, (int, np.integer)) and exponent < 0:
            raise OpError(f"pow: integers to negative integer powers are not allowed "
                          f"({x.dtype.name} tensor ** {exponent}); use a float tensor "
                          f"(x.float() ** {exponent})")
        return front(x, exponent)

    pow.__doc__ = front.__doc__
    return pow


Tensor.__pow__ = _pow_checked(Tensor.__pow__)
Tensor.pow = _pow_checked(Tensor.pow)
FUNCTIONS["pow"] = _pow_checked(FUNCTIONS["pow"])
elementwise("floor_divide", lambda m, a, b: m.floor_divide(a, b), cpu=np.floor_divide,
            bool_ok=False, dunders=("__floordiv__", "__rfloordiv__"), wraps_ints=True,
            check=check_divisor)
elementwise("remainder", lambda m, a, b: m.remainder(a, b),
            grad=(lambda m, g: g, lambda m, g, a, b: -g * m.floor_divide(a, b)),
            cpu=np.remainder, bool_ok=False, dunders=("__mod__", "__rmod__"), wraps_ints=True,
            check=check_divisor)
elementwise("fmod", lambda m, a, b: m.fmod(a, b),
            grad=(lambda m, g: g, lambda m, g, a, b: -g * m.trunc(a / b)),
            cpu=np.fmod, bool_ok=False, check=check_divisor, wraps_ints=True,
            doc="The remainder of input / other rounded toward zero (C's fmod: the sign "
                "of input), elementwise; remainder's has the sign of other.")
elementwise("ldexp", lambda m, a, b: m.ldexp(a, b),
            grad=(lambda m, g, b: g * m.exp2(b), lambda m, g, y: g * y * math.log(2.0)),
            dtypes="float", cpu=_ldexp_cpu,
            doc="input * 2 ** other, elementwise (broadcast): exact for an integral "
                "exponent wherever the result is representable. Integer inputs give the "
                "default float.")
elementwise("copysign", lambda m, a, b: m.copysign(a, b),
            grad=(lambda m, g, a, y: m.where(a == 0, 0.0, g * (y / a)), lambda m, g: g * 0.0),
            dtypes="float", cpu=np.copysign,
            doc="|input| with the sign bit of other (so -0.0 and -nan count as negative), "
                "elementwise; the gradient is 0 at input 0, as PyTorch's.")
elementwise("maximum", lambda m, a, b: m.maximum(a, b),
            grad=(lambda m, g, a, b: m.where(a > b, g, m.where(a == b, g * 0.5, 0.0)),
                  lambda m, g, a, b: m.where(b > a, g, m.where(a == b, g * 0.5, 0.0))),
            cpu=np.maximum)
elementwise("minimum", lambda m, a, b: m.minimum(a, b),
            grad=(lambda m, g, a, b: m.where(a < b, g, m.where(a == b, g * 0.5, 0.0)),
                  lambda m, g, a, b: m.where(b < a, g, m.where(a == b, g * 0.5, 0.0))),
            cpu=np.minimum)
elementwise("logaddexp",
            lambda m, a, b: m.where(a == b, a + math.log(2.0),
                                    m.maximum(a, b) + m.log1p(m.exp(-m.abs(a - b)))),
            grad=(lambda m, g, a, y: g * m.exp(a - y), lambda m, g, b, y: g * m.exp(b - y)),
            dtypes="float_only")
# fmax/fmin: NaN only where both are NaN; a tie's gradient goes to input, as PyTorch's
elementwise("fmax", lambda m, a, b: m.where(m.isnan(b), a, m.where(m.isnan(a), b,
                                                                    m.maximum(a, b))),
            grad=(lambda m, g, a, b: m.where((a >= b) | m.isnan(b), g, 0.0),
                  lambda m, g, a, b: m.where((a >= b) | m.isnan(b), 0.0, g)),
            cpu=np.fmax, inplace=False,
            doc="The elementwise maximum, NaN where both are NaN (else the number).")
elementwise("fmin", lambda m, a, b: m.where(m.isnan(b), a, m.where(m.isnan(a), b,
                                                                    m.minimum(a, b))),
            grad=(lambda m, g, a, b: m.where((a <= b) | m.isnan(b), g, 0.0),
                  lambda m, g, a, b: m.where((a <= b) | m.isnan(b), 0.0, g)),
            cpu=np.fmin, inplace=False,
            doc="The elementwise minimum, NaN where both are NaN (else the number).")
elementwise("logaddexp2",
            lambda m, a, b: m.where(a == b, a + 1.0,
                                    m.maximum(a, b) + m.log1p(m.exp2(-m.abs(a - b)))
                                    * (1.0 / math.log(2.0))),
            grad=(lambda m, g, a, y: g * m.exp2(a - y), lambda m, g, b, y: g * m.exp2(b - y)),
            dtypes="float_only", cpu=np.logaddexp2, inplace=False,
            doc="log2(2**input + 2**other), elementwise, without overflow.")
_NEXTAFTER_WGSL = """
fn nextafter_f32(a: f32, b: f32) -> f32 {
    if (a != a || b != b) { return a + b; }
    if (a == b) { return b; }
    if (a == 0.0) { return select(-bitcast<f32>(1u), bitcast<f32>(1u), b > 0.0); }
    let bits = bitcast<u32>(a);
    return bitcast<f32>(select(bits - 1u, bits + 1u, (b > a) == (a > 0.0)));
}
"""
# (PyTorch's derivative: the step is taken as flat, so input's gradient passes through
# and other's is zero)
elementwise("nextafter", lambda m, a, b: m.nextafter(a, b),
            grad=(lambda m, g: g, lambda m, g: g * 0.0), dtypes="float_only",
            cpu=np.nextafter, wgsl_lib=_NEXTAFTER_WGSL,
            doc="The next floating-point value after input toward other, elementwise "
                "(in input's dtype); the gradient passes to input, as PyTorch's.")
elementwise("hypot", lambda m, a, b: m.sqrt(a * a + b * b),
            grad=(lambda m, g, a, y: g * (a / y), lambda m, g, b, y: g * (b / y)),
            dtypes="float_only", cpu=np.hypot,
            doc="sqrt(input**2 + other**2), elementwise (broadcast), without overflow "
                "on the CPU.")
# xlogy(0, y) is 0 unless y is NaN; the gradients are PyTorch's: xlogy(g, y), 0 where
# x == 0 and y <= 0, and g * x / y (NaN at x == y == 0, as there)
elementwise("xlogy",
            lambda m, a, b: m.where(m.isnan(b), b, m.where(a == 0, 0.0, a * m.log(b))),
            grad=(lambda m, g, a, b: m.where(((a == 0) & (b <= 0)) | ((g == 0) & (b == b)),
                                             0.0, g * m.log(b)),
                  lambda m, g, a, b: g * (a / b)),
            dtypes="float",
            doc="input * log(other), elementwise (broadcast), 0 where input is 0 (unless "
                "other is NaN).")
elementwise("heaviside",
            lambda m, a, v: m.where(a == 0, v, m.where(a > 0, 1, 0)),
            dtypes="promote", one_dtype=True, names=("input", "values"),
            doc="The Heaviside step of input: 0 where input < 0, values where input == 0, "
                "1 where input > 0 (both of one dtype, as PyTorch asks); no gradient.")
elementwise("signbit", lambda m, x: m.copysign(1.0, x) < 0, dtypes="compare",
            cpu=np.signbit,
            doc="True where the sign bit of input is set (so -0.0 and -nan count), "
                "elementwise.")
# (PyTorch's two branches: exact at both ends, weight 0 gives input and 1 gives end)
elementwise("lerp",
            lambda m, a, b, w: m.where(m.abs(w) < 0.5, a + w * (b - a),
                                       b - (b - a) * (1.0 - w)),
            grad=(lambda m, g, w: g * (1.0 - w), lambda m, g, w: g * w,
                  lambda m, g, a, b: g * (b - a)),
            dtypes="float_only", names=("input", "end", "weight"), one_dtype=True,
            doc="input + weight * (end - input), elementwise (broadcast); weight a tensor "
                "or a number.")


# -- comparisons and logic (no gradient) -------------------------------------------------------
for _name, _fn, _ufunc, _dunder in (
        ("eq", lambda m, a, b: a == b, np.equal, "__eq__"),
        ("ne", lambda m, a, b: a != b, np.not_equal, "__ne__"),
        ("lt", lambda m, a, b: a < b, np.less, "__lt__"),
        ("le", lambda m, a, b: a <= b, np.less_equal, "__le__"),
        ("gt", lambda m, a, b: a > b, np.greater, "__gt__"),
        ("ge", lambda m, a, b: a >= b, np.greater_equal, "__ge__")):
    elementwise(_name, _fn, dtypes="compare", cpu=_ufunc, dunders=(_dunder,), wraps_ints=True)
for _name, _fn, _ufunc, _dunders in (
        ("bitwise_and", lambda m, a, b: a & b, np.bitwise_and, ("__and__", "__rand__")),
        ("bitwise_or", lambda m, a, b: a | b, np.bitwise_or, ("__or__", "__ror__")),
        ("bitwise_xor", lambda m, a, b: a ^ b, np.bitwise_xor, ("__xor__", "__rxor__"))):
    elementwise(_name, _fn, dtypes="integral", cpu=_ufunc, dunders=_dunders, wraps_ints=True)
# (PyTorch's rules past the width: a left shift gives 0, a right shift the sign; a
# negative count as one past the width)
elementwise("bitwise_left_shift", lambda m, a, b: m.left_shift(a, b), dtypes="integral",
            cpu=np.left_shift, bool_ok=False, dunders=("__lshift__", "__rlshift__"),
            wraps_ints=True,
            doc="input * 2 ** other in the integers (bits shifted left), elementwise.")
elementwise("bitwise_right_shift", lambda m, a, b: m.right_shift(a, b), dtypes="integral",
            cpu=np.right_shift, bool_ok=False, dunders=("__rshift__", "__rrshift__"),
            wraps_ints=True,
            doc="input // 2 ** other in the integers (bits shifted right, the sign kept), "
                "elementwise.")
elementwise("bitwise_not", lambda m, x: ~x, dtypes="integral", cpu=np.invert,
            dunders=("__invert__",))
elementwise("gcd", lambda m, a, b: m.gcd(a, b), dtypes="integral", cpu=_gcd_cpu,
            bool_ok=False,
            doc="The greatest common divisor of |input| and |other|, elementwise (gcd(0, 0) "
                "is 0).")
elementwise("lcm", lambda m, a, b: m.lcm(a, b), dtypes="integral", cpu=_lcm_cpu,
            bool_ok=False,
            doc="The least common multiple of |input| and |other|, elementwise (0 where "
                "either is 0); one past the dtype's range wraps, as PyTorch's.")


@tensor_method(function=True)
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> Tensor

    Where |input - other| <= atol + rtol * |other| (equal infinities are close; NaNs
    only with ``equal_nan``), as PyTorch: a bool tensor of the broadcast shape."""
    a, b = input, other
    if not isinstance(b, Tensor):
        raise TypeError(f"isclose: other must be a Tensor, got {type(b).__name__}")
    if a.dtype is not b.dtype:
        raise OpError(f"isclose: input and other must have one dtype, got {a.dtype.name} "
                      f"and {b.dtype.name}; convert one with .to(other.dtype)")
    if rtol < 0 or atol < 0:
        raise OpError(f"isclose: rtol and atol must be >= 0, got rtol={rtol}, atol={atol}")
    close = a == b
    if equal_nan and a.dtype.is_floating_point:
        close = close | (a.isnan() & b.isnan())
    if rtol == 0 and atol == 0:
        return close
    if a.dtype.kind == "bool":
        a, b = a.float(), b.float()
    error = (a - b).abs()
    return close | (error.isfinite() & (error <= (b * rtol).abs() + atol))


declare("isclose", arity=2, differentiable=False, dtypes="any")


elementwise("logical_and", lambda m, a, b: (a != 0) & (b != 0), dtypes="compare",
            cpu=np.logical_and)
elementwise("logical_or", lambda m, a, b: (a != 0) | (b != 0), dtypes="compare",
            cpu=np.logical_or)
elementwise("logical_xor", lambda m, a, b: (a != 0) ^ (b != 0), dtypes="compare",
            cpu=np.logical_xor)
elementwise("logical_not", lambda m, x: x == 0, dtypes="compare", cpu=np.logical_not)
elementwise("isnan", lambda m, x: m.isnan(x), dtypes="compare", cpu=np.isnan)
elementwise("isinf", lambda m, x: m.abs(x) == math.inf, dtypes="compare", cpu=np.isinf)
elementwise("isfinite", lambda m, x: (x == x) & (m.abs(x) != math.inf), dtypes="compare",
            cpu=np.isfinite)
elementwise("isposinf", lambda m, x: x == math.inf, dtypes="compare", cpu=np.isposinf,
            inplace=False)
elementwise("isneginf", lambda m, x: x == -math.inf, dtypes="compare", cpu=np.isneginf,
            inplace=False)

# -- unary math ------------------------------------------------------------------------------
elementwise("neg", lambda m, x: -x, grad=lambda m, g: -g, cpu=np.negative, bool_ok=False,
            dunders=("__neg__",))
elementwise("abs", lambda m, x: m.abs(x), grad=lambda m, g, x: g * m.sign(x), cpu=np.abs,
            bool_ok=False, dunders=("__abs__",))
elementwise("sign", lambda m, x: m.sign(x), grad=lambda m, g: g * 0.0, cpu=_sign_cpu)
elementwise("frac", lambda m, x: x - m.trunc(x), grad=lambda m, g: g, dtypes="float_only",
            doc="The fractional part, input - trunc(input) (the sign of input), "
                "elementwise.")
elementwise("deg2rad", lambda m, x: x * (math.pi / 180.0),
            grad=lambda m, g: g * (math.pi / 180.0), dtypes="float",
            doc="Degrees to radians, elementwise (integers give the default float).")
elementwise("rad2deg", lambda m, x: x * (180.0 / math.pi),
            grad=lambda m, g: g * (180.0 / math.pi), dtypes="float",
            doc="Radians to degrees, elementwise (integers give the default float).")
elementwise("square", lambda m, x: x * x, grad=lambda m, g, x: g * 2.0 * x, cpu=np.square,
            dtypes="bool_to_int")
elementwise("reciprocal", lambda m, x: 1.0 / x, grad=lambda m, g, y: -g * y * y,
            dtypes="float", cpu=np.reciprocal)
elementwise("exp", lambda m, x: m.exp(x), grad=lambda m, g, y: g * y, dtypes="float",
            cpu=np.exp)
elementwise("expm1", lambda m, x: m.expm1(x), grad=lambda m, g, y: g * (y + 1.0),
            dtypes="float", cpu=np.expm1)
elementwise("log", lambda m, x: m.log(x), grad=lambda m, g, x: g / x, dtypes="float",
            cpu=np.log)
elementwise("log1p", lambda m, x: m.log1p(x), grad=lambda m, g, x: g / (x + 1.0),
            dtypes="float", cpu=np.log1p)
elementwise("log2", lambda m, x: m.log(x) * (1.0 / math.log(2.0)),
            grad=lambda m, g, x: g / (x * math.log(2.0)), dtypes="float", cpu=np.log2)
elementwise("log10", lambda m, x: m.log(x) * (1.0 / math.log(10.0)),
            grad=lambda m, g, x: g / (x * math.log(10.0)), dtypes="float", cpu=np.log10,
            doc="The base-10 logarithm, elementwise.")
elementwise("sqrt", lambda m, x: m.sqrt(x), grad=lambda m, g, y: g * 0.5 / y,
            dtypes="float", cpu=np.sqrt)
elementwise("rsqrt", lambda m, x: m.rsqrt(x), grad=lambda m, g, y: g * -0.5 * y * y * y,
            dtypes="float")
elementwise("sin", lambda m, x: m.sin(x), grad=lambda m, g, x: g * m.cos(x),
            dtypes="float", cpu=np.sin)
elementwise("cos", lambda m, x: m.cos(x), grad=lambda m, g, x: -g * m.sin(x),
            dtypes="float", cpu=np.cos)
elementwise("atan", lambda m, x: m.atan(x), grad=lambda m, g, x: g / (1.0 + x * x),
            dtypes="float", cpu=np.arctan, doc="The arctangent, elementwise (radians).")
# (the derivatives' shared denominator is input**2 + other**2: 0/0, NaN, at the origin,
# as PyTorch's)
elementwise("atan2", lambda m, a, b: m.atan2(a, b),
            grad=(lambda m, g, a, b: g * (b / (a * a + b * b)),
                  lambda m, g, a, b: g * (-a / (a * a + b * b))),
            dtypes="float", cpu=np.arctan2,
            doc="The angle of the point (other, input) from the positive x axis, "
                "elementwise (radians in [-pi, pi], the quadrant from both signs).")
elementwise("tan", lambda m, x: m.tan(x), grad=lambda m, g, y: g * (1.0 + y * y),
            dtypes="float", cpu=np.tan, doc="The tangent, elementwise (radians).")
elementwise("sinh", lambda m, x: m.sinh(x), grad=lambda m, g, x: g * m.cosh(x),
            dtypes="float", cpu=np.sinh, doc="The hyperbolic sine, elementwise.")
elementwise("cosh", lambda m, x: m.cosh(x), grad=lambda m, g, x: g * m.sinh(x),
            dtypes="float", cpu=np.cosh, doc="The hyperbolic cosine, elementwise.")
elementwise("exp2", lambda m, x: m.exp2(x), grad=lambda m, g, y: g * y * math.log(2.0),
            dtypes="float", cpu=np.exp2, doc="2 ** input, elementwise.")
# (1 - x)(1 + x), not 1 - x * x: exact near |x| = 1, where the derivatives blow up
elementwise("asin", lambda m, x: m.asin(x),
            grad=lambda m, g, x: g * m.rsqrt((1.0 - x) * (1.0 + x)),
            dtypes="float", cpu=np.arcsin,
            doc="The arcsine, elementwise (radians; NaN outside [-1, 1]).")
elementwise("acos", lambda m, x: m.acos(x),
            grad=lambda m, g, x: -g * m.rsqrt((1.0 - x) * (1.0 + x)),
            dtypes="float", cpu=np.arccos,
            doc="The arccosine, elementwise (radians; NaN outside [-1, 1]).")
elementwise("asinh", lambda m, x: m.asinh(x), grad=lambda m, g, x: g * m.rsqrt(x * x + 1.0),
            dtypes="float", cpu=np.arcsinh, doc="The inverse hyperbolic sine, elementwise.")
elementwise("acosh", lambda m, x: m.acosh(x),
            grad=lambda m, g, x: g * m.rsqrt((x - 1.0) * (x + 1.0)), dtypes="float",
            cpu=np.arccosh,
            doc="The inverse hyperbolic cosine, elementwise (NaN below 1).")
elementwise("atanh", lambda m, x: m.atanh(x),
            grad=lambda m, g, x: g / ((1.0 - x) * (1.0 + x)),
            dtypes="float", cpu=np.arctanh,
            doc="The inverse hyperbolic tangent, elementwise (+-inf at +-1, NaN beyond).")
elementwise("tanh", lambda m, x: m.tanh(x), grad=lambda m, g, y: g * (1.0 - y * y),
            dtypes="float", cpu=np.tanh, functional="plain", module="Tanh")
elementwise("sigmoid", lambda m, x: m.sigmoid(x), grad=lambda m, g, y: g * y * (1.0 - y),
            dtypes="float", functional="plain", module="Sigmoid",
            doc="1 / (1 + exp(-input)), elementwise.")
elementwise("erf", lambda m, x: m.erf(x),
            grad=lambda m, g, x: g * _TWO_OVER_SQRT_PI * m.exp(-x * x), dtypes="float")
# -- special functions (backends/special_math.py; wgpu/special.py on the GPU) ------------------
elementwise("lgamma", lambda m, x: m.lgamma(x), grad=lambda m, g, x: g * m.digamma(x),
            dtypes="float",
            doc="log |Gamma(input)|, elementwise: +inf at 0 and the negative integers.")
elementwise("digamma", lambda m, x: m.digamma(x), grad=lambda m, g, x: g * m.polygamma(1, x),
            dtypes="float",
            doc="The derivative of lgamma, elementwise: -inf at 0 (+inf at -0.0), NaN at the "
                "negative integers, as PyTorch.")
elementwise("erfinv", lambda m, x: m.erfinv(x),
            grad=lambda m, g, y: g * _SQRT_PI_OVER_2 * m.exp(y * y), dtypes="float",
            doc="The inverse of erf, elementwise: +-inf at +-1, NaN outside [-1, 1].")
# (erfc ... ndtri: backends/error_math.py; i0 ... bessel_j1: bessel_math.py; zeta:
# special_math.py; the GPU's in wgpu/special_more.py). special=True: a torch.special
# function with no torch.<name>, so hx.special.<name> alone
elementwise("erfc", lambda m, x: m.erfc(x),
            grad=lambda m, g, x: g * -_TWO_OVER_SQRT_PI * m.exp(-x * x), dtypes="float",
            doc="1 - erf(input), elementwise, exact in the upper tail (where 1 - erf(input) "
                "would round to 0).")
elementwise("erfcx", lambda m, x: m.erfcx(x),
            grad=lambda m, g, x, y: g * (2.0 * x * y - _TWO_OVER_SQRT_PI),
            dtypes="float_wide", special=True, method=False, inplace=False,
            doc="The scaled complementary error function exp(input**2) * erfc(input), "
                "elementwise: about 1 / (input * sqrt(pi)) for large input.")
elementwise("ndtr", lambda m, x: m.ndtr(x),
            grad=lambda m, g, x: g * _INV_SQRT_2PI * m.exp(-0.5 * x * x), dtypes="float",
            special=True, method=False, inplace=False,
            doc="The standard normal distribution function (1 + erf(input / sqrt(2))) / 2, "
                "elementwise, computed from erfc: exact in the lower tail too.")
elementwise("log_ndtr", lambda m, x: m.log_ndtr(x),
            grad=lambda m, g, x, y: g * _INV_SQRT_2PI * m.exp(-(y + 0.5 * x * x)),
            dtypes="float_wide", special=True, method=False, inplace=False,
            doc="log(ndtr(input)), elementwise, finite far into the lower tail (about "
                "-input**2 / 2 there).")
elementwise("ndtri", lambda m, x: m.ndtri(x),
            grad=lambda m, g, y: g * _SQRT_2PI * m.exp(0.5 * y * y), dtypes="float_wide",
            special=True, method=False, inplace=False,
            doc="The inverse of ndtr (the standard normal quantile), elementwise: -inf at 0, "
                "+inf at 1, NaN outside [0, 1].")
elementwise("i0", lambda m, x: m.i0(x), grad=lambda m, g, x: g * m.i1(x), dtypes="float",
            doc="The modified Bessel function of the first kind of order 0, elementwise.")
elementwise("i0e", lambda m, x: m.i0e(x),
            grad=lambda m, g, x, y: g * (m.i1e(x) - m.sign(x) * y), dtypes="float",
            special=True, method=False, inplace=False,
            doc="exp(-|input|) * i0(input), elementwise (no overflow).")
# (i1's and i1e's slopes at 0 are 1/2, PyTorch's value there)
elementwise("i1", lambda m, x: m.i1(x),
            grad=lambda m, g, x, y: g * m.where(x == 0, 0.5, m.i0(x) - y / x),
            dtypes="float", special=True, method=False, inplace=False,
            doc="The modified Bessel function of the first kind of order 1, elementwise.")
elementwise("i1e", lambda m, x: m.i1e(x),
            grad=lambda m, g, x, y: g * m.where(x == 0, 0.5,
                                                m.i0e(x) - y * (m.sign(x) + 1.0 / x)),
            dtypes="float", special=True, method=False, inplace=False,
            doc="exp(-|input|) * i1(input), elementwise (no overflow).")
# (PyTorch's bessel_j0 and bessel_j1 have no derivatives: no grad, so no graph)
elementwise("bessel_j0", lambda m, x: m.bessel_j0(x), dtypes="float_wide", special=True,
            method=False, inplace=False,
            doc="The Bessel function of the first kind of order 0, elementwise (NaN at "
                "+-inf, as PyTorch's); not differentiable, as PyTorch's.")
elementwise("bessel_j1", lambda m, x: m.bessel_j1(x), dtypes="float_wide", special=True,
            method=False, inplace=False,
            doc="The Bessel function of the first kind of order 1, elementwise (NaN at "
                "+-inf, as PyTorch's); not differentiable, as PyTorch's.")
# (sin(pi x) / (pi x) as PyTorch computes it, 1 at 0, where the slope is 0)
elementwise("sinc", lambda m, x: m.where(x == 0, 1.0, m.sin(x * math.pi) / (x * math.pi)),
            grad=lambda m, g, x: g * m.where(
                x == 0, 0.0, (x * math.pi * m.cos(x * math.pi) - m.sin(x * math.pi))
                / (x * x * math.pi)),
            dtypes="float",
            doc="The normalised sinc sin(pi * input) / (pi * input), elementwise, 1 at 0.")
elementwise("entr",
            lambda m, x: m.where(x > 0, -x * m.log(x),
                                 m.where(x == 0, 0.0, m.where(x < 0, -math.inf, x))),
            grad=lambda m, g, x: g * -(1.0 + m.log(x)), dtypes="float", special=True,
            method=False, inplace=False,
            doc="The entropy term -input * log(input), elementwise: 0 at 0, -inf below 0.")
# (as xlogy: 0 where input is 0 unless other is NaN; the gradients are PyTorch's)
elementwise("xlog1py",
            lambda m, a, b: m.where(m.isnan(b), b, m.where(a == 0, 0.0, a * m.log1p(b))),
            grad=(lambda m, g, a, b: m.where(((a == 0) & (b <= -1)) | ((g == 0) & (b == b)),
                                             0.0, g * m.log1p(b)),
                  lambda m, g, a, b: g * (a / (b + 1.0))),
            dtypes="float", special=True, method=False, inplace=False,
            doc="input * log1p(other), elementwise (broadcast), 0 where input is 0 (unless "
                "other is NaN): exact for small other.")


def _no_x_derivative(m, g, x):
    raise OpNotImplementedError(
        "zeta: the derivative with respect to input (the exponent x) is not implemented "
        "(as in PyTorch); pass input.detach() to differentiate with respect to other (q) "
        "alone")


elementwise("zeta", lambda m, x, q: m.zeta(x, q),
            grad=(_no_x_derivative, lambda m, g, x, q: -g * x * m.zeta(x + 1.0, q)),
            dtypes="float_wide", special=True, method=False, inplace=False,
            doc="The Hurwitz zeta function, the sum over k >= 0 of (other + k) ** -input, "
                "elementwise (broadcast); differentiable in other only, as PyTorch's.")


def _no_a_derivative(op):
    def refuse(m, g, a):
        raise OpNotImplementedError(
            f"{op}: the derivative with respect to input (the shape a) is not implemented "
            f"(as in PyTorch); pass input.detach() to differentiate with respect to other "
            f"(x) alone")
    return refuse


_IGAMMA_WGSL = """
fn igamma_f32(a: f32, x: f32, lg: f32, upper: bool) -> f32 {
    let nan = bitcast<f32>(0x7fc00000u);
    let one = select(1.0, 0.0, upper);
    if (a != a || x != x || a < 0.0 || x < 0.0) { return nan; }
    if (a == 0.0) { return select(nan, one, x > 0.0); }
    if (x == 0.0) { return 1.0 - one; }
    if (x - x != 0.0) { return select(one, nan, a - a != 0.0); }
    if (a - a != 0.0) { return 1.0 - one; }
    let pre = exp(a * log(x) - x - lg);
    if (x < a + 1.0) {
        var term = 1.0 / a;
        var total = term;
        for (var n = 1; n < 1000; n++) {
            term = term * x / (a + f32(n));
            total = total + term;
            if (abs(term) <= abs(total) * 1e-8) { break; }
        }
        let p = total * pre;
        return select(p, 1.0 - p, upper);
    }
    var b = x + 1.0 - a;
    var c = 1e30;
    var d = 1.0 / b;
    var h = d;
    for (var i = 1; i < 1000; i++) {
        let an = -f32(i) * (f32(i) - a);
        b = b + 2.0;
        d = an * d + b;
        if (abs(d) < 1e-30) { d = 1e-30; }
        c = b + an / c;
        if (abs(c) < 1e-30) { c = 1e-30; }
        d = 1.0 / d;
        let delta = d * c;
        h = h * delta;
        if (abs(delta - 1.0) <= 1e-7) { break; }
    }
    let q = h * pre;
    return select(1.0 - q, q, upper);
}
"""


def _igamma_density(m, a, x):
    """x^(a-1) e^-x / Gamma(a): P's derivative in x."""
    return m.exp((a - 1.0) * m.log(x) - x - m.lgamma(a))


# P(a, x) and Q(a, x) = 1 - P: torch.igamma / igammac, torch.special.gammainc / gammaincc
for _name, _sign in (("igamma", 1.0), ("igammac", -1.0)):
    elementwise(_name, (lambda f: lambda m, a, x: getattr(m, f)(a, x))(
                    "gammainc" if _sign > 0 else "gammaincc"),
                grad=(_no_a_derivative(_name),
                      (lambda s: lambda m, g, a, x: g * s * _igamma_density(m, a, x))(_sign)),
                dtypes="float_only", wgsl_lib=_IGAMMA_WGSL,
                doc=("The regularized lower incomplete gamma function P(input, other), "
                     "elementwise; differentiable in other only, as PyTorch's."
                     if _sign > 0 else
                     "The regularized upper incomplete gamma function Q(input, other) = "
                     "1 - P, elementwise; differentiable in other only, as PyTorch's."))
SPECIAL["gammainc"], SPECIAL["gammaincc"] = FUNCTIONS["igamma"], FUNCTIONS["igammac"]
# (the kernel of polygamma, whose surfaces are below: PyTorch's function takes n first,
# polygamma(n, input), and its methods x.polygamma(n), x.polygamma_(n), which one entry's
# surfaces cannot be; n=1 is for the registry's tests, which call it with the input alone)
POLYGAMMA = elementwise("polygamma_n", lambda m, x, n: m.polygamma(n, x),
                        grad=lambda m, g, x, n: g * m.polygamma(n + 1, x), dtypes="float",
                        params={"n": 1}, method=False, function=False, inplace=False,
                        label="Polygamma")


def _order(n, op):
    """polygamma's n: an int >= 0 (PyTorch refuses a float, and a negative n)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"{op}: n must be an int, got {type(n).__name__}")
    if n < 0:
        raise OpError(f"{op}: n must be >= 0 (the n-th derivative of digamma), got {n}")
    return int(n)


@function
def polygamma(n, input):  # noqa: A002 (PyTorch's names)
    """polygamma(n, input) -> Tensor

    The n-th derivative of digamma, elementwise (n = 0 is digamma itself): +inf at 0
    and the negative integers for odd n, -inf for even n. Its gradient is
    polygamma(n + 1, input)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"polygamma: input must be a Tensor, got {type(input).__name__}")
    return POLYGAMMA.apply(input, _order(n, "polygamma"))


def _polygamma_method(self, n):
    """polygamma(n) -> Tensor

    See hx.polygamma(n, input)."""
    return POLYGAMMA.apply(self, _order(n, "polygamma"))


def _polygamma_inplace(self, n):
    """polygamma_(n) -> Tensor

    In-place polygamma: writes polygamma(n, self) into this tensor's memory."""
    n = _order(n, "polygamma_")
    if not self.dtype.is_floating_point:
        raise OpError(f"polygamma_: result type float can't be cast to the desired output "
                      f"type {self.dtype.name} (shape {self.shape}); use the out-of-place "
                      f"polygamma and convert explicitly")
    return apply_elementwise(POLYGAMMA, self, (n,))


_polygamma_method.__name__ = "polygamma"
_polygamma_inplace.__name__ = "polygamma_"
Tensor.polygamma, Tensor.polygamma_ = _polygamma_method, _polygamma_inplace
declare("polygamma", dtypes="float")

ROUNDING = {
    _name: elementwise(_name, (lambda f: lambda m, x: getattr(m, f)(x))(_name),
                       grad=lambda m, g: g * 0.0, cpu=_ufunc, bool_ok=False)
    for _name, _ufunc in (("floor", np.floor), ("ceil", np.ceil), ("round", np.rint),
                          ("trunc", np.trunc))}  # (rint: round half to even, as PyTorch)

# -- activations ------------------------------------------------------------------------------
elementwise("relu", lambda m, x: m.maximum(x, 0), grad=lambda m, g, x: g * (x > 0),
            bool_ok=False, functional="inplace", module="ReLU",
            doc="max(input, 0), elementwise.")
elementwise("silu", lambda m, x: x * m.sigmoid(x),
            grad=lambda m, g, x: g * m.sigmoid(x) * (1.0 + x * (1.0 - m.sigmoid(x))),
            dtypes="float_only", functional="inplace", module="SiLU",
            doc="input * sigmoid(input) (the swish), elementwise.")
GELU = elementwise(
    "gelu_erf", lambda m, x: 0.5 * x * (1.0 + m.erf(x * _SQRT_HALF)),
    grad=lambda m, g, x: g * (0.5 * (1.0 + m.erf(x * _SQRT_HALF))
                              + x * _INV_SQRT_2PI * m.exp(-0.5 * x * x)),
    dtypes="float_only", method=False, function=False, inplace=False, label="Gelu")
GELU_TANH = elementwise(
    "gelu_tanh",
    lambda m, x: 0.5 * x * (1.0 + m.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))),
    grad=lambda m, g, x: g * _gelu_tanh_slope(m, x), dtypes="float_only", method=False,
    function=False, inplace=False, label="GeluTanh")
elementwise("softplus",
            lambda m, x, beta, threshold: m.where(x * beta > threshold, x,
                                                  m.log1p(m.exp(x * beta)) / beta),
            grad=lambda m, g, x, beta, threshold: m.where(x * beta > threshold, g,
                                                          g * m.sigmoid(x * beta)),
            dtypes="float_only", params={"beta": 1.0, "threshold": 20.0}, functional="plain",
            module="Softplus",
            doc="log(1 + exp(beta * input)) / beta, and input itself where beta * input > "
                "threshold (as PyTorch: the linear branch keeps large inputs exact).")
elementwise("hardtanh", lambda m, x, min_val, max_val: m.minimum(m.maximum(x, min_val),
                                                                 max_val),
            grad=lambda m, g, x, min_val, max_val: g * ((x > min_val) & (x < max_val)),
            bool_ok=False, params={"min_val": -1.0, "max_val": 1.0}, functional="inplace",
            module="Hardtanh", doc="input clamped to [min_val, max_val].")
elementwise("hardsigmoid",
            lambda m, x: m.minimum(m.maximum(x + 3.0, 0.0), 6.0) / 6.0,
            grad=lambda m, g, x: g * ((x > -3.0) & (x < 3.0)) * _ONE_SIXTH_F32,
            dtypes="float_only", functional="inplace", module="Hardsigmoid",
            doc="relu6(input + 3) / 6: 0 below -3, 1 above 3, linear between.")
elementwise("leaky_relu", lambda m, x, negative_slope: m.where(x > 0, x, x * negative_slope),
            grad=lambda m, g, x, negative_slope: m.where(x > 0, g, g * negative_slope),
            dtypes="float_only", params={"negative_slope": 0.01}, functional="inplace",
            module="LeakyReLU", doc="input where positive, negative_slope * input elsewhere.")

elementwise("elu", lambda m, x, alpha: m.where(x > 0, x, alpha * m.expm1(x)),
            grad=lambda m, g, x, alpha: m.where(x > 0, g, g * alpha * m.exp(x)),
            dtypes="float_only", params={"alpha": 1.0}, functional="inplace", module="ELU",
            doc="input where positive, alpha * (exp(input) - 1) elsewhere.")
elementwise("celu", lambda m, x, alpha: m.where(x > 0, x, alpha * m.expm1(x / alpha)),
            grad=lambda m, g, x, alpha: m.where(x > 0, g, g * m.exp(x / alpha)),
            dtypes="float_only", params={"alpha": 1.0}, functional="inplace", module="CELU",
            doc="input where positive, alpha * (exp(input / alpha) - 1) elsewhere (ELU "
                "continuously differentiable at 0 for every alpha).")
elementwise("selu", lambda m, x: _SELU_SCALE * m.where(x > 0, x, _SELU_ALPHA * m.expm1(x)),
            grad=lambda m, g, x: m.where(x > 0, g * _SELU_SCALE,
                                         g * (_SELU_SCALE * _SELU_ALPHA) * m.exp(x)),
            dtypes="float_only", functional="inplace", module="SELU",
            doc="scale * elu(input, alpha) with PyTorch's self-normalising constants.")
elementwise("hardswish", lambda m, x: x * m.minimum(m.maximum(x + 3.0, 0.0), 6.0) / 6.0,
            grad=lambda m, g, x: m.where(x < -3.0, 0.0,
                                         m.where(x <= 3.0, g * (x / 3.0 + 0.5), g)),
            dtypes="float_only", functional="inplace", module="Hardswish",
            doc="input * relu6(input + 3) / 6: 0 below -3, input above 3.")
elementwise("mish", lambda m, x: x * m.tanh(_softplus(m, x)),
            grad=lambda m, g, x: g * _mish_slope(m, x), dtypes="float_only",
            functional="inplace", module="Mish", doc="input * tanh(softplus(input)).")
elementwise("softsign", lambda m, x: x / (1.0 + m.abs(x)),
            grad=lambda m, g, x: g / ((1.0 + m.abs(x)) * (1.0 + m.abs(x))), dtypes="float",
            bool_ok=False,
            functional="plain", module="Softsign", doc="input / (1 + |input|), elementwise.")

elementwise("tanhshrink", lambda m, x: x - m.tanh(x),
            grad=lambda m, g, x: g * m.tanh(x) * m.tanh(x), dtypes="float", bool_ok=False,
            functional="plain", module="Tanhshrink", doc="input - tanh(input), elementwise.")
# (the zero branch is x * 0, so that -lambd gives -0.0 as PyTorch's)
elementwise("softshrink",
            lambda m, x, lambd: m.where(x > lambd, x - lambd,
                                        m.where(x < -lambd, x + lambd, x * 0.0)),
            grad=lambda m, g, x, lambd: m.where(m.abs(x) > lambd, g, g * 0.0),
            dtypes="float_only", params={"lambd": 0.5}, functional="plain",
            module="Softshrink",
            doc="input - lambd above lambd, input + lambd below -lambd, 0 between.")
elementwise("hardshrink", lambda m, x, lambd: m.where(m.abs(x) > lambd, x, 0.0),
            grad=lambda m, g, x, lambd: m.where(m.abs(x) > lambd, g, g * 0.0),
            dtypes="float_only", params={"lambd": 0.5}, functional="plain",
            module="Hardshrink", doc="input where |input| > lambd, 0 elsewhere.")
# (x <= threshold picks value, as PyTorch's kernel tests it: a NaN input passes through,
# and so does its gradient; PyTorch's threshold has no defaults and no Tensor method)
THRESHOLD = elementwise(
    "threshold", lambda m, x, threshold, value: m.where(x <= threshold, value, x),
    grad=lambda m, g, x, threshold, value: m.where(x <= threshold, 0.0, g),
    bool_ok=False, params={"threshold": REQUIRED, "value": REQUIRED}, method=False,
    functional="inplace", module="Threshold",
    doc="input where input > threshold, value elsewhere.")


@function
def threshold_(input, threshold, value):  # noqa: A002 (PyTorch's names)
    """threshold_(input, threshold, value) -> Tensor

    In-place threshold: writes the result into input's memory (torch.threshold_ and
    F.threshold_; PyTorch's Tensor has no threshold method)."""
    return THRESHOLD.inplace(input, threshold, value)


def _softplus(m, x):
    # log(1 + exp(x)) without overflow: PyTorch's threshold of 20 (the linear branch)
    return m.where(x > 20.0, x, m.log1p(m.exp(m.minimum(x, 20.0))))


def _mish_slope(m, x):
    t = m.tanh(_softplus(m, x))
    return t + x * m.sigmoid(x) * (1.0 - t * t)

def _gelu_tanh_slope(m, x):
    th = m.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * (
        _SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x * x))


#: the activations a fused Linear takes, as (forward kernel, backward kernel) pairs
ACTIVATIONS = {
    name: Activation(name, decl.kernel,
                     Kernel(f"{name}_backward", decl.grads[0].fn, 2))
    for name, decl in (("gelu", GELU), ("gelu_tanh", GELU_TANH))}


@tensor_method(function=True)
def gelu(x, approximate="none"):
    """GELU, exact (erf) or with PyTorch's tanh approximation."""
    if approximate not in ("none", "tanh"):
        raise OpError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return (GELU_TANH if approximate == "tanh" else GELU).apply(x)


# -- clamp: bounds may be numbers or tensors ------------------------------------------------
CLAMP = elementwise(  # (bounds that cross: the upper one wins, as in PyTorch)
    "clamp3", lambda m, x, lo, hi: m.minimum(m.maximum(x, lo), hi),
    grad=(lambda m, g, x, lo, hi: g * ((x >= lo) & (x <= hi)),
          lambda m, g, x, lo, hi: g * ((x < lo) & (lo < hi)),
          lambda m, g, x, lo, hi: g * ((x > hi) | (hi < lo))),
    bool_ok=False, method=False, function=False, inplace=False, label="Clamp")
CLAMP_MIN = elementwise(
    "clamp_min", lambda m, x, lo: m.maximum(x, lo),
    grad=(lambda m, g, x, lo: g * (x >= lo), lambda m, g, x, lo: g * (lo > x)),
    bool_ok=True, names=("input", "min"))
CLAMP_MAX = elementwise(
    "clamp_max", lambda m, x, hi: m.minimum(x, hi),
    grad=(lambda m, g, x, hi: g * (x <= hi), lambda m, g, x, hi: g * (x > hi)),
    bool_ok=True, names=("input", "max"))


@tensor_method(function=True)
def clamp(x, min=None, max=None):  # noqa: A002 (PyTorch's argument names)
    if min is None and max is None:
        raise OpError("clamp: at least one of min and max must be given")
    if max is None:
        return CLAMP_MIN.apply(x, min)
    if min is None:
        return CLAMP_MAX.apply(x, max)
    return CLAMP.apply(x, min, max)


@tensor_method(name="clamp_")
def clamp_(x, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        raise OpError("clamp_: at least one of min and max must be given")
    if max is None:
        return x.clamp_min_(min)
    if min is None:
        return x.clamp_max_(max)
    return x.clamp_min_(min).clamp_max_(max)


# -- PyTorch's keyword arguments beyond the declarations' ---------------------------------------
@tensor_method(function=True)
def add(input, other, *, alpha=1):  # noqa: A002 (PyTorch's names)
    """add(input, other, *, alpha=1) -> Tensor

    input + alpha * other, elementwise (broadcast)."""
    return ADD.apply(input, other if alpha == 1 else other * alpha)


@tensor_method(function=True)
def sub(input, other, *, alpha=1):  # noqa: A002
    """sub(input, other, *, alpha=1) -> Tensor

    input - alpha * other, elementwise (broadcast)."""
    return SUB.apply(input, other if alpha == 1 else other * alpha)


@tensor_method(name="add_")
def add_(self, other, *, alpha=1):
    """add_(other, *, alpha=1) -> Tensor

    In-place add: self += alpha * other."""
    return ADD.inplace(self, other if alpha == 1 else other * alpha)


@tensor_method(name="sub_")
def sub_(self, other, *, alpha=1):
    """sub_(other, *, alpha=1) -> Tensor

    In-place sub: self -= alpha * other."""
    return SUB.inplace(self, other if alpha == 1 else other * alpha)


@tensor_method(function=True)
def rsub(input, other, *, alpha=1):  # noqa: A002
    """rsub(input, other, *, alpha=1) -> Tensor

    other - alpha * input, elementwise (broadcast)."""
    return SUB.apply(other, input if alpha == 1 else input * alpha)


@tensor_method(function=True)
def round(input, *, decimals=0):  # noqa: A001, A002 (PyTorch's names)
    """round(input, *, decimals=0) -> Tensor

    Rounds half to even, to ``decimals`` decimal places (negative: to tens, hundreds...),
    as PyTorch does: round(x * 10**decimals) / 10**decimals."""
    if decimals == 0:
        return ROUNDING["round"].apply(input)
    if decimals > 0:
        scale = 10.0 ** decimals
        return ROUNDING["round"].apply(input * scale) / scale
    scale = 10.0 ** -decimals
    return ROUNDING["round"].apply(input / scale) * scale


@tensor_method(name="round_")
def round_(self, *, decimals=0):
    """round_(*, decimals=0) -> Tensor

    In-place round (see round)."""
    if decimals == 0:
        return ROUNDING["round"].inplace(self)
    return self.copy_(round(self, decimals=decimals))


def _sign_of(v):
    return v.sign() if isinstance(v, Tensor) else (v > 0) - (v < 0)


@tensor_method(function=True)
def div(input, other, *, rounding_mode=None):  # noqa: A002
    """div(input, other, *, rounding_mode=None) -> Tensor

    input / other (true division), or rounded down ("floor") or toward zero ("trunc")."""
    x = input
    if rounding_mode is None:
        return DIV.apply(x, other)
    if rounding_mode == "floor":
        return x.floor_divide(other)
    if rounding_mode == "trunc":
        dtype = result_type(*((o.dtype, o.ndim == 0) if isinstance(o, Tensor) else o
                              for o in (x, other)))
        if dtype.is_floating_point:  # (an int tensor by a float divides in floats)
            return DIV.apply(x, other).trunc()
        # integers exactly (a float quotient rounds past 2**24): |x| // |other| signed
        magnitude = abs(x).floor_divide(abs(other))
        return magnitude * (_sign_of(x) * _sign_of(other))
    raise OpError(f"div: rounding_mode must be None, 'floor' or 'trunc', got "
                  f"{rounding_mode!r}")


@tensor_method(name="div_")
def div_(self, other, *, rounding_mode=None):
    """div_(other, *, rounding_mode=None) -> Tensor

    In-place div (see div)."""
    if rounding_mode is None:
        return DIV.inplace(self, other)
    if rounding_mode == "floor":
        return self.floor_divide_(other)
    return self.copy_(div(self, other, rounding_mode=rounding_mode))


# (PyTorch's other names for ops, subtract, divide, clip..., are declared in aliases.py)


# -- PyTorch's other names for two ops, with signatures of their own -----------------------------
@tensor_method(function=True)
def true_divide(input, other):  # noqa: A002
    """true_divide(input, other) -> Tensor

    div's other name: input / other, true division (integers give the default float)."""
    return DIV.apply(input, other)


@tensor_method(name="true_divide_")
def true_divide_(self, other):
    """true_divide_(other) -> Tensor

    In-place true_divide (see div_)."""
    return DIV.inplace(self, other)


@tensor_method(function=True)
def fix(input):  # noqa: A002
    """fix(input) -> Tensor

    trunc's other name: rounds toward zero, elementwise."""
    return ROUNDING["trunc"].apply(input)


@tensor_method(name="fix_")
def fix_(self):
    """fix_() -> Tensor

    In-place fix (see trunc_)."""
    return ROUNDING["trunc"].inplace(self)


@tensor_method(function=True)
def sgn(input, *, out=None):  # noqa: A002
    """sgn(input) -> Tensor

    sign extended to complex numbers; of a real tensor, its sign."""
    if out is not None:
        raise OpError("sgn: out= is not supported; assign the result instead")
    return OPS["sign"].apply(input)


@tensor_method(name="sgn_")
def sgn_(self):
    """sgn_() -> Tensor

    In-place sgn (see sign_)."""
    return OPS["sign"].inplace(self)


declare("true_divide", arity=2, dtypes="any")
declare("sgn", dtypes="any")
declare("fix", dtypes="any")


# -- the in-place activations as functions of their input: F.relu_, F.elu_... (torch.relu_,
# torch.celu_ and torch.selu_ too, as PyTorch has those at the top level) -----------------
INPLACE_ACTIVATIONS = {f"{n}_": inplace_function(OPS[n]) for n in
                       ("relu", "elu", "leaky_relu", "hardtanh", "celu", "selu")}
for _name in ("relu_", "celu_", "selu_"):
    function(INPLACE_ACTIVATIONS[_name])
