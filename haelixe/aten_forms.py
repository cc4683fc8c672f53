"""The top-level forms PyTorch gives some torch.nn.functional ops (torch.layer_norm,
torch.dropout, torch.kl_div, torch.max_pool2d...): its ATen signatures, whose
arguments differ from F's (positional flags, reductions as ints, cuDNN switches), each
calling the F function that does the work. nn.functional is imported at the first call,
so ``import haelixe`` stays light."""

from __future__ import annotations

import warnings

from .errors import OpError

#: ATen's reduction enum (torch.kl_div(x, t, 2): a sum). Its schemas give 1 (mean) as
#: the default, but PyTorch's Python binding reads that default as 0: torch.kl_div(x, t)
#: is one loss per element there, and so it is here
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _F():
    from .nn import functional
    return functional


def _reduction(op, reduction):
    if isinstance(reduction, bool) or reduction not in _REDUCTIONS:
        raise TypeError(f"torch.{op}: reduction is ATen's int here (0 none, 1 mean, 2 sum), "
                        f"got {reduction!r}; F.{op} takes the names")
    return _REDUCTIONS[reduction]


def _no_sparse(op, scale_grad_by_freq=False, sparse=False):
    if scale_grad_by_freq or sparse:
        raise OpError(f"torch.{op}: scale_grad_by_freq and sparse gradients are not part of "
                      f"Haelixe; leave them False")


# -- normalization -----------------------------------------------------------------------------
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05,  # noqa: A002
               cudnn_enable=True):
    """F.layer_norm (``cudnn_enable`` is a switch for CUDA's kernels: ignored)."""
    return _F().layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05,  # noqa: A002
               cudnn_enabled=True):
    """F.group_norm (``cudnn_enabled`` ignored)."""
    return _F().group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,  # noqa: A002
                  momentum, eps, cudnn_enabled):
    """F.instance_norm with ATen's order: the affine weight and bias before the running
    statistics, every argument required."""
    return _F().instance_norm(input, running_mean, running_var, weight, bias,
                              use_input_stats, momentum, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum,  # noqa: A002
               eps, cudnn_enabled):
    """F.batch_norm with ATen's order: the affine weight and bias before the running
    statistics, every argument required."""
    return _F().batch_norm(input, running_mean, running_var, weight, bias, training,
                           momentum, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):  # noqa: A002
    """F.rms_norm."""
    return _F().rms_norm(input, normalized_shape, weight, eps)


# -- dropout: (input, p, train), every argument required --------------------------------------
def dropout(input, p, train):  # noqa: A002
    """F.dropout(input, p, train)."""
    return _F().dropout(input, p, train)


def dropout_(input, p, train):  # noqa: A002
    """F.dropout(input, p, train, inplace=True)."""
    return _F().dropout(input, p, train, True)


def alpha_dropout(input, p, train):  # noqa: A002
    """F.alpha_dropout(input, p, train)."""
    return _F().alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):  # noqa: A002
    """F.alpha_dropout(input, p, train, inplace=True)."""
    return _F().alpha_dropout(input, p, train, True)


def feature_alpha_dropout(input, p, train):  # noqa: A002
    """F.feature_alpha_dropout(input, p, train)."""
    return _F().feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p, train):  # noqa: A002
    """F.feature_alpha_dropout(input, p, train, inplace=True)."""
    return _F().feature_alpha_dropout(input, p, train, True)


def _feature_dropout(op, input, p, train, inplace):  # noqa: A002
    if input.ndim < 2:
        raise OpError(f"torch.{op}: drops whole channels of (N, C, *): expected at least 2 "
                      f"dims, got shape {tuple(input.shape)}")
    from .nn.functional import _channel_dropout
    if not 0.0 <= p <= 1.0:
        raise OpError(f"{op}: p must be in [0, 1], got {p}")
    return _channel_dropout(input, p, train, inplace, input.ndim - 2)


def feature_dropout(input, p, train):  # noqa: A002
    """Zero whole channels of (N, C, *) with probability ``p``, scaling the rest by
    1 / (1 - p): one draw per (sample, channel), whatever the spatial dims."""
    return _feature_dropout("feature_dropout", input, p, train, False)


def feature_dropout_(input, p, train):  # noqa: A002
    """feature_dropout, written into the input."""
    return _feature_dropout("feature_dropout_", input, p, train, True)


def rrelu(input, lower=0.125, upper=1.0 / 3, training=False, generator=None):  # noqa: A002
    """F.rrelu (Haelixe draws from its global generator: ``generator`` must be None)."""
    _no_generator("rrelu", generator)
    return _F().rrelu(input, lower, upper, training)


def rrelu_(input, lower=0.125, upper=1.0 / 3, training=False, generator=None):  # noqa: A002
    """F.rrelu_."""
    _no_generator("rrelu_", generator)
    return _F().rrelu_(input, lower, upper, training)


def _no_generator(op, generator):
    if generator is not None:
        raise OpError(f"torch.{op}: draws from the global generator; seed it with "
                      f"hx.manual_seed(...) and pass generator=None")


# -- embeddings --------------------------------------------------------------------------------
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """F.embedding with ATen's order (the weight first); a negative ``padding_idx`` is
    none (F's -1 would be the last row)."""
    _no_sparse("embedding", scale_grad_by_freq, sparse)
    return _F().embedding(indices, weight, padding_idx if padding_idx >= 0 else None)


# -- losses: reductions as ATen's ints ---------------------------------------------------------
def kl_div(input, target, reduction=0, *, log_target=False):  # noqa: A002
    """F.kl_div; reduction 1 is the mean over every element (F's 'mean', without its
    warning: ATen's form has no batchmean), 0 (the default) none."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return _F().kl_div(input, target, reduction=_reduction("kl_div", reduction),
                           log_target=log_target)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,  # noqa: A002
                                     reduction=0):
    """F.binary_cross_entropy_with_logits, pos_weight before the reduction."""
    return _F().binary_cross_entropy_with_logits(
        input, target, weight, reduction=_reduction("binary_cross_entropy_with_logits",
                                                    reduction), pos_weight=pos_weight)


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):  # noqa: A002
    """F.hinge_embedding_loss."""
    return _F().hinge_embedding_loss(input, target, margin,
                                     reduction=_reduction("hinge_embedding_loss", reduction))


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    """F.margin_ranking_loss."""
    return _F().margin_ranking_loss(input1, input2, target, margin,
                                    reduction=_reduction("margin_ranking_loss", reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    """F.cosine_embedding_loss."""
    return _F().cosine_embedding_loss(input1, input2, target, margin,
                                      reduction=_reduction("cosine_embedding_loss",
                                                           reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-06, swap=False,
                        reduction=0):
    """F.triplet_margin_loss."""
    return _F().triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                    reduction=_reduction("triplet_margin_loss", reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):  # noqa: A002
    """F.poisson_nll_loss, every argument required."""
    return _F().poisson_nll_loss(input, target, log_input, full, eps=eps,
                                 reduction=_reduction("poisson_nll_loss", reduction))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0,
             zero_infinity=False):
    """F.ctc_loss."""
    return _F().ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                         _reduction("ctc_loss", reduction), zero_infinity)


# -- pools and padding -------------------------------------------------------------------------
def _stride(stride):
    """ATen's empty stride: the kernel size (F's None)."""
    return None if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else stride


def max_pool1d(input, kernel_size, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):  # noqa: A002
    """F.max_pool1d, its values alone."""
    return _F().max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=(0,), dilation=(1,),  # noqa: A002
                            ceil_mode=False):
    """F.max_pool1d with its indices: (values, indices)."""
    return _F().max_pool1d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode,
                           True)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):  # noqa: A002
    """F.max_pool2d, its values alone."""
    return _F().max_pool2d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):  # noqa: A002
    """F.max_pool3d, its values alone."""
    return _F().max_pool3d(input, kernel_size, _stride(stride), padding, dilation, ceil_mode)


def adaptive_max_pool1d(input, output_size):  # noqa: A002
    """F.adaptive_max_pool1d with its indices, as ATen's returns them: (values, indices)."""
    return _F().adaptive_max_pool1d(input, output_size, True)


def constant_pad_nd(input, pad, value=0):  # noqa: A002
    """F.pad(input, pad, value=value) (negative pads crop)."""
    return _F().pad(input, pad, value=value)


# -- convolutions ------------------------------------------------------------------------------
def convolution(input, weight, bias, stride, padding, dilation, transposed,  # noqa: A002
                output_padding, groups):
    """The convolution of the weight's rank (conv1d/2d/3d, or their transposed forms),
    every argument required: the form F's convolutions call."""
    F = _F()
    d = weight.ndim - 2
    if d not in (1, 2, 3):
        raise OpError(f"torch.convolution: a weight of shape {tuple(weight.shape)} is not "
                      f"that of a 1, 2 or 3-d convolution (out, in / groups, *kernel)")
    if transposed:
        form = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[d - 1]
        return form(input, weight, bias, stride, padding, output_padding, groups, dilation)
    if any(output_padding if not isinstance(output_padding, int) else (output_padding,)):
        raise OpError("torch.convolution: output_padding is for transposed convolutions; "
                      "give zeros when transposed is False")
    form = (F.conv1d, F.conv2d, F.conv3d)[d - 1]
    return form(input, weight, bias, stride, padding, dilation, groups)


def conv_tbc(input, weight, bias, pad=0):  # noqa: A002
    """conv_tbc(input, weight, bias, pad=0) -> Tensor

    A 1-d convolution over (time, batch, channels): input (T, B, C_in), weight
    (kernel, C_in, C_out), bias (C_out,), ``pad`` steps of zeros at each end of time;
    the result is (T + 2 pad - kernel + 1, B, C_out)."""
    if input.ndim != 3 or weight.ndim != 3 or bias.ndim != 1:
        raise OpError(f"conv_tbc: expected a 3-D input (T, B, C_in), a 3-D weight (kernel, "
                      f"C_in, C_out) and a 1-D bias, got {tuple(input.shape)}, "
                      f"{tuple(weight.shape)} and {tuple(bias.shape)}")
    if input.shape[2] != weight.shape[1] or bias.shape[0] != weight.shape[2]:
        raise OpError(f"conv_tbc: input channels {input.shape[2]} and bias {bias.shape[0]} "
                      f"must match the weight (kernel, C_in, C_out) {tuple(weight.shape)}")
    out = _F().conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, 1, pad)
    return out.permute(2, 0, 1)


__all__ = ["layer_norm", "group_norm", "instance_norm", "batch_norm", "rms_norm", "dropout",
           "dropout_", "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout",
           "feature_alpha_dropout_", "feature_dropout", "feature_dropout_", "rrelu", "rrelu_",
           "embedding", "kl_div", "binary_cross_entropy_with_logits", "hinge_embedding_loss",
           "margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss",
           "poisson_nll_loss", "ctc_loss", "max_pool1d", "max_pool1d_with_indices",
           "max_pool2d", "max_pool3d", "adaptive_max_pool1d", "constant_pad_nd",
           "convolution", "conv_tbc"]
