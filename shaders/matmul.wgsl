// matmul.wgsl: C[z, m, n] = sum_k A[z, m, k] * B[z, k, n], then an epilogue.
//
// A workgroup of WX x WY invocations computes a BM x BN tile of C; each invocation keeps
// a TM x TN block in named vec4 registers c<i><j>_<k> (row 4 * (i * WY + ty) + j of the
// tile, columns 4 * (k * WX + tx) ..+3), never in an array (arrays indexed in loops land
// in slow local memory on some compilers). K is stepped BK at a time through workgroup
// memory, A's tile stored k-major ([k][m / 4]) and B's ([k][n / 4]), so a step of k
// (mac) reads one vec4 per TM / 4 rows and TN / 4 columns and does TM * TN / 4 vec4
// FMAs. The next tile's global loads are issued into registers before the current
// tile's arithmetic, and with STAGES = 2 they land in the other half of the tiles, so
// one barrier per tile suffices (STAGES = 1: two, the tiles half the size). ${MAC}
// runs mac over the tile's BK steps: unrolled (constant tile indices) or as a loop.
//
// How a tile is fetched depends on the operand's layout (a section per variant,
// chosen by matmul.py; written for A, and renamed for B):
//   a_m4 (b_n4)   contiguous along m / n: vec4 loads that land in the tile as they are
//   a_k4 (b_k4)   contiguous along k (x W^T's W, a row-major A): vec4 loads along k,
//                 spread over four k rows of the tile
//   a_gen (b_gen) any strides: scalar loads, each bounds-checked
//   a_win (b_win) B only: the windows (im2col) matrix of an image, read from the image
//                 itself (an implicit-GEMM convolution: the columns never materialised)
// so transposed and sliced operands need no copy. Rows, columns and k past M, N and the
// split's end read as zero and are not written.
//
// Split-K: grid z = batch x splits; split s sums k in [s * KS, min(K, (s + 1) * KS)) and
// writes raw f32 partial sums (splits, batch, M, N) that matmul_reduce adds up and runs
// the epilogue on; it gives small M x N with long K enough workgroups to fill a GPU.
//
// metadata scalars: [0] M, [1] N, [2] K, [3] A stride along m, [4] A along k,
// [5] B along k, [6] B along n, [7] KS (k per split, a multiple of BK). Iteration space =
// the (broadcast) batch dims; operand 0 = A, 1 = B (their batch strides), 2 = bias
// (offset; its stride along n in the extra slot). C is written contiguously as
// (batch, M, N).
// ${EMIT4} stores the vec4 `v` of outputs (m, n..n+3) from flat index `ci`; ${EMIT1}
// stores one output `v` at (m, n) (matmul_reduce). ${ROWSUM_ACC} / ${ROWSUM_STORE}
// (empty unless asked for) also sum each row of A over k into `rowsum` (batch, M): a
// linear layer's bias gradient comes out of its weight gradient's matmul.
// With ${TILE_T} = f16 (the shader-f16 feature) tiles hold f16 and products are summed in
// f16 over a few tiles' BK steps (h registers), then added into the f32 accumulators;
// A's tile then holds each value twice (${A_WORDS} = 2 words per vec4 of rows), so that a
// row's value over four columns is read as a packed pair, with no splat (matmul.py's
// ${TILE_ACCESS} stores it, ${A_LETS} and ${FMAS} read and multiply).
// 16-bit operands read as vec4s are fetched as their raw words (${RAW_T}, by ${LD4W}) and
// widened (widen_a / widen_b) only when put into the tile: widening at the fetch would
// wait for the loads before the step's arithmetic, which the prefetch is there to hide.
// A and B may be of different float kinds, and C of a third.

//! section: matmul
const BM: i32 = ${BM};
const BN: i32 = ${BN};
const BK: i32 = ${BK};
const WX: i32 = ${WX};
const WY: i32 = ${WY};
const NT: i32 = ${WX} * ${WY};
const AM4: i32 = ${BM} / 4;
const BN4: i32 = ${BN} / 4;
const STAGES: i32 = ${STAGES};
const SA: i32 = ${BK} * ${BM} / 4;  // vec4s of one stage of A's tile
const SB: i32 = ${BK} * ${BN} / 4;

// Sizes, strides and where this workgroup is, read once from the metadata into
// per-invocation registers (a load from the metadata buffer inside the tile loop is one
// the compiler cannot always hoist).
var<private> M: i32;  var<private> N: i32;  var<private> K: i32;
var<private> sam: i32;  var<private> sak: i32;  var<private> sbk: i32;  var<private> sbn: i32;
var<private> a_base: i32;  var<private> b_base: i32;  // where this batch's A and B start
var<private> m0: i32;  var<private> n0: i32;  // this workgroup's tile
var<private> k_end: i32;  // the end of this split's K
var<private> tid: i32;

fn nbatch_of(nwg: vec3<u32>) -> i32 {
    let splits = max(1, (metadata[2] + metadata[7] - 1) / metadata[7]);
    return i32(nwg.z) / splits;
}

var<workgroup> a_tile: array<vec4<${TILE_T}>, ${A_WORDS} * STAGES * SA>;
var<workgroup> b_tile: array<vec4<${TILE_T}>, STAGES * SB>;

// The register block, (f16) its partial sums and A's row sums (ROWSUM_ACC): private, so
// that mac can add into them; inlined, they stay in registers.
@unroll(AG) @unroll(4) @unroll(BG) var<private> c#i#j_#k: vec4<f32>;
${DECL_H}
@unroll(AG) var<private> rs#i: vec4<f32>;

// B's loaders are these with B's names (matmul.py writes them into B_LOADERS): b_tile,
// fetch_b, put_b, b_at, b_base, n for m, N, n0, BN, BN4, sbn / sbk for sam / sak.
// put_a(at, r, x) stores fetch_a's x into the stage of the tile that starts at `at`.

//! section: a_m4 a_gen a_win
fn put_a(at: i32, r: i32, x: ${RAW_T}) { a_tile_put(at + tid + r * NT, widen_a(x)); }

//! section: a_m4
fn fetch_a(r: i32, k0: i32) -> ${RAW_T} {
    let v = tid + r * NT;
    let m = m0 + 4 * (v % AM4);
    let k = k0 + v / AM4;
    if (m < M && k < k_end) { return ${LD4W}_a(a_base + m + k * sak); }
    return ${RAW_T}();
}

//! section: a_gen
fn a_at(m: i32, k: i32) -> ${TILE_T} {
    if (m < M && k < k_end) { return ${LD}_a(a_base + m * sam + k * sak); }
    return ${TILE_T}();
}
fn fetch_a(r: i32, k0: i32) -> ${RAW_T} {
    let v = tid + r * NT;
    let m = m0 + 4 * (v % AM4);
    let k = k0 + v / AM4;
    return vec4<${TILE_T}>(a_at(m, k), a_at(m + 1, k), a_at(m + 2, k), a_at(m + 3, k));
}

//! section: a_win
// Element (k, m) of the windows matrix of an image x (N, C, H, W, any strides) is
// x[img, c, y0 + dy, x0 + dx], zero where that cell is padding: one index is an output
// pixel (img, oy, ox), whose part is (offset, y0 = oy * sh - ph, x0 = ox * sw - pw), the
// other a tap (c, i, j), whose part is (offset, dy = i * dh, dx = j * dw). WIN_K_TAPS:
// k indexes taps (a convolution, W @ cols), else pixels (its weight gradient,
// dY @ cols^T). Each invocation's four columns are the same at every k step (NT is a
// multiple of the tile's width in vec4s), so their parts are worked out once.
// metadata from WIN: H, W, kw, kh * kw, Wo, Ho * Wo, sh, sw, ph, pw, dh, dw, and x's
// strides along img, c, h, w.
const WIN: i32 = OPS_BASE + 3 * OP_STRIDE;
const WIN_K_TAPS: bool = ${WIN_K_TAPS};
@unroll(4) var<private> wcol#i: vec3<i32>;
var<private> wg: array<i32, 16>;

fn win_pixel(p: i32) -> vec3<i32> {
    let img = p / wg[5];
    let r = p % wg[5];
    let y0 = (r / wg[4]) * wg[6] - wg[8];
    let x0 = (r % wg[4]) * wg[7] - wg[9];
    return vec3<i32>(img * wg[12] + y0 * wg[14] + x0 * wg[15], y0, x0);
}
fn win_tap(t: i32) -> vec3<i32> {
    let c = t / wg[3];
    let r = t % wg[3];
    let dy = (r / wg[2]) * wg[10];
    let dx = (r % wg[2]) * wg[11];
    return vec3<i32>(c * wg[13] + dy * wg[14] + dx * wg[15], dy, dx);
}
fn win_part(i: i32, taps: bool) -> vec3<i32> {
    if (taps) { return win_tap(i); }
    return win_pixel(i);
}
fn win_setup() {
    @unroll(16) wg[#i] = metadata[WIN + #i];
    let m = m0 + 4 * (tid % AM4);
    // (a column past the matrix: its y0 far outside the image, so it reads as zero)
    @unroll(4) wcol#i = select(vec3<i32>(0, -(1 << 28), 0), win_part(m + #i, !WIN_K_TAPS), m + #i < M);
}
fn win_at(kp: vec3<i32>, cp: vec3<i32>) -> ${TILE_T} {
    let y = kp.y + cp.y;
    let x = kp.z + cp.z;
    if (y >= 0 && y < wg[0] && x >= 0 && x < wg[1]) { return ${LD}_a(a_base + kp.x + cp.x); }
    return ${TILE_T}();
}
fn fetch_a(r: i32, k0: i32) -> ${RAW_T} {
    let k = k0 + (tid + r * NT) / AM4;
    if (k >= k_end) { return ${RAW_T}(); }
    let kp = win_part(k, WIN_K_TAPS);
    return vec4<${TILE_T}>(win_at(kp, wcol0), win_at(kp, wcol1), win_at(kp, wcol2), win_at(kp, wcol3));
}

//! section: a_k4
// Invocation v takes row v % BM and k quad v / BM: neighbours write neighbouring words of
// the tile (no bank conflicts), each reading 16 contiguous bytes of its row.
fn fetch_a(r: i32, k0: i32) -> ${RAW_T} {
    let v = tid + r * NT;
    let m = m0 + v % BM;
    let k = k0 + 4 * (v / BM);
    if (m < M && k < k_end) { return ${LD4W}_a(a_base + m * sam + k); }
    return ${RAW_T}();
}
fn put_a(at: i32, r: i32, w: ${RAW_T}) {  // four k rows, one component each
    let x = widen_a(w);
    let v = tid + r * NT;
    let ml = v % BM;
    let i = at + 4 * (v / BM) * AM4 + ml / 4;
    let c = ml % 4;
    a_tile_set(i, c, x.x);
    a_tile_set(i + AM4, c, x.y);
    a_tile_set(i + 2 * AM4, c, x.z);
    a_tile_set(i + 3 * AM4, c, x.w);
}

//! section: bias
fn bias_at(n: i32) -> f32 {
    return f32(load_bias(metadata[OPS_BASE + 2 * OP_STRIDE] + n * op_extra(2)));
}

//! section: row_value
// The epilogue's row operand (operand 3, contiguous along m): a value per output row.
var<private> rowop_base: i32;
fn row_value(m: i32) -> f32 { return f32(load_rowop(rowop_base + m)); }

//! section: elem_value
// The epilogue's operand of C's shape (operand 4, rows of N contiguous values).
var<private> elemop_base: i32;
fn elem_value(m: i32, n: i32) -> f32 { return f32(load_elemop(elemop_base + m * N + n)); }

//! section: rowsum
fn rowsum_store(z: i32, m: i32, v: f32) { if (m < M) { store_rowsum(z * M + m, v); } }

//! section: matmul
${TILE_ACCESS}
${WIDEN_A}
${B_LOADERS}

// One step of k: the vec4s of A's tile from index at_a (this invocation's rows, WY
// apart) times those of B's from at_b (its columns, WX apart), into the register block.
fn mac(at_a: i32, at_b: i32) {
    ${A_LETS}
    @unroll(BG) let b#i = b_tile[at_b + #i * WX];
    ${ROWSUM_ACC}
    ${FMAS}
}

fn emit4(z: i32, m: i32, n: i32, v: vec4<f32>) {
    if (m < M) {
        let ci = (z * M + m) * N + n;
        ${EMIT4}
    }
}

@compute @workgroup_size(${WX}, ${WY})
fn matmul(@builtin(workgroup_id) wid: vec3<u32>,
          @builtin(local_invocation_id) lid: vec3<u32>,
          @builtin(num_workgroups) nwg: vec3<u32>) {
    M = metadata[0];
    N = metadata[1];
    K = metadata[2];
    sam = metadata[3];
    sak = metadata[4];
    sbk = metadata[5];
    sbn = metadata[6];
    let ks = metadata[7];
    let splits = max(1, (metadata[2] + ks - 1) / ks);  // uniform (K is private)
    let z = i32(wid.z) / splits;
    let split = i32(wid.z) % splits;
    let bc = coords(z);
    a_base = op_offset(0, bc);
    b_base = op_offset(1, bc);
    m0 = i32(wid.y) * BM;
    n0 = i32(wid.x) * BN;
    let k_begin = split * ks;
    // the K loop holds barriers: its bound must be uniform, so it is computed from the
    // metadata (read-only storage) here, not read back from the private k_end
    let k_stop = min(metadata[2], k_begin + ks);
    k_end = k_stop;
    tid = i32(lid.y) * WX + i32(lid.x);
    // this invocation's column and row of register blocks (see matmul.py's LANES)
    let tx = ${TX};
    let ty = ${TY};
    ${WIN_SETUP}
    ${EPILOGUE_SETUP}

    @unroll(LA) var ra#i = fetch_a(#i, k_begin);
    @unroll(LB) var rb#i = fetch_b(#i, k_begin);
    @unroll(LA) put_a(0, #i, ra#i);
    @unroll(LB) put_b(0, #i, rb#i);
    workgroupBarrier();
    var st = 0;  // the stage the arithmetic reads
    for (var k0 = k_begin; k0 < k_stop; k0 += BK) {
        @unroll(LA) ra#i = fetch_a(#i, k0 + BK);
        @unroll(LB) rb#i = fetch_b(#i, k0 + BK);
        let at_a = st * SA + ty;
        let at_b = st * SB + tx;
        ${MAC}
        ${FLUSH_H}
        st = (st + 1) % STAGES;
        if (STAGES == 1) { workgroupBarrier(); }  // all done reading the one stage
        @unroll(LA) put_a(st * SA, #i, ra#i);
        @unroll(LB) put_b(st * SB, #i, rb#i);
        workgroupBarrier();
    }

    let zo = select(z, split * nbatch_of(nwg) + z, splits > 1);
    @unroll(AG) @unroll(4) @unroll(BG) emit4(zo, m0 + 4 * (#i * WY + ty) + #j, n0 + 4 * (#k * WX + tx), c#i#j_#k);
    ${ROWSUM_STORE}
}

//! section: matmul_reduce
// One invocation per output element of (batch, M, N), or per pair of them (${UNIT} 2:
// N even and a 16-bit C, so each word of C is written whole by one invocation): the sum
// of the splits' partial sums (operand `part`, (splits, batch, M, N)), then the
// epilogue; the invocations of column 0 also add up the row sums' partials (splits,
// batch, M) when asked for.
// metadata: [0] M, [1] N, [2] batch x M x N, [3] splits; operand 2 = bias as above.
@compute @workgroup_size(256)
fn matmul_reduce(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let ci = ${UNIT} * flat_id(wid, nwg, lid, 256u);
    let total = metadata[2];
    if (ci >= total) { return; }
    let N = metadata[1];
    let n = ci % N;
    var v = ${ACC_T}(0.0);
    for (var s = 0; s < metadata[3]; s++) { v += ${LOAD_PART}(s * total + ci); }
    ${EMIT1}
    ${ROWSUM_REDUCE}
}
