"""PyTorch's margin and embedding losses over class scores (multi_margin_loss,
multilabel_margin_loss, multilabel_soft_margin_loss), +-1 labels (soft_margin_loss),
pairs (hinge_embedding_loss, cosine_embedding_loss) and triplets under any distance
(triplet_margin_with_distance_loss), composed from gather,
where and clamp so that autograd gives their gradients on every device."""

from __future__ import annotations

import math

from .. import creation
from ..amp import cast_inputs
from ..autograd.mode import is_grad_enabled
from ..dtype import default_float, int64
from ..errors import OpError
from ..ops.indexing import where
from ..ops.registry import Layer, fused
from ..tensor import Tensor
from .losses import _check_reduction, _floating, _legacy_reduction, _reduce

_LEGACY = {"size_average": None, "reduce": None}


def _legacy_layer(name, size_average, reduce, reduction):
    reduction = _legacy_reduction(size_average, reduce, reduction, name)
    _check_reduction(reduction, name)
    return reduction


def _class_scores(op, input, target):
    """input as (N, C) and target as (N,) int64 labels in [0, C): a 0-d or 1-D input
    is one sample, as PyTorch takes it. Returns them with whether it was unbatched."""
    _floating(op, input)
    if not isinstance(target, Tensor):
        raise TypeError(f"{op}: target must be an int64 tensor, got {type(target).__name__}")
    if target.dtype != int64:
        raise TypeError(f"{op}: target must hold int64 class indices, got "
                        f"{target.dtype.name}; convert with .long()")
    if input.ndim > 2 or (input.ndim >= 1 and input.shape[-1] == 0):
        raise OpError(f"{op}: expected a non-empty (C,) vector or an (N, C) matrix (N may "
                      f"be 0), got input of shape {tuple(input.shape)}")
    unbatched = input.ndim < 2
    x = input.reshape(1, -1) if unbatched else input
    return x, unbatched


def _labels_in_range(op, target, c, low=0):
    if target.numel() and bool(((target < low) | (target >= c)).any()):
        raise OpError(f"{op}: target holds labels outside [{low}, {c}) for input of {c} "
                      f"classes")


def _one_per_sample(loss, unbatched, reduction, op):
    return _reduce(loss.reshape(()) if unbatched else loss, reduction, op)


def _multi_margin_loss_layer(p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                             reduction="mean"):
    reduction = _legacy_layer("MultiMarginLoss", size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 supported, got {p}")
    if weight is not None and weight.ndim != 1:
        raise ValueError(f"MultiMarginLoss: weight must be 1-D (one per class), got shape "
                         f"{tuple(weight.shape)}")
    return {"p": p, "margin": margin, "weight": weight, "reduction": reduction}


@fused(None, arity=2,
       layer=Layer("MultiMarginLoss", _multi_margin_loss_layer, inputs=2,
                   buffers=("weight",), fixed=_LEGACY))
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,  # noqa: A002
                      reduce=None, reduction="mean"):
    """The multi-class hinge loss: per sample, the sum over classes j other than its
    label y of max(0, margin - x[y] + x[j]) ** p (times weight[y]), over the class
    count C."""
    op = "multi_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction, op)
    _check_reduction(reduction, op)
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 supported, got {p}")
    x, unbatched = _class_scores(op, input, target)
    n, c = x.shape
    if target.numel() != n or target.ndim > 1:
        raise OpError(f"{op}: target of shape {tuple(target.shape)} does not fit input of "
                      f"shape {tuple(input.shape)}; give one label per sample ({n},)")
    _labels_in_range(op, target, c)
    labels = target.reshape(n, 1)
    (x,) = cast_inputs("loss", x)
    terms = (margin - x.gather(1, labels) + x).clamp(min=0)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        if not isinstance(weight, Tensor) or weight.ndim != 1 or weight.shape[0] != c:
            shape = tuple(weight.shape) if isinstance(weight, Tensor) else type(weight)
            raise OpError(f"{op}: weight must be a 1-D tensor of one weight per class "
                          f"({c},), got {shape}")
        if weight.requires_grad and is_grad_enabled():
            raise OpError(f"{op}: not differentiable with respect to weight (as in "
                          f"PyTorch); pass weight.detach()")
        terms = terms * weight.to(x.dtype)[target].reshape(n, 1)
    own = labels == creation.arange(c, device=x.device)  # (the label's own term is out)
    loss = where(own, 0.0, terms).sum(1) / c
    return _one_per_sample(loss, unbatched, reduction, op)


def _reduction_layer(name):
    def state(size_average=None, reduce=None, reduction="mean"):
        return {"reduction": _legacy_layer(name, size_average, reduce, reduction)}
    state.__name__ = f"_{name}_layer"
    return state


@fused(None, arity=2,
       layer=Layer("MultiLabelMarginLoss", _reduction_layer("MultiLabelMarginLoss"),
                   inputs=2, fixed=_LEGACY))
def multilabel_margin_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                           reduction="mean"):
    """The multi-label hinge loss: target lists each sample's labels, ended by the first
    -1; per sample, the sum over its labels y and the classes k not among them of
    max(0, 1 - (x[y] - x[k])), over the class count C."""
    op = "multilabel_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction, op)
    _check_reduction(reduction, op)
    x, unbatched = _class_scores(op, input, target)
    n, c = x.shape
    if target.shape != input.shape:
        raise OpError(f"{op}: target of shape {tuple(target.shape)} must have the input's "
                      f"shape {tuple(input.shape)} (labels, then -1 after the last)")
    _labels_in_range(op, target, c, low=-1)
    target = target.reshape(n, c)
    listed = (target == -1).to(int64).cumsum(1) == 0  # (the slots before the first -1)
    labels = where(listed, target, 0)
    classes = creation.arange(c, device=x.device)
    is_label = ((labels.unsqueeze(2) == classes) & listed.unsqueeze(2)).any(1)  # (N, C)
    (x,) = cast_inputs("loss", x)
    pairs = (1.0 - x.gather(1, labels).unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)
    counted = listed.unsqueeze(2) & ~is_label.unsqueeze(1)  # (label slot, other class)
    loss = where(counted, pairs, 0.0).sum((1, 2)) / c
    return _one_per_sample(loss, unbatched, reduction, op)


def _multilabel_soft_margin_loss_layer(weight=None, size_average=None, reduce=None,
                                       reduction="mean"):
    return {"weight": weight, "reduction": _legacy_layer(
        "MultiLabelSoftMarginLoss", size_average, reduce, reduction)}


@fused(None, arity=2,
       layer=Layer("MultiLabelSoftMarginLoss", _multilabel_soft_margin_loss_layer,
                   inputs=2, buffers=("weight",), fixed=_LEGACY))
def multilabel_soft_margin_loss(input, target, weight=None, size_average=None,  # noqa: A002
                                reduce=None, reduction="mean"):
    """The logistic loss of each class as its own yes/no question, -(y log sigmoid(x) +
    (1 - y) log sigmoid(-x)) (times ``weight``, broadcast), averaged over the classes
    (the last dim): one loss per sample."""
    op = "multilabel_soft_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction, op)
    _check_reduction(reduction, op)
    _floating(op, input)
    if not isinstance(target, Tensor):
        raise TypeError(f"{op}: target must be a tensor, got {type(target).__name__}")
    if input.ndim == 0:
        raise OpError(f"{op}: input must have a class dim, got a 0-d tensor")
    x, target = cast_inputs("loss", input, target)
    loss = -(target * _log_sigmoid(x) + (1 - target) * _log_sigmoid(-x))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss.mean(-1), reduction, op)


def _log_sigmoid(x):
    """log(sigmoid(x)) to full precision for every x: -log1p(exp(-x)) for x >= 0 and
    x - log1p(exp(x)) below, each branch fed only its own side so that neither
    overflows (nor sends a nan gradient through the other); 1/2 its slope at 0."""
    up, down = x >= 0, x < 0
    xp, xn = where(up, x, 0.0), where(down, x, 0.0)
    return where(up, -(-xp).exp().log1p(), xn - xn.exp().log1p())


def _soft_margin_loss_layer(size_average=None, reduce=None, reduction="mean"):
    return {"reduction": _legacy_layer("SoftMarginLoss", size_average, reduce, reduction)}


@fused(None, arity=2,
       layer=Layer("SoftMarginLoss", _soft_margin_loss_layer, inputs=2, fixed=_LEGACY))
def soft_margin_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                     reduction="mean"):
    """The two-class logistic loss of +-1 labels, log(1 + exp(-target * input)),
    elementwise with broadcasting (computed as -log sigmoid, finite for any input)."""
    op = "soft_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction, op)
    _check_reduction(reduction, op)
    _floating(op, input)
    if not isinstance(target, Tensor):
        raise TypeError(f"{op}: target must be a tensor, got {type(target).__name__}")
    if target.requires_grad and is_grad_enabled():
        raise OpError(f"{op}: not differentiable with respect to target (as in PyTorch); "
                      f"pass target.detach()")
    x, target = cast_inputs("loss", input, target)
    # (the result keeps the input's dtype, as PyTorch's: the target is read in it)
    return _reduce(-_log_sigmoid(x * target.to(x.dtype)), reduction, op)


def _cosine_embedding_loss_layer(margin=0.0, size_average=None, reduce=None,
                                 reduction="mean"):
    return {"margin": margin, "reduction": _legacy_layer(
        "CosineEmbeddingLoss", size_average, reduce, reduction)}


#: added to each squared length before the root, as PyTorch's (a zero vector's cosine
#: is then 0, with a zero gradient, not a nan)
_COSINE_EPS = 1e-12


@fused(None, arity=3, dtypes="any",
       layer=Layer("CosineEmbeddingLoss", _cosine_embedding_loss_layer, inputs=3,
                   fixed=_LEGACY))
def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """For pairs of rows labelled similar (target 1) or not (-1): 1 - cos(x1, x2) where
    the target is 1, max(0, cos(x1, x2) - margin) where it is -1, 0 for other labels;
    (N, D) inputs with an (N,) target, or (D,) inputs with a 0-d one."""
    op = "cosine_embedding_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction, op)
    _check_reduction(reduction, op)
    for name, t in (("input1", input1), ("input2", input2), ("target", target)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    if target.ndim > 1:
        raise OpError(f"{op}: expected a 0-d or 1-D target, got shape {tuple(target.shape)} "
                      f"(one label per pair; several targets are not supported)")
    if input1.ndim != target.ndim + 1 or input2.ndim != target.ndim + 1:
        raise OpError(f"{op}: a {target.ndim}-D target expects {target.ndim + 1}-D inputs, "
                      f"got input1 {tuple(input1.shape)} and input2 {tuple(input2.shape)}")
    if input1.shape != input2.shape:
        raise OpError(f"{op}: input1 {tuple(input1.shape)} and input2 "
                      f"{tuple(input2.shape)} must have one shape")
    if target.ndim and target.shape[0] != input1.shape[0]:
        raise OpError(f"{op}: a target of {target.shape[0]} labels for {input1.shape[0]} "
                      f"pairs; give one label per row")
    # (integer and bool inputs compute in the default float, as PyTorch's do)
    a, b = (t if t.dtype.is_floating_point else t.to(default_float) for t in (input1, input2))
    a, b = cast_inputs("loss", a, b)
    cos = (a * b).sum(-1) / (((a * a).sum(-1) + _COSINE_EPS) *
                             ((b * b).sum(-1) + _COSINE_EPS)).sqrt()
    loss = where(target == 1, 1 - cos, 0) + where(target == -1, (cos - margin).clamp(min=0), 0)
    return _reduce(loss, reduction, op)


def _hinge_embedding_loss_layer(margin=1.0, size_average=None, reduce=None,
                                reduction="mean"):
    return {"margin": margin, "reduction": _legacy_layer(
        "HingeEmbeddingLoss", size_average, reduce, reduction)}


@fused(None, arity=2, dtypes="any",
       layer=Layer("HingeEmbeddingLoss", _hinge_embedding_loss_layer, inputs=2,
                   fixed=_LEGACY))
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,  # noqa: A002
                         reduction="mean"):
    """For distances ``input`` of pairs labelled similar (target 1) or not (-1): the
    distance where the target is not -1, plus max(0, margin - distance) where it is not
    1, elementwise with broadcasting."""
    op = "hinge_embedding_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction, op)
    _check_reduction(reduction, op)
    for name, t in (("input", input), ("target", target)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    if input.dtype.name == "bool":
        raise TypeError(f"{op}: not defined for bool inputs (as in PyTorch); convert with "
                        f".float() first")
    if not input.dtype.is_floating_point:
        margin = math.trunc(margin)  # (PyTorch reads the margin in the input's dtype)
    x, target = cast_inputs("loss", input, target)
    # (the result has the input's dtype: the target is only compared)
    apart = where(target != 1, (margin - x).clamp(min=0), 0)
    loss = apart + where(target != -1, x, 0)
    return _reduce(loss, reduction, op)


def _triplet_with_distance_layer(*, distance_function=None, margin=1.0, swap=False,
                                 reduction="mean"):
    _check_reduction(reduction, "TripletMarginWithDistanceLoss")
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: margin must be > 0, got {margin}")
    if distance_function is None:  # (held as a layer, as PyTorch's shows it)
        from .fused_layers import PairwiseDistance
        distance_function = PairwiseDistance()
    return {"distance_function": distance_function, "margin": margin, "swap": swap,
            "reduction": reduction}


def _triplet_with_distance_forward(form):
    def forward(self, anchor, positive, negative):
        return form(anchor, positive, negative, distance_function=self.distance_function,
                    margin=self.margin, swap=self.swap, reduction=self.reduction)
    return forward


@fused(None, arity=3,
       layer=Layer("TripletMarginWithDistanceLoss", _triplet_with_distance_layer,
                   inputs=3, forward=_triplet_with_distance_forward))
def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """max(d(anchor, positive) - d(anchor, negative) + margin, 0), d the
    ``distance_function`` (pairwise_distance where None); ``swap`` takes the smaller of
    d(anchor, negative) and d(positive, negative)."""
    op = "triplet_margin_with_distance_loss"
    _check_reduction(reduction, op)
    if margin <= 0:
        raise ValueError(f"{op}: margin must be > 0, got {margin}")
    for name, t in (("anchor", anchor), ("positive", positive), ("negative", negative)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    if len({t.ndim for t in (anchor, positive, negative)}) > 1:
        raise OpError(f"{op}: anchor {tuple(anchor.shape)}, positive "
                      f"{tuple(positive.shape)} and negative {tuple(negative.shape)} must "
                      f"have one number of dimensions")
    if distance_function is None:
        from ..ops.reduce import pairwise_distance
        distance_function = pairwise_distance
    d_pos = distance_function(anchor, positive)
    d_neg = distance_function(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(distance_function(positive, negative))
    return _reduce((d_pos - d_neg + margin).clamp(min=0), reduction, op)


__all__ = ["multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
           "soft_margin_loss", "hinge_embedding_loss", "cosine_embedding_loss",
           "triplet_margin_with_distance_loss"]
