// rope.wgsl: rotate-half rotary embedding on the last dim of x (..., seq, D).
//
// With h = D / 2, x1 = x[..., :h], x2 = x[..., h:] and cos/sin of shape (seq, h):
//   out1 = x1 * cos - x2 * sin,  out2 = x2 * cos + x1 * sin      (${SIGN} = 1.0)
// and the inverse (transpose) rotation with sin negated (${SIGN} = -1.0).
// Iteration space = x's shape, unmerged; operand 0 = out, 1 = x.
// metadata: [0] n, [1] D, [2..4] cos offset / seq stride / column stride, [5..7] sin's.

fn cos_at(s: i32, k: i32) -> f32 { return f32(load_cos(metadata[2] + s * metadata[3] + k * metadata[4])); }
fn sin_at(s: i32, k: i32) -> f32 {
    return ${SIGN} * f32(load_sin(metadata[5] + s * metadata[6] + k * metadata[7]));
}

//! section: rope
@compute @workgroup_size(256)
fn rope(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    var c = coords(i);
    let nd = metadata[8];
    let s = c[nd - 2];
    let d = c[nd - 1];
    let h = metadata[1] / 2;
    let first = d < h;
    let k = select(d - h, d, first);
    let cs = cos_at(s, k);
    let sn = sin_at(s, k);
    let xo = op_offset(1, c);
    let ds = metadata[OPS_BASE + OP_STRIDE + 2 + nd - 1];  // x's stride along the last dim
    let x = f32(load_x(xo));
    var v: f32;
    if (first) {
        v = x * cs - f32(load_x(xo + h * ds)) * sn;
    } else {
        v = x * cs + f32(load_x(xo - h * ds)) * sn;
    }
    store_out(op_offset(0, c), v);
}

//! section: rope_pairs
// The same two elements (d, d + 1) at a time, d even, when D is a multiple of 4 (a pair
// never straddles the halves) and out is contiguous: a 16-bit out is written a word at
// a time, without atomics.
@compute @workgroup_size(256)
fn rope_pairs(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let i = 2 * flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    var c = coords(i);
    let nd = metadata[8];
    let s = c[nd - 2];
    let d = c[nd - 1];
    let h = metadata[1] / 2;
    let first = d < h;
    let k = select(d - h, d, first);
    let cs = vec2<f32>(cos_at(s, k), cos_at(s, k + 1));
    let sn = vec2<f32>(sin_at(s, k), sin_at(s, k + 1));
    let xo = op_offset(1, c);
    let ds = metadata[OPS_BASE + OP_STRIDE + 2 + nd - 1];
    let x = vec2<f32>(f32(load_x(xo)), f32(load_x(xo + ds)));
    let po = select(xo - h * ds, xo + h * ds, first);
    let partner = vec2<f32>(f32(load_x(po)), f32(load_x(po + ds)));
    let v = select(x * cs + partner * sn, x * cs - partner * sn, first);
    store2_out(op_offset(0, c), v);
}
