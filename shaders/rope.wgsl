// rope.wgsl: rotate-half rotary embedding on the last dim of x (..., seq, D).
//
// With h = D / 2, x1 = x[..., :h], x2 = x[..., h:] and cos/sin of shape (seq, h):
//   out1 = x1 * cos - x2 * sin,  out2 = x2 * cos + x1 * sin      (${SIGN} = 1.0)
// and the inverse (transpose) rotation with sin negated (${SIGN} = -1.0).
// Iteration space = x's shape, unmerged; operand 0 = out, 1 = x.
// metadata: [0] n, [1] D, [2..4] cos offset / seq stride / column stride, [5..7] sin's.

// The rotated value of element (coordinates c) + t along the last dim.
fn rotated(c: array<i32, 8>, t: i32) -> f32 {
    let nd = metadata[8];
    let s = c[nd - 2];
    let d = c[nd - 1] + t;
    let h = metadata[1] / 2;
    let first = d < h;
    let k = select(d - h, d, first);
    let cs = f32(load_cos(metadata[2] + s * metadata[3] + k * metadata[4]));
    let sn = ${SIGN} * f32(load_sin(metadata[5] + s * metadata[6] + k * metadata[7]));
    let ds = metadata[OPS_BASE + OP_STRIDE + 2 + nd - 1];  // x's stride along the last dim
    let xo = op_offset(1, c) + t * ds;
    let x = f32(load_x(xo));
    let partner = f32(load_x(select(xo - h * ds, xo + h * ds, first)));
    return select(x * cs + partner * sn, x * cs - partner * sn, first);
}

// Elements d and d + 1 (d even) at once, x's pairs read as words (rope.py uses it where
// x's last dim is contiguous from an even element, so a pair never straddles words).
fn rotated2(c: array<i32, 8>) -> vec2<f32> {
    let nd = metadata[8];
    let s = c[nd - 2];
    let d = c[nd - 1];
    let h = metadata[1] / 2;
    let first = d < h;
    let k = select(d - h, d, first);
    let co = metadata[2] + s * metadata[3] + k * metadata[4];
    let so = metadata[5] + s * metadata[6] + k * metadata[7];
    let cs = vec2<f32>(f32(load_cos(co)), f32(load_cos(co + metadata[4])));
    let sn = ${SIGN} * vec2<f32>(f32(load_sin(so)), f32(load_sin(so + metadata[7])));
    let xo = op_offset(1, c);
    let x = load2_x(xo);
    let partner = load2_x(select(xo - h, xo + h, first));
    return select(x * cs + partner * sn, x * cs - partner * sn, first);
}

// One element per invocation (UNIT 1), or two, (d, d + 1) with d even (UNIT 2: when D is
// a multiple of 4 a pair never straddles the halves, and a 16-bit out contiguous from an
// even element takes them as one word, without atomics); STORE writes them.
@compute @workgroup_size(256)
fn rope(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u) * ${UNIT};
    if (i >= metadata[0]) { return; }
    var c = coords(i);
    ${STORE}
}
