// reduce_index.wgsl: where the reduced dims of a reduction live (see reduce.wgsl).

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
