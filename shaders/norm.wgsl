// norm.wgsl: RMSNorm and LayerNorm over the last dim, forward and backward, one
// workgroup per row (statistics in f32 whatever the storage dtype).
//! include: rows.wgsl
//
// Iteration space = the leading dims (rows); every operand has its row strides, an
// offset and its stride along the normalised dim in the extra slot (w, b: row strides 0;
// per-row statistics: extra 0). metadata[0] = rows, [1] = D, [2] = eps (f32 bits).
//
// A row is walked in units of UNIT elements: 2 when D is even and the rows of every
// operand written are contiguous from an even element (a 16-bit dtype then moves whole
// words, no atomics), else 1. The HELPERS placeholder (made by nn.py) defines, per
// operand, ld_<name>(c, u) -> vec2<f32> (unit u; its y lane 0 when UNIT is 1) and
// st_<name>(c, u, v). Sums go through total(), which drops that unused lane.
// W / B read the weight / bias of unit u (1.0 / 0.0 when absent); STORE_DW writes
// gy * xhat per element for the weight gradient (summed over rows afterwards).

const UNIT: i32 = ${UNIT};
const LANES: vec2<f32> = vec2<f32>(1.0, ${LANE_Y});

fn col(k: i32, c: array<i32, 8>, j: i32) -> i32 { return op_offset(k, c) + j * op_extra(k); }
fn total(v: vec2<f32>) -> f32 { return dot(v, LANES); }

${HELPERS}

//! section: rmsnorm
// operands: 0 y, 1 x, 2 w, 3 rstd
@compute @workgroup_size(${WG})
fn rmsnorm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32${SG_ARGS}) {
    ${SG_SET}
    let row = flat_group(wid, nwg);
    if (row >= metadata[0]) { return; }
    let D = metadata[1];
    let units = D / UNIT;
    let c = coords(row);
    var ss = 0.0;
    for (var u = i32(lid); u < units; u += i32(WG)) { let v = ld_x(c, u); ss += total(v * v); }
    ss = row_sum(lid, sgs, ss);
    let r = 1.0 / sqrt(ss / f32(D) + scalar_f(2));
    for (var u = i32(lid); u < units; u += i32(WG)) {
        st_y(c, u, ld_x(c, u) * r * ${W});
    }
    if (lid == 0u) { store_rstd(op_offset(3, c), r); }
}

//! section: rmsnorm_backward
// operands: 0 dx, 1 x, 2 w, 3 rstd, 4 gy, 5 dw rows
// dx = rstd * (gx - xhat * mean(gx * xhat)), gx = gy * w, xhat = x * rstd
@compute @workgroup_size(${WG})
fn rmsnorm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32${SG_ARGS}) {
    ${SG_SET}
    let row = flat_group(wid, nwg);
    if (row >= metadata[0]) { return; }
    let D = metadata[1];
    let units = D / UNIT;
    let c = coords(row);
    let r = f32(load_rstd(op_offset(3, c)));
    var proj = 0.0;
    for (var u = i32(lid); u < units; u += i32(WG)) {
        let xhat = ld_x(c, u) * r;
        proj += total(ld_gy(c, u) * ${W} * xhat);
    }
    proj = row_sum(lid, sgs, proj) / f32(D);
    for (var u = i32(lid); u < units; u += i32(WG)) {
        let xhat = ld_x(c, u) * r;
        let gyv = ld_gy(c, u);
        st_dx(c, u, r * (gyv * ${W} - xhat * proj));
        ${STORE_DW}
    }
}

//! section: layernorm
// operands: 0 y, 1 x, 2 w, 3 mean, 4 rstd, 5 b
@compute @workgroup_size(${WG})
fn layernorm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32${SG_ARGS}) {
    ${SG_SET}
    let row = flat_group(wid, nwg);
    if (row >= metadata[0]) { return; }
    let D = metadata[1];
    let units = D / UNIT;
    let c = coords(row);
    var s = 0.0;
    for (var u = i32(lid); u < units; u += i32(WG)) { s += total(ld_x(c, u)); }
    let mu = row_sum(lid, sgs, s) / f32(D);
    var ss = 0.0;
    for (var u = i32(lid); u < units; u += i32(WG)) {
        let d = ld_x(c, u) - mu;
        ss += total(d * d);
    }
    let r = 1.0 / sqrt(row_sum(lid, sgs, ss) / f32(D) + scalar_f(2));
    for (var u = i32(lid); u < units; u += i32(WG)) {
        st_y(c, u, (ld_x(c, u) - mu) * r * ${W} + ${B});
    }
    if (lid == 0u) {
        store_mean(op_offset(3, c), mu);
        store_rstd(op_offset(4, c), r);
    }
}

//! section: layernorm_backward
// operands: 0 dx, 1 x, 2 w, 3 mean, 4 rstd, 5 gy, 6 dw rows
// dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)), gx = gy * w
@compute @workgroup_size(${WG})
fn layernorm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lid: u32${SG_ARGS}) {
    ${SG_SET}
    let row = flat_group(wid, nwg);
    if (row >= metadata[0]) { return; }
    let D = metadata[1];
    let units = D / UNIT;
    let c = coords(row);
    let mu = f32(load_mean(op_offset(3, c)));
    let r = f32(load_rstd(op_offset(4, c)));
    var s1 = 0.0;
    var s2 = 0.0;
    for (var u = i32(lid); u < units; u += i32(WG)) {
        let xhat = (ld_x(c, u) - mu) * r;
        let gx = ld_gy(c, u) * ${W};
        s1 += total(gx);
        s2 += total(gx * xhat);
    }
    let m1 = row_sum(lid, sgs, s1) / f32(D);
    let m2 = row_sum(lid, sgs, s2) / f32(D);
    for (var u = i32(lid); u < units; u += i32(WG)) {
        let xhat = (ld_x(c, u) - mu) * r;
        let gyv = ld_gy(c, u);
        st_dx(c, u, r * (gyv * ${W} - m1 - xhat * m2));
        ${STORE_DW}
    }
}
