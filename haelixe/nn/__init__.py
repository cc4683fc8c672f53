"""Neural-network building blocks on Haelixe tensors."""

from . import functional
from .layers import GELU, Dropout, Embedding, LayerNorm, Linear, ReLU, RMSNorm, SiLU
from .module import Module, ModuleList, Parameter, Sequential
from .transformer import MLP, MultiHeadAttention, RoPE, TransformerBlock
