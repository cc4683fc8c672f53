"""Elementwise kernels: any traced Kernel (``map``), casts and copies.

All of them are one WGSL entry (``elementwise.wgsl: map``) specialised with an
expression over the inputs ``x0, x1, x2``: a Kernel's function traced into WGSL (see
expr.py), or a conversion for casts and copies.

An input may be a scalar (a numpy scalar or 0-d numpy array, as the ops layer passes for
``x * 2.0``): its value travels in the metadata, so it costs no buffer and no fill
dispatch.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as gd
from . import pairs, special
from .expr import trace
from .geometry import (
    N_SCALARS,
    broadcast_shapes,
    broadcast_strides_of,
    f32_bits,
    grid,
    meta_block,
)
from .shaders import kernel


def convert(expr: str, src: str, dst: str) -> str:
    """WGSL converting ``expr`` from the compute type of kind ``src`` to that of ``dst``."""
    s, d = gd.COMPUTE_TYPE[src], gd.COMPUTE_TYPE[dst]
    if s == d:
        return expr
    if dst == "bool":
        return f"select(0u, 1u, {expr} != {s}())"
    return f"{d}({expr})"


def convert_between(expr: str, src_dtype, dst_dtype) -> str:
    """WGSL converting ``expr`` of ``src_dtype`` to ``dst_dtype`` as stored; into a
    widened dtype it wraps at that dtype's width (the value of a same-dtype copy is in
    range already)."""
    out = convert(expr, gd.storage_kind(src_dtype), gd.storage_kind(dst_dtype))
    return out if np.dtype(src_dtype) == np.dtype(dst_dtype) else gd.wrap_to(out, dst_dtype)


# the type a symbol of each storage kind has inside a traced expression
_SYM_TYPE = {"f32": "f32", "bf16": "f32", "f16": "f32", "i32": "i32", "i64": "i64",
             "bool": "bool"}


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
    k = gd.storage_kind(v.dtype)
    if k in gd.FLOAT_KINDS:
        return f32_bits(float(v))
    if not -2**31 <= int(v) < 2**31:
        raise OverflowError(f"elementwise: the scalar operand {int(v)} does not fit int32; "
                            f"pass it as a tensor")
    return int(v)


_SCALAR_LOAD = {"f32": "scalar_f({j})", "bf16": "scalar_f({j})", "f16": "scalar_f({j})",
                "i32": "scalar_i({j})", "i64": "i64(scalar_i({j}))",
                "bool": "u32(scalar_i({j}))"}
# a load as the symbol type: bools become WGSL bool inside traced expressions
_AS_SYM = {"f32": "{v}", "bf16": "{v}", "f16": "{v}", "i32": "{v}", "i64": "{v}",
           "bool": "({v} != 0u)"}


# -- the one launcher --------------------------------------------------------------------
def run_map(be, out, inputs, expr: str, scalars=(), update: bool = False, lib: str = "",
            typed: bool = False) -> None:
    """Record ``out[...] = expr(inputs)``; ``out`` may be any strided view and every input
    (a GpuArray or a host scalar) is broadcast to ``out.shape``. ``scalars`` fill
    metadata slots 1.. (``scalar_f`` / ``scalar_i`` in ``expr``).

    ``update=True`` reads ``out`` itself as ``x0`` (``inputs`` are then x1, x2, ...): an
    in-place op in one dispatch. A buffer may not be bound for reading and writing in one
    dispatch, so inputs must not share out's storage (16-bit outputs, two per word, are
    then read and written through atomics). ``typed=True`` makes bool operands WGSL ``bool`` inside
    ``expr`` (traced kernels); otherwise each is its compute type (u32 0/1 for bool).
    ``lib`` holds WGSL helper functions the expression calls."""
    if out.size == 0:
        return
    buffers = [out.buffer]
    words = list(scalars)  # the metadata that changes from call to call: slots 1..
    signature = []  # per input: its layout, or a host scalar's dtype
    for x in inputs:
        if is_scalar(x):
            x = as_scalar(x)
            words.append(_scalar_word(x))
            signature.append(x.dtype)
        else:
            buffers.append(x.buffer)
            signature.append((x.shape, x.strides, x.offset, x.dtype))
    # the rest follows from the layouts: planned once per signature
    key = (out.shape, out.strides, out.offset, out.dtype, *signature, len(scalars), expr,
           update, lib, typed)
    plan = _MAP_PLANS.get(key)
    if plan is None:
        if len(_MAP_PLANS) >= PLANS_KEPT:
            _MAP_PLANS.clear()
        plan = _MAP_PLANS[key] = _map_plan(out, signature, len(scalars), expr, update,
                                           lib, typed)
    spec, meta, launch = plan
    if words:
        meta = meta.copy()
        meta[1:1 + len(words)] = words
    be.dispatcher.dispatch(spec, buffers, meta, launch)


#: run_map's (spec, metadata with zeros for the scalars, grid) by signature
_MAP_PLANS: dict = {}
PLANS_KEPT = 4096


def _map_plan(out, signature, n_scalars, expr, update, lib, typed) -> tuple:
    n, shape = out.size, out.shape
    ops = [(out.strides, out.offset)]
    words = [n] + [0] * n_scalars
    sources = []  # per input: (metadata slot of a scalar or None, operand or None, kind)
    for x in signature:
        if not isinstance(x, tuple):  # a host scalar's dtype
            sources.append((len(words), None, gd.storage_kind(x)))
            words.append(0)
            continue
        x_shape, x_strides, x_offset, x_dtype = x
        ops.append((broadcast_strides_of(x_shape, x_strides, shape), x_offset))
        sources.append((None, len(ops) - 1, gd.storage_kind(x_dtype)))
    meta = meta_block(words, shape, ops, what="elementwise")
    if pairs.eligible(out, meta):  # 16-bit output: a word per invocation
        mode, per = "map_pairs", 512
        read = ([0] if update else []) + [k for _, k, _ in sources if k is not None]
        layout = tuple(pairs.stride_class(meta, k) for k in read)
    elif pairs.eligible_nd(out, meta):  # the same over several dims (a strided copy)
        mode, per, layout = "map_pairs_nd", 512, ()
    else:  # one merged dim: the kernel without coordinates (offset + i * stride)
        mode, per, layout = ("map_flat" if meta[N_SCALARS] <= 1 else "map"), 256, ()
    # (storage kinds: a traced kernel has asked kind() already, which refuses a widened
    # dtype; copies and casts of one load and store its i32 words)
    key = (mode, gd.storage_kind(out.dtype), update, tuple(sources), layout, expr, lib, typed)
    spec = _SPECS.get(key)
    if spec is None:
        if len(_SPECS) > 4096:  # (user kernels could grow it without end)
            _SPECS.clear()
        spec = _SPECS[key] = _map_spec(*key)
    return spec, np.array(meta, np.int32), grid(-(-n // per))


# (mode, out kind, update, sources, layout, expr, lib, typed) -> KernelSpec: the WGSL of a
# map is text made from these alone, so each is made once, not on every dispatch
_SPECS: dict = {}


def _map_spec(mode, out_kind, update, sources, layout, expr, lib, typed):
    words = mode in ("map_pairs", "map_pairs_nd")  # each word of out is one invocation's
    access = ("rw_words" if words else "rw") if update else \
        ("write_words" if words else "write")
    bindings = [("out", out_kind, access)]
    loads = [("out", 0, out_kind)] if update else []  # per x0, x1, ...
    for k, (slot, op, kind) in enumerate(sources, start=int(update)):
        if op is None:
            loads.append((_SCALAR_LOAD[kind].format(j=slot), None, kind))
        else:
            bindings.append((f"x{k}", kind, "read"))
            loads.append((f"x{k}", op, kind))
    as_sym = _AS_SYM if typed else None
    if mode == "map_pairs":
        text = pairs.inputs_text(loads, layout, expr, as_sym)
        return kernel("elementwise.wgsl", mode, bindings, LIB=lib, INPUTS=text)
    if mode == "map_pairs_nd":
        text = pairs.inputs_text_nd(loads, expr, as_sym)
        return kernel("elementwise.wgsl", mode, bindings, LIB=lib, INPUTS=text)
    index = "flat_at({k}, i)" if mode == "map_flat" else "op_offset({k}, c)"
    lets = []
    for j, (src, k, kind) in enumerate(loads):
        value = src if k is None else f"load_{src}({index.format(k=k)})"
        lets.append(f"let x{j} = {_AS_SYM[kind].format(v=value) if typed else value};")
    return kernel("elementwise.wgsl", mode, bindings, INPUTS=" ".join(lets), EXPR=expr,
                  LIB=lib)


# -- traced kernels ----------------------------------------------------------------------
def _expression(kernel, types, out_kind: str) -> tuple:
    """(WGSL of ``kernel`` for inputs of these symbol types, stored as ``out_kind``; the
    helper functions it calls: the kernel's own and the special functions'), cached on
    the kernel: one trace per combination."""
    cache = kernel.compiled.setdefault("wgpu", {})
    key = (types, out_kind)
    found = cache.get(key)
    if found is None:
        try:
            traced = trace(kernel, types, _SYM_TYPE[out_kind])
        except TypeError as e:
            raise TypeError(f"{kernel.name}: not available on the GPU for these operand "
                            f"types ({', '.join(types)}): {e}") from None
        expr = f"select(0u, 1u, {traced})" if out_kind == "bool" else traced
        found = cache[key] = (expr, kernel.wgsl_lib + special.library(expr))
    return found


def _sym_types(arrays) -> tuple:
    return tuple(_SYM_TYPE[gd.kind(x.dtype)] for x in arrays)


def map_kernel(be, kernel, inputs, dtype):
    """A new array of ``dtype``: ``kernel`` over ``inputs`` (GpuArrays or host scalars),
    broadcast together."""
    inputs = [_operand(be, x) for x in inputs]
    dt = gd.storage_dtype(np.dtype(dtype), kernel.name)
    shape = broadcast_shapes(*(x.shape for x in inputs if not is_scalar(x)))
    out = be.empty(shape, dt)
    expr, lib = _expression(kernel, _sym_types(inputs), gd.kind(dt))
    run_map(be, out, inputs, expr, lib=lib, typed=True)
    return out


def _operand(be, x):
    """A host scalar as metadata, except an int64 one on an int64 device: that is
    uploaded as one element (a 32-bit metadata word widened in the kernel divided
    wrongly on lavapipe)."""
    if not is_scalar(x):
        return x
    x = as_scalar(x)
    return be.from_numpy(np.asarray(x)) if gd.kind(x.dtype) == "i64" else x


def map_into(be, kernel, dst, inputs) -> None:
    """``dst = kernel(dst, *inputs)`` in place: one dispatch where it can (no input
    sharing dst's buffer), else a temporary and a copy."""
    inputs = [_operand(be, x) for x in inputs]
    if any(not is_scalar(x) and x.storage is dst.storage for x in inputs):
        copy_into(be, dst, map_kernel(be, kernel, [dst, *inputs], dst.dtype))
        return
    expr, lib = _expression(kernel, _sym_types([dst, *inputs]), gd.kind(dst.dtype))
    run_map(be, dst, inputs, expr, update=True, lib=lib, typed=True)


def cast(be, x, dtype):
    dst = gd.storage_dtype(np.dtype(dtype), "cast")
    out = be.empty(x.shape, dst)
    run_map(be, out, [x], convert_between("x0", x.dtype, dst))
    return out


def copy_into(be, dst, src) -> None:
    """``dst[...] = src`` (broadcast, converted to dst's dtype), dst any strided view;
    ``src`` may be a host scalar (a fill in one dispatch)."""
    if is_scalar(src):
        src = as_scalar(src)
    elif src.storage is dst.storage:
        src = copy(be, src)  # overlapping views: read everything before writing
    run_map(be, dst, [src], convert_between("x0", src.dtype, dst.dtype))


def copy(be, x):
    out = be.empty(x.shape, x.dtype)
    run_map(be, out, [x], "x0")
    return out
