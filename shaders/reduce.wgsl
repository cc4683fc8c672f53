// reduce.wgsl: sum / max / min / argmax over a set of axes.
//
// Iteration space = the kept dims (one output each, written contiguously). Operand 0 is
// x over the kept dims. The reduced dims follow at RED = OPS_BASE + OP_STRIDE:
// [ndim, shape[MAXD], strides of x[MAXD]]. metadata[0] = outputs, [1] = reduced length.
// The row kernels split each row into metadata[2] chunks of metadata[3] elements, one
// workgroup each, writing output o * chunks + chunk (software adapters stop a loop after
// 65535 iterations: reduce.py keeps every invocation's loops far below that).
// ${ACC_T} is the accumulator type, ${INIT} its identity, ${COMBINE} the body of
// combine(a, b). argmax gives the index of the first maximum (the first NaN if any;
// ${ISNAN}(v) marks NaNs).

const RED: i32 = OPS_BASE + OP_STRIDE;

fn red_offset(r: i32) -> i32 {
    var rem = r;
    var off = 0;
    for (var d = metadata[RED] - 1; d >= 0; d--) {
        let n = metadata[RED + 1 + d];
        off += (rem % n) * metadata[RED + 1 + MAXD + d];
        rem = rem / n;
    }
    return off;
}

const RWG: u32 = ${WG}u;
var<workgroup> part: array<${ACC_T}, ${WG}>;

//! section: reduce_rows reduce_threads
fn combine(a: ${ACC_T}, b: ${ACC_T}) -> ${ACC_T} { ${COMBINE} }

//! section: reduce_rows
// One workgroup per output.
@compute @workgroup_size(${WG})
fn reduce_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let g = flat_group(wid, nwg);
    let o = g / metadata[2];
    if (o >= metadata[0]) { return; }
    let base = op_offset(0, coords(o));
    let start = (g % metadata[2]) * metadata[3];
    let stop = min(metadata[1], start + metadata[3]);
    var acc: ${ACC_T} = ${INIT};
    for (var r = start + i32(lid); r < stop; r += i32(RWG)) {
        acc = combine(acc, load_x(base + red_offset(r)));
    }
    part[lid] = acc;
    workgroupBarrier();
    for (var s = RWG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) { part[lid] = combine(part[lid], part[lid + s]); }
        workgroupBarrier();
    }
    if (lid == 0u) { store_out(g, part[0]); }
}

//! section: reduce_threads
// One invocation per output (short reductions).
@compute @workgroup_size(${WG})
fn reduce_threads(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let o = flat_id(wid, nwg, lid, RWG);
    if (o >= metadata[0]) { return; }
    let base = op_offset(0, coords(o));
    var acc: ${ACC_T} = ${INIT};
    for (var r = 0; r < metadata[1]; r++) {
        acc = combine(acc, load_x(base + red_offset(r)));
    }
    store_out(o, acc);
}

//! section: argmax_rows argmax_threads
var<workgroup> part_i: array<i32, ${WG}>;

// b wins over a when it is NaN (the first NaN wins), larger, or equal and earlier.
fn arg_better(va: ${ACC_T}, ia: i32, vb: ${ACC_T}, ib: i32) -> bool {
    let na = ${ISNAN}(va);
    let nb = ${ISNAN}(vb);
    if (na || nb) { return nb && (!na || ib < ia); }
    return vb > va || (vb == va && ib < ia);
}

//! section: argmax_rows
@compute @workgroup_size(${WG})
fn argmax_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let g = flat_group(wid, nwg);
    let o = g / metadata[2];
    if (o >= metadata[0]) { return; }
    let base = op_offset(0, coords(o));
    let start = (g % metadata[2]) * metadata[3];
    let stop = min(metadata[1], start + metadata[3]);
    var best: ${ACC_T} = ${INIT};
    var bi = 2147483647;
    for (var r = start + i32(lid); r < stop; r += i32(RWG)) {
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
    if (lid == 0u) { store_out(g, out_t(part_i[0])); }
}

//! section: argmax_threads
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
    store_out(o, out_t(bi));
}
