// matmul.wgsl: C[z, m, n] = sum_k A[z, m, k] * B[z, k, n], then an epilogue.
//
// A workgroup of 16 x 16 invocations computes a 128 x 128 tile of C; each invocation
// keeps an 8 x 8 block in sixteen vec4 registers (rows 4ty..4ty+3 and 64+4ty..; columns
// likewise), stepping K by 16 through workgroup memory, the next tile's loads issued
// into registers before the current tile is consumed (double buffering). Named
// registers rather than an array keep the accumulators out of local memory on every
// compiler. A and B are read
// through their strides, so transposed or sliced operands need no copy; rows, columns and
// k past M, N, K read as zero and are not written.
//
// metadata scalars: [0] M, [1] N, [2] K, [3] A stride along m, [4] A along k,
// [5] B along k, [6] B along n. Iteration space = the (broadcast) batch dims, one per
// grid z; operand 0 = A, 1 = B (their batch strides), 2 = bias (offset; its stride along
// n in the extra slot). C is written contiguously as (batch, M, N).
// ${EPILOGUE} stores `v` (the f32 dot product) for output (m, n) at flat index `ci`.
// The ROWSUM_ACC / ROWSUM_STORE placeholders (empty unless asked for) also sum each row
// of A over k into `rowsum` (batch, M): a linear layer's bias gradient comes out of its
// weight gradient's matmul, with no reduction dispatch of its own.

const BM: i32 = 128;
const BN: i32 = 128;
const BK: i32 = 16;

var<workgroup> a_tile: array<vec4<f32>, 512>;  // [k][m / 4], BK * BM / 4
var<workgroup> b_tile: array<vec4<f32>, 512>;  // [k][n / 4], BK * BN / 4

// Sizes and strides come in as arguments (read once from the metadata): a load from the
// metadata buffer inside the tile loop is one the compiler cannot hoist on its own.
fn a_at(base: i32, m: i32, k: i32, M: i32, K: i32, sm: i32, sk: i32) -> f32 {
    if (m < M && k < K) {
        return f32(load_a(base + m * sm + k * sk));
    }
    return 0.0;
}

fn b_at(base: i32, k: i32, n: i32, K: i32, N: i32, sk: i32, sn: i32) -> f32 {
    if (k < K && n < N) {
        return f32(load_b(base + k * sk + n * sn));
    }
    return 0.0;
}

// four consecutive rows of A at one k / four consecutive columns of B at one k
fn a4(base: i32, m: i32, k: i32, M: i32, K: i32, sm: i32, sk: i32) -> vec4<f32> {
    return vec4<f32>(a_at(base, m, k, M, K, sm, sk), a_at(base, m + 1, k, M, K, sm, sk),
                     a_at(base, m + 2, k, M, K, sm, sk), a_at(base, m + 3, k, M, K, sm, sk));
}

fn b4(base: i32, k: i32, n: i32, K: i32, N: i32, sk: i32, sn: i32) -> vec4<f32> {
    return vec4<f32>(b_at(base, k, n, K, N, sk, sn), b_at(base, k, n + 1, K, N, sk, sn),
                     b_at(base, k, n + 2, K, N, sk, sn), b_at(base, k, n + 3, K, N, sk, sn));
}

fn emit(z: i32, m: i32, n: i32, v: f32) {
    let M = metadata[0];
    let N = metadata[1];
    if (m < M && n < N) {
        let ci = (z * M + m) * N + n;
        ${EPILOGUE}
    }
}

fn emit4(z: i32, m: i32, n: i32, v: vec4<f32>) {
    emit(z, m, n, v.x);
    emit(z, m, n + 1, v.y);
    emit(z, m, n + 2, v.z);
    emit(z, m, n + 3, v.w);
}

@compute @workgroup_size(16, 16)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>,
          @builtin(local_invocation_id) lid: vec3<u32>) {
    let M = metadata[0];
    let N = metadata[1];
    let K = metadata[2];
    let sam = metadata[3];
    let sak = metadata[4];
    let sbk = metadata[5];
    let sbn = metadata[6];
    let z = i32(wid.z);
    let bc = coords(z);
    let a_base = op_offset(0, bc);
    let b_base = op_offset(1, bc);
    let m0 = i32(wid.y) * BM;
    let n0 = i32(wid.x) * BN;
    let tx = i32(lid.x);
    let ty = i32(lid.y);
    // tile loading: invocation t fills vec4 (t % 32) of rows t / 32 and t / 32 + 8
    let tid = ty * 16 + tx;
    let lk = tid / 32;
    let l4 = (tid % 32) * 4;

    var c0a = vec4<f32>(); var c0b = vec4<f32>();
    var c1a = vec4<f32>(); var c1b = vec4<f32>();
    var c2a = vec4<f32>(); var c2b = vec4<f32>();
    var c3a = vec4<f32>(); var c3b = vec4<f32>();
    var c4a = vec4<f32>(); var c4b = vec4<f32>();
    var c5a = vec4<f32>(); var c5b = vec4<f32>();
    var c6a = vec4<f32>(); var c6b = vec4<f32>();
    var c7a = vec4<f32>(); var c7b = vec4<f32>();
    var s0 = vec4<f32>(); var s1 = vec4<f32>();  // row sums of A (rows ma.., mb..)

    // Double buffering through registers: the next tile's global loads are issued
    // before the current tile's arithmetic, so their latency hides behind it.
    let gm = m0 + l4;
    let gn = n0 + l4;
    var ra0 = a4(a_base, gm, lk, M, K, sam, sak);
    var ra1 = a4(a_base, gm, lk + 8, M, K, sam, sak);
    var rb0 = b4(b_base, lk, gn, K, N, sbk, sbn);
    var rb1 = b4(b_base, lk + 8, gn, K, N, sbk, sbn);
    for (var k0 = 0; k0 < K; k0 += BK) {
        a_tile[tid] = ra0;
        a_tile[tid + 256] = ra1;
        b_tile[tid] = rb0;
        b_tile[tid + 256] = rb1;
        workgroupBarrier();
        let nk = k0 + BK + lk;
        ra0 = a4(a_base, gm, nk, M, K, sam, sak);
        ra1 = a4(a_base, gm, nk + 8, M, K, sam, sak);
        rb0 = b4(b_base, nk, gn, K, N, sbk, sbn);
        rb1 = b4(b_base, nk + 8, gn, K, N, sbk, sbn);
        for (var kk = 0; kk < BK; kk++) {
            let a0 = a_tile[kk * 32 + ty];
            let a1 = a_tile[kk * 32 + 16 + ty];
            let b0 = b_tile[kk * 32 + tx];
            let b1 = b_tile[kk * 32 + 16 + tx];
            ${ROWSUM_ACC}
            c0a = fma(vec4<f32>(a0.x), b0, c0a); c0b = fma(vec4<f32>(a0.x), b1, c0b);
            c1a = fma(vec4<f32>(a0.y), b0, c1a); c1b = fma(vec4<f32>(a0.y), b1, c1b);
            c2a = fma(vec4<f32>(a0.z), b0, c2a); c2b = fma(vec4<f32>(a0.z), b1, c2b);
            c3a = fma(vec4<f32>(a0.w), b0, c3a); c3b = fma(vec4<f32>(a0.w), b1, c3b);
            c4a = fma(vec4<f32>(a1.x), b0, c4a); c4b = fma(vec4<f32>(a1.x), b1, c4b);
            c5a = fma(vec4<f32>(a1.y), b0, c5a); c5b = fma(vec4<f32>(a1.y), b1, c5b);
            c6a = fma(vec4<f32>(a1.z), b0, c6a); c6b = fma(vec4<f32>(a1.z), b1, c6b);
            c7a = fma(vec4<f32>(a1.w), b0, c7a); c7b = fma(vec4<f32>(a1.w), b1, c7b);
        }
        workgroupBarrier();
    }

    let ma = m0 + 4 * ty;
    let mb = m0 + 64 + 4 * ty;
    let na = n0 + 4 * tx;
    let nb = n0 + 64 + 4 * tx;
    emit4(z, ma, na, c0a); emit4(z, ma, nb, c0b);
    emit4(z, ma + 1, na, c1a); emit4(z, ma + 1, nb, c1b);
    emit4(z, ma + 2, na, c2a); emit4(z, ma + 2, nb, c2b);
    emit4(z, ma + 3, na, c3a); emit4(z, ma + 3, nb, c3b);
    emit4(z, mb, na, c4a); emit4(z, mb, nb, c4b);
    emit4(z, mb + 1, na, c5a); emit4(z, mb + 1, nb, c5b);
    emit4(z, mb + 2, na, c6a); emit4(z, mb + 2, nb, c6b);
    emit4(z, mb + 3, na, c7a); emit4(z, mb + 3, nb, c7b);
    ${ROWSUM_STORE}
}
