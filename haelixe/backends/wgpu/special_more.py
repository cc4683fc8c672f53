"""WGSL helpers, in f32, of the error-function family (erfc, erfcx, ndtr, log_ndtr,
ndtri), the Bessel functions (i0, i0e, i1, i1e, bessel_j0, bessel_j1) and the Hurwitz
zeta, by the CPU's methods (backends/error_math.py, bessel_math.py, special_math.zeta)
with fewer terms for f32. special.library adds them, with special.py's helpers (ndtri
calls erfinv_f32; both use sp_sinpi and sp_cospi), to a module whose expression calls
one of NAMES.

What differs from the CPU: erfcx(x) for x >= 0 is common.wgsl's erfc polynomial (Numerical
Recipes' t exp(-z^2 + P(t)), within 1.2e-7) without its -z^2, so it needs no exp(x^2);
cos and sin in J0 and J1 are the polynomials of special.py on a Cody-Waite reduction by
pi / 2 in three parts (WGSL lets its own cos and sin be 2^-11 off), exact up to |x| of
about 3e4 (beyond, WGSL's own cos and sin: the phase of an f32 x is that far uncertain
anyway).
"""

from __future__ import annotations

import math

#: the helpers an expression may call (WgslMath's names for them)
NAMES = ("erfc_f32(", "erfcx_f32(", "ndtr_f32(", "log_ndtr_f32(", "ndtri_f32(",
         "bessel_i_f32(", "bessel_j0_f32(", "bessel_j1_f32(", "zeta_f32(")

_SQRT_HALF = repr(1.0 / math.sqrt(2.0))
_INV_SQRT_2PI = repr(1.0 / math.sqrt(2.0 * math.pi))
_HALF_LOG_2PI = repr(0.5 * math.log(2.0 * math.pi))
_INV_PI = repr(1.0 / math.pi)

SOURCE = f"""
fn sp_erfcx_pos(z: f32) -> f32 {{
    let t = 1.0 / (1.0 + 0.5 * z);
    return t * exp(-1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277)))))))));
}}

fn erfc_f32(x: f32) -> f32 {{
    if (x >= 0.0) {{ return erfc_pos_f32(x); }}
    return 2.0 - erfc_pos_f32(-x);  // (NaN passes through)
}}

// exp(x^2) erfc(x); below 0, 2 exp(x^2) - erfcx(-x) with x^2 split by fma
fn erfcx_f32(x: f32) -> f32 {{
    if (is_nan(x) || x >= 0.0) {{ return sp_erfcx_pos(x); }}
    if (x < -9.5) {{ return pos_inf(); }}
    let hi = x * x;
    let lo = fma(x, x, -hi);
    return 2.0 * exp(hi) * (1.0 + lo) - sp_erfcx_pos(-x);
}}

fn ndtr_f32(x: f32) -> f32 {{ return 0.5 * erfc_f32(-x * {_SQRT_HALF}); }}

fn log_ndtr_f32(x: f32) -> f32 {{
    let t = x * {_SQRT_HALF};
    if (x < -1.0) {{ return log(0.5 * sp_erfcx_pos(-t)) - t * t; }}
    return log1p_f32(-0.5 * erfc_f32(t));
}}

// sqrt(2) erfinv(2p - 1) in the middle; in the tails Newton on log_ndtr from
// Abramowitz and Stegun's 26.2.23
fn ndtri_f32(p: f32) -> f32 {{
    if (is_nan(p) || p < 0.0 || p > 1.0) {{ return nan_f32(); }}
    if (p == 0.0) {{ return neg_inf(); }}
    if (p == 1.0) {{ return pos_inf(); }}
    if (p >= 0.25 && p <= 0.75) {{ return 1.41421356 * erfinv_f32(2.0 * p - 1.0); }}
    let q = select(p, 1.0 - p, p > 0.75);
    let lq = log(q);
    let t = sqrt(-2.0 * lq);
    var x = -(t - (2.515517 + t * (0.802853 + t * 0.010328))
        / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))));
    for (var k = 0; k < 3; k++) {{
        let f = log_ndtr_f32(x);
        x = x - (f - lq) / exp(-0.5 * x * x - {_HALF_LOG_2PI} - f);
    }}
    return select(x, -x, p > 0.75);
}}

// I_n(x), n = 0 or 1, times exp(-|x|) where scaled: the power series below 12, the
// asymptotic one from there (exp(|x|) overflows past 88.7, as PyTorch's float32)
fn bessel_i_f32(x: f32, n: f32, scaled: bool) -> f32 {{
    if (is_nan(x)) {{ return x; }}
    let a = abs(x);
    var v = 1.0;
    if (a < 12.0) {{
        let q = 0.25 * a * a;
        var term = 1.0;
        for (var k = 1; k < 40; k++) {{
            let kf = f32(k);
            term *= q / (kf * (kf + n));
            v += term;
        }}
        v *= select(1.0, 0.5 * a, n == 1.0);
        if (scaled) {{ v *= exp(-a); }}
    }} else {{
        let mu = 4.0 * n * n;
        var term = 1.0;
        for (var k = 1; k < 12; k++) {{
            let c = f32(2 * k - 1);
            term *= -(mu - c * c) / (8.0 * f32(k) * a);
            v += term;
        }}
        v *= {_INV_SQRT_2PI} / sqrt(a);
        if (!scaled) {{ v *= exp(a); }}
    }}
    return select(v, copysign_f32(v, x), n == 1.0);
}}

// (cos x, sin x): x - k pi / 2 in three parts (exact while k is below 2^15), then the
// polynomials of sin(pi r) and cos(pi r)
fn sp_cos_sin(x: f32) -> vec2<f32> {{
    if (abs(x) > 65536.0) {{ return vec2<f32>(cos(x), sin(x)); }}
    let k = round(x * {repr(2.0 / math.pi)});
    let r = ((x - k * 1.5703125) - k * 0.00048351287841796875) - k * 3.1391647326017846e-07;
    let u = r * {_INV_PI};
    let c = sp_cospi(u);
    let s = sp_sinpi(u);
    let quadrant = i32(k - 4.0 * floor(k * 0.25));
    if (quadrant == 0) {{ return vec2<f32>(c, s); }}
    if (quadrant == 1) {{ return vec2<f32>(-s, c); }}
    if (quadrant == 2) {{ return vec2<f32>(-c, -s); }}
    return vec2<f32>(s, -c);
}}

// Hankel's expansion of order n (0 or 1) at a > 0, shared by J and Y: (P, Q, and the
// cos and sin of the phase a - (2n + 1) pi / 4, times sqrt 2)
fn sp_hankel(a: f32, n: i32) -> vec4<f32> {{
    let mu = 4.0 * f32(n * n);
    var p = 1.0;
    var q = 0.0;
    var term = 1.0;
    for (var k = 1; k < 14; k++) {{
        let c = f32(2 * k - 1);
        term *= (mu - c * c) / (8.0 * f32(k) * a);
        let m = k % 4;
        if (m == 1) {{ q += term; }} else if (m == 2) {{ p -= term; }}
        else if (m == 3) {{ q -= term; }} else {{ p += term; }}
    }}
    let cs = sp_cos_sin(a);
    var cos_chi = cs.x + cs.y;
    var sin_chi = cs.y - cs.x;
    if (n == 1) {{ cos_chi = cs.y - cs.x; sin_chi = -(cs.x + cs.y); }}
    return vec4<f32>(p, q, cos_chi, sin_chi);
}}

// J_n(|x|): below 25 the 80-point trapezoidal rule on Bessel's integral (20 nodes of a
// quarter period), beyond Hankel's expansion; NaN at the infinities, as PyTorch's
fn sp_bessel_j(a: f32, n: i32) -> f32 {{
    if (is_nan(a) || sp_is_inf(a)) {{ return nan_f32(); }}
    if (a <= 25.0) {{
        var total = 0.0;
        for (var j = 0; j < 20; j++) {{
            let st = sp_sinpi((f32(j) + 0.5) / 40.0);
            let phase = sp_cos_sin(a * st);
            total += select(phase.x, st * phase.y, n == 1);
        }}
        return total / 20.0;
    }}
    let h = sp_hankel(a, n);
    return {repr(math.sqrt(1.0 / math.pi))} / sqrt(a) * (h.x * h.z - h.y * h.w);
}}

fn bessel_j0_f32(x: f32) -> f32 {{ return sp_bessel_j(abs(x), 0); }}
fn bessel_j1_f32(x: f32) -> f32 {{
    let v = sp_bessel_j(abs(x), 1);
    return select(v, -v, x < 0.0 || (x == 0.0 && (bitcast<u32>(x) >> 31u) == 1u));
}}

// zeta(s, q) for s > 1 and q > 0: the terms below max(10, 2 s) (at most 64) summed,
// the rest by Euler-Maclaurin (or dropped, past 64 terms: below exp(-32) of the first)
fn sp_hurwitz_real(s: f32, q: f32) -> f32 {{
    let wanted = max(ceil(max(10.0, 2.0 * s) - q), 0.0);
    let count = i32(min(wanted, 64.0));
    let a = q + f32(count);
    let ia = 1.0 / a;
    let a_s = exp2(-s * log2(a));
    var total = a * a_s / (s - 1.0) + 0.5 * a_s;
    var t = s * a_s * ia;
    total += 0.08333333 * t;
    t *= (s + 1.0) * (s + 2.0) * ia * ia;
    total += -0.0013888889 * t;
    t *= (s + 3.0) * (s + 4.0) * ia * ia;
    total += 3.3068783e-05 * t;
    t *= (s + 5.0) * (s + 6.0) * ia * ia;
    total += -8.2671958e-07 * t;
    t *= (s + 7.0) * (s + 8.0) * ia * ia;
    total += 2.0876757e-08 * t;
    if (wanted > 64.0) {{ total = 0.0; }}
    for (var k = count - 1; k >= 0; k = k - 1) {{
        total += exp2(-s * log2(q + f32(k)));
    }}
    return total;
}}

// (-1)^s as a number for an integral s: the sign of a negative base to the power s
fn sp_parity(s: f32) -> f32 {{ return select(1.0, -1.0, s - 2.0 * floor(0.5 * s) == 1.0); }}

fn zeta_f32(x: f32, q: f32) -> f32 {{
    if (x == 1.0) {{ return pos_inf(); }}
    if (is_nan(x) || is_nan(q) || x < 1.0) {{ return nan_f32(); }}
    if (q <= 0.0 && q == floor(q)) {{ return pos_inf(); }}
    if (sp_is_inf(x)) {{
        if (q == 1.0) {{ return 1.0; }}
        return select(nan_f32(), pos_inf(), q > 0.0 && q < 1.0);
    }}
    if (sp_is_inf(q)) {{ return nan_f32(); }}
    if (q > 0.0) {{ return sp_hurwitz_real(x, q); }}
    if (x != floor(x)) {{ return nan_f32(); }}
    let m = ceil(-q);
    let rest = -(q + (m - 1.0));
    return sp_hurwitz_real(x, q + m) + sp_parity(x) * (sp_hurwitz_real(x, rest)
        - sp_hurwitz_real(x, m + rest));
}}
"""
