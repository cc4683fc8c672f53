"""The gamma sampler with a reparameterized gradient: _standard_gamma(input, generator)
and _standard_gamma_grad(input, output), under PyTorch's names, and the regularized
incomplete gamma that Gamma.cdf reads.

A draw is made on the host from ``generator=`` or the default generator (hx.manual_seed
repeats it) and sent to the input's device. Its gradient with respect to the
concentration is the implicit one, -(dP/dalpha) / (dP/dx) at the draw, P the gamma cdf:
the draw moves with alpha as its quantile stays fixed. It is computed to float64's
precision (ops/gamma_math.py); PyTorch's own is a fitted approximation, within about
3e-3 of it for alpha below 0.1 and within 2e-3 elsewhere.
"""

from __future__ import annotations

import numpy as np

from ..autograd.function import SINK, Function
from ..backends import backend_for
from ..errors import OpError
from ..layout import broadcast_shapes
from ..random import generator as numpy_generator
from ..tensor import Tensor
from .gamma_math import gamma_quantile_grad, regularized_lower_gamma, standard_gamma_draws
from .registry import declare, function


def _host(t) -> np.ndarray:
    return np.asarray(t.detach().cpu().numpy(), dtype=np.float64)


def _to(host, like):
    """A float64 host array as a tensor of ``like``'s dtype on its device."""
    arr = np.asarray(np.asarray(host).astype(like.dtype.np), order="C")
    return Tensor._wrap(backend_for(like.device).from_numpy(arr))


def _floats(op, t, name):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    if not t.dtype.is_floating_point:
        raise TypeError(f"{op}: {name} must be floating-point, got {t.dtype.name} (as in "
                        f"PyTorch, whose gamma kernel exists for floats only); convert "
                        f"with .float() first")


class StandardGamma(Function):
    """Gamma(alpha, 1) draws; backward: the implicit gradient at each draw."""

    label = "StandardGamma"

    @staticmethod
    def forward(ctx, alpha, gen):
        a = _host(alpha)
        tiny = float(np.finfo(alpha.dtype.np).tiny) if alpha.dtype.name != "bfloat16" \
            else 2.0 ** -126
        valid = a > 0  # (PyTorch gives the smallest normal for alpha <= 0 or NaN, too)
        draws = standard_gamma_draws(numpy_generator(gen), np.where(valid, a, 1.0))
        out = np.where(valid, np.maximum(draws, tiny), tiny)
        result = _to(out, alpha)
        if ctx is not SINK:  # (the rounded draw the caller sees)
            ctx.alpha, ctx.out = a, _host(result)
        return result

    @staticmethod
    def backward(ctx, g):
        return g * _to(gamma_quantile_grad(ctx.alpha, ctx.out).reshape(g.shape), g), None


@function
def _standard_gamma(input, generator=None):  # noqa: A002 (PyTorch's names)
    """_standard_gamma(input, generator=None) -> Tensor

    Gamma(alpha, 1) draws, alpha each element of ``input`` (floats), in its shape, dtype
    and device: Marsaglia and Tsang's method on the host. Differentiable in alpha (the
    reparameterized gradient _standard_gamma_grad gives)."""
    _floats("_standard_gamma", input, "input")
    return StandardGamma.apply(input, generator)


@function
def _standard_gamma_grad(input, output):  # noqa: A002
    """_standard_gamma_grad(input, output) -> Tensor

    d output / d input of a Gamma(input, 1) draw ``output`` held at its quantile
    (implicit differentiation of the cdf); 0 where output is 0. Same shapes, as
    PyTorch's."""
    for name, t in (("input", input), ("output", output)):
        _floats("_standard_gamma_grad", t, name)
    if input.shape != output.shape:
        raise OpError(f"_standard_gamma_grad: input of shape {input.shape} and output of "
                      f"shape {output.shape} must have the same shape (as in PyTorch)")
    if input.device != output.device:
        raise OpError(f"_standard_gamma_grad: input on {input.device.type}, output on "
                      f"{output.device.type}; move one with .to(...)")
    grad = gamma_quantile_grad(_host(input), _host(output)).reshape(input.shape)
    return _to(grad, input)


class RegularizedLowerGamma(Function):
    """P(a, x); its gradient in x is the gamma density, in a none (PyTorch has none
    either: its igamma refuses it)."""

    label = "Igamma"

    @staticmethod
    def forward(ctx, a, x):
        ha, hx_ = _host(a), _host(x)  # (the same shape: broadcast by the caller)
        ctx.a, ctx.x = ha, hx_
        return _to(regularized_lower_gamma(ha, hx_), x)

    @staticmethod
    def backward(ctx, g):
        from ..backends.special_math import lgamma

        if ctx.next[0] is not None:
            raise NotImplementedError("the derivative for 'igamma: input' is not "
                                      "implemented (as in PyTorch): the gamma cdf is "
                                      "differentiable in its value and rate only; detach "
                                      "the concentration")
        a, x = ctx.a, ctx.x
        with np.errstate(all="ignore"):
            density = np.exp((a - 1) * np.log(x) - x - lgamma(a))
        return None, g * _to(np.where(x > 0, density, 0.0), g)


def regularized_lower_gamma_of(a: Tensor, x: Tensor) -> Tensor:
    """P(a, x) over broadcast float tensors (its backward refuses a's gradient)."""
    shape = broadcast_shapes(a.shape, x.shape, op="igamma")
    return RegularizedLowerGamma.apply(a.expand(shape), x.expand(shape))


declare("_standard_gamma")
declare("_standard_gamma_grad", arity=2, differentiable=False)
