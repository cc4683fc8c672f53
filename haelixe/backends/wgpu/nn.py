"""Fused neural-network kernels: linear (+ bias, GELU) and its backward, RMSNorm,
LayerNorm and their backwards, rotary embeddings."""

from __future__ import annotations

from . import dtypes as gd
from . import matmul as mm
from .elementwise import map_kernel, run_map
from .geometry import f32_bits, grid, meta_block, reshape_view, swap_last2
from .reduce import workgroup_size
from .shaders import kernel


def _rows(be, x, n_cols):
    """``x`` as a (rows, n_cols) view, copying only when its strides do not allow it."""
    rows = x.size // n_cols if n_cols else 0
    v = reshape_view(x, (rows, n_cols))
    return v if v is not None else reshape_view(be.copy(x), (rows, n_cols))


def linear(be, x, w, b, activation=None):
    """y = act(x @ w.T + b), one matmul dispatch with the bias and the activation fused
    in. Returns (y, pre) with pre the pre-activation (None without activation)."""
    n_out, n_in = w.shape
    x2 = _rows(be, x, n_in)
    res = mm.matmul(be, x2, swap_last2(w), bias=b, activation=activation,
                    want_pre=activation is not None)
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
    dx = mm.matmul(be, g2, w).view(x.shape, None, 0) if need_input else None
    # the bias gradient (g2 summed over rows) comes out of dw's matmul: its A is g2^T
    res = mm.matmul(be, swap_last2(g2), x2, want_row_sums=need_bias)
    dw, db = res if need_bias else (res, None)
    return dx, dw, db


# -- normalisation -----------------------------------------------------------------------
def _row_operands(x, ops):
    """Metadata operands for row kernels over x's leading dims: (array or None, kind),
    kind 'row' (walks the last dim), 'col' (a (D,) vector) or 'stat' (one per row)."""
    lead = x.ndim - 1
    out = []
    for a, kind in ops:
        if a is None:
            out.append(([0] * lead, 0, 0))
        elif kind == "row":
            out.append((a.strides[:-1], a.offset, a.strides[-1]))
        elif kind == "col":
            out.append(([0] * lead, a.offset, a.strides[-1]))
        else:  # per-row statistic shaped x.shape[:-1] + (1,)
            out.append((a.strides[:lead], a.offset, 0))
    return out


def _run_rows(be, entry, x, ops, bindings, scalars, **params):
    rows = x.size // x.shape[-1] if x.shape[-1] else 0
    if rows == 0:
        return
    d = x.shape[-1]
    meta = meta_block([rows, d, *scalars], x.shape[:-1], _row_operands(x, ops), what=entry)
    spec = kernel("norm.wgsl", entry, [(n, gd.kind(a.dtype), acc) for n, a, acc in bindings],
                  WG=workgroup_size(d), **params)
    be.dispatcher.dispatch(spec, [a.buffer for _, a, _ in bindings], meta, grid(rows))


def _weight(w, operand):
    return "1.0" if w is None else f"f32(load_w(col({operand}, c, j)))"


def _float(x, what):
    if gd.kind(x.dtype) not in ("f32", "bf16"):
        raise TypeError(f"{what}: needs a float dtype, got {x.dtype}")


def rmsnorm(be, x, w, eps):
    """(y, rstd): y = x * rsqrt(mean(x^2) + eps) * w over the last dim."""
    _float(x, "rmsnorm")
    y = be.empty(x.shape, x.dtype)
    rstd = be.empty(x.shape[:-1] + (1,), x.dtype)
    bindings = [("y", y, "write"), ("x", x, "read")]
    if w is not None:
        bindings.append(("w", w, "read"))
    bindings.append(("rstd", rstd, "write"))
    _run_rows(be, "rmsnorm", x, [(y, "row"), (x, "row"), (w, "col"), (rstd, "stat")],
              bindings, [f32_bits(eps)], W=_weight(w, 2))
    return y, rstd


def rmsnorm_backward(be, x, w, rstd, gy):
    """(dx, dw); dw is None when w is None."""
    dx = be.empty(x.shape, x.dtype)
    rows = be.empty((x.size // max(x.shape[-1], 1), x.shape[-1]), gd.F32) \
        if w is not None else None
    bindings = [("dx", dx, "write"), ("x", x, "read")]
    if w is not None:
        bindings.append(("w", w, "read"))
    bindings += [("rstd", rstd, "read"), ("gy", gy, "read")]
    store = ""
    if rows is not None:
        bindings.append(("dw", rows, "write"))
        store = "store_dw(col(5, c, j), gyv * xhat);"
    rows_view = None if rows is None else rows.view(x.shape, None, 0)
    _run_rows(be, "rmsnorm_backward", x,
              [(dx, "row"), (x, "row"), (w, "col"), (rstd, "stat"), (gy, "row"),
               (rows_view, "row")], bindings, [], W=_weight(w, 2), STORE_DW=store)
    dw = None
    if w is not None:
        dw = _sum_rows(be, rows, w.dtype)
    return dx, dw


def _sum_rows(be, rows, dtype):
    s = be.sum(rows, (0,), False)
    return s if s.dtype == dtype else be.cast(s, dtype)


def layernorm(be, x, w, b, eps):
    """(y, mean, rstd) over the last dim; w and b may be None."""
    _float(x, "layernorm")
    y = be.empty(x.shape, x.dtype)
    stat_shape = x.shape[:-1] + (1,)
    mean = be.empty(stat_shape, x.dtype)
    rstd = be.empty(stat_shape, x.dtype)
    bindings = [("y", y, "write"), ("x", x, "read")]
    if w is not None:
        bindings.append(("w", w, "read"))
    bindings += [("mean", mean, "write"), ("rstd", rstd, "write")]
    if b is not None:
        bindings.append(("b", b, "read"))
    bias = "0.0" if b is None else "f32(load_b(col(5, c, j)))"
    _run_rows(be, "layernorm", x, [(y, "row"), (x, "row"), (w, "col"), (mean, "stat"),
                                   (rstd, "stat"), (b, "col")],
              bindings, [f32_bits(eps)], W=_weight(w, 2), B=bias)
    return y, mean, rstd


def layernorm_backward(be, x, w, mean, rstd, gy):
    """(dx, dw, db); dw is None when w is None; db = gy summed over rows."""
    dx = be.empty(x.shape, x.dtype)
    rows = be.empty((x.size // max(x.shape[-1], 1), x.shape[-1]), gd.F32) \
        if w is not None else None
    bindings = [("dx", dx, "write"), ("x", x, "read")]
    if w is not None:
        bindings.append(("w", w, "read"))
    bindings += [("mean", mean, "read"), ("rstd", rstd, "read"), ("gy", gy, "read")]
    store = ""
    if rows is not None:
        bindings.append(("dw", rows, "write"))
        store = "store_dw(col(6, c, j), gyv * xhat);"
    rows_view = None if rows is None else rows.view(x.shape, None, 0)
    _run_rows(be, "layernorm_backward", x,
              [(dx, "row"), (x, "row"), (w, "col"), (mean, "stat"), (rstd, "stat"),
               (gy, "row"), (rows_view, "row")], bindings, [], W=_weight(w, 2),
              STORE_DW=store)
    dw = None if w is None else _sum_rows(be, rows, w.dtype)
    g2 = _rows(be, gy, x.shape[-1])
    db = be.sum(g2, (0,), False)
    return dx, dw, db


# -- losses ------------------------------------------------------------------------------
def mse_loss(be, x, y):
    """mean((x - y)^2) as a 0-d array of x's dtype: one dispatch, no temporaries."""
    _float(x, "mse_loss")
    if x.shape != y.shape or x.dtype != y.dtype:
        raise ValueError(f"mse_loss: x {x.shape} {x.dtype} and y {y.shape} {y.dtype} must "
                         f"match in shape and dtype")
    out = be.empty((), x.dtype)
    n = x.size
    meta = meta_block([n, f32_bits(1.0 / n if n else float("nan"))], x.shape,
                      [(x.strides, x.offset), (y.strides, y.offset)], what="mse_loss")
    k = gd.kind(x.dtype)
    spec = kernel("loss.wgsl", "mse_loss", [("out", k, "write"), ("x", k, "read"),
                                            ("y", k, "read")], WG=256)
    be.dispatcher.dispatch(spec, [out.buffer, x.buffer, y.buffer], meta, (1, 1, 1))
    return out


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
    n = x.size
    if n == 0:
        return out
    scalars = [n, d, cos.offset, cos.strides[-2], cos.strides[-1],
               sin.offset, sin.strides[-2], sin.strides[-1]]
    meta = meta_block(scalars, x.shape, [(out.strides, out.offset), (x.strides, x.offset)],
                      merge=False, what="rope")
    bindings = [("out", gd.kind(out.dtype), "write"), ("x", gd.kind(x.dtype), "read"),
                ("cos", gd.kind(cos.dtype), "read"), ("sin", gd.kind(sin.dtype), "read")]
    spec = kernel("rope.wgsl", "rope", bindings, SIGN="-1.0" if inverse else "1.0")
    be.dispatcher.dispatch(spec, [out.buffer, x.buffer, cos.buffer, sin.buffer], meta,
                           grid(-(-n // 256)))
    return out
