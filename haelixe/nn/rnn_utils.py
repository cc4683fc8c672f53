"""torch.nn.utils.rnn: ``pad_sequence``, which batches sequences of different lengths
into one padded tensor. PyTorch's packed sequences (``pack_padded_sequence``,
``PackedSequence``...) are not here: Haelixe's recurrent layers run over the padded
tensor, every step of every row, so a program masks the padded steps' outputs in its loss
instead; each packed name, called, raises an error saying so."""

from __future__ import annotations

from ..errors import OpError
from ..ops.indexing import stack
from ..tensor import Tensor
from . import functional as F

__all__ = ["pad_sequence"]

_PACKED = ("pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
           "unpack_sequence", "unpad_sequence", "invert_permutation")


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side='right') -> Tensor

    Tensors of shapes (L_i, *) stacked into (max L_i, B, *), or (B, max L_i, *) with
    ``batch_first``, each sequence filled with ``padding_value`` after its end (before
    its start with ``padding_side='left'``). Differentiable: the padding gets no
    gradient."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got "
                         f"{padding_side!r}")
    sequences = list(sequences)
    if not sequences:
        raise OpError("pad_sequence: received an empty list of sequences; pass at least "
                      "one tensor")
    for s in sequences:
        if not isinstance(s, Tensor) or s.ndim == 0:
            shown = s.shape if isinstance(s, Tensor) else type(s).__name__
            raise OpError(f"pad_sequence: each sequence must be a tensor of at least one "
                          f"dim (its length first), got {shown}")
    trailing = sequences[0].shape[1:]
    for s in sequences:
        if s.shape[1:] != trailing:
            raise OpError(f"pad_sequence: sequences of shapes {sequences[0].shape} and "
                          f"{s.shape} differ after their length; every one must be "
                          f"(length, {', '.join(map(str, trailing))})")
    longest = max(s.shape[0] for s in sequences)
    padded = [_pad_to(s, longest, padding_value, padding_side) for s in sequences]
    return stack(padded, 0 if batch_first else 1)


def _pad_to(s, length, value, side):
    short = length - s.shape[0]
    if not short:
        return s
    # F.pad's widths run from the last dim back: the length's pair comes last
    widths = (0, 0) * (s.ndim - 1) + ((0, short) if side == "right" else (short, 0))
    return F.pad(s, widths, value=value)


def _refused(name):
    def packed(*args, **kwargs):
        raise NotImplementedError(
            f"torch.nn.utils.rnn.{name}: packed sequences are not supported; batch the "
            f"sequences with pad_sequence and pass the padded tensor to the RNN, then mask "
            f"the padded steps' outputs in the loss (the RNN runs every step of every row)")

    packed.__name__ = packed.__qualname__ = name
    packed.__doc__ = f"{name}: not supported (packed sequences); see pad_sequence."
    return packed


# (importable, so that a program importing them runs until it packs a batch)
globals().update({name: _refused(name) for name in _PACKED})


class PackedSequence:
    """Not supported (packed sequences): ``isinstance(x, PackedSequence)`` is False for
    every value; making one raises, as the packing functions do."""

    def __new__(cls, *args, **kwargs):
        _refused("PackedSequence")()


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals())
