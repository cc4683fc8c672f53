"""Flash attention on the GPU: forward (out, lse) and backward (dq, dk, dv).

q, k, v are (..., seq, head_dim) with any batch and sequence strides; a head dim that is
not contiguous is copied first (the kernels read rows as contiguous runs). Leading dims
broadcast between q, k and v. ``lse`` is float32 whatever the input dtype: backward
recomputes probabilities as exp(s - lse), where a rounded lse would show.

The output of (..., heads, seq, head_dim) inputs is stored sequence-major, as
(..., seq, heads, head_dim) viewed back (PyTorch's flash attention does the same): the
``o.transpose(-3, -2).reshape(..., seq, heads * head_dim)`` that follows in multi-head
attention is then a view, not a copy.
"""

from __future__ import annotations

import math

from . import dtypes as gd
from .geometry import broadcast_shapes, broadcast_strides, f32_bits, meta_block, permute
from .shaders import kernel

MAX_HEAD_DIM = 128
BLOCK_KEYS = 16


def _rows_contiguous(be, x):
    return x if x.shape[-1] == 1 or x.strides[-1] == 1 else be.copy(x)


def _check(q, k, v):
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim < 2:
            raise ValueError(f"attention: {name} must be (..., seq, head_dim), got {t.shape}")
        if gd.kind(t.dtype) not in ("f32", "bf16"):
            raise TypeError(f"attention: {name} must be float32 or bfloat16, got {t.dtype}")
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


def _rows_per_group(n: int) -> int:
    """Rows (invocations) per workgroup: 128 amortises each K/V block best on long
    sequences (about 15 TFLOP/s forward against 12 with 64 on an H200); short ones waste
    fewer idle invocations with 64 (and compile one variant fewer)."""
    return 64 if n <= 256 else 128


def _dispatch(be, entry, lead, ops, arrays, bindings, scalars, n_rows, dqk, dv, bq):
    nbatch = math.prod(lead)
    if nbatch > 65535:
        raise ValueError(f"attention: {nbatch} batch-heads exceed one dispatch (65535)")
    meta = meta_block(scalars, lead, ops, what="attention")
    spec = kernel("attention.wgsl", entry, bindings, DQK=dqk, DV=dv, D4=-(-dqk // 4),
                  V4=-(-dv // 4), BQ=bq, BK=BLOCK_KEYS)
    be.dispatcher.dispatch(spec, [a.buffer for a in arrays], meta,
                           (-(-n_rows // bq), nbatch, 1))


def _sequence_major(be, lead, seq, d, dtype):
    """An array of shape lead + (seq, d) stored as lead[:-1] + (seq, lead[-1], d)."""
    if not lead:
        return be.empty((seq, d), dtype)
    n = len(lead)
    base = be.empty(lead[:-1] + (seq, lead[-1], d), dtype)
    return permute(base, list(range(n - 1)) + [n, n - 1, n + 1])


def attention(be, q, k, v, causal, scale):
    """(out, lse) of softmax(q k^T * scale [causal]) v."""
    lead = _check(q, k, v)
    q, k, v = (_rows_contiguous(be, t) for t in (q, k, v))
    sq, sk, dqk, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    out = _sequence_major(be, lead, sq, dv, q.dtype)
    lse = be.empty(lead + (sq,), gd.F32)
    if out.size == 0:
        return out, lse
    kind = gd.kind(q.dtype)
    bindings = [("q", kind, "read"), ("k", gd.kind(k.dtype), "read"),
                ("v", gd.kind(v.dtype), "read"), ("out", kind, "write"), ("lse", "f32", "write")]
    ops = [_operand(q, lead), _operand(k, lead), _operand(v, lead), _operand(out, lead),
           _stat_operand(lse, lead)]
    bq = _rows_per_group(sq)
    _dispatch(be, "attention_forward", lead, ops, [q, k, v, out, lse], bindings,
              [sq, sk, int(bool(causal)), f32_bits(scale)], sq, dqk, dv, bq)
    return out, lse


def attention_backward(be, q, k, v, out, lse, gout, causal, scale):
    """(dq, dk, dv), recomputing probabilities from ``lse``: one kernel per query row
    (dq, and delta = rowsum(dO * O)), one per key row (dk, dv)."""
    lead = _check(q, k, v)
    q, k, v, out, gout = (_rows_contiguous(be, t) for t in (q, k, v, out, gout))
    if lse.dtype != gd.F32:
        lse = be.cast(lse, gd.F32)
    sq, sk, dqk, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    dq = be.empty(lead + (sq, dqk), q.dtype)
    dk = be.empty(lead + (sk, dqk), k.dtype)
    dvv = be.empty(lead + (sk, dv), v.dtype)
    delta = be.empty(lead + (sq,), gd.F32)
    if dq.size == 0 and dk.size == 0:
        return dq, dk, dvv
    scalars = [sq, sk, int(bool(causal)), f32_bits(scale)]
    base = [("q", gd.kind(q.dtype), "read"), ("k", gd.kind(k.dtype), "read"),
            ("v", gd.kind(v.dtype), "read")]
    qkv_ops = [_operand(q, lead), _operand(k, lead), _operand(v, lead)]
    if sq:
        bq = _rows_per_group(sq)
        _dispatch(be, "attention_dq", lead,
                  qkv_ops + [_operand(out, lead), _stat_operand(lse, lead),
                             _operand(gout, lead), _operand(dq, lead),
                             _stat_operand(delta, lead)],
                  [q, k, v, out, lse, gout, dq, delta],
                  base + [("out", gd.kind(out.dtype), "read"), ("lse", "f32", "read"),
                          ("gout", gd.kind(gout.dtype), "read"),
                          ("dq", gd.kind(dq.dtype), "write"), ("delta", "f32", "write")],
                  scalars, sq, dqk, dv, bq)
    if sk:
        bk = _rows_per_group(sk)
        _dispatch(be, "attention_dkdv", lead,
                  qkv_ops + [([0] * len(lead), 0, 0), _stat_operand(lse, lead),
                             _operand(gout, lead), _operand(dk, lead),
                             _stat_operand(delta, lead), _operand(dvv, lead)],
                  [q, k, v, lse, gout, dk, delta, dvv],
                  base + [("lse", "f32", "read"), ("gout", gd.kind(gout.dtype), "read"),
                          ("dk", gd.kind(dk.dtype), "write"), ("delta", "f32", "read"),
                          ("dv", gd.kind(dvv.dtype), "write")],
                  scalars, sk, dqk, dv, bk)
    return dq, dk, dvv
