"""PyTorch twins of haelixe.nn's layers, for the benchmarks that run one model in both:
the rotate-half RoPE and the pre-norm TransformerBlock (parameter names as haelixe's,
less the "attn." / "mlp." prefixes)."""

from __future__ import annotations


def rope_and_block():
    """(RoPE, Block) as torch.nn.Module classes (torch is imported here, on demand)."""
    import torch
    from torch import nn

    class RoPE(nn.Module):
        def __init__(self, head_dim, seq):
            super().__init__()
            inv = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
            ang = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None, :]
            self.register_buffer("cos", ang.cos().float())
            self.register_buffer("sin", ang.sin().float())

        def forward(self, x):
            h = x.shape[-1] // 2
            x1, x2 = x[..., :h], x[..., h:]
            cos, sin = self.cos.to(x.dtype), self.sin.to(x.dtype)  # (autocast's dtype)
            return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    class Block(nn.Module):
        """haelixe.nn.TransformerBlock, layer for layer."""

        def __init__(self, dim, heads, seq):
            super().__init__()
            self.heads, self.hd = heads, dim // heads
            self.norm1, self.norm2 = nn.RMSNorm(dim, eps=1e-6), nn.RMSNorm(dim, eps=1e-6)
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
            self.rope = RoPE(self.hd, seq)

        def forward(self, x):
            b, t, c = x.shape
            qkv = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, self.hd)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            q, k = self.rope(q), self.rope(k)
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
            x = x + self.proj(o.transpose(1, 2).reshape(b, t, c))
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm2(x))))

    return RoPE, Block
