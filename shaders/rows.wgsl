// rows.wgsl: helpers for kernels that give one workgroup of ${WG} invocations to each row
// (softmax, norms, losses). Call them from uniform control flow: they use barriers.
//
// Two ways to reduce (the `rows_*` section the kernel is built with): a tree through
// workgroup memory (log2(WG) barriers), or, where the adapter has subgroups, subgroupAdd /
// subgroupMax inside each subgroup and one pass over the subgroups' partials (one
// barrier). The entry points take the subgroup builtins through ${SG_ARGS} and store
// them with ${SG_SET}, which also declares `sgs`, the number of subgroups (1 for the
// tree), passed to every call: branches before a barrier must be uniform, and a
// module-scope private variable never is to WGSL's uniformity analysis, while the
// num_subgroups builtin is.

const WG: u32 = ${WG}u;
var<workgroup> row_scratch: array<f32, ${WG}>;

//! section: rows_tree
fn row_sum(lid: u32, sgs: u32, v: f32) -> f32 {
    row_scratch[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) { row_scratch[lid] += row_scratch[lid + s]; }
        workgroupBarrier();
    }
    let r = row_scratch[0];
    workgroupBarrier();  // scratch is reused by the next call
    return r;
}

fn row_max(lid: u32, sgs: u32, v: f32) -> f32 {
    row_scratch[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) { row_scratch[lid] = nan_max(row_scratch[lid], row_scratch[lid + s]); }
        workgroupBarrier();
    }
    let r = row_scratch[0];
    workgroupBarrier();
    return r;
}

//! section: rows_subgroup
var<private> sg_index: u32;  // this invocation's subgroup
var<private> sg_lane: u32;   // this invocation's lane in its subgroup

fn row_sum(lid: u32, sgs: u32, v: f32) -> f32 {
    let s = subgroupAdd(v);
    if (sgs == 1u) { return s; }
    if (sg_lane == 0u) { row_scratch[sg_index] = s; }
    workgroupBarrier();
    var t = 0.0;
    for (var i = 0u; i < sgs; i++) { t += row_scratch[i]; }
    workgroupBarrier();  // scratch is reused by the next call
    return t;
}

// NaN wins, as nan_max (a subgroup max may drop NaNs)
fn row_max(lid: u32, sgs: u32, v: f32) -> f32 {
    var m = subgroupMax(select(v, neg_inf(), is_nan(v)));
    if (subgroupAny(is_nan(v))) { m = nan_f32(); }
    if (sgs == 1u) { return m; }
    if (sg_lane == 0u) { row_scratch[sg_index] = m; }
    workgroupBarrier();
    var t = neg_inf();
    for (var i = 0u; i < sgs; i++) { t = nan_max(t, row_scratch[i]); }
    workgroupBarrier();
    return t;
}
