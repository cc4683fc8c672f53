"""WGSL helpers, in f32, of torch.special's orthogonal polynomials, by the CPU's methods
(backends/orthogonal_polynomials.py): the values at the ends of the interval, the
Chebyshev closed forms inside it past the same degrees (their cos and sin from
special_more's sp_cos_sin, WGSL's own being 2^-11 off), else the three-term recurrence
to the degree, stopped at a NaN. special.library adds them, with special_more's helpers,
to a module whose expression calls one of NAMES.

Each helper is ``<name>_f32(x, n)``; the degree is n truncated toward zero (-1, giving 0,
for a NaN or infinite n).
"""

from __future__ import annotations

#: ends: the points written out; closed: the closed form (or ""); first: degree 1; step:
#: degree j (jf = f32(j)) from q (degree j - 1) and p (degree j - 2). x is the input, y
#: the shifted argument 2x - 1, k the degree and kf = f32(k).
_T_END = "if (abs(x) == 1.0) { return select(-1.0, 1.0, x > 0.0 || k % 2 == 0); }"
_SHIFT_STEP = "(y + y) * q - p"
_STEP = "(x + x) * q - p"


def _sign(value: str) -> str:
    """+value for an even degree, -value for an odd one."""
    return f"select(-({value}), {value}, k % 2 == 0)"


def _closed(limit: int, arg: str, form: str) -> str:
    """The closed form of ``form`` at theta = acos(arg), past degree ``limit``."""
    bodies = {
        "t": "return sp_cos_sin(kf * t).x;",
        "u": "return sp_cos_sin((kf + 1.0) * t).y / sp_cos_sin(t).y;",
        # (where sin(t / 2) rounds to 1, PyTorch's value, as the CPU's)
        "v": f"let h = sp_cos_sin(0.5 * t); if (h.y != 1.0) {{ return sp_cos_sin((kf + 0.5)"
             f" * t).x / h.x; }} return {_sign('2.0 * kf + 1.0')};",
        "w": "let h = sp_cos_sin(0.5 * t); if (h.x != 1.0) { return sp_cos_sin((kf + 0.5) "
             "* t).y / h.y; } return END;",
    }
    return (f"if (k > {limit} && abs({arg}) < 1.0) {{ let t = acos_f32({arg}); "
            f"{bodies[form]} }}")


_W_END = f"select({_sign('1.0')}, 2.0 * kf + 1.0, x > 0.0)"
POLYNOMIALS = {  # name -> (ends, closed, first, step)
    "chebyshev_polynomial_t": (_T_END, _closed(6, "x", "t"), "x", _STEP),
    "chebyshev_polynomial_u": (
        "if (abs(x) == 1.0) { return select(-(kf + 1.0), kf + 1.0, x > 0.0 || "
        "k % 2 == 0); }", _closed(8, "x", "u"), "x + x", _STEP),
    "chebyshev_polynomial_v": (
        f"if (abs(x) == 1.0) {{ return select({_sign('2.0 * kf + 1.0')}, 1.0, x > 0.0); }}",
        _closed(8, "x", "v"), "x + x - 1.0", _STEP),
    "chebyshev_polynomial_w": (
        f"if (abs(x) == 1.0) {{ return {_W_END}; }}",
        _closed(8, "x", "w").replace("END", _W_END), "x + x + 1.0", _STEP),
    "shifted_chebyshev_polynomial_t": (
        f"if (x == 1.0) {{ return 1.0; }} if (x == 0.0) {{ return {_sign('1.0')}; }}",
        _closed(6, "y", "t"), "y", _SHIFT_STEP),
    "shifted_chebyshev_polynomial_u": (
        f"if (x == 1.0) {{ return kf + 1.0; }} if (x == 0.0) {{ return {_sign('kf + 1.0')}; }}",
        _closed(6, "y", "u"), "y + y", _SHIFT_STEP),
    "shifted_chebyshev_polynomial_v": (
        f"if (x == 1.0) {{ return 1.0; }} if (x == 0.0) {{ return "
        f"{_sign('2.0 * kf + 1.0')}; }}", _closed(6, "y", "v"), "y + y - 1.0", _SHIFT_STEP),
    "shifted_chebyshev_polynomial_w": (
        f"if (x == 1.0) {{ return 2.0 * kf + 1.0; }} if (x == 0.0) {{ return "
        f"{_sign('1.0')}; }}", _closed(4, "y", "w").replace("END", _sign("1.0")),
        "y + y + 1.0", _SHIFT_STEP),
    "hermite_polynomial_h": ("", "", "x + x", "(x + x) * q - 2.0 * (jf - 1.0) * p"),
    "hermite_polynomial_he": ("", "", "x", "x * q - (jf - 1.0) * p"),
    "laguerre_polynomial_l": ("if (x == 0.0) { return 1.0; }", "", "1.0 - x",
                              "((2.0 * (jf - 1.0) + (1.0 - x)) * q - (jf - 1.0) * p) / jf"),
    "legendre_polynomial_p": (_T_END, "", "x",
                              "((2.0 * jf - 1.0) * x * q - (jf - 1.0) * p) / jf"),
}

_TEMPLATE = """
fn {name}_f32(x: f32, n: f32) -> f32 {{
    let k = sp_degree(n);
    if (k < 0) {{ return 0.0; }}
    let kf = f32(k);
    let y = x + x - 1.0;
    {ends}
    {closed}
    if (k == 0) {{ return 1.0; }}
    let first = {first};
    if (k == 1) {{ return first; }}
    var p = 1.0;
    var q = first;
    for (var j = 2; j <= k; j++) {{
        let jf = f32(j);
        let r = {step};
        p = q;
        q = r;
        if (is_nan(q)) {{ break; }}
    }}
    return q;
}}
"""

#: the helpers an expression may call (WgslMath's names for them)
NAMES = tuple(f"{name}_f32(" for name in POLYNOMIALS)

SOURCE = """
// the degree of n: truncated toward zero; -1 (a value of 0) where PyTorch's cast to int64
// gives its most negative value (NaN, the infinities, beyond 2^63)
fn sp_degree(n: f32) -> i32 {
    if (is_nan(n) || abs(n) >= 9.223372e18) { return -1; }
    return i32(clamp(trunc(n), -2147483648.0, 2147483520.0));
}
""" + "".join(_TEMPLATE.format(name=name, ends=ends, closed=closed, first=first, step=step)
              for name, (ends, closed, first, step) in POLYNOMIALS.items())
