"""Batch, group and instance normalisation over (N, C, *) inputs: the functions and the
layers, with PyTorch's arguments, running statistics and state-dict names.

Batch norm in training is one fused op (ops/fused.py BatchNormFn: the batch's moments
computed once, one kernel forward and one backward through them, a composed backward
where a graph of the gradient is wanted); in evaluation, elementwise ops with the
running statistics. Group and instance norm normalise each (sample, group) row with the
fused LayerNorm kernel, then apply the per-channel affine.
"""

from __future__ import annotations

from .. import creation
from ..amp import cast_inputs
from ..autograd.mode import no_grad
from ..ops import fused
from ..ops.registry import Layer
from ..ops.registry import fused as declared_fused
from ..tensor import Tensor
from .module import Module, Parameter


def _channels(op, x, weight=None, bias=None):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")
    if x.ndim < 2:
        raise ValueError(f"{op}: expected an input of shape (N, C, *), got {x.shape}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: not defined for {x.dtype.name} tensors; convert with "
                        f".float() first")
    c = x.shape[1]
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.shape != (c,):
            raise ValueError(f"{op}: {name} of shape {t.shape} does not fit the input's "
                             f"{c} channels (input shape {x.shape}); expected ({c},)")
    return c, (1, c) + (1,) * (x.ndim - 2)


# (declared with no layer: nn.BatchNorm1d/2d stay written out below, since their forward
# counts num_batches_tracked, makes momentum=None a cumulative average and picks the
# batch's or the running statistics by mode: logic a generated forward, which passes the
# layer's attributes to batch_norm, would hide)
@declared_fused(fused.BatchNormFn, arity=3)
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,  # noqa: A002
               momentum=0.1, eps=1e-5):
    """Normalise each channel by the batch's statistics (``training``; the running ones
    are then updated in place: ``momentum`` of the new value, the variance unbiased) or
    by ``running_mean``/``running_var`` (evaluation), then scale and shift."""
    (x,) = cast_inputs("norm", input)
    c, shape = _channels("batch_norm", x, weight, bias)
    if training:
        count = x.numel() // c if c else 0
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when "
                             f"training, got input of shape {x.shape}; use a larger batch "
                             f"or call .eval()")
        y, mean, var = fused.batch_norm_training(x, weight, bias, eps)
        if running_mean is not None:
            fused.update_running(running_mean, mean._data, momentum)
        if running_var is not None:  # (the variance unbiased)
            fused.update_running(running_var, var._data, momentum, count / (count - 1))
        return y
    if running_mean is None or running_var is None:
        raise ValueError("batch_norm: evaluation needs running_mean and running_var; "
                         "pass training=True to use the batch's statistics")
    mean, var = running_mean.to(x.dtype), running_var.to(x.dtype)
    scale = (var + eps).rsqrt()
    if weight is not None:
        scale = scale * weight
    y = (x - mean.reshape(shape)) * scale.reshape(shape)
    return y if bias is None else y + bias.reshape(shape)


def _group_norm_layer(num_groups, num_channels, eps=1e-5, affine=True, device=None,
                      dtype=None, *, bias=True):
    """nn.GroupNorm's state: a per-channel scale (ones) and shift (zeros) where
    ``affine``; ``bias=False`` keeps the scale only."""
    if num_channels % num_groups:
        raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible "
                         f"by num_groups ({num_groups})")
    weight = creation.ones(num_channels) if affine else None
    bias = creation.zeros(num_channels) if affine and bias else None
    if device is not None or dtype is not None:
        _moved((weight, bias), device, dtype)
    return {"num_groups": num_groups, "num_channels": num_channels, "eps": eps,
            "affine": affine, "weight": weight, "bias": bias}


def _moved(tensors, device, dtype):
    """Move ``tensors`` (None skipped) in place as Module.to moves a module's: the other
    norms' constructors move theirs so, and a dtype that is not floating is refused."""
    holder = Module()
    for i, t in enumerate(tensors):
        holder.register_buffer(str(i), t)
    holder.to(device=device, dtype=dtype)


def _group_norm_shown(layer) -> str:
    return (f"{layer.num_groups}, {layer.num_channels}, eps={layer.eps}, affine="
            f"{layer.affine}, bias={layer.bias is not None}")


# (no Function of its own: the fused LayerNorm node over each group, then the affine ops)
@declared_fused(None, arity=3,
                layer=Layer("GroupNorm", _group_norm_layer, parameters=("weight", "bias"),
                            shown=_group_norm_shown))
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Normalise each sample's channels in ``num_groups`` groups (over the group's
    channels and all positions), then a per-channel scale and shift."""
    (x,) = cast_inputs("norm", input)
    c, shape = _channels("group_norm", x, weight, bias)
    if not isinstance(num_groups, int) or num_groups < 1 or c % num_groups:
        raise ValueError(f"group_norm: the input's {c} channels (shape {x.shape}) must be "
                         f"divisible by num_groups ({num_groups})")
    n = x.shape[0]
    rows = x.reshape(n, num_groups, -1)
    y = fused.LayerNormFn.apply(rows, None, None, eps).reshape(x.shape)
    if weight is not None:
        y = y * weight.reshape(shape)
    return y if bias is None else y + bias.reshape(shape)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalise each (sample, channel) over its positions (``use_input_stats``; the
    running statistics, where given, move towards the batch's average of them), or by
    the running statistics."""
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum,
                          eps)
    (x,) = cast_inputs("norm", input)
    c, _ = _channels("instance_norm", x, weight, bias)
    positions = x.numel() // (x.shape[0] * c) if x.shape[0] * c else 0
    if positions <= 1:
        raise ValueError(f"instance_norm: expected more than 1 spatial element when "
                         f"training, got input of shape {x.shape}")
    if running_mean is not None or running_var is not None:
        dims = tuple(range(2, x.ndim))
        with no_grad():
            if running_mean is not None:
                mean = x.detach().mean(dims).mean(0).to(running_mean.dtype)
                running_mean.mul_(1.0 - momentum).add_(mean * momentum)
            if running_var is not None:
                var = x.detach().var(dims, correction=1).mean(0).to(running_var.dtype)
                running_var.mul_(1.0 - momentum).add_(var * momentum)
    return group_norm(x, c, weight, bias, eps)


class _NormBase(Module):
    """The affine parameters and running statistics batch and instance norm share:
    weight (ones) and bias (zeros) where ``affine``; running_mean, running_var and
    num_batches_tracked buffers where ``track_running_stats`` (None otherwise)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = Parameter(creation.ones(num_features)) if affine else None
        self.bias = Parameter(creation.zeros(num_features)) if affine and bias else None
        if track_running_stats:
            self.register_buffer("running_mean", creation.zeros(num_features))
            self.register_buffer("running_var", creation.ones(num_features))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype="int64"))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        if device is not None or dtype is not None:
            self.to(device=device, dtype=dtype)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.fill_(0.0)
                self.running_var.fill_(1.0)
                self.num_batches_tracked.fill_(0)

    def _check_input_dim(self, x):
        raise NotImplementedError

    def _momentum(self):
        """The weight of this batch's statistics: ``momentum``, or with momentum=None
        the cumulative average's 1 / batches seen (counting this one)."""
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                return 1.0 / int(self.num_batches_tracked.item())
        return 0.0 if self.momentum is None else self.momentum

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


def _dims_error(cls, want, x):
    return ValueError(f"{cls}: expected {want} input, got a {x.ndim}D input of shape "
                      f"{x.shape}")


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        factor = self._momentum()
        use_batch = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return batch_norm(input, self.running_mean if track else None,
                          self.running_var if track else None, self.weight, self.bias,
                          use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L)."""

    def _check_input_dim(self, x):
        if x.ndim not in (2, 3):
            raise _dims_error("BatchNorm1d", "2D or 3D", x)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W): each channel normalised over the batch and the
    image."""

    def _check_input_dim(self, x):
        if x.ndim != 4:
            raise _dims_error("BatchNorm2d", "4D", x)


class BatchNorm3d(_BatchNorm):
    """Batch norm over (N, C, D, H, W): each channel normalised over the batch and the
    volume."""

    def _check_input_dim(self, x):
        if x.ndim != 5:
            raise _dims_error("BatchNorm3d", "5D", x)


class _InstanceNorm(_NormBase):
    dims = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def forward(self, input):
        name, d = type(self).__name__, self.dims
        if input.ndim not in (d + 1, d + 2):
            raise _dims_error(name, f"{d + 1}D (unbatched) or {d + 2}D", input)
        unbatched = input.ndim == d + 1
        x = input.unsqueeze(0) if unbatched else input
        # (as PyTorch's: instance norm counts no batches; momentum=None moves nothing)
        factor = 0.0 if self.momentum is None else self.momentum
        y = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                          self.training or not self.track_running_stats, factor, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    dims = 1


class InstanceNorm2d(_InstanceNorm):
    """Each (sample, channel) image normalised over its own pixels."""

    dims = 2


class InstanceNorm3d(_InstanceNorm):
    """Each (sample, channel) volume normalised over its own cells."""

    dims = 3


#: layers made from the declarations here that pickled models name as this module's
_PICKLED_HERE = ("GroupNorm",)


def __getattr__(name):
    # (looked up when asked for: nn/fused_layers, which makes them, imports this module
    # first, through nn/functional)
    if name in _PICKLED_HERE:
        from . import fused_layers

        return getattr(fused_layers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
