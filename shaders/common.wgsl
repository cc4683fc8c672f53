// common.wgsl: prepended to every Haelixe kernel module.
//
// Metadata layout (binding 0, `metadata: array<i32>`, declared by the generated prelude):
//   [0, 8)            kernel scalars
//   8                 ndim of the iteration space
//   [9, 9 + MAXD)     its shape
//   operand k at OPS_BASE + k * OP_STRIDE: offset, extra stride, MAXD strides
// (haelixe/backends/wgpu/geometry.py writes it.)

const MAXD: i32 = 8;
const OPS_BASE: i32 = 17;
const OP_STRIDE: i32 = 10;
// Non-finite values are made at run time: a WGSL constant expression that evaluates to
// inf or NaN is an error (Tint rejects the module; naga lets it pass). These bit patterns
// are module-scope variables, which no constant expression may read.
var<private> INF_BITS: u32 = 0x7f800000u;
var<private> NAN_BITS: u32 = 0x7fc00000u;
fn neg_inf() -> f32 { return -bitcast<f32>(INF_BITS); }
fn pos_inf() -> f32 { return bitcast<f32>(INF_BITS); }
fn nan_f32() -> f32 { return bitcast<f32>(NAN_BITS); }

// Flat invocation id over a 2-D grid of 1-D workgroups (grids wrap at 65535 per dim).
fn flat_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, wg: u32) -> i32 {
    return i32((wid.y * nwg.x + wid.x) * wg + lid);
}
fn flat_group(wid: vec3<u32>, nwg: vec3<u32>) -> i32 {
    return i32(wid.y * nwg.x + wid.x);
}

fn scalar_i(k: i32) -> i32 { return metadata[k]; }
fn scalar_f(k: i32) -> f32 { return bitcast<f32>(metadata[k]); }

// Coordinates of flat (C-order) index `idx` in the iteration space.
// Written out with constant indices, not as a loop over ndim: an array indexed by a loop
// variable lives in memory (on software adapters above all, where it cost 5x the
// arithmetic); constant indices keep it in registers. Dims past ndim have size 1 and
// stride 0 in the metadata, so they give coordinate 0 and add nothing.
fn coords(idx: i32) -> array<i32, 8> {
    var c: array<i32, 8>;
    let nd = metadata[8];
    var rem = idx;
    if (nd > 7) { let n = metadata[16]; c[7] = rem % n; rem = rem / n; }
    if (nd > 6) { let n = metadata[15]; c[6] = rem % n; rem = rem / n; }
    if (nd > 5) { let n = metadata[14]; c[5] = rem % n; rem = rem / n; }
    if (nd > 4) { let n = metadata[13]; c[4] = rem % n; rem = rem / n; }
    if (nd > 3) { let n = metadata[12]; c[3] = rem % n; rem = rem / n; }
    if (nd > 2) { let n = metadata[11]; c[2] = rem % n; rem = rem / n; }
    if (nd > 1) { let n = metadata[10]; c[1] = rem % n; rem = rem / n; }
    c[0] = rem;
    return c;
}

// Element offset of operand k at coordinates c.
fn op_offset(k: i32, c: array<i32, 8>) -> i32 {
    let s = OPS_BASE + k * OP_STRIDE + 2;
    return metadata[s - 2] + c[0] * metadata[s] + c[1] * metadata[s + 1]
        + c[2] * metadata[s + 2] + c[3] * metadata[s + 3] + c[4] * metadata[s + 4]
        + c[5] * metadata[s + 5] + c[6] * metadata[s + 6] + c[7] * metadata[s + 7];
}
fn op_extra(k: i32) -> i32 { return metadata[OPS_BASE + k * OP_STRIDE + 1]; }

// -- floats ------------------------------------------------------------------------------
// Bit tests, not x != x: WGSL lets compilers assume floats are never NaN.
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }

// bfloat16 element `half` (0: low 16 bits) of a packed word, widened exactly.
fn bf16_at(word: u32, half: u32) -> f32 {
    return bitcast<f32>(select(word << 16u, word & 0xffff0000u, half == 1u));
}

// float32 -> bfloat16 bits, round to nearest even; NaN -> sign | 0x7fc0 (as ml_dtypes).
fn bf16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) {
        return ((b >> 16u) & 0x8000u) | 0x7fc0u;
    }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}

fn bf16_pair(word: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
}
fn bf16_pack(v: vec2<f32>) -> u32 { return bf16_bits(v.x) | (bf16_bits(v.y) << 16u); }

// float32 -> float16 bits, round to nearest even (overflow to inf, NaN to sign | 0x7e00,
// subnormals rounded exactly, as numpy's cast). Written out rather than left to f16() or
// pack2x16float, whose rounding WGSL leaves to the implementation.
fn f16_bits(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let sign = (b >> 16u) & 0x8000u;
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) { return sign | 0x7e00u; }
    if (a >= 0x477ff000u) { return sign | 0x7c00u; }  // 65520 and up round to inf
    if (a >= 0x38800000u) {  // normal in f16: rebias the exponent, round 13 bits away
        let m = a - 0x38000000u;
        return sign | ((m + 0xfffu + ((m >> 13u) & 1u)) >> 13u);
    }
    // subnormal in f16: a multiple of 2^-24 (round() rounds half to even; 1024 is the
    // smallest normal's bit pattern)
    return sign | u32(round(bitcast<f32>(a) * 16777216.0));
}
fn f16_pack(v: vec2<f32>) -> u32 { return f16_bits(v.x) | (f16_bits(v.y) << 16u); }

// x rounded to bfloat16 / float16 (nearest even) and widened back: autocast's cast of a
// float32 operand, done as a kernel reads it or writes it (matmul.py's round_to).
// bfloat16's is a few vector operations on the bits, no branch (a matmul rounds every
// element of its tiles: bf16_bits' branch per element cost it a third of its speed).
fn bf16_round4(v: vec4<f32>) -> vec4<f32> {
    let b = bitcast<vec4<u32>>(v);
    let r = (b + vec4<u32>(0x7fffu) + ((b >> vec4<u32>(16u)) & vec4<u32>(1u)))
            & vec4<u32>(0xffff0000u);
    let nan = (b & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u);
    return bitcast<vec4<f32>>(select(r, (b & vec4<u32>(0x80000000u)) | vec4<u32>(0x7fc00000u),
                                     nan));
}
fn bf16_round2(v: vec2<f32>) -> vec2<f32> { return bf16_round4(vec4<f32>(v, 0.0, 0.0)).xy; }
fn bf16_round(x: f32) -> f32 { return bf16_round4(vec4<f32>(x)).x; }
fn f16_round(x: f32) -> f32 { return unpack2x16float(f16_bits(x)).x; }
fn f16_round2(v: vec2<f32>) -> vec2<f32> { return unpack2x16float(f16_pack(v)); }
fn f16_round4(v: vec4<f32>) -> vec4<f32> { return vec4<f32>(f16_round2(v.xy), f16_round2(v.zw)); }

fn nan_max(a: f32, b: f32) -> f32 {
    if (is_nan(a) || is_nan(b)) { return nan_f32(); }
    return max(a, b);
}
fn nan_min(a: f32, b: f32) -> f32 {
    if (is_nan(a) || is_nan(b)) { return nan_f32(); }
    return min(a, b);
}

// erfc for z >= 0 with fractional error < 1.2e-7 (Numerical Recipes), below float32
// resolution, and erf from it.
fn erfc_pos_f32(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277))))))));
    return t * exp(poly);
}
fn erf_f32(x: f32) -> f32 {
    let erfc = erfc_pos_f32(abs(x));
    return select(erfc - 1.0, 1.0 - erfc, x >= 0.0);
}

// tanh that stays finite for large |x| (some drivers compute it through exp overflow).
fn tanh_f32(x: f32) -> f32 {
    if (abs(x) > 10.0) { return sign(x); }
    return tanh(x);
}

fn sigmoid_f32(x: f32) -> f32 {
    let e = exp(-abs(x));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= 0.0);
}

// log1p and expm1 without cancellation near 0 (the classic correction by the rounding
// error of 1 + x).
fn log1p_f32(x: f32) -> f32 {
    let u = 1.0 + x;
    return select(log(u) * (x / (u - 1.0)), x, u == 1.0);
}
fn expm1_f32(x: f32) -> f32 {
    let u = exp(x);
    if (u == 1.0) { return x; }
    let um1 = u - 1.0;
    if (um1 == -1.0) { return -1.0; }
    return select(um1 * (x / log(u)), u - 1.0, abs(x) > 0.5);
}

// Python's // and % (floor division; the remainder takes the divisor's sign), as numpy
// and PyTorch.
fn floor_divide_f32(a: f32, b: f32) -> f32 { return floor(a / b); }
fn remainder_f32(a: f32, b: f32) -> f32 {
    let r = a - b * floor(a / b);
    return r;
}
// Integers divide by magnitudes, in u32: signed / and % of negative operands are left
// undefined by GLSL, which naga writes for OpenGL adapters (Mesa's llvmpipe takes i32 %
// as unsigned there), while unsigned division means the same on every target, and
// |i32 min| = 2^31 fits. A zero divisor gives 0, as numpy (WGSL's a / 0 is a).
fn abs_u32(x: i32) -> u32 {
    let u = bitcast<u32>(x);
    return select(u, 0u - u, x < 0);
}
fn floor_divide_i32(a: i32, b: i32) -> i32 {
    let ua = abs_u32(a);
    let ub = max(abs_u32(b), 1u);
    let q = ua / ub;
    let neg = (a < 0) != (b < 0);
    // a negative quotient rounds down: one more in magnitude when inexact
    let m = select(q, q + 1u, neg && q * ub != ua);
    return select(bitcast<i32>(select(m, 0u - m, neg)), 0, b == 0);
}
fn remainder_i32(a: i32, b: i32) -> i32 {
    let ua = abs_u32(a);
    let ub = max(abs_u32(b), 1u);
    let r = ua - (ua / ub) * ub;
    // the result takes the divisor's sign: |b| - r from the other side of zero
    let m = select(r, ub - r, (a < 0) != (b < 0) && r != 0u);
    return select(bitcast<i32>(select(m, 0u - m, b < 0)), 0, b == 0);
}

// C's fmod (the remainder takes the dividend's sign), as numpy and PyTorch; an infinite
// divisor leaves a finite dividend as it is.
fn fmod_f32(a: f32, b: f32) -> f32 {
    return select(a - b * trunc(a / b), a, abs(b) == pos_inf() && abs(a) != pos_inf());
}
fn fmod_i32(a: i32, b: i32) -> i32 {
    let ub = max(abs_u32(b), 1u);
    let r = abs_u32(a) % ub;
    return select(bitcast<i32>(select(r, 0u - r, a < 0)), 0, b == 0);
}

// The greatest common divisor, as PyTorch's: Euclid from |a| and |b| with C's remainder
// (fmod_i32), so that an i32 min (its own |.|) gives what PyTorch gives (gcd(i32 min, 0)
// is i32 min, gcd(i32 min, 6) is -2); and the least common multiple |a| / gcd * |b|,
// wrapped at 32 bits and made non-negative, as PyTorch's abs() of the wrapped product.
fn gcd_i32(a: i32, b: i32) -> i32 {
    var x = abs(a);
    var y = abs(b);
    loop {
        if (x == 0) { break; }
        let c = x;
        x = fmod_i32(y, x);
        y = c;
    }
    return y;
}
fn lcm_i32(a: i32, b: i32) -> i32 {
    let g = abs_u32(gcd_i32(a, b));
    if (g == 0u) { return 0; }
    return abs(bitcast<i32>((abs_u32(a) / g) * abs_u32(b)));
}

// a * 2^b without 2^b overflowing first: exact, as PyTorch's ldexp of an integer
// exponent, wherever the result is representable. The exponent is applied in three
// steps (past +-300 every nonzero f32 overflows or underflows anyway).
fn ldexp_f32(a: f32, b: f32) -> f32 {
    if (is_nan(b)) { return b; }
    let e = clamp(b, -300.0, 300.0);
    let t = trunc(e / 3.0);
    let p = exp2(t);
    return a * p * p * exp2(e - 2.0 * t);
}

// Shifts with PyTorch's results where WGSL's are undefined (a count past the width, or
// negative): a left shift gives 0, a right shift the sign (as a shift by 31).
fn shl_i32(a: i32, b: i32) -> i32 { return select(a << u32(b), 0, b < 0 || b >= 32); }
fn shr_i32(a: i32, b: i32) -> i32 { return a >> select(u32(b), 31u, b < 0 || b >= 32); }

// |a| with b's sign bit (negative zero and negative NaN count as negative).
fn copysign_f32(a: f32, b: f32) -> f32 {
    return bitcast<f32>((bitcast<u32>(a) & 0x7fffffffu) | (bitcast<u32>(b) & 0x80000000u));
}

// The inverse trigonometric functions with NaN outside their domains (WGSL leaves those
// results indeterminate), asin and acos through atan2 (llvmpipe's asin is 4e-4 off at
// 0.5), asinh without cancellation for negative inputs.
fn asin_f32(x: f32) -> f32 {
    return select(nan_f32(), atan2(x, sqrt((1.0 - x) * (1.0 + x))), abs(x) <= 1.0);
}
fn acos_f32(x: f32) -> f32 {
    return select(nan_f32(), atan2(sqrt((1.0 - x) * (1.0 + x)), x), abs(x) <= 1.0);
}
fn acosh_f32(x: f32) -> f32 {
    if (x > 1e18) { return log(x) + 0.6931471805599453; }
    return select(nan_f32(), log(x + sqrt((x - 1.0) * (x + 1.0))), x >= 1.0);
}
fn asinh_f32(x: f32) -> f32 {
    let a = abs(x);
    if (a > 1e18) { return sign(x) * (log(a) + 0.6931471805599453); }
    return sign(x) * log1p_f32(a + a * a / (1.0 + sqrt(1.0 + a * a)));
}
fn atanh_f32(x: f32) -> f32 {
    let a = abs(x);
    if (a == 1.0) { return sign(x) * pos_inf(); }
    return select(nan_f32(), sign(x) * 0.5 * log1p_f32(2.0 * a / (1.0 - a)), a < 1.0);
}

// numpy's power: negative bases with integral exponents are defined, and -inf with any
// exponent (C's pow: +inf or 0 unless the exponent is an odd integer).
fn pow_f32(a: f32, b: f32) -> f32 {
    if (b == 0.0) { return 1.0; }
    if (a == 0.0) { return select(pos_inf(), 0.0, b > 0.0); }
    let r = pow(abs(a), b);
    if (a < 0.0) {
        if (floor(b) != b) { return select(nan_f32(), r, a == neg_inf()); }
        let odd = (abs(b) % 2.0) == 1.0;
        return select(r, -r, odd);
    }
    return r;
}

// Integer power by squaring (negative exponents give 0, as 1 / a^|b| truncated, except +-1).
fn ipow(a: i32, b: i32) -> i32 {
    if (b < 0) {
        if (a == 1) { return 1; }
        if (a == -1) { return select(1, -1, (b & 1) == 1); }
        return 0;
    }
    var r = 1;
    var base = a;
    var e = b;
    loop {
        if (e == 0) { break; }
        if ((e & 1) == 1) { r *= base; }
        base *= base;
        e = e >> 1u;
    }
    return r;
}

fn no_nan_i32(x: i32) -> bool { return false; }
fn no_nan_u32(x: u32) -> bool { return false; }
