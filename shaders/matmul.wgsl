// matmul.wgsl: C[z, m, n] = sum_k A[z, m, k] * B[z, k, n], then an epilogue.
//
// Tiles of 64 x 64 outputs per workgroup of 16 x 16 invocations, 4 x 4 outputs each,
// stepping K by 16 through workgroup memory. A and B are read through their strides, so
// transposed or sliced operands need no copy; rows/cols past M, N, K read as zero.
//
// metadata scalars: [0] M, [1] N, [2] K, [3] A stride along m, [4] A along k,
// [5] B along k, [6] B along n. Iteration space = the (broadcast) batch dims, one per
// grid z; operand 0 = A, 1 = B (their batch strides), 2 = bias (offset; its stride along
// n in the extra slot). C is written contiguously as (batch, M, N).
// ${EPILOGUE} stores `v` (the f32 dot product) for output (m, n) at flat index `ci`.

const BM: i32 = 64;
const BN: i32 = 64;
const BK: i32 = 16;
const TM: i32 = 4;
const TN: i32 = 4;

var<workgroup> a_tile: array<f32, 1024>;  // [k][m], BK * BM
var<workgroup> b_tile: array<f32, 1024>;  // [k][n], BK * BN

@compute @workgroup_size(16, 16)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>,
          @builtin(local_invocation_id) lid: vec3<u32>) {
    let M = metadata[0];
    let N = metadata[1];
    let K = metadata[2];
    let a_sm = metadata[3];
    let a_sk = metadata[4];
    let b_sk = metadata[5];
    let b_sn = metadata[6];
    let z = i32(wid.z);
    let bc = coords(z);
    let a_base = op_offset(0, bc);
    let b_base = op_offset(1, bc);
    let m0 = i32(wid.y) * BM;
    let n0 = i32(wid.x) * BN;
    let tx = i32(lid.x);
    let ty = i32(lid.y);
    let tid = ty * 16 + tx;

    var acc: array<f32, 16>;
    for (var k0 = 0; k0 < K; k0 += BK) {
        // 1024 elements of each tile, 4 per invocation
        for (var t = 0; t < 4; t++) {
            let e = tid + t * 256;
            let am = e / BK;
            let ak = e % BK;
            let gm = m0 + am;
            let gk = k0 + ak;
            var av = 0.0;
            if (gm < M && gk < K) { av = f32(load_a(a_base + gm * a_sm + gk * a_sk)); }
            a_tile[ak * BM + am] = av;
            let bk = e / BN;
            let bn = e % BN;
            let hk = k0 + bk;
            let hn = n0 + bn;
            var bv = 0.0;
            if (hk < K && hn < N) { bv = f32(load_b(b_base + hk * b_sk + hn * b_sn)); }
            b_tile[bk * BN + bn] = bv;
        }
        workgroupBarrier();
        for (var kk = 0; kk < BK; kk++) {
            var ar: array<f32, 4>;
            var br: array<f32, 4>;
            for (var i = 0; i < TM; i++) { ar[i] = a_tile[kk * BM + ty * TM + i]; }
            for (var j = 0; j < TN; j++) { br[j] = b_tile[kk * BN + tx * TN + j]; }
            for (var i = 0; i < TM; i++) {
                for (var j = 0; j < TN; j++) {
                    acc[i * TN + j] = fma(ar[i], br[j], acc[i * TN + j]);
                }
            }
        }
        workgroupBarrier();
    }

    for (var i = 0; i < TM; i++) {
        let m = m0 + ty * TM + i;
        for (var j = 0; j < TN; j++) {
            let n = n0 + tx * TN + j;
            if (m < M && n < N) {
                let v = acc[i * TN + j];
                let ci = (z * M + m) * N + n;
                ${EPILOGUE}
            }
        }
    }
}
