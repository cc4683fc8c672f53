"""Kernels into WGSL: a Kernel's function is called once with symbols instead of arrays,
and the expression it builds is WGSL source.

A symbol carries its WGSL text and its type: ``f32`` (float32, bfloat16 and float16
compute in f32), ``i32``, ``i64`` (int64 on devices that store it as such) or ``bool``.
Mixed operands convert as numpy would (an int meeting a float becomes f32; ``/`` is true
division), so one function serves every dtype.
"""

from __future__ import annotations

import math
import numbers

from ..orthogonal_polynomials import NAMES as POLYNOMIAL_NAMES


class Sym:
    __slots__ = ("code", "type")

    def __init__(self, code: str, type: str):
        self.code, self.type = code, type

    def __repr__(self) -> str:
        return f"Sym({self.code!r}: {self.type})"

    def __neg__(self):
        if self.type == "bool":
            raise TypeError("negation of a bool operand")
        return Sym(f"(-{self.code})", self.type)

    # (the arithmetic and comparison operators are installed below the class)
    __hash__ = None

    # logic (bool) and bits (int)
    def __and__(self, o):
        return _logic("&", self, o)

    __rand__ = __and__

    def __or__(self, o):
        return _logic("|", self, o)

    __ror__ = __or__

    def __xor__(self, o):
        a, b = _unify(self, o)
        return Sym(f"({a.code} != {b.code})", "bool") if a.type == "bool" else \
            Sym(f"({a.code} ^ {b.code})", a.type)

    __rxor__ = __xor__

    def __invert__(self):
        return Sym(f"(!{self.code})", "bool") if self.type == "bool" else \
            Sym(f"(~{self.code})", self.type)


# arithmetic with its reflected form (operands swapped); / is true division
_BINARY = {
    "add": lambda a, b: _arith("+", a, b), "sub": lambda a, b: _arith("-", a, b),
    "mul": lambda a, b: _arith("*", a, b),
    "truediv": lambda a, b: _arith("/", as_f32(a), as_f32(b)),
    "floordiv": lambda a, b: _call2("floor_divide", a, b),
    "mod": lambda a, b: _call2("remainder", a, b),
    "pow": lambda a, b: WgslMath.pow(a, b),
}
for _name, _fn in _BINARY.items():
    setattr(Sym, f"__{_name}__", lambda self, o, f=_fn: f(self, o))
    setattr(Sym, f"__r{_name}__", lambda self, o, f=_fn: f(o, self))
# comparisons: symbols of WGSL's operators, not Python equality
for _name, _op in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "=="),
                   ("ne", "!=")):
    setattr(Sym, f"__{_name}__", lambda self, o, op=_op: _compare(op, self, o))


def literal(v) -> Sym:
    """A Python or numpy number as a WGSL abstract literal."""
    if isinstance(v, Sym):
        return v
    if isinstance(v, (bool,)) or type(v).__name__ == "bool_":
        return Sym("true" if v else "false", "bool")
    if isinstance(v, numbers.Integral):
        return Sym(f"({int(v)})" if v < 0 else str(int(v)), "int")
    v = float(v)
    if math.isnan(v):
        return Sym("nan_f32()", "f32")
    if math.isinf(v):
        return Sym("pos_inf()" if v > 0 else "neg_inf()", "f32")
    text = repr(v)
    if "." not in text and "e" not in text:
        text += ".0"
    return Sym(f"({text})" if v < 0 else text, "float")


def _unify(a, b):
    """Both operands as symbols of one WGSL type. Literals are abstract (they take the
    other side's type); a bool meeting a number, and an int meeting a float, convert."""
    a, b = literal(a), literal(b)
    ta, tb = a.type, b.type
    if ta in ("int", "float") and tb in ("int", "float"):
        t = "f32" if "float" in (ta, tb) else "i32"
        return Sym(a.code, t), Sym(b.code, t)
    if ta in ("int", "float"):
        return _lit_as(a, tb), b if not (ta == "float" and tb != "f32") else as_f32(b)
    if tb in ("int", "float"):
        return (a if not (tb == "float" and ta != "f32") else as_f32(a)), _lit_as(b, ta)
    if ta == tb:
        return a, b
    t = "f32" if "f32" in (ta, tb) else "i64" if "i64" in (ta, tb) else "i32"
    return convert(a, t), convert(b, t)


def _lit_as(lit: Sym, other: str) -> Sym:
    if lit.type == "float":
        return Sym(lit.code, "f32")
    if other == "bool":
        return Sym("true" if lit.code not in ("0",) else "false", "bool")
    return Sym(lit.code, other)


def convert(x: Sym, t: str) -> Sym:
    """``x`` as WGSL type ``t`` (numpy's casts: float to int truncates, nonzero is true)."""
    x = literal(x)
    if x.type == t:
        return x
    if x.type in ("int", "float"):
        return _lit_as(Sym(x.code, "f32" if x.type == "float" else "i32"), t) \
            if t != "f32" else Sym(x.code, "f32")
    if t == "bool":
        zero = "0.0" if x.type == "f32" else "0"
        return Sym(f"({x.code} != {zero})", "bool")
    return Sym(f"{t}({x.code})", t)


def as_f32(x) -> Sym:
    return convert(literal(x), "f32")


def _arith(op, a, b):
    a, b = _unify(a, b)
    if a.type == "bool":  # numpy on bools: + is or, * is and
        if op == "+":
            return Sym(f"({a.code} || {b.code})", "bool")
        if op == "*":
            return Sym(f"({a.code} && {b.code})", "bool")
        raise TypeError(f"'{op}' on bool operands")
    return Sym(f"({a.code} {op} {b.code})", a.type)


def _compare(op, a, b):
    a, b = _unify(a, b)
    if a.type == "bool" and op not in ("==", "!="):
        a, b = convert(a, "i32"), convert(b, "i32")
    return Sym(f"({a.code} {op} {b.code})", "bool")


def _logic(op, a, b):
    a, b = _unify(a, b)
    if a.type == "f32":
        raise TypeError(f"'{op}' on float operands")
    return Sym(f"({a.code} {op} {b.code})", a.type)


def _call2(name, a, b):
    a, b = _unify(a, b)
    if a.type == "bool":
        a, b = convert(a, "i32"), convert(b, "i32")
    suffix = a.type if a.type in ("f32", "i64") else "i32"
    return Sym(f"{name}_{suffix}({a.code}, {b.code})", a.type)


def _extremum(float_fn, int_fn, bool_op, a, b):
    a, b = _unify(a, b)
    if a.type == "bool":
        return Sym(f"({a.code} {bool_op} {b.code})", "bool")
    return Sym(f"{float_fn if a.type == 'f32' else int_fn}({a.code}, {b.code})", a.type)


def _igamma(a, x, upper):
    a, x = as_f32(a), as_f32(x)
    return Sym(f"igamma_f32({a.code}, {x.code}, lgamma_f32({a.code}), {upper})", "f32")


def _bessel_k(x, n, scaled):
    return Sym(f"bessel_k_f32({as_f32(x).code}, {n}.0, {'true' if scaled else 'false'})",
               "f32")


def _polynomial(name):
    """special_polynomials.py's <name>_f32(x, n)."""
    return staticmethod(lambda x, n: Sym(f"{name}_f32({as_f32(x).code}, {as_f32(n).code})",
                                         "f32"))


def _float_fn(name):
    return staticmethod(lambda x: Sym(f"{name}({as_f32(x).code})", "f32"))


class WgslMath:
    """The math namespace a Kernel's function sees on the GPU (helpers: common.wgsl)."""

    exp, log, sqrt = _float_fn("exp"), _float_fn("log"), _float_fn("sqrt")
    log1p, expm1 = _float_fn("log1p_f32"), _float_fn("expm1_f32")
    sin, cos, tanh = _float_fn("sin"), _float_fn("cos"), _float_fn("tanh_f32")
    atan, tan = _float_fn("atan"), _float_fn("tan")
    sinh, cosh, exp2 = _float_fn("sinh"), _float_fn("cosh"), _float_fn("exp2")
    asin, acos = _float_fn("asin_f32"), _float_fn("acos_f32")
    asinh, acosh, atanh = _float_fn("asinh_f32"), _float_fn("acosh_f32"), _float_fn("atanh_f32")
    sigmoid, erf = _float_fn("sigmoid_f32"), _float_fn("erf_f32")
    # (special.py's helpers, which elementwise.py adds to a module that calls them)
    lgamma, digamma = _float_fn("lgamma_f32"), _float_fn("digamma_f32")
    erfinv = _float_fn("erfinv_f32")
    # (special_more.py's, added the same way)
    erfc, erfcx, ndtr = _float_fn("erfc_f32"), _float_fn("erfcx_f32"), _float_fn("ndtr_f32")
    log_ndtr, ndtri = _float_fn("log_ndtr_f32"), _float_fn("ndtri_f32")
    bessel_j0, bessel_j1 = _float_fn("bessel_j0_f32"), _float_fn("bessel_j1_f32")
    i0 = staticmethod(lambda x: Sym(f"bessel_i_f32({as_f32(x).code}, 0.0, false)", "f32"))
    i0e = staticmethod(lambda x: Sym(f"bessel_i_f32({as_f32(x).code}, 0.0, true)", "f32"))
    i1 = staticmethod(lambda x: Sym(f"bessel_i_f32({as_f32(x).code}, 1.0, false)", "f32"))
    i1e = staticmethod(lambda x: Sym(f"bessel_i_f32({as_f32(x).code}, 1.0, true)", "f32"))
    zeta = staticmethod(lambda x, q: Sym(f"zeta_f32({as_f32(x).code}, {as_f32(q).code})",
                                         "f32"))
    # (special_bessel.py's, added the same way; the polynomials' are set below the class)
    spherical_bessel_j0 = _float_fn("spherical_bessel_j0_f32")
    bessel_y0, bessel_y1 = _float_fn("bessel_y0_f32"), _float_fn("bessel_y1_f32")
    airy_ai = _float_fn("airy_ai_f32")
    modified_bessel_k0 = staticmethod(lambda x: _bessel_k(x, 0, False))
    modified_bessel_k1 = staticmethod(lambda x: _bessel_k(x, 1, False))
    scaled_modified_bessel_k0 = staticmethod(lambda x: _bessel_k(x, 0, True))
    scaled_modified_bessel_k1 = staticmethod(lambda x: _bessel_k(x, 1, True))
    # (igamma_f32: the entries' own wgsl_lib; the lgamma it needs is passed in, so that
    # the expression names lgamma_f32 and its library comes along)
    gammainc = staticmethod(lambda a, x: _igamma(a, x, "false"))
    gammaincc = staticmethod(lambda a, x: _igamma(a, x, "true"))
    polygamma = staticmethod(lambda n, x: Sym(f"polygamma_f32({as_f32(n).code}, "
                                              f"{as_f32(x).code})", "f32"))
    floor, ceil, trunc = _float_fn("floor"), _float_fn("ceil"), _float_fn("trunc")
    round = _float_fn("round")  # WGSL rounds half to even, as numpy and PyTorch
    rsqrt = _float_fn("inverseSqrt")

    @staticmethod
    def abs(x):
        x = literal(x)
        return x if x.type == "bool" else Sym(f"abs({x.code})", x.type)

    @staticmethod
    def sign(x):
        x = literal(x)
        return x if x.type == "bool" else Sym(f"sign({x.code})", x.type)

    @staticmethod
    def isnan(x):
        x = literal(x)
        return Sym(f"is_nan({x.code})", "bool") if x.type == "f32" else Sym("false", "bool")

    @staticmethod
    def where(c, a, b):
        c = convert(literal(c), "bool")
        a, b = _unify(a, b)
        return Sym(f"select({b.code}, {a.code}, {c.code})", a.type)

    maximum = staticmethod(lambda a, b: _extremum("nan_max", "max", "||", a, b))
    minimum = staticmethod(lambda a, b: _extremum("nan_min", "min", "&&", a, b))

    @staticmethod
    def pow(a, b):
        a, b = _unify(a, b)
        if a.type in ("i32", "i64"):
            return Sym(f"ipow{'_i64' if a.type == 'i64' else ''}({a.code}, {b.code})",
                       a.type)
        a, b = as_f32(a), as_f32(b)
        return Sym(f"pow_f32({a.code}, {b.code})", "f32")

    floor_divide = staticmethod(lambda a, b: _call2("floor_divide", a, b))
    remainder = staticmethod(lambda a, b: _call2("remainder", a, b))
    fmod = staticmethod(lambda a, b: _call2("fmod", a, b))
    atan2 = staticmethod(lambda a, b: Sym(f"atan2({as_f32(a).code}, {as_f32(b).code})", "f32"))
    left_shift = staticmethod(lambda a, b: _call2("shl", a, b))
    right_shift = staticmethod(lambda a, b: _call2("shr", a, b))
    # (nextafter_f32: the entry's own wgsl_lib)
    nextafter = staticmethod(lambda a, b: Sym(f"nextafter_f32({as_f32(a).code}, "
                                              f"{as_f32(b).code})", "f32"))
    copysign = staticmethod(lambda a, b: Sym(f"copysign_f32({as_f32(a).code}, "
                                             f"{as_f32(b).code})", "f32"))
    gcd = staticmethod(lambda a, b: _call2("gcd", a, b))
    lcm = staticmethod(lambda a, b: _call2("lcm", a, b))
    ldexp = staticmethod(lambda a, b: Sym(f"ldexp_f32({as_f32(a).code}, {as_f32(b).code})",
                                          "f32"))


for _name in POLYNOMIAL_NAMES:
    setattr(WgslMath, _name, _polynomial(_name))

MATH = WgslMath()


def trace(kernel, input_types, out_type: str, names=None) -> str:
    """The WGSL expression of ``kernel`` over inputs ``x0, x1, ...`` (or ``names``) of
    the given types ('f32', 'i32', 'bool'), converted to ``out_type``. Host scalars are
    symbols too (their loads are written by the caller)."""
    names = names or [f"x{i}" for i in range(len(input_types))]
    syms = [Sym(n, t) for n, t in zip(names, input_types)]
    return convert(literal(kernel.fn(MATH, *syms)), out_type).code
