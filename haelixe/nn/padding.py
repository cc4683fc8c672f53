"""F.pad and its fifteen layers (nn.ZeroPad1d/2d/3d, ConstantPad, ReflectionPad,
ReplicationPad and CircularPad), declared together: each layer is one Layer of F.pad's
declaration, which nn/fused_layers makes. Padding is composed of narrow, flip, expand and
cat, so its gradient, and every device, come with those ops."""

from __future__ import annotations

import collections.abc
import operator

from .. import creation
from ..errors import OpError, OpNotImplementedError
from ..ops.indexing import cat
from ..ops.registry import Layer, fused
from ..tensor import Tensor

MODES = ("constant", "reflect", "replicate", "circular")
#: the input ranks PyTorch pads in a mode other than 'constant', by the number of dims
#: padded: the last of a 2-D or 3-D input, the last two of a 3-D or 4-D, three of a 4-D
#: or 5-D (the dims before them a channel dim, and a batch dim where there is one more)
RANKS = {1: (2, 3), 2: (3, 4), 3: (4, 5)}


def _widths(pad) -> tuple:
    if isinstance(pad, Tensor) or not isinstance(pad, collections.abc.Sequence):
        raise TypeError(f"pad: pad must be a tuple of ints (left, right of the last dim, "
                        f"then of the one before...), got {type(pad).__name__}")
    widths = []
    for n in pad:
        try:  # (ints, numpy's, 0-d integer tensors: what converts exactly)
            if isinstance(n, bool):
                raise TypeError
            widths.append(operator.index(n))
        except TypeError:
            raise TypeError(f"pad: pad must be a tuple of ints, got {tuple(pad)!r} (an "
                            f"element of type {type(n).__name__})") from None
    return tuple(widths)


def _check_sizes(x, widths, mode):
    """PyTorch's conditions on the input as given: reflect pads less than each dim's
    size, circular at most its size (a wrap around it once); no padded dim is cropped
    below zero elements, and reflect and replicate leave at least one element in some
    padded dim (PyTorch's check of their output: 0 elements in one dim pass)."""
    outputs = []
    for i in range(len(widths) // 2):
        dim = x.ndim - 1 - i
        before, after, n = widths[2 * i], widths[2 * i + 1], x.shape[dim]
        if mode == "reflect" and max(before, after) >= n:
            raise OpError(f"pad: reflect padding ({before}, {after}) of dim {dim} must be "
                          f"less than its size {n} (input of shape {x.shape}); pad less, "
                          f"or use mode='replicate'")
        if mode == "circular" and max(before, after) > n:
            raise OpError(f"pad: circular padding ({before}, {after}) of dim {dim} wraps "
                          f"around it more than once (its size is {n}, input of shape "
                          f"{x.shape}); pad at most {n}")
        if n + before + after < 0:
            raise OpError(f"pad: padding ({before}, {after}) crops more than the "
                          f"{n} elements of dim {dim} (input of shape {x.shape})")
        outputs.append(n + before + after)
    if mode in ("reflect", "replicate") and outputs and max(outputs) < 1:
        raise OpError(f"pad: {mode} padding {widths} leaves no element in the padded dims "
                      f"of the input of shape {x.shape}")


def _check_mode(x, widths, mode, value):
    if mode == "constant":
        return
    if value:
        raise OpError(f"pad: value= applies to mode='constant' only, not {mode!r}")
    k = len(widths) // 2
    if x.ndim not in RANKS.get(k, ()):
        raise OpNotImplementedError(
            f"pad: mode {mode!r} pads the last 1, 2 or 3 dims of an input with one or two "
            f"dims more (2 sizes for a 2-D or 3-D input, 4 for 3-D or 4-D, 6 for 4-D or "
            f"5-D, as PyTorch); got {len(widths)} sizes for an input of shape {x.shape}")
    if mode in ("reflect", "replicate"):
        # (PyTorch's rule: every dim non-empty, but for a batch dim, the extra leading one)
        first = 1 if x.ndim == RANKS[k][1] else 0
        if 0 in x.shape[first:]:
            raise OpError(f"pad: {mode} padding needs every dim of the input non-empty "
                          f"(the batch dim of a {RANKS[k][1]}-D input may be empty), got "
                          f"shape {x.shape}")


def _forward_of(mode, ranks=None):
    """A padding layer's forward: F.pad with the layer's padding (and value), in
    ``mode``; the circular layers check the input's rank first, as PyTorch's do."""
    def make(form):
        if mode == "constant":
            def forward(self, input):  # noqa: A002 (PyTorch's name)
                return form(input, self.padding, "constant", self.value)
        elif ranks is None:
            def forward(self, input):  # noqa: A002
                return form(input, self.padding, mode)
        else:
            def forward(self, input):  # noqa: A002
                if input.ndim not in ranks:
                    raise ValueError(f"{type(self).__name__}: expected {ranks[0]}D or "
                                     f"{ranks[1]}D input (got {input.ndim}D input)")
                return form(input, self.padding, mode)
        return forward
    return make


def _sides(padding, n) -> tuple:
    """A layer's padding as PyTorch keeps it: a sequence as given, an int for each of
    the n sides."""
    if isinstance(padding, collections.abc.Iterable):
        return tuple(padding)
    return (padding,) * n


_FILLS = {"Zero": "zeros", "Constant": "``value``", "Reflection": "the input reflected "
          "at its edges (the edge not repeated)", "Replication": "copies of the edge",
          "Circular": "the input wrapped around"}


def _state(kind, d):
    """The constructor of the ``kind`` layer over ``d`` dims (PyTorch's signature)."""
    n = 2 * d
    if kind == "Constant":
        def state(padding, value):
            return {"padding": _sides(padding, n), "value": value}
    elif kind == "Zero":
        def state(padding):
            return {"padding": _sides(padding, n), "value": 0.0}
    else:
        def state(padding):
            return {"padding": _sides(padding, n)}
    state.__doc__ = (f"Pads the last {d} dim{'s' if d > 1 else ''} with {_FILLS[kind]}; "
                     f"padding: an int for each of the {n} sides, or their sizes (left, "
                     f"right{', top, bottom' if d > 1 else ''}"
                     f"{', front, back' if d > 2 else ''}).")
    return state


_KINDS = (("Zero", "constant"), ("Constant", "constant"), ("Reflection", "reflect"),
          ("Replication", "replicate"), ("Circular", "circular"))
LAYERS = tuple(
    Layer(f"{kind}Pad{d}d", _state(kind, d),
          shown="padding={padding}, value={value}" if kind == "Constant" else "{padding}",
          forward=_forward_of(mode, RANKS[d] if mode == "circular" else None))
    for kind, mode in _KINDS for d in (1, 2, 3))


@fused(None, arity=1, dtypes="any", layer=LAYERS)
def pad(input, pad, mode="constant", value=None):  # noqa: A002 (PyTorch's names)
    """Pad (or, with negative sizes, crop) the last len(pad) // 2 dims: ``pad`` is
    (left, right) of the last dim, then of the one before, ... Modes: 'constant'
    (with ``value``, default 0) on any input; 'reflect', 'replicate' and 'circular' on
    the last 1, 2 or 3 dims of an input with one or two dims more, as PyTorch."""
    x = input
    if not isinstance(x, Tensor):
        raise TypeError(f"pad: input must be a tensor, got {type(x).__name__}")
    if mode not in MODES:
        raise OpNotImplementedError(f"pad: mode must be one of {MODES}, got {mode!r}")
    widths = _widths(pad)
    if len(widths) % 2 or len(widths) // 2 > x.ndim:
        raise OpError(f"pad: needs an even number of sizes, at most 2 per dim of the "
                      f"input ({x.ndim} dims), got {widths}")
    _check_mode(x, widths, mode, value)
    _check_sizes(x, widths, mode)
    fill = 0 if value is None else value
    for i in range(len(widths) // 2):
        x = _pad_dim(x, x.ndim - 1 - i, widths[2 * i], widths[2 * i + 1], mode, fill)
    # (a new tensor, as PyTorch's: no padding, or a crop alone, is a copy, not a view)
    return x.clone() if x._storage is input._storage else x


def _pad_dim(x, dim, before, after, mode, value):
    if mode in ("reflect", "replicate") and (before < 0 or after < 0) and \
            (before > 0 or after > 0):
        # PyTorch reflects (replicates) the input as given, then crops: pad the
        # positive side first, then take the negative one off
        lo, hi = max(-before, 0), max(-after, 0)
        x = _pad_dim(x, dim, max(before, 0), max(after, 0), mode, value)
        return _pad_dim(x, dim, -lo, -hi, mode, value)
    n = x.shape[dim]
    if before < 0 or after < 0:  # crop first (circular wraps the cropped input)
        lo, hi = max(-before, 0), max(-after, 0)
        x = x.narrow(dim, lo, n - lo - hi)
        n = n - lo - hi
        before, after = max(before, 0), max(after, 0)
    if not (before or after):
        return x
    if mode == "circular" and max(before, after) > n:
        # (PyTorch's copy would read what it writes, and refuses the overlap)
        raise OpError(f"pad: circular padding ({before}, {after}) of dim {dim} wraps "
                      f"around its {n} elements left after cropping more than once; pad "
                      f"at most {n}")
    parts = []
    for side, k in (("before", before), ("after", after)):
        if not k:
            parts.append(None)
            continue
        if mode == "constant":
            shape = list(x.shape)
            shape[dim] = k
            block = creation.full(tuple(shape), value, dtype=x.dtype, device=x.device)
        elif mode == "replicate":
            edge = x.narrow(dim, 0 if side == "before" else n - 1, 1)
            shape = list(x.shape)
            shape[dim] = k
            block = edge.expand(*shape)
        elif mode == "circular":
            block = x.narrow(dim, n - k, k) if side == "before" else x.narrow(dim, 0, k)
        else:  # reflect: mirror without repeating the edge
            block = (x.narrow(dim, 1, k) if side == "before" else
                     x.narrow(dim, n - 1 - k, k)).flip(dim)
        parts.append(block)
    pieces = [t for t in (parts[0], x, parts[1]) if t is not None]
    return cat(pieces, dim)


__all__ = ["pad"]
