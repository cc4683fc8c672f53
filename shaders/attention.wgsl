// attention.wgsl: flash attention, forward and backward, any sequence lengths, head dims
// up to 128, optional causal mask (top-left aligned: key j is hidden from query i > j...
// i.e. visible when j <= i, as PyTorch's is_causal).
//
// Grid: x = blocks of rows, y = batch (the broadcast leading dims, iteration space).
// Every operand has its batch strides, an offset and its sequence stride in the extra
// slot; the head dim is contiguous (stride 1). Scores never exist whole: key (or query)
// blocks pass through workgroup memory and a running max / sum rescale the partial output
// (online softmax). Keys past the end and masked keys count as -inf.
// metadata: [0] SQ, [1] SK, [2] causal, [3] scale (f32 bits).
// ${DQK}, ${DV}: head dims of q/k and v; ${BQ}: rows (invocations) per workgroup;
// ${BK}: keys (or queries) per block in workgroup memory.

const DQK: i32 = ${DQK};
const DV: i32 = ${DV};
const BQ: i32 = ${BQ};
const BK: i32 = ${BK};

fn row_at(k: i32, bc: array<i32, 8>, r: i32) -> i32 { return op_offset(k, bc) + r * op_extra(k); }
fn visible(qi: i32, kj: i32) -> bool {
    return kj < metadata[1] && qi < metadata[0] && (metadata[2] == 0 || kj <= qi);
}

//! section: attention_forward attention_dq
var<workgroup> k_tile: array<f32, ${BK} * ${DQK}>;
var<workgroup> v_tile: array<f32, ${BK} * ${DV}>;

// Blocks of keys [k0, k0 + BK) into workgroup memory (zeros past the end).
fn load_kv_block(bc: array<i32, 8>, k0: i32, lid: i32) {
    for (var t = lid; t < BK * DQK; t += BQ) {
        let kj = k0 + t / DQK;
        var val = 0.0;
        if (kj < metadata[1]) { val = f32(load_k(row_at(1, bc, kj) + t % DQK)); }
        k_tile[t] = val;
    }
    for (var t = lid; t < BK * DV; t += BQ) {
        let kj = k0 + t / DV;
        var val = 0.0;
        if (kj < metadata[1]) { val = f32(load_v(row_at(2, bc, kj) + t % DV)); }
        v_tile[t] = val;
    }
}

// Keys a block of queries [q0, q0 + BQ) may see: all, or up to its last query if causal.
fn key_end(q0: i32) -> i32 {
    return select(metadata[1], min(metadata[1], q0 + BQ), metadata[2] != 0);
}

//! section: attention_forward
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
    var q: array<f32, DQK>;
    var acc: array<f32, DV>;
    if (live) {
        let qb = row_at(0, bc, qi);
        for (var d = 0; d < DQK; d++) { q[d] = f32(load_q(qb + d)) * scale; }
    }
    var m = neg_inf();
    var l = 0.0;
    let k_stop = key_end(q0);
    for (var k0 = 0; k0 < k_stop; k0 += BK) {
        load_kv_block(bc, k0, lid);
        workgroupBarrier();
        var s: array<f32, BK>;
        var block_max = neg_inf();
        for (var j = 0; j < BK; j++) {
            var dot = neg_inf();
            if (visible(qi, k0 + j)) {
                dot = 0.0;
                for (var d = 0; d < DQK; d++) { dot = fma(q[d], k_tile[j * DQK + d], dot); }
            }
            s[j] = dot;
            block_max = max(block_max, dot);
        }
        if (block_max > neg_inf()) {
            let m_new = max(m, block_max);
            let alpha = exp(m - m_new);  // 0 while m is still -inf
            l *= alpha;
            for (var d = 0; d < DV; d++) { acc[d] *= alpha; }
            for (var j = 0; j < BK; j++) {
                if (s[j] > neg_inf()) {
                    let p = exp(s[j] - m_new);
                    l += p;
                    for (var d = 0; d < DV; d++) { acc[d] = fma(p, v_tile[j * DV + d], acc[d]); }
                }
            }
            m = m_new;
        }
        workgroupBarrier();
    }
    if (live) {
        let ob = row_at(3, bc, qi);
        let inv = 1.0 / l;
        for (var d = 0; d < DV; d++) { store_out(ob + d, acc[d] * inv); }
        store_lse(row_at(4, bc, qi), m + log(l));
    }
}

//! section: attention_dq
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
    var q: array<f32, DQK>;
    var go: array<f32, DV>;
    var dq: array<f32, DQK>;
    var lse = 0.0;
    var delta = 0.0;
    if (live) {
        let qb = row_at(0, bc, qi);
        for (var d = 0; d < DQK; d++) { q[d] = f32(load_q(qb + d)) * scale; }
        let gb = row_at(5, bc, qi);
        let ob = row_at(3, bc, qi);
        for (var d = 0; d < DV; d++) {
            go[d] = f32(load_gout(gb + d));
            delta = fma(go[d], f32(load_out(ob + d)), delta);
        }
        lse = f32(load_lse(row_at(4, bc, qi)));
        store_delta(row_at(7, bc, qi), delta);
    }
    let k_stop = key_end(q0);
    for (var k0 = 0; k0 < k_stop; k0 += BK) {
        load_kv_block(bc, k0, lid);
        workgroupBarrier();
        for (var j = 0; j < BK; j++) {
            if (visible(qi, k0 + j)) {
                var s = 0.0;
                var dp = 0.0;
                for (var d = 0; d < DQK; d++) { s = fma(q[d], k_tile[j * DQK + d], s); }
                for (var d = 0; d < DV; d++) { dp = fma(go[d], v_tile[j * DV + d], dp); }
                let ds = exp(s - lse) * (dp - delta);
                for (var d = 0; d < DQK; d++) { dq[d] = fma(ds, k_tile[j * DQK + d], dq[d]); }
            }
        }
        workgroupBarrier();
    }
    if (live) {
        let db = row_at(6, bc, qi);
        for (var d = 0; d < DQK; d++) { store_dq(db + d, dq[d] * scale); }
    }
}

//! section: attention_dkdv
// One invocation per key. operands: 0 q, 1 k, 2 v, 3 (unused), 4 lse, 5 gout, 6 dk,
// 7 delta, 8 dv. dV = P^T dO, dK = scale * dS^T Q, with blocks of BK queries in
// workgroup memory.
var<workgroup> q_tile: array<f32, ${BK} * ${DQK}>;
var<workgroup> go_tile: array<f32, ${BK} * ${DV}>;
var<workgroup> lse_tile: array<f32, ${BK}>;
var<workgroup> delta_tile: array<f32, ${BK}>;

@compute @workgroup_size(${BQ})
fn attention_dkdv(@builtin(workgroup_id) wid: vec3<u32>,
                  @builtin(local_invocation_index) lidu: u32) {
    let lid = i32(lidu);
    let bc = coords(i32(wid.y));
    let k0 = i32(wid.x) * BQ;
    let kj = k0 + lid;
    let live = kj < metadata[1];
    let scale = scalar_f(3);
    var k: array<f32, DQK>;
    var v: array<f32, DV>;
    var dk: array<f32, DQK>;
    var dv: array<f32, DV>;
    if (live) {
        let kb = row_at(1, bc, kj);
        for (var d = 0; d < DQK; d++) { k[d] = f32(load_k(kb + d)) * scale; }
        let vb = row_at(2, bc, kj);
        for (var d = 0; d < DV; d++) { v[d] = f32(load_v(vb + d)); }
    }
    // causal: queries before k0 see none of this block's keys
    let q_start = select(0, (k0 / BK) * BK, metadata[2] != 0);
    for (var q0 = q_start; q0 < metadata[0]; q0 += BK) {
        for (var t = lid; t < BK * DQK; t += BQ) {
            let qi = q0 + t / DQK;
            var val = 0.0;
            if (qi < metadata[0]) { val = f32(load_q(row_at(0, bc, qi) + t % DQK)); }
            q_tile[t] = val;
        }
        for (var t = lid; t < BK * DV; t += BQ) {
            let qi = q0 + t / DV;
            var val = 0.0;
            if (qi < metadata[0]) { val = f32(load_gout(row_at(5, bc, qi) + t % DV)); }
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
                var s = 0.0;
                var dp = 0.0;
                for (var d = 0; d < DQK; d++) { s = fma(q_tile[i * DQK + d], k[d], s); }
                for (var d = 0; d < DV; d++) { dp = fma(go_tile[i * DV + d], v[d], dp); }
                let p = exp(s - lse_tile[i]);
                let ds = p * (dp - delta_tile[i]);
                for (var d = 0; d < DV; d++) { dv[d] = fma(p, go_tile[i * DV + d], dv[d]); }
                for (var d = 0; d < DQK; d++) { dk[d] = fma(ds, q_tile[i * DQK + d], dk[d]); }
            }
        }
        workgroupBarrier();
    }
    if (live) {
        let kb = row_at(6, bc, kj);
        for (var d = 0; d < DQK; d++) { store_dk(kb + d, dk[d] * scale); }
        let vb = row_at(8, bc, kj);
        for (var d = 0; d < DV; d++) { store_dv(vb + d, dv[d]); }
    }
}
