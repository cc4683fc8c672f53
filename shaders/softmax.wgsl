// softmax.wgsl: softmax / log_softmax along one axis, one workgroup per row.
//! include: rows.wgsl
//
// Iteration space = the other dims (rows). Operand 0 = out, operand 1 = x; each with
// its stride along the axis in the extra slot. metadata[0] = rows, [1] = row length.
// ${LOG} is true for log_softmax.

//! section: softmax softmax_rows_lse
// (max, sum of exp(x - max)) over the row of x from xb (stride xs); the max of a row of
// -inf is taken as 0: exp(-inf - 0) = 0, no NaN from inf - inf.
fn max_and_sum(lid: u32, sgs: u32, xb: i32, xs: i32, len: i32) -> vec2<f32> {
    var m = neg_inf();
    for (var j = i32(lid); j < len; j += i32(WG)) { m = nan_max(m, load_x(xb + j * xs)); }
    m = row_max(lid, sgs, m);
    if (m == neg_inf()) { m = 0.0; }
    var s = 0.0;
    for (var j = i32(lid); j < len; j += i32(WG)) { s += exp(load_x(xb + j * xs) - m); }
    return vec2<f32>(m, row_sum(lid, sgs, s));
}

//! section: softmax
@compute @workgroup_size(${WG})
fn softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32${SG_ARGS}) {
    ${SG_SET}
    let row = flat_group(wid, nwg);
    if (row >= metadata[0]) { return; }
    let len = metadata[1];
    let c = coords(row);
    let xb = op_offset(1, c);
    let xs = op_extra(1);
    let ob = op_offset(0, c);
    let os = op_extra(0);
    let ms = max_and_sum(lid, sgs, xb, xs, len);
    let log_s = log(ms.y);
    for (var j = i32(lid); j < len; j += i32(WG)) {
        let z = load_x(xb + j * xs) - ms.x;
        if (${LOG}) {
            store_out(ob + j * os, z - log_s);
        } else {
            store_out(ob + j * os, exp(z) / ms.y);
        }
    }
}

//! section: softmax_rows_lse
// Attention's forward through matmuls: each row of scores x (operand 0, contiguous)
// turned into its softmax in place, and the row's log-sum-exp stored (operand 1), as the
// flash forward gives them: a row that sees no key (all -inf) gets zeros and lse = -inf.
@compute @workgroup_size(${WG})
fn softmax_rows_lse(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32${SG_ARGS}) {
    ${SG_SET}
    let row = flat_group(wid, nwg);
    if (row >= metadata[0]) { return; }
    let c = coords(row);
    let xb = op_offset(0, c);
    let ms = max_and_sum(lid, sgs, xb, 1, metadata[1]);
    let inv = select(1.0 / ms.y, 0.0, ms.y == 0.0);
    for (var j = i32(lid); j < metadata[1]; j += i32(WG)) {
        store_x(xb + j, exp(load_x(xb + j) - ms.x) * inv);
    }
    if (lid == 0u) { store_lse(op_offset(1, c), ms.x + log(ms.y)); }
}

//! section: rows_dot
// Attention's backward through matmuls: delta = rowsum(a * b) (dO and O), in f32, for
// rows of metadata[1] elements (each input's stride along its row in its extra slot).
// ${LANES} invocations share a row and a workgroup takes WG / ${LANES} rows: a workgroup
// for each short row spent most of the pass launching workgroups.
@compute @workgroup_size(${WG})
fn rows_dot(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let lanes = ${LANES}u;
    let row = flat_group(wid, nwg) * i32(WG / lanes) + i32(lid / lanes);
    let lane = lid % lanes;
    let inside = row < metadata[0];
    var s = 0.0;
    if (inside) {
        let c = coords(row);
        let ab = op_offset(1, c);
        let bb = op_offset(2, c);
        let sa = op_extra(1);
        let sb = op_extra(2);
        for (var j = i32(lane); j < metadata[1]; j += i32(lanes)) {
            s += f32(load_a(ab + j * sa)) * f32(load_b(bb + j * sb));
        }
    }
    row_scratch[lid] = s;
    workgroupBarrier();
    for (var w = lanes / 2u; w > 0u; w = w / 2u) {
        if (lane < w) { row_scratch[lid] += row_scratch[lid + w]; }
        workgroupBarrier();
    }
    if (inside && lane == 0u) { store_delta(op_offset(0, coords(row)), row_scratch[lid]); }
}
