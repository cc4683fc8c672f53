// reduce.wgsl: sum / max / min over a set of axes.
//! include: reduce_index.wgsl
//
// Iteration space = the kept dims (one output each, written contiguously). Operand 0 is
// x over the kept dims. The reduced dims follow at RED = OPS_BASE + OP_STRIDE:
// [ndim, shape[MAXD], strides of x[MAXD]]. metadata[0] = outputs, [1] = reduced length.
// ${ACC_T} is the accumulator type, ${INIT} its identity, ${COMBINE} the body of
// combine(a, b).

const RWG: u32 = ${WG}u;

fn combine(a: ${ACC_T}, b: ${ACC_T}) -> ${ACC_T} { ${COMBINE} }

var<workgroup> part: array<${ACC_T}, ${WG}>;

// One workgroup per output.
@compute @workgroup_size(${WG})
fn reduce_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let o = flat_group(wid, nwg);
    if (o >= metadata[0]) { return; }
    let base = op_offset(0, coords(o));
    var acc: ${ACC_T} = ${INIT};
    for (var r = i32(lid); r < metadata[1]; r += i32(RWG)) {
        acc = combine(acc, load_x(base + red_offset(r)));
    }
    part[lid] = acc;
    workgroupBarrier();
    for (var s = RWG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) { part[lid] = combine(part[lid], part[lid + s]); }
        workgroupBarrier();
    }
    if (lid == 0u) { store_out(o, part[0]); }
}

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
