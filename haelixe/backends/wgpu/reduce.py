"""Reductions (sum, max, min, argmax) and softmax / log_softmax along an axis."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import dtypes as gd
from .array import contiguous_strides
from .geometry import MAXD, STEPS_PER_INVOCATION, grid, merge_dims, meta_block
from .geometry import permute as geo_permute
from .shaders import kernel

# per compute type: identity of (sum, max, min) and the NaN test argmax uses
_INIT = {
    "f32": {"sum": "0.0", "max": "neg_inf()", "min": "pos_inf()"},
    "i32": {"sum": "0", "max": "i32(-2147483647 - 1)", "min": "2147483647"},
    "i64": {"sum": "0li", "max": "(-9223372036854775807li - 1li)", "min": "9223372036854775807li"},
    "u32": {"sum": "0u", "max": "0u", "min": "1u"},
}
_COMBINE = {
    "f32": {"sum": "return a + b;", "max": "return nan_max(a, b);",
            "min": "return nan_min(a, b);"},
    "i32": {"sum": "return a + b;", "max": "return max(a, b);", "min": "return min(a, b);"},
    "i64": {"sum": "return a + b;", "max": "return max(a, b);", "min": "return min(a, b);"},
    # bool: numpy's add.reduce on bools is "any"
    "u32": {"sum": "return max(a, b);", "max": "return max(a, b);",
            "min": "return min(a, b);"},
}
_ISNAN = {"f32": "is_nan", "i32": "no_nan_i32", "i64": "no_nan_i64", "u32": "no_nan_u32"}


def workgroup_size(length: int) -> int:
    """Invocations per row: enough to cover short rows, 256 for long ones."""
    return 32 if length <= 64 else 64 if length <= 512 else 256


def row_fits(length: int) -> bool:
    """Whether one workgroup may walk a row of ``length`` (STEPS_PER_INVOCATION): the
    row kernels (softmax, the norms) take the composed path for longer rows."""
    return -(-length // workgroup_size(length)) <= STEPS_PER_INVOCATION


def row_reduction(be, length: int) -> dict:
    """Params of a kernel built on rows.wgsl for rows of ``length``: its workgroup size
    and how it reduces a row (subgroup operations where the adapter has them)."""
    if be.context.has("subgroup"):
        return {"WG": workgroup_size(length), "SECTIONS": "rows_subgroup",
                "SG_ARGS": ", @builtin(subgroup_id) sg_id: u32, "
                           "@builtin(num_subgroups) sg_n: u32, "
                           "@builtin(subgroup_invocation_id) sg_inv: u32",
                "SG_SET": "sg_index = sg_id; sg_lane = sg_inv; let sgs = sg_n;"}
    return {"WG": workgroup_size(length), "SECTIONS": "rows_tree", "SG_ARGS": "",
            "SG_SET": "let sgs = 1u;"}


# Workgroups a reduction of few long rows is split into: a large GPU runs a hundred or
# more at once, so one workgroup per row leaves it idle while each invocation walks
# thousands of elements.
PARALLEL_GROUPS = 512
# Elements per invocation below which a row stays in one piece: a second dispatch for
# the partial results costs more than a short row takes.
SPLIT_STEPS = 64


def chunking(length: int, wg: int, rows: int = 1) -> tuple:
    """(chunks, chunk length) that split each of ``rows`` rows of ``length`` so that no
    invocation of a ``wg``-wide workgroup loops more than STEPS_PER_INVOCATION times, and
    so that a few long rows still make about PARALLEL_GROUPS workgroups."""
    fewest = -(-length // (STEPS_PER_INVOCATION * wg))
    wanted = min(-(-PARALLEL_GROUPS // rows), length // (SPLIT_STEPS * wg))
    chunks = max(fewest, wanted, 1)
    if chunks == 1:
        return 1, max(length, 1)
    chunk = -(-length // chunks)
    return -(-length // chunk), chunk


def _reduce_meta(x, axes, n_out, chunks=(1, 0)):
    """Metadata for reducing ``x`` over ``axes``: kept dims as the iteration space, the
    reduced dims after operand 0; ``chunks``: (count, length) of the row kernels' pieces."""
    kept = [d for d in range(x.ndim) if d not in axes]
    red = sorted(axes)
    k_shape = tuple(x.shape[d] for d in kept)
    r_shape, (r_strides,) = merge_dims(tuple(x.shape[d] for d in red),
                                       [tuple(x.strides[d] for d in red)])
    if len(r_shape) > MAXD:
        raise ValueError(f"reduction over {len(r_shape)} non-mergeable dims (max {MAXD})")
    length = math.prod(x.shape[d] for d in red)
    meta = meta_block([n_out, length, chunks[0], chunks[1] or length], k_shape,
                      [([x.strides[d] for d in kept], x.offset)], what="reduce")
    pad = MAXD - len(r_shape)
    meta += [len(r_shape)] + list(r_shape) + [1] * pad + list(r_strides) + [0] * pad
    return meta, length


def _out_shape(x, axes, keepdim):
    if keepdim:
        return tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    return tuple(n for d, n in enumerate(x.shape) if d not in axes)


def reduce(be, op: str, x, axes, keepdim: bool, out_dtype=None):
    """sum / max / min over ``axes`` (non-negative ints; None = all, () = none, as numpy).
    ``out_dtype`` (a float dtype, for a float x): the result stored in it, rounded once
    from the float32 accumulator (a norm's bfloat16 weight gradient) instead of by a
    cast afterwards."""
    axes = tuple(range(x.ndim)) if axes is None else tuple(sorted(set(axes)))
    if not axes:
        from .elementwise import cast, copy

        return copy(be, x) if out_dtype is None else cast(be, x, out_dtype)
    # the passes follow from x's layout and the arguments: planned once per signature
    key = (op, x.shape, x.strides, x.offset, x.dtype, axes, keepdim, out_dtype)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= PLANS_KEPT:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(op, x, axes, keepdim, out_dtype)
    if plan.launch is None:  # nothing to reduce into
        return be.empty(plan.shape, plan.out_dtype)
    partial = be.empty(plan.partial_shape, plan.partial_dtype)
    spec, meta, launch_grid = plan.launch
    be.dispatcher.dispatch(spec, [partial.buffer, x.buffer], meta, launch_grid)
    if not plan.chunked:
        return partial
    # long rows: partial results per chunk (in the accumulator's precision), then those
    # reduced
    total = reduce(be, op, partial, (1,), False, plan.total_dtype)
    return total.view(plan.shape, contiguous_strides(plan.shape), total.offset)


class _Plan(NamedTuple):
    shape: tuple  # the result's
    out_dtype: object
    partial_shape: tuple  # what the first pass writes: the result, or per-chunk partials
    partial_dtype: object
    launch: tuple | None  # the first pass's (spec, metadata, grid); None: an empty result
    chunked: bool  # the partials are reduced again, into total_dtype
    total_dtype: object


#: reduce's plans by signature
_PLANS: dict = {}
PLANS_KEPT = 4096


def _plan(op, x, axes, keepdim, out_dtype) -> _Plan:
    shape = _out_shape(x, axes, keepdim)
    out_dtype = x.dtype if out_dtype is None else out_dtype
    n_out = math.prod(shape)
    length = math.prod(x.shape[d] for d in axes)
    if n_out == 0:
        return _Plan(shape, out_dtype, shape, out_dtype, None, False, None)
    if length == 0 and op != "sum":
        raise ValueError(f"{op}: zero-size reduction over axes {axes} of shape {x.shape} "
                         f"has no identity")
    k = gd.kind(x.dtype)
    ct = gd.COMPUTE_TYPE[k]
    per_thread = length <= 16 and n_out > 1
    wg = 64 if per_thread else workgroup_size(length)
    chunks = (1, 0) if per_thread else chunking(length, wg, n_out)
    if chunks[0] > 1:
        partial_shape = (n_out, chunks[0])
        partial_dtype = gd.F32 if k in gd.FLOAT_KINDS else x.dtype
    else:
        partial_shape, partial_dtype = shape, out_dtype
    meta, _ = _reduce_meta(x, axes, n_out, chunks)
    spec = kernel("reduce.wgsl", "reduce_threads" if per_thread else "reduce_rows",
                  [("out", gd.kind(partial_dtype), "write"), ("x", k, "read")],
                  WG=wg, ACC_T=ct, INIT=_INIT[ct][op], COMBINE=_COMBINE[ct][op])
    groups = -(-n_out // wg) if per_thread else n_out * chunks[0]
    return _Plan(shape, out_dtype, partial_shape, partial_dtype,
                 (spec, np.array(meta, np.int32), grid(groups)), chunks[0] > 1,
                 out_dtype if k in gd.FLOAT_KINDS else None)


def argmax(be, x, axis, keepdim: bool):
    """Index (int64, as PyTorch) of the first maximum along ``axis`` (None: over the
    flattened x)."""
    axes = tuple(range(x.ndim)) if axis is None else (axis,)
    shape = _out_shape(x, axes, keepdim) if axis is not None else \
        ((1,) * x.ndim if keepdim else ())
    n_out = math.prod(shape)
    length = math.prod(x.shape[d] for d in axes)
    if n_out == 0:
        return be.empty(shape, gd.I64)
    if length == 0:
        raise ValueError(f"argmax: zero-size axis in shape {x.shape}")
    k = gd.kind(x.dtype)
    ct = gd.COMPUTE_TYPE[k]
    per_thread = length <= 16 and n_out > 1
    wg = 64 if per_thread else workgroup_size(length)
    chunks = (1, 0) if per_thread else chunking(length, wg, n_out)
    if chunks[0] > 1:
        return _argmax_chunked(be, x, axes, shape, wg, chunks)
    out = be.empty(shape, gd.I64)
    meta, _ = _reduce_meta(x, axes, n_out)
    spec = kernel("reduce.wgsl", "argmax_threads" if per_thread else "argmax_rows",
                  [("out", gd.kind(gd.I64), "write"), ("x", k, "read")],
                  WG=wg, ACC_T=ct, INIT=_INIT[ct]["max"], ISNAN=_ISNAN[ct])
    groups = -(-n_out // wg) if per_thread else n_out
    be.dispatcher.dispatch(spec, [out.buffer, x.buffer], meta, grid(groups))
    return out


def _argmax_chunked(be, x, axes, shape, wg, chunks):
    """argmax of long rows: each chunk's first maximum (an index into the row), then the
    first maximum among those chunks' values, which is the row's first maximum."""
    from .elementwise import copy
    from .indexing import gather

    n_out = math.prod(shape)
    kept = [d for d in range(x.ndim) if d not in axes]
    rows = copy(be, geo_permute(x, kept + list(axes)))  # (kept..., reduced...) in C order
    rows = rows.view((n_out, rows.size // n_out), (rows.size // n_out, 1), rows.offset)
    k = gd.kind(x.dtype)
    ct = gd.COMPUTE_TYPE[k]
    best = be.empty((n_out, chunks[0]), gd.I64)
    meta, _ = _reduce_meta(rows, (1,), n_out, chunks)
    spec = kernel("reduce.wgsl", "argmax_rows",
                  [("out", gd.kind(gd.I64), "write"), ("x", k, "read")],
                  WG=wg, ACC_T=ct, INIT=_INIT[ct]["max"], ISNAN=_ISNAN[ct])
    be.dispatcher.dispatch(spec, [best.buffer, rows.buffer], meta,
                           grid(n_out * chunks[0]))
    winners = gather(be, rows, 1, best)  # (n_out, chunks): each chunk's maximum
    which = argmax(be, winners, 1, True)  # the first chunk holding the row's maximum
    out = gather(be, best, 1, which)
    return out.view(shape, contiguous_strides(shape), out.offset)


def row_meta(x, out, axis, scalars):
    """Metadata for a row kernel along ``axis``: operand 0 = out, 1 = x, each with its
    stride along the axis in the extra slot."""
    kept = [d for d in range(x.ndim) if d != axis]
    shape = tuple(x.shape[d] for d in kept)
    ops = [([out.strides[d] for d in kept], out.offset, out.strides[axis]),
           ([x.strides[d] for d in kept], x.offset, x.strides[axis])]
    return meta_block(scalars, shape, ops, what="softmax")


def softmax(be, x, axis, log: bool = False):
    if gd.kind(x.dtype) not in gd.FLOAT_KINDS:
        raise TypeError(f"softmax: needs a float dtype, got {x.dtype}")
    out = be.empty(x.shape, x.dtype)
    if x.size == 0:
        return out
    length = x.shape[axis]
    rows = x.size // length
    meta = row_meta(x, out, axis, [rows, length])
    k = gd.kind(x.dtype)
    spec = kernel("softmax.wgsl", "softmax", [("out", k, "write"), ("x", k, "read")],
                  LOG="true" if log else "false", **row_reduction(be, length))
    be.dispatcher.dispatch(spec, [out.buffer, x.buffer], meta, grid(rows))
    return out
