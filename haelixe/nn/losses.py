"""Loss functions with PyTorch's signatures, composed from tensor ops (log_softmax,
gather, where, ...) so that their gradients come from autograd, in numerically stable
forms (log-softmax rather than log of softmax, log(1 + exp(-|x|)) rather than
log(1 + exp(x))). mse_loss (mean) and cross_entropy are one node each instead, over the
backend's kernels (ops/fused.py)."""

from __future__ import annotations

import math
import warnings

from .. import creation
from ..amp import cast_inputs
from ..autograd.mode import STATE, no_grad
from ..backends.base import Backend
from ..dtype import promote_types
from ..errors import OpError
from ..ops.fused import CrossEntropyFn, MSELossFn, SoftCrossEntropyFn
from ..ops.indexing import where
from ..ops.registry import Layer, fused
from ..tensor import Tensor

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction, op):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got "
                         f"{reduction!r}")


def _reduce(x, reduction, op):
    _check_reduction(reduction, op)
    if reduction == "mean":
        return x.mean()
    if reduction == "sum":
        return x.sum()
    return x


def _same_shape(x, target, op):
    if not isinstance(target, Tensor):
        raise TypeError(f"{op}: target must be a tensor, got {type(target).__name__}")
    if x.shape != target.shape:
        raise ValueError(f"{op}: input {x.shape} and target {target.shape} differ in "
                         f"shape; reshape one so they match")


# -- regression ------------------------------------------------------------------------

def _no_legacy_reduction(size_average, reduce, op):
    if size_average is not None or reduce is not None:
        raise TypeError(f"{op}: size_average and reduce are deprecated in PyTorch and not "
                        f"taken here; pass reduction='mean', 'sum' or 'none'")


def _mse_loss_layer(size_average=None, reduce=None, reduction="mean"):
    _no_legacy_reduction(size_average, reduce, "MSELoss")
    _check_reduction(reduction, "MSELoss")
    return {"reduction": reduction}


@fused(MSELossFn, arity=2,
       layer=Layer("MSELoss", _mse_loss_layer, inputs=2, shown="reduction={reduction!r}"))
def mse_loss(input, target, reduction="mean"):  # noqa: A002 (PyTorch's names)
    """The mean (or sum, or each) of the squared differences of two tensors of one
    shape; the mean is one fused node."""
    _same_shape(input, target, "mse_loss")
    if not input.dtype.is_floating_point:
        raise TypeError(f"mse_loss: not defined for {input.dtype.name} inputs (as in "
                        f"PyTorch); convert with .float() first")
    _check_reduction(reduction, "mse_loss")
    x, target = cast_inputs("loss", input, target)
    if reduction == "mean":
        return MSELossFn.apply(x, target)
    d = x - target
    return _reduce(d * d, reduction, "mse_loss")


def _legacy_reduction(size_average, reduce, reduction, op):
    """The reduction of a call with PyTorch's deprecated size_average and reduce in its
    signature: they are refused when given, except a reduction passed third
    (``l1_loss(x, t, 'sum')``, where size_average sits), which is the reduction."""
    if isinstance(size_average, str) and reduce is None and reduction == "mean":
        size_average, reduction = None, size_average
    _no_legacy_reduction(size_average, reduce, op)
    return reduction


def _weighted(loss, weight, reduction, op, mean_over_weight):
    """``loss`` times the per-element ``weight`` (of the input's shape, as PyTorch's),
    reduced; the mean divides by the total weight where ``mean_over_weight`` (PyTorch's
    l1_loss), by the count elsewhere (its huber_loss)."""
    if not isinstance(weight, Tensor):
        raise TypeError(f"{op}: weight must be a tensor of the input's shape, got "
                        f"{type(weight).__name__}")
    if weight.shape != loss.shape:
        raise ValueError(f"{op}: weight of shape {weight.shape} must have the input's "
                         f"shape {loss.shape}")
    _check_reduction(reduction, op)
    (weight,) = cast_inputs("loss", weight)
    loss = loss * weight
    if reduction == "mean" and mean_over_weight:
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction, op)


def _l1_loss_layer(size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction, "L1Loss")
    _check_reduction(reduction, "L1Loss")
    return {"reduction": reduction}


# (nn.L1Loss and nn.HuberLoss hold no weight, as PyTorch's: their forwards pass None)
@fused(None, arity=2, dtypes="any",
       layer=Layer("L1Loss", _l1_loss_layer, inputs=2,
                   fixed={"size_average": None, "reduce": None, "weight": None},
                   shown="reduction={reduction!r}"))
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):  # noqa: A002
    """The mean (or sum, or each) of the absolute differences of two tensors of one
    shape; ``weight`` scales each element, and the mean is then over the total weight."""
    reduction = _legacy_reduction(size_average, reduce, reduction, "l1_loss")
    _same_shape(input, target, "l1_loss")
    x, target = cast_inputs("loss", input, target)
    if weight is not None:
        return _weighted((x - target).abs(), weight, reduction, "l1_loss", True)
    return _reduce((x - target).abs(), reduction, "l1_loss")


def _smooth_l1_loss_layer(size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = _legacy_reduction(size_average, reduce, reduction, "SmoothL1Loss")
    _check_reduction(reduction, "SmoothL1Loss")
    return {"reduction": reduction, "beta": beta}


@fused(None, arity=2,
       layer=Layer("SmoothL1Loss", _smooth_l1_loss_layer, inputs=2,
                   fixed={"size_average": None, "reduce": None},
                   shown="reduction={reduction!r}, beta={beta!r}"))
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean",  # noqa: A002
                   beta=1.0):
    """0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (l1 when beta = 0)."""
    reduction = _legacy_reduction(size_average, reduce, reduction, "smooth_l1_loss")
    _same_shape(input, target, "smooth_l1_loss")
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be >= 0, got {beta}")
    x, target = cast_inputs("loss", input, target)
    d = (x - target).abs()
    if beta == 0:
        return _reduce(d, reduction, "smooth_l1_loss")
    loss = where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, reduction, "smooth_l1_loss")


def _huber_loss_layer(reduction="mean", delta=1.0):
    _check_reduction(reduction, "HuberLoss")
    return {"reduction": reduction, "delta": delta}


@fused(None, arity=2,
       layer=Layer("HuberLoss", _huber_loss_layer, inputs=2, fixed={"weight": None},
                   shown="reduction={reduction!r}, delta={delta!r}"))
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):  # noqa: A002
    """0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere; ``weight`` scales
    each element (the mean stays over the elements, as PyTorch's)."""
    _same_shape(input, target, "huber_loss")
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be > 0, got {delta}")
    x, target = cast_inputs("loss", input, target)
    d = (x - target).abs()
    loss = where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    if weight is not None:
        return _weighted(loss, weight, reduction, "huber_loss", False)
    return _reduce(loss, reduction, "huber_loss")


# -- classification ---------------------------------------------------------------------

def _classes_last(input, target, op, probabilities=False):
    """(M, C) scores and (M,) class targets (or (M, C) probabilities) from PyTorch's
    layouts: (C,) with a 0-d target, (N, C) with (N,), (N, C, d1, ...) with
    (N, d1, ...). Also returns the shape of the per-element loss."""
    if input.ndim == 0:
        raise OpError(f"{op}: input must have a class dimension, got a 0-d tensor")
    if input.ndim == 1:
        batch = ()
    else:
        batch = (input.shape[0],) + input.shape[2:]
    want = input.shape if probabilities else batch
    if isinstance(target, Tensor) and target.device is not input.device:
        raise OpError(f"{op}: target on {target.device}, input on {input.device}; move "
                      f"the target with .to({str(input.device)!r})")
    if target.shape != want:
        kind = "class probabilities" if probabilities else "class indices"
        raise OpError(f"{op}: input of shape {input.shape} (classes in dim "
                      f"{0 if input.ndim == 1 else 1}) needs a target of {kind} with "
                      f"shape {want}, got {target.shape}")
    c = input.shape[0 if input.ndim == 1 else 1]
    if input.ndim > 2:  # classes to the last dim, every other position a row
        order = (0, *range(2, input.ndim), 1)
        input = input.permute(*order)
        if probabilities:
            target = target.permute(*order)
    rows = input if input.ndim == 2 else input.reshape(-1, c)  # (no view node on rows)
    if target.ndim != (2 if probabilities else 1):
        target = target.reshape(-1, c) if probabilities else target.reshape(-1)
    return rows, target, batch


def _check_classes(target, c, ignore_index, op):
    if target.dtype.is_floating_point or target.dtype.name == "bool":
        raise TypeError(f"{op}: class targets must be integers, got {target.dtype.name}; "
                        f"for class probabilities pass a floating target of the input's "
                        f"shape (cross_entropy)")
    message = (f"{op}: target {{value}} is out of bounds for {c} classes (targets must lie "
               f"in [0, {c}) or equal ignore_index={ignore_index})")
    be = target._be
    if be.checks_on_device():  # (no read-back now)
        be.check_range(target._data, 0, c, ignore_index, IndexError, message)
    else:  # the contract's default: the raw array read back and checked now
        Backend.check_range(be, target._data, 0, c, ignore_index, IndexError, message)


def _check_weight(weight, c, op):
    if weight is not None and not isinstance(weight, Tensor):
        raise TypeError(f"{op}: weight must be a tensor of per-class weights, got "
                        f"{weight!r}; pass the reduction by keyword: {op}(input, target, "
                        f"reduction=...)")
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != c):
        raise OpError(f"{op}: weight must have one entry per class ({c},), got "
                      f"{weight.shape}")


def _picked(logp, target, weight, ignore_index):
    """Per-row -w[t] * logp[t] and the weights w[t] (0 where t is ignored)."""
    valid = target != ignore_index
    safe = where(valid, target, 0)
    picked = logp.gather(1, safe.reshape(-1, 1)).reshape(-1)
    w = valid.to(logp.dtype)
    if weight is not None:
        w = weight.to(logp.dtype)[safe] * w
    return -picked * w, w, valid


def _nll(logp, target, weight, ignore_index, reduction, batch):
    loss, w, valid = _picked(logp, target, weight, ignore_index)
    if reduction == "none":
        return loss.reshape(batch), w, valid
    if reduction == "sum":
        return loss.sum(), w, valid
    return loss.sum() / w.sum(), w, valid


def _nll_loss_layer(weight=None, size_average=None, ignore_index=-100, reduce=None,
                    reduction="mean"):
    """nn.NLLLoss's state: the class weights a buffer (they follow .to() and appear in
    the state dict, as in PyTorch)."""
    _no_legacy_reduction(size_average, reduce, "NLLLoss")
    _check_reduction(reduction, "NLLLoss")
    return {"reduction": reduction, "weight": weight, "ignore_index": ignore_index}


@fused(None, arity=2,
       layer=Layer("NLLLoss", _nll_loss_layer, inputs=2, buffers=("weight",),
                   fixed={"size_average": None, "reduce": None},
                   shown="reduction={reduction!r}, ignore_index={ignore_index!r}"))
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100,  # noqa: A002
             reduce=None, reduction="mean"):
    """Negative log-likelihood of log-probabilities ``input`` (classes in dim 1, or dim
    0 unbatched) at the class indices ``target``; ``weight`` per class; targets equal
    to ``ignore_index`` count nothing; 'mean' divides by the total weight of the rest."""
    _no_legacy_reduction(size_average, reduce, "nll_loss")
    _check_reduction(reduction, "nll_loss")
    (input,) = cast_inputs("loss", input)
    logp, target, batch = _classes_last(input, target, "nll_loss")
    c = logp.shape[1]
    _check_weight(weight, c, "nll_loss")
    _check_classes(target, c, ignore_index, "nll_loss")
    return _nll(logp, target, weight, ignore_index, reduction, batch)[0]


def _cross_entropy_layer(weight=None, size_average=None, ignore_index=-100, reduce=None,
                         reduction="mean", label_smoothing=0.0):
    """nn.CrossEntropyLoss's state: the class weights a buffer (they follow .to() and
    appear in the state dict, as in PyTorch)."""
    _no_legacy_reduction(size_average, reduce, "CrossEntropyLoss")
    _check_reduction(reduction, "CrossEntropyLoss")
    return {"reduction": reduction, "weight": weight, "ignore_index": ignore_index,
            "label_smoothing": label_smoothing}


@fused(CrossEntropyFn, arity=2,
       layer=Layer("CrossEntropyLoss", _cross_entropy_layer, inputs=2, buffers=("weight",),
                   fixed={"size_average": None, "reduce": None},
                   shown="reduction={reduction!r}, ignore_index={ignore_index!r}, "
                         "label_smoothing={label_smoothing!r}"))
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """log_softmax over the classes (dim 1, or dim 0 unbatched), then nll_loss; or, with
    a floating ``target`` of the input's shape, the cross-entropy against class
    probabilities. ``label_smoothing`` mixes the target with the uniform distribution,
    with PyTorch's normalisation for every reduction."""
    _no_legacy_reduction(size_average, reduce, "cross_entropy")
    _check_reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got "
                         f"{label_smoothing}")
    if not input.dtype.is_floating_point:  # (log_softmax of integers: PyTorch refuses too)
        raise TypeError(f"cross_entropy: logits must be floating, got {input.dtype.name} "
                        f"(shape {input.shape}); convert with .float() first")
    (input,) = cast_inputs("loss", input)
    probabilities = isinstance(target, Tensor) and target.dtype.is_floating_point
    if input.ndim and input.shape[1 if input.ndim > 1 else 0] == 0:
        return _no_classes(input, target, probabilities, reduction)
    logits, target, batch = _classes_last(input, target, "cross_entropy", probabilities)
    c = logits.shape[1]
    _check_weight(weight, c, "cross_entropy")
    if probabilities:  # one node: the backend's cross_entropy_soft, in the promoted dtype
        dt = promote_types(logits.dtype, target.dtype)  # (bf16 logits, f32 target: f32)
        logits, target = (t if t.dtype == dt else t.to(dt) for t in (logits, target))
        if weight is not None and weight.dtype != dt:
            weight = weight.to(dt)
        return SoftCrossEntropyFn.apply(logits, target, weight, reduction,
                                              label_smoothing, batch)
    _check_classes(target, c, ignore_index, "cross_entropy")
    if weight is not None and weight.requires_grad and STATE.grad_enabled:
        raise OpError("cross_entropy: with class-index targets the loss is not "
                      "differentiable with respect to weight (as in PyTorch); pass "
                      "weight.detach(), or class-probability targets")
    # one node: the backend's cross_entropy, forward and backward on raw arrays
    return CrossEntropyFn.apply(logits, target, weight, ignore_index, reduction,
                                      label_smoothing, batch)


def _no_classes(input, target, probabilities, reduction):
    """cross_entropy over no classes, as PyTorch answers it for class-probability
    targets: each sample's loss is an empty sum, 0 (its gradient too); their mean is
    NaN. Class-index targets have no class to name."""
    if not probabilities:
        raise OpError(f"cross_entropy: the input of shape {input.shape} has no classes "
                      f"(its class dim is 0), so class-index targets name none")
    _same_shape(input, target, "cross_entropy")
    loss = (input * target).sum(1 if input.ndim > 1 else 0) * 0.0
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() * math.nan


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-weight * [t * log(x) + (1 - t) * log(1 - x)] of probabilities x in [0, 1], each
    log clamped at -100 as PyTorch does (a certain wrong answer costs 100, not inf).
    binary_cross_entropy_with_logits takes the logits instead, and is stabler."""
    op = "binary_cross_entropy"
    _no_legacy_reduction(size_average, reduce, op)
    _same_shape(input, target, op)
    _check_reduction(reduction, op)
    if not input.dtype.is_floating_point:
        raise TypeError(f"{op}: input must be a float tensor of probabilities, got "
                        f"{input.dtype.name}")
    x, target = cast_inputs("loss", input, target.to(input.dtype))
    if x.numel() and bool(((x < 0) | (x > 1)).any()):
        raise OpError(f"{op}: every element of input must be between 0 and 1 (input of "
                      f"shape {tuple(x.shape)} has {x.min().item()} to {x.max().item()}); "
                      f"apply sigmoid first, or pass the logits to "
                      f"binary_cross_entropy_with_logits")
    loss = (target - 1.0) * (-x).log1p().clamp(min=-100.0) \
        - target * x.log().clamp(min=-100.0)
    if weight is not None:
        loss = loss * weight.to(x.dtype)
    return _reduce(loss, reduction, op)

def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",
                                     pos_weight=None):
    """-[pos_weight * t * log sigmoid(x) + (1 - t) * log(1 - sigmoid(x))], in the form
    (1 - t) x + (1 + (pos_weight - 1) t) (log(1 + exp(-|x|)) + max(-x, 0)) that never
    overflows; ``weight`` scales each element, ``pos_weight`` broadcasts over the last
    (class) dim."""
    _same_shape(input, target, "binary_cross_entropy_with_logits")
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    x, target = cast_inputs("loss", input, target.to(input.dtype))
    softplus_neg = (-x.abs()).exp().add(1.0).log() + (-x).clamp(min=0.0)
    if pos_weight is not None:
        log_weight = (pos_weight.to(x.dtype) - 1.0) * target + 1.0
        softplus_neg = log_weight * softplus_neg
    loss = (1.0 - target) * x + softplus_neg
    if weight is not None:
        loss = loss * weight.to(x.dtype)
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


# -- distributions and rankings ----------------------------------------------------------

_KL_REDUCTIONS = ("mean", "batchmean", "sum", "none")


def _kl_reduction(size_average, reduce, reduction, op):
    reduction = _legacy_reduction(size_average, reduce, reduction, op)
    if reduction not in _KL_REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'mean', 'batchmean', 'sum' or 'none', "
                         f"got {reduction!r}")
    return reduction


def _floating(op, *tensors):
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected tensors, got {type(t).__name__}")
        if not t.dtype.is_floating_point:
            raise TypeError(f"{op}: not defined for {t.dtype.name} inputs (as in PyTorch); "
                            f"convert with .float() first")


def _kl_div_layer(size_average=None, reduce=None, reduction="mean", log_target=False):
    return {"reduction": _kl_reduction(size_average, reduce, reduction, "KLDivLoss"),
            "log_target": log_target}


@fused(None, arity=2,
       layer=Layer("KLDivLoss", _kl_div_layer, inputs=2,
                   fixed={"size_average": None, "reduce": None}))
def kl_div(input, target, size_average=None, reduce=None, reduction="mean",  # noqa: A002
           log_target=False):
    """The Kullback-Leibler divergence target * (log(target) - input) of log-probabilities
    ``input`` from probabilities ``target`` (log-probabilities where ``log_target``),
    elementwise with broadcasting; 0 where target is 0. 'batchmean' divides the sum by
    the batch size (dim 0), the divergence per sample; 'mean' divides by the element
    count and warns, as PyTorch does."""
    reduction = _kl_reduction(size_average, reduce, reduction, "kl_div")
    _floating("kl_div", input, target)
    x, target = cast_inputs("loss", input, target)
    if log_target:
        loss = target.exp() * (target - x)
    else:  # (xlogy: a zero target contributes 0, and its log is never taken)
        safe = where(target == 0, 1.0, target)
        loss = target * safe.log() - target * x
    if reduction == "batchmean":
        return loss.sum() / loss.shape[0] if loss.ndim else loss.sum()
    if reduction == "mean":
        warnings.warn("kl_div: reduction='mean' divides the total loss by both the batch "
                      "size and the support size; 'batchmean' divides only by the batch "
                      "size, as the KL divergence is defined", UserWarning, stacklevel=2)
    return _reduce(loss, reduction, "kl_div")


def _poisson_nll_loss_layer(log_input=True, full=False, size_average=None, eps=1e-8,
                            reduce=None, reduction="mean"):
    _no_legacy_reduction(size_average, reduce, "PoissonNLLLoss")
    _check_reduction(reduction, "PoissonNLLLoss")
    return {"log_input": log_input, "full": full, "eps": eps, "reduction": reduction}


@fused(None, arity=2,
       layer=Layer("PoissonNLLLoss", _poisson_nll_loss_layer, inputs=2,
                   fixed={"size_average": None, "reduce": None}))
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None,  # noqa: A002
                     eps=1e-8, reduce=None, reduction="mean"):
    """The negative log-likelihood of ``target`` counts under Poisson rates: exp(input)
    - target * input of log-rates (``log_input``), input - target * log(input + eps) of
    rates otherwise; elementwise with broadcasting. ``full`` adds Stirling's
    approximation of log(target!), target * log(target) - target + log(2 pi target) /
    2, where target > 1 (0 elsewhere, as PyTorch)."""
    op = "poisson_nll_loss"
    _no_legacy_reduction(size_average, reduce, op)
    _check_reduction(reduction, op)
    for name, t in (("input", input), ("target", target)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    x, target = cast_inputs("loss", input, target)
    loss = x.exp() - target * x if log_input else x - target * (x + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (target * (2.0 * math.pi)).log()
        loss = loss + stirling.masked_fill(target <= 1, 0.0)
    return _reduce(loss, reduction, op)


def _gaussian_nll_loss_layer(*, full=False, eps=1e-6, reduction="mean"):
    _check_reduction(reduction, "GaussianNLLLoss")
    return {"full": full, "eps": eps, "reduction": reduction}


def _variances(input, var, op):
    """``var`` laid over ``input`` as PyTorch's gaussian_nll_loss takes it: a float for
    every element, a tensor of the input's shape, of its shape without the last dim (one
    variance per row), or of its rank with one dim of size 1 where the input's differs."""
    if isinstance(var, float):  # (a float, as PyTorch takes: not an int)
        if var < 0:
            raise ValueError(f"{op}: var has a negative entry ({var}); variances are >= 0")
        return creation.ones_like(input) * var
    if not isinstance(var, Tensor):
        raise TypeError(f"{op}: var must be a tensor or a float, got {type(var).__name__}")
    if var.numel() and bool((var < 0).any()):
        raise ValueError(f"{op}: var has negative entries; variances are >= 0")
    if var.shape == input.shape:
        return var
    if input.shape[:-1] == var.shape:  # one per row: laid along the last dim
        return var.unsqueeze(-1)
    if var.ndim == input.ndim and \
            sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1:
        return var  # (one dim of size 1 where the input's differs: it broadcasts)
    raise ValueError(f"{op}: var of shape {var.shape} does not fit the input of shape "
                     f"{input.shape}; give one variance per element (the input's shape), "
                     f"one per row ({input.shape[:-1]}, or with a last dim of 1), or a "
                     f"float")


@fused(None, arity=3,
       layer=Layer("GaussianNLLLoss", _gaussian_nll_loss_layer, inputs=3))
def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):  # noqa: A002
    """The negative log-likelihood of ``target`` under normal distributions of mean
    ``input`` and variance ``var``: (log(var) + (input - target)**2 / var) / 2, plus
    log(2 pi) / 2 where ``full``. var is clamped below at ``eps`` for stability, the
    clamp passing its gradient through unchanged (as PyTorch's, done without grad)."""
    op = "gaussian_nll_loss"
    for name, t in (("input", input), ("target", target)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    var = _variances(input, var, op)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got "
                         f"{reduction!r}")
    x, target, var = cast_inputs("loss", input, target, var)
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (x - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2.0 * math.pi)
    return _reduce(loss, reduction, op)


def _same_ranks(op, names, tensors):
    if len({t.ndim for t in tensors}) > 1:
        shapes = ", ".join(f"{n} {tuple(t.shape)}" for n, t in zip(names, tensors))
        raise OpError(f"{op}: the inputs must have one number of dimensions, got {shapes}; "
                      f"reshape or unsqueeze them to match")


def _margin_ranking_loss_layer(margin=0.0, size_average=None, reduce=None,
                               reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction, "MarginRankingLoss")
    _check_reduction(reduction, "MarginRankingLoss")
    return {"margin": margin, "reduction": reduction}


@fused(None, arity=3, dtypes="any",
       layer=Layer("MarginRankingLoss", _margin_ranking_loss_layer, inputs=3,
                   fixed={"size_average": None, "reduce": None}))
def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), elementwise with broadcasting:
    target 1 asks input1 to rank above input2 by ``margin``, -1 below."""
    reduction = _legacy_reduction(size_average, reduce, reduction, "margin_ranking_loss")
    _check_reduction(reduction, "margin_ranking_loss")
    _same_ranks("margin_ranking_loss", ("input1", "input2", "target"),
                (input1, input2, target))
    x1, x2, target = cast_inputs("loss", input1, input2, target)
    loss = (-target * (x1 - x2) + margin).clamp(min=0)
    return _reduce(loss, reduction, "margin_ranking_loss")


def _triplet_margin_loss_layer(margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None,
                               reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction, "TripletMarginLoss")
    _check_reduction(reduction, "TripletMarginLoss")
    if margin <= 0:
        raise ValueError(f"TripletMarginLoss: margin must be > 0, got {margin}")
    return {"margin": margin, "p": p, "eps": eps, "swap": swap, "reduction": reduction}


@fused(None, arity=3,
       layer=Layer("TripletMarginLoss", _triplet_margin_loss_layer, inputs=3,
                   fixed={"size_average": None, "reduce": None}))
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(d(anchor, positive) - d(anchor, negative) + margin, 0), d the
    pairwise_distance over the last dim with ``p`` and ``eps``; ``swap`` takes the
    smaller of d(anchor, negative) and d(positive, negative) (Balntas et al.)."""
    op = "triplet_margin_loss"
    reduction = _legacy_reduction(size_average, reduce, reduction, op)
    _check_reduction(reduction, op)
    _same_ranks(op, ("anchor", "positive", "negative"), (anchor, positive, negative))
    if margin <= 0:
        raise ValueError(f"{op}: margin must be > 0, got {margin}")
    from .functional import pairwise_distance  # (functional imports this module)

    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((d_pos - d_neg + margin).clamp(min=0), reduction, op)


__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss",
           "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits",
           "kl_div", "poisson_nll_loss", "gaussian_nll_loss", "margin_ranking_loss",
           "triplet_margin_loss"]
