// elementwise.wgsl: out = EXPR(x0, x1, ...), every operand read through its own strides.
//
// Operand 0 of the metadata is `out`, operand k + 1 is input `xk`. The generator fills
// ${INPUTS} with one `let xk = load_xk(op_offset(k + 1, c));` per input and ${EXPR} with
// the expression (see haelixe/backends/wgpu/elementwise.py). Scalars (clamp bounds)
// sit in metadata[1..]; ${LIB} holds the helper functions a traced expression calls.

//! section: map
${LIB}
@compute @workgroup_size(256)
fn map(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    let c = coords(i);
    ${INPUTS}
    store_out(op_offset(0, c), ${EXPR});
}

//! section: map_flat map_pairs
${LIB}
// The same when the iteration space merges to one dim (every operand walks it with one
// stride, as contiguous ones do): no coordinates to take apart, an index is
// offset + i * stride. ${INPUTS} then reads through `flat_at(k, i)`.
fn flat_at(k: i32, i: i32) -> i32 {
    let base = OPS_BASE + k * OP_STRIDE;
    return metadata[base] + i * metadata[base + 2];
}

//! section: map_flat

@compute @workgroup_size(256)
fn map_flat(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    ${INPUTS}
    store_out(flat_at(0, i), ${EXPR});
}

//! section: map_pairs
// A 16-bit output walked contiguously from an even element: invocation w computes
// elements i = 2w and i + 1 (${INPUTS} defines the vec2 inputs p0, p1, ... and sets
// r.x and r.y) and writes them as one word; a last odd element alone.
@compute @workgroup_size(256)
fn map_pairs(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let i = 2 * flat_id(wid, nwg, lid, 256u);
    let n = metadata[0];
    if (i >= n) { return; }
    let i1 = min(i + 1, n - 1);
    var r: vec2<f32>;
    ${INPUTS}
    if (i + 1 < n) {
        store2_out(flat_at(0, i), r);
    } else {
        store_out(flat_at(0, i), r.x);
    }
}

//! section: map_pairs_nd
${LIB}
// A 16-bit output written contiguously from an even element over several dims whose
// last is even: invocation w computes elements 2w and 2w + 1, neighbours along the last
// dim, and writes them as one word (${INPUTS} reads input k at op_offset(k, c) and one
// step of its last stride further, then sets r).
fn last_stride(k: i32) -> i32 { return metadata[OPS_BASE + k * OP_STRIDE + 1 + metadata[8]]; }

@compute @workgroup_size(256)
fn map_pairs_nd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let i = 2 * flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    let c = coords(i);
    var r: vec2<f32>;
    ${INPUTS}
    store2_out(op_offset(0, c), r);
}
