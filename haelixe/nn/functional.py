"""Functional forms of the layers, and the losses."""

from __future__ import annotations

import math

from ..amp import cast_inputs
from ..ops import fused
from ..ops.elementwise import gelu as _gelu
from ..tensor import Tensor


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None, activation=None) -> Tensor:
    """x @ weight.T + bias (weight is (out, in)), optionally followed by GELU, in one
    fused kernel forward and backward."""
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input of shape {x.shape} has {x.shape[-1]} features but "
                         f"the weight {weight.shape} expects {weight.shape[1]}")
    if activation not in (None, "gelu", "gelu_tanh"):
        raise ValueError(f"linear: activation must be None, 'gelu' or 'gelu_tanh', got "
                         f"{activation!r}")
    x, weight, bias = cast_inputs("linear", x, weight, bias)
    _same("linear", x, weight, bias)
    return fused.LinearFn.apply(x, weight, bias, activation)


def _same(op, *ts):
    ts = [t for t in ts if t is not None]
    ref = ts[0]
    for t in ts[1:]:
        if t.device is not ref.device:
            raise RuntimeError(f"{op}: tensors on {ref.device.type} and {t.device.type}; "
                               f"move the module or the input with .to(...)")
        if t.dtype is not ref.dtype:
            raise TypeError(f"{op}: dtypes {ref.dtype.name} and {t.dtype.name} differ; use "
                            f"hx.autocast or cast the input with .to(dtype)")


def rms_norm(x, weight=None, eps=1e-6):
    x, weight = cast_inputs("norm", x, weight)
    _same("rms_norm", x, weight)
    return fused.RMSNormFn.apply(x, weight, eps)


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    x, weight, bias = cast_inputs("norm", x, weight, bias)
    _same("layer_norm", x, weight, bias)
    return fused.LayerNormFn.apply(x, weight, bias, eps)


def gelu(x, approximate="none"):
    return _gelu(x, approximate)


def silu(x):
    return x.silu()


def relu(x):
    return x.relu()


def softmax(x, dim=-1):
    return x.softmax(dim)


def log_softmax(x, dim=-1):
    return x.log_softmax(dim)


def dropout(x, p=0.5, training=True):
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0.0:
        return x
    from ..creation import rand

    keep = (rand(*x.shape, device=x.device) >= p).to(x.dtype)
    return x * keep * (1.0 / (1.0 - p))


def embedding(indices, weight):
    return weight[indices]


def rope_tables(seq_len, head_dim, base=10000.0, offset=0, device=None, dtype=None):
    """cos/sin tables (seq_len, head_dim // 2) for positions offset..offset+seq_len-1."""
    import numpy as np

    from ..creation import tensor

    if head_dim % 2:
        raise ValueError(f"rope: head_dim must be even, got {head_dim}")
    inv = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    ang = np.arange(offset, offset + seq_len, dtype=np.float64)[:, None] * inv[None, :]
    dt = dtype or "float32"
    return tensor(np.cos(ang), dtype=dt, device=device), tensor(np.sin(ang), dtype=dt,
                                                                  device=device)


def apply_rope(x, cos, sin):
    """Rotate-half RoPE on the last dim of x (..., seq, head_dim)."""
    if cos.shape != (x.shape[-2], x.shape[-1] // 2):
        raise ValueError(f"rope: tables of shape {cos.shape} do not fit input {x.shape}; "
                         f"expected ({x.shape[-2]}, {x.shape[-1] // 2})")
    return fused.RoPEFn.apply(x, cos, sin, False)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, *, causal=None):
    """softmax(q @ k^T * scale + mask) @ v over (..., seq, head_dim), PyTorch's signature:
    ``attn_mask`` is a bool tensor (True attends) or an additive float tensor broadcast to
    (..., seq_q, seq_k); ``is_causal`` masks later keys (top-left aligned). Fused forward
    and backward on both backends; long sequences take a memory-blocked online-softmax
    (flash) path. ``causal=`` is the older name of ``is_causal``."""
    q, k, v = query, key, value
    if causal is not None:
        is_causal = causal
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: q {q.shape}, k {k.shape} and "
                         f"v {v.shape} do not fit: q and k need one head_dim, k and v one "
                         f"sequence length")
    if attn_mask is not None and is_causal:
        raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal=True, "
                         "not both (fold the causal mask into attn_mask)")
    q, k, v = cast_inputs("attention", q, k, v)
    _same("scaled_dot_product_attention", q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if attn_mask is not None:
        attn_mask = _attention_mask(attn_mask, q, k)
    if dropout_p > 0.0:
        # dropout on the probabilities needs them whole: the composed form
        s = (q @ k.mT) * scale
        if attn_mask is not None:
            s = s.masked_fill(~attn_mask, -math.inf) if attn_mask.dtype.name == "bool" \
                else s + attn_mask
        if is_causal:
            from ..creation import ones

            keep = ones(s.shape[-2], s.shape[-1], dtype="bool", device=s.device).tril()
            s = s.masked_fill(~keep, -math.inf)
        return dropout(s.softmax(-1), dropout_p, True) @ v
    return fused.AttentionFn.apply(q, k, v, bool(is_causal), scale, attn_mask)


def _attention_mask(mask, q, k):
    if not isinstance(mask, Tensor):
        raise TypeError(f"scaled_dot_product_attention: attn_mask must be a tensor, got "
                        f"{type(mask).__name__}")
    if mask.device is not q.device:
        raise RuntimeError(f"scaled_dot_product_attention: attn_mask on {mask.device.type}, "
                           f"q on {q.device.type}; move it with .to(...)")
    scores = q.shape[:-1] + (k.shape[-2],)
    from ..layout import broadcast_shapes

    if broadcast_shapes(mask.shape, scores, op="scaled_dot_product_attention mask") \
            != scores:
        raise ValueError(f"scaled_dot_product_attention: attn_mask of shape {mask.shape} "
                         f"does not broadcast to the scores' shape {scores}")
    if mask.dtype.name != "bool" and mask.dtype is not q.dtype:
        mask = mask.to(q.dtype)
    return mask


def mse_loss(x, target, reduction="mean"):
    if x.shape != target.shape:
        raise ValueError(f"mse_loss: input {x.shape} and target {target.shape} differ in "
                         f"shape; reshape one so they match")
    x, target = cast_inputs("loss", x, target)
    if reduction == "mean":
        return fused.MSELossFn.apply(x, target)
    d = x - target
    return _reduce(d * d, reduction, "mse_loss")


def l1_loss(x, target, reduction="mean"):
    if x.shape != target.shape:
        raise ValueError(f"l1_loss: input {x.shape} and target {target.shape} differ in "
                         f"shape")
    x, target = cast_inputs("loss", x, target)
    return _reduce((x - target).abs(), reduction, "l1_loss")


def cross_entropy(logits, target, reduction="mean"):
    """logits (N, C) and integer class targets (N,)."""
    if logits.ndim != 2 or target.ndim != 1 or target.shape[0] != logits.shape[0]:
        raise ValueError(f"cross_entropy: expected logits (N, C) and targets (N,), got "
                         f"{logits.shape} and {target.shape}")
    (logits,) = cast_inputs("loss", logits)
    logp = logits.log_softmax(-1)
    picked = logp.gather(1, target.reshape(-1, 1)).reshape(-1)
    return _reduce(-picked, reduction, "cross_entropy")


def _reduce(x, reduction, op):
    if reduction == "mean":
        return x.mean()
    if reduction == "sum":
        return x.sum()
    if reduction == "none":
        return x
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
