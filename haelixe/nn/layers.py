"""Layers: Embedding, shape helpers (Linear, the norms, GELU, ReLU6, the softmaxes and
Dropout are made from their ops' declarations: fused_layers)."""

from __future__ import annotations

from .. import creation
from ..autograd.mode import no_grad
from . import functional as F

# (made from their ops' declarations; named here too, so that a model pickled when they
# lived here loads)
from .fused_layers import (
    GELU,
    Dropout,
    LayerNorm,
    Linear,
    LogSoftmax,
    ReLU6,
    RMSNorm,
    Softmax,
    Softmin,
)
from .module import Module, Parameter


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name for a Linear it keeps out of dynamic quantization (the output
    projection of MultiheadAttention); here a Linear, so programs naming it run."""


class Identity(Module):
    """Returns its input (any constructor arguments are ignored, as in PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Flatten(Module):
    """Flatten dims start_dim..end_dim into one (by default all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Embedding(Module):
    """A (num_embeddings, embedding_dim) table, initialised N(0, 1) as in PyTorch; the
    row ``padding_idx`` starts at zero and receives no gradient."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None):
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} is outside the "
                                 f"{num_embeddings} embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self.weight = Parameter(creation.randn(num_embeddings, embedding_dim))
        if padding_idx is not None:
            with no_grad():
                self.weight[padding_idx].fill_(0.0)

    def forward(self, indices):
        return F.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


__all__ = ["Linear", "RMSNorm", "LayerNorm", "NonDynamicallyQuantizableLinear", "GELU",
           "ReLU6", "Softmax", "Softmin", "LogSoftmax", "Identity", "Flatten", "Embedding",
           "Dropout"]
