// optim.wgsl: optimizer steps, in place on flat contiguous float32 buffers (the gradient
// may be bfloat16). Operand k's element i is at its offset + i (1-D iteration space).

fn at(k: i32, i: i32) -> i32 { return metadata[OPS_BASE + k * OP_STRIDE] + i; }

//! section: adamw
// operands: 0 p, 1 g, 2 m, 3 v. metadata: [0] n, [1] 1 - lr * weight_decay, [2] beta1,
// [3] beta2, [4] eps, [5] lr / (1 - beta1^t), [6] 1 / sqrt(1 - beta2^t)
@compute @workgroup_size(256)
fn adamw(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    let g = f32(load_g(at(1, i)));
    let b1 = scalar_f(2);
    let b2 = scalar_f(3);
    let m = b1 * load_m(at(2, i)) + (1.0 - b1) * g;
    let v = b2 * load_v(at(3, i)) + (1.0 - b2) * g * g;
    store_m(at(2, i), m);
    store_v(at(3, i), v);
    let p = load_p(at(0, i)) * scalar_f(1);
    store_p(at(0, i), p - scalar_f(5) * m / (sqrt(v) * scalar_f(6) + scalar_f(4)));
}

//! section: sgd sgd_momentum
// metadata: [0] n, [1] lr, [2] momentum, [3] weight decay, [4] nesterov (0 / 1)
fn decayed_grad(i: i32) -> f32 {
    return f32(load_g(at(1, i))) + scalar_f(3) * load_p(at(0, i));
}

//! section: sgd
// operands: 0 p, 1 g
@compute @workgroup_size(256)
fn sgd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    let d = decayed_grad(i);
    store_p(at(0, i), load_p(at(0, i)) - scalar_f(1) * d);
}

//! section: sgd_momentum
// operands: 0 p, 1 g, 2 momentum buffer
@compute @workgroup_size(256)
fn sgd_momentum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    let d = decayed_grad(i);
    let buf = scalar_f(2) * load_buf(at(2, i)) + d;
    store_buf(at(2, i), buf);
    let step = select(buf, d + scalar_f(2) * buf, metadata[4] != 0);
    store_p(at(0, i), load_p(at(0, i)) - scalar_f(1) * step);
}

//! section: unscale_check
// GradScaler: g *= inv_scale in place; flag = 1 if any element of g is inf or NaN (every
// invocation that sees one writes the same 1, so the race is harmless).
// operands: 0 g, 1 flag. metadata: [0] n, [1] inv_scale
@compute @workgroup_size(256)
fn unscale_check(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    let g = load_g(at(0, i));
    if ((bitcast<u32>(g) & 0x7f800000u) == 0x7f800000u) { store_flag(at(1, 0), 1.0); }
    store_g(at(0, i), g * scalar_f(1));
}
