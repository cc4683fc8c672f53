"""Elementwise kernels: unary, binary, compare, where, clamp, gelu, cast and copies.

All of them are one WGSL entry (``elementwise.wgsl: map``) specialised with an
expression over the inputs ``x0, x1, x2`` (already converted to their compute type:
f32 for float32/bfloat16, i32 for int32, u32 0/1 for bool).

An input may be a scalar (a numpy scalar or 0-d numpy array, as the ops layer passes for
``x * 2.0``): its value travels in the metadata, so it costs no buffer and no fill
dispatch.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as gd
from . import pairs
from .geometry import N_SCALARS, broadcast_shapes, broadcast_strides, f32_bits, grid, meta_block
from .shaders import kernel

# -- expression tables -------------------------------------------------------------------
# {x} / {a}, {b} are replaced by the operands; a missing entry means "not for this kind".
UNARY_FLOAT = {
    "neg": "-{x}", "abs": "abs({x})", "exp": "exp({x})", "log": "log({x})",
    "sqrt": "sqrt({x})", "rsqrt": "(1.0 / sqrt({x}))", "tanh": "tanh_f32({x})",
    "sigmoid": "sigmoid_f32({x})", "relu": "select({x}, 0.0, {x} < 0.0)",
    "silu": "({x} * sigmoid_f32({x}))", "sin": "sin({x})", "cos": "cos({x})",
    "sign": "sign({x})", "gelu": "gelu_erf({x})", "gelu_tanh": "gelu_tanh({x})",
    "erf": "erf_f32({x})", "gelu_deriv": "gelu_erf_grad({x})",
    "gelu_tanh_deriv": "gelu_tanh_grad({x})",
}
UNARY_INT = {"neg": "-{x}", "abs": "abs({x})", "sign": "sign({x})", "relu": "max({x}, 0)"}
UNARY_BOOL = {"abs": "{x}"}

BINARY_FLOAT = {
    "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})",
    "pow": "pow_f32({a}, {b})", "maximum": "nan_max({a}, {b})",
    "minimum": "nan_min({a}, {b})",
    "gelu_grad": "({b} * gelu_erf_grad({a}))", "gelu_tanh_grad": "({b} * gelu_tanh_grad({a}))",
}
BINARY_INT = {
    "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})",
    "maximum": "max({a}, {b})", "minimum": "min({a}, {b})",
}
# numpy on bools: + is or, * is and
BINARY_BOOL = {"add": "max({a}, {b})", "mul": "({a} * {b})", "maximum": "max({a}, {b})",
               "minimum": "min({a}, {b})"}
COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

_TABLES_UNARY = {"f32": UNARY_FLOAT, "bf16": UNARY_FLOAT, "f16": UNARY_FLOAT,
                 "i32": UNARY_INT, "i64": UNARY_INT, "bool": UNARY_BOOL}
_TABLES_BINARY = {"f32": BINARY_FLOAT, "bf16": BINARY_FLOAT, "f16": BINARY_FLOAT,
                  "i32": BINARY_INT, "i64": BINARY_INT, "bool": BINARY_BOOL}


def convert(expr: str, src: str, dst: str) -> str:
    """WGSL converting ``expr`` from the compute type of kind ``src`` to that of ``dst``."""
    s, d = gd.COMPUTE_TYPE[src], gd.COMPUTE_TYPE[dst]
    if s == d:
        return expr
    if dst == "bool":
        return f"select(0u, 1u, {expr} != {s}())"
    return f"{d}({expr})"


# -- scalar operands ---------------------------------------------------------------------
def is_scalar(x) -> bool:
    """A host value (numpy scalar or 0-d array) rather than a GpuArray."""
    return isinstance(x, (np.generic, np.ndarray))


def as_scalar(x) -> np.generic:
    """``x`` as a numpy scalar of a GPU dtype (int64 narrowed, range-checked)."""
    a = gd.narrow(np.asarray(x), "scalar operand")
    if a.ndim:
        raise ValueError(f"elementwise: a host operand must be a scalar, got shape {a.shape}")
    gd.check_dtype(a.dtype, "scalar operand")
    return a[()]


def _scalar_word(v: np.generic) -> int:
    """The metadata int holding scalar ``v`` (float bits for float32 / bfloat16)."""
    k = gd.kind(v.dtype)
    if k in gd.FLOAT_KINDS:
        return f32_bits(float(v))
    if not -2**31 <= int(v) < 2**31:
        raise OverflowError(f"elementwise: the scalar operand {int(v)} does not fit int32; "
                            f"pass it as a tensor")
    return int(v)


_SCALAR_LOAD = {"f32": "scalar_f({j})", "bf16": "scalar_f({j})", "f16": "scalar_f({j})",
                "i32": "scalar_i({j})", "i64": "i64(scalar_i({j}))",
                "bool": "u32(scalar_i({j}))"}


# -- the one launcher --------------------------------------------------------------------
def run_map(be, out, inputs, expr: str, scalars=(), update: bool = False) -> None:
    """Record ``out[...] = expr(inputs)``; ``out`` may be any strided view and every input
    (a GpuArray or a host scalar) is broadcast to ``out.shape``. ``scalars`` fill
    metadata slots 1.. (``scalar_f`` / ``scalar_i`` in ``expr``).

    ``update=True`` reads ``out`` itself as ``x0`` (``inputs`` are then x1, x2, ...): an
    in-place op in one dispatch. A buffer may not be bound for reading and writing in one
    dispatch, so inputs must not share out's storage, and bfloat16 (two per word) cannot
    be updated this way."""
    n = out.size
    if n == 0:
        return
    shape = out.shape
    ops = [(out.strides, out.offset)]
    words = [n, *scalars]
    bindings = [("out", gd.kind(out.dtype), "rw" if update else "write")]
    buffers = [out.buffer]
    loads = [("out", 0)] if update else []  # (binding, operand) per x0, x1, ...
    for k, x in enumerate(inputs, start=int(update)):
        if is_scalar(x):
            x = as_scalar(x)
            loads.append((_SCALAR_LOAD[gd.kind(x.dtype)].format(j=len(words)), None))
            words.append(_scalar_word(x))
            continue
        ops.append((broadcast_strides(x, shape), x.offset))
        bindings.append((f"x{k}", gd.kind(x.dtype), "read"))
        buffers.append(x.buffer)
        loads.append((f"x{k}", len(ops) - 1))
    meta = meta_block(words, shape, ops, what="elementwise")
    if not update and pairs.eligible(out, meta):  # 16-bit output: a word per invocation
        spec = kernel("elementwise.wgsl", "map_pairs", bindings,
                      INPUTS=pairs.inputs_text(loads, meta, expr))
        be.dispatcher.dispatch(spec, buffers, meta, grid(-(-n // 512)))
        return
    # one merged dim: the kernel without coordinates (index = offset + i * stride)
    flat = meta[N_SCALARS] <= 1
    index = "flat_at({k}, i)" if flat else "op_offset({k}, c)"
    text = " ".join(f"let x{j} = {src};" if k is None else
                    f"let x{j} = load_{src}({index.format(k=k)});"
                    for j, (src, k) in enumerate(loads))
    spec = kernel("elementwise.wgsl", "map_flat" if flat else "map", bindings, INPUTS=text,
                  EXPR=expr)
    be.dispatcher.dispatch(spec, buffers, meta, grid(-(-n // 256)))


def _op_error(op: str, dts, why: str = "") -> TypeError:
    names = ", ".join(np.dtype(d).name for d in dts)
    return TypeError(f"{op}: not available for dtype {names} on the GPU{why}")


# -- families ----------------------------------------------------------------------------
def unary(be, op: str, x):
    """``op(x)``; float-only ops on int/bool inputs give float32 (as PyTorch)."""
    k = gd.kind(x.dtype)
    expr = _TABLES_UNARY[k].get(op)
    out_dt = x.dtype
    if expr is None:
        if op not in UNARY_FLOAT or op in ("neg",):
            raise _op_error(op, [x.dtype])
        expr, out_dt = UNARY_FLOAT[op], gd.F32
        arg = convert("x0", k, "f32")
    else:
        arg = "x0"
    out = be.empty(x.shape, out_dt)
    run_map(be, out, [x], expr.format(x=arg))
    return out


def binary(be, op: str, a, b):
    """``op(a, b)`` with numpy broadcasting; int division gives float32. Either operand
    may be a host scalar of the other's dtype."""
    a, b = (as_scalar(t) if is_scalar(t) else t for t in (a, b))
    if a.dtype != b.dtype:
        raise TypeError(f"{op}: dtypes {a.dtype} and {b.dtype} differ; the ops layer "
                        f"promotes before calling the kernel")
    k = gd.kind(a.dtype)
    shape = broadcast_shapes(a.shape, b.shape)
    expr = _TABLES_BINARY[k].get(op)
    out_dt = a.dtype
    xa, xb = "x0", "x1"
    if expr is None:
        if op not in ("div", "pow") or (op == "pow" and k == "bool"):
            raise _op_error(op, [a.dtype, b.dtype])
        expr, out_dt = BINARY_FLOAT[op], gd.F32
        xa, xb = convert("x0", k, "f32"), convert("x1", k, "f32")
        if op == "pow" and k in gd.INT_KINDS:
            expr, out_dt, xa, xb = f"ipow_{k}({{a}}, {{b}})", a.dtype, "x0", "x1"
    out = be.empty(shape, out_dt)
    run_map(be, out, [a, b], expr.format(a=xa, b=xb))
    return out


def binary_into(be, op: str, dst, src) -> None:
    """``dst = op(dst, src)`` in place: one dispatch, no temporary. ``src`` (a GpuArray
    or host scalar) broadcasts to dst. Falls back to a temporary and a copy where one
    kernel cannot do it: bfloat16 dst, src sharing dst's storage, mixed dtypes, int
    division."""
    src = as_scalar(src) if is_scalar(src) else src
    k = gd.kind(dst.dtype)
    expr = _TABLES_BINARY[k].get(op)
    if expr is None or k in ("bf16", "f16") or src.dtype != dst.dtype or (
            not is_scalar(src) and src.storage is dst.storage):
        copy_into(be, dst, binary(be, op, dst, src))
        return
    run_map(be, dst, [src], expr.format(a="x0", b="x1"), update=True)


def gelu_backward(be, x, gy, approximate="none"):
    """``gy * gelu'(x)`` (x and gy of one float dtype, gy broadcast to x's shape)."""
    if gd.kind(x.dtype) not in gd.FLOAT_KINDS or gy.dtype != x.dtype:
        raise TypeError(f"gelu_backward: needs x and gy of one float dtype, got {x.dtype} "
                        f"and {gy.dtype}")
    op = "gelu_tanh_grad" if approximate == "tanh" else "gelu_grad"
    out = be.empty(x.shape, x.dtype)
    run_map(be, out, [x, gy], BINARY_FLOAT[op].format(a="x0", b="x1"))
    return out


def compare(be, op: str, a, b):
    a, b = (as_scalar(t) if is_scalar(t) else t for t in (a, b))
    shape = broadcast_shapes(a.shape, b.shape)
    out = be.empty(shape, gd.BOOL)
    run_map(be, out, [a, b], f"select(0u, 1u, x0 {COMPARE[op]} x1)")
    return out


def where(be, cond, a, b):
    a, b = (as_scalar(t) if is_scalar(t) else t for t in (a, b))
    shape = broadcast_shapes(cond.shape, a.shape, b.shape)
    out = be.empty(shape, a.dtype)
    truth = f"(x0 != {gd.COMPUTE_TYPE[gd.kind(cond.dtype)]}())"
    run_map(be, out, [cond, a, b], f"select(x2, x1, {truth})")
    return out


def clamp(be, x, lo, hi):
    k = gd.kind(x.dtype)
    if k == "bool":
        raise _op_error("clamp", [x.dtype])
    is_float = k in gd.FLOAT_KINDS

    def enc(v):
        return f32_bits(float(v)) if is_float else int(v)

    get = "scalar_f({})" if is_float else "out_t(scalar_i({}))"
    expr, scalars = "x0", []
    if lo is not None:
        scalars.append(enc(lo))
        expr = f"max({expr}, {get.format(1)})"
    if hi is not None:
        scalars.append(enc(hi))
        expr = f"min({expr}, {get.format(len(scalars))})"
    if is_float:  # keep NaN as numpy's clip does
        expr = f"select({expr}, x0, is_nan(x0))"
    out = be.empty(x.shape, x.dtype)
    run_map(be, out, [x], expr, scalars)
    return out


def cast(be, x, dtype):
    dst = gd.storage_dtype(np.dtype(dtype), "cast")
    out = be.empty(x.shape, dst)
    run_map(be, out, [x], convert("x0", gd.kind(x.dtype), gd.kind(dst)))
    return out


def copy_into(be, dst, src) -> None:
    """``dst[...] = src`` (broadcast, converted to dst's dtype), dst any strided view;
    ``src`` may be a host scalar (a fill in one dispatch)."""
    if is_scalar(src):
        src = as_scalar(src)
    elif src.storage is dst.storage:
        src = copy(be, src)  # overlapping views: read everything before writing
    run_map(be, dst, [src], convert("x0", gd.kind(src.dtype), gd.kind(dst.dtype)))


def copy(be, x):
    out = be.empty(x.shape, x.dtype)
    run_map(be, out, [x], "x0")
    return out
