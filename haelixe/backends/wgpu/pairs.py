"""Elementwise kernels over pairs: each invocation computes elements 2w and 2w + 1, so a
bfloat16 / float16 output (two elements per 32-bit word) is written a whole word at a
time, with no atomics, and packed inputs are read a word at a time: half the bytes of
float32 become half the time.

:func:`eligible` says when ``run_map`` may take this path (a 16-bit output that its
flattened iteration walks contiguously from an even element); :func:`inputs_text` writes
the loads of the ``map_pairs`` entry of ``elementwise.wgsl``.
"""

from __future__ import annotations

from . import dtypes as gd
from .geometry import N_SCALARS, OP_STRIDE, OPS_BASE

PACKED_KINDS = ("bf16", "f16")


def _flat(meta, k: int) -> tuple:
    """(offset, stride) of operand k in a flattened (one-dim) metadata block."""
    base = OPS_BASE + k * OP_STRIDE
    return meta[base], meta[base + 2]


def eligible(out, meta) -> bool:
    """Whether ``out`` (operand 0 of ``meta``, which merged to one dim) is a 16-bit dtype
    walked with stride 1 from an even element."""
    if gd.storage_kind(out.dtype) not in PACKED_KINDS or meta[N_SCALARS] > 1:
        return False
    offset, stride = _flat(meta, 0)
    return offset % 2 == 0 and (stride == 1 or out.size == 1)


def eligible_nd(out, meta) -> bool:
    """Whether ``out`` is a 16-bit dtype written contiguously from an even element over an
    iteration space of several dims (one that did not merge) whose last dim is even: then
    elements 2w and 2w + 1 are neighbours along that dim (map_pairs_nd)."""
    nd = meta[N_SCALARS]
    if gd.storage_kind(out.dtype) not in PACKED_KINDS or nd <= 1:
        return False
    shape = meta[N_SCALARS + 1:N_SCALARS + 1 + nd]
    base = OPS_BASE + 2
    expected = 1
    for d in reversed(range(nd)):
        if shape[d] > 1 and meta[base + d] != expected:
            return False
        expected *= shape[d]
    return shape[-1] % 2 == 0 and meta[OPS_BASE] % 2 == 0


def stride_class(meta, k: int) -> str:
    """How operand k of a flattened metadata block is read by pairs: "broadcast" (stride
    0), "words" (stride 1 from an even element: a pair is one word), else "each"."""
    offset, stride = _flat(meta, k)
    if stride == 0:
        return "broadcast"
    return "words" if stride == 1 and offset % 2 == 0 else "each"


def inputs_text(loads, layout, expr: str, as_sym=None) -> str:
    """WGSL defining ``p<j>`` (elements i and i + 1 of input j, a vec2) for each
    (source, operand, kind) of ``loads`` (a scalar expression when operand is None, else
    a binding read through ``flat_at``, each input's way given in turn by ``layout``, a
    stride_class per operand; ``i1`` is i + 1 clamped to the last element), then setting
    r.x and r.y to ``expr`` of the x and y lanes. ``as_sym`` maps a kind to the WGSL that
    turns a loaded lane ``{v}`` into the expression's operand type."""
    text = []
    ways = iter(layout)
    for j, (src, k, _) in enumerate(loads):
        if k is None:
            text.append(f"let p{j} = vec2({src});")
            continue
        way = next(ways)
        if way == "broadcast":
            text.append(f"let p{j} = vec2(load_{src}(flat_at({k}, i)));")
        elif way == "words":
            text.append(f"let p{j} = load2_{src}(flat_at({k}, i));")
        else:
            text.append(f"let p{j} = vec2(load_{src}(flat_at({k}, i)), "
                        f"load_{src}(flat_at({k}, i1)));")
    return _lanes(text, loads, expr, as_sym)


def inputs_text_nd(loads, expr: str, as_sym=None) -> str:
    """inputs_text for map_pairs_nd: input k at coordinates c and one step further along
    the last dim."""
    text = []
    for j, (src, k, _) in enumerate(loads):
        if k is None:
            text.append(f"let p{j} = vec2({src});")
        else:
            text.append(f"let o{j} = op_offset({k}, c); let p{j} = vec2(load_{src}(o{j}), "
                        f"load_{src}(o{j} + last_stride({k})));")
    return _lanes(text, loads, expr, as_sym)


def _lanes(text, loads, expr, as_sym) -> str:
    """``text`` then r.x and r.y set to ``expr`` of the x and y lanes of the p<j>."""
    for lane in "xy":
        lets = " ".join(
            f"let x{j} = {(as_sym or {}).get(kind, '{v}').format(v=f'p{j}.{lane}')};"
            for j, (_, _, kind) in enumerate(loads))
        text.append(f"{{ {lets} r.{lane} = {expr}; }}")
    return "\n    ".join(text)
