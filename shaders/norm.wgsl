// norm.wgsl: RMSNorm and LayerNorm over the last dim, forward and backward, one
// workgroup per row (statistics in f32 whatever the storage dtype).
//! include: rows.wgsl
//
// Iteration space = the leading dims (rows); every operand has its row strides, an
// offset and its stride along the normalised dim in the extra slot (w, b: row strides 0;
// per-row statistics: extra 0). metadata[0] = rows, [1] = D, [2] = eps (f32 bits).
// ${W} / ${B} read the weight / bias at column j (1.0 / 0.0 when absent); ${STORE_DW}
// writes gy * xhat per element for the weight gradient (summed over rows afterwards).

fn col(k: i32, c: array<i32, 8>, j: i32) -> i32 { return op_offset(k, c) + j * op_extra(k); }

//! section: rmsnorm
// operands: 0 y, 1 x, 2 w, 3 rstd
@compute @workgroup_size(${WG})
fn rmsnorm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    if (row >= metadata[0]) { return; }
    let D = metadata[1];
    let c = coords(row);
    var ss = 0.0;
    for (var j = i32(lid); j < D; j += i32(WG)) { let v = f32(load_x(col(1, c, j))); ss += v * v; }
    ss = row_sum(lid, ss);
    let r = 1.0 / sqrt(ss / f32(D) + scalar_f(2));
    for (var j = i32(lid); j < D; j += i32(WG)) {
        store_y(col(0, c, j), f32(load_x(col(1, c, j))) * r * ${W});
    }
    if (lid == 0u) { store_rstd(op_offset(3, c), r); }
}

//! section: rmsnorm_backward
// operands: 0 dx, 1 x, 2 w, 3 rstd, 4 gy, 5 dw rows
// dx = rstd * (gx - xhat * mean(gx * xhat)), gx = gy * w, xhat = x * rstd
@compute @workgroup_size(${WG})
fn rmsnorm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    if (row >= metadata[0]) { return; }
    let D = metadata[1];
    let c = coords(row);
    let r = f32(load_rstd(op_offset(3, c)));
    var proj = 0.0;
    for (var j = i32(lid); j < D; j += i32(WG)) {
        let xhat = f32(load_x(col(1, c, j))) * r;
        proj += f32(load_gy(col(4, c, j))) * ${W} * xhat;
    }
    proj = row_sum(lid, proj) / f32(D);
    for (var j = i32(lid); j < D; j += i32(WG)) {
        let xhat = f32(load_x(col(1, c, j))) * r;
        let gyv = f32(load_gy(col(4, c, j)));
        store_dx(col(0, c, j), r * (gyv * ${W} - xhat * proj));
        ${STORE_DW}
    }
}

//! section: layernorm
// operands: 0 y, 1 x, 2 w, 3 mean, 4 rstd, 5 b
@compute @workgroup_size(${WG})
fn layernorm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    if (row >= metadata[0]) { return; }
    let D = metadata[1];
    let c = coords(row);
    var s = 0.0;
    for (var j = i32(lid); j < D; j += i32(WG)) { s += f32(load_x(col(1, c, j))); }
    let mu = row_sum(lid, s) / f32(D);
    var ss = 0.0;
    for (var j = i32(lid); j < D; j += i32(WG)) {
        let d = f32(load_x(col(1, c, j))) - mu;
        ss += d * d;
    }
    let r = 1.0 / sqrt(row_sum(lid, ss) / f32(D) + scalar_f(2));
    for (var j = i32(lid); j < D; j += i32(WG)) {
        store_y(col(0, c, j), (f32(load_x(col(1, c, j))) - mu) * r * ${W} + ${B});
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
                      @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    if (row >= metadata[0]) { return; }
    let D = metadata[1];
    let c = coords(row);
    let mu = f32(load_mean(op_offset(3, c)));
    let r = f32(load_rstd(op_offset(4, c)));
    var s1 = 0.0;
    var s2 = 0.0;
    for (var j = i32(lid); j < D; j += i32(WG)) {
        let xhat = (f32(load_x(col(1, c, j))) - mu) * r;
        let gx = f32(load_gy(col(5, c, j))) * ${W};
        s1 += gx;
        s2 += gx * xhat;
    }
    let m1 = row_sum(lid, s1) / f32(D);
    let m2 = row_sum(lid, s2) / f32(D);
    for (var j = i32(lid); j < D; j += i32(WG)) {
        let xhat = (f32(load_x(col(1, c, j))) - mu) * r;
        let gyv = f32(load_gy(col(5, c, j)));
        store_dx(col(0, c, j), r * (gyv * ${W} - m1 - xhat * m2));
        ${STORE_DW}
    }
}
