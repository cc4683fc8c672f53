"""Tiled, batched matmul with a fused epilogue (bias, activation, row sums), its
variants chosen by shape and operand layout (see shaders/matmul.wgsl).

Variant choice (:func:`choose`):

- tile: the largest of 128x128 (8x8 per invocation), 128x64 / 64x128 and 64x64 that
  still gives enough workgroups to fill the device; small matrices take small tiles.
- split-K: when even 64x64 tiles leave most of the device idle and K is long (a weight
  gradient dW = dY^T X of a small Linear over a large batch), K is cut into slices that
  run side by side and one more dispatch sums them.
- loads: vec4 where an operand is contiguous along m/n or along k and 4-aligned, scalar
  bounds-checked loads otherwise (any strides, no copies).
- f16: with the adapter's ``shader-f16`` feature, float16 operands are multiplied in f16
  (vec4<f16> FMAs summed over one K tile, then added into f32 accumulators); without
  it they are widened to f32 on load.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from . import dtypes as gd
from .array import GpuArray
from .expr import trace
from .geometry import broadcast_shapes, broadcast_strides, grid, meta_block
from .shaders import kernel


class Tile(NamedTuple):
    """A BM x BN tile of C computed by (BN / TN) x (BM / TM) invocations, K in steps of
    BK."""

    bm: int
    bn: int
    tm: int
    tn: int
    bk: int

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    def valid(self) -> bool:
        t = self.threads
        return (self.tm % 4 == 0 and self.tn % 4 == 0 and self.bk % 4 == 0
                and (self.bk * self.bm // 4) % t == 0 and (self.bk * self.bn // 4) % t == 0
                and t <= 256)


TILES = {
    "128x128": Tile(128, 128, 8, 8, 16),
    "128x64": Tile(128, 64, 8, 4, 16),
    "64x128": Tile(64, 128, 4, 8, 16),
    "64x64": Tile(64, 64, 4, 4, 16),
}
# Workgroups that keep a large GPU busy (an H200 has 132 multiprocessors, each holding
# two of these workgroups); fewer than this and a smaller tile or split-K pays.
FILL_WORKGROUPS = 264
# split-K: slices of K at least this long, at most this many
MIN_SPLIT_K = 256
MAX_SPLITS = 32

_BIAS = "bias_at({n})"


class Variant(NamedTuple):
    tile: Tile
    splits: int = 1


def choose(M: int, N: int, K: int, nbatch: int) -> Variant:
    """The tile and split-K factor for a (batch of) M x K @ K x N."""
    def count(t):
        return -(-M // t.bm) * -(-N // t.bn) * nbatch

    for name in ("128x128", "128x64", "64x128", "64x64"):
        t = TILES[name]
        if count(t) >= FILL_WORKGROUPS:
            return Variant(t)
    t = TILES["64x64"]
    splits = min(MAX_SPLITS, -(-FILL_WORKGROUPS // count(t)), K // MIN_SPLIT_K)
    if M * N >= 1 << 20 and K < 2048:  # large outputs with short K: splitting is a loss
        splits = 1
    return Variant(t, max(1, splits))


def _batch_view(x: GpuArray) -> GpuArray:
    return x.view(x.shape[:-2], x.strides[:-2], x.offset)


def _vec4_mode(x: GpuArray, batch, inner: str, outer: str) -> str:
    """How to fetch the tile of a (..., R, C) operand: ``outer`` ("m4" / "n4") when it is
    contiguous along R, ``inner`` ("k4") along C, with every index a multiple of 4 so
    that vec4 loads are aligned; "gen" otherwise."""
    rows, cols = x.shape[-2:]
    sr, sc = x.strides[-2:]
    bstrides = broadcast_strides(_batch_view(x), batch)
    aligned = x.offset % 4 == 0 and all(s % 4 == 0 for s in bstrides)
    if aligned and sr == 1 and rows % 4 == 0 and (cols == 1 or sc % 4 == 0):
        return outer
    if aligned and sc == 1 and cols % 4 == 0 and (rows == 1 or sr % 4 == 0):
        return inner
    return "gen"


def _emit(value: str, index: str, n: str, width: int, bias: bool, pre: bool, act) -> str:
    """WGSL storing ``value`` (a vec4 when width is 4) as outputs from flat index
    ``index`` at column ``n``: bias, then pre (when kept), then the activation."""
    s = "4" if width == 4 else ""
    if width == 4:
        b = "vec4<f32>(" + ", ".join(_BIAS.format(n=f"{n} + {q}") for q in range(4)) + ")"
        y = ("vec4<f32>(" + ", ".join(act(f"p.{c}") for c in "xyzw") + ")"
             if act else "p")
    else:
        b = _BIAS.format(n=n)
        y = act("p") if act else "p"
    text = f"let p = {value}{' + ' + b if bias else ''};"
    if pre:
        text += f" store{s}_pre({index}, p);"
    return text + f" store{s}_c({index}, {y});"


_ROWSUM_STORE = """if (wid.x == 0u && tx == 0) {
        @unroll(AG) @unroll(4) rowsum_store(zo, m0 + 4 * (#i * WY + ty) + #j, s#i[#j]);
    }"""
_ROWSUM_REDUCE = """if (n == 0) {
        let r = ci / N;
        var t = 0.0;
        for (var s = 0; s < metadata[3]; s++) { t += load_rpart(s * (total / N) + r); }
        store_rowsum(r, t);
    }"""


def matmul(be, a, b, bias=None, activation=None, want_pre=False, want_row_sums=False,
           variant: Variant | None = None):
    """numpy.matmul of ``a`` and ``b`` (any strides), plus ``bias`` along the last output
    dim and ``activation`` when given: an Activation (its forward kernel is traced into
    the epilogue) or a WGSL f32 expression in ``{x}``. Returns C, or (C, pre) when
    ``want_pre`` (pre = the output before the activation), or (C, sums) when
    ``want_row_sums`` (sums = a summed over its last dim, shape batch + (M,), computed by
    the same dispatch). ``variant`` overrides :func:`choose` (tests reach every variant
    with it)."""
    if want_pre and want_row_sums:
        raise ValueError("matmul: want_pre and want_row_sums do not combine")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: 0-d operands are not allowed (numpy raises too)")
    squeeze = []
    if a.ndim == 1:
        a = a.view((1, a.shape[0]), (0, a.strides[0]), a.offset)
        squeeze.append(-2)
    if b.ndim == 1:
        b = b.view((b.shape[0], 1), (b.strides[0], 0), b.offset)
        squeeze.append(-1)
    if a.dtype != b.dtype or gd.kind(a.dtype) not in gd.FLOAT_KINDS:
        raise TypeError(f"matmul: needs float32, bfloat16 or float16 operands of one "
                        f"dtype, got {a.dtype} and {b.dtype}")
    (M, K), (K2, N) = a.shape[-2:], b.shape[-2:]
    if K != K2:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align "
                         f"({K} != {K2})")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    nbatch = math.prod(batch)
    out = be.empty(batch + (M, N), a.dtype)
    pre = be.empty(out.shape, a.dtype) if want_pre else None
    sums = be.empty(batch + (M,), a.dtype) if want_row_sums else None
    if sums is not None and out.size == 0 and sums.size:  # N == 0: no tile to do it
        be.copy_into(sums, be.sum(a, (a.ndim - 1,), False))
    if bias is not None and (bias.shape[-1:] != (N,) or bias.size != N):
        raise ValueError(f"matmul: bias of shape {bias.shape} does not match {N} outputs")
    act = _epilogue(activation)
    if out.size:
        variant = variant or choose(M, N, K, nbatch)
        if nbatch * variant.splits > 65535:
            if variant.splits == 1:
                raise ValueError(f"matmul: {nbatch} batch matrices exceed one dispatch "
                                 f"(65535)")
            variant = Variant(variant.tile)
        _run(be, a, b, bias, act, out, pre, sums, batch, variant)
    if squeeze:
        shape = tuple(n for i, n in enumerate(out.shape)
                      if i - out.ndim not in squeeze)
        out = out.view(shape, None, 0)
        if pre is not None:
            pre = pre.view(shape, None, 0)
    if want_row_sums:
        return out, sums
    return (out, pre) if want_pre else out


def _run(be, a, b, bias, act, out, pre, sums, batch, variant: Variant) -> None:
    (M, K), N = a.shape[-2:], b.shape[-1]
    nbatch = math.prod(batch)
    tile = variant.tile
    if not tile.valid():
        raise ValueError(f"matmul: tile {tile} is not a valid configuration")
    kind = gd.kind(a.dtype)
    native = kind == "f16" and be.context.has("shader-f16")
    # k per split, a whole number of K tiles; splits recomputed from it
    ks = -(-max(K, 1) // variant.splits)
    ks = -(-ks // tile.bk) * tile.bk
    splits = max(1, -(-K // ks))
    a_mode = "a_" + _vec4_mode(a, batch, "k4", "m4")
    b_mode = "b_" + _vec4_mode(b.view(b.shape[:-2] + (b.shape[-1], b.shape[-2]),
                                      b.strides[:-2] + (b.strides[-1], b.strides[-2]),
                                      b.offset), batch, "k4", "n4")
    width = 4 if N % 4 == 0 else 1
    ops = [(broadcast_strides(_batch_view(a), batch), a.offset),
           (broadcast_strides(_batch_view(b), batch), b.offset),
           bias_operand(bias, batch)]
    meta = meta_block([M, N, K, a.strides[-2], a.strides[-1], b.strides[-2],
                       b.strides[-1], ks], batch, ops, what="matmul")
    bindings = [("a", kind, "read", 1 if a_mode == "a_gen" else 4),
                ("b", kind, "read", 1 if b_mode == "b_gen" else 4)]
    buffers = [a.buffer, b.buffer]
    sections = [a_mode, b_mode]
    if splits > 1:  # raw partial sums, then matmul_reduce
        part = be.empty((splits, nbatch, M, N), gd.F32)
        bindings.append(("c", "f32", "write", width))
        buffers.append(part.buffer)
        emit4 = ("if (n < N) { store4_c(ci, v); }" if width == 4 else
                 "@unroll(4) if (n + #i < N) { store_c(ci + #i, v[#i]); }")
        rparts = None
        if sums is not None:
            rparts = be.empty((splits, nbatch, M), gd.F32)
            bindings.append(("rowsum", "f32", "write"))
            buffers.append(rparts.buffer)
    else:
        emit4 = _epilogue4(width, bias is not None, pre is not None, act)
        bindings.append(("c", kind, "write", width))
        buffers.append(out.buffer)
        if bias is not None:
            bindings.append(("bias", gd.kind(bias.dtype), "read"))
            buffers.append(bias.buffer)
            sections.append("bias")
        if pre is not None:
            bindings.append(("pre", kind, "write", width))
            buffers.append(pre.buffer)
        if sums is not None:
            bindings.append(("rowsum", kind, "write"))
            buffers.append(sums.buffer)
    rowsum = {"ROWSUM_ACC": "", "ROWSUM_STORE": ""}
    if sums is not None:
        rowsum = {"ROWSUM_ACC": "@unroll(AG) s#i += vec4<f32>(a#i);",
                  "ROWSUM_STORE": _ROWSUM_STORE}
        sections.append("rowsum")
    f16 = _F16 if native else _F32
    spec = kernel("matmul.wgsl", "matmul", bindings, enable=("f16",) if native else (),
                  BM=tile.bm, BN=tile.bn, BK=tile.bk, WX=tile.bn // tile.tn,
                  WY=tile.bm // tile.tm, AG=tile.tm // 4, BG=tile.tn // 4,
                  LA=tile.bk * tile.bm // 4 // tile.threads,
                  LB=tile.bk * tile.bn // 4 // tile.threads,
                  EMIT4=emit4, SECTIONS=" ".join(sections), **rowsum, **f16)
    be.dispatcher.dispatch(spec, buffers, meta,
                           (-(-N // tile.bn), -(-M // tile.bm), nbatch * splits))
    if splits > 1:
        _reduce(be, part, rparts, bias, act, out, pre, sums, batch, splits)


def _epilogue(activation):
    """The activation as a function of a WGSL f32 variable name, or None."""
    if activation is None:
        return None
    if isinstance(activation, str):
        return lambda x: activation.format(x=x)
    if activation.forward.wgsl_lib:
        raise ValueError(f"matmul: the activation {activation.name} needs WGSL helpers "
                         f"of its own, which the fused epilogue cannot include")
    return lambda x: trace(activation.forward, ("f32",), "f32", names=[x])


def bias_operand(bias, batch):
    """Metadata operand of the bias: its offset and its stride along n (extra slot)."""
    if bias is None:
        return ([0] * len(batch), 0)
    return ([0] * len(batch), bias.offset, bias.strides[-1])


def _epilogue4(width, bias, pre, act) -> str:
    if width == 4:
        return "if (n < N) { " + _emit("v", "ci", "n", 4, bias, pre, act) + " }"
    return ("@unroll(4) if (n + #i < N) { "
            + _emit("v[#i]", "ci + #i", "n + #i", 1, bias, pre, act) + " }")


_F32 = {"TILE_T": "f32", "LD": "load", "LD4": "load4", "ACC": "c", "DECL_H": "",
        "FLUSH_H": ""}
_F16 = {"TILE_T": "f16", "LD": "loadh", "LD4": "load4h", "ACC": "h",
        "DECL_H": "@unroll(AG) @unroll(4) @unroll(BG) var h#i#j_#k = vec4<f16>();",
        "FLUSH_H": "@unroll(AG) @unroll(4) @unroll(BG) c#i#j_#k += vec4<f32>(h#i#j_#k);\n"
                   "@unroll(AG) @unroll(4) @unroll(BG) h#i#j_#k = vec4<f16>();"}


def _reduce(be, part, rparts, bias, act, out, pre, sums, batch, splits) -> None:
    """Sum split-K partials into ``out`` with the epilogue (and the row sums)."""
    M, N = out.shape[-2:]
    total = out.size
    kind = gd.kind(out.dtype)
    bindings = [("part", "f32", "read"), ("c", kind, "write")]
    buffers = [part.buffer, out.buffer]
    sections = []
    if bias is not None:
        bindings.append(("bias", gd.kind(bias.dtype), "read"))
        buffers.append(bias.buffer)
        sections.append("bias")
    if pre is not None:
        bindings.append(("pre", kind, "write"))
        buffers.append(pre.buffer)
    rowsum = ""
    if sums is not None:
        bindings += [("rpart", "f32", "read"), ("rowsum", gd.kind(sums.dtype), "write")]
        buffers += [rparts.buffer, sums.buffer]
        rowsum = _ROWSUM_REDUCE
    dummy = ([0] * len(batch), 0)
    meta = meta_block([M, N, total, splits], batch, [dummy, dummy, bias_operand(bias, batch)],
                      what="matmul")
    spec = kernel("matmul.wgsl", "matmul_reduce", bindings, SECTIONS=" ".join(sections),
                  EMIT1=_emit("v", "ci", "n", 1, bias is not None, pre is not None, act),
                  ROWSUM_REDUCE=rowsum)
    be.dispatcher.dispatch(spec, buffers, meta, grid(-(-total // 256)))
