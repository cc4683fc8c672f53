// scores.wgsl: the row-wise step of attention's backward through matmuls (attention.py
// takes that way for short sequences, where whole score matrices are small): the scores
// S = q k^T and dP = dO v^T come from the matmul kernel; this kernel turns them into the
// probabilities P and the scores' gradient, in place, one workgroup per query row.
//! include: rows.wgsl
//
// Iteration space = the batch dims + (SQ,): one row per query. Operand 0 = S (row of
// SK scores, extra = its stride along keys), 1 = lse (one per row, from the forward),
// 2 = dP, 3 = the user mask (extra = its stride along keys). metadata: [0] rows, [1] SK,
// [2] causal, [3] scale (f32 bits), [4] SQ.
// ${MASK} adds the user mask to score `x` of key `kj` (row coordinates `c`), or nothing.
// Scores are scaled and masked (-inf) as the flash kernels (attention.wgsl) do; a row
// that saw no key (lse = -inf) gets P = 0 and zero gradients.

var<private> SK: i32;
var<private> causal: bool;
var<private> qi: i32;   // this row's query
var<private> c: array<i32, 8>;

// This workgroup's row: false past the last one.
fn setup(row: i32) -> bool {
    SK = metadata[1];
    causal = metadata[2] != 0;
    qi = row % metadata[4];
    c = coords(row);
    return row < metadata[0];
}

fn at(k: i32, kj: i32) -> i32 { return op_offset(k, c) + kj * op_extra(k); }

// Score of key kj after the scale and the masks (-inf where not visible).
fn score(kj: i32) -> f32 {
    var x = load_s(at(0, kj)) * scalar_f(3);
    ${MASK}
    return select(x, neg_inf(), causal && kj > qi);
}

// Each invocation keeps R scores of its row in registers (keys lid + r * WG): the row
// is read once and written once. attention.py keeps SK <= R * WG.
const R: i32 = ${R};

// S -> P (recomputed from lse) and dP -> dS * scale, in place, where dS = P * (dP -
// delta) and delta = sum_j P_j dP_j (= dO . O, the row's share of the softmax gradient).
@compute @workgroup_size(${WG})
fn scores_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32${SG_ARGS}) {
    ${SG_SET}
    if (!setup(flat_group(wid, nwg))) { return; }
    let lse = load_lse(op_offset(1, c));
    let lref = select(lse, pos_inf(), lse == neg_inf());  // a row that saw no key: P = 0
    let j0 = i32(lid);
    @unroll(R) var p#i = 0.0;
    @unroll(R) var g#i = 0.0;
    @unroll(R) if (j0 + #i * i32(WG) < SK) { p#i = exp(score(j0 + #i * i32(WG)) - lref); g#i = load_dp(at(2, j0 + #i * i32(WG))); }
    var d = 0.0;
    @unroll(R) d = fma(p#i, g#i, d);
    let delta = row_sum(lid, sgs, d);
    let scale = scalar_f(3);
    @unroll(R) if (j0 + #i * i32(WG) < SK) { store_dp(at(2, j0 + #i * i32(WG)), p#i * (g#i - delta) * scale); store_s(at(0, j0 + #i * i32(WG)), p#i); }
}
