// loss.wgsl: mean squared error in one workgroup, without the (x - y)^2 temporaries.
//! include: rows.wgsl
//
// Iteration space = the shape of x and y (operand 0 = x, 1 = y, each through its own
// strides). metadata[0] = elements, [1] = the scale (1 / elements, f32 bits). The sum is
// in f32 whatever the storage dtype; out[0] = scale * sum (x - y)^2.

//! section: mse_loss
@compute @workgroup_size(${WG})
fn mse_loss(@builtin(local_invocation_index) lid: u32${SG_ARGS}) {
    ${SG_SET}
    var acc = 0.0;
    for (var i = i32(lid); i < metadata[0]; i += i32(WG)) {
        let c = coords(i);
        let d = f32(load_x(op_offset(0, c))) - f32(load_y(op_offset(1, c)));
        acc += d * d;
    }
    let total = row_sum(lid, acc);
    if (lid == 0u) { store_out(0, total * scalar_f(1)); }
}
