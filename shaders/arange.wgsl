// arange.wgsl: out[i] = start + i * step.
// metadata[0] = n, metadata[1..2] = start, step (float32 bits or int32); ${BODY} stores one value.

@compute @workgroup_size(256)
fn arange(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    ${BODY}
}
