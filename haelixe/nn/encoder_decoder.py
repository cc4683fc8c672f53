"""The encoder-decoder Transformer of "Attention Is All You Need" as torch.nn has it:
Transformer, TransformerEncoder(Layer), TransformerDecoder(Layer), with PyTorch's
signatures, sub-module names (so state dicts load either way) and post-norm or
pre-norm (``norm_first``) blocks. Each class may be subclassed, as PyTorch's are."""

from __future__ import annotations

import copy
import math

from .. import creation
from . import functional as F
from . import init
from .layers import Dropout, LayerNorm, Linear
from .module import Module, ModuleList, Parameter
from .multihead import MultiheadAttention


def _activation(activation):
    if callable(activation):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _clone(module):
    """A deep copy of ``module`` whose parameters and buffers are fresh copies of its
    own (the tensors themselves are copied here, everything else by copy.deepcopy)."""
    memo = {}
    for p in module.parameters():
        q = Parameter(p.detach().clone(), requires_grad=p.requires_grad)
        q.name = p.name
        memo[id(p)] = q
    for b in module.buffers():
        memo[id(b)] = b.clone()
    return copy.deepcopy(module, memo)


def _clones(module, n):
    return ModuleList([_clone(module) for _ in range(n)])


def _attend(attention, dropout, x, memory, attn_mask, key_padding_mask, is_causal):
    """dropout(attention of x over memory): a block's attention branch."""
    out = attention(x, memory, memory, attn_mask=attn_mask,
                    key_padding_mask=key_padding_mask, need_weights=False,
                    is_causal=is_causal)[0]
    return dropout(out)


class _TransformerLayer(Module):
    """What the encoder and decoder layers share: ``_blocks - 1`` attention blocks (self-
    attention, then attention over the memory), the feed-forward block, one LayerNorm and
    one dropout per block, made in PyTorch's order so that state dicts match."""

    _blocks = 0  # the subclass's count

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        kw = {"dropout": dropout, "bias": bias, "batch_first": batch_first,
              "device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, **kw)
        if self._blocks == 3:
            self.multihead_attn = MultiheadAttention(d_model, nhead, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = norm_first
        for i in range(1, self._blocks + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        for i in range(1, self._blocks + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation_relu_or_gelu = 1 if activation in ("relu", F.relu) else \
            2 if activation in ("gelu", F.gelu) else 0
        self.activation = _activation(activation)
        self.batch_first = batch_first
        if device is not None or dtype is not None:
            self.to(device=device, dtype=dtype)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        return _attend(self.self_attn, self.dropout1, x, x, attn_mask, key_padding_mask,
                       is_causal)

    def _ff_block(self, x):
        out = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return getattr(self, f"dropout{self._blocks}")(out)


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention and a feed-forward block, each with dropout, a residual and a
    LayerNorm (after the residual; before the block with ``norm_first``)."""

    _blocks = 2

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention, attention over the encoder's memory and a feed-forward block, each
    with dropout, a residual and a LayerNorm (``norm_first`` as in the encoder layer)."""

    _blocks = 3

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        return _attend(self.multihead_attn, self.dropout2, x, mem, attn_mask,
                       key_padding_mask, is_causal)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None,
                tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                           memory_is_causal))
        return self.norm3(x + self._ff_block(x))


def _causal_hint(mask, is_causal, size):
    """PyTorch's reading of is_causal=None: True when ``mask`` is the causal mask."""
    if is_causal is not None:
        return bool(is_causal)
    if mask is None or mask.shape != (size, size):
        return False
    causal = Transformer.generate_square_subsequent_mask(size, device=mask.device,
                                                         dtype=mask.dtype)
    if mask.dtype.name == "bool":
        return bool((mask == (causal != 0)).all())
    return bool((mask == causal).all())


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` and an optional final ``norm``."""

    def __init__(self, encoder_layer, num_layers: int, norm=None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        seq = src.shape[1 if getattr(self.layers[0], "batch_first", False) and src.ndim == 3
                        else 0]
        is_causal = _causal_hint(mask, is_causal, seq)
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, is_causal=is_causal,
                        src_key_padding_mask=src_key_padding_mask)
        return out if self.norm is None else self.norm(out)


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` and an optional final ``norm``."""

    def __init__(self, decoder_layer, num_layers: int, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None,
                tgt_is_causal=None, memory_is_causal=False):
        seq = tgt.shape[1 if getattr(self.layers[0], "batch_first", False) and tgt.ndim == 3
                        else 0]
        tgt_is_causal = _causal_hint(tgt_mask, tgt_is_causal, seq)
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return out if self.norm is None else self.norm(out)


class Transformer(Module):
    """Encoder and decoder stacks with final LayerNorms, every weight matrix
    Xavier-uniform, as torch.nn.Transformer: ``forward(src, tgt, ...)`` -> output."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        kw = {"dim_feedforward": dim_feedforward, "dropout": dropout,
              "activation": activation, "layer_norm_eps": layer_norm_eps,
              "batch_first": batch_first, "norm_first": norm_first, "bias": bias,
              "device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(d_model, nhead, **kw), num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(d_model, nhead, **kw), num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batch_dim = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError(f"Transformer: the batch number of src and tgt must be "
                               f"equal (src {src.shape}, tgt {tgt.shape})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"Transformer: the feature number of src and tgt must be "
                               f"equal to d_model={self.d_model} (src {src.shape}, "
                               f"tgt {tgt.shape})")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
        """(sz, sz) float mask: -inf above the diagonal (later positions), 0 elsewhere."""
        keep = creation.ones(sz, sz, dtype="bool", device=device).tril()
        return creation.zeros(sz, sz, dtype=dtype, device=device).masked_fill(
            ~keep, -math.inf)


__all__ = ["Transformer", "TransformerEncoder", "TransformerDecoder",
           "TransformerEncoderLayer", "TransformerDecoderLayer"]
