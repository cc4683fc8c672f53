// attention.wgsl: flash attention, forward and backward, any sequence lengths, head dims
// up to 128, an optional causal mask (top-left aligned as in PyTorch: query i sees keys
// j <= i) and an optional user mask (boolean: attend where true; float: added to the
// scores), broadcast over the batch dims.
//
// P invocations share one query row (forward, dq) or key row (dk, dv), each holding a
// slice of DQ (DV) vec4s of its head-dim vectors in named registers (r<name><i>, from
// `@unroll` lines: see shaders.py), never in arrays; slice `part` holds vec4s part,
// part + P, ... (neighbouring lanes read neighbouring vec4s of a tile row). P > 1 keeps
// long head dims in registers, or lets an invocation of the forward hold R rows: the
// slices' partial dot products are added up by subgroup shuffles or through workgroup
// memory, once per group of keys. Keys (or queries) pass through workgroup memory in blocks of
// BK, taken KG at a time (KG unrolled: KG = BK on GPUs, smaller where the compiler is
// slow); scores never exist whole: a group's KG scores sit in registers, and a running
// max and sum rescale the partial output once per group (online softmax). Keys past the end
// and masked keys count as -inf; a row with no visible key gives zeros (and zero
// gradients), as PyTorch. Head dims not a multiple of 4 read as zero past their end.
//
// Grid: x = batch (the broadcast leading dims, iteration space), y = blocks of BQ rows.
// Every operand has its batch strides, an offset and its sequence stride in the extra
// slot; the head dim is contiguous (stride 1). The mask has its key stride in the extra
// slot and its query stride in metadata[4].
// metadata: [0] SQ, [1] SK, [2] causal, [3] scale (f32 bits), [4] mask query stride.
// Placeholders: HELPERS (row loads and stores, made by attention.py), MASK (adds the
// user mask to score `s` of query qi and key kj, or nothing), DOTS (score(j), dprob(j):
// this invocation's slice of registers dotted with row j of a tile; accumulate(j, x),
// add_dv, add_dk: x times row j of a tile added into a slice of registers).

const D4: i32 = ${D4};
const V4: i32 = ${V4};
const P: i32 = ${P};
const DQ: i32 = ${DQ};
const DV: i32 = ${DV};
const BQ: i32 = ${BQ};
const BK: i32 = ${BK};
const KG: i32 = ${KG};  // keys (queries) a step of the inner loop takes, unrolled
// GROUPS opens the loop over the block's groups: `for (var jj = 0; jj < BK; jj += KG) {`,
// or `{ const jj = 0;` when one group is the whole block (KG = BK): every index is then a
// constant, as a GPU compiler needs to keep the scores in registers (a loop there made the
// forward 1.4x and, at KG = 32, 6x slower on an H200).
const R: i32 = ${R};  // rows an invocation (forward)
const NT: i32 = ${BQ} / ${R} * ${P};

var<private> SQ: i32;
var<private> SK: i32;
var<private> causal: bool;
var<private> bc: array<i32, 8>;
var<private> row: i32;   // this invocation's row in the workgroup
var<private> part: i32;  // and its slice of the head dim

fn setup(wid: vec3<u32>, lid: u32) {
    SQ = metadata[0];
    SK = metadata[1];
    causal = metadata[2] != 0;
    bc = coords(i32(wid.x));
    row = i32(lid) / P;
    part = i32(lid) % P;
}

// The block of rows a workgroup of the forward or dq takes, the last first: GPUs start
// workgroups about in the order of their index, x (the batch) fastest, so that with the
// causal mask the blocks with the most keys start first and the short ones fill in after
// (on an H200 the causal forward of (16, 8, 512, 64) took 0.48-0.53 ms against 0.65 in
// index order, of (8, 16, 4096, 64) 9.25 against 9.86).
fn last_first(wid: vec3<u32>, nwg: vec3<u32>) -> i32 { return i32(nwg.y - 1u - wid.y); }

fn row_at(k: i32, r: i32) -> i32 { return op_offset(k, bc) + r * op_extra(k); }
fn hsum(v: vec4<f32>) -> f32 { return v.x + v.y + v.z + v.w; }

${HELPERS}

// Score s of query qi and key kj after the masks (-inf where not visible).
fn masked(s: f32, qi: i32, kj: i32) -> f32 {
    var x = s;
    ${MASK}
    let seen = kj < SK && qi < SQ && (!causal || kj <= qi);
    return select(neg_inf(), x, seen);
}

// With subgroups, the P slices of a row are adjacent lanes of one subgroup (SG_ROWS sets
// row and part from the subgroup builtins) and add up their partial sums by shuffles
// (EXCHANGE_S, EXCHANGE_SG). Without, the partial sums of the P slices of a row are
// exchanged through workgroup memory, laid out
// [slot][j][invocation] (j < KG) so that neighbouring invocations touch neighbouring
// words. Every invocation has read them before any writes them again: the exchange
// ends with a barrier.
var<workgroup> xs: array<f32, ${XS}>;
fn slices_sum(slot: i32, j: i32) -> f32 {
    let base = (slot * KG + j) * NT + row * P;
    var t = 0.0;
    for (var p = 0; p < P; p++) { t += xs[base + p]; }
    return t;
}
fn put_slice(slot: i32, j: i32, v: f32) { xs[(slot * KG + j) * NT + row * P + part] = v; }

// Keys a block of queries [q0, q0 + BQ) may see: all, or up to its last query if causal.
// Loops over blocks hold barriers, so their bounds must be uniform: they are read from
// the metadata (read-only storage), never from the private copies, which WGSL's
// uniformity analysis counts as varying per invocation.
fn key_end(q0: i32) -> i32 {
    let sk = metadata[1];
    return select(sk, min(sk, q0 + BQ), metadata[2] != 0);
}

//! section: attention_forward attention_dq
var<workgroup> k_tile: array<vec4<f32>, BK * D4>;
var<workgroup> v_tile: array<vec4<f32>, BK * V4>;

// A block of keys [k0, k0 + BK) passes through registers into workgroup memory: each
// invocation fetches its share (tile elements lid, lid + NT, ...) of the next block
// before working on the current one, so that the global loads' latency hides behind that
// work instead of stalling the workgroup at every block (on an H200 a workgroup of a
// 64-wide head holds most of a multiprocessor's registers: no other hides it). Zeros past
// the end, and nothing fetched at or past k_stop.
const LK: i32 = ${LK};  // (BK D4 + NT - 1) / NT
const LV: i32 = ${LV};
@unroll(LK) var<private> pk#i: vec4<f32>;
@unroll(LV) var<private> pv#i: vec4<f32>;

fn fetch_k(k0: i32, t: i32, k_stop: i32) -> vec4<f32> {
    let kj = k0 + t / D4;
    if (t >= BK * D4 || kj >= min(SK, k_stop)) { return vec4<f32>(); }
    return get_k(row_at(1, kj), 4 * (t % D4));
}

fn fetch_v(k0: i32, t: i32, k_stop: i32) -> vec4<f32> {
    let kj = k0 + t / V4;
    if (t >= BK * V4 || kj >= min(SK, k_stop)) { return vec4<f32>(); }
    return get_v(row_at(2, kj), 4 * (t % V4));
}

fn fetch_kv_block(k0: i32, lid: i32, k_stop: i32) {
    @unroll(LK) pk#i = fetch_k(k0, lid + NT * #i, k_stop);
    @unroll(LV) pv#i = fetch_v(k0, lid + NT * #i, k_stop);
}

// The fetched block into the tiles (between barriers).
fn store_kv_block(lid: i32) {
    @unroll(LK) if (lid + NT * #i < BK * D4) { k_tile[lid + NT * #i] = pk#i; }
    @unroll(LV) if (lid + NT * #i < BK * V4) { v_tile[lid + NT * #i] = pv#i; }
}

// Whether no key of block [k0, k0 + BK) is past the end or, causal, past the diagonal of
// the workgroup's first row q0: a uniform test (read from the metadata) that lets most
// blocks of long sequences skip the masking.
fn block_clear(k0: i32, q0: i32) -> bool {
    return metadata[1] >= k0 + BK && (metadata[2] == 0 || k0 + BK <= q0 + 1);
}

//! section: attention_forward
// R rows an invocation (rows qi ..qi + R - 1): each vec4 of k and v read from workgroup
// memory serves R rows, R times the arithmetic per load of the one-row form.
@unroll(R) var<private> m_run#i: f32;
@unroll(R) var<private> l_run#i: f32;
@unroll(R) @unroll(DQ) var<private> rq#i_#j: vec4<f32>;
@unroll(R) @unroll(DV) var<private> ro#i_#j: vec4<f32>;
${DOTS}

// This invocation's slice of query row r, times scale (zeros past the end).
fn q_slice(r: i32, c: i32) -> vec4<f32> {
    if (r >= SQ) { return vec4<f32>(); }
    return scalar_f(3) * get_q(row_at(0, r), c);
}

fn put_o(r: i32, c: i32, o: vec4<f32>, l: f32) {
    if (r < SQ) { put_out(row_at(3, r), c, o * select(1.0 / l, 0.0, l == 0.0)); }
}

fn put_lse(r: i32, m: f32, l: f32) {
    if (r < SQ && part == 0) {
        store_lse(row_at(4, r), select(m + log(l), neg_inf(), l == 0.0));
    }
}

// operands: 0 q, 1 k, 2 v, 3 out, 4 lse (f32), 5 mask
@compute @workgroup_size(NT)
fn attention_forward(@builtin(workgroup_id) wid: vec3<u32>,
                     @builtin(num_workgroups) nwg: vec3<u32>,
                     @builtin(local_invocation_index) lidu: u32${SG_ARGS}) {
    setup(wid, lidu);
    ${SG_ROWS}
    let lid = i32(lidu);
    let q0 = last_first(wid, nwg) * BQ;
    let qi = q0 + row * R;
    @unroll(R) @unroll(DQ) rq#i_#j = q_slice(qi + #i, 4 * (#j * P + part));
    @unroll(R) m_run#i = neg_inf();
    @unroll(R) l_run#i = 0.0;
    let k_stop = key_end(q0);
    fetch_kv_block(0, lid, k_stop);
    for (var k0 = 0; k0 < k_stop; k0 += BK) {
        workgroupBarrier();
        store_kv_block(lid);
        workgroupBarrier();
        fetch_kv_block(k0 + BK, lid, k_stop);
        let clear = block_clear(k0, q0) && !${HAS_MASK};
        ${GROUPS}
            @unroll(KG) let sv#i = score(jj + #i);
            @unroll(KG) @unroll(R) var s#i_#j = sv#i[#j];
            ${EXCHANGE_S}
            if (!clear) {
                @unroll(KG) @unroll(R) s#i_#j = masked(s#i_#j, qi + #j, k0 + jj + #i);
            }
            @unroll(R) var mb#i = m_run#i;
            @unroll(KG) @unroll(R) mb#j = max(mb#j, s#i_#j);
            // all masked so far: mb = -inf; p and alpha then come out 0, never NaN
            @unroll(R) let mref#i = select(mb#i, 0.0, mb#i == neg_inf());
            @unroll(R) let alpha#i = exp(m_run#i - mref#i);
            @unroll(R) l_run#i *= alpha#i;
            @unroll(R) @unroll(DV) ro#i_#j *= alpha#i;
            @unroll(KG) @unroll(R) let p#i_#j = exp(s#i_#j - mref#j);
            @unroll(KG) @unroll(R) l_run#j += p#i_#j;
            @unroll(KG) accumulate(jj + #i, ${PACK_P});
            @unroll(R) m_run#i = mb#i;
        }
    }
    @unroll(R) @unroll(DV) put_o(qi + #i, 4 * (#j * P + part), ro#i_#j, l_run#i);
    @unroll(R) put_lse(qi + #i, m_run#i, l_run#i);
}

//! section: attention_dq
@unroll(DQ) var<private> rq#i: vec4<f32>;
@unroll(DV) var<private> rg#i: vec4<f32>;
@unroll(DQ) var<private> rdq#i: vec4<f32>;
${DOTS}

// operands: 0 q, 1 k, 2 v, 3 out, 4 lse, 5 gout, 6 dq, 7 delta (f32, written here for
// attention_dkdv), 8 mask. P = exp(s - lse), dS = P * (dO . v - delta), dQ = scale * dS K,
// delta = rowsum(dO * O).
@compute @workgroup_size(NT)
fn attention_dq(@builtin(workgroup_id) wid: vec3<u32>,
                @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lidu: u32${SG_ARGS}) {
    setup(wid, lidu);
    ${SG_ROWS}
    let lid = i32(lidu);
    let q0 = last_first(wid, nwg) * BQ;
    let qi = q0 + row;
    let live = qi < SQ;
    let scale = scalar_f(3);
    if (live) {
        let qb = row_at(0, qi);
        @unroll(DQ) rq#i = scale * get_q(qb, 4 * (#i * P + part));
    }
    var lse = 0.0;
    var dl = 0.0;
    if (live) {
        let gb = row_at(5, qi);
        let ob = row_at(3, qi);
        var d = vec4<f32>();
        @unroll(DV) rg#i = get_gout(gb, 4 * (#i * P + part));
        @unroll(DV) d = fma(rg#i, get_out(ob, 4 * (#i * P + part)), d);
        dl = hsum(d);
        lse = load_lse(row_at(4, qi));
    }
    put_slice(0, 0, dl);
    workgroupBarrier();
    let delta = slices_sum(0, 0);
    if (live && part == 0) { store_delta(row_at(7, qi), delta); }
    // a row that saw no key (lse = -inf) has P = 0: its gradient is zero
    let lref = select(lse, pos_inf(), lse == neg_inf());
    let k_stop = key_end(q0);
    fetch_kv_block(0, lid, k_stop);
    for (var k0 = 0; k0 < k_stop; k0 += BK) {
        workgroupBarrier();
        store_kv_block(lid);
        workgroupBarrier();
        fetch_kv_block(k0 + BK, lid, k_stop);
        ${GROUPS}
            @unroll(KG) var s#i = score(jj + #i);
            @unroll(KG) var g#i = dprob(jj + #i);
            ${EXCHANGE_SG}
            @unroll(KG) accumulate(jj + #i, exp(masked(s#i, qi, k0 + jj + #i) - lref) * (g#i - delta));
        }
    }
    if (live) {
        let db = row_at(6, qi);
        @unroll(DQ) put_dq(db, 4 * (#i * P + part), rdq#i * scale);
    }
}

//! section: attention_dkdv
@unroll(DQ) var<private> rk#i: vec4<f32>;
@unroll(DV) var<private> rv#i: vec4<f32>;
@unroll(DQ) var<private> rdk#i: vec4<f32>;
@unroll(DV) var<private> rdv#i: vec4<f32>;

var<workgroup> q_tile: array<vec4<f32>, BK * D4>;
var<workgroup> go_tile: array<vec4<f32>, BK * V4>;
var<workgroup> lse_tile: array<f32, BK>;
var<workgroup> delta_tile: array<f32, BK>;

${DOTS}

// One row per key. operands: 0 q, 1 k, 2 v, 3 (unused), 4 lse, 5 gout, 6 dk, 7 delta,
// 8 dv, 9 mask. dV = P^T dO, dK = scale * dS^T Q, with blocks of BK queries in
// workgroup memory.
@compute @workgroup_size(NT)
fn attention_dkdv(@builtin(workgroup_id) wid: vec3<u32>,
                  @builtin(local_invocation_index) lidu: u32${SG_ARGS}) {
    setup(wid, lidu);
    ${SG_ROWS}
    let lid = i32(lidu);
    let k0 = i32(wid.y) * BQ;
    let kj = k0 + row;
    let live = kj < SK;
    let scale = scalar_f(3);
    if (live) {
        let kb = row_at(1, kj);
        @unroll(DQ) rk#i = scale * get_k(kb, 4 * (#i * P + part));
        let vb = row_at(2, kj);
        @unroll(DV) rv#i = get_v(vb, 4 * (#i * P + part));
    }
    // causal: queries before k0 see none of this block's keys
    let q_start = select(0, (k0 / BK) * BK, metadata[2] != 0);
    let q_stop = metadata[0];  // uniform, as key_end's
    for (var q0 = q_start; q0 < q_stop; q0 += BK) {
        for (var t = lid; t < BK * D4; t += NT) {
            let qi = q0 + t / D4;
            var val = vec4<f32>();
            if (qi < SQ) { val = get_q(row_at(0, qi), 4 * (t % D4)); }
            q_tile[t] = val;
        }
        for (var t = lid; t < BK * V4; t += NT) {
            let qi = q0 + t / V4;
            var val = vec4<f32>();
            if (qi < SQ) { val = get_gout(row_at(5, qi), 4 * (t % V4)); }
            go_tile[t] = val;
        }
        if (lid < BK) {
            let qi = q0 + lid;
            var l = pos_inf();  // past the end: P = 0
            var dl = 0.0;
            if (qi < SQ) {
                l = load_lse(row_at(4, qi));
                dl = load_delta(row_at(7, qi));
            }
            // a row that saw no key (lse = -inf) has P = 0
            lse_tile[lid] = select(l, pos_inf(), l == neg_inf());
            delta_tile[lid] = dl;
        }
        workgroupBarrier();
        ${GROUPS}
            @unroll(KG) var s#i = score(jj + #i);
            @unroll(KG) var g#i = dprob(jj + #i);
            ${EXCHANGE_SG}
            @unroll(KG) let p#i = exp(masked(s#i, q0 + jj + #i, kj) - lse_tile[jj + #i]);
            @unroll(KG) add_dv(jj + #i, p#i);
            @unroll(KG) add_dk(jj + #i, p#i * (g#i - delta_tile[jj + #i]));
        }
        workgroupBarrier();
    }
    if (live) {
        let kb = row_at(6, kj);
        @unroll(DQ) put_dk(kb, 4 * (#i * P + part), rdk#i * scale);
        let vb = row_at(8, kj);
        @unroll(DV) put_dv(vb, 4 * (#i * P + part), rdv#i);
    }
}

//! section: attention_forward_tiled
// The forward by register tiles: a workgroup takes BQ query rows and walks the keys in
// blocks of BK through workgroup memory. Invocation (ty, tx) holds, in phase 1 (q k^T),
// the scores of RG groups of 4 rows (4 (ty + TY g) ..+3) and KH groups of 4 keys
// (4 (tx + TX h) ..+3): per step of the head dim it reads RG + KH vec4s and does
// 16 RG KH products; in phase 2 (P v), the output of the same rows and CG vec4 columns
// (tx + TX c): per key RG + CG vec4s read, 16 RG CG products. Between the two, the rows
// are turned into probabilities (running max and sum, kept in workgroup memory, as the
// one-row kernel does in registers), each row's rescale factor left in alpha_t: phase 1
// and phase 2 exchange nothing but through workgroup memory, and need no subgroups.
// Neighbouring invocations read neighbouring vec4s of every tile. q^T (times scale)
// stays in workgroup memory for the whole walk; with KV_SHARED k^T and v take turns in
// one tile (v loaded once phase 1 is done), for long head dims. D_STEPS and K_STEPS open
// the phases' loops over the head dim (DU steps at a time) and the block's keys (KU): on
// GPUs one pass, every tile index a constant (`{ const d = 0;`), as a GPU compiler needs
// to fold them; software adapters loop, which LLVM compiles much faster.
const BQ4: i32 = ${BQ} / 4;
const BK4: i32 = ${BK} / 4;
const RG: i32 = ${RG};
const KH: i32 = ${KH};
const CG: i32 = ${CG};
const TX: i32 = ${TX};   // BK / (4 KH) = V4 / CG
const TY: i32 = ${TY};   // BQ / (4 RG)
const NTT: i32 = ${TX} * ${TY};  // invocations

var<workgroup> qt: array<vec4<f32>, D4 * BQ>;    // [d][rows / 4]
var<workgroup> kt: array<vec4<f32>, ${KT}>;      // [d][keys / 4], and v with KV_SHARED
${VT_DECL}
var<workgroup> pt: array<vec4<f32>, BK * BQ4>;   // scores, then P: [key][rows / 4]
var<workgroup> alpha_t: array<vec4<f32>, BQ4>;   // per row: this block's rescale; 1 / l
var<workgroup> m_t: array<f32, BQ>;              // per row: running max and sum
var<workgroup> l_t: array<f32, BQ>;

@unroll(CG) @unroll(RG) @unroll(4) var<private> o#i_#j#k: vec4<f32>;  // col group, rows

// Rows [q0, q0 + BQ) of q, times scale, transposed into qt (zeros past the end).
fn load_q_tile(q0: i32, lid: i32, scale: f32) {
    for (var t = lid; t < BQ * D4; t += NTT) {
        let r = t % BQ;
        let d4 = t / BQ;
        var val = vec4<f32>();
        if (q0 + r < SQ) { val = scale * get_q(row_at(0, q0 + r), 4 * d4); }
        @unroll(4) qt[(4 * d4 + #i) * BQ4 + r / 4][r % 4] = val[#i];
    }
}

// Keys [k0, k0 + BK) of k, transposed into kt: neighbouring invocations take
// neighbouring keys, so that their stores land in neighbouring words.
fn load_k_tile(k0: i32, lid: i32) {
    for (var t = lid; t < BK * D4; t += NTT) {
        let kj = t % BK;
        let d4 = t / BK;
        var val = vec4<f32>();
        if (k0 + kj < SK) { val = get_k(row_at(1, k0 + kj), 4 * d4); }
        @unroll(4) kt[(4 * d4 + #i) * BK4 + kj / 4][kj % 4] = val[#i];
    }
}

fn load_v_tile(k0: i32, lid: i32) {
    for (var t = lid; t < BK * V4; t += NTT) {
        let kj = k0 + t / V4;
        var val = vec4<f32>();
        if (kj < SK) { val = get_v(row_at(2, kj), 4 * (t % V4)); }
        ${VT}[t] = val;
    }
}

fn put_row(r: i32, c4: i32, v: vec4<f32>) {
    if (r < SQ) { put_out(row_at(3, r), 4 * c4, v); }
}

// operands: 0 q, 1 k, 2 v, 3 out, 4 lse (f32), 5 mask
@compute @workgroup_size(${TX} * ${TY})
fn attention_forward_tiled(@builtin(workgroup_id) wid: vec3<u32>,
                           @builtin(local_invocation_index) lidu: u32) {
    setup(wid, lidu);
    let lid = i32(lidu);
    let ty = lid / TX;
    let tx = lid % TX;
    let q0 = i32(wid.y) * BQ;
    for (var r = lid; r < BQ; r += NTT) {
        m_t[r] = neg_inf();
        l_t[r] = 0.0;
    }
    load_q_tile(q0, lid, scalar_f(3));
    let k_stop = key_end(q0);
    for (var k0 = 0; k0 < k_stop; k0 += BK) {
        load_k_tile(k0, lid);
        ${LOAD_V_EARLY}
        workgroupBarrier();
        // s<h><c>_<g>: key 4 (tx + TX h) + c, rows 4 (ty + TY g) ..+3
        @unroll(KH) @unroll(4) @unroll(RG) var s#i#j_#k = vec4<f32>();
        ${D_STEPS}
            @unroll(DU) @unroll(RG) let qv#i_#j = qt[(d + #i) * BQ4 + ty + TY * #j];
            @unroll(DU) @unroll(KH) let kv#i_#j = kt[(d + #i) * BK4 + tx + TX * #j];
            @unroll(DU) @unroll(KH) @unroll(4) @unroll(RG) s#j#k_#l = fma(qv#i_#l, vec4<f32>(kv#i_#j[#k]), s#j#k_#l);
        }
        // keys past the end, past the diagonal or masked out: -inf (a uniform test,
        // true for most blocks of long sequences, skips the masking)
        let clear = metadata[1] >= k0 + BK && (metadata[2] == 0 || k0 + BK <= q0 + 1);
        if (!clear || ${HAS_MASK}) {
            @unroll(KH) @unroll(4) @unroll(RG) @unroll(4) s#i#j_#k[#l] = masked(s#i#j_#k[#l], q0 + 4 * (ty + TY * #k) + #l, k0 + 4 * (tx + TX * #i) + #j);
        }
        @unroll(KH) @unroll(4) @unroll(RG) pt[(4 * (tx + TX * #i) + #j) * BQ4 + ty + TY * #k] = s#i#j_#k;
        workgroupBarrier();
        ${LOAD_V_LATE}
        for (var r = lid; r < BQ; r += NTT) {  // scores to probabilities, a row each
            let r4 = r / 4;
            let rc = r % 4;
            let m_old = m_t[r];
            var mb = m_old;
            for (var j = 0; j < BK; j++) { mb = max(mb, pt[j * BQ4 + r4][rc]); }
            // all masked so far: mb = -inf; p and alpha then come out 0, never NaN
            let mref = select(mb, 0.0, mb == neg_inf());
            let alpha = exp(m_old - mref);
            var l = 0.0;
            for (var j = 0; j < BK; j++) {
                let p = exp(pt[j * BQ4 + r4][rc] - mref);
                pt[j * BQ4 + r4][rc] = p;
                l += p;
            }
            l_t[r] = l_t[r] * alpha + l;
            m_t[r] = mb;
            alpha_t[r4][rc] = alpha;
        }
        workgroupBarrier();
        @unroll(RG) let al#i = alpha_t[ty + TY * #i];
        @unroll(CG) @unroll(RG) @unroll(4) o#i_#j#k *= al#j[#k];
        ${K_STEPS}
            @unroll(KU) @unroll(RG) let pv#i_#j = pt[(j + #i) * BQ4 + ty + TY * #j];
            @unroll(KU) @unroll(CG) let vv#i_#j = ${VT}[(j + #i) * V4 + tx + TX * #j];
            @unroll(KU) @unroll(CG) @unroll(RG) @unroll(4) o#j_#k#l = fma(vec4<f32>(pv#i_#k[#l]), vv#i_#j, o#j_#k#l);
        }
        workgroupBarrier();
    }
    for (var r = lid; r < BQ; r += NTT) {
        let l = l_t[r];
        alpha_t[r / 4][r % 4] = select(1.0 / l, 0.0, l == 0.0);
        if (q0 + r < SQ) {
            store_lse(row_at(4, q0 + r), select(m_t[r] + log(l), neg_inf(), l == 0.0));
        }
    }
    workgroupBarrier();
    @unroll(RG) let inv#i = alpha_t[ty + TY * #i];
    @unroll(RG) @unroll(4) @unroll(CG) put_row(q0 + 4 * (ty + TY * #i) + #j, tx + TX * #k, o#k_#i#j * inv#i[#j]);
}
