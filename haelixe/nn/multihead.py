"""nn.MultiheadAttention with PyTorch's signature, parameter names, initialisation and
mask conventions (a bool ``attn_mask`` or ``key_padding_mask`` is True where attention
is NOT allowed; a float one is added to the scores)."""

from __future__ import annotations

import math

from .. import creation
from ..tensor import Tensor
from . import functional as F
from . import init
from .layers import Linear
from .module import Module, Parameter


def _as_additive(mask, dtype, what: str):
    """A bool mask (True: masked out) as 0 / -inf, a float one as it is, in ``dtype``."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise TypeError(f"MultiheadAttention: {what} must be a tensor, got "
                        f"{type(mask).__name__}")
    if mask.dtype.name == "bool":
        return creation.zeros(*mask.shape, dtype=dtype, device=mask.device) \
            .masked_fill(mask, -math.inf)
    if not mask.dtype.is_floating_point:
        raise TypeError(f"MultiheadAttention: only bool and floating types of {what} are "
                        f"supported, got {mask.dtype.name}")
    return mask if mask.dtype is dtype else mask.to(dtype)


class MultiheadAttention(Module):
    """Attention of ``num_heads`` heads over ``embed_dim`` features, as
    torch.nn.MultiheadAttention: ``forward(query, key, value, key_padding_mask=None,
    need_weights=True, attn_mask=None, average_attn_weights=True, is_causal=False)`` ->
    (output, weights or None). Inputs are (seq, batch, embed) (``batch_first``: (batch,
    seq, embed)) or unbatched (seq, embed). Without ``need_weights`` the fused attention
    kernel runs; with it the weights are formed (and returned, averaged over heads
    unless ``average_attn_weights=False``)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0,
                 bias: bool = True, add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater "
                             f"than 0, got embed_dim={embed_dim} and num_heads={num_heads}")
        if embed_dim % num_heads:
            raise AssertionError(f"MultiheadAttention: embed_dim must be divisible by "
                                 f"num_heads (embed_dim={embed_dim}, num_heads={num_heads})")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn "
                                      "are not supported; append the extra key/value row "
                                      "to key and value yourself")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, float(dropout)
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        self.add_zero_attn = False
        self.bias_k = self.bias_v = None

        def weight(*shape):
            return Parameter(creation.empty(*shape, dtype=dtype, device=device))

        if self._qkv_same_embed_dim:
            self.in_proj_weight = weight(3 * embed_dim, embed_dim)
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.q_proj_weight = weight(embed_dim, embed_dim)
            self.k_proj_weight = weight(embed_dim, self.kdim)
            self.v_proj_weight = weight(embed_dim, self.vdim)
            self.in_proj_weight = None
        self.in_proj_bias = weight(3 * embed_dim) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if device is not None or dtype is not None:
            self.out_proj.to(device=device, dtype=dtype)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """Xavier-uniform projections, zero biases (PyTorch's initialisation)."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def _project(self, query, key, value):
        e, b = self.embed_dim, self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if query is key and key is value:  # self-attention: one product
                q, k, v = F.linear(query, w, b).chunk(3, -1)
                return q, k, v
            return (F.linear(query, w[:e], bq), F.linear(key, w[e:2 * e], bk),
                    F.linear(value, w[2 * e:], bv))
        return (F.linear(query, self.q_proj_weight, bq),
                F.linear(key, self.k_proj_weight, bk),
                F.linear(value, self.v_proj_weight, bv))

    def _check(self, query, key, value):
        if not all(isinstance(t, Tensor) for t in (query, key, value)):
            raise TypeError("MultiheadAttention: query, key and value must be tensors")
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(f"MultiheadAttention: query, key and value must all be 3-D "
                             f"(batched) or 2-D (unbatched), got {query.shape}, "
                             f"{key.shape} and {value.shape}")
        for t, size, what in ((query, self.embed_dim, "query"), (key, self.kdim, "key"),
                              (value, self.vdim, "value")):
            if t.shape[-1] != size:
                raise AssertionError(f"MultiheadAttention: was expecting {what} of "
                                     f"{size} features, got shape {t.shape}")
        if key.shape[:-1] != value.shape[:-1]:
            raise AssertionError(f"MultiheadAttention: key shape {key.shape} does not "
                                 f"match value shape {value.shape}")

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        self._check(query, key, value)
        if is_causal and attn_mask is None:
            raise RuntimeError("MultiheadAttention: Need attn_mask if specifying the "
                               "is_causal hint; pass "
                               "nn.Transformer.generate_square_subsequent_mask(L)")
        batched = query.ndim == 3
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (query.transpose(0, 1), key.transpose(0, 1),
                                 value.transpose(0, 1))
        tgt, n, _ = query.shape
        src = key.shape[0]
        h, d = self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value)

        def heads(t, length):  # (seq, batch, embed) -> (batch, heads, seq, head_dim)
            return t.reshape(length, n, h, d).permute(1, 2, 0, 3)

        q, k, v = heads(q, tgt), heads(k, src), heads(v, src)
        mask = self._mask(attn_mask, key_padding_mask, q.dtype, n, tgt, src)
        p = self.dropout if self.training else 0.0
        if need_weights:
            scores = (q @ k.mT) * (1.0 / math.sqrt(d))
            if mask is not None:
                scores = scores + mask
            weights = F.dropout(scores.softmax(-1), p, True) if p else scores.softmax(-1)
            out = weights @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
            weights = None
        out = self.out_proj(out.permute(2, 0, 1, 3).reshape(tgt, n, self.embed_dim))
        if weights is not None and average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            out = out.squeeze(1)
            weights = None if weights is None else weights.squeeze(0)
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _mask(self, attn_mask, key_padding_mask, dtype, n, tgt, src):
        """attn_mask and key_padding_mask as one additive mask broadcast to (batch,
        heads, tgt, src), or None."""
        mask = _as_additive(attn_mask, dtype, "attn_mask")
        if mask is not None:
            if mask.ndim == 2:
                if mask.shape != (tgt, src):
                    raise RuntimeError(f"MultiheadAttention: The shape of the 2D attn_mask "
                                       f"is {mask.shape}, but should be {(tgt, src)}.")
                mask = mask.reshape(1, 1, tgt, src)
            elif mask.ndim == 3:
                if mask.shape != (n * self.num_heads, tgt, src):
                    raise RuntimeError(f"MultiheadAttention: The shape of the 3D attn_mask "
                                       f"is {mask.shape}, but should be "
                                       f"{(n * self.num_heads, tgt, src)}.")
                mask = mask.reshape(n, self.num_heads, tgt, src)
            else:
                raise RuntimeError(f"MultiheadAttention: attn_mask's dimension "
                                   f"{mask.ndim} is not supported (2-D or 3-D)")
        pad = _as_additive(key_padding_mask, dtype, "key_padding_mask")
        if pad is not None:
            if pad.shape != (n, src):
                raise AssertionError(f"MultiheadAttention: expecting key_padding_mask "
                                     f"shape of {(n, src)}, but got {pad.shape}")
            pad = pad.reshape(n, 1, 1, src)
            mask = pad if mask is None else mask + pad
        return mask

    def extra_repr(self) -> str:
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"dropout={self.dropout}, batch_first={self.batch_first}")


__all__ = ["MultiheadAttention"]
