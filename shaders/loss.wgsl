// loss.wgsl: mean squared error without the (x - y)^2 temporaries.
//! include: rows.wgsl
//
// Iteration space = the shape of x and y (operand 0 = x, 1 = y, each through its own
// strides). metadata[0] = elements, [1] = the scale (1 / elements, f32 bits), [2] = the
// workgroups of mse_partial. Sums are in f32 whatever the storage dtype; out[0] = scale *
// sum (x - y)^2. Small inputs take one workgroup (mse_loss); large ones one workgroup
// per slice of elements (mse_partial, its partial sums in `part`), then one workgroup
// adds those up (mse_total): one workgroup alone over millions of elements took 7 ms on
// an H200. The slices depend only on the size, so the sum is the same on every call.

//! section: mse_loss mse_partial
fn sq_diff(i: i32) -> f32 {
    let c = coords(i);
    let d = f32(load_x(op_offset(0, c))) - f32(load_y(op_offset(1, c)));
    return d * d;
}

//! section: mse_loss
@compute @workgroup_size(${WG})
fn mse_loss(@builtin(local_invocation_index) lid: u32${SG_ARGS}) {
    ${SG_SET}
    var acc = 0.0;
    for (var i = i32(lid); i < metadata[0]; i += i32(WG)) { acc += sq_diff(i); }
    let total = row_sum(lid, acc);
    if (lid == 0u) { store_out(0, total * scalar_f(1)); }
}

//! section: mse_partial
@compute @workgroup_size(${WG})
fn mse_partial(@builtin(workgroup_id) wid: vec3<u32>,
               @builtin(local_invocation_index) lid: u32${SG_ARGS}) {
    ${SG_SET}
    var acc = 0.0;
    let step = metadata[2] * i32(WG);
    for (var i = i32(wid.x) * i32(WG) + i32(lid); i < metadata[0]; i += step) {
        acc += sq_diff(i);
    }
    let total = row_sum(lid, acc);
    if (lid == 0u) { store_part(i32(wid.x), total); }
}

//! section: mse_total
@compute @workgroup_size(${WG})
fn mse_total(@builtin(local_invocation_index) lid: u32${SG_ARGS}) {
    ${SG_SET}
    var acc = 0.0;
    for (var i = i32(lid); i < metadata[2]; i += i32(WG)) { acc += load_part(i); }
    let total = row_sum(lid, acc);
    if (lid == 0u) { store_out(0, total * scalar_f(1)); }
}
