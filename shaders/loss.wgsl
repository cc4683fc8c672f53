// loss.wgsl: mean squared error without the (x - y)^2 temporaries.
//! include: rows.wgsl
//
// Iteration space = the shape of x and y (operand 0 = x, 1 = y, each through its own
// strides). metadata[0] = elements, [1] = the scale (1 / elements, f32 bits), [2] = the
// partial sums. Sums are in f32 whatever the storage dtype; out[0] = scale * sum
// (x - y)^2. One entry, three uses (nn.py fills ${TERM}, ${COUNT} and ${STORE}): small
// inputs take one workgroup over all elements, storing the mean; large ones one
// workgroup per slice of elements first, each storing its partial sum into `part`, then
// one workgroup over those (one workgroup alone over millions of elements took 7 ms on
// an H200). The slices depend only on the size, so the sum is the same on every call.

//! section: sq_diff
fn sq_diff(i: i32) -> f32 {
    let c = coords(i);
    let d = f32(load_x(op_offset(0, c))) - f32(load_y(op_offset(1, c)));
    return d * d;
}

//! section: mse_loss
@compute @workgroup_size(${WG})
fn mse_loss(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32${SG_ARGS}) {
    ${SG_SET}
    var acc = 0.0;
    let stride = i32(nwg.x) * i32(WG);
    for (var i = i32(wid.x) * i32(WG) + i32(lid); i < ${COUNT}; i += stride) { acc += ${TERM}; }
    let total = row_sum(lid, sgs, acc);
    if (lid == 0u) { ${STORE} }
}
