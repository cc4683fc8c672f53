"""F.embedding_bag and its layer, nn.EmbeddingBag: sums, means or maxes of bags of
embedding rows, declared together. The bags are laid out on the host from the indices
and offsets (which bag each index is in, which indices padding_idx drops); the rows are
then gathered and reduced with recorded ops (take, index_add, max), so the gradients of
the weight and of per_sample_weights, and every device, come with those ops."""

from __future__ import annotations

import warnings

import numpy as np

from .. import creation
from ..autograd.mode import no_grad
from ..dtype import int64
from ..errors import OpError, OpIndexError, OpNotImplementedError, OpTypeError
from ..ops.indexing import cat, take_rows, where
from ..ops.registry import Layer, fused
from ..tensor import Tensor

_MODES = ("sum", "mean", "max")
_INDEX_DTYPES = ("int32", "int64")


def _host(t) -> np.ndarray:
    """An index tensor's values as int64 on the host."""
    return t.cpu().numpy().astype(np.int64, copy=False)


def _bags(op, input, offsets, include_last_offset):
    """(flat indices, offsets, bag count) on the host, from PyTorch's two layouts: a 2-D
    input of fixed-length bags (no offsets), or a 1-D input with the offsets where its
    bags start (and, with include_last_offset, where the last one ends)."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: a 2-D input is a batch of bags of one length, so "
                             f"offsets must be None, got a {type(offsets).__name__}")
        rows, length = input.shape
        if length == 0:
            raise OpError(f"{op}: a 2-D input of shape {input.shape} has bags of no "
                          f"indices (PyTorch refuses it too); give a 1-D input and offsets "
                          f"for empty bags")
        return _host(input).reshape(-1), np.arange(0, rows * length, length), rows
    if input.ndim != 1:
        raise ValueError(f"{op}: input has to be 1-D (with offsets) or 2-D, got shape "
                         f"{input.shape}")
    if offsets is None:
        raise ValueError(f"{op}: a 1-D input needs offsets (a 1-D tensor of where each "
                         f"bag starts), got None")
    if not isinstance(offsets, Tensor) or offsets.ndim != 1:
        raise ValueError(f"{op}: offsets has to be a 1-D tensor, got "
                         f"{getattr(offsets, 'shape', type(offsets).__name__)}")
    if offsets.dtype.name not in _INDEX_DTYPES:
        raise OpTypeError(f"{op}: offsets must be int32 or int64, got {offsets.dtype.name}")
    idx, offs, n = _host(input), _host(offsets), input.shape[0]
    if include_last_offset and not len(offs):
        raise OpError(f"{op}: include_last_offset=True needs at least one offset (the end "
                      f"of the last bag)")
    if len(offs) and offs[0] != 0:
        raise OpError(f"{op}: offsets[0] has to be 0 (the first bag starts at the first "
                      f"index), got {offs[0]}")
    if len(offs) and offs[-1] > n:
        raise OpError(f"{op}: offsets[-1] can not be greater than the input's length {n}, "
                      f"got {offs[-1]}")
    if np.any(np.diff(offs) < 0):
        raise OpError(f"{op}: offsets must not decrease (each bag starts where the one "
                      f"before it ends, or later), got {offs.tolist()}")
    if include_last_offset and offs[-1] != n:
        # (PyTorch's kernels disagree on the indices past it: sum drops them, mean
        # counts them, max takes them)
        raise OpError(f"{op}: with include_last_offset=True the last offset is where the "
                      f"last bag ends, the input's length {n}; got {offs[-1]}")
    return idx, offs, len(offs) - 1 if include_last_offset else len(offs)


def _check_indices(op, idx, n):
    bad = np.flatnonzero((idx < 0) | (idx >= n))
    if len(bad):
        raise OpIndexError(f"{op}: index {bad[0]} of input takes value {idx[bad[0]]}, "
                           f"which is not in the valid range [0, {n}) of the weight's rows")


def _padding(op, padding_idx, n):
    if padding_idx is None:
        return None
    if not -n <= padding_idx < n:
        raise OpError(f"{op}: padding_idx must be within the number of embeddings, "
                      f"{-n} through {n - 1}, but got {padding_idx}")
    return padding_idx % n


def _renorm_(weight, idx, max_norm, norm_type):
    """PyTorch's max_norm: each row the indices name whose norm is above max_norm is
    scaled, in place and without grad, to max_norm / (norm + 1e-7) times itself."""
    rows = creation.tensor(np.unique(idx), device=weight.device)
    with no_grad():
        picked = weight[rows]
        norms = picked.norm(p=norm_type, dim=1).double().cpu().numpy()
        scale = np.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[rows] = picked * creation.tensor(scale[:, None], dtype=weight.dtype,
                                                device=weight.device)


def _check(op, input, weight, per_sample_weights, mode, scale_grad_by_freq, sparse):
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    if per_sample_weights is not None and per_sample_weights.shape != input.shape:
        raise ValueError(f"{op}: per_sample_weights of shape {per_sample_weights.shape} "
                         f"must have the input's shape {input.shape}")
    if weight.ndim != 2:
        raise ValueError(f"{op}: weight has to be a 2-D tensor (num_embeddings, "
                         f"embedding_dim), got shape {weight.shape}")
    if mode not in _MODES:
        raise ValueError(f"{op}: mode has to be one of sum, mean or max, got {mode!r}")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError(f"{op}: mode='max' does not scale the gradient by the frequency "
                         f"(as in PyTorch); pass scale_grad_by_freq=False")
    if mode == "max" and sparse:
        raise ValueError(f"{op}: mode='max' does not support sparse weights (as in PyTorch)")
    if sparse:
        raise OpNotImplementedError(f"{op}: sparse=True asks for a sparse gradient, and "
                                    f"Haelixe has no sparse tensors; pass sparse=False (the "
                                    f"weight's gradient is then dense)")
    if input.dtype.name not in _INDEX_DTYPES:
        raise OpTypeError(f"{op}: indices must be int32 or int64, got {input.dtype.name}")
    if not weight.dtype.is_floating_point:
        raise OpTypeError(f"{op}: weight must be floating, got {weight.dtype.name}")
    if per_sample_weights is not None and per_sample_weights.dtype is not weight.dtype:
        raise OpTypeError(f"{op}: per_sample_weights ({per_sample_weights.dtype.name}) and "
                          f"weight ({weight.dtype.name}) must have one dtype")
    for name, t in (("input", input), ("per_sample_weights", per_sample_weights)):
        if t is not None and t.device is not weight.device:
            raise RuntimeError(f"{op}: {name} on {t.device.type}, weight on "
                               f"{weight.device.type}; move it with .to(...)")


def _embedding_bag_layer(num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                         scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                         include_last_offset=False, padding_idx=None, device=None,
                         dtype=None):
    """nn.EmbeddingBag's state: a (num_embeddings, embedding_dim) weight drawn from
    N(0, 1), its padding_idx row zero (or ``_weight``, as given), and the options
    F.embedding_bag takes."""
    if padding_idx is not None:
        if not -num_embeddings <= padding_idx < num_embeddings:
            raise AssertionError(f"EmbeddingBag: padding_idx {padding_idx} must be within "
                                 f"num_embeddings ({-num_embeddings} through "
                                 f"{num_embeddings - 1})")
        padding_idx %= num_embeddings
    if _weight is None:
        weight = creation.randn(num_embeddings, embedding_dim, dtype=dtype, device=device)
        if padding_idx is not None:
            with no_grad():
                weight[padding_idx] = 0.0
    elif tuple(_weight.shape) != (num_embeddings, embedding_dim):
        raise AssertionError(f"EmbeddingBag: _weight of shape {_weight.shape} does not "
                             f"match num_embeddings and embedding_dim "
                             f"({num_embeddings}, {embedding_dim})")
    else:
        weight = _weight
    return {"num_embeddings": num_embeddings, "embedding_dim": embedding_dim,
            "max_norm": max_norm, "norm_type": norm_type,
            "scale_grad_by_freq": scale_grad_by_freq, "padding_idx": padding_idx,
            "weight": weight, "mode": mode, "sparse": sparse,
            "include_last_offset": include_last_offset}


def _embedding_bag_shown(layer) -> str:  # (PyTorch's: the options not at their defaults)
    s = f"{layer.num_embeddings!r}, {layer.embedding_dim!r}"
    if layer.max_norm is not None:
        s += f", max_norm={layer.max_norm!r}"
    if layer.norm_type != 2:
        s += f", norm_type={layer.norm_type!r}"
    if layer.scale_grad_by_freq is not False:
        s += f", scale_grad_by_freq={layer.scale_grad_by_freq!r}"
    s += f", mode={layer.mode!r}"
    if layer.padding_idx is not None:
        s += f", padding_idx={layer.padding_idx!r}"
    return s


def _bags_of_its_weight(form):
    """The layer's forward: F.embedding_bag with the layer's weight and options; the
    offsets and per-sample weights are arguments of the call."""
    def forward(self, input, offsets=None, per_sample_weights=None):  # noqa: A002
        return form(input, self.weight, offsets, self.max_norm, self.norm_type,
                    self.scale_grad_by_freq, self.mode, self.sparse, per_sample_weights,
                    self.include_last_offset, self.padding_idx)
    return forward


def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                    scale_grad_by_freq=False, mode="mean", sparse=False,
                    include_last_offset=False, padding_idx=None):
    """An EmbeddingBag over the 2-D ``embeddings`` (its weight, the same memory), frozen
    (no gradient) unless ``freeze=False``."""
    if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
        raise AssertionError(f"EmbeddingBag.from_pretrained: embeddings must be a 2-D "
                             f"tensor, got {getattr(embeddings, 'shape', embeddings)!r}")
    rows, cols = embeddings.shape
    bag = cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, max_norm=max_norm,
              norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq, mode=mode,
              sparse=sparse, include_last_offset=include_last_offset,
              padding_idx=padding_idx)
    bag.weight.requires_grad = not freeze
    return bag


@fused(None, arity=2,
       layer=Layer("EmbeddingBag", _embedding_bag_layer, parameters=("weight",),
                   shown=_embedding_bag_shown, forward=_bags_of_its_weight,
                   methods={"from_pretrained": classmethod(from_pretrained)}))
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,  # noqa: A002
                  scale_grad_by_freq=False, mode="mean", sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """The sum, mean or max (``mode``) of the rows of ``weight`` that each bag of
    indices names: a 2-D input is a batch of bags of one length, a 1-D one is split
    where ``offsets`` say (empty bags give zeros). Indices equal to ``padding_idx`` are
    left out of their bag (and of its mean's count); ``per_sample_weights`` scale each
    row of a sum; ``max_norm`` renormalises the named rows in place first, as PyTorch;
    ``scale_grad_by_freq`` divides each row's gradient by how often the input names it.
    sparse=True (a sparse gradient) is refused: Haelixe's gradients are dense."""
    op = "embedding_bag"
    if isinstance(input, Tensor) and isinstance(weight, Tensor) and \
            weight.dtype is int64 and input.dtype.is_floating_point:
        warnings.warn("embedding_bag: the argument order is (input, weight, ...); "
                      "(weight, input, ...) is deprecated in PyTorch and swapped back",
                      stacklevel=2)
        input, weight = weight, input
    _check(op, input, weight, per_sample_weights, mode, scale_grad_by_freq, sparse)
    if per_sample_weights is not None and mode != "sum":
        raise OpNotImplementedError(f"{op}: per_sample_weights is only supported for "
                                    f"mode='sum' (as in PyTorch), got mode={mode!r}")
    idx, offs, count = _bags(op, input, offsets, include_last_offset)
    n, dim = weight.shape
    _check_indices(op, idx, n)
    pad = _padding(op, padding_idx, n)
    if max_norm is not None and len(idx):
        _renorm_(weight, idx, max_norm, norm_type)
    # the bag of each position (-1: none, where there are no bags); positions naming
    # padding_idx are left out
    starts = offs[:-1] if include_last_offset else offs
    bag = np.searchsorted(starts, np.arange(len(idx)), side="right") - 1
    kept = np.flatnonzero((bag >= 0) & (idx != (-1 if pad is None else pad)))
    bag, on = bag[kept], {"device": weight.device}
    rows = take_rows(weight, creation.tensor(idx[kept], **on))
    if scale_grad_by_freq and rows.requires_grad:
        freq = np.bincount(idx, minlength=n)[idx[kept]]
        scale = creation.tensor(freq[:, None], dtype=weight.dtype, **on)
        rows.register_hook(lambda g: g / scale)
    if per_sample_weights is not None:
        scaling = per_sample_weights.reshape(-1)[creation.tensor(kept, **on)]
        rows = rows * scaling.unsqueeze(1)
    sizes = np.bincount(bag, minlength=count)
    if mode == "max" and len(kept):
        return _bag_max(rows, bag, sizes, count, dim)
    total = creation.zeros(count, dim, dtype=weight.dtype, **on).index_add(
        0, creation.tensor(bag, **on), rows)
    if mode == "mean":
        return total / creation.tensor(np.maximum(sizes, 1)[:, None], dtype=weight.dtype,
                                       **on)
    return total


def _bag_max(rows, bag, sizes, count, dim):
    """Each bag's elementwise max of its rows, 0 for an empty bag. The bags are laid out
    as a (count, longest) table of row positions, the unused places naming a row of
    -inf after the others, so max's first largest is the first of the bag's rows with
    that value (PyTorch's pick, and where the gradient goes)."""
    on = {"device": rows.device}
    longest, k = int(sizes.max()), len(bag)
    order = np.argsort(bag, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    table = np.full((count, longest), k, np.int64)
    table[bag[order], np.arange(k) - starts[bag[order]]] = order
    padded = cat([rows, creation.full((1, dim), -np.inf, dtype=rows.dtype, **on)])
    best = take_rows(padded, creation.tensor(table, **on)).max(1).values
    return where(creation.tensor(sizes[:, None] > 0, **on), best, 0.0)


__all__ = ["embedding_bag"]
