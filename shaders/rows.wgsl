// rows.wgsl: helpers for kernels that give one workgroup of ${WG} invocations to each row
// (softmax, norms, reductions). Call them from uniform control flow: they use barriers.

const WG: u32 = ${WG}u;
var<workgroup> row_scratch: array<f32, ${WG}>;

fn row_sum(lid: u32, v: f32) -> f32 {
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

fn row_max(lid: u32, v: f32) -> f32 {
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
