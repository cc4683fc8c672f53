"""Fused neural-network kernels: linear (+ bias, GELU) and its backward, RMSNorm,
LayerNorm and their backwards, rotary embeddings, the MSE loss. Each is the WGPU
backend's method of its name (``be`` is the backend): backend.py names them. A norm
whose rows are too long for one workgroup runs the contract's composed default instead."""

from __future__ import annotations

import numpy as np

from ..base import Backend
from . import dtypes as gd
from . import matmul as mm
from . import reduce as rd
from .elementwise import map_kernel, run_map
from .geometry import f32_bits, grid, meta_block, reshape_view, swap_last2
from .reduce import row_reduction
from .shaders import kernel


def _rows(be, x, n_cols):
    """``x`` as a (rows, n_cols) view, copying only when its strides do not allow it."""
    rows = x.size // n_cols if n_cols else 0
    v = reshape_view(x, (rows, n_cols))
    return v if v is not None else reshape_view(be.copy(x), (rows, n_cols))


def _input_rounding(x, w):
    """w's dtype where a float32 x meets a 16-bit w (autocast: x is read rounded to it),
    else None."""
    return w.dtype if x.dtype != w.dtype and gd.kind(x.dtype) == "f32" else None


def linear(be, x, w, b, activation=None):
    """y = act(x @ w.T + b), one matmul dispatch with the bias and the activation fused
    in. Returns (y, pre) with pre the pre-activation (None without activation). A
    float32 x with a 16-bit w is rounded to w's dtype as the matmul reads it."""
    n_out, n_in = w.shape
    x2 = _rows(be, x, n_in)
    low = _input_rounding(x, w)
    res = mm.matmul(be, x2, swap_last2(w), bias=b, activation=activation,
                    want_pre=activation is not None, out_dtype=low, round_to=(low, None, None))
    y, pre = res if activation is not None else (res, None)
    shape = x.shape[:-1] + (n_out,)
    y = y.view(shape, None, 0)
    return y, (pre.view(shape, None, 0) if pre is not None else None)


def linear_backward(be, x, w, pre, gy, activation, need_bias, need_input=True):
    """(dx, dw, db) of :func:`linear`; db is None unless ``need_bias``, dx None unless
    ``need_input``."""
    n_out, n_in = w.shape
    g2 = _rows(be, gy, n_out)
    if activation is not None:
        g2 = map_kernel(be, activation.backward, [g2, _rows(be, pre, n_out)], g2.dtype)
    x2 = _rows(be, x, n_in)
    low = _input_rounding(x, w)  # dx then rounded to it too: the cast's gradient, fused
    dx = mm.matmul(be, g2, w, out_dtype=x.dtype if low else None,
                   round_to=(None, None, low)).view(x.shape, None, 0) if need_input else None
    # the bias gradient (g2 summed over rows) comes out of dw's matmul: its A is g2^T
    res = mm.matmul(be, swap_last2(g2), x2, want_row_sums=need_bias, out_dtype=low,
                    round_to=(None, low, None))
    dw, db = res if need_bias else (res, None)
    return dx, dw, db


# -- normalisation -----------------------------------------------------------------------
def _row_operand(x, a, kind):
    """Metadata operand of a row kernel over x's leading dims: ``kind`` 'row' (walks the
    last dim), 'col' (a (D,) vector) or 'stat' (one per row); None gives a dummy."""
    lead = x.ndim - 1
    if a is None:
        return ([0] * lead, 0, 0)
    if kind == "row":
        return (a.strides[:-1], a.offset, a.strides[-1])
    if kind == "col":
        return ([0] * lead, a.offset, a.strides[-1])
    return (a.strides[:lead], a.offset, 0)  # per-row statistic shaped x.shape[:-1] + (1,)


def _pairs_aligned(a) -> bool:
    """Whether each row of ``a`` is contiguous and starts at an even element."""
    return (a.strides[-1] == 1 and a.offset % 2 == 0
            and all(s % 2 == 0 for n, s in zip(a.shape[:-1], a.strides[:-1]) if n > 1))


def _unit_helpers(operands, unit) -> str:
    """ld_<name> / st_<name> of every row and column operand (see norm.wgsl)."""
    out = []
    for k, (name, a, kind, access) in enumerate(operands):
        if a is None or kind == "stat":
            continue
        sig = "(c: array<i32, 8>, u: i32"
        if access != "read":
            body = (f"store2_{name}(col({k}, c, 2 * u), v);" if unit == 2 else
                    f"store_{name}(col({k}, c, u), v.x);")
            out.append(f"fn st_{name}{sig}, v: vec2<f32>) {{ {body} }}")
            continue
        if unit == 1:
            body = f"return vec2<f32>(f32(load_{name}(col({k}, c, u))), 0.0);"
        elif _pairs_aligned(a):
            body = f"return vec2<f32>(load2_{name}(col({k}, c, 2 * u)));"
        else:
            body = (f"let j = col({k}, c, 2 * u); return vec2<f32>(f32(load_{name}(j)), "
                    f"f32(load_{name}(j + op_extra({k}))));")
        out.append(f"fn ld_{name}{sig}) -> vec2<f32> {{ {body} }}")
    return "\n".join(out)


def _run_rows(be, entry, x, operands, scalars, **params):
    """One workgroup per row of x. ``operands``: (name, array or None, kind, access) in
    the kernel's operand order (see norm.wgsl)."""
    if x.size == 0:
        return
    # the spec, metadata and grid follow from the layouts: planned once per signature
    key = (entry, x.shape, *[(n, None if a is None else (a.shape, a.strides, a.offset,
                                                        a.dtype), kind, access)
                             for n, a, kind, access in operands],
           *scalars, *params.items(), be.context.features)
    plan = _ROW_PLANS.get(key)
    if plan is None:
        if len(_ROW_PLANS) >= PLANS_KEPT:
            _ROW_PLANS.clear()
        plan = _ROW_PLANS[key] = _rows_plan(be, entry, x, operands, scalars, params)
    spec, meta, launch = plan
    be.dispatcher.dispatch(spec, [a.buffer for _, a, _, _ in operands if a is not None],
                           meta, launch)


#: _run_rows' (spec, metadata, grid) by signature
_ROW_PLANS: dict = {}
PLANS_KEPT = 4096


def _rows_plan(be, entry, x, operands, scalars, params) -> tuple:
    d = x.shape[-1]
    rows = x.size // d
    written = [a for _, a, kind, access in operands
               if a is not None and access == "write" and kind == "row"]
    unit = 2 if d % 2 == 0 and all(_pairs_aligned(a) for a in written) else 1
    meta = meta_block([rows, d, *scalars], x.shape[:-1],
                      [_row_operand(x, a, kind) for _, a, kind, _ in operands], what=entry)
    # pairs: each row's words are written whole by one invocation
    live = [(n, a, "write_words" if unit == 2 and kind == "row" and acc == "write" else acc)
            for n, a, kind, acc in operands if a is not None]
    spec = kernel("norm.wgsl", entry, [(n, gd.kind(a.dtype), acc) for n, a, acc in live],
                  **row_reduction(be, -(-d // unit)), UNIT=unit,
                  LANE_Y="1.0" if unit == 2 else "0.0",
                  HELPERS=_unit_helpers(operands, unit), **params)
    return spec, np.array(meta, np.int32), grid(rows)


def _weight(w):
    return "vec2<f32>(1.0)" if w is None else "ld_w(c, u)"


def _float(x, what):
    if gd.kind(x.dtype) not in gd.FLOAT_KINDS:
        raise TypeError(f"{what}: needs a float dtype, got {x.dtype}")


def _dw_rows(be, x, w):
    """The per-row products gy * xhat (f32) whose column sums are the weight gradient."""
    if w is None:
        return None
    return be.empty((x.size // max(x.shape[-1], 1), x.shape[-1]), gd.F32)


def rmsnorm(be, x, w, eps):
    """(y, rstd): y = x * rsqrt(mean(x^2) + eps) * w over the last dim."""
    if not rd.row_fits(x.shape[-1]):
        return Backend.rmsnorm(be, x, w, eps)
    _float(x, "rmsnorm")
    y = be.empty(x.shape, x.dtype)
    rstd = be.empty(x.shape[:-1] + (1,), x.dtype)
    _run_rows(be, "rmsnorm", x, [("y", y, "row", "write"), ("x", x, "row", "read"),
                                 ("w", w, "col", "read"), ("rstd", rstd, "stat", "write")],
              [f32_bits(eps)], W=_weight(w))
    return y, rstd


def rmsnorm_backward(be, x, w, rstd, gy):
    """(dx, dw); dw is None when w is None."""
    if not rd.row_fits(x.shape[-1]):
        return Backend.rmsnorm_backward(be, x, w, rstd, gy)
    dx = be.empty(x.shape, x.dtype)
    rows = _dw_rows(be, x, w)
    _run_rows(be, "rmsnorm_backward", x,
              [("dx", dx, "row", "write"), ("x", x, "row", "read"), ("w", w, "col", "read"),
               ("rstd", rstd, "stat", "read"), ("gy", gy, "row", "read"),
               ("dw", None if rows is None else rows.view(x.shape, None, 0), "row",
                "write")],
              [], W=_weight(w), STORE_DW="" if w is None else "st_dw(c, u, gyv * xhat);")
    return dx, None if w is None else _sum_rows(be, rows, w.dtype)


def _sum_rows(be, rows, dtype):
    """The f32 ``rows`` summed over rows, stored in ``dtype`` (the weight's) directly."""
    return rd.reduce(be, "sum", rows, (0,), False,
                     out_dtype=None if dtype == rows.dtype else dtype)


def layernorm(be, x, w, b, eps):
    """(y, mean, rstd) over the last dim; w and b may be None."""
    if not rd.row_fits(x.shape[-1]):
        return Backend.layernorm(be, x, w, b, eps)
    _float(x, "layernorm")
    y = be.empty(x.shape, x.dtype)
    stat_shape = x.shape[:-1] + (1,)
    mean = be.empty(stat_shape, x.dtype)
    rstd = be.empty(stat_shape, x.dtype)
    _run_rows(be, "layernorm", x,
              [("y", y, "row", "write"), ("x", x, "row", "read"), ("w", w, "col", "read"),
               ("mean", mean, "stat", "write"), ("rstd", rstd, "stat", "write"),
               ("b", b, "col", "read")],
              [f32_bits(eps)], W=_weight(w), B="vec2<f32>(0.0)" if b is None else "ld_b(c, u)")
    return y, mean, rstd


def layernorm_backward(be, x, w, mean, rstd, gy):
    """(dx, dw, db); dw is None when w is None; db = gy summed over rows."""
    if not rd.row_fits(x.shape[-1]):
        return Backend.layernorm_backward(be, x, w, mean, rstd, gy)
    dx = be.empty(x.shape, x.dtype)
    rows = _dw_rows(be, x, w)
    _run_rows(be, "layernorm_backward", x,
              [("dx", dx, "row", "write"), ("x", x, "row", "read"), ("w", w, "col", "read"),
               ("mean", mean, "stat", "read"), ("rstd", rstd, "stat", "read"),
               ("gy", gy, "row", "read"),
               ("dw", None if rows is None else rows.view(x.shape, None, 0), "row",
                "write")],
              [], W=_weight(w), STORE_DW="" if w is None else "st_dw(c, u, gyv * xhat);")
    dw = None if w is None else _sum_rows(be, rows, w.dtype)
    g2 = _rows(be, gy, x.shape[-1])
    db = be.sum(g2, (0,), False)
    return dx, dw, db


# -- losses ------------------------------------------------------------------------------
# mse_loss: elements per invocation from which the sum is split over workgroups, and the
# most workgroups it is split over
MSE_PER_INVOCATION = 16
MSE_MAX_PARTS = 1024


def mse_loss(be, x, y):
    """mean((x - y)^2) as a 0-d array of x's dtype, without temporaries: one dispatch for
    small inputs, else partial sums over slices and their total (loss.wgsl)."""
    _float(x, "mse_loss")
    if x.shape != y.shape or x.dtype != y.dtype:
        raise ValueError(f"mse_loss: x {x.shape} {x.dtype} and y {y.shape} {y.dtype} must "
                         f"match in shape and dtype")
    out = be.empty((), x.dtype)
    # the passes follow from the layouts: planned once per signature
    key = (x.shape, x.strides, x.offset, x.dtype, y.strides, y.offset, be.context.features)
    plan = _MSE_PLANS.get(key)
    if plan is None:
        if len(_MSE_PLANS) >= PLANS_KEPT:
            _MSE_PLANS.clear()
        plan = _MSE_PLANS[key] = _mse_plan(be, x, y)
    parts, meta, first, total = plan
    if total is None:
        be.dispatcher.dispatch(first, [out.buffer, x.buffer, y.buffer], meta, (1, 1, 1))
        return out
    part = be.empty((parts,), gd.F32)
    be.dispatcher.dispatch(first, [part.buffer, x.buffer, y.buffer], meta, (parts, 1, 1))
    be.dispatcher.dispatch(total, [out.buffer, part.buffer], meta, (1, 1, 1))
    return out


#: mse_loss' (parts, metadata, first pass's spec, the parts' total's spec or None)
_MSE_PLANS: dict = {}


def _mse_plan(be, x, y) -> tuple:
    n = x.size
    params = row_reduction(be, 1 << 20)
    wg = params["WG"]
    parts = min(MSE_MAX_PARTS, -(-n // (wg * MSE_PER_INVOCATION)))
    meta = meta_block([n, f32_bits(1.0 / n if n else float("nan")), parts], x.shape,
                      [(x.strides, x.offset), (y.strides, y.offset)], what="mse_loss")
    meta = np.array(meta, np.int32)
    k = gd.kind(x.dtype)
    inputs, mean = [("x", k, "read"), ("y", k, "read")], "store_out(0, total * scalar_f(1));"
    if parts <= 1:
        return parts, meta, _mse_spec([("out", k, "write"), *inputs], "sq_diff(i)",
                                      "metadata[0]", mean, params), None
    return (parts, meta,
            _mse_spec([("part", "f32", "write"), *inputs], "sq_diff(i)", "metadata[0]",
                      "store_part(i32(wid.x), total);", params),
            _mse_spec([("out", k, "write"), ("part", "f32", "read")], "load_part(i)",
                      "metadata[2]", mean, params))


def _mse_spec(bindings, term, count, store, params):
    """One mse_loss pass (loss.wgsl): ``term`` summed for i < ``count``, then
    ``store``."""
    sections = params["SECTIONS"] + (" sq_diff" if "sq_diff" in term else "")
    return kernel("loss.wgsl", "mse_loss", bindings, TERM=term, COUNT=count, STORE=store,
                  **{**params, "SECTIONS": sections})


def mse_loss_backward(be, x, y, g):
    """d mean((x - y)^2) / dx = (x - y) * g * 2 / n for the 0-d upstream gradient g."""
    dx = be.empty(x.shape, x.dtype)
    run_map(be, dx, [x, y, g], "((x0 - x1) * x2 * scalar_f(1))",
            [f32_bits(2.0 / max(x.size, 1))])
    return dx


# -- rotary embeddings -------------------------------------------------------------------
def rope(be, x, cos, sin, inverse=False):
    """Rotate-half RoPE of x (..., seq, D) with cos/sin (seq, D // 2)."""
    _float(x, "rope")
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ValueError(f"rope: x must be (..., seq, even D), got {x.shape}")
    seq, d = x.shape[-2:]
    if cos.shape[-2:] != (seq, d // 2) or sin.shape[-2:] != (seq, d // 2):
        raise ValueError(f"rope: cos/sin must be ({seq}, {d // 2}), got {cos.shape} and "
                         f"{sin.shape}")
    out = be.empty(x.shape, x.dtype)
    if x.size == 0:
        return out
    # the rest follows from the layouts (out is fresh: contiguous, at offset 0)
    key = (x.shape, x.strides, x.offset, x.dtype, cos.strides, cos.offset, cos.dtype,
           sin.strides, sin.offset, sin.dtype, inverse)
    plan = _ROPE_PLANS.get(key)
    if plan is None:
        if len(_ROPE_PLANS) >= PLANS_KEPT:
            _ROPE_PLANS.clear()
        plan = _ROPE_PLANS[key] = _rope_plan(x, cos, sin, out, inverse)
    spec, meta, launch = plan
    be.dispatcher.dispatch(spec, [out.buffer, x.buffer, cos.buffer, sin.buffer], meta,
                           launch)
    return out


#: rope's (spec, metadata, grid) by signature
_ROPE_PLANS: dict = {}


def _rope_plan(x, cos, sin, out, inverse) -> tuple:
    n, d = x.size, x.shape[-1]
    scalars = [n, d, cos.offset, cos.strides[-2], cos.strides[-1],
               sin.offset, sin.strides[-2], sin.strides[-1]]
    meta = meta_block(scalars, x.shape, [(out.strides, out.offset), (x.strides, x.offset)],
                      merge=False, what="rope")
    unit = 2 if d % 4 == 0 else 1  # pairs: out is fresh and contiguous
    bindings = [("out", gd.kind(out.dtype), "write_words" if unit == 2 else "write"),
                ("x", gd.kind(x.dtype), "read"), ("cos", gd.kind(cos.dtype), "read"),
                ("sin", gd.kind(sin.dtype), "read")]
    if unit == 1:
        store = "store_out(op_offset(0, c), rotated(c, 0));"
    elif _pairs_aligned(x):  # x's pairs are words too
        store = "store2_out(op_offset(0, c), rotated2(c));"
    else:
        store = "store2_out(op_offset(0, c), vec2<f32>(rotated(c, 0), rotated(c, 1)));"
    spec = kernel("rope.wgsl", "rope", bindings, SIGN="-1.0" if inverse else "1.0",
                  UNIT=unit, STORE=store)
    return spec, np.array(meta, np.int32), grid(-(-n // (256 * unit)))
