"""LLaMA-style blocks: RoPE, multi-head attention, the GELU MLP, the pre-norm block."""

from __future__ import annotations

from . import functional as F
from .layers import Linear, RMSNorm
from .module import Module


class RoPE(Module):
    """Rotary position embedding, rotate-half convention, base 10000.

    The cos/sin tables are built once per (device, dtype) for positions 0..n-1 and each
    call takes views of the rows it needs; a position past n rebuilds them at least
    twice as long. Memory is bounded by twice the longest position seen, however many
    calls (a decode loop asks for one new offset per token)."""

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RoPE: head_dim must be even, got {head_dim}")
        self.head_dim, self.base = head_dim, base
        self._tables = {}  # (device type, dtype name) -> (cos, sin) for positions [0, n)

    def tables(self, seq_len, offset, device, dtype):
        if offset < 0:
            raise ValueError(f"RoPE: offset must be >= 0, got {offset}")
        need = offset + seq_len
        key = (device.type, dtype.name)
        cached = self._tables.get(key)
        if cached is None or cached[0].shape[0] < need:
            n = max(need, 2 * cached[0].shape[0]) if cached is not None else need
            cached = self._tables[key] = F.rope_tables(n, self.head_dim, self.base, 0,
                                                       device, dtype)
        cos, sin = cached
        return cos[offset:need], sin[offset:need]

    def forward(self, x, offset: int = 0):
        cos, sin = self.tables(x.shape[-2], offset, x.device, x.dtype)
        return F.apply_rope(x, cos, sin)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base:g}"


class MultiHeadAttention(Module):
    def __init__(self, dim: int, num_heads: int, causal: bool = False, rope: bool = True):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"MultiHeadAttention: dim {dim} is not divisible by num_heads "
                             f"{num_heads}")
        self.dim, self.num_heads, self.causal = dim, num_heads, causal
        self.head_dim = dim // num_heads
        self.qkv = Linear(dim, 3 * dim)
        self.proj = Linear(dim, dim)
        self.rope = RoPE(self.head_dim) if rope else None

    def forward(self, x, offset: int = 0):
        *lead, t, c = x.shape
        qkv = self.qkv(x).reshape(*lead, t, 3, self.num_heads, self.head_dim)
        # (3, ..., heads, t, head_dim) as strided views: no copies before the kernel
        nl = len(lead)
        qkv = qkv.permute(nl + 1, *range(nl), nl + 2, nl, nl + 3)
        if self.rope is not None:
            # queries and keys rotate by the same tables: one kernel call for both
            qk = self.rope(qkv[:2], offset)
            q, k, v = qk[0], qk[1], qkv[2]
        else:
            q, k, v = qkv[0], qkv[1], qkv[2]
        o = F.scaled_dot_product_attention(q, k, v, causal=self.causal)
        o = o.transpose(-3, -2).reshape(*lead, t, c)
        return self.proj(o)

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, num_heads={self.num_heads}, causal={self.causal}, "
                f"rope={self.rope is not None}")


class MLP(Module):
    """Linear -> GELU -> Linear; the first Linear and the GELU are one fused kernel."""

    def __init__(self, dim: int, hidden: int | None = None, approximate: str = "none"):
        super().__init__()
        hidden = 4 * dim if hidden is None else hidden
        act = "gelu" if approximate == "none" else "gelu_tanh"
        self.fc1 = Linear(dim, hidden, activation=act)
        self.fc2 = Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.fc1(x))


class TransformerBlock(Module):
    """Pre-norm: x + attn(norm1(x)), then x + mlp(norm2(x)); one norm per branch."""

    def __init__(self, dim: int, num_heads: int, causal: bool = False, mlp_hidden=None,
                 eps: float = 1e-6):
        super().__init__()
        self.norm1 = RMSNorm(dim, eps)
        self.attn = MultiHeadAttention(dim, num_heads, causal=causal)
        self.norm2 = RMSNorm(dim, eps)
        self.mlp = MLP(dim, mlp_hidden)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))
