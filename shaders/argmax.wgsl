// argmax.wgsl: index of the largest value over the reduced dims (first one on ties, the
// first NaN if any), as int32. Layout as in reduce.wgsl; ${ISNAN}(v) marks NaNs.
//! include: reduce_index.wgsl

const RWG: u32 = ${WG}u;
var<workgroup> part: array<${ACC_T}, ${WG}>;
var<workgroup> part_i: array<i32, ${WG}>;

// b wins over a when it is NaN (the first NaN wins), larger, or equal and earlier.
fn arg_better(va: ${ACC_T}, ia: i32, vb: ${ACC_T}, ib: i32) -> bool {
    let na = ${ISNAN}(va);
    let nb = ${ISNAN}(vb);
    if (na || nb) { return nb && (!na || ib < ia); }
    return vb > va || (vb == va && ib < ia);
}

@compute @workgroup_size(${WG})
fn argmax_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let o = flat_group(wid, nwg);
    if (o >= metadata[0]) { return; }
    let base = op_offset(0, coords(o));
    var best: ${ACC_T} = ${INIT};
    var bi = 2147483647;
    for (var r = i32(lid); r < metadata[1]; r += i32(RWG)) {
        let v = load_x(base + red_offset(r));
        if (arg_better(best, bi, v, r)) { best = v; bi = r; }
    }
    part[lid] = best;
    part_i[lid] = bi;
    workgroupBarrier();
    for (var s = RWG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s && arg_better(part[lid], part_i[lid], part[lid + s], part_i[lid + s])) {
            part[lid] = part[lid + s];
            part_i[lid] = part_i[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u) { store_out(o, part_i[0]); }
}

@compute @workgroup_size(${WG})
fn argmax_threads(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let o = flat_id(wid, nwg, lid, RWG);
    if (o >= metadata[0]) { return; }
    let base = op_offset(0, coords(o));
    var best: ${ACC_T} = ${INIT};
    var bi = 2147483647;
    for (var r = 0; r < metadata[1]; r++) {
        let v = load_x(base + red_offset(r));
        if (arg_better(best, bi, v, r)) { best = v; bi = r; }
    }
    store_out(o, bi);
}
