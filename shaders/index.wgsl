// index.wgsl: gather and scatter-add through an index array, for gather/scatter_add,
// take/index_add and embedding lookups.
//
// gather:      out[out_offset(i)] = x[x_offset(i) + wrap(idx(i)) * STRIDE]
// scatter_add: out[out_offset(i) + wrap(idx(i)) * STRIDE] += src(i), atomically, so that
//              repeated indices accumulate (gather's adjoint).
// Operand 0 = out, 1 = x or src, 2 = idx; the data operand that the index addresses has
// stride 0 along the indexed dims. metadata[1] = length of the indexed dim (negative
// indices wrap; 0 = no wrap), metadata[2] = STRIDE.

fn wrapped_index(c: array<i32, 8>) -> i32 {
    let j = load_idx(op_offset(2, c));
    return select(j, j + metadata[1], j < 0);
}

//! section: gather
@compute @workgroup_size(256)
fn gather(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    let c = coords(i);
    store_out(op_offset(0, c), load_x(op_offset(1, c) + wrapped_index(c) * metadata[2]));
}

//! section: scatter_add
@compute @workgroup_size(256)
fn scatter_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    let c = coords(i);
    add_out(op_offset(0, c) + wrapped_index(c) * metadata[2], load_src(op_offset(1, c)));
}
