// index.wgsl: gather and scatter-add through an index array, for gather/scatter_add,
// take/index_add and embedding lookups.
//
// gather:      out[out_offset(i)] = x[x_offset(i) + wrap(idx(i)) * STRIDE]
// scatter_add: out[out_offset(i) + wrap(idx(i)) * STRIDE] += src(i), atomically, so that
//              repeated indices accumulate (gather's adjoint); scatter_combine likewise
//              with a product, max or min.
// scatter_claim / scatter_last: scatter as the CPU does it, the last of the invocations
//              (in C order) that index one place writing it: claim keeps the largest i
//              per place (an atomic max into winner, laid out as out), last writes src(i)
//              where winner holds i.
// Operand 0 = out, 1 = x or src, 2 = idx; the data operand that the index addresses has
// stride 0 along the indexed dims. metadata[1] = length of the indexed dim (negative
// indices wrap; 0 = no wrap), metadata[2] = STRIDE.

fn wrapped_index(c: array<i32, 8>) -> i32 {
    let j = i32(load_idx(op_offset(2, c)));  // (i32 here; i64 in check_range's module)
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

//! section: scatter_combine
@compute @workgroup_size(256)
fn scatter_combine(@builtin(workgroup_id) wid: vec3<u32>,
                   @builtin(num_workgroups) nwg: vec3<u32>,
                   @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    let c = coords(i);
    combine_out(op_offset(0, c) + wrapped_index(c) * metadata[2], load_src(op_offset(1, c)));
}

//! section: scatter_claim
@compute @workgroup_size(256)
fn scatter_claim(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    let c = coords(i);
    combine_out(op_offset(0, c) + wrapped_index(c) * metadata[2], i32(i));
}

//! section: scatter_last
@compute @workgroup_size(256)
fn scatter_last(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    let c = coords(i);
    let at = op_offset(0, c) + wrapped_index(c) * metadata[2];
    if (load_winner(at) == i32(i)) { store_out(at, load_src(op_offset(1, c))); }
}

//! section: check_range
// check_range: every idx(i) lies in [metadata[1], metadata[2]) or, where metadata[4] is
// 1, equals metadata[3]. The first failing invocation writes the check's site
// (metadata[5], > 0) into errors[0] and its index into errors[1]; the host reads both
// words with its next read-back from the device and raises the site's error there (as
// CUDA's device-side asserts surface at the next synchronisation).
@compute @workgroup_size(256)
fn check_range(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    let j = load_idx(op_offset(0, coords(i)));  // (idx_t: i32, or i64 on int64 devices)
    let skipped = metadata[4] == 1 && j == idx_t(metadata[3]);
    if (skipped || (j >= idx_t(metadata[1]) && j < idx_t(metadata[2]))) { return; }
    let low = -2147483647 - 1;
    let shown = select(select(i32(j), 2147483647, j > idx_t(2147483647)), low, j < idx_t(low));
    loop {
        // (the weak exchange may fail spuriously: retry until some site is recorded)
        let r = atomicCompareExchangeWeak(&errors_buf[0], 0, metadata[5]);
        if (r.exchanged) {
            atomicStore(&errors_buf[1], shown);
            break;
        }
        if (r.old_value != 0) { break; }
    }
}

//! section: index_add_rows
// index_add_rows: out[r, c] = the sum of src[i, c] over the positions i (in order) whose
// index idx[i] (negative ones wrapping) is r: an embedding's gradient with its repeated
// rows added in one fixed order, as the CPU adds them (scatter_add's atomics leave the
// order to the GPU). One invocation per element of out, each scanning every index.
// metadata: [0] rows * width, [1] width, [2] positions, [3] rows, [4] src's offset,
// [5] idx's offset (both contiguous).
@compute @workgroup_size(256)
fn index_add_rows(@builtin(workgroup_id) wid: vec3<u32>,
                  @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let e = flat_id(wid, nwg, lid, 256u);
    if (e >= metadata[0]) { return; }
    let width = metadata[1];
    let rows = metadata[3];
    let r = e / width;
    let c = e - r * width;
    var acc = 0.0;
    for (var i = 0; i < metadata[2]; i++) {
        let j = i32(load_idx(metadata[5] + i));
        if (select(j, j + rows, j < 0) == r) { acc += load_src(metadata[4] + i * width + c); }
    }
    store_out(e, acc);
}
