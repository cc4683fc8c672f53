"""Tiled, batched matmul with an optional fused bias + GELU epilogue (linear layers)."""

from __future__ import annotations

import math

from . import dtypes as gd
from .array import GpuArray
from .expr import trace
from .geometry import broadcast_shapes, broadcast_strides, meta_block
from .shaders import kernel

TILE = 128
# the first column of workgroups writes the row sums of A, one invocation per 8 rows
_ROWSUM_STORE = """if (wid.x == 0u && tx == 0) {
        let M = metadata[0];
        for (var i = 0; i < 4; i++) {
            if (ma + i < M) { store_rowsum(z * M + ma + i, s0[i]); }
            if (mb + i < M) { store_rowsum(z * M + mb + i, s1[i]); }
        }
    }"""


def _batch_view(x: GpuArray) -> GpuArray:
    return x.view(x.shape[:-2], x.strides[:-2], x.offset)


def matmul(be, a, b, bias=None, activation=None, want_pre=False, want_row_sums=False):
    """numpy.matmul of ``a`` and ``b`` (any strides), plus ``bias`` along the last output
    dim and ``activation`` (an Activation: its forward kernel is traced into the
    epilogue) when given. Returns C, or (C, pre) when
    ``want_pre`` (pre = the output before the activation), or (C, sums) when
    ``want_row_sums`` (sums = a summed over its last dim, shape batch + (M,), computed by
    the same dispatch)."""
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
    if a.dtype != b.dtype or gd.kind(a.dtype) not in ("f32", "bf16"):
        raise TypeError(f"matmul: needs float32 or bfloat16 operands of one dtype, got "
                        f"{a.dtype} and {b.dtype}")
    (M, K), (K2, N) = a.shape[-2:], b.shape[-2:]
    if K != K2:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align "
                         f"({K} != {K2})")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    nbatch = math.prod(batch)
    if nbatch > 65535:
        raise ValueError(f"matmul: {nbatch} batch matrices exceed one dispatch (65535)")
    kind = gd.kind(a.dtype)
    out = be.empty(batch + (M, N), a.dtype)
    pre = be.empty(out.shape, a.dtype) if want_pre else None
    sums = be.empty(batch + (M,), a.dtype) if want_row_sums else None
    if sums is not None and out.size == 0 and sums.size:  # N == 0: no tile to do it
        be.copy_into(sums, be.sum(a, (a.ndim - 1,), False))
    if out.size:
        ops = [(broadcast_strides(_batch_view(a), batch), a.offset),
               (broadcast_strides(_batch_view(b), batch), b.offset)]
        bindings = [("c", kind, "write"), ("a", kind, "read"), ("b", kind, "read")]
        buffers = [out.buffer, a.buffer, b.buffer]
        value = "v"
        if bias is not None:
            if bias.shape[-1:] != (N,) or bias.size != N:
                raise ValueError(f"matmul: bias of shape {bias.shape} does not match {N} "
                                 f"outputs")
            ops.append(([0] * len(batch), bias.offset, bias.strides[-1]))
            bindings.append(("bias", gd.kind(bias.dtype), "read"))
            buffers.append(bias.buffer)
            value = ("(v + f32(load_bias(metadata[OPS_BASE + 2 * OP_STRIDE] "
                     "+ n * op_extra(2))))")
        epilogue = f"let p = {value};"
        if pre is not None:
            bindings.append(("pre", kind, "write"))
            buffers.append(pre.buffer)
            epilogue += " store_pre(ci, p);"
        act = "p" if activation is None else _epilogue(activation)
        epilogue += f" store_c(ci, {act});"
        rowsum = {"ROWSUM_ACC": "", "ROWSUM_STORE": ""}
        if sums is not None:
            bindings.append(("rowsum", kind, "write"))
            buffers.append(sums.buffer)
            rowsum = {"ROWSUM_ACC": "s0 += a0; s1 += a1;", "ROWSUM_STORE": _ROWSUM_STORE}
        meta = meta_block([M, N, K, a.strides[-2], a.strides[-1], b.strides[-2],
                           b.strides[-1]], batch, ops, what="matmul")
        spec = kernel("matmul.wgsl", "matmul", bindings, EPILOGUE=epilogue, **rowsum)
        be.dispatcher.dispatch(spec, buffers, meta,
                               (-(-N // TILE), -(-M // TILE), max(nbatch, 1)))
    if squeeze:
        shape = tuple(n for i, n in enumerate(out.shape)
                      if i - out.ndim not in squeeze)
        out = out.view(shape, None, 0)
        if pre is not None:
            pre = pre.view(shape, None, 0)
    if want_row_sums:
        return out, sums
    return (out, pre) if want_pre else out


def _epilogue(activation) -> str:
    """The activation's forward kernel as WGSL over the f32 value ``p``."""
    if activation.forward.wgsl_lib:
        raise ValueError(f"matmul: the activation {activation.name} needs WGSL helpers "
                         f"of its own, which the fused epilogue cannot include")
    return trace(activation.forward, ("f32",), "f32", names=["p"])
