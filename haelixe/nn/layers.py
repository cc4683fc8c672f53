"""Layers: Linear, norms, activations, Embedding, Dropout."""

from __future__ import annotations

import math

from .. import creation
from ..autograd.mode import no_grad
from . import functional as F
from .module import Module, Parameter


def _uniform(shape, bound):
    with no_grad():
        return Parameter(creation.empty(*shape).uniform_(-bound, bound))


class Linear(Module):
    """y = x @ weight.T + bias over any leading dims, one fused op. Initialised as
    PyTorch does (kaiming-uniform with a=sqrt(5): bound 1/sqrt(in_features))."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 activation=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.activation = activation
        bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
        self.weight = _uniform((out_features, in_features), bound)
        self.bias = _uniform((out_features,), bound) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        act = f", activation={self.activation!r}" if self.activation else ""
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}{act}")


class RMSNorm(Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = Parameter(creation.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}"


class LayerNorm(Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = Parameter(creation.ones(dim))
        self.bias = Parameter(creation.zeros(dim))

    def forward(self, x):
        return F.layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}"


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    def forward(self, x):
        return x.silu()


class ReLU(Module):
    def forward(self, x):
        return x.relu()


class Embedding(Module):
    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(creation.randn(num_embeddings, embedding_dim))

    def forward(self, indices):
        return F.embedding(indices, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(Module):
    def __init__(self, p: float = 0.5):
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
