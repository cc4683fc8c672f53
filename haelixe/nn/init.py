"""Parameter initialisation in place (PyTorch's torch.nn.init names, fan and gain
rules). Every function runs under no_grad, draws from Haelixe's generator (seeded by
hx.manual_seed) unless given a ``generator`` (an hx.Generator, or a numpy Generator), and
returns the tensor."""

from __future__ import annotations

import math

import numpy as np

from ..autograd.mode import no_grad
from ..tensor import Tensor

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The gain that keeps activations' variance through ``nonlinearity``: 1 for
    linear/sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for
    leaky_relu (slope ``param``, default 0.01), 3/4 for selu."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; known: "
                     f"{', '.join(_LINEAR + ('tanh', 'relu', 'leaky_relu', 'selu'))}")


def _calculate_fan_in_and_fan_out(tensor) -> tuple[int, int]:
    """fan_in = size(1) * receptive field, fan_out = size(0) * receptive field, where
    the receptive field is the product of the dims after the first two."""
    if tensor.ndim < 2:
        raise ValueError(f"fan in and fan out need a tensor with at least 2 dims, got "
                         f"shape {tensor.shape}")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _fill(tensor, host: np.ndarray):
    with no_grad():
        tensor.copy_(Tensor._wrap(tensor._be.from_numpy(host.astype(tensor.dtype.np))))
    return tensor


def _check(tensor, op):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"nn.init.{op}: expects a tensor, got {type(tensor).__name__}")


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """Values drawn uniformly from [a, b)."""
    _check(tensor, "uniform_")
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """Values drawn from N(mean, std^2)."""
    _check(tensor, "normal_")
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None):
    """Values from N(mean, std^2) restricted to [a, b] (bounds in absolute units, as
    PyTorch), drawn by rejection: every value is an exact draw of that distribution."""
    _check(tensor, "trunc_normal_")
    if not a < b:
        raise ValueError(f"nn.init.trunc_normal_: need a < b, got a={a}, b={b}")
    from ..random import generator as default_generator

    gen = default_generator(generator)
    n = tensor.numel()
    out = np.empty(n)
    filled = 0
    lo_p = 0.5 * (1 + math.erf((a - mean) / (std * math.sqrt(2))))
    hi_p = 0.5 * (1 + math.erf((b - mean) / (std * math.sqrt(2))))
    if hi_p - lo_p < 1e-6:
        raise ValueError(f"nn.init.trunc_normal_: [a, b] = [{a}, {b}] holds almost none "
                         f"of N({mean}, {std}^2)")
    while filled < n:
        want = int((n - filled) / (hi_p - lo_p) * 1.1) + 16
        draw = gen.standard_normal(want) * std + mean
        draw = draw[(draw >= a) & (draw <= b)][:n - filled]
        out[filled:filled + draw.size] = draw
        filled += draw.size
    return _fill(tensor, out.reshape(tensor.shape))


def constant_(tensor, val: float):
    _check(tensor, "constant_")
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    """U(-r, r) with r = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    _check(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    _check(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    return calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))


def kaiming_uniform_(tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None):
    """U(-r, r) with r = gain * sqrt(3 / fan) (He et al.); a is leaky_relu's slope."""
    _check(tensor, "kaiming_uniform_")
    if tensor.numel() == 0:
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan)."""
    _check(tensor, "kaiming_normal_")
    if tensor.numel() == 0:
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor, gain: float = 1.0, generator=None):
    """A (semi-)orthogonal matrix scaled by ``gain`` (Saxe et al.): the Q of a QR
    decomposition of a standard normal draw, its columns' signs fixed by R's diagonal so
    that Q is uniformly distributed. Dims after the first are flattened into columns."""
    _check(tensor, "orthogonal_")
    if tensor.ndim < 2:
        raise ValueError(f"nn.init.orthogonal_: only tensors with 2 or more dimensions are "
                         f"supported, got shape {tensor.shape}")
    if tensor.numel() == 0:
        return tensor
    from ..creation import empty
    from ..linalg import qr

    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    # the decomposition runs in float32 / float64 (LAPACK's types)
    work = tensor.dtype if tensor.dtype.name in ("float32", "float64") else None
    with no_grad():
        draw = empty(rows, cols, dtype=work, device=tensor.device).normal_(
            0.0, 1.0, generator=generator)
        if rows < cols:
            draw = draw.t()
        q, r = qr(draw)
        q = q * r.diagonal().sign()
        if rows < cols:
            q = q.t()
        tensor.copy_((q * gain).reshape(tensor.shape))
    return tensor


def eye_(tensor):
    """The identity matrix (ones on the diagonal of a 2-d tensor, any shape)."""
    _check(tensor, "eye_")
    if tensor.ndim != 2:
        raise ValueError(f"nn.init.eye_: only tensors with 2 dimensions are supported, got "
                         f"shape {tensor.shape}")
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups: int = 1):
    """A convolution weight (3, 4 or 5 dims) that passes its input through: in each of
    ``groups`` groups, output channel d takes input channel d at the kernel's centre."""
    _check(tensor, "dirac_")
    if tensor.ndim not in (3, 4, 5):
        raise ValueError(f"nn.init.dirac_: only tensors with 3, 4, or 5 dimensions are "
                         f"supported, got shape {tensor.shape}")
    out_channels = tensor.shape[0]
    if groups < 1 or out_channels % groups:
        raise ValueError(f"nn.init.dirac_: dim 0 must be divisible by groups, got "
                         f"{out_channels} output channels and groups={groups}")
    per_group = out_channels // groups
    host = np.zeros(tensor.shape)
    centre = tuple(n // 2 for n in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(per_group, tensor.shape[1])):
            host[(g * per_group + d, d) + centre] = 1
    return _fill(tensor, host)


def sparse_(tensor, sparsity, std: float = 0.01, generator=None):
    """A 2-d matrix drawn from N(0, std^2) with ceil(sparsity * rows) entries of each
    column, chosen at random, set to zero (Martens)."""
    _check(tensor, "sparse_")
    if tensor.ndim != 2:
        raise ValueError(f"nn.init.sparse_: only tensors with 2 dimensions are supported, "
                         f"got shape {tensor.shape}")
    from ..random import generator as default_generator

    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))
    normal_(tensor, 0.0, std, generator)
    gen = default_generator(generator)
    drop = np.zeros((rows, cols), dtype=bool)
    for col in range(cols):
        drop[gen.permutation(rows)[:zeros], col] = True
    with no_grad():
        tensor.masked_fill_(Tensor._wrap(tensor._be.from_numpy(drop)), 0.0)
    return tensor


_MISSING = {
    "uniform": "uniform_ (the in-place name)",
    "normal": "normal_ (the in-place name)",
    "xavier_uniform": "xavier_uniform_ (the in-place name)",
    "kaiming_uniform": "kaiming_uniform_ (the in-place name)",
    "orthogonal": "orthogonal_ (the in-place name)",
    "sparse": "sparse_ (the in-place name)",
}


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), _MISSING)
