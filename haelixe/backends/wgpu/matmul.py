"""Tiled, batched matmul with a fused epilogue (bias, activation, row sums), its
variants chosen by shape and operand layout (see shaders/matmul.wgsl).

Variant choice (:func:`choose`):

- tile: the largest of 128x256 (8x16 per invocation), 128x128 (8x8), 128x64 / 64x128
  and 64x64 that still gives enough workgroups to fill the device and does not overhang
  the matrix much; small matrices take small tiles. Each tile's K steps are unrolled
  (looped on software adapters, whose compilers are slow on long unrolled code) and the
  kernels compile without wgpu's runtime checks (:data:`RUNTIME_CHECKS`).
- split-K: when even 64x64 tiles leave most of the device idle and K is long (a weight
  gradient dW = dY^T X of a small Linear over a large batch), K is cut into slices that
  run side by side (the largest tiles, split into about one wave of workgroups, where
  the slices stay long) and one more dispatch sums them.
- loads: vec4 where an operand is contiguous along m/n or along k and 4-aligned, scalar
  bounds-checked loads otherwise (any strides, no copies).
- f16: float16 operands are widened to f32 on load; with the adapter's ``shader-f16``
  feature and :data:`F16_FLUSH_TILES` set they are multiplied in f16 instead (packed f16
  FMAs on A's values stored paired, summed over a few K tiles, then added into f32
  accumulators), which pays too little on an H200 to be the default.
"""

from __future__ import annotations

import functools
import math
import re
from string import Template
from typing import NamedTuple

import numpy as np

from . import dtypes as gd
from .array import GpuArray, contiguous_strides
from .expr import trace
from .geometry import broadcast_shapes, broadcast_strides_of, grid, meta_block
from .pairs import PACKED_KINDS
from .shaders import kernel, only_sections, read_shader

# (columns, rows) of register blocks that the 32 invocations of a warp take, where the
# tile's grid of WX x WY invocations divides into them: a warp then reads 8 of B's vec4s
# and 4 of A's per step instead of 16 and 2. On an H100, over the Transformer's Linear
# shapes, it timed within 1% of rows on most tiles, 5% faster on 128 x 64 (8 x 4 per
# invocation) in dX = dY W, but 10-20% slower on the tiles of 4 x 8 per invocation,
# which keep rows (lanes None).
LANES = (8, 4)


class Tile(NamedTuple):
    """A BM x BN tile of C computed by (BN / TN) x (BM / TM) invocations, K in steps of
    BK through ``stages`` copies of the tiles in workgroup memory (2: one barrier per
    step instead of two), the BK steps ``unrolled`` or looped over, the invocations of a
    warp taking ``lanes`` (LX, LY) register blocks (None: rows of WX invocations)."""

    bm: int
    bn: int
    tm: int
    tn: int
    bk: int
    stages: int = 1
    unrolled: bool = True
    lanes: tuple | None = LANES

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    def shared_bytes(self, elem_bytes: int = 4, paired_a: bool = False) -> int:
        """Workgroup memory of the tiles (A's twice the size when its values are paired)."""
        return self.stages * self.bk * ((1 + paired_a) * self.bm + self.bn) * elem_bytes

    def valid(self) -> bool:
        t = self.threads
        return (self.tm % 4 == 0 and self.tn % 4 == 0 and self.bk % 4 == 0
                and (self.bk * self.bm // 4) % t == 0 and (self.bk * self.bn // 4) % t == 0
                and t <= 256 and self.stages in (1, 2))


# On an H200, 4096^2 fp32 (benchmarks/gpu_matmul_sweep.py): 128 x 128 tiles with 8 x 8
# per invocation went from 4.25 ms to 3.34 ms (41 TFLOP/s) with the K steps unrolled and
# the runtime checks off; a second stage of tiles cost 15% (3.92 ms), BK 8 or 32 9%. A
# 128 x 256 tile with 8 x 16 per invocation ran 3.30 ms, and best on most Linear shapes.
TILES = {
    "128x256": Tile(128, 256, 8, 16, 16),
    "128x128": Tile(128, 128, 8, 8, 16),
    "128x128k8": Tile(128, 128, 8, 8, 8),
    "128x64": Tile(128, 64, 8, 4, 16),
    "64x128": Tile(64, 128, 4, 8, 16, lanes=None),
    "64x64": Tile(64, 64, 4, 4, 16),
    "64x64n8": Tile(64, 64, 4, 8, 16, lanes=None),
}
# Workgroups that fill a large GPU (an H200 has 132 multiprocessors, each holding two
# 128 x 128 workgroups or one 128 x 256): with fewer tiles than this, a smaller tile or
# split-K pays.
FULL_WAVE = 240
WIDE_WAVE = 128
# a tile whose edges leave more than this share of its area past M x N wastes its work
MAX_WASTE = 0.25
# split-K only from this long a K: first in 128 x 256 tiles, split into up to a wave of
# them (WIDE_WAVE: one a multiprocessor) in slices of at least MIN_SPLIT_SLICE where that
# fills most of the wave; on an H100 the Transformer's weight gradients (K = 8192) ran
# 512 x 512 0.139 ms split 16 ways against 0.188 in 64 x 64 tiles split 16 ways (0.148
# in 128 x 128 split 16), 1536 x 512 0.348 split 5 against 0.374 in 128 x 128 split 5,
# 2048 x 512 0.422 split 4 against 0.450 in 128 x 128 split 4; else in 128 x 128 tiles
# while there are this many
MIN_SPLIT_K = 2048
MIN_SPLIT_SLICE = 512
MIN_TILES_FOR_BIG_SPLITS = 32
MAX_SPLITS = 16
# a K this long (a convolution's weight gradient sums over N * H * W pixels) splits up to
# MAX_SPLITS_LONG_K ways: on an H200, dW of a 64 -> 64 channel 3x3 conv over 32 x 56 x 56
# pixels (64 x 576, K = 100352, windows read in the kernel) took 0.97 ms split 16 ways in
# 64 x 64 tiles, 0.68 split 32 ways
LONG_K = 32768
MAX_SPLITS_LONG_K = 32
# and over a windows operand (that weight gradient itself), 64 x 64 tiles of 4 x 8 per
# invocation split up to 64 ways: 0.33 against 0.44 ms in 4 x 4 split 32 (the same H200,
# inside the layer's step)
WIN_LONG_K_TILE = "64x64n8"
MAX_SPLITS_WIN_LONG_K = 64
# float16 operands with shader-f16 may multiply in f16, summing this many K tiles in f16
# before adding into the f32 accumulators; None widens them to f32 on load instead. On an
# H200 (Vulkan, driver 580) f16 arithmetic does not pay enough to be the default: at
# 4096^2 the best tile (64 x 128, 4 x 8 per invocation, A's tile paired) ran 2.92-2.96 ms
# against 3.22 widened (1.09x; every larger tile 0.67-0.88x, since the f16 sums add
# registers to the f32 ones), on the Transformer's Linear shapes 0.85-1.19x, and its
# error grows with the K summed in f16 (4096^2: 5.4e-4 relative over 16 k, 9.4e-4 over
# 64, against 2.1e-4 widened). So it is off (tests reach it by setting this).
F16_FLUSH_TILES = None
# The matmul kernels index only in bounds (every global access is guarded, every tile
# index is below its size by construction), so they compile without wgpu's runtime
# checks: its index clamps keep the compiler from folding the tile offsets.
RUNTIME_CHECKS = False

_BIAS = "bias_at({n})"
_NO_ROUNDING = (None, None, None)  # matmul's round_to: no operand rounded


class Variant(NamedTuple):
    tile: Tile
    splits: int = 1


@functools.lru_cache(maxsize=1024)  # asked on every product; a model has few shapes
def choose(M: int, N: int, K: int, nbatch: int, a_mode: str = "a_gen",
           b_mode: str = "b_gen", sixteen_bit: bool = False) -> Variant:
    """The tile and split-K factor for a (batch of) M x K @ K x N, from sweeps of the
    variants over the Linear shapes on an H200 (benchmarks/gpu_matmul_sweep.py):

    - 128 x 256 tiles wherever they make a wave of workgroups, then 128 x 128 (BK 8 when
      A is contiguous along m, as in a weight gradient dY^T X, or B along k, as W^T in
      x W^T), each only where it does not overhang M x N much (a narrow N of 64, as
      attention's p v, takes 128 x 64);
    - ``sixteen_bit`` operands (or float32 ones rounded to 16 bits as read) take 128 x 128
      with BK 8 where fp32 takes 128 x 256: widening their words costs registers, and
      with half the accumulators the Transformer's Linear forwards ran 8-20% faster
      (bias, GELU and its pre-activation fused; gpu_matmul_sweep.py's section 6, H200);
    - fewer tiles and a long K: split-K, 128 x 256 split into about a wave of workgroups
      (a Linear's weight gradient over many tokens), else 128 x 128 while there are a
      few dozen tiles, else 64 x 64 split up to 16 ways (a small layer's); but no split
      where 128 x 64 tiles make a wave and fit (attention's dq = dS k over 4096 keys,
      head dim 64, whose 128 x 128 tiles would be half empty);
    - fewer tiles and a short K: 128 x 64, or 64 x 64, whichever makes more workgroups
      than a wave; 64 x 128 where M is too short for 128 rows (a 64-channel convolution,
      M = 64, N = 100352, K = 576 on an H200: 0.50 ms against 0.74 in 128 x 64 tiles,
      windows read in the kernel; 1.60 against 2.64 with the columns copied out).
    """
    def count(t):
        return -(-M // t.bm) * -(-N // t.bn) * nbatch

    def fits(t):
        return M * N >= (1 - MAX_WASTE) * (-(-M // t.bm) * t.bm) * (-(-N // t.bn) * t.bn)

    wide = TILES["128x256"]
    if count(wide) >= WIDE_WAVE and fits(wide):
        k8 = TILES["128x128k8"]
        if sixteen_bit and count(k8) >= FULL_WAVE and fits(k8):
            return Variant(k8)
        return Variant(wide)
    big = TILES["128x128k8" if a_mode == "a_m4" or b_mode == "b_k4" else "128x128"]
    n_big = count(big)
    if n_big >= FULL_WAVE and fits(big):
        return Variant(big)
    medium = TILES["128x64"]
    if K >= MIN_SPLIT_K and not (count(medium) >= FULL_WAVE and fits(medium)):
        n_wide = count(wide)
        splits = min(MAX_SPLITS, WIDE_WAVE // n_wide, K // MIN_SPLIT_SLICE)
        if fits(wide) and n_wide * splits >= WIDE_WAVE * 3 // 4:
            return Variant(wide, splits)
        if n_big >= MIN_TILES_FOR_BIG_SPLITS:
            return Variant(TILES["128x128"], max(2, min(8, round(256 / n_big))))
        small = TILES["64x64"]
        most = MAX_SPLITS
        if K >= LONG_K:
            most = MAX_SPLITS_LONG_K
            if b_mode == "b_win":
                small, most = TILES[WIN_LONG_K_TILE], MAX_SPLITS_WIN_LONG_K
        return Variant(small, max(1, min(most, -(-1024 // count(small)), K // 256)))
    if not fits(medium) and fits(TILES["64x128"]) and count(TILES["64x128"]) >= FULL_WAVE:
        return Variant(TILES["64x128"])  # (a short M: a convolution's 64 channels)
    return Variant(medium if count(medium) >= FULL_WAVE else TILES["64x64"])


def _batch_strides(x: GpuArray, batch) -> tuple:
    """The strides of ``x``'s batch dims (all but its last two) broadcast to ``batch``."""
    return broadcast_strides_of(x.shape[:-2], x.strides[:-2], batch)


def _vec4_mode(rows, cols, sr, sc, offset, bstrides, inner: str, outer: str) -> str:
    """How to fetch the tile of a (..., rows, cols) operand with strides (sr, sc) whose
    batch strides (broadcast over the product's batch) are ``bstrides``: ``outer``
    ("m4" / "n4") when it is contiguous along rows, ``inner`` ("k4") along cols, with
    every index a multiple of 4 so that vec4 loads are aligned; "gen" otherwise."""
    aligned = offset % 4 == 0 and all(s % 4 == 0 for s in bstrides)
    if aligned and sr == 1 and rows % 4 == 0 and (cols == 1 or sc % 4 == 0):
        return outer
    if aligned and sc == 1 and cols % 4 == 0 and (rows == 1 or sr % 4 == 0):
        return inner
    return "gen"


def _a_mode(a, bstrides) -> str:
    (rows, cols), (sr, sc) = a.shape[-2:], a.strides[-2:]
    return "a_" + _vec4_mode(rows, cols, sr, sc, a.offset, bstrides, "k4", "m4")


def _b_mode(b, bstrides) -> str:
    # (read as B^T: its columns are the rows of the tile)
    (rows, cols), (sr, sc) = b.shape[-2:], b.strides[-2:]
    return "b_" + _vec4_mode(cols, rows, sc, sr, b.offset, bstrides, "k4", "n4")


def _emit(value: str, index: str, n: str, width: int, bias: bool, pre: bool, act,
          rnd: str | None = None) -> str:
    """WGSL storing ``value`` (a vec2 / vec4 when width is 2 / 4) as outputs from flat index
    ``index`` at column ``n``: bias, then pre (when kept), then the activation (``act``:
    WGSL of an output's value and column)."""
    s = "" if width == 1 else str(width)
    if width > 1:
        b = (f"vec{width}<f32>(" + ", ".join(_BIAS.format(n=f"{n} + {q}")
                                             for q in range(width)) + ")")
        y = (f"vec{width}<f32>(" + ", ".join(act(f"p.{c}", f"{n} + {q}")
                                             for q, c in enumerate("xyzw"[:width])) + ")"
             if act else "p")
    else:
        b = _BIAS.format(n=n)
        y = act("p", n) if act else "p"
    text = f"let p = {value}{' + ' + b if bias else ''};"
    if pre:
        text += f" store{s}_pre({index}, p);"
    if rnd is not None:  # (round_to's C: a float32 output of 16-bit precision)
        y = f"{rnd}_round{s}({y})"
    return text + f" store{s}_c({index}, {y});"


_ROWSUM_STORE = """if (wid.x == 0u && tx == 0) {
        @unroll(AG) @unroll(4) rowsum_store(zo, m0 + 4 * (#i * WY + ty) + #j, rs#i[#j]);
    }"""
_ROWSUM_REDUCE = """if (n == 0) {
        let r = ci / N;
        var t = 0.0;
        for (var s = 0; s < metadata[3]; s++) { t += load_rpart(s * (total / N) + r); }
        store_rowsum(r, t);
    }"""


def matmul(be, a, b, bias=None, activation=None, want_pre=False, want_row_sums=False,
           variant: Variant | None = None, out_dtype=None, round_to=_NO_ROUNDING,
           row_operand=None, elem_operand=None):
    """numpy.matmul of ``a`` and ``b`` (any strides), plus ``bias`` along the last output
    dim and ``activation`` when given: an Activation (its forward kernel is traced into
    the epilogue) or a WGSL f32 expression in ``{x}``. Returns C, or (C, pre) when
    ``want_pre`` (pre = the output before the activation), or (C, sums) when
    ``want_row_sums`` (sums = a summed over its last dim, shape batch + (M,), computed by
    the same dispatch). ``variant`` overrides :func:`choose` (tests reach every variant
    with it). ``out_dtype`` (a float dtype) sets the dtype of C (and pre, sums), which
    is then free to differ from the operands', as theirs may from each other's: float32
    scores of bfloat16 operands, say, or a float32 matrix times a bfloat16 one.
    ``round_to``: per A, B and C, None or a 16-bit dtype that operand's float32 values
    are rounded to (nearest even) as they are read (A, B) or written (C): autocast's
    cast of a float32 input into a 16-bit Linear, done in the kernel instead of by a
    pass of its own (and its gradient's cast back).
    A string activation may also read ``{m}`` and ``{n}`` (the output's row and column),
    ``{r}``, the value of ``row_operand`` (shape batch + (M,)) at the output's row, and
    ``{e}``, the value of ``elem_operand`` (C's shape) at the output's position:
    attention's backward turns its scores into probabilities with them as they are
    written. Either keeps K in one piece (no split-K)."""
    # everything but the buffers follows from the operands' layouts and the arguments:
    # planned once per such signature (a training step repeats its products); the
    # variant chooser is part of it (sweeps replace choose to force each variant)
    key = (a.shape, a.strides, a.offset, a.dtype, b.shape, b.strides, b.offset, b.dtype,
           _layout_key(bias), activation, want_pre, want_row_sums, variant, out_dtype,
           round_to, _layout_key(row_operand), _layout_key(elem_operand),
           be.context.features, F16_FLUSH_TILES, RUNTIME_CHECKS, choose)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _plan(be, a, b, bias, activation, want_pre, want_row_sums, variant,
                     out_dtype, round_to, row_operand, elem_operand)
        if len(_PLANS) >= PLANS_KEPT:
            _PLANS.clear()
        _PLANS[key] = plan
    out = be.empty(plan.out_shape, plan.dtype)
    pre = be.empty(plan.out_shape, plan.dtype) if want_pre else None
    sums = be.empty(plan.sums_shape, plan.dtype) if want_row_sums else None
    if plan.launch is not None:
        epilogue = _epilogue_operands(be, row_operand, elem_operand)
        _record(be, plan.launch, a, b, bias, activation, out, pre, sums, epilogue)
    elif sums is not None and sums.size:  # N == 0: no tile to do it
        be.copy_into(sums, be.sum(a, (a.ndim - 1,), False))
    if plan.squeezed is not None:
        out = out.view(plan.squeezed, None, 0)
        if pre is not None:
            pre = pre.view(plan.squeezed, None, 0)
    if want_row_sums:
        return out, sums
    return (out, pre) if want_pre else out


#: matmul's plans by signature (see :func:`matmul`); cleared when it holds PLANS_KEPT
_PLANS: dict = {}
PLANS_KEPT = 4096


def _layout_key(x):
    """What a plan reads of an optional operand: its layout and dtype."""
    return None if x is None else (x.shape, x.strides, x.offset, x.dtype)


class _Plan(NamedTuple):
    out_shape: tuple  # C's (and pre's) shape as computed
    dtype: object  # of C, pre and the row sums
    sums_shape: tuple
    squeezed: tuple | None  # C's shape returned, where a 1-d operand dropped a dim
    launch: _Launch | None  # None where C is empty


def _plan(be, a, b, bias, activation, want_pre, want_row_sums, variant, out_dtype,
          round_to, row_operand, elem_operand) -> _Plan:
    """Every check of :func:`matmul` and what its dispatch needs but the buffers."""
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
    if ((a.dtype != b.dtype and out_dtype is None) or gd.kind(a.dtype) not in gd.FLOAT_KINDS
            or gd.kind(b.dtype) not in gd.FLOAT_KINDS):
        raise TypeError(f"matmul: needs float32, bfloat16 or float16 operands of one "
                        f"dtype, got {a.dtype} and {b.dtype}")
    out_dtype = a.dtype if out_dtype is None else gd.check_dtype(out_dtype, "matmul")
    # (a 16-bit operand holds 16-bit values already: only float32 ones are rounded)
    rounds = _NO_ROUNDING if round_to == _NO_ROUNDING else tuple(
        None if r is None or kind != "f32" else _round_kind(r) for r, kind in
        zip(round_to, (gd.kind(a.dtype), gd.kind(b.dtype), gd.kind(out_dtype))))
    if gd.kind(out_dtype) not in gd.FLOAT_KINDS:
        raise TypeError(f"matmul: out_dtype must be float32, bfloat16 or float16, got "
                        f"{out_dtype}")
    (M, K), (K2, N) = a.shape[-2:], b.shape[-2:]
    if K != K2:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align "
                         f"({K} != {K2})")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    nbatch = math.prod(batch)
    out_shape = batch + (M, N)
    if bias is not None and (bias.shape[-1:] != (N,) or bias.size != N):
        raise ValueError(f"matmul: bias of shape {bias.shape} does not match {N} outputs")
    squeezed = None
    if squeeze:
        squeezed = tuple(n for i, n in enumerate(out_shape)
                         if i - len(out_shape) not in squeeze)
    launch = None
    if M * N * nbatch:
        # (each operand's batch strides, worked out once: the load modes and the
        # metadata both read them)
        bstrides = (_batch_strides(a, batch), _batch_strides(b, batch))
        modes = _a_mode(a, bstrides[0]), _b_mode(b, bstrides[1])
        if variant is None:
            sixteen_bit = any(r is not None or gd.kind(t.dtype) != "f32"
                              for r, t in zip(rounds[:2], (a, b)))
            variant = choose(M, N, K, nbatch, *modes, sixteen_bit)
            if be.context.software:  # LLVM compiles unrolled steps slowly; loops run as fast
                variant = _rolled(variant)
        if (row_operand is not None or elem_operand is not None) and variant.splits > 1:
            variant = Variant(variant.tile)  # (matmul_reduce reads no epilogue operand)
        if nbatch * variant.splits > 65535:
            if variant.splits == 1:
                raise ValueError(f"matmul: {nbatch} batch matrices exceed one dispatch "
                                 f"(65535)")
            variant = Variant(variant.tile)
        epilogue = _epilogue_layouts(row_operand, elem_operand, batch, M, N)
        launch = _launch(be, a, b, bias, activation, out_dtype, want_pre, want_row_sums,
                         batch, variant, modes, bstrides, rounds, epilogue=epilogue)
    return _Plan(out_shape, out_dtype, batch + (M,), squeezed, launch)


def _epilogue_layouts(row_operand, elem_operand, batch, M, N):
    """(row operand, elem operand) as the kernel reads them: each None or its (shape,
    strides, offset, dtype), broadcast over C's batch dims, contiguous along its last
    dim (the elem operand along its last two): that of a copy where it is not (see
    :func:`_epilogue_operands`)."""
    row = elem = None
    if row_operand is not None:
        if row_operand.shape[-1:] != (M,):
            raise ValueError(f"matmul: row_operand of shape {row_operand.shape} does not "
                             f"match {M} output rows")
        row = _as_read(row_operand, 1)
    if elem_operand is not None:
        if elem_operand.shape[-2:] != (M, N):
            raise ValueError(f"matmul: elem_operand of shape {elem_operand.shape} does "
                             f"not match the ({M}, {N}) output")
        elem = _as_read(elem_operand, 2)
    return row, elem


def _needs_copy(x, dims: int) -> bool:
    """Whether epilogue operand ``x`` is not contiguous along its last ``dims`` dims."""
    return x.strides[-dims:] != contiguous_strides(x.shape[-dims:])


def _as_read(x, dims: int) -> tuple:
    if _needs_copy(x, dims):
        return (x.shape, contiguous_strides(x.shape), 0, x.dtype)
    return (x.shape, x.strides, x.offset, x.dtype)


def _epilogue_operands(be, row_operand, elem_operand):
    """The row and elem operands as :func:`_epilogue_layouts` describes them."""
    return tuple(None if x is None else be.copy(x) if _needs_copy(x, dims) else x
                 for x, dims in ((row_operand, 1), (elem_operand, 2)))


@functools.lru_cache(maxsize=256)  # (asked per product on a software adapter)
def _rolled(variant: Variant) -> Variant:
    """``variant`` with its tile's steps as loops, not unrolled."""
    return variant._replace(tile=variant.tile._replace(unrolled=False))


def _round_kind(dtype) -> str:
    kind = gd.kind(gd.check_dtype(dtype, "matmul"))
    if kind not in ("bf16", "f16"):
        raise TypeError(f"matmul: round_to takes bfloat16 or float16, got {dtype}")
    return kind


def windows_matmul(be, a, x, kernel, stride, pad, dilation, out_size, groups: int,
                   taps_along_k: bool, variant: Variant | None = None):
    """A @ cols per group, or A @ cols^T (``taps_along_k`` False), where cols (groups,
    C / groups * kh * kw, N * Ho * Wo) is the windows (im2col) matrix of the image ``x``
    (N, C, H, W, any strides) that a convolution multiplies: taps (c, i, j) by output
    pixels (n, oy, ox), ``pad`` cells of zeros before each spatial dim. The kernel reads
    cols from x (matmul.wgsl's b_win), so it is never copied out. ``a``: (groups, M, K)
    or (M, K) of one group. Returns C (groups, M, cols' N), contiguous."""
    n, c, h, w = x.shape
    kh, kw = kernel
    ho, wo = out_size
    taps, pixels = c // groups * kh * kw, n * ho * wo
    K, N = (taps, pixels) if taps_along_k else (pixels, taps)
    M = a.shape[-2]
    if a.shape[-1] != K:
        raise ValueError(f"matmul: {a.shape} does not multiply windows of {K} rows")
    if gd.kind(a.dtype) != "f32" or gd.kind(x.dtype) != "f32":
        raise TypeError(f"matmul: windows products take float32, got {a.dtype} and "
                        f"{x.dtype}")
    batch = (groups,)
    group_stride = c // groups * x.strides[1]
    b = x.view((groups, K, N), (group_stride, 0, 0), x.offset)
    bstrides = (_batch_strides(a, batch), (group_stride,))
    modes = (_a_mode(a, bstrides[0]), "b_win")
    if variant is None:
        variant = choose(M, N, K, groups, *modes)
        if be.context.software:
            variant = _rolled(variant)
    tile = variant.tile
    if tile.threads % (tile.bn // 4):
        raise ValueError(f"matmul: tile {tile} cannot read windows (its invocations are "
                         f"not a multiple of its width in vec4s)")
    out = be.empty((groups, M, N), a.dtype)
    if out.size:
        geometry = (h, w, kw, kh * kw, wo, ho * wo, *stride, *pad, *dilation, *x.strides)
        launch = _launch(be, a, b, None, None, a.dtype, False, False, batch, variant, modes,
                         bstrides, win=(geometry, taps_along_k))
        _record(be, launch, a, b, None, None, out, None, None)
    return out


class _Launch(NamedTuple):
    """A matmul dispatch but its buffers: what a plan keeps."""

    spec: object
    meta: np.ndarray
    grid: tuple
    splits: int  # > 1: split-K, whose partials matmul_reduce then sums
    batch: tuple
    flops: int
    rnd: str | None  # C's rounding (matmul_reduce's, where split)


def _launch(be, a, b, bias, activation, out_dtype, pre: bool, sums: bool, batch,
            variant: Variant, modes, bstrides, rounds=_NO_ROUNDING, win=None,
            epilogue=(None, None)) -> _Launch:
    """One matmul dispatch (and split-K's reduce) over a and b (arrays or views, read
    for their layouts only). ``win``: (geometry, taps along k) of a windows operand B
    (windows_matmul). ``epilogue``: the (shape, strides, offset, dtype) of the row and
    elem operands the activation reads (operands 3 and 4, where windows_matmul's
    geometry would be: the two never meet)."""
    (M, K), N = a.shape[-2:], b.shape[-1]
    nbatch = math.prod(batch)
    tile = variant.tile
    if not tile.valid():
        raise ValueError(f"matmul: tile {tile} is not a valid configuration")
    kinds = (gd.kind(a.dtype), gd.kind(b.dtype), gd.kind(out_dtype))
    flush = (F16_FLUSH_TILES if kinds[:2] == ("f16", "f16") and be.context.has("shader-f16")
             else 0)
    limit = be.context.limits.get("max-compute-workgroup-storage-size", 16384)
    shared = tile.shared_bytes(2, paired_a=True) if flush else tile.shared_bytes()
    if shared > limit:
        raise ValueError(f"matmul: tile {tile} needs {shared} bytes of workgroup memory; "
                         f"the adapter has {limit}")
    # k per split, a whole number of K tiles; splits recomputed from it
    ks = -(-max(K, 1) // variant.splits)
    ks = -(-ks // tile.bk) * tile.bk
    splits = max(1, -(-K // ks))
    a_mode, b_mode = modes  # (how A's and B's tiles are fetched: see _vec4_mode)
    ops = [(bstrides[0], a.offset), (bstrides[1], b.offset),
           bias_operand(bias, batch)]
    if any(x is not None for x in epilogue):
        ops += [([0] * len(batch), 0) if x is None else
                (broadcast_strides_of(x[0][:-dims], x[1][:-dims], batch), x[2])
                for dims, x in zip((1, 2), epilogue)]
    meta = meta_block([M, N, K, a.strides[-2], a.strides[-1], b.strides[-2],
                       b.strides[-1], ks], batch, ops, what="matmul")
    if win is not None:  # (read from slot WIN, after the three operands)
        meta += [int(v) for v in win[0]]
    split = splits > 1
    spec = _matmul_spec(kinds, flush, a_mode, b_mode, N % 4 == 0,
                        None if bias is None or split else gd.kind(bias.dtype),
                        pre and not split, sums, split, tile,
                        activation if not split else None, RUNTIME_CHECKS, rounds,
                        win is None or win[1],
                        tuple(None if x is None else gd.kind(x[3]) for x in epilogue))
    return _Launch(spec, np.array(meta, np.int32),
                   (-(-N // tile.bn), -(-M // tile.bm), nbatch * splits), splits, batch,
                   2 * M * N * K * nbatch, rounds[2])


def _record(be, launch: _Launch, a, b, bias, activation, out, pre, sums,
            epilogue=(None, None)) -> None:
    """Record ``launch`` over these buffers (and split-K's reduce)."""
    buffers = [a.buffer, b.buffer]
    if launch.splits > 1:  # raw partial sums, then matmul_reduce
        M, N = out.shape[-2:]
        nbatch = math.prod(launch.batch)
        part = be.empty((launch.splits, nbatch, M, N), gd.F32)
        rparts = be.empty((launch.splits, nbatch, M), gd.F32) if sums is not None else None
        buffers += [part.buffer] + ([rparts.buffer] if rparts is not None else [])
    else:
        buffers += [x.buffer for x in (out, bias, pre, sums, *epilogue) if x is not None]
    be.dispatcher.dispatch(launch.spec, buffers, launch.meta, launch.grid)
    if launch.splits > 1:
        _reduce(be, part, rparts, bias, activation, out, pre, sums, launch.batch,
                launch.splits, launch.rnd)
    be.dispatcher.submit_long(launch.flops)


@functools.lru_cache(maxsize=512)
def _matmul_spec(kinds, flush, a_mode, b_mode, vec_out, bias_kind, pre, sums, split, tile,
                 activation, checks=True, rounds=_NO_ROUNDING, win_taps_k=True,
                 epilogue_kinds=(None, None)):
    """The KernelSpec of one matmul variant (built once: a dispatch only looks it up).
    ``kinds``: of A, B and C. Bindings: a, b, c (the output, or split-K's f32 partials),
    then bias, pre, the row sums and the epilogue's row and elem operands (of
    ``epilogue_kinds``) where present. ``flush`` > 0: f16 arithmetic, summed in f16 over
    that many K tiles."""
    a_kind, b_kind, kind = kinds
    width = 4 if vec_out else 1
    bindings = [("a", a_kind, "read", 1 if a_mode == "a_gen" else 4),
                ("b", b_kind, "read", 1 if b_mode in ("b_gen", "b_win") else 4)]
    sections = [a_mode]
    if split:
        bindings.append(("c", "f32", "write", width))
        emit4 = ("if (n < N) { store4_c(ci, v); }" if width == 4 else
                 "@unroll(4) if (n + #i < N) { store_c(ci + #i, v[#i]); }")
        if sums:
            bindings.append(("rowsum", "f32", "write"))
    else:
        emit4 = _epilogue4(width, bias_kind is not None, pre, _epilogue(activation),
                           rounds[2])
        # vec4 stores from a multiple of 4: an invocation's words are its own
        out_access = "write_words" if width == 4 else "write"
        bindings.append(("c", kind, out_access, width))
        if bias_kind is not None:
            bindings.append(("bias", bias_kind, "read"))
            sections.append("bias")
        if pre:
            bindings.append(("pre", kind, out_access, width))
        if sums:
            bindings.append(("rowsum", kind, "write"))
    setup = []
    for name, section, slot, op_kind in zip(("rowop", "elemop"), ("row_value", "elem_value"),
                                           (3, 4), epilogue_kinds):
        if op_kind is not None:
            bindings.append((name, op_kind, "read"))
            sections.append(section)
            setup.append(f"{name}_base = op_offset({slot}, bc);")
    f16 = _f16_params(flush) if flush else _F32
    rowsum = {"ROWSUM_ACC": "", "ROWSUM_STORE": ""}
    if sums:
        rowsum = {"ROWSUM_ACC": f"@unroll(AG) rs#i += vec4<f32>({f16['A_ROWS']});",
                  "ROWSUM_STORE": _ROWSUM_STORE}
        sections.append("rowsum")
    raw_a = _raw_fetch(a_kind, a_mode, bool(flush), f16["TILE_T"], f16["LD4"])
    raw_b = _raw_fetch(b_kind, b_mode, bool(flush), f16["TILE_T"], f16["LD4"])
    loaders = _b_loaders(b_mode, f16["TILE_T"], f16["LD"], f16["LD4"], *raw_b, rounds[1],
                         win_taps_k)
    return kernel("matmul.wgsl", "matmul", bindings, enable=("f16",) if flush else (),
                  checks=checks, B_LOADERS=loaders, STAGES=tile.stages,
                  WIN_SETUP="win_setup();" if b_mode == "b_win" else "",
                  EPILOGUE_SETUP=" ".join(setup),
                  RAW_T=raw_a[0], LD4W=raw_a[1], WIDEN_A=_widen("a", raw_a[0], raw_a[2], rounds[0]),
                  MAC=_MAC_UNROLLED if tile.unrolled else _MAC_LOOP,
                  **_lane_map(tile),
                  BM=tile.bm, BN=tile.bn, BK=tile.bk, WX=tile.bn // tile.tn,
                  WY=tile.bm // tile.tm, AG=tile.tm // 4, BG=tile.tn // 4,
                  LA=tile.bk * tile.bm // 4 // tile.threads,
                  LB=tile.bk * tile.bn // 4 // tile.threads,
                  EMIT4=emit4, SECTIONS=" ".join(sections), **rowsum, **f16)


def _lane_map(tile: Tile) -> dict:
    """WGSL of an invocation's block column tx and row ty from its index tid: warps of
    the tile's lanes (LX, LY blocks) where the grid divides into them, else rows of WX."""
    wx, wy = tile.bn // tile.tn, tile.bm // tile.tm
    if tile.lanes is not None:
        lx, ly = tile.lanes
        if lx * ly == 32 and wx % lx == 0 and wy % ly == 0:
            return {"TX": f"tid / 32 % {wx // lx} * {lx} + tid % {lx}",
                    "TY": f"tid / 32 / {wx // lx} * {ly} + tid % 32 / {lx}"}
    return {"TX": "tid % WX", "TY": "tid / WX"}


_MAC_UNROLLED = "@unroll(BK) mac(at_a + #i * AM4, at_b + #i * BN4);"
_MAC_LOOP = "for (var kk = 0; kk < BK; kk++) { mac(at_a + kk * AM4, at_b + kk * BN4); }"


# A's tile loaders (matmul.wgsl) with B's names: they are one text for both operands
_B_NAMES = {"a_tile": "b_tile", "a_tile_put": "b_tile_put", "a_tile_set": "b_tile_set",
            "fetch_a": "fetch_b", "put_a": "put_b", "a_at": "b_at",
            "widen_a": "widen_b",
            "a_base": "b_base", "AM4": "BN4", "BM": "BN", "M": "N", "m0": "n0", "m": "n",
            "ml": "nl", "sam": "sbn", "sak": "sbk"}
_B_RENAME = re.compile(r"\b(" + "|".join(_B_NAMES) + r")\b")


@functools.lru_cache(maxsize=32)
def _b_loaders(b_mode: str, tile_t: str, ld: str, ld4: str, raw_t: str, ld4w: str,
               widened: str, rnd: str | None = None, win_taps_k: bool = True) -> str:
    """fetch_b / put_b (and b_at, widen_b) for B's layout: the loaders of A's equivalent
    section with B's names, placeholders filled (``win_taps_k``: b_win's orientation)."""
    section = {"b_n4": "a_m4", "b_k4": "a_k4", "b_gen": "a_gen", "b_win": "a_win"}[b_mode]
    text = "\n".join(line for line in only_sections(read_shader("matmul.wgsl"), {section})
                     .splitlines() if not line.lstrip().startswith("//"))
    text = _B_RENAME.sub(lambda m: _B_NAMES[m.group(1)], text).replace("}_a(", "}_b(")
    return (Template(text).substitute(TILE_T=tile_t, LD=ld, LD4=ld4, RAW_T=raw_t, LD4W=ld4w,
                                      WIN_K_TAPS=str(win_taps_k).lower())
            + "\n" + _widen("b", raw_t, widened, rnd))


def _raw_fetch(kind: str, mode: str, native: bool, tile_t: str, ld4: str) -> tuple:
    """(the type a fetch of one operand's tile holds, its loader, the WGSL type the tile
    takes): the raw words of a packed 16-bit operand read as vec4s (widened when put into
    the tile, see matmul.wgsl), else the loaded vec4 itself."""
    tile = f"vec4<{tile_t}>"
    if (kind in gd.FLOAT_KINDS and kind != "f32" and not native
            and not mode.endswith(("gen", "win"))):
        return "vec2<u32>", "load4w", tile
    return tile, ld4, tile


def _widen(name: str, raw_t: str, tile: str, rnd: str | None = None) -> str:
    """widen_<name>: a fetched vec4 as the tile holds it (16-bit words widened; a float32
    operand rounded to ``rnd``'s precision where it is given)."""
    body = f"widen4_{name}(x)" if raw_t != tile else "x"
    if rnd is not None:
        body = f"{rnd}_round4({body})"
    return f"fn widen_{name}(x: {raw_t}) -> {tile} {{ return {body}; }}"


def _epilogue(activation):
    """The activation as a function of a WGSL f32 variable name and the output's column,
    or None."""
    if activation is None:
        return None
    if isinstance(activation, str):
        return lambda x, n: activation.format(x=x, m="m", n=n, r="row_value(m)",
                                              e=f"elem_value(m, {n})")
    if activation.forward.wgsl_lib:
        raise ValueError(f"matmul: the activation {activation.name} needs WGSL helpers "
                         f"of its own, which the fused epilogue cannot include")
    return lambda x, n: trace(activation.forward, ("f32",), "f32", names=[x])


def bias_operand(bias, batch):
    """Metadata operand of the bias: its offset and its stride along n (extra slot)."""
    if bias is None:
        return ([0] * len(batch), 0)
    return ([0] * len(batch), bias.offset, bias.strides[-1])


def _epilogue4(width, bias, pre, act, rnd=None) -> str:
    if width == 4:
        return "if (n < N) { " + _emit("v", "ci", "n", 4, bias, pre, act, rnd) + " }"
    return ("@unroll(4) if (n + #i < N) { "
            + _emit("v[#i]", "ci + #i", "n + #i", 1, bias, pre, act, rnd) + " }")


def _tile_access(t: str, paired: bool) -> str:
    """a_tile_put(i, x) / a_tile_set(i, c, v): store vec4 ``i`` of A's tile (four rows at
    one k) or its component ``c``; paired, each value is stored twice, vec4 i taking
    words 2i (x.xxyy) and 2i + 1 (x.zzww). B's tile is never paired."""
    if paired:
        a = (f"fn a_tile_put(i: i32, x: vec4<{t}>) {{ a_tile[2 * i] = x.xxyy; "
             f"a_tile[2 * i + 1] = x.zzww; }}\n"
             f"fn a_tile_set(i: i32, c: i32, v: {t}) {{\n"
             f"    a_tile[2 * i + c / 2][2 * (c % 2)] = v;\n"
             f"    a_tile[2 * i + c / 2][2 * (c % 2) + 1] = v;\n}}")
    else:
        a = (f"fn a_tile_put(i: i32, x: vec4<{t}>) {{ a_tile[i] = x; }}\n"
             f"fn a_tile_set(i: i32, c: i32, v: {t}) {{ a_tile[i][c] = v; }}")
    return a + (f"\nfn b_tile_put(i: i32, x: vec4<{t}>) {{ b_tile[i] = x; }}\n"
                f"fn b_tile_set(i: i32, c: i32, v: {t}) {{ b_tile[i][c] = v; }}")


# f32: A's vec4s (a#i, rows 4i..4i+3 at one k), each row's value splat over B's columns
_F32 = {"TILE_T": "f32", "LD": "load", "LD4": "load4", "DECL_H": "", "FLUSH_H": "",
        "TILE_ACCESS": _tile_access("f32", False), "A_WORDS": 1,
        "A_LETS": "@unroll(AG) let a#i = a_tile[at_a + #i * WY];", "A_ROWS": "a#i",
        "FMAS": "@unroll(AG) @unroll(4) @unroll(BG) c#i#j_#k = "
                "fma(vec4<f32>(a#i[#j]), b#k, c#i#j_#k);"}
# f16: A's tile paired, so a row's value times four columns is two packed f16 FMAs on
# words as they were loaded (a#i: rows 0 and 1 of the vec4, e#i: rows 2 and 3); splatting
# one f16 of a vec4 instead costs a shuffle per product (on an H200 at 4096^2, the splat
# ran 1-12% slower on five of six tiles, the best one among them; 256 x 128 ran faster)
_F16_FMAS = "\n".join(f"@unroll(AG) @unroll(BG) h#i{j}_#j = fma({w}#i.{sw}, b#j, h#i{j}_#j);"
                      for j, (w, sw) in enumerate([("a", "xyxy"), ("a", "zwzw"),
                                                   ("e", "xyxy"), ("e", "zwzw")]))


def _f16_params(flush_tiles: int) -> dict:
    """f16 tiles and h accumulators, added into the f32 ones every ``flush_tiles`` K
    tiles (and after the last)."""
    return {"TILE_T": "f16", "LD": "loadh", "LD4": "load4h",
            "TILE_ACCESS": _tile_access("f16", True), "A_WORDS": 2,
            "A_LETS": "@unroll(AG) let a#i = a_tile[2 * (at_a + #i * WY)];\n"
                      "@unroll(AG) let e#i = a_tile[2 * (at_a + #i * WY) + 1];",
            "A_ROWS": "vec4<f16>(a#i.xz, e#i.xz)", "FMAS": _F16_FMAS,
            "DECL_H": "@unroll(AG) @unroll(4) @unroll(BG) var<private> h#i#j_#k: vec4<f16>;",
            "FLUSH_H": f"if (((k0 - k_begin) / BK) % {flush_tiles} == {flush_tiles - 1} "
                       f"|| k0 + BK >= k_end) {{\n"
                       "@unroll(AG) @unroll(4) @unroll(BG) c#i#j_#k += vec4<f32>(h#i#j_#k);\n"
                       "@unroll(AG) @unroll(4) @unroll(BG) h#i#j_#k = vec4<f16>();\n"
                       "}"}


def _reduce(be, part, rparts, bias, activation, out, pre, sums, batch, splits,
            rnd=None) -> None:
    """Sum split-K partials into ``out`` with the epilogue (and the row sums)."""
    M, N = out.shape[-2:]
    total = out.size
    buffers = [part.buffer, out.buffer] + [x.buffer for x in (bias, pre) if x is not None]
    if sums is not None:
        buffers += [rparts.buffer, sums.buffer]
    dummy = ([0] * len(batch), 0)
    meta = meta_block([M, N, total, splits], batch, [dummy, dummy, bias_operand(bias, batch)],
                      what="matmul")
    kind = gd.kind(out.dtype)
    # a 16-bit C by pairs (N even): whole words, no atomics
    unit = 2 if kind in PACKED_KINDS and N % 2 == 0 else 1
    spec = _reduce_spec(kind, None if bias is None else gd.kind(bias.dtype),
                        pre is not None, sums is not None, activation, unit, rnd)
    be.dispatcher.dispatch(spec, buffers, meta, grid(-(-total // (256 * unit))))


@functools.lru_cache(maxsize=128)
def _reduce_spec(kind, bias_kind, pre, sums, activation, unit=1, rnd=None):
    out_access = "write_words" if unit == 2 else "write"
    bindings = [("part", "f32", "read"), ("c", kind, out_access)]
    if bias_kind is not None:
        bindings.append(("bias", bias_kind, "read"))
    if pre:
        bindings.append(("pre", kind, out_access))
    if sums:
        bindings += [("rpart", "f32", "read"), ("rowsum", kind, "write")]
    return kernel("matmul.wgsl", "matmul_reduce", bindings,
                  SECTIONS="bias" if bias_kind is not None else "", UNIT=unit,
                  ACC_T="vec2<f32>" if unit == 2 else "f32",
                  LOAD_PART="load2_part" if unit == 2 else "load_part",
                  EMIT1=_emit("v", "ci", "n", unit, bias_kind is not None, pre,
                              _epilogue(activation), rnd),
                  ROWSUM_REDUCE=_ROWSUM_REDUCE if sums else "")
