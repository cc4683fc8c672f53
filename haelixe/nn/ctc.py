"""F.ctc_loss and its layer, nn.CTCLoss, declared together: the connectionist temporal
classification loss of PyTorch, its checks and its gradient. The recursion runs on the
host in float64 (ctc_recursion.py) and the losses come back on the input's device; the
reductions are recorded ops."""

from __future__ import annotations

import numpy as np

from .. import creation
from ..amp import cast_inputs
from ..autograd.function import Function
from ..errors import OpError, OpIndexError, OpTypeError
from ..ops.linalg_host import host, on_device
from ..ops.registry import Layer, fused
from ..tensor import Tensor
from . import ctc_recursion as rec

_OP = "ctc_loss"
_REDUCTIONS = ("mean", "sum", "none")


class CTCLossFn(Function):
    """Each sample's negative log-likelihood (N,), from (T, N, C) log-probabilities; its
    backward is PyTorch's alpha-beta gradient, which reads the forward's alpha."""

    label = "CtcLoss"
    twice_differentiable = False  # (PyTorch's has no derivative of its own either)

    @staticmethod
    def forward(ctx, log_probs, labels, il, tl, blank, zero_infinity):
        lp = host(log_probs).astype(np.float64)
        x = rec.Extended(labels, tl, blank)
        e = rec.emissions(lp, x.ext)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            a = rec.alpha(e, x)
            nll = -rec.log_likelihood(a, il, tl)
        ctx.save_for_backward(log_probs)
        ctx.host = (lp, e, a, x, il, tl, nll, zero_infinity)
        loss = np.where(nll == np.inf, 0.0, nll) if zero_infinity else nll
        return log_probs._be.from_numpy(np.ascontiguousarray(loss.astype(log_probs.dtype.np)))

    @staticmethod
    def backward(ctx, g):
        (log_probs,) = ctx.saved_tensors
        lp, e, a, x, il, tl, nll, zero_infinity = ctx.host
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            grad = rec.gradient(lp, e, a, x, il, tl, nll)
        if zero_infinity:  # (an infinite loss and its gradient are zeroed)
            grad[:, nll == np.inf] = 0.0
        grad = on_device(grad.astype(log_probs.dtype.np), log_probs)
        return grad * g.reshape(1, -1, 1), None, None, None, None, None


def _lengths(name, value, batch):
    """A tensor of lengths, or a list or tuple of ints, as an int64 array of ``batch``
    entries (a tensor of any shape is read flat, as PyTorch reads it)."""
    if isinstance(value, Tensor):
        if value.dtype.is_floating_point or value.dtype.name == "bool":
            raise OpTypeError(f"{_OP}: {name} must be integral, got a {value.dtype.name} "
                              f"tensor; convert it with .long()")
        out = host(value).reshape(-1).astype(np.int64)
    else:
        if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in value):
            raise TypeError(f"{_OP}: {name} must hold ints, got {list(value)!r}")
        out = np.array(value, np.int64).reshape(-1)
    if len(out) != batch:
        raise OpError(f"{_OP}: {name} must be of size batch_size ({batch}: one length per "
                      f"sample), got {len(out)} lengths")
    return out


def _check_kinds(log_probs, targets, input_lengths, target_lengths, blank, reduction):
    for name, t in (("log_probs", log_probs), ("targets", targets)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{_OP}: {name} must be a tensor, got {type(t).__name__}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{_OP}: reduction must be 'mean', 'sum' or 'none', got "
                         f"{reduction!r}")
    kinds = [isinstance(v, Tensor) for v in (input_lengths, target_lengths)]
    for name, v in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if not isinstance(v, (Tensor, list, tuple)):
            raise TypeError(f"{_OP}: {name} must be a tensor or a list or tuple of ints, "
                            f"got {type(v).__name__}")
    if kinds[0] != kinds[1]:
        raise TypeError(f"{_OP}: input_lengths and target_lengths must both be tensors or "
                        f"both be lists or tuples of ints (as in PyTorch), got a "
                        f"{type(input_lengths).__name__} and a "
                        f"{type(target_lengths).__name__}")
    if isinstance(blank, bool) or not isinstance(blank, (int, np.integer)):
        raise TypeError(f"{_OP}: blank must be an int (the blank's class), got {blank!r}")


def _check_log_probs(log_probs):
    if log_probs.dtype.name not in ("float32", "float64"):
        raise OpTypeError(f"{_OP}: log_probs must be float32 or float64 (as PyTorch's CPU "
                          f"kernel), got {log_probs.dtype.name}; convert with .float()")
    if log_probs.ndim not in (2, 3):
        raise OpError(f"{_OP}: log_probs must be (T, N, C), or (T, C) unbatched, got a "
                      f"{log_probs.ndim}-D tensor of shape {log_probs.shape}")
    if log_probs.numel() == 0:
        raise OpError(f"{_OP}: log_probs tensor must not be empty (shape "
                      f"{log_probs.shape})")


def _labels(targets, tl, classes):
    """The targets as a padded (N, S) int64 array (S the longest target), from PyTorch's
    two layouts: (N, S') padded, or 1-D, every target one after the other."""
    n = len(tl)
    longest = int(tl.max(initial=0))
    if targets.ndim not in (1, 2):
        raise OpError(f"{_OP}: targets must be (N, S) padded or 1-D concatenated "
                      f"(sum(target_lengths),), got shape {targets.shape}")
    values = host(targets).astype(np.int64) if targets.numel() else \
        np.zeros(targets.shape, np.int64)
    used = np.arange(longest)[None, :] < tl[:, None]
    if targets.ndim == 2:
        if targets.shape[0] != n:
            raise OpError(f"{_OP}: padded targets of shape {targets.shape} must have one "
                          f"row per sample ({n})")
        if targets.shape[1] < longest:
            raise OpError(f"{_OP}: padded targets of shape {targets.shape} are shorter "
                          f"than the longest target length {longest}")
        picked = values[:, :longest]
    else:
        if targets.shape[0] != int(tl.sum()):
            raise OpError(f"{_OP}: concatenated targets must have sum(target_lengths) = "
                          f"{int(tl.sum())} entries, got {targets.shape[0]}")
        starts = np.concatenate([[0], np.cumsum(tl)[:-1]]).astype(np.int64)
        # (positions past a target's end read the first entry: they are not used)
        picked = values[np.where(used, starts[:, None] + np.arange(longest)[None, :], 0)]
    bad = used & ((picked < 0) | (picked >= classes))
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise OpIndexError(f"{_OP}: target {j} of sample {i} is {picked[i, j]}, outside "
                           f"the {classes} classes of log_probs [0, {classes})")
    return np.where(used, picked, 0)


def _ctc_loss_layer(blank=0, reduction="mean", zero_infinity=False):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"CTCLoss: reduction must be 'mean', 'sum' or 'none', got "
                         f"{reduction!r}")
    return {"blank": blank, "reduction": reduction, "zero_infinity": zero_infinity}


@fused(CTCLossFn, arity=4, layer=Layer("CTCLoss", _ctc_loss_layer, inputs=4))
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """The connectionist temporal classification loss: the negative log of the total
    probability of every alignment of each target to its input, under the
    log-probabilities ``log_probs`` (T, N, C), or (T, C) unbatched, with ``blank`` the
    class between labels (a repeated label needs one between its copies). ``targets``
    are (N, S) padded or 1-D concatenated; the lengths are tensors, or lists or tuples
    of ints, one per sample. 'mean' divides each loss by its target length (at least
    1), then takes the batch mean. ``zero_infinity`` zeroes infinite losses (targets no
    alignment fits) and their gradients. The gradient is PyTorch's: exp(log_probs)
    minus the alignments' posterior of each class, which is the exact gradient of
    logits through log_softmax."""
    _check_kinds(log_probs, targets, input_lengths, target_lengths, blank, reduction)
    (log_probs,) = cast_inputs("loss", log_probs)  # (under autocast: float32)
    _check_log_probs(log_probs)
    batched = log_probs.ndim == 3
    lp = log_probs if batched else log_probs.unsqueeze(1)
    steps, n, classes = lp.shape
    if not 0 <= blank < classes:
        raise OpError(f"{_OP}: blank must be in label range [0, {classes}), got {blank}")
    il = _lengths("input_lengths", input_lengths, n)
    tl = _lengths("target_lengths", target_lengths, n)
    if il.min() < 0 or il.max() > steps:
        raise OpError(f"{_OP}: input_lengths must lie in [0, {steps}] (T, log_probs' "
                      f"first dim), got {il.tolist()}")
    if tl.min() < 0:
        raise OpError(f"{_OP}: target_lengths must be >= 0, got {tl.tolist()}")
    labels = _labels(targets, tl, classes)
    loss = CTCLossFn.apply(lp, labels, il, tl, int(blank), bool(zero_infinity))
    if reduction == "mean":
        per = creation.tensor(np.maximum(tl, 1), dtype=loss.dtype, device=loss.device)
        return (loss / per).mean()
    if reduction == "sum":
        return loss.sum()
    return loss if batched else loss.squeeze(0)


__all__ = ["ctc_loss"]
