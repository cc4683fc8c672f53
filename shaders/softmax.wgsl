// softmax.wgsl: softmax / log_softmax along one axis, one workgroup per row.
//! include: rows.wgsl
//
// Iteration space = the other dims (rows). Operand 0 = out, operand 1 = x; each with
// its stride along the axis in the extra slot. metadata[0] = rows, [1] = row length.
// ${LOG} is true for log_softmax.

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
    var m = neg_inf();
    for (var j = i32(lid); j < len; j += i32(WG)) { m = nan_max(m, load_x(xb + j * xs)); }
    m = row_max(lid, sgs, m);
    if (m == neg_inf()) { m = 0.0; }  // a row of -inf: exp(-inf - 0) = 0, no NaN from inf - inf
    var s = 0.0;
    for (var j = i32(lid); j < len; j += i32(WG)) { s += exp(load_x(xb + j * xs) - m); }
    s = row_sum(lid, sgs, s);
    let log_s = log(s);
    for (var j = i32(lid); j < len; j += i32(WG)) {
        let z = load_x(xb + j * xs) - m;
        if (${LOG}) {
            store_out(ob + j * os, z - log_s);
        } else {
            store_out(ob + j * os, exp(z) / s);
        }
    }
}
