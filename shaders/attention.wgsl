// attention.wgsl: flash attention, forward and backward, any sequence lengths, head dims
// up to 128, optional causal mask (top-left aligned as in PyTorch: query i sees keys
// j <= i).
//
// One invocation per query row (forward, dq) or key row (dk, dv); its head-dim vectors
// live in named vec4 registers (r<name><i>, from `@unroll` lines, see shaders.py), never in arrays. Keys
// (or queries) pass through workgroup memory in blocks of ${BK}; scores never exist
// whole; a running max and sum rescale the partial output (online softmax). Keys past
// the end and masked keys count as -inf; head dims not a multiple of 4 read as zero.
//
// Grid: x = blocks of ${BQ} rows, y = batch (the broadcast leading dims, iteration
// space). Every operand has its batch strides, an offset and its sequence stride in the
// extra slot; the head dim is contiguous (stride 1).
// metadata: [0] SQ, [1] SK, [2] causal, [3] scale (f32 bits).

const DQK: i32 = ${DQK};
const DV: i32 = ${DV};
const D4: i32 = ${D4};
const V4: i32 = ${V4};
const BQ: i32 = ${BQ};
const BK: i32 = ${BK};

fn row_at(k: i32, bc: array<i32, 8>, r: i32) -> i32 { return op_offset(k, bc) + r * op_extra(k); }

fn visible(qi: i32, kj: i32) -> bool {
    return kj < metadata[1] && qi < metadata[0] && (metadata[2] == 0 || kj <= qi);
}

// Four head-dim elements c..c+3 of a row starting at r (zero past the head dim).
fn q4(r: i32, c: i32) -> vec4<f32> {
    var v = vec4<f32>();
    for (var t = 0; t < 4; t++) { if (c + t < DQK) { v[t] = f32(load_q(r + c + t)); } }
    return v;
}
fn k4(r: i32, c: i32) -> vec4<f32> {
    var v = vec4<f32>();
    for (var t = 0; t < 4; t++) { if (c + t < DQK) { v[t] = f32(load_k(r + c + t)); } }
    return v;
}
fn v4(r: i32, c: i32) -> vec4<f32> {
    var v = vec4<f32>();
    for (var t = 0; t < 4; t++) { if (c + t < DV) { v[t] = f32(load_v(r + c + t)); } }
    return v;
}
fn hsum(v: vec4<f32>) -> f32 { return v.x + v.y + v.z + v.w; }

//! section: attention_forward attention_dq
var<workgroup> k_tile: array<vec4<f32>, BK * D4>;
var<workgroup> v_tile: array<vec4<f32>, BK * V4>;

// Keys [k0, k0 + BK) into workgroup memory (zeros past the end).
fn load_kv_block(bc: array<i32, 8>, k0: i32, lid: i32) {
    for (var t = lid; t < BK * D4; t += BQ) {
        let kj = k0 + t / D4;
        var val = vec4<f32>();
        if (kj < metadata[1]) { val = k4(row_at(1, bc, kj), 4 * (t % D4)); }
        k_tile[t] = val;
    }
    for (var t = lid; t < BK * V4; t += BQ) {
        let kj = k0 + t / V4;
        var val = vec4<f32>();
        if (kj < metadata[1]) { val = v4(row_at(2, bc, kj), 4 * (t % V4)); }
        v_tile[t] = val;
    }
}

// Keys a block of queries [q0, q0 + BQ) may see: all, or up to its last query if causal.
fn key_end(q0: i32) -> i32 {
    return select(metadata[1], min(metadata[1], q0 + BQ), metadata[2] != 0);
}

//! section: attention_forward
fn store4_out(r: i32, c: i32, v: vec4<f32>) {
    for (var t = 0; t < 4; t++) { if (c + t < DV) { store_out(r + c + t, v[t]); } }
}

// operands: 0 q, 1 k, 2 v, 3 out, 4 lse (f32)
@compute @workgroup_size(${BQ})
fn attention_forward(@builtin(workgroup_id) wid: vec3<u32>,
                     @builtin(local_invocation_index) lidu: u32) {
    let lid = i32(lidu);
    let bc = coords(i32(wid.y));
    let q0 = i32(wid.x) * BQ;
    let qi = q0 + lid;
    let live = qi < metadata[0];
    let scale = scalar_f(3);
    @unroll(D4) var rq#i = vec4<f32>();
    @unroll(V4) var ro#i = vec4<f32>();
    if (live) {
        let qb = row_at(0, bc, qi);
        @unroll(D4) rq#i = scale * q4(qb, 4 * #i);
    }
    var m = neg_inf();
    var l = 0.0;
    let k_stop = key_end(q0);
    for (var k0 = 0; k0 < k_stop; k0 += BK) {
        load_kv_block(bc, k0, lid);
        workgroupBarrier();
        for (var j = 0; j < BK; j++) {
            if (visible(qi, k0 + j)) {
                var d = vec4<f32>();
                @unroll(D4) d = fma(rq#i, k_tile[j * D4 + #i], d);
                let s = hsum(d);
                if (s > m) {  // new running max: rescale what was summed so far
                    let alpha = exp(m - s);
                    l *= alpha;
                    @unroll(V4) ro#i *= alpha;
                    m = s;
                }
                let p = exp(s - m);
                l += p;
                @unroll(V4) ro#i = fma(vec4<f32>(p), v_tile[j * V4 + #i], ro#i);
            }
        }
        workgroupBarrier();
    }
    if (live) {
        let ob = row_at(3, bc, qi);
        let inv = 1.0 / l;
        @unroll(V4) store4_out(ob, 4 * #i, ro#i * inv);
        store_lse(row_at(4, bc, qi), m + log(l));
    }
}

//! section: attention_dq
fn o4(r: i32, c: i32) -> vec4<f32> {
    var v = vec4<f32>();
    for (var t = 0; t < 4; t++) { if (c + t < DV) { v[t] = f32(load_out(r + c + t)); } }
    return v;
}
fn g4(r: i32, c: i32) -> vec4<f32> {
    var v = vec4<f32>();
    for (var t = 0; t < 4; t++) { if (c + t < DV) { v[t] = f32(load_gout(r + c + t)); } }
    return v;
}
fn store4_dq(r: i32, c: i32, v: vec4<f32>) {
    for (var t = 0; t < 4; t++) { if (c + t < DQK) { store_dq(r + c + t, v[t]); } }
}

// operands: 0 q, 1 k, 2 v, 3 out, 4 lse, 5 gout, 6 dq, 7 delta (f32, written here for
// attention_dkdv). P = exp(s - lse), dS = P * (dO . v - delta), dQ = scale * dS K,
// delta = rowsum(dO * O).
@compute @workgroup_size(${BQ})
fn attention_dq(@builtin(workgroup_id) wid: vec3<u32>,
                @builtin(local_invocation_index) lidu: u32) {
    let lid = i32(lidu);
    let bc = coords(i32(wid.y));
    let q0 = i32(wid.x) * BQ;
    let qi = q0 + lid;
    let live = qi < metadata[0];
    let scale = scalar_f(3);
    @unroll(D4) var rq#i = vec4<f32>();
    @unroll(V4) var rg#i = vec4<f32>();
    @unroll(D4) var rdq#i = vec4<f32>();
    var lse = 0.0;
    var delta = 0.0;
    if (live) {
        let qb = row_at(0, bc, qi);
        @unroll(D4) rq#i = scale * q4(qb, 4 * #i);
        let gb = row_at(5, bc, qi);
        let ob = row_at(3, bc, qi);
        @unroll(V4) rg#i = g4(gb, 4 * #i);
        var dl = vec4<f32>();
        @unroll(V4) dl = fma(rg#i, o4(ob, 4 * #i), dl);
        delta = hsum(dl);
        lse = f32(load_lse(row_at(4, bc, qi)));
        store_delta(row_at(7, bc, qi), delta);
    }
    let k_stop = key_end(q0);
    for (var k0 = 0; k0 < k_stop; k0 += BK) {
        load_kv_block(bc, k0, lid);
        workgroupBarrier();
        for (var j = 0; j < BK; j++) {
            if (visible(qi, k0 + j)) {
                var s = vec4<f32>();
                var dp = vec4<f32>();
                @unroll(D4) s = fma(rq#i, k_tile[j * D4 + #i], s);
                @unroll(V4) dp = fma(rg#i, v_tile[j * V4 + #i], dp);
                let ds = vec4<f32>(exp(hsum(s) - lse) * (hsum(dp) - delta));
                @unroll(D4) rdq#i = fma(ds, k_tile[j * D4 + #i], rdq#i);
            }
        }
        workgroupBarrier();
    }
    if (live) {
        let db = row_at(6, bc, qi);
        @unroll(D4) store4_dq(db, 4 * #i, rdq#i * scale);
    }
}

//! section: attention_dkdv
fn g4(r: i32, c: i32) -> vec4<f32> {
    var v = vec4<f32>();
    for (var t = 0; t < 4; t++) { if (c + t < DV) { v[t] = f32(load_gout(r + c + t)); } }
    return v;
}
fn store4_dk(r: i32, c: i32, v: vec4<f32>) {
    for (var t = 0; t < 4; t++) { if (c + t < DQK) { store_dk(r + c + t, v[t]); } }
}
fn store4_dv(r: i32, c: i32, v: vec4<f32>) {
    for (var t = 0; t < 4; t++) { if (c + t < DV) { store_dv(r + c + t, v[t]); } }
}

var<workgroup> q_tile: array<vec4<f32>, BK * D4>;
var<workgroup> go_tile: array<vec4<f32>, BK * V4>;
var<workgroup> lse_tile: array<f32, BK>;
var<workgroup> delta_tile: array<f32, BK>;

// One invocation per key. operands: 0 q, 1 k, 2 v, 3 (unused), 4 lse, 5 gout, 6 dk,
// 7 delta, 8 dv. dV = P^T dO, dK = scale * dS^T Q, with blocks of BK queries in
// workgroup memory.
@compute @workgroup_size(${BQ})
fn attention_dkdv(@builtin(workgroup_id) wid: vec3<u32>,
                  @builtin(local_invocation_index) lidu: u32) {
    let lid = i32(lidu);
    let bc = coords(i32(wid.y));
    let k0 = i32(wid.x) * BQ;
    let kj = k0 + lid;
    let live = kj < metadata[1];
    let scale = scalar_f(3);
    @unroll(D4) var rk#i = vec4<f32>();
    @unroll(V4) var rv#i = vec4<f32>();
    @unroll(D4) var rdk#i = vec4<f32>();
    @unroll(V4) var rdv#i = vec4<f32>();
    if (live) {
        let kb = row_at(1, bc, kj);
        @unroll(D4) rk#i = scale * k4(kb, 4 * #i);
        let vb = row_at(2, bc, kj);
        @unroll(V4) rv#i = v4(vb, 4 * #i);
    }
    // causal: queries before k0 see none of this block's keys
    let q_start = select(0, (k0 / BK) * BK, metadata[2] != 0);
    for (var q0 = q_start; q0 < metadata[0]; q0 += BK) {
        for (var t = lid; t < BK * D4; t += BQ) {
            let qi = q0 + t / D4;
            var val = vec4<f32>();
            if (qi < metadata[0]) { val = q4(row_at(0, bc, qi), 4 * (t % D4)); }
            q_tile[t] = val;
        }
        for (var t = lid; t < BK * V4; t += BQ) {
            let qi = q0 + t / V4;
            var val = vec4<f32>();
            if (qi < metadata[0]) { val = g4(row_at(5, bc, qi), 4 * (t % V4)); }
            go_tile[t] = val;
        }
        if (lid < BK) {
            let qi = q0 + lid;
            var l = 0.0;
            var dl = 0.0;
            if (qi < metadata[0]) {
                l = f32(load_lse(row_at(4, bc, qi)));
                dl = load_delta(row_at(7, bc, qi));
            }
            lse_tile[lid] = l;
            delta_tile[lid] = dl;
        }
        workgroupBarrier();
        for (var i = 0; i < BK; i++) {
            if (live && visible(q0 + i, kj)) {
                var s = vec4<f32>();
                var dp = vec4<f32>();
                @unroll(D4) s = fma(q_tile[i * D4 + #i], rk#i, s);
                @unroll(V4) dp = fma(go_tile[i * V4 + #i], rv#i, dp);
                let p = exp(hsum(s) - lse_tile[i]);
                let ds = vec4<f32>(p * (hsum(dp) - delta_tile[i]));
                @unroll(V4) rdv#i = fma(vec4<f32>(p), go_tile[i * V4 + #i], rdv#i);
                @unroll(D4) rdk#i = fma(ds, q_tile[i * D4 + #i], rdk#i);
            }
        }
        workgroupBarrier();
    }
    if (live) {
        let kb = row_at(6, bc, kj);
        @unroll(D4) store4_dk(kb, 4 * #i, rdk#i * scale);
        let vb = row_at(8, bc, kj);
        @unroll(V4) store4_dv(vb, 4 * #i, rdv#i);
    }
}
