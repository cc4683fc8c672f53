"""Random sampling: normal (its four forms), poisson, binomial, bernoulli, randint_like,
and the in-place samplers random_, uniform_, normal_, bernoulli_, exponential_,
geometric_, log_normal_ and cauchy_.

Every draw is made on the host from ``generator=`` (an hx.Generator) or the default
generator, so hx.manual_seed repeats it on every device; the values are numpy's (PCG64),
not PyTorch's, from the same distributions. Arguments are checked as PyTorch checks them,
in its words after the op's name.

A sample's gradient with respect to its parameters (normal's mean and std, poisson's
rates, bernoulli's probabilities) is zero, as PyTorch's: these samplers are not
reparameterised. An in-place sampler on a tensor with history records a node of that
kind, so the tensor keeps requiring grad and its history gets zeros; on a leaf that
requires grad it refuses, as every in-place op does.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .. import dtype as _dtypes
from ..autograd.function import Function
from ..backends import backend_for
from ..creation import check_layout, full
from ..device import as_device
from ..dtype import as_dtype, bool_, uint16, uint32, uint64
from ..errors import OpError, OpNotImplementedError
from ..layout import broadcast_shapes
from ..random import generator as numpy_generator
from ..tensor import Tensor
from .inplace import _rebase, _records_graph, check_writable
from .registry import declare, function, tensor_method

#: the bits of a float's significand: it holds every integer up to 2 ** digits
_DIGITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}
#: the largest finite value of each float dtype
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
              "float32": float(np.finfo(np.float32).max),
              "float64": float(np.finfo(np.float64).max)}
#: numpy's largest Poisson rate (its draws are int64)
_POISSON_MAX = float(np.iinfo(np.int64).max) - 10.0 * math.sqrt(np.iinfo(np.int64).max)


class Drawn(Function):
    """A sample whose tensor parameters reach it only through its distribution: the
    gradient of each is zero, as PyTorch's samplers give (no reparameterisation)."""

    small_state = True
    label = "Sample"

    @staticmethod
    def forward(ctx, raw, *params):
        ctx.params = [(p.shape, p.dtype, p.device) if isinstance(p, Tensor) else None
                      for p in params]
        return raw

    @staticmethod
    def backward(ctx, g):
        return (None, *(None if s is None else full(s[0], 0, s[1], s[2])
                        for s in ctx.params))


def _host(t) -> np.ndarray:
    """A tensor's values on the host, in float64 (for the checks and the draws)."""
    return np.asarray(t.detach().cpu().numpy(), dtype=np.float64)


def _c_array(host, dtype) -> np.ndarray:
    """A draw (an array, or the scalar numpy gives for shape ()) as a C-ordered array of
    ``dtype``'s (np.ascontiguousarray would make a 0-d array 1-d)."""
    return np.asarray(np.asarray(host).astype(dtype.np, copy=False), order="C")


def _raw(host, dtype, device):
    """The host array ``host`` as a raw array of ``dtype`` on ``device``."""
    return backend_for(device).from_numpy(_c_array(host, dtype))


def _float_only(op, dtype, what="the tensor"):
    if not dtype.is_floating_point:
        raise TypeError(f"{op}: {what} must be floating-point, got {dtype.name} (as in "
                        f"PyTorch, whose kernel exists for floats only); convert with "
                        f".float() first")


def _continuous(op, x, name):
    if not x.dtype.is_floating_point:
        raise TypeError(f"{op}: the {name} distribution is continuous, so the tensor must "
                        f"be floating-point, got {x.dtype.name} (as in PyTorch); use "
                        f"x.float().{op}(...)")


def _number(op, name, value) -> float:
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise TypeError(f"{op}: {name} must be a number, got a tensor of shape "
                            f"{value.shape}")
        value = value.item()
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a number, got {type(value).__name__}")
    return float(value)


# -- writing a draw into a tensor ---------------------------------------------------------
def _write(x, host, op):
    """x's memory overwritten with ``host`` (an array of x's shape), under autograd's
    in-place rules: a leaf that requires grad refuses, a tensor with history keeps it
    through a node whose gradient is zero. The version counter moves either way."""
    raw = x._be.from_numpy(_c_array(host, x.dtype))
    if _records_graph(x, None, op):
        return _rebase(x, Drawn.apply(raw, x), op)
    check_writable(x, op)
    x._be.copy_into(x._data, raw)
    x._storage.version += 1
    return x


def _ready(x, op):
    """Refuse before drawing: a leaf that requires grad, a target sharing memory."""
    if not _records_graph(x, None, op):
        check_writable(x, op)


# -- discrete uniform: random_ and randint_like --------------------------------------------
def _discrete_range(op, dtype, low, high):
    """[low, top] (inclusive) of integers in [low, high) for ``dtype`` (high None: up to
    the dtype's top, 2 ** digits for a float), with PyTorch's checks."""
    if dtype in (uint16, uint32, uint64):
        raise TypeError(f"{op}: not implemented for {dtype.name} (as in PyTorch); draw "
                        f"into an int64 tensor and convert it")
    for name, v in (("from", low), ("to", high)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral)):
            raise TypeError(f"{op}: {name} must be an int, got {type(v).__name__} {v!r}")
        if v is not None and not -(1 << 63) <= v < (1 << 63):
            raise OpError(f"{op}: {name}={v} does not fit in int64")
    low = int(low)
    if dtype.is_floating_point:
        digits = _DIGITS[dtype.name]
        top = 1 << digits if high is None else int(high) - 1
        bound = _FLOAT_MAX[dtype.name]
    elif dtype is bool_:
        top, bound = (1 if high is None else int(high) - 1), None
    else:
        info = np.iinfo(dtype.np)
        top, bound = (int(info.max) if high is None else int(high) - 1), None
    if low > top:
        raise OpError(f"{op}: expects 'from' to be less than 'to', but got from={low} >= "
                      f"to={top + 1}")
    for name, v in (("from", low), ("to - 1", top)):
        if bound is not None:  # (a float: out of range is an error, inexact a warning)
            if not -bound <= v <= bound:
                raise OpError(f"{op}: {name} is out of bounds for {dtype.name}")
            if not -(1 << digits) <= v <= 1 << digits:
                warnings.warn(f"{op}: {name} is out of bounds [-(2^{digits}), 2^{digits}], "
                              f"beyond which {dtype.name} does not hold every integer: the "
                              f"draws there are rounded", UserWarning, stacklevel=4)
        else:
            lo, hi = (0, 1) if dtype is bool_ else (int(np.iinfo(dtype.np).min),
                                                    int(np.iinfo(dtype.np).max))
            if not lo <= v <= hi:
                raise OpError(f"{op}: {name} is out of bounds for {dtype.name} (its range "
                              f"is [{lo}, {hi}])")
    return low, top


def _integers(gen, low, top, shape):
    return gen.integers(low, top, size=shape, endpoint=True, dtype=np.int64)


def _from_to(op, args, kwargs):
    """(from, to) of random_'s call forms: (), (to,), (from, to), to=, from= with to=;
    PyTorch's keyword ``from`` is a Python keyword, so it comes in through **kwargs."""
    unknown = sorted(set(kwargs) - {"from", "to"})
    if unknown:
        raise TypeError(f"{op}() got an unexpected keyword argument {unknown[0]!r}")
    if len(args) > 2:
        raise TypeError(f"{op}() takes at most 2 positional arguments (from, to), got "
                        f"{len(args)}")
    if len(args) == 2 or (len(args) == 1 and "to" in kwargs):
        if "from" in kwargs:
            raise TypeError(f"{op}() got multiple values for argument 'from'")
        return args[0], args[1] if len(args) == 2 else kwargs["to"]
    if len(args) == 1:
        if "from" in kwargs:
            raise TypeError(f"{op}() got multiple values for argument 'from'")
        return 0, args[0]
    if "from" in kwargs and "to" not in kwargs:
        raise TypeError(f"{op}(): from= needs to= beside it (to=None: up to the dtype's "
                        f"largest value)")
    return kwargs.get("from", 0), kwargs.get("to")


@tensor_method(name="random_")
def random_(self, *args, generator=None, **kwargs):
    """random_(from=0, to=None, *, generator=None) -> Tensor

    Integers drawn uniformly from [from, to - 1], in place: one argument is ``to``;
    ``to=None`` reaches the dtype's largest value (2 ** digits for a float: 2 ** 24 for
    float32, the largest integer it holds with all below it)."""
    low, high = _from_to("random_", args, kwargs)
    low, top = _discrete_range("random_", self.dtype, low, high)
    _ready(self, "random_")
    return _write(self, _integers(numpy_generator(generator), low, top, self.shape),
                  "random_")


@function
def randint_like(input, low=0, high=None, *, generator=None, dtype=None,  # noqa: A002
                 layout=None, device=None, requires_grad=False, memory_format=None):
    """randint_like(input, low=0, high, *, generator=None, dtype=None, layout=None,
    device=None, requires_grad=False, memory_format=None) -> Tensor

    Integers drawn uniformly from [low, high) in input's shape (and its dtype and device
    unless given); with one bound it is ``high`` (and low is 0)."""
    check_layout("randint_like", layout, memory_format)
    if high is None:
        low, high = 0, low
    low, high = (v.item() if isinstance(v, Tensor) else v for v in (low, high))
    d = input.dtype if dtype is None else as_dtype(dtype)
    dev = input.device if device is None else as_device(device)
    if requires_grad and not d.is_floating_point:
        raise RuntimeError(f"randint_like: only floating-point tensors can require "
                           f"gradients, got dtype {d.name}")
    low, top = _discrete_range("randint_like", d, low, high)
    out = Tensor._wrap(_raw(_integers(numpy_generator(generator), low, top,
                                      input.shape), d, dev))
    return out.requires_grad_(True) if requires_grad else out


# -- continuous in-place samplers --------------------------------------------------------
def _uniform_bounds(x, args, kwargs):
    """(from, to) of uniform_(from=0, to=1), bound by position or name (``from`` comes in
    through **kwargs: it is a Python keyword), with PyTorch's checks."""
    unknown = sorted(set(kwargs) - {"from", "to"})
    if unknown:
        raise TypeError(f"uniform_() got an unexpected keyword argument {unknown[0]!r}")
    if len(args) > 2:
        raise TypeError(f"uniform_() takes at most 2 positional arguments (from, to), got "
                        f"{len(args)}")
    bound = dict(zip(("from", "to"), args))
    for name, value in kwargs.items():
        if name in bound:
            raise TypeError(f"uniform_() got multiple values for argument {name!r}")
        bound[name] = value
    low = _number("uniform_", "from", bound.get("from", 0.0))
    high = _number("uniform_", "to", bound.get("to", 1.0))
    top = _FLOAT_MAX[x.dtype.name]
    for name, v in (("from", low), ("to", high)):
        if not -top <= v <= top:
            raise OpError(f"uniform_: {name} is out of bounds for {x.dtype.name}")
    if low > high:
        raise OpError(f"uniform_: expects to return a [from, to) range, but found "
                      f"from={low:g} > to={high:g}")
    if high - low > top:
        raise OpError(f"uniform_: expects to - from <= the largest {x.dtype.name}, but "
                      f"found to={high:g} and from={low:g}")
    return low, high


@tensor_method(name="uniform_")
def uniform_(self, *args, generator=None, **kwargs):
    """uniform_(from=0, to=1, *, generator=None) -> Tensor

    Draws from the continuous uniform distribution over [from, to), in place."""
    _float_only("uniform_", self.dtype)
    low, high = _uniform_bounds(self, args, kwargs)
    _ready(self, "uniform_")
    return _write(self, numpy_generator(generator).uniform(low, high, self.shape),
                  "uniform_")


@tensor_method(name="normal_")
def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """normal_(mean=0, std=1, *, generator=None) -> Tensor

    Draws from the normal distribution of ``mean`` and ``std`` (>= 0), in place."""
    _float_only("normal_", self.dtype)
    mean, std = _number("normal_", "mean", mean), _number("normal_", "std", std)
    if not std >= 0.0:
        raise OpError(f"normal_: normal expects std >= 0.0, but found std {std:g}")
    _ready(self, "normal_")
    draw = numpy_generator(generator).standard_normal(self.shape) * std + mean
    return _write(self, draw, "normal_")


def _probabilities(op, p, what):
    host = _host(p)
    if not ((host >= 0.0) & (host <= 1.0)).all():
        raise OpError(f"{op}: expects all elements of {what} in [0, 1] (PyTorch: Expected "
                      f"p_in >= 0 && p_in <= 1); clamp them, or pass probabilities rather "
                      f"than logits (sigmoid(logits))")
    return host


def _probability(op, p) -> float:
    p = _number(op, "p", p)
    if not 0.0 <= p <= 1.0:
        raise OpError(f"{op}: expects p to be in [0, 1], but got p={p:g}")
    return p


@tensor_method(name="bernoulli_")
def bernoulli_(self, p=0.5, *, generator=None):
    """bernoulli_(p=0.5, *, generator=None) -> Tensor

    1 with probability ``p``, else 0, in place, in this tensor's dtype (bool and integer
    tensors too); ``p`` a number or a float tensor broadcast to this tensor's shape."""
    if isinstance(p, Tensor):
        _float_only("bernoulli_", p.dtype, "p")
        if broadcast_shapes(self.shape, p.shape, op="bernoulli_") != self.shape:
            raise OpError(f"bernoulli_: p of shape {p.shape} does not broadcast to the "
                          f"tensor's shape {self.shape}")
        prob = np.broadcast_to(_probabilities("bernoulli_", p, "p"), self.shape)
    else:
        prob = _probability("bernoulli_", p)
    _ready(self, "bernoulli_")
    return _write(self, numpy_generator(generator).random(self.shape) < prob, "bernoulli_")


@tensor_method(name="exponential_")
def exponential_(self, lambd=1.0, *, generator=None):
    """exponential_(lambd=1, *, generator=None) -> Tensor

    Draws from the exponential distribution of rate ``lambd`` (> 0; mean 1 / lambd), in
    place."""
    _continuous("exponential_", self, "exponential")
    lambd = _number("exponential_", "lambd", lambd)
    if not lambd > 0.0:
        raise OpError(f"exponential_: expects lambda > 0.0, but found lambda={lambd:g}")
    _ready(self, "exponential_")
    draw = numpy_generator(generator).standard_exponential(self.shape) / lambd
    return _write(self, draw, "exponential_")


@tensor_method(name="geometric_")
def geometric_(self, p, *, generator=None):
    """geometric_(p, *, generator=None) -> Tensor

    Draws the number of Bernoulli trials of probability ``p`` (in (0, 1)) up to the first
    success (1, 2, ...), in place; integer tensors too."""
    if self.dtype is bool_:
        raise TypeError("geometric_: not implemented for bool tensors (as in PyTorch); "
                        "draw into an integer tensor")
    p = _number("geometric_", "p", p)
    if not 0.0 < p < 1.0:
        raise OpError(f"geometric_: expects p to be in (0, 1), but got p={p:g}")
    _ready(self, "geometric_")
    return _write(self, numpy_generator(generator).geometric(p, self.shape), "geometric_")


@tensor_method(name="log_normal_")
def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """log_normal_(mean=1, std=2, *, generator=None) -> Tensor

    Draws exp(z), z normal of ``mean`` and ``std`` (> 0), in place."""
    _float_only("log_normal_", self.dtype)
    mean, std = _number("log_normal_", "mean", mean), _number("log_normal_", "std", std)
    if not std > 0.0:
        raise OpError(f"log_normal_: expects std > 0.0, but found std={std:g}")
    _ready(self, "log_normal_")
    return _write(self, numpy_generator(generator).lognormal(mean, std, self.shape),
                  "log_normal_")


@tensor_method(name="cauchy_")
def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """cauchy_(median=0, sigma=1, *, generator=None) -> Tensor

    Draws from the Cauchy distribution of ``median`` and scale ``sigma`` (> 0), in
    place."""
    _continuous("cauchy_", self, "Cauchy")
    median = _number("cauchy_", "median", median)
    sigma = _number("cauchy_", "sigma", sigma)
    if not sigma > 0.0:
        raise OpError(f"cauchy_: expects sigma > 0.0, but found sigma={sigma:g}")
    _ready(self, "cauchy_")
    draw = median + sigma * numpy_generator(generator).standard_cauchy(self.shape)
    return _write(self, draw, "cauchy_")


# -- functional samplers --------------------------------------------------------------------
_FOR_NUMBERS = ("size", "dtype", "layout", "device", "pin_memory", "requires_grad")


@function
def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, layout=None,
           device=None, pin_memory=False, requires_grad=False):
    """normal(mean, std=1.0, size=None, *, generator=None, dtype=None, layout=None,
    device=None, pin_memory=False, requires_grad=False) -> Tensor

    Draws from normal distributions, in PyTorch's four forms: a tensor mean and a tensor
    std (broadcast; the mean's dtype), a tensor mean and a number std (the mean's shape),
    a number mean and a tensor std (the std's shape and dtype), or two numbers and
    ``size`` (with ``dtype``, ``device`` and ``requires_grad``). std must be >= 0. The
    gradient with respect to a tensor mean or std is zero, as PyTorch's."""
    gen = numpy_generator(generator)
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        return _normal_of_numbers(mean, std, size, gen, dtype, layout, device,
                                  requires_grad)
    given = [n for n, v in zip(_FOR_NUMBERS, (size, dtype, layout, device, pin_memory,
                                              requires_grad))
             if v is not None and v is not False]
    if given:
        raise TypeError(f"normal: {', '.join(given)} go with a number mean and std; with "
                        f"a tensor mean or std the result takes its shape, dtype and "
                        f"device")
    ref = mean if isinstance(mean, Tensor) else std
    _float_only("normal", ref.dtype, "mean" if ref is mean else "std")
    if isinstance(mean, Tensor) and isinstance(std, Tensor):
        if mean.device != std.device:
            raise OpError(f"normal: mean on {mean.device.type}, std on {std.device.type}; "
                          f"move one with .to(...)")
        shape = broadcast_shapes(mean.shape, std.shape, op="normal")
        sd = _host(std)
        if not (sd >= 0.0).all():
            raise OpError("normal: expects all elements of std >= 0.0")
    elif isinstance(std, Tensor):
        shape, sd = std.shape, _host(std)
        if not (sd >= 0.0).all():
            raise OpError("normal: expects all elements of std >= 0.0")
    else:
        shape, sd = mean.shape, _number("normal", "std", std)
        if not sd >= 0.0:
            raise OpError(f"normal: normal expects std >= 0.0, but found std {sd:g}")
    mu = _host(mean) if isinstance(mean, Tensor) else _number("normal", "mean", mean)
    draw = mu + sd * gen.standard_normal(shape)
    return Drawn.apply(_raw(draw, ref.dtype, ref.device), mean, std)


def _normal_of_numbers(mean, std, size, gen, dtype, layout, device, requires_grad):
    mean, std = _number("normal", "mean", mean), _number("normal", "std", std)
    if size is None:
        raise TypeError("normal: with a number mean and std, pass size= (the shape to "
                        "draw), or pass a tensor mean or std")
    check_layout("normal", layout)
    d = _dtypes.default_float if dtype is None else as_dtype(dtype)
    _float_only("normal", d, "dtype")
    if not std >= 0.0:
        raise OpError(f"normal: normal expects std >= 0.0, but found std {std:g}")
    shape = (int(size),) if isinstance(size, numbers.Integral) else tuple(int(n) for n in size)
    out = Tensor._wrap(_raw(mean + std * gen.standard_normal(shape), d, as_device(device)))
    return out.requires_grad_(True) if requires_grad else out


@function
def poisson(input, generator=None):  # noqa: A002 (PyTorch's name)
    """poisson(input, generator=None) -> Tensor

    Poisson draws, each of the rate in ``input`` (floats, >= 0), in input's dtype. The
    gradient with respect to the rates is zero, as PyTorch's."""
    _float_only("poisson", input.dtype, "input (the rates)")
    rates = _host(input)
    if not (rates >= 0.0).all():
        raise OpError("poisson: invalid Poisson rate, expected rate to be non-negative "
                      "(every rate >= 0, none NaN)")
    if rates.size and not rates.max() <= _POISSON_MAX:
        raise OpError(f"poisson: a rate of {rates.max():g} is too large to sample (the "
                      f"largest is {_POISSON_MAX:.3g}: the counts are int64)")
    draw = numpy_generator(generator).poisson(rates)
    return Drawn.apply(_raw(draw, input.dtype, input.device), input)


#: the largest count numpy's binomial sampler takes (its counts are int64)
_BINOMIAL_MAX = float(2 ** 62)


@function
def binomial(count, prob, generator=None):
    """binomial(count, prob, generator=None) -> Tensor

    Binomial draws: the number of successes in ``count`` trials of probability ``prob``
    each (count and prob tensors of one float dtype, broadcast), in their dtype. As
    PyTorch's: a count below 0 draws 0, a prob outside [0, 1] is clamped into it, a NaN
    prob gives NaN and an infinite count inf (a NaN count, where PyTorch's sampler never
    returns, gives NaN); a fractional count is truncated. No gradient: the result is a
    sample, not recorded (PyTorch's backward raises "not implemented")."""
    for name, t in (("count", count), ("prob", prob)):
        if not isinstance(t, Tensor):
            raise TypeError(f"binomial(): argument '{name}' must be a Tensor, not "
                            f"{type(t).__name__}")
    if not count.dtype.is_floating_point:
        raise ValueError(f"binomial only supports floating-point dtypes for count, got "
                         f"{count.dtype.name}; convert with .float()")
    if prob.dtype is not count.dtype:
        raise OpError(f"binomial: prob has dtype {prob.dtype.name} but count "
                      f"{count.dtype.name}; they must match (as in PyTorch)")
    if count.dtype.itemsize == 2:
        raise OpNotImplementedError(f"binomial: not implemented for {count.dtype.name} (as "
                                    f"in PyTorch's CPU kernel); convert with .float()")
    if prob.device is not count.device:
        raise RuntimeError(f"binomial: count on {count.device.type}, prob on "
                           f"{prob.device.type}; move one with .to(...)")
    shape = broadcast_shapes(count.shape, prob.shape, op="binomial")
    n = np.broadcast_to(_host(count), shape)
    p = np.broadcast_to(_host(prob), shape)
    finite = np.isfinite(n)
    if finite.any() and not n[finite].max() <= _BINOMIAL_MAX:
        raise OpError(f"binomial: a count of {n[finite].max():g} is too large to sample "
                      f"(the largest is 2**62: the counts are int64)")
    trials = np.where(finite, np.clip(np.trunc(np.nan_to_num(n)), 0, None), 0)
    chance = np.clip(np.nan_to_num(p), 0.0, 1.0)
    draw = np.asarray(numpy_generator(generator).binomial(trials.astype(np.int64), chance))
    draw = np.where(np.isnan(p) | np.isnan(n), np.nan,
                    np.where(n == np.inf, np.inf, draw.astype(np.float64)))
    return Tensor._wrap(_raw(draw, count.dtype, count.device))


@tensor_method(function=True)
def bernoulli(input, p=None, *, generator=None):  # noqa: A002
    """bernoulli(input, p=None, *, generator=None) -> Tensor

    1 where a uniform draw falls below the probability, else 0, in input's shape and
    dtype: the probabilities are input's elements (floats in [0, 1]), or ``p`` (a number)
    for every element, any dtype then. The gradient is zero, as PyTorch's."""
    gen = numpy_generator(generator)
    if p is None:
        _float_only("bernoulli", input.dtype, "input (the probabilities)")
        prob = _probabilities("bernoulli", input, "input")
    elif isinstance(p, Tensor):
        raise TypeError("bernoulli: p must be a number; for one probability per element "
                        "pass them as input (bernoulli(probs)), or use x.bernoulli_(p)")
    else:
        prob = _probability("bernoulli", p)
    draw = gen.random(input.shape) < prob
    return Drawn.apply(_raw(draw, input.dtype, input.device), input)


declare("normal", differentiable=False)
declare("poisson", differentiable=False)
declare("binomial", arity=2, differentiable=False)
declare("bernoulli", differentiable=False, dtypes="any")
