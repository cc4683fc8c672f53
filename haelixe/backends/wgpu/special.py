"""WGSL helpers of the special functions in f32: lgamma, digamma, polygamma and erfinv.

The methods are the CPU's (backends/special_math.py, whose coefficients are written into
the text here), with fewer terms for f32: lgamma's series near 1 and 2, the recurrence
and Stirling's series; digamma's recurrence to 6 and asymptotic series; the Hurwitz zeta
for polygamma; Halley steps on erf / erfc for erfinv. A traced expression that calls
one of them gets the helpers through ``library`` (elementwise.py passes them with the
kernel's own), so the other kernels' modules stay as they were.
"""

from __future__ import annotations

import math

import numpy as np

from ..special_math import (
    DIGAMMA_COEFFICIENTS,
    EM_COEFFICIENTS,
    HALF_LOG_2PI,
    LGAMMA_SERIES,
    STIRLING_COEFFICIENTS,
)
from . import special_bessel, special_more, special_polynomials

#: the helpers an expression may call (WgslMath's names for them)
NAMES = ("lgamma_f32(", "digamma_f32(", "polygamma_f32(", "erfinv_f32(")


def _literal(c: float) -> str:
    """``c`` rounded to f32, as a WGSL literal (negative ones in parentheses)."""
    text = repr(float(np.float32(c)))
    if "." not in text and "e" not in text:
        text += ".0"
    return f"({text})" if c < 0 else text


def _horner(coefficients, var: str) -> str:
    """WGSL of sum of coefficients[i] * var^i, nested."""
    text = _literal(coefficients[-1])
    for c in coefficients[-2::-1]:
        text = f"{_literal(c)} + {var} * ({text})"
    return text


def _em_steps() -> str:
    """The Euler-Maclaurin corrections of hurwitz_f32, one statement each (six: below
    f32's resolution for a >= max(10, 2 s))."""
    lines = []
    for j, c in enumerate(EM_COEFFICIENTS[:6], start=1):
        lines.append(f"    total += {_literal(c)} * t;")
        lines.append(f"    t *= (s + {2 * j - 1}.0) * (s + {2 * j}.0) * ia * ia;")
    return "\n".join(lines)


#: erf(x) = 2 / sqrt(pi) * x * sum of ERF_SERIES[k] x^(2k): for |x| <= 1/2, where
#: erf_f32's absolute error would be a large relative one
_ERF_SERIES = [(-1) ** k / (math.factorial(k) * (2 * k + 1)) for k in range(8)]
_PI = "3.14159265358979"

#: sin(pi r) = r * sum of SINPI[k] r^(2k) and cos(pi r) = sum of COSPI[k] r^(2k) for
#: |r| <= 1/2 (their Taylor series, within 1e-9): WGSL lets sin and cos be 2^-11 off,
#: which the reflection formulas would divide by
_SINPI = [(-1) ** k * math.pi ** (2 * k + 1) / math.factorial(2 * k + 1) for k in range(8)]
_COSPI = [(-1) ** k * math.pi ** (2 * k) / math.factorial(2 * k) for k in range(9)]

SOURCE = f"""
fn sp_is_inf(x: f32) -> bool {{ return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }}

// sin(pi r) and cos(pi r) for |r| <= 1/2, r = x - round(x) exact.
fn sp_sinpi(r: f32) -> f32 {{ let r2 = r * r; return r * ({_horner(_SINPI, "r2")}); }}
fn sp_cospi(r: f32) -> f32 {{ let r2 = r * r; return {_horner(_COSPI, "r2")}; }}

// lgamma(2 + z) for |z| <= 1/2 (its series: exact near lgamma's zeros at 1 and 2).
fn lgamma2_f32(z: f32) -> f32 {{ return z * ({_horner(LGAMMA_SERIES[:14], "z")}); }}

fn lgamma_pos_f32(x: f32) -> f32 {{
    if (x >= 10.0) {{
        if (sp_is_inf(x)) {{ return x; }}
        let r = 1.0 / x;
        return (x - 0.5) * log(x) - x + {_literal(HALF_LOG_2PI)}
            + r * ({_horner(STIRLING_COEFFICIENTS[:4], "(r * r)")});
    }}
    if (x < 0.5) {{ return lgamma2_f32(x) - log1p_f32(x) - log(x); }}
    if (x < 1.5) {{ let z = x - 1.0; return lgamma2_f32(z) - log1p_f32(z); }}
    // down to [1.5, 2.5): lgamma(x) = lgamma(x - k) + log((x - 1) ... (x - k))
    var f = x;
    var p = 1.0;
    for (var k = 0; k < 8; k++) {{
        if (f < 2.5) {{ break; }}
        f = f - 1.0;
        p = p * f;
    }}
    return lgamma2_f32(f - 2.0) + log(p);
}}

fn lgamma_f32(x: f32) -> f32 {{
    if (is_nan(x)) {{ return x; }}
    if (x > 0.0) {{ return lgamma_pos_f32(x); }}
    if (x == floor(x)) {{ return pos_inf(); }}  // 0, -0, the negative integers, -inf
    // reflection, sin(pi x) from x's distance to its nearest integer
    return log({_PI} / abs(sp_sinpi(x - round(x)))) - lgamma_pos_f32(1.0 - x);
}}

fn digamma_pos_f32(x: f32) -> f32 {{
    var v = x;
    var shift = 0.0;
    for (var k = 0; k < 6; k++) {{
        if (v >= 6.0) {{ break; }}
        shift += 1.0 / v;
        v += 1.0;
    }}
    let r2 = 1.0 / (v * v);
    return log(v) - 0.5 / v - r2 * ({_horner(DIGAMMA_COEFFICIENTS[:6], "r2")}) - shift;
}}

fn digamma_f32(x: f32) -> f32 {{
    if (is_nan(x)) {{ return x; }}
    if (x == 0.0) {{ return select(neg_inf(), pos_inf(), (bitcast<u32>(x) >> 31u) == 1u); }}
    if (x < 0.0) {{
        if (x == floor(x)) {{ return nan_f32(); }}
        let r = x - round(x);
        return digamma_pos_f32(1.0 - x) - {_PI} * sp_cospi(r) / sp_sinpi(r);
    }}
    if (sp_is_inf(x)) {{ return x; }}
    return digamma_pos_f32(x);
}}

// b^e for an integer e >= 0, by squaring.
fn sp_powi(b: f32, e: i32) -> f32 {{
    var result = 1.0;
    var base = b;
    var k = e;
    for (var i = 0; i < 32; i++) {{
        if (k <= 0) {{ break; }}
        if ((k & 1) == 1) {{ result *= base; }}
        base *= base;
        k = k >> 1u;
    }}
    return result;
}}

// The Hurwitz zeta sum over k >= 0 of (q + k)^-s for q > 0 and an integer s >= 2: the
// terms below max(10, 2 s) summed (smallest first), the rest by Euler-Maclaurin.
fn hurwitz_f32(s: f32, q: f32) -> f32 {{
    let count = i32(max(ceil(max(10.0, 2.0 * s) - q), 0.0));
    let si = i32(s);
    let a = q + f32(count);
    let ia = 1.0 / a;
    let a_s = sp_powi(ia, si);
    var total = a * a_s / (s - 1.0) + 0.5 * a_s;
    var t = s * a_s * ia;
{_em_steps()}
    for (var k = count - 1; k >= 0; k = k - 1) {{
        total += sp_powi(1.0 / (q + f32(k)), si);
    }}
    return total;
}}

// The n-th derivative of digamma: (-1)^(n + 1) n! zeta(n + 1, x); below 0 with
// m = ceil(-x), r = x + m, the m terms of negative base are
// (-1)^s (zeta(s, 1 - r) - zeta(s, m + 1 - r)). At the infinities and trigamma's poles
// the values are PyTorch's (special_math.polygamma says which).
fn polygamma_f32(n: f32, x: f32) -> f32 {{
    if (n == 0.0) {{ return digamma_f32(x); }}
    if (is_nan(x)) {{ return x; }}
    let s = n + 1.0;
    var scale = select(-1.0, 1.0, (i32(n) & 1) == 1);
    for (var k = 2; k <= i32(n); k++) {{ scale *= f32(k); }}
    var z = 0.0;
    if (x > 0.0) {{
        if (!sp_is_inf(x)) {{ z = hurwitz_f32(s, x); }} else if (n != 1.0) {{ return nan_f32(); }}
    }} else if (sp_is_inf(x)) {{
        // PyTorch's: trigamma NaN at -inf, the others the pole's infinity
        return select(scale * pos_inf(), nan_f32(), n == 1.0);
    }} else if (x == floor(x)) {{
        // trigamma's value at the negative integers is PyTorch's reflection formula's
        if (n == 1.0 && x < 0.0) {{
            let sine = sin({_PI} * x);
            return {_literal(math.pi ** 2)} / (sine * sine);
        }}
        z = pos_inf();
    }} else {{
        let m = ceil(-x);
        let rest = -(x + (m - 1.0));  // 1 - r, exactly
        let parity = select(1.0, -1.0, (i32(s) & 1) == 1);
        z = hurwitz_f32(s, x + m) + parity * (hurwitz_f32(s, rest) - hurwitz_f32(s, m + rest));
    }}
    return scale * z;
}}

fn erf_small_f32(x: f32) -> f32 {{
    let x2 = x * x;
    return {_literal(2.0 / math.sqrt(math.pi))} * x * ({_horner(_ERF_SERIES, "x2")});
}}

// erfinv: a first guess from log(1 - y^2), then Halley steps on erf(x) - |y| (its
// series near 0; in the tails erfc(x) against 1 - |y|, which is exact there).
fn erfinv_f32(y: f32) -> f32 {{
    if (is_nan(y)) {{ return y; }}
    let a = abs(y);
    if (a >= 1.0) {{ return select(nan_f32(), copysign_f32(pos_inf(), y), a == 1.0); }}
    let rest = 1.0 - a;
    let l = log(rest * (1.0 + a));
    let t = {_literal(2.0 / (math.pi * 0.147))} + 0.5 * l;
    var x = sqrt(max(sqrt(t * t - l / 0.147) - t, 0.0));
    for (var k = 0; k < 3; k++) {{  // Halley steps (erf'' = -2x erf')
        var r = 0.0;
        if (a <= 0.5) {{ r = erf_small_f32(x) - a; }} else {{ r = rest - erfc_pos_f32(x); }}
        let step = r / ({_literal(2.0 / math.sqrt(math.pi))} * exp(-x * x));
        x = x - step / (1.0 + x * step);
    }}
    return copysign_f32(x, y);
}}
"""


def library(expr: str) -> str:
    """The helpers ``expr`` needs: these where it calls one, with special_more's where
    it calls one of those (which call these), and special_bessel's and
    special_polynomials' (which call both) where it calls one of theirs; else nothing."""
    extra = "".join(module.SOURCE for module in (special_bessel, special_polynomials)
                    if any(name in expr for name in module.NAMES))
    if extra or any(name in expr for name in special_more.NAMES):
        return SOURCE + special_more.SOURCE + extra
    return SOURCE if any(name in expr for name in NAMES) else ""
