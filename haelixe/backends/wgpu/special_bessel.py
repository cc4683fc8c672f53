"""WGSL helpers, in f32, of torch.special's Bessel functions of the second kind (Y0, Y1,
K0, K1 and the scaled K's), the spherical J0 and Airy's Ai, by the CPU's methods
(backends/bessel_second_kind.py, bessel_math.py, airy_math.py) with fewer terms for f32.
special.library adds them, with special_more's helpers (sp_cos_sin), to a module whose
expression calls one of NAMES.

What differs from the CPU: Miller's recurrence for Y starts at the even degree above
x + 16 (its error there is below f32's resolution, and the values it grows through stay
inside f32's range); the Gauss-Laguerre rule of Ai has 24 nodes, written out; the small
angles of its complex powers (below pi / 12) go through special.py's sin(pi r) and
cos(pi r) polynomials.
"""

from __future__ import annotations

import math

import numpy as np

from ..airy_math import _AI0, _AI1, _FAR_NODES, _SCALE, laguerre_rule
from ..special_math import EULER_GAMMA

_AIRY_NODES = _FAR_NODES  # (24: within f32's resolution from |x| = 1 on)


def _f32(c: float) -> str:
    text = repr(float(np.float32(c)))
    if "." not in text and "e" not in text:
        text += ".0"
    return f"({text})" if c < 0 else text


def _airy_sums() -> str:
    """The Gauss-Laguerre sums of Ai, one statement per node: ``plain`` the integral at a
    real zeta (1 + t / (2 zeta))^(-1/6), ``re`` and ``im`` at zeta = i xi, whose power
    is (1 + s^2)^(-1/12) e^(i atan(s) / 6), s = t / (2 xi)."""
    nodes, weights = laguerre_rule(_AIRY_NODES)
    lines = []
    for t, w in zip(nodes, weights):
        if w < 1e-30:  # (below f32's resolution of the sum)
            continue
        lines.append(f"        s = {_f32(t)} * inv;")
        lines.append(f"        if (real) {{ re += {_f32(w)} * exp2(-0.16666667 * log2(1.0 + s)); }}"
                     f" else {{ let a = atan(s) * {_f32(1.0 / (6.0 * math.pi))}; "
                     f"let m = {_f32(w)} * exp2(-0.083333333 * log2(1.0 + s * s)); "
                     f"re += m * sp_cospi(a); im += m * sp_sinpi(a); }}")
    return "\n".join(lines)


#: the helpers an expression may call (WgslMath's names for them)
NAMES = ("bessel_y0_f32(", "bessel_y1_f32(", "bessel_k_f32(", "spherical_bessel_j0_f32(",
         "airy_ai_f32(")

_GAMMA = _f32(EULER_GAMMA)
_TWO_OVER_PI = _f32(2.0 / math.pi)

SOURCE = f"""
// the power series' parts below 2: sum of q^k / (k! (k + n)!) and of c_k times those,
// c_k = H_k (n = 0) or H_k + H_(k+1) (n = 1)
fn sp_harmonic(q: f32, n: f32) -> vec2<f32> {{
    var term = 1.0;
    var plain = 1.0;
    var weighted = n;
    var h = 0.0;
    for (var k = 1; k < 14; k++) {{
        let kf = f32(k);
        term *= q / (kf * (kf + n));
        h += 1.0 / kf;
        plain += term;
        weighted += term * select(h, h + h + 1.0 / (kf + 1.0), n == 1.0);
    }}
    return vec2<f32>(plain, weighted);
}}

// Y_n(x), n = 0 or 1: the series below 2, Miller's recurrence with the Neumann series to
// 25, Hankel's expansion beyond; -inf at 0, NaN below 0 and at +inf (PyTorch's)
fn sp_bessel_y(x: f32, n: i32) -> f32 {{
    if (is_nan(x) || x < 0.0 || sp_is_inf(x)) {{ return nan_f32(); }}
    if (x == 0.0) {{ return neg_inf(); }}
    let log_term = log(0.5 * x) + {_GAMMA};
    if (x < 2.0) {{
        let s = sp_harmonic(-0.25 * x * x, f32(n));
        if (n == 0) {{ return {_TWO_OVER_PI} * (log_term * s.x - s.y); }}
        return {_TWO_OVER_PI} * (log_term * 0.5 * x * s.x - 1.0 / x - 0.25 * x * s.y);
    }}
    if (x <= 25.0) {{
        let top = 2 * i32(0.5 * x + 8.0) + 2;
        var later = 0.0;
        var now = 1e-10;
        var norm = 0.0;
        var even = 0.0;
        var odd = 0.0;
        for (var m = top; m >= 1; m = m - 1) {{
            if (m % 2 == 0) {{
                let k = m / 2;
                let sign = select(-1.0, 1.0, k % 2 == 0);
                norm += 2.0 * now;
                even += sign * now / f32(k);
            }} else {{
                let k = (m + 1) / 2;
                let sign = select(-1.0, 1.0, k % 2 == 0);
                odd += sign * now / f32(k);
                if (m > 1) {{ odd += sign * now / f32(k - 1); }}
            }}
            let below = (2.0 * f32(m) / x) * now - later;
            later = now;
            now = below;
        }}
        norm += now;
        if (n == 0) {{ return {_TWO_OVER_PI} * (log_term * now - 2.0 * even) / norm; }}
        return {_TWO_OVER_PI} * (log_term * later - now / x + odd) / norm;
    }}
    let h = sp_hankel(x, n);  // (special_more's)
    return (h.x * h.w + h.y * h.z) / sqrt({_f32(math.pi)} * x);
}}

fn bessel_y0_f32(x: f32) -> f32 {{ return sp_bessel_y(x, 0); }}
fn bessel_y1_f32(x: f32) -> f32 {{ return sp_bessel_y(x, 1); }}

// K_n(x), n = 0 or 1, times exp(x) where scaled: the series to 1, the trapezoidal rule
// (step 1/8) on exp(x) K_n(x)'s integral to 20, the asymptotic series beyond
fn bessel_k_f32(x: f32, n: f32, scaled: bool) -> f32 {{
    if (is_nan(x) || x < 0.0) {{ return nan_f32(); }}
    if (x == 0.0) {{ return pos_inf(); }}
    if (sp_is_inf(x)) {{ return 0.0; }}
    if (x <= 1.0) {{
        let s = sp_harmonic(0.25 * x * x, n);
        let log_term = log(0.5 * x) + {_GAMMA};
        var v = s.y - log_term * s.x;
        if (n == 1.0) {{ v = 1.0 / x + log_term * 0.5 * x * s.x - 0.25 * x * s.y; }}
        return select(v, v * exp(x), scaled);
    }}
    var total = 0.0;
    if (x <= 20.0) {{
        for (var j = 0; j < 37; j++) {{
            let t = f32(j) * 0.125;
            let h = sinh(0.5 * t);
            var f = exp(-2.0 * x * h * h);
            if (n == 1.0) {{ f *= cosh(t); }}
            total += select(0.125, 0.0625, j == 0) * f;
        }}
    }} else {{
        let mu = 4.0 * n * n;
        var term = 1.0;
        total = 1.0;
        for (var k = 1; k < 14; k++) {{
            let c = f32(2 * k - 1);
            term *= (mu - c * c) / (8.0 * f32(k) * x);
            total += term;
        }}
        total *= sqrt({_f32(0.5 * math.pi)} / x);
    }}
    return select(total * exp(-x), total, scaled);
}}

fn spherical_bessel_j0_f32(x: f32) -> f32 {{
    if (is_nan(x)) {{ return x; }}
    if (sp_is_inf(x)) {{ return 0.0; }}
    if (abs(x) < 1e-3) {{ return 1.0 - x * x * {_f32(1.0 / 6.0)}; }}
    return sp_cos_sin(x).y / x;
}}

// Ai(x): the Maclaurin series from -2 to 1; beyond, the Gauss-Laguerre rule on K_1/3's
// integral, at zeta = 2/3 x^(3/2) (x > 0) or i xi (x < 0, xi = 2/3 |x|^(3/2))
fn airy_ai_f32(x: f32) -> f32 {{
    if (is_nan(x) || sp_is_inf(x)) {{ return nan_f32(); }}
    if (x >= -2.0 && x <= 1.0) {{
        let cube = x * x * x;
        var f = 1.0;
        var g = x;
        var tf = 1.0;
        var tg = x;
        for (var k = 1; k < 12; k++) {{
            let kf = f32(k);
            tf *= cube / ((3.0 * kf - 1.0) * (3.0 * kf));
            tg *= cube / ((3.0 * kf) * (3.0 * kf + 1.0));
            f += tf;
            g += tg;
        }}
        return {_f32(_AI0)} * f - {_f32(_AI1)} * g;
    }}
    if (x >= 103.892) {{ return 0.0; }}
    let y = abs(x);
    let z = 0.6666667 * y * sqrt(y);
    let inv = 0.5 / z;
    let real = x > 0.0;
    var re = 0.0;
    var im = 0.0;
    var s = 0.0;
{_airy_sums()}
    let root = sqrt(sqrt(y));
    if (real) {{ return {_f32(0.5 * _SCALE)} * exp(-z) * re / root; }}
    let cs = sp_cos_sin(z);
    return {_f32(_SCALE / math.sqrt(2.0))} * (re * (cs.x + cs.y) + im * (cs.y - cs.x)) / root;
}}
"""
