// fill.wgsl: constant fill (on raw words, any dtype).

//! section: fill_words
// metadata[0] = words to write, metadata[1] / [2] = the word for even / odd words (the
// same one but for 64-bit elements; a 16-bit value comes packed twice).

@compute @workgroup_size(256)
fn fill_words(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid, 256u);
    if (i >= metadata[0]) { return; }
    store_out(i, bitcast<u32>(metadata[1 + (i & 1)]));
}
