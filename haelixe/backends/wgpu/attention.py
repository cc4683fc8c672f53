"""Flash attention on the GPU: forward (out, lse) and backward (dq, dk, dv), with the
causal mask and an optional user mask (PyTorch's ``attn_mask``: boolean, True = attend,
or float, added to the scores), broadcast over (batch..., q, k).

q, k, v are (..., seq, head_dim) with any batch and sequence strides; a head dim that is
not contiguous is copied first (the kernels read rows as contiguous runs, as vec4 loads
where rows are 4-aligned). Leading dims broadcast between q, k and v. ``lse`` is float32
whatever the input dtype: backward recomputes probabilities as exp(s - lse), where a
rounded lse would show. A row whose keys are all masked gives zeros and lse = -inf (and
zero gradients), as PyTorch.

The output of (..., heads, seq, head_dim) inputs is stored sequence-major, as
(..., seq, heads, head_dim) viewed back (PyTorch's flash attention does the same): the
``o.transpose(-3, -2).reshape(..., seq, heads * head_dim)`` that follows in multi-head
attention is then a view, not a copy.

Each kernel gives P invocations to a row, each holding a 1/P slice of the head dim in
registers (:func:`plan`): long head dims stay in registers instead of spilling. A
register-tiled forward (:class:`TiledPlan`: an invocation holds several rows times
several keys, then output columns) is there for the variant sweep, off by default
(TILED_FORWARD, with its figures).

The backward of short sequences, and of long ones without a causal mask or with heads
over 64 wide, takes another way (:func:`by_matmuls`), in chunks of batch-heads
where the scores of all would be too large: the scores q k^T are materialised again by
the tiled matmul kernel, whose epilogue turns them into probabilities as they are
written (exp(s * scale - lse), masked); the matmul dO v^T's epilogue turns its output
into the scores' gradient P * (dP - delta) (delta = rowsum(dO * O)), and three matmuls
give dq, dk and dv; the matmul kernel's register tiles do that work faster than the
flash backward. The scores and their gradient are float32 whatever the inputs' dtype
(16-bit q, k, v are read as they are, and dq, dk, dv rounded once, as the flash kernels
do). The forward takes the matmul way too where the flash forward is weakest (long rows
of heads wider than 64, no causal mask): the scores with the scale and masks in the
epilogue, a row softmax in place that also gives lse (softmax.wgsl), then P v.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import dtypes as gd
from . import matmul as mm
from .geometry import (
    broadcast_shapes,
    broadcast_strides,
    f32_bits,
    grid,
    meta_block,
    permute,
    swap_last2,
)
from .reduce import row_reduction
from .shaders import kernel

MAX_HEAD_DIM = 128
# vec4 registers per invocation for the head-dim vectors a kernel keeps (q and o in the
# forward; q, dO and dq for dq; k, v, dk and dv for dk/dv) up to which one invocation
# holds a whole row. On an H200 (head dim 64) one invocation per row beat two in all
# three kernels, even dk/dv's 64 vec4s; a 128-wide head's forward (64 vec4s) too: one
# invocation per row ran (4, 16, 4096, 128) in 32.3 ms, two in 52.4 (shuffles) or about
# 63 (workgroup memory). Its backward takes two per row in both kernels: with one per
# row in dk/dv (128 vec4s) the forward + backward of (4, 16, 4096, 128) took 373 ms
# against 267.
REGISTER_VEC4 = {"attention_forward": 64, "attention_dq": 64, "attention_dkdv": 64}


# The backward through matmuls (module docstring) up to this many keys and this many
# bytes of scores (float32). On an H200 it took 1.5 ms at (16, 8, 512, 64) against 1.8
# flash (28% less at 1024 keys, 38% at 256), and the 6-block Transformer's captured step
# from 47.0 to 44.6 ms. Batch-heads whose scores exceed MATMUL_MAX_SCORE_BYTES go
# through in chunks along the first batch dim (one batch index's scores must fit).
# Longer rows, up to MATMUL_LONG_KEYS, take the matmuls too where the flash backward
# skips no work (no causal mask) or is slow (head dims over 64, two invocations a row):
# on an H200 the backward of (4, 16, 4096, 128) took 44 ms through matmuls against 234
# flash (causal 44 against 127), of (8, 16, 4096, 64) 74 against 80, and 50 once the
# probabilities and their gradient came out of the matmuls' epilogues (no pass of their
# own over the scores) and dq, dk, dv stopped splitting K; causal at head dim 64 the
# flash backward, which skips the masked half, took 44 (the matmul way does all of it).
# MATMUL_PATH None: by shape; True / False force a way (tests reach both on any adapter).
MATMUL_MAX_KEYS = 1024
MATMUL_LONG_KEYS = 4096
MATMUL_MAX_SCORE_BYTES = 1 << 30
MATMUL_PATH = None
# The forward through matmuls (two matmuls and a row softmax) from this many keys up to
# MATMUL_LONG_KEYS, with heads wider than 64 and no causal mask, where the flash forward
# holds a row's head-dim vectors over four invocations. On an H200, head dim 128: 19.0 ms
# against 23.4 flash at 4096 keys, 5.37 against 6.27 at 2048, 1.81 against 1.75 at
# 1024; causal 19.2 against 12.1 (flash skips the masked half); at head dim 64 flash won
# at every length (4096 keys: 18.0 against 26.9). MATMUL_FORWARD forces a way.
MATMUL_FORWARD_KEYS = 2048
MATMUL_FORWARD = None


# The kernels whose head-dim slices add up by subgroup shuffles where the adapter has
# subgroups (else through workgroup memory). The backward kernels keep workgroup memory:
# on an H200, with two invocations per row of a 128-wide head, shuffles made the backward
# of (2, 16, 2048, 128) slower (dq 72.6 ms against 50.2, dk/dv 108 against 55.8).
SHUFFLE_ENTRIES = ("attention_forward",)


class Plan(NamedTuple):
    p: int   # invocations per row
    bq: int  # rows per workgroup
    bk: int  # keys (queries) per block through workgroup memory
    kg: int = 0  # of which an inner step takes (unrolled); 0: all bk
    r: int = 1  # rows an invocation holds (the forward: 1, 2 or 4)


class TiledPlan(NamedTuple):
    """The register-tiled forward (attention_forward_tiled): query rows per workgroup and
    keys per block, groups of 4 rows (rg) and of 4 keys (kh) an invocation holds, and
    whether k and v share one tile."""
    bq: int
    bk: int
    rg: int = 1
    kh: int = 1
    shared_kv: bool = False

    def shape(self, v4: int):
        """(invocations along keys and v's vec4 columns, along rows, vec4 columns each)."""
        tx = self.bk // (4 * self.kh)
        return tx, self.bq // (4 * self.rg), v4 // max(tx, 1)


# Tiled forward plans in order of preference; with TILED_FORWARD the first that fits the
# adapter's workgroup memory, with v's vec4 columns spread evenly over the invocations
# along a row (at most 4 each), is taken. It is off: on an H200 the best tiled plan ran
# the forward of (8, 16, 4096, 64) in 34.8 ms against the one-row kernel's 24.5,
# (16, 8, 512, 64) in 1.12 against 0.81 and (4, 16, 4096, 128) in 122 against 32.1
# (`benchmarks/gpu_kernels.py --sweep` times both). Unrolling the phases (constant tile
# indices) took it from 55.8 to 34.8 ms; larger register tiles (rg, kh = 2) and fewer
# invocations a workgroup ran slower at every shape, as the phases' loads then wait.
TILED_PLANS = (TiledPlan(128, 16, 1, 1, True), TiledPlan(64, 32, 1, 1),
               TiledPlan(32, 32, 1, 1, True), TiledPlan(32, 16, 1, 1, True))
TILED_FORWARD = False


def _tiled_bytes(d4: int, v4: int, pl: TiledPlan) -> int:
    kt, vt = 16 * pl.bk * d4, 16 * pl.bk * v4
    return (16 * d4 * pl.bq + (max(kt, vt) if pl.shared_kv else kt + vt)
            + 4 * pl.bk * pl.bq + 12 * pl.bq + 4)


def tiled_fits(dqk: int, dv: int, pl: TiledPlan, workgroup_bytes: int) -> bool:
    d4, v4 = -(-dqk // 4), -(-dv // 4)
    tx, ty, cg = pl.shape(v4)
    return (min(tx, ty) > 0 and pl.bq % (4 * pl.rg) == 0 and pl.bk % (4 * pl.kh) == 0
            and v4 % tx == 0 and cg <= 4 and tx * ty <= 256
            and _tiled_bytes(d4, v4, pl) <= workgroup_bytes)


def tiled_plan(dqk: int, dv: int, workgroup_bytes: int) -> TiledPlan | None:
    """The register-tiled forward's plan for these head dims, or None (the one-row
    kernel): the first of TILED_PLANS that fits."""
    if not TILED_FORWARD:
        return None
    return next((pl for pl in TILED_PLANS if tiled_fits(dqk, dv, pl, workgroup_bytes)),
                None)


def _rows_contiguous(be, x):
    return x if x.shape[-1] == 1 or x.strides[-1] == 1 else be.copy(x)


def _check(q, k, v):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim < 2:
            raise ValueError(f"attention: {name} must be (..., seq, head_dim), got {t.shape}")
        if gd.kind(t.dtype) not in gd.FLOAT_KINDS:
            raise TypeError(f"attention: {name} must be float32, bfloat16 or float16, got "
                            f"{t.dtype}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: q {q.shape}, k {k.shape}, v {v.shape} do not fit")
    if max(q.shape[-1], v.shape[-1]) > MAX_HEAD_DIM:
        raise ValueError(f"attention: head_dim {max(q.shape[-1], v.shape[-1])} is over the "
                         f"kernel's {MAX_HEAD_DIM}")
    return broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])


def _operand(x, lead):
    """(batch strides, offset, sequence stride) of x over the broadcast lead dims."""
    batch = x.view(x.shape[:-2], x.strides[:-2], x.offset)
    return (broadcast_strides(batch, lead), x.offset, x.strides[-2])


def _stat_operand(s, lead):
    """The same for a per-row statistic (..., seq), contiguous."""
    batch = s.view(s.shape[:-1], s.strides[:-1], s.offset)
    return (broadcast_strides(batch, lead), s.offset, s.strides[-1])


def _aligned(x, lead) -> bool:
    """Whether every row of x starts at a multiple of 4 and holds a multiple of 4
    elements, so that rows read and write as vec4s."""
    strides, offset, seq = _operand(x, lead)
    return (x.shape[-1] % 4 == 0 and offset % 4 == 0 and seq % 4 == 0
            and all(s % 4 == 0 for s in strides))


def _mask_strides(mask, lead, sq, sk):
    """(kind, strides over lead + (q, k)) of a user mask, checked."""
    kind = gd.kind(mask.dtype)
    if kind not in gd.FLOAT_KINDS + ("bool",):
        raise TypeError(f"attention: mask must be bool (True = attend) or float (added to "
                        f"the scores), got {mask.dtype}")
    full = tuple(lead) + (sq, sk)
    try:
        return kind, broadcast_strides(mask, full)
    except ValueError:
        raise ValueError(f"attention: mask of shape {mask.shape} does not broadcast to "
                         f"(batch..., q, k) = {full}") from None


def _masking(kind: str, at: str) -> str:
    """WGSL applying the mask value at ``at`` to score x."""
    return (f"x = select(neg_inf(), x, load_mask({at}) != 0u);" if kind == "bool" else
            f"x += load_mask({at});")


def _mask_operand(mask, lead, sq, sk):
    """(operand, query stride, WGSL adding it to score x) of a user mask."""
    kind, strides = _mask_strides(mask, lead, sq, sk)
    add = _masking(kind, "mask_at(min(qi, SQ - 1), min(kj, SK - 1))")
    return (strides[:-2], mask.offset, strides[-1]), strides[-2], add


# per kernel: dot products (name, registers, tile, vec4s per tile row, per slice) and
# accumulations into registers (the same fields)
_DOTS = {
    "attention_forward": ([("score", "rq", "k_tile", "D4", "DQ")],
                          [("accumulate", "ro", "v_tile", "V4", "DV")]),
    "attention_dq": ([("score", "rq", "k_tile", "D4", "DQ"),
                      ("dprob", "rg", "v_tile", "V4", "DV")],
                     [("accumulate", "rdq", "k_tile", "D4", "DQ")]),
    "attention_dkdv": ([("score", "rk", "q_tile", "D4", "DQ"),
                        ("dprob", "rv", "go_tile", "V4", "DV")],
                       [("add_dv", "rdv", "go_tile", "V4", "DV"),
                        ("add_dk", "rdk", "q_tile", "D4", "DQ")]),
}


def _dots(entry: str, rows: int = 1) -> str:
    """The kernel's score / dprob (a register slice dotted with row j of a tile) and
    accumulate / add_dv / add_dk (x times row j of a tile added into a slice). A slice
    holds every P-th vec4 (part, part + P, ...): the P slices of a row then read
    neighbouring vec4s of a tile row, in different banks. The forward's score and
    accumulate serve ``rows`` rows (registers rq<r>_<i>, ro<r>_<i>) with one read of the
    tile: score gives the rows' scores in a vec4, accumulate takes their weights so."""
    if entry == "attention_forward":
        sums = ", ".join([f"hsum(d{r})" for r in range(rows)] + ["0.0"] * (4 - rows))
        return (f"fn score(j: i32) -> vec4<f32> {{\n    let b = j * D4 + part;\n"
                f"    @unroll(DQ) let kv#i = k_tile[b + P * #i];\n"
                f"    @unroll(R) var d#i = vec4<f32>();\n"
                f"    @unroll(R) @unroll(DQ) d#i = fma(rq#i_#j, kv#j, d#i);\n"
                f"    return vec4<f32>({sums});\n}}\n"
                f"fn accumulate(j: i32, x: vec4<f32>) {{\n    let b = j * V4 + part;\n"
                f"    @unroll(DV) let vv#i = v_tile[b + P * #i];\n"
                f"    @unroll(R) @unroll(DV) ro#i_#j = fma(vec4<f32>(x[#i]), vv#j, "
                f"ro#i_#j);\n}}")
    dots, axpys = _DOTS[entry]
    out = []
    for name, regs, tile, row, per in dots:
        out.append(f"fn {name}(j: i32) -> f32 {{\n    let b = j * {row} + part;\n"
                   f"    var d = vec4<f32>();\n"
                   f"    @unroll({per}) d = fma({regs}#i, {tile}[b + P * #i], d);\n"
                   f"    return hsum(d);\n}}")
    for name, regs, tile, row, per in axpys:
        out.append(f"fn {name}(j: i32, x: f32) {{\n    let b = j * {row} + part;\n"
                   f"    @unroll({per}) {regs}#i = fma(vec4<f32>(x), {tile}[b + P * #i], "
                   f"{regs}#i);\n}}")
    return "\n".join(out)


_MASK_AT = """fn mask_at(qi: i32, kj: i32) -> i32 {
    return op_offset(${MASK_OP}, bc) + qi * metadata[4] + kj * op_extra(${MASK_OP});
}"""


def _getter(name: str, dim: int, aligned: bool) -> str:
    """``get_<name>(r, c)``: elements c..c+3 of the row at r (zero past ``dim``)."""
    if aligned:
        return f"fn get_{name}(r: i32, c: i32) -> vec4<f32> {{ return load4_{name}(r + c); }}"
    return (f"fn get_{name}(r: i32, c: i32) -> vec4<f32> {{\n"
            f"    var v = vec4<f32>();\n"
            f"    for (var t = 0; t < 4; t++) {{ if (c + t < {dim}) "
            f"{{ v[t] = f32(load_{name}(r + c + t)); }} }}\n"
            f"    return v;\n}}")


def _putter(name: str, dim: int, aligned: bool) -> str:
    if aligned:
        return f"fn put_{name}(r: i32, c: i32, v: vec4<f32>) {{ store4_{name}(r + c, v); }}"
    return (f"fn put_{name}(r: i32, c: i32, v: vec4<f32>) {{\n"
            f"    for (var t = 0; t < 4; t++) {{ if (c + t < {dim}) "
            f"{{ store_{name}(r + c + t, v[t]); }} }}\n}}")


def plan(entry: str, dqk: int, dv: int, workgroup_bytes: int, n_rows: int,
         software: bool = False, subgroups: bool = False) -> Plan:
    """Invocations per row, rows per workgroup, block length and unrolled step for one
    kernel. Software adapters take small slices and step 4 keys at a time: LLVM compiles
    a fully unrolled block of a 64-wide head in minutes (and a 128-wide one held by one
    invocation in 16 s, by four in 3)."""
    d4, v4 = -(-dqk // 4), -(-dv // 4)
    if entry == "attention_forward" and not software:
        return _forward_plan(d4, v4, workgroup_bytes, n_rows, subgroups)
    held = {"attention_forward": d4 + v4, "attention_dq": 2 * d4 + v4,
            "attention_dkdv": 2 * (d4 + v4)}[entry]
    p = 1
    limit = 8 if software else REGISTER_VEC4[entry]  # LLVM compiles small slices faster
    while held / p > limit and p < 4 and d4 % (2 * p) == 0 and v4 % (2 * p) == 0:
        p *= 2
    # 256 rows a workgroup from 1024 rows where one invocation holds a row: on an H200
    # the forward of (8, 16, 4096, 64) ran 24.3 ms against 25.5 with 128 (causal 13.5
    # against 14.0), (4, 16, 4096, 128) 30.1 against 32.4, the causal dk/dv 3% faster;
    # at 512 rows the causal forward of (16, 8, 512, 64) ran 0.81 ms against 0.66 (two
    # blocks of a head's rows, one with three times the other's keys)
    rows = 256 if n_rows >= 1024 else 128 if n_rows > 256 else 64
    bq = max(16, min(rows, 256 // p))
    bk = 16
    while bk > 4 and _shared_bytes(entry, d4, v4, p, bq, bk, subgroups) > workgroup_bytes:
        bk //= 2
    return Plan(p, bq, bk, 4 if software else bk)


# The forward on GPUs: FORWARD_ROWS rows an invocation, its head-dim vectors (q and o)
# split over P invocations until they hold at most FORWARD_VEC4 vec4s, 128 rows a
# workgroup (64 up to 256 rows), blocks of FORWARD_BK keys. On an H200 (with the next
# block fetched during the current one) (8, 16, 4096, 64) took 18.0 ms with 2 rows and
# 2 slices against 20.5 with 1 and 1 (causal 9.9 against 11.8), (4, 16, 4096, 128) 23.2
# with 2 rows and 4 slices against 29.3 with 1 and 1 (causal 12.9 against 17.2), and
# (16, 8, 512, 64) 0.52 ms against 0.59; 4 rows an invocation, blocks of 4, 16 or 32 keys
# and 64 or 256 rows a workgroup ran slower.
FORWARD_ROWS = 2
FORWARD_VEC4 = 32
FORWARD_BK = 8


def _forward_plan(d4: int, v4: int, workgroup_bytes: int, n_rows: int,
                  subgroups: bool) -> Plan:
    r, p = FORWARD_ROWS, 1
    while (r * (d4 + v4) > FORWARD_VEC4 * p and p < 4 and d4 % (2 * p) == 0
           and v4 % (2 * p) == 0):
        p *= 2
    if r * (d4 + v4) > FORWARD_VEC4 * p:  # a head dim that splits no further
        r = 1
    bq = 128 if n_rows > 256 else 64
    bk = FORWARD_BK
    while bk > 4 and _shared_bytes("attention_forward", d4, v4, p, bq, bk, subgroups,
                                   r) > workgroup_bytes:
        bk //= 2
    return Plan(p, bq, bk, bk, r)


def _slots(entry: str, rows: int = 1) -> int:
    """Partial sums a row exchanges per key: the forward's score of each of its rows;
    score and dprob in the backward's."""
    return rows if entry == "attention_forward" else 2


def _shared_bytes(entry, d4, v4, p, bq, bk, subgroups: bool = False, rows: int = 1) -> int:
    tiles = 16 * bk * (d4 + v4) + (8 * bk if entry == "attention_dkdv" else 0)
    exchange = _slots(entry, rows) * bk if p > 1 and not subgroups else 1
    return tiles + 4 * (bq // rows) * p * exchange


_EXCHANGE = {
    1: """@unroll(KG) @unroll(R) put_slice(#j, #i, s#i_#j);
        workgroupBarrier();
        @unroll(KG) @unroll(R) s#i_#j = slices_sum(#j, #i);
        workgroupBarrier();""",
    2: """@unroll(KG) put_slice(0, #i, s#i);
        @unroll(KG) put_slice(1, #i, g#i);
        workgroupBarrier();
        @unroll(KG) s#i = slices_sum(0, #i);
        @unroll(KG) g#i = slices_sum(1, #i);
        workgroupBarrier();""",
}


def _exchange(p: int, shuffles: bool) -> dict:
    """How the P slices of a row add up their partial dot products: nothing to do for
    one slice, subgroup shuffles where the adapter has subgroups, else workgroup memory
    with two barriers per group of keys."""
    if p == 1:
        return {"EXCHANGE_S": "", "EXCHANGE_SG": "", "SG_ARGS": "", "SG_ROWS": ""}
    if shuffles:
        return {"EXCHANGE_S": _shuffle_exchange(p, ("s#i_#j",), "@unroll(KG) @unroll(R)"),
                "EXCHANGE_SG": _shuffle_exchange(p, ("s#i", "g#i")),
                "SG_ARGS": _SG_ARGS, "SG_ROWS": _SG_ROWS}
    return {"EXCHANGE_S": _EXCHANGE[1], "EXCHANGE_SG": _EXCHANGE[2], "SG_ARGS": "",
            "SG_ROWS": ""}


def _shuffle_exchange(p: int, names, unrolled: str = "@unroll(KG)") -> str:
    """The slices' partial sums of a row added up by subgroup shuffles (a butterfly:
    every lane of the row ends with the same sum, bit for bit), no workgroup memory and
    no barrier. The row's P lanes are adjacent lanes of one subgroup (_SG_ROWS)."""
    steps = []
    m = 1
    while m < p:
        steps += [f"{unrolled} {n} += subgroupShuffleXor({n}, {m}u);" for n in names]
        m *= 2
    return "\n        ".join(steps)


# rows and slices from the subgroup builtins, so that a row's lanes share a subgroup
_SG_ARGS = (", @builtin(subgroup_id) sg_id: u32, @builtin(subgroup_size) sg_size: u32, "
            "@builtin(subgroup_invocation_id) sg_inv: u32")
_SG_ROWS = ("row = i32(sg_id * (sg_size / u32(P)) + sg_inv / u32(P)); "
            "part = i32(sg_inv % u32(P));")


def _dispatch(be, entry, lead, ops, arrays, bindings, scalars, n_rows, dqk, dv, mask,
              plan_: Plan | None):
    """Record one attention kernel over ``arrays`` (and the mask). Its spec, metadata and
    grid follow from the arguments and the arrays' layouts: made once per signature."""
    key = (entry, lead, tuple((tuple(op[0]), *op[1:]) for op in ops),
           *[(a.shape, a.strides, a.offset, a.dtype) for a in arrays], tuple(bindings),
           tuple(scalars), n_rows, dqk, dv,
           None if mask is None else (mask.shape, mask.strides, mask.offset, mask.dtype),
           plan_, be.context.features, TILED_FORWARD)
    launch = _LAUNCHES.get(key)
    if launch is None:
        if len(_LAUNCHES) >= LAUNCHES_KEPT:
            _LAUNCHES.clear()
        launch = _LAUNCHES[key] = _launch(be, entry, lead, ops, arrays, bindings, scalars,
                                          n_rows, dqk, dv, mask, plan_)
    spec, meta, launch_grid, flops = launch
    buffers = [a.buffer for a in arrays]
    if mask is not None:
        buffers.append(mask.buffer)
    be.dispatcher.dispatch(spec, buffers, meta, launch_grid)
    if flops:
        be.dispatcher.submit_long(flops)


#: _dispatch's (spec, metadata, grid, flops submitted early or 0) by signature
_LAUNCHES: dict = {}
LAUNCHES_KEPT = 1024


def _launch(be, entry, lead, ops, arrays, bindings, scalars, n_rows, dqk, dv, mask,
            plan_: Plan | None) -> tuple:
    nbatch = math.prod(lead)
    if nbatch > 65535:
        raise ValueError(f"attention: {nbatch} batch-heads exceed one dispatch (65535)")
    limit = be.context.limits.get("max-compute-workgroup-storage-size", 16384)
    shuffles = be.context.has("subgroup") and entry in SHUFFLE_ENTRIES
    if plan_ is None and entry == "attention_forward":
        plan_ = tiled_plan(dqk, dv, limit)
    pl = plan_ or plan(entry, dqk, dv, limit, n_rows, be.context.software, shuffles)
    ops, arrays, bindings = list(ops), list(arrays), list(bindings)
    helpers, add_mask = [], ""
    if mask is not None:
        operand, q_stride, add_mask = _mask_operand(mask, lead, scalars[0], scalars[1])
        scalars = scalars + [q_stride]
        ops.append(operand)
        arrays.append(mask)
        bindings.append(("mask", gd.kind(mask.dtype), "read"))
        helpers.append(_MASK_AT.replace("${MASK_OP}", str(len(ops) - 1)))
    dims = {"q": dqk, "k": dqk, "dq": dqk, "dk": dqk}
    full = []
    for (name, kind, access), a in zip(bindings, arrays):
        if name in ("lse", "delta", "mask"):
            full.append((name, kind, access))
            continue
        aligned = _aligned(a, lead)
        # (vec4 rows: every word of an output is written whole by one invocation)
        full.append((name, kind, "write_words" if aligned and access == "write" else access,
                     4 if aligned else 1))
        dim = dims.get(name, dv)
        helpers.append(_getter(name, dim, aligned) if access == "read" else
                       _putter(name, dim, aligned))
    meta = meta_block(scalars, lead, ops, what="attention")
    d4, v4 = -(-dqk // 4), -(-dv // 4)
    if isinstance(pl, TiledPlan):
        spec = _tiled_spec(full, pl, d4, v4, helpers, add_mask, limit,
                           not be.context.software)
        return spec, np.array(meta, np.int32), (nbatch, -(-n_rows // pl.bq), 1), 0
    rows = pl.r if entry == "attention_forward" else 1
    nx = _slots(entry, rows)
    nt = pl.bq // rows * pl.p  # invocations a workgroup
    kg = pl.kg or pl.bk
    if pl.bk % kg or rows not in (1, 2, 4) or pl.bq % rows:
        raise ValueError(f"attention: plan {pl}: the block must be a multiple of its step, "
                         f"the rows per invocation 1, 2 or 4 and a divisor of the "
                         f"workgroup's rows")
    spec = kernel("attention.wgsl", entry, full, D4=d4, V4=v4, DQ=d4 // pl.p, DV=v4 // pl.p,
                  P=pl.p, BQ=pl.bq, BK=pl.bk, KG=kg, NX=nx, R=rows,
                  GROUPS="{ const jj = 0;" if kg == pl.bk else
                         "for (var jj = 0; jj < BK; jj += KG) {",
                  XS=pl.bq // rows * pl.p * (nx * kg if pl.p > 1 and not shuffles else 1),
                  HELPERS="\n".join(helpers), MASK=add_mask, DOTS=_dots(entry, rows),
                  HAS_MASK="true" if add_mask else "false",
                  LK=-(-pl.bk * d4 // nt), LV=-(-pl.bk * v4 // nt),
                  PACK_P="vec4<f32>(" + ", ".join([f"p#i_{r}" for r in range(rows)]
                                                  + ["0.0"] * (4 - rows)) + ")",
                  **_exchange(pl.p, shuffles))
    return (spec, np.array(meta, np.int32), (nbatch, -(-n_rows // pl.bq), 1),
            _flops(entry, nbatch, scalars, dqk, dv))


def _flops(entry, nbatch, scalars, dqk, dv) -> float:
    """The kernel's arithmetic (multiply-adds times 2; half the scores where causal):
    long work is submitted as soon as it is recorded (Dispatcher.submit_long), as a
    matmul's is, so that the GPU runs it while the host records what follows."""
    sq, sk, causal = scalars[0], scalars[1], scalars[2]
    products = {"attention_forward": dqk + dv, "attention_dq": 2 * dqk + dv,
                "attention_dkdv": 2 * (dqk + dv)}[entry]
    return 2.0 * nbatch * sq * sk * products * (0.5 if causal else 1.0)


def _tiled_spec(bindings, pl: TiledPlan, d4, v4, helpers, add_mask, limit, unrolled):
    if not tiled_fits(4 * d4, 4 * v4, pl, limit):
        raise ValueError(f"attention: tiled plan {pl} does not fit head dims "
                         f"{4 * d4} / {4 * v4} in {limit} bytes of workgroup memory")
    late = "load_v_tile(k0, lid);"
    tx, ty, cg = pl.shape(v4)
    du, ku = (4 * d4, pl.bk) if unrolled else (2, 1)
    steps = {"D_STEPS": "{ const d = 0;" if unrolled else
                        f"for (var d = 0; d < 4 * D4; d += {du}) {{",
             "K_STEPS": "{ const j = 0;" if unrolled else "for (var j = 0; j < BK; j++) {"}
    # every index is in bounds by construction (tile indices below their sizes, rows
    # and keys past the end never read): no runtime checks, whose clamps stop the folding
    return kernel("attention.wgsl", "attention_forward_tiled", bindings,
                  checks=False, DU=du, KU=ku, **steps, D4=d4, V4=v4,
                  DQ=d4, DV=v4, P=1, R=1, BQ=pl.bq, BK=pl.bk, KG=pl.bk, XS=1, RG=pl.rg,
                  KH=pl.kh, CG=cg, TX=tx, TY=ty,
                  KT=pl.bk * (max(d4, v4) if pl.shared_kv else d4),
                  VT="kt" if pl.shared_kv else "vt",
                  VT_DECL="" if pl.shared_kv else
                  "var<workgroup> vt: array<vec4<f32>, BK * V4>;  // [key][V4]",
                  LOAD_V_EARLY="" if pl.shared_kv else late,
                  LOAD_V_LATE=late if pl.shared_kv else "",
                  HAS_MASK="true" if add_mask else "false",
                  HELPERS="\n".join(helpers), MASK=add_mask)


def _sequence_major(be, lead, seq, d, dtype):
    """An array of shape lead + (seq, d) stored as lead[:-1] + (seq, lead[-1], d)."""
    if not lead:
        return be.empty((seq, d), dtype)
    n = len(lead)
    base = be.empty(lead[:-1] + (seq, lead[-1], d), dtype)
    return permute(base, list(range(n - 1)) + [n, n - 1, n + 1])


def by_matmuls(be, q, k, v, lead, mask=None, causal=False, forward=False) -> bool:
    """Whether attention's backward (or its ``forward``) over these operands takes the
    matmul way (module docstring): with scores for every batch-head of q and k (v
    broadcast further goes the flash way), on a GPU (software adapters compile the flash
    kernels faster); the backward where it is short (or long, see MATMUL_LONG_KEYS), the
    forward where it is long, heads wider than 64 and no causal mask."""
    sq, sk = q.shape[-2], k.shape[-2]
    if (min(sq, sk, q.shape[-1], v.shape[-1]) == 0
            or broadcast_shapes(q.shape[:-2], k.shape[:-2]) != lead):
        return False
    forced = MATMUL_FORWARD if forward else MATMUL_PATH
    if forced is not None:
        return forced
    if forward:
        wanted = (not causal and min(q.shape[-1], v.shape[-1]) > 64
                  and MATMUL_FORWARD_KEYS <= sk <= MATMUL_LONG_KEYS)
    else:
        wanted = sk <= MATMUL_MAX_KEYS or (
            sk <= MATMUL_LONG_KEYS and (not causal or q.shape[-1] > 64))
    return (not be.context.software and wanted
            and (mask is None or 4 * math.prod(lead) * sq * sk <= MATMUL_MAX_SCORE_BYTES)
            and _chunk_length(lead, sq, sk) > 0)


def _chunk_length(lead, sq, sk) -> int:
    """Indices of the first batch dim whose scores fit MATMUL_MAX_SCORE_BYTES together
    (all of it where everything fits; 0 where one index is already too many)."""
    if 4 * math.prod(lead) * sq * sk <= MATMUL_MAX_SCORE_BYTES or not lead:
        return lead[0] if lead else 1
    return min(lead[0], MATMUL_MAX_SCORE_BYTES // (4 * math.prod(lead[1:]) * sq * sk))


def _scores(causal: bool, scale: float, mask_kind: str | None) -> str:
    """Epilogue of the scores' matmul q k^T: the scores scaled and masked (-inf where not
    visible) as the flash kernels do, with the user mask the elem operand ({e})."""
    x = f"{{x}} * {_f32_literal(scale)}"
    if mask_kind == "bool":
        x = f"select(neg_inf(), {x}, {{e}} != 0.0)"
    elif mask_kind is not None:
        x = f"{x} + {{e}}"
    return f"select({x}, neg_inf(), {{n}} > {{m}})" if causal else x


def _probabilities(causal: bool, scale: float, mask_kind: str | None) -> str:
    """Epilogue of the scores' matmul recomputed in the backward: P = exp(scores - lse),
    with lse the row operand ({r}). A row that saw no key (lse = -inf) gets P = 0."""
    return (f"exp({_scores(causal, scale, mask_kind)} - "
            f"select({{r}}, pos_inf(), {{r}} == neg_inf()))")


def _score_gradient(scale: float) -> str:
    """Epilogue of dP = dO v^T: the scores' gradient times scale, P * (dP - delta) *
    scale, with P the elem operand ({e}) and delta = rowsum(dO * O) the row operand."""
    return f"{{e}} * ({{x}} - {{r}}) * {_f32_literal(scale)}"


def _f32_literal(v: float) -> str:
    """A float32 value as exact WGSL."""
    return f"bitcast<f32>({f32_bits(v) & 0xFFFFFFFF}u)"


def _mask_plane(be, mask, lead, sq, sk):
    """The user mask as the scores' matmul reads it: broadcast over the batch dims as it
    is, its (q, k) plane stored whole and contiguous (copied where it is not)."""
    _mask_strides(mask, lead, sq, sk)  # (checked: its kind, and that it broadcasts)
    if mask.ndim < 2:
        mask = mask.view((1,) * (2 - mask.ndim) + mask.shape,
                         (0,) * (2 - mask.ndim) + mask.strides, mask.offset)
    if mask.shape[-2:] == (sq, sk) and mask.strides[-2:] == (sk, 1):
        return mask
    shape = mask.shape[:-2] + (sq, sk)
    return be.copy(mask.view(shape, broadcast_strides(mask, shape), mask.offset))


def _in_chunks(be, run, inputs, trailing, lead, sq, sk, results):
    """``run(lead, *inputs)`` (arrays, or None for an absent mask), in chunks along the
    first batch dim where the scores of all batch-heads at once would exceed
    MATMUL_MAX_SCORE_BYTES: each chunk's arrays are then copied into those ``results()``
    makes (``trailing``: the dims of each input after the batch dims)."""
    step = max(1, _chunk_length(lead, sq, sk))
    if not lead or step >= lead[0]:
        return run(lead, *inputs)
    n = len(lead)
    full = results()
    for lo in range(0, lead[0], step):
        hi = min(lead[0], lo + step)
        parts = [t if t is None else _lead_slice(t, n, lo, hi, dims)
                 for t, dims in zip(inputs, trailing)]
        for whole, part in zip(full, run((hi - lo,) + tuple(lead[1:]), *parts)):
            be.copy_into(_lead_slice(whole, n, lo, hi, part.ndim - n), part)
    return tuple(full)


def _lead_slice(x, n_lead, lo, hi, trailing):
    """x's indices [lo, hi) of the first of the n_lead batch dims, ahead of ``trailing``
    dims (x as it is where it broadcasts along that dim: fewer batch dims, or size 1)."""
    if x.ndim - trailing < n_lead or x.shape[0] == 1:
        return x
    return x.view((hi - lo,) + tuple(x.shape[1:]), x.strides, x.offset + lo * x.strides[0])


def _forward_by_matmuls(be, q, k, v, causal, scale, mask, lead):
    """(out, lse) through two matmuls: the scores q k^T (scaled and masked by the
    epilogue), their rows' softmax in place (and lse), then P v."""
    mask = None if mask is None else _mask_plane(be, mask, lead, q.shape[-2], k.shape[-2])
    s = mm.matmul(be, q, swap_last2(k), out_dtype=gd.F32, elem_operand=mask,
                  activation=_scores(causal, scale,
                                     None if mask is None else gd.kind(mask.dtype)))
    lse = be.empty(s.shape[:-1], gd.F32)
    sk = s.shape[-1]
    rows = s.size // sk
    meta = meta_block([rows, sk], s.shape[:-1], [(s.strides[:-1], s.offset),
                                                 (lse.strides, lse.offset)],
                      what="attention")
    spec = kernel("softmax.wgsl", "softmax_rows_lse", [("x", "f32", "rw"),
                                                       ("lse", "f32", "write")],
                  **row_reduction(be, sk))
    be.dispatcher.dispatch(spec, [s.buffer, lse.buffer], meta, grid(rows))
    return mm.matmul(be, s, v, out_dtype=q.dtype), lse


ROWS_DOT_WG = 256  # rows_dot's workgroup: 32 rows of up to 128 elements, 8 rows longer


def _rows_dot(be, a, b):
    """delta = rowsum(a * b) over the last dim, in f32 (the flash kernels' delta): one
    pass of rows_dot, several rows to a workgroup."""
    rows_shape, n = a.shape[:-1], a.shape[-1]
    delta = be.empty(rows_shape, gd.F32)
    rows = delta.size
    if not rows:
        return delta
    lanes = 8 if n <= 128 else 32
    meta = meta_block([rows, n], rows_shape,
                      [(delta.strides, delta.offset),
                       (a.strides[:-1], a.offset, a.strides[-1]),
                       (b.strides[:-1], b.offset, b.strides[-1])], what="attention")
    spec = kernel("softmax.wgsl", "rows_dot", [("delta", "f32", "write"),
                                               ("a", gd.kind(a.dtype), "read"),
                                               ("b", gd.kind(b.dtype), "read")],
                  WG=ROWS_DOT_WG, LANES=lanes)
    be.dispatcher.dispatch(spec, [delta.buffer, a.buffer, b.buffer], meta,
                           grid(-(-rows // (ROWS_DOT_WG // lanes))))
    return delta


def _backward_by_matmuls(be, q, k, v, out, lse, gout, causal, scale, mask, lead):
    """dq, dk, dv through five matmuls, the scores' rows turned into probabilities and
    then into their gradient by the epilogues of the two matmuls that make them."""
    mask = None if mask is None else _mask_plane(be, mask, lead, q.shape[-2], k.shape[-2])
    probs = _probabilities(causal, scale, None if mask is None else gd.kind(mask.dtype))
    p = mm.matmul(be, q, swap_last2(k), activation=probs, out_dtype=gd.F32,
                  row_operand=lse, elem_operand=mask)
    delta = _rows_dot(be, gout, out)
    ds = mm.matmul(be, gout, swap_last2(v), activation=_score_gradient(scale),
                   out_dtype=gd.F32, row_operand=delta, elem_operand=p)
    return (mm.matmul(be, ds, k, out_dtype=q.dtype),
            mm.matmul(be, swap_last2(ds), q, out_dtype=k.dtype),
            mm.matmul(be, swap_last2(p), gout, out_dtype=v.dtype))


def attention(be, q, k, v, causal, scale, mask=None, plans=None):
    """(out, lse) of softmax(q k^T * scale [+ mask] [causal]) v. ``plans`` maps kernel
    entries to a :class:`Plan` that overrides :func:`plan` (tests reach every variant)."""
    lead = _check(q, k, v)
    q, k, v = (_rows_contiguous(be, t) for t in (q, k, v))
    sq, sk, dqk, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    out = _sequence_major(be, lead, sq, dv, q.dtype)
    lse = be.empty(lead + (sq,), gd.F32)
    if out.size == 0:
        return out, lse
    if not plans and by_matmuls(be, q, k, v, lead, mask, causal, forward=True):
        def run(lead, q, k, v, mask):
            return _forward_by_matmuls(be, q, k, v, causal, scale, mask, lead)

        o, lse = _in_chunks(be, run, (q, k, v, mask), (2, 2, 2, 2), lead, sq, sk,
                            lambda: [out, lse])
        if o is not out:
            be.copy_into(out, o)
        return out, lse
    bindings = [("q", gd.kind(q.dtype), "read"), ("k", gd.kind(k.dtype), "read"),
                ("v", gd.kind(v.dtype), "read"), ("out", gd.kind(q.dtype), "write"),
                ("lse", "f32", "write")]
    ops = [_operand(q, lead), _operand(k, lead), _operand(v, lead), _operand(out, lead),
           _stat_operand(lse, lead)]
    _dispatch(be, "attention_forward", lead, ops, [q, k, v, out, lse], bindings,
              [sq, sk, int(bool(causal)), f32_bits(scale)], sq, dqk, dv, mask,
              (plans or {}).get("attention_forward"))
    return out, lse


def attention_backward(be, q, k, v, out, lse, gout, causal, scale, mask=None, plans=None):
    """(dq, dk, dv), recomputing probabilities from ``lse``: one kernel per query row
    (dq, and delta = rowsum(dO * O)), one per key row (dk, dv)."""
    lead = _check(q, k, v)
    if lse.dtype != gd.F32:
        lse = be.cast(lse, gd.F32)
    if not plans and by_matmuls(be, q, k, v, lead, mask, causal):
        def run(lead, q, k, v, out, lse, gout, mask):
            return _backward_by_matmuls(be, q, k, v, out, lse, gout, causal, scale, mask,
                                        lead)

        return _in_chunks(be, run, (q, k, v, out, lse, gout, mask), (2, 2, 2, 2, 1, 2, 2),
                          lead,
                          q.shape[-2], k.shape[-2],
                          lambda: [be.empty(lead + t.shape[-2:], t.dtype) for t in (q, k, v)])
    q, k, v, out, gout = (_rows_contiguous(be, t) for t in (q, k, v, out, gout))
    sq, sk, dqk, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    dq = be.empty(lead + (sq, dqk), q.dtype)
    dk = be.empty(lead + (sk, dqk), k.dtype)
    dvv = be.empty(lead + (sk, dv), v.dtype)
    delta = be.empty(lead + (sq,), gd.F32)
    if dq.size == 0 and dk.size == 0:
        return dq, dk, dvv
    plans = plans or {}
    scalars = [sq, sk, int(bool(causal)), f32_bits(scale)]
    base = [("q", gd.kind(q.dtype), "read"), ("k", gd.kind(k.dtype), "read"),
            ("v", gd.kind(v.dtype), "read")]
    qkv_ops = [_operand(q, lead), _operand(k, lead), _operand(v, lead)]
    if sq:
        _dispatch(be, "attention_dq", lead,
                  qkv_ops + [_operand(out, lead), _stat_operand(lse, lead),
                             _operand(gout, lead), _operand(dq, lead),
                             _stat_operand(delta, lead)],
                  [q, k, v, out, lse, gout, dq, delta],
                  base + [("out", gd.kind(out.dtype), "read"), ("lse", "f32", "read"),
                          ("gout", gd.kind(gout.dtype), "read"),
                          ("dq", gd.kind(dq.dtype), "write"), ("delta", "f32", "write")],
                  scalars, sq, dqk, dv, mask, plans.get("attention_dq"))
    if sk:
        if not sq:  # no query: delta was never written, and dk = dv = 0
            be.copy_into(dk, gd.F32.type(0))
            be.copy_into(dvv, gd.F32.type(0))
            return dq, dk, dvv
        _dispatch(be, "attention_dkdv", lead,
                  qkv_ops + [([0] * len(lead), 0, 0), _stat_operand(lse, lead),
                             _operand(gout, lead), _operand(dk, lead),
                             _stat_operand(delta, lead), _operand(dvv, lead)],
                  [q, k, v, lse, gout, dk, delta, dvv],
                  base + [("lse", "f32", "read"), ("gout", gd.kind(gout.dtype), "read"),
                          ("dk", gd.kind(dk.dtype), "write"), ("delta", "f32", "read"),
                          ("dv", gd.kind(dvv.dtype), "write")],
                  scalars, sk, dqk, dv, mask, plans.get("attention_dkdv"))
    return dq, dk, dvv
