"""Functional forms of the layers, activations and losses (PyTorch's
torch.nn.functional names and signatures)."""

from __future__ import annotations

import math
import warnings

from .. import creation
from ..amp import autocast_dtype, cast_inputs
from ..autograd.mode import no_grad
from ..dtype import float32, float64, int32, int64
from ..errors import OpError
from ..layout import normalize_dim
from ..ops.bilinear import bilinear
from ..ops.composite import prelu
from ..ops.conv import (
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    fold,
    unfold,
)
from ..ops.elementwise import INPLACE_ACTIVATIONS, threshold_
from ..ops.elementwise import gelu as _gelu
from ..ops.fractional_pooling import fractional_max_pool2d, fractional_max_pool3d
from ..ops.fused import AttentionFn, LayerNormFn, LinearFn, RMSNormFn, RoPEFn
from ..ops.indexing import take_rows, where
from ..ops.linalg import matmul
from ..ops.pooling import (
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    adaptive_max_pool3d,
    avg_pool1d,
    avg_pool2d,
    avg_pool3d,
    max_pool1d,
    max_pool2d,
    max_pool3d,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
)
from ..ops.reduce import LogSoftmax as LogSoftmaxFn
from ..ops.reduce import Softmax as SoftmaxFn
from ..ops.reduce import cosine_similarity, pairwise_distance
from ..ops.registry import OPS, Layer, functional_form, fused
from ..ops.resample import interpolate
from ..ops.statistics import pdist
from ..ops.views import channel_shuffle, pixel_shuffle, pixel_unshuffle
from ..tensor import Tensor
from .ctc import ctc_loss
from .embedding_bag import embedding_bag
from .functional_aliases import (
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d_with_indices,
    conv_tbc,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d_with_indices,
    gumbel_softmax,
    max_pool1d_with_indices,
    max_pool2d_with_indices,
    max_pool3d_with_indices,
    upsample,
    upsample_bilinear,
    upsample_nearest,
)
from .grid_sampling import affine_grid, grid_sample
from .local_response import local_response_norm
from .losses import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    gaussian_nll_loss,
    huber_loss,
    kl_div,
    l1_loss,
    margin_ranking_loss,
    mse_loss,
    nll_loss,
    poisson_nll_loss,
    smooth_l1_loss,
    triplet_margin_loss,
)
from .lp_pooling import lp_pool1d, lp_pool2d, lp_pool3d
from .margin_losses import (
    _log_sigmoid,
    cosine_embedding_loss,
    hinge_embedding_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    soft_margin_loss,
    triplet_margin_with_distance_loss,
)
from .normalization import batch_norm, group_norm, instance_norm
from .padding import pad


def _linear_layer(in_features, out_features, bias=True, device=None, dtype=None, *,
                  activation=None):
    """nn.Linear's state: initialised as PyTorch does (kaiming-uniform with a=sqrt(5):
    bound 1/sqrt(in_features)); ``activation`` is Haelixe's fused GELU (F.linear's)."""
    bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
    on = {"device": device, "dtype": dtype}
    with no_grad():
        weight = creation.empty(out_features, in_features, **on).uniform_(-bound, bound)
        bias = creation.empty(out_features, **on).uniform_(-bound, bound) if bias else None
    return {"in_features": in_features, "out_features": out_features,
            "activation": activation, "weight": weight, "bias": bias}


def _linear_shown(layer) -> str:
    act = f", activation={layer.activation!r}" if layer.activation else ""
    return (f"in_features={layer.in_features}, out_features={layer.out_features}, "
            f"bias={layer.bias is not None}{act}")


@fused(LinearFn, arity=3, extra=("activation",),
       layer=Layer("Linear", _linear_layer, parameters=("weight", "bias"),
                   shown=_linear_shown))
def linear(input, weight, bias=None, activation=None):  # noqa: A002 (PyTorch's name)
    """input @ weight.T + bias (weight is (out, in)) over any leading dims, optionally
    followed by GELU (``activation='gelu'`` or ``'gelu_tanh'``, Haelixe's own), in one
    fused kernel forward and backward."""
    x = input
    if x.ndim == 0 or weight.ndim not in (1, 2):
        raise OpError(f"linear: the input needs at least 1 dim and the weight 2, (out, in), "
                      f"or 1; got shapes {x.shape} and {weight.shape}")
    if weight.ndim == 1:  # (PyTorch's vector weight: input @ weight, one value per row)
        if bias is not None or activation is not None:
            raise OpError(f"linear: a 1-D weight {weight.shape} takes no bias and no "
                          f"activation (as in PyTorch); give it as (1, {weight.shape[0]})")
        return matmul(x, weight)
    if x.shape[-1] != weight.shape[1]:
        raise OpError(f"linear: input of shape {x.shape} has {x.shape[-1]} features but "
                      f"the weight {weight.shape} expects {weight.shape[1]}")
    if bias is not None and bias.shape not in ((weight.shape[0],), (1,), ()):
        raise OpError(f"linear: a bias of shape {bias.shape} does not fit the weight's "
                      f"{weight.shape[0]} output features; give it shape "
                      f"({weight.shape[0]},)")
    if activation not in (None, "gelu", "gelu_tanh"):
        raise OpError(f"linear: activation must be None, 'gelu' or 'gelu_tanh', got "
                      f"{activation!r}")
    low = autocast_dtype()
    if low is not None and x.dtype is float32 and weight.dtype is low:
        # a 16-bit weight already: the kernel reads the float32 input rounded to its
        # dtype (autocast's cast, and the cast of its gradient back, without passes or
        # nodes of their own; the values are the same)
        (bias,) = cast_inputs("linear", bias)
        _same("linear", x, weight, bias, float_params=True)
    else:
        x, weight, bias = cast_inputs("linear", x, weight, bias)
        _same("linear", x, weight, bias, ints=activation is None)
    return LinearFn.apply(x, weight, bias, activation)


def _same(op, *ts, ints=False, float_params=False):
    """One device and one dtype for every tensor of a fused op: floating (and integer
    where ``ints``, as PyTorch's linear takes them). With ``float_params`` the tensors
    after the first (a norm's weight and bias) may be of any float dtype: the kernels
    read them as they are and give their gradients in their own dtypes."""
    ts = [t for t in ts if t is not None]
    ref = ts[0]
    if not ref.dtype.is_floating_point and not (ints and ref.dtype.kind == "int"):
        raise TypeError(f"{op}: not defined for {ref.dtype.name} tensors (as in PyTorch); "
                        f"convert with .float() first")
    for t in ts[1:]:
        if t.device is not ref.device:
            raise RuntimeError(f"{op}: tensors on {ref.device.type} and {t.device.type}; "
                               f"move the module or the input with .to(...)")
        if float_params and t.dtype.is_floating_point:
            continue
        if t.dtype is not ref.dtype:
            raise TypeError(f"{op}: dtypes {ref.dtype.name} and {t.dtype.name} differ; use "
                            f"hx.autocast or cast the input with .to(dtype)")


def _trailing_shape(op, call, input, normalized_shape, **params):
    """normalized_shape as a tuple of ints, checked to be the input's trailing dims and
    the shape of each given parameter (weight, bias)."""
    if isinstance(normalized_shape, Tensor):
        raise TypeError(f"{op}{call}: normalized_shape must be an int or a tuple of ints "
                        f"(e.g. x.shape[-1:]), got a tensor; pass the weight as weight=")
    shape = (int(normalized_shape),) if isinstance(normalized_shape, int) else \
        tuple(int(n) for n in normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or input.shape[input.ndim - k:] != shape:
        raise OpError(f"{op}: normalized_shape={shape} must be the trailing dims "
                      f"of the input, got an input of shape {input.shape}")
    for name, t in params.items():
        if t is not None and t.shape != shape:
            raise OpError(f"{op}: {name} has shape {t.shape}, expected {shape}")
    return shape


def _flat_trailing(x, k):
    """x with its last k dims flattened into one (the fused kernels normalize the last)."""
    return x.reshape(*x.shape[:x.ndim - k], math.prod(x.shape[x.ndim - k:]))


def _as_shape(normalized_shape) -> tuple:
    return (normalized_shape,) if isinstance(normalized_shape, int) else \
        tuple(normalized_shape)


def _rms_norm_layer(normalized_shape, eps=None, elementwise_affine=True, device=None,
                    dtype=None):
    """nn.RMSNorm's state: a learned scale (ones) unless ``elementwise_affine=False``."""
    shape = _as_shape(normalized_shape)
    return {"normalized_shape": shape, "eps": eps, "elementwise_affine": elementwise_affine,
            "weight": creation.ones(*shape, dtype=dtype, device=device)
            if elementwise_affine else None}


_NORM_SHOWN = "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}"


@fused(RMSNormFn, arity=2,
       layer=Layer("RMSNorm", _rms_norm_layer, parameters=("weight",), shown=_NORM_SHOWN))
def rms_norm(input, normalized_shape, weight=None, eps=None):  # noqa: A002 (PyTorch's name)
    """Divide by the root-mean-square over the trailing ``normalized_shape`` dims (an int
    counts as one), then scale by ``weight`` (of shape normalized_shape): one fused
    kernel over the flattened trailing dims. eps=None is the machine epsilon of the
    dtype the kernel computes in: float64's for float64, float32's otherwise (PyTorch
    takes its opmath type's, so float16 and bfloat16 get float32's too)."""
    shape = _trailing_shape("rms_norm", "(input, normalized_shape, weight, eps)", input,
                            normalized_shape, weight=weight)
    (x,) = cast_inputs("norm", input)
    # (a weight of another float dtype is read as it is, as PyTorch's rms_norm takes it)
    _same("rms_norm", x, weight, float_params=True)
    if eps is None:
        eps = 2.0 ** -52 if x.dtype is float64 else 2.0 ** -23
    if len(shape) == 1:
        return RMSNormFn.apply(x, weight, eps)
    w = None if weight is None else weight.reshape(math.prod(shape))
    return RMSNormFn.apply(_flat_trailing(x, len(shape)), w, eps).reshape(x.shape)


def _layer_norm_layer(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                      device=None, dtype=None):
    """nn.LayerNorm's state: a learned scale (ones) and shift (zeros) unless
    ``elementwise_affine=False``; ``bias=False`` keeps the scale only."""
    shape = _as_shape(normalized_shape)
    on = {"dtype": dtype, "device": device}
    return {"normalized_shape": shape, "eps": eps, "elementwise_affine": elementwise_affine,
            "weight": creation.ones(*shape, **on) if elementwise_affine else None,
            "bias": creation.zeros(*shape, **on) if elementwise_affine and bias else None}


def _layer_norm_shown(layer) -> str:
    return _NORM_SHOWN.format(normalized_shape=layer.normalized_shape, eps=layer.eps,
                              elementwise_affine=layer.elementwise_affine) + \
        f", bias={layer.bias is not None}"


@fused(LayerNormFn, arity=3,
       layer=Layer("LayerNorm", _layer_norm_layer, parameters=("weight", "bias"),
                   shown=_layer_norm_shown))
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Normalise over the last len(normalized_shape) dims (an int counts as one), then
    scale by ``weight`` and shift by ``bias`` (both of shape normalized_shape): one
    fused kernel over the flattened trailing dims."""
    shape = _trailing_shape("layer_norm", "(input, normalized_shape, weight, bias, eps)",
                            input, normalized_shape, weight=weight, bias=bias)
    k = len(shape)
    (x,) = cast_inputs("norm", input)
    # under autocast the weight and bias are read as they are (a cast to float32 would be
    # exact, and one more pass); outside it PyTorch refuses mixed dtypes, and so do we
    _same("layer_norm", x, weight, bias, float_params=autocast_dtype() is not None)
    if k == 1:
        return LayerNormFn.apply(x, weight, bias, eps)
    flat = [None if t is None else t.reshape(math.prod(shape)) for t in (weight, bias)]
    return LayerNormFn.apply(_flat_trailing(x, k), flat[0], flat[1], eps).reshape(x.shape)


def _gelu_layer(approximate="none"):
    """approximate: 'none' (erf) or 'tanh' (PyTorch's tanh approximation)."""
    return {"approximate": approximate}


# (no Function of its own: it applies the erf or the tanh form, elementwise ops)
@fused(None, arity=1, dtypes="float_only",
       layer=Layer("GELU", _gelu_layer, shown="approximate={approximate!r}"))
def gelu(input, approximate="none"):  # noqa: A002 (PyTorch's name)
    """input * Phi(input), Phi the standard normal CDF: exact (erf), or PyTorch's tanh
    approximation with ``approximate='tanh'``."""
    return _gelu(input, approximate)


def _inplace_layer(inplace=False):
    """inplace: write the result into the input."""
    return {"inplace": inplace}


def _inplace_shown(layer) -> str:  # (as PyTorch's: shown only where it is set)
    return "inplace=True" if layer.inplace else ""


# (no Function of its own: hardtanh's elementwise op over [0, 6])
@fused(None, arity=1, dtypes="promote",
       layer=Layer("ReLU6", _inplace_layer, shown=_inplace_shown))
def relu6(input, inplace=False):  # noqa: A002 (PyTorch's name)
    """min(max(input, 0), 6): hardtanh over [0, 6]."""
    return input.hardtanh_(0.0, 6.0) if inplace else input.hardtanh(0.0, 6.0)


def _glu_layer(dim=-1):
    """dim: the dim to split in halves."""
    return {"dim": dim}


# (no Function of its own: two halves of the input, a sigmoid and a product)
@fused(None, arity=1, layer=Layer("GLU", _glu_layer, shown="dim={dim}"))
def glu(input, dim=-1):  # noqa: A002 (PyTorch's name)
    """The gated linear unit: the input split in halves a and b along ``dim`` (the
    first half a), then a * sigmoid(b)."""
    if input.ndim == 0:
        raise OpError("glu: a 0-d input has no dim to split in halves (as in PyTorch); "
                      "give it at least one dim of even size")
    d = normalize_dim(dim, input.ndim, "glu")
    n = input.shape[d]
    if n % 2:
        raise OpError(f"glu: dim {dim} of the input {input.shape} has size {n}, which "
                      f"does not split in halves; it must be even")
    if not input.dtype.is_floating_point:
        raise TypeError(f"glu: not defined for {input.dtype.name} tensors (as in "
                        f"PyTorch); convert with .float() first")
    return input.narrow(d, 0, n // 2) * input.narrow(d, n // 2, n // 2).sigmoid()


def _logsigmoid_layer(*args, **kwargs):
    """No options (PyTorch's constructor is Module's, which takes none)."""
    if args or kwargs:
        raise TypeError("LogSigmoid() takes no arguments")
    return {}


def _of_input(form):
    """The forward of a layer without options: ``form`` of the input alone."""
    def forward(self, input):  # noqa: A002 (PyTorch's name)
        return form(input)
    return forward


# (no Function of its own: each side's stable form, picked with where)
@fused(None, arity=1, layer=Layer("LogSigmoid", _logsigmoid_layer, forward=_of_input))
def logsigmoid(input):  # noqa: A002 (PyTorch's name)
    """log(sigmoid(x)), finite for every x: -log1p(exp(-x)) for x >= 0 and
    x - log1p(exp(x)) below (its slope at 0 is 1/2, as PyTorch's)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"logsigmoid: input must be a tensor, got {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"logsigmoid: not defined for {input.dtype.name} tensors (as in "
                        f"PyTorch); convert with .float() first")
    return _log_sigmoid(input)


def _dim_layer(dim=None):
    """dim: the dim to normalise over (forward refuses a layer made without one)."""
    return {"dim": dim}


def _over_its_dim(form):
    """The layer's forward: ``form`` over the layer's dim. Without one PyTorch picks a
    dim by the input's rank and warns that this is deprecated; Haelixe asks for it."""
    def forward(self, input):  # noqa: A002 (PyTorch's name)
        if self.dim is None:
            raise ValueError(f"{type(self).__name__}: pass dim= (the dim to normalise "
                             f"over); for input of shape {input.shape} it is usually -1")
        return form(input, self.dim)
    return forward


def _dim_layer_of(name) -> Layer:
    return Layer(name, _dim_layer, shown="dim={dim}", forward=_over_its_dim)


def _softmax2d_layer(*args, **kwargs):
    """No options (PyTorch's constructor is Module's, which takes none)."""
    if args or kwargs:
        raise TypeError("Softmax2d() takes no arguments")
    return {}


def _over_channels(form):
    """Softmax2d's forward: ``form`` over the channels of (C, H, W) or (N, C, H, W)."""
    def forward(self, input):  # noqa: A002 (PyTorch's name)
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) "
                             f"input, got shape {tuple(input.shape)}")
        return form(input, -3)
    return forward


@fused(SoftmaxFn, arity=1, layer=(_dim_layer_of("Softmax"),
                                  Layer("Softmax2d", _softmax2d_layer, forward=_over_channels)))
def softmax(input, dim=-1, dtype=None):  # noqa: A002 (PyTorch's name)
    """exp(input) / sum(exp(input)) over ``dim`` (the last by default), in ``dtype``
    where one is given (the input converted first)."""
    x = input if dtype is None else input.to(dtype)
    return x.softmax(dim)


@fused(LogSoftmaxFn, arity=1, layer=_dim_layer_of("LogSoftmax"))
def log_softmax(input, dim=-1, dtype=None):  # noqa: A002 (PyTorch's name)
    """log(softmax(input)) over ``dim`` (the last by default), in ``dtype`` where one is
    given (the input converted first)."""
    x = input if dtype is None else input.to(dtype)
    return x.log_softmax(dim)


# (no Function of its own: softmax of the negated input)
@fused(None, arity=1, layer=_dim_layer_of("Softmin"))
def softmin(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002 (PyTorch's names)
    """softmax(-input) over ``dim`` (required: PyTorch's implicit choice of dim is
    deprecated there and refused here)."""
    if dim is None:
        raise OpError(f"softmin: pass dim= (the dim to normalise over); for input of shape "
                      f"{input.shape} it is usually -1")
    x = input if dtype is None else input.to(dtype)
    return (-x).softmax(dim)


def _dropout_layer(p=0.5, inplace=False):
    """p: the probability of zeroing an element (a channel, for Dropout2d), in [0, 1];
    inplace: write into the input."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
    return {"p": p, "inplace": inplace}


def _while_training(dropout):
    """The layer's forward: ``dropout`` with the layer's p and inplace, dropping only
    while the layer trains (``self.training``: its mode, set by train() and eval(), not
    an attribute its constructor makes)."""
    def forward(self, input):  # noqa: A002 (PyTorch's name)
        return dropout(input, self.p, self.training, self.inplace)
    return forward


def _dropout_layer_of(name) -> Layer:
    return Layer(name, _dropout_layer, shown="p={p}, inplace={inplace}",
                 forward=_while_training)


# (no Function of its own: a random mask, then a product)
@fused(None, arity=1, layer=_dropout_layer_of("Dropout"))
def dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002 (PyTorch's name)
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p)
    during training; the identity otherwise. ``inplace`` writes into ``input``."""
    if not 0.0 <= p <= 1.0:
        raise OpError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        keep = creation.zeros(*input.shape, dtype=input.dtype, device=input.device)
    else:
        keep = (creation.rand(*input.shape, device=input.device) >= p).to(input.dtype)
        keep = keep * (1.0 / (1.0 - p))
    return input.mul_(keep) if inplace else input * keep


# (no Function of its own: dropout's mask, one per channel, then a product)
@fused(None, arity=1, layer=_dropout_layer_of("Dropout2d"))
def dropout2d(input, p=0.5, training=True, inplace=False):  # noqa: A002 (PyTorch's name)
    """Zero whole channels with probability ``p`` (scaling the rest by 1 / (1 - p)):
    one draw per (sample, channel) of (N, C, H, W), per channel of an unbatched (C, H, W)."""
    if input.ndim not in (3, 4):
        raise ValueError(f"dropout2d: expected a 3-D (unbatched) or 4-D input, got shape "
                         f"{input.shape}")
    shape = input.shape[:input.ndim - 2] + (1, 1)
    keep = dropout(creation.ones(*shape, dtype=input.dtype, device=input.device), p,
                   training)
    if not training or p == 0.0:
        return input
    return input.mul_(keep) if inplace else input * keep


def _channel_dropout(input, p, training, inplace, spatial):
    """dropout of whole channels: one draw per (sample, channel) of an input with
    ``spatial`` dims after them, per channel where the batch dim is left out."""
    batched = input.ndim == spatial + 2
    shape = input.shape[:2 if batched else 1] + (1,) * (input.ndim - (2 if batched else 1))
    keep = dropout(creation.ones(*shape, dtype=input.dtype, device=input.device), p,
                   training)
    if not training or p == 0.0:
        return input
    return input.mul_(keep) if inplace else input * keep


@fused(None, arity=1, layer=_dropout_layer_of("Dropout1d"))
def dropout1d(input, p=0.5, training=True, inplace=False):  # noqa: A002 (PyTorch's name)
    """Zero whole channels with probability ``p`` (scaling the rest by 1 / (1 - p)):
    one draw per (sample, channel) of (N, C, L), per channel of an unbatched (C, L)."""
    if input.ndim not in (2, 3):
        raise OpError(f"dropout1d: expected a 2-D (unbatched) or 3-D input, got shape "
                      f"{tuple(input.shape)}; it drops channels of inputs with one spatial "
                      f"dim (use dropout for others)")
    return _channel_dropout(input, p, training, inplace, 1)


@fused(None, arity=1, layer=_dropout_layer_of("Dropout3d"))
def dropout3d(input, p=0.5, training=True, inplace=False):  # noqa: A002 (PyTorch's name)
    """Zero whole channels with probability ``p`` (scaling the rest by 1 / (1 - p)):
    one draw per (sample, channel) of (N, C, D, H, W), per channel of an unbatched
    (C, D, H, W). Another rank warns, as PyTorch's, and drops along its first dim."""
    if input.ndim not in (4, 5):
        if input.ndim == 0:
            raise OpError("dropout3d: a 0-d input has no channels to drop; use dropout")
        warnings.warn(f"dropout3d: received a {input.ndim}-D input; it drops channels of "
                      f"4-D (unbatched) or 5-D inputs (use dropout for others)",
                      UserWarning, stacklevel=2)
    return _channel_dropout(input, p, training, inplace, 3)


#: SELU's scale * alpha: the value a dropped SELU activation takes
_SELU_FLOOR = 1.7580993408473766


def _alpha_dropout(op, input, p, training, inplace, feature):
    """Alpha dropout: dropped elements (whole channels where ``feature``) set to SELU's
    floor, then an affine map a x + b that keeps a zero mean and unit variance input's
    mean and variance."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: p must be in [0, 1], got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if not input.dtype.is_floating_point:
        raise TypeError(f"{op}: cannot drop out {input.dtype.name} tensors in training (as "
                        f"in PyTorch); convert with .float() first")
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    if feature and input.ndim < 2:
        raise OpError(f"{op}: needs at least 2 dims (N, C, ...) to drop channels, got "
                      f"shape {tuple(input.shape)}")
    shape = input.shape[:2] + (1,) * (input.ndim - 2) if feature else input.shape
    keep = (creation.rand(*shape, device=input.device) >= p).to(input.dtype)
    a = 1.0 / math.sqrt((_SELU_FLOOR ** 2 * p + 1.0) * (1.0 - p))
    shift = (keep - 1.0) * (_SELU_FLOOR * a) + _SELU_FLOOR * a * p
    scale = keep * a
    return input.mul_(scale).add_(shift) if inplace else input * scale + shift


@fused(None, arity=1, layer=_dropout_layer_of("AlphaDropout"))
def alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    """Dropout for SELU networks: each element dropped with probability ``p`` to SELU's
    negative floor, then all scaled and shifted so that the input's zero mean and unit
    variance are kept; the identity outside training."""
    return _alpha_dropout("alpha_dropout", input, p, training, inplace, False)


@fused(None, arity=1, layer=_dropout_layer_of("FeatureAlphaDropout"))
def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    """alpha_dropout of whole channels: one draw per (sample, channel) of (N, C, ...)."""
    return _alpha_dropout("feature_alpha_dropout", input, p, training, inplace, True)


def _rrelu_layer(lower=1.0 / 8, upper=1.0 / 3, inplace=False):
    return {"lower": lower, "upper": upper, "inplace": inplace}


def _rrelu_shown(layer) -> str:
    return f"lower={layer.lower}, upper={layer.upper}" + \
        (", inplace=True" if layer.inplace else "")


def _rrelu_forward(form):
    def forward(self, input):  # noqa: A002 (PyTorch's name)
        return form(input, self.lower, self.upper, self.training, self.inplace)
    return forward


@fused(None, arity=1, layer=Layer("RReLU", _rrelu_layer, shown=_rrelu_shown,
                                  forward=_rrelu_forward))
def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):  # noqa: A002
    """The randomized leaky ReLU: x where x > 0, else x times a slope drawn uniformly
    from [lower, upper] per element while training, their mean (lower + upper) / 2
    otherwise; the gradient is the slope each element took."""
    if lower > upper:
        raise ValueError(f"rrelu: lower ({lower}) must be <= upper ({upper})")
    if not input.dtype.is_floating_point:
        raise TypeError(f"rrelu: not defined for {input.dtype.name} tensors (as in "
                        f"PyTorch); convert with .float() first")
    if not training and not inplace:  # (the slope a number: one rounding, as PyTorch's)
        return where(input > 0, input, input * ((lower + upper) / 2))
    on = {"dtype": input.dtype, "device": input.device}
    if training:
        slope = creation.rand(*input.shape, **on) * (upper - lower) + lower
    else:
        slope = creation.ones(*input.shape, **on) * ((lower + upper) / 2)
    factor = where(input > 0, 1.0, slope)
    return input.mul_(factor) if inplace else input * factor


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):  # noqa: A002
    """rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False) -> Tensor

    In-place rrelu: writes the result into input's memory and returns input."""
    return rrelu(input, lower, upper, training, True)


#: index dtypes an embedding looks up directly (others take indexing's own rules)
_ROW_INDEX = (int64, int32)


def embedding(input, weight, padding_idx=None):
    """Rows of ``weight`` (num_embeddings, dim) at the integer ``input``; positions
    equal to ``padding_idx`` pass no gradient to their row."""
    if input.dtype.is_floating_point or input.dtype.name == "bool":
        raise TypeError(f"embedding: indices must be integers, got {input.dtype.name}")
    rows = take_rows(weight, input) if input.dtype in _ROW_INDEX and input.ndim else \
        weight[input]
    if padding_idx is None:
        return rows
    n = weight.shape[0]
    if not -n <= padding_idx < n:
        raise OpError(f"embedding: padding_idx {padding_idx} is outside the "
                      f"{n} embeddings")
    pad = padding_idx % n
    return where((input != pad).unsqueeze(-1), rows, rows.detach())


def one_hot(tensor, num_classes=-1):
    """int64 tensor of shape tensor.shape + (num_classes,) with a 1 at each value
    (num_classes=-1: one more than the largest value)."""
    if tensor.dtype.is_floating_point or tensor.dtype.name == "bool":
        raise TypeError(f"one_hot: expects an integer tensor, got {tensor.dtype.name}")
    values = tensor.numpy()
    if values.size and values.min() < 0:
        raise OpError(f"one_hot: class values must be non-negative, got "
                      f"{int(values.min())}")
    if num_classes == -1:
        if not values.size:
            raise OpError("one_hot: cannot infer num_classes from an empty tensor; "
                          "pass num_classes")
        num_classes = int(values.max()) + 1
    elif values.size and values.max() >= num_classes:
        raise OpError(f"one_hot: class value {int(values.max())} does not fit "
                      f"num_classes={num_classes}")
    classes = creation.arange(num_classes, dtype="int64", device=tensor.device)
    return (tensor.unsqueeze(-1).to("int64") == classes).to("int64")


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """input / max(||input||_p along dim, eps)."""
    return input / _norm(input, p, dim).clamp(min=eps)


def _norm(x, p, dim):
    """The p-norm along ``dim`` (kept), with gradient 0 where the norm is 0 (as
    PyTorch's norm; the root's derivative is infinite there)."""
    if p == math.inf:
        return x.abs().amax(dim, keepdim=True)
    if p == 0:  # the count of non-zero entries, whose gradient is 0 (as PyTorch's)
        return (x != 0).to(x.dtype).sum(dim, keepdim=True)
    total = (x * x if p == 2 else x.abs() ** p).sum(dim, keepdim=True)
    nonzero = total > 0
    safe = where(nonzero, total, 1.0)
    root = safe.sqrt() if p == 2 else safe ** (1.0 / p)
    return where(nonzero, root, 0.0)


def rope_tables(seq_len, head_dim, base=10000.0, offset=0, device=None, dtype=None):
    """cos/sin tables (seq_len, head_dim // 2) for positions offset..offset+seq_len-1."""
    import numpy as np

    from ..creation import tensor

    if head_dim % 2:
        raise OpError(f"rope: head_dim must be even, got {head_dim}")
    inv = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    ang = np.arange(offset, offset + seq_len, dtype=np.float64)[:, None] * inv[None, :]
    dt = dtype or "float32"
    return tensor(np.cos(ang), dtype=dt, device=device), tensor(np.sin(ang), dtype=dt,
                                                                  device=device)


def apply_rope(x, cos, sin):
    """Rotate-half RoPE on the last dim of x (..., seq, head_dim)."""
    if cos.shape != (x.shape[-2], x.shape[-1] // 2):
        raise OpError(f"rope: tables of shape {cos.shape} do not fit input {x.shape}; "
                      f"expected ({x.shape[-2]}, {x.shape[-1] // 2})")
    return RoPEFn.apply(x, cos, sin, False)


@fused(AttentionFn, arity=3, extra=("causal",))
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False, *,
                                 causal=None):
    """softmax(q @ k^T * scale + mask) @ v over (..., seq, head_dim), PyTorch's signature:
    ``attn_mask`` is a bool tensor (True attends) or an additive float tensor broadcast to
    (..., seq_q, seq_k); ``is_causal`` masks later keys (top-left aligned). Fused forward
    and backward on both backends; long sequences take a memory-blocked online-softmax
    (flash) path. ``causal=`` is the older name of ``is_causal``."""
    q, k, v = query, key, value
    if causal is not None:
        is_causal = causal
    if min(q.ndim, k.ndim, v.ndim) < 2:
        raise OpError(f"scaled_dot_product_attention: query, key and value need at least "
                      f"2 dims (..., seq, head_dim), got shapes {q.shape}, {k.shape} and "
                      f"{v.shape}")
    if enable_gqa and q.ndim >= 3 and k.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        k, v = _repeat_heads(k, q.shape[-3]), _repeat_heads(v, q.shape[-3])
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise OpError(f"scaled_dot_product_attention: q {q.shape}, k {k.shape} and "
                      f"v {v.shape} do not fit: q and k need one head_dim, k and v one "
                      f"sequence length")
    if attn_mask is not None and is_causal:
        raise OpError("scaled_dot_product_attention: give attn_mask or is_causal=True, "
                      "not both (fold the causal mask into attn_mask)")
    q, k, v = cast_inputs("attention", q, k, v)
    _same("scaled_dot_product_attention", q, k, v)
    head_dim = q.shape[-1]
    scale = (1.0 / math.sqrt(head_dim) if head_dim else 1.0) if scale is None \
        else float(scale)
    if attn_mask is not None:
        attn_mask = _attention_mask(attn_mask, q, k)
    if 0 in q.shape[:-1] or 0 in k.shape[:-1] or v.shape[-1] == 0:
        # no queries, no keys or no values: the output is empty, or (no keys) each row
        # an empty sum, zeros, as PyTorch gives; the products keep the graph
        return (q @ k.mT) @ v
    if dropout_p > 0.0 or (attn_mask is not None and attn_mask.requires_grad) or \
            not head_dim:
        # dropout on the probabilities needs them whole, and so does the gradient of an
        # additive mask (the scores' gradient): the composed form (and for an empty
        # head_dim, whose scores are all 0: each row the mean of its values)
        s = (q @ k.mT) * scale
        if attn_mask is not None:
            s = s.masked_fill(~attn_mask, -math.inf) if attn_mask.dtype.name == "bool" \
                else s + attn_mask
        if is_causal:
            from ..creation import ones

            keep = ones(s.shape[-2], s.shape[-1], dtype="bool", device=s.device).tril()
            s = s.masked_fill(~keep, -math.inf)
        p = s.softmax(-1)
        return (dropout(p, dropout_p, True) if dropout_p > 0.0 else p) @ v
    return AttentionFn.apply(q, k, v, bool(is_causal), scale, attn_mask)


def _repeat_heads(t, heads):
    """Grouped-query attention's keys or values: each of t's heads (dim -3) serves
    heads // t.shape[-3] consecutive query heads, as PyTorch's enable_gqa repeats them."""
    kv = t.shape[-3]
    if heads % kv:
        raise OpError(f"scaled_dot_product_attention: enable_gqa needs the query heads "
                      f"({heads}) to be a multiple of the key/value heads ({kv})")
    lead, (s, e) = t.shape[:-3], t.shape[-2:]
    return t.unsqueeze(-3).expand(*lead, kv, heads // kv, s, e).reshape(*lead, heads, s, e)


def _attention_mask(mask, q, k):
    if not isinstance(mask, Tensor):
        raise TypeError(f"scaled_dot_product_attention: attn_mask must be a tensor, got "
                        f"{type(mask).__name__}")
    if mask.device is not q.device:
        raise RuntimeError(f"scaled_dot_product_attention: attn_mask on {mask.device.type}, "
                           f"q on {q.device.type}; move it with .to(...)")
    scores = q.shape[:-1] + (k.shape[-2],)
    from ..layout import broadcast_shapes

    if broadcast_shapes(mask.shape, scores, op="scaled_dot_product_attention mask") \
            != scores:
        raise OpError(f"scaled_dot_product_attention: attn_mask of shape {mask.shape} "
                      f"does not broadcast to the scores' shape {scores}")
    if mask.dtype.name != "bool" and mask.dtype is not q.dtype:
        mask = mask.to(q.dtype)
    return mask


#: the declared elementwise ops PyTorch has in torch.nn.functional (relu, leaky_relu,
#: softplus...): made from their declarations, with PyTorch's signatures
DECLARED = {decl.name: functional_form(decl) for decl in OPS.values()
            if getattr(decl, "functional", None)}
globals().update(DECLARED)
globals().update(INPLACE_ACTIVATIONS)  # (F.relu_, F.elu_...: the in-place methods)
for _name, _fn in DECLARED.items():
    # pickle finds a function by module and name: a module holding F.relu (a layer's
    # activation) saves with torch.save(model) and loads back as this same function
    if _fn.__module__ != __name__ and getattr(_fn, "__qualname__", _name) == _name:
        _fn.__module__ = __name__

__all__ = [*DECLARED, *INPLACE_ACTIVATIONS, "threshold_", "rrelu_", "linear", "rms_norm",
           "layer_norm", "gelu", "glu",
           "prelu", "logsigmoid", "softmax",
           "log_softmax", "softmin", "dropout", "embedding", "embedding_bag", "ctc_loss",
           "one_hot", "normalize", "pad", "rope_tables", "apply_rope",
           "scaled_dot_product_attention", "mse_loss", "l1_loss", "smooth_l1_loss",
           "huber_loss", "nll_loss", "cross_entropy", "binary_cross_entropy",
           "binary_cross_entropy_with_logits",
           "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "unfold", "fold", "max_pool1d", "max_pool2d", "max_pool3d",
           "max_unpool1d", "max_unpool2d", "max_unpool3d", "fractional_max_pool2d",
           "fractional_max_pool3d", "avg_pool1d", "avg_pool2d",
           "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
           "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool3d", "batch_norm", "group_norm",
           "instance_norm", "dropout2d", "dropout1d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout", "rrelu", "interpolate", "kl_div", "poisson_nll_loss",
           "gaussian_nll_loss", "margin_ranking_loss",
           "triplet_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
           "multilabel_soft_margin_loss", "hinge_embedding_loss",
           "triplet_margin_with_distance_loss", "cosine_similarity", "pairwise_distance",
           "affine_grid", "grid_sample", "bilinear", "lp_pool1d", "lp_pool2d", "lp_pool3d",
           "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "soft_margin_loss",
           "cosine_embedding_loss", "local_response_norm", "pdist", "gumbel_softmax",
           "upsample", "upsample_nearest", "upsample_bilinear", "max_pool1d_with_indices",
           "max_pool2d_with_indices", "max_pool3d_with_indices",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
           "adaptive_max_pool3d_with_indices", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d_with_indices", "conv_tbc"]

_MISSING = {
    "multi_head_attention_forward": "hx.nn.MultiHeadAttention or "
                                    "scaled_dot_product_attention",
}


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), _MISSING)
