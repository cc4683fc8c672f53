"""Ops composed of other ops: stacking helpers, tensordot, kron, cross, trace,
diag_embed, logit, nan_to_num, float_power, mvlgamma and prelu (declared with its
layer, nn.PReLU). Each records the ops it is made of, so autograd and every
backend come with them; none needs a derivative of its own."""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import creation, layout
from .. import dtype as _dtypes
from ..autograd.mode import no_grad
from ..dtype import bool_, can_cast, float64
from ..errors import OpError, OpTypeError
from ..tensor import Tensor
from .convert import cast
from .elementwise import POW
from .indexing import cat, where
from .inplace import _rebase, _records_graph, check_writable
from .registry import Layer, declare, function, fused, tensor_method


# -- stacking ------------------------------------------------------------------------------
def _tensors(op, tensors):
    tensors = list(tensors)
    if not tensors:
        raise OpError(f"{op}: expected a non-empty sequence of tensors")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected a sequence of tensors, got a "
                            f"{type(t).__name__}; wrap numbers with hx.tensor(...)")
    return tensors


def _join(op, tensors, dim):
    """cat, its errors named for ``op`` (the user called op, not cat)."""
    try:
        return cat(tensors, dim)
    except OpError as e:
        detail = str(e).removeprefix("cat: ")
        raise OpError(f"{op}: {detail} (after reshaping, joining along dim {dim})") \
            from None


def _at_least(op, shaper, tensors):
    # PyTorch: one tensor gives a tensor, a sequence or several give a tuple
    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        return shaper(tensors[0])
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    return tuple(shaper(t) for t in _tensors(op, tensors))


def _shape_1d(t):
    return t.reshape(1) if t.ndim == 0 else t


def _shape_2d(t):
    return t.reshape(1, 1) if t.ndim == 0 else t.unsqueeze(0) if t.ndim == 1 else t


def _shape_3d(t):
    if t.ndim == 0:
        return t.reshape(1, 1, 1)
    if t.ndim == 1:
        return t.reshape(1, t.shape[0], 1)
    return t.unsqueeze(-1) if t.ndim == 2 else t


@function
def atleast_1d(*tensors):
    """atleast_1d(*tensors) -> Tensor or tuple of Tensors

    Each input with at least one dim: a 0-d tensor becomes shape (1,), others are
    returned as they are (views, no copy)."""
    return _at_least("atleast_1d", _shape_1d, tensors)


@function
def atleast_2d(*tensors):
    """atleast_2d(*tensors) -> Tensor or tuple of Tensors

    Each input with at least two dims: () becomes (1, 1), (n,) becomes (1, n)."""
    return _at_least("atleast_2d", _shape_2d, tensors)


@function
def atleast_3d(*tensors):
    """atleast_3d(*tensors) -> Tensor or tuple of Tensors

    Each input with at least three dims: () becomes (1, 1, 1), (n,) becomes (1, n, 1),
    (m, n) becomes (m, n, 1)."""
    return _at_least("atleast_3d", _shape_3d, tensors)


@function
def hstack(tensors):
    """hstack(tensors) -> Tensor

    The tensors joined column-wise: along dim 0 for 1-D tensors, dim 1 otherwise (0-d
    tensors count as 1-D)."""
    ts = [_shape_1d(t) for t in _tensors("hstack", tensors)]
    return _join("hstack", ts, 0 if ts[0].ndim == 1 else 1)


@function
def vstack(tensors):
    """vstack(tensors) -> Tensor

    The tensors joined row-wise, along dim 0, after atleast_2d."""
    return _join("vstack", [_shape_2d(t) for t in _tensors("vstack", tensors)], 0)


@function
def row_stack(tensors):
    """row_stack(tensors) -> Tensor

    vstack's other name."""
    return _join("row_stack", [_shape_2d(t) for t in _tensors("row_stack", tensors)], 0)


@function
def dstack(tensors):
    """dstack(tensors) -> Tensor

    The tensors joined depth-wise, along dim 2, after atleast_3d."""
    return _join("dstack", [_shape_3d(t) for t in _tensors("dstack", tensors)], 2)


@function
def column_stack(tensors):
    """column_stack(tensors) -> Tensor

    The tensors side by side as columns: 0-d and 1-D tensors become (n, 1) columns,
    the rest join along dim 1."""
    ts = [t.reshape(t.numel(), 1) if t.ndim <= 1 else t
          for t in _tensors("column_stack", tensors)]
    return _join("column_stack", ts, 1)


# -- products ------------------------------------------------------------------------------
def _contracted_dims(a, b, dims):
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise OpError(f"tensordot: dims must be >= 0, got {dims}")
        if dims > min(a.ndim, b.ndim):
            raise OpError(f"tensordot: cannot contract {dims} dims of tensors of shapes "
                          f"{a.shape} and {b.shape}")
        return list(range(a.ndim - dims, a.ndim)), list(range(dims))
    if len(dims) != 2:
        raise OpError(f"tensordot: dims must be an int or a pair of lists, got {dims!r}")
    da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(da) != len(db):
        raise OpError(f"tensordot: both lists of dims must have one length, got {da} and "
                      f"{db}")
    return ([layout.normalize_dim(d, a.ndim, "tensordot") for d in da],
            [layout.normalize_dim(d, b.ndim, "tensordot") for d in db])


@function
def tensordot(a, b, dims=2, out=None):
    """tensordot(a, b, dims=2) -> Tensor

    The sum of products over ``dims`` of a and b: an int contracts a's last ``dims`` dims
    with b's first ones; a pair of lists ([dims of a], [dims of b]) names them."""
    if out is not None:
        raise OpError("tensordot: out= is not supported; assign the result instead")
    da, db = _contracted_dims(a, b, dims)
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise OpError(f"tensordot: dim {i} of a (shape {a.shape}) has size "
                          f"{a.shape[i]}, dim {j} of b (shape {b.shape}) {b.shape[j]}; "
                          f"contracted dims must match")
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    left = a.permute(*free_a, *da).reshape(-1, k)
    right = b.permute(*db, *free_b).reshape(k, -1)
    shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    return (left @ right).reshape(shape)


@tensor_method(function=True)
def kron(input, other):  # noqa: A002 (PyTorch's names)
    """kron(input, other) -> Tensor

    The Kronecker product: block (i, j, ...) of the result is input[i, j, ...] * other
    (the lower-rank operand takes leading dims of size 1)."""
    a, b = input, other
    n = max(a.ndim, b.ndim)
    sa = (1,) * (n - a.ndim) + a.shape
    sb = (1,) * (n - b.ndim) + b.shape
    # a's dims interleaved with b's: (a0, 1, a1, 1...) * (1, b0, 1, b1...)
    wide_a = a.reshape(tuple(x for s in sa for x in (s, 1)))
    wide_b = b.reshape(tuple(x for s in sb for x in (1, s)))
    return (wide_a * wide_b).reshape(tuple(p * q for p, q in zip(sa, sb)))


def _cross_dim(shape, dim):
    if dim is None:
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise OpError(f"cross: no dimension of size 3 in shape {shape}; pass dim=")
        warnings.warn("cross: calling it without dim is deprecated (it takes the first "
                      "dim of size 3, as PyTorch does); pass dim= explicitly",
                      UserWarning, stacklevel=3)
        return dim
    dim = layout.normalize_dim(dim, len(shape), "cross")
    if shape[dim] != 3:
        raise OpError(f"cross: dim {dim} of shape {shape} has size {shape[dim]}, not 3")
    return dim


@tensor_method(function=True)
def cross(input, other, dim=None):  # noqa: A002
    """cross(input, other, dim=None) -> Tensor

    The cross product of 3-vectors along ``dim`` (broadcast); dim=None takes the first
    dim of size 3, with a deprecation warning, as PyTorch does."""
    if not isinstance(other, Tensor):
        raise TypeError(f"cross: other must be a tensor, got {type(other).__name__}")
    if input.ndim != other.ndim:
        raise OpError(f"cross: inputs must have one number of dims, got shapes "
                      f"{input.shape} and {other.shape}")
    shape = layout.broadcast_shapes(input.shape, other.shape, op="cross")
    d = _cross_dim(shape, dim)
    a, b = input.expand(shape), other.expand(shape)
    a0, a1, a2 = (a.narrow(d, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(d, i, 1) for i in range(3))
    return cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


@tensor_method(function=True)
def trace(input):  # noqa: A002
    """trace(input) -> Tensor

    The sum of the main diagonal of a 2-D tensor (integers sum in int64, as sum)."""
    if input.ndim != 2:
        raise OpError(f"trace: expected a 2-D tensor, got shape {input.shape}; use "
                      f"diagonal(dim1=..., dim2=...).sum(-1) for batches")
    if input.dtype is bool_:
        raise TypeError("trace: not defined for bool tensors (as in PyTorch); convert "
                        "with .int() first")
    return input.diagonal().sum()


@tensor_method(function=True)
def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """diag_embed(input, offset=0, dim1=-2, dim2=-1) -> Tensor

    Each last-dim vector of input as the ``offset``-th diagonal of a square matrix of
    zeros, over the output's dims ``dim1`` and ``dim2``."""
    x, k = input, offset
    if x.ndim == 0:
        raise OpError("diag_embed: input must have at least one dim, got a 0-d tensor")
    nd = x.ndim + 1
    d1, d2 = (layout.normalize_dim(d, nd, "diag_embed") for d in (dim1, dim2))
    if d1 == d2:
        raise OpError(f"diag_embed: dim1 and dim2 name one dim ({d1}); pass two")
    n = x.shape[-1] + abs(k)
    if k:  # (the padded vector: row r keeps it where column - r == offset)
        pad = Tensor._wrap(x._be.full(x.shape[:-1] + (abs(k),), 0, x.dtype.np))
        x = cat([pad, x] if k > 0 else [x, pad], -1)
    mask = Tensor._wrap(x._be.from_numpy(np.eye(n, k=k, dtype=bool)))
    zero = Tensor._wrap(x._be.full((), 0, x.dtype.np))
    full = where(mask, x.unsqueeze(-2).expand(*x.shape[:-1], n, n), zero)
    if d1 > d2:  # (the matrix's rows go to dim1: swap them when dim1 comes later)
        full, d1, d2 = full.transpose(-2, -1), d2, d1
    return full.movedim((nd - 2, nd - 1), (d1, d2))


# -- elementwise compositions, with in-place forms --------------------------------------
def _as_float(x):
    return x if x.dtype.is_floating_point else cast(x, _dtypes.default_float)


def _in_place(x, op, compute, other=None):
    """x's memory overwritten with compute(x), recorded as PyTorch records an in-place
    op (its out-of-place form of the old value); ``other``: a tensor operand whose
    gradient the record must carry too."""
    name = op + "_"
    recording = _records_graph(x, other, name)
    check_writable(x, name)
    result = compute(x.clone() if recording else x)
    if not can_cast(result.dtype, x.dtype):
        raise RuntimeError(f"{name}: result type {result.dtype.name} can't be cast to the "
                           f"desired output type {x.dtype.name} (shape {x.shape}); use "
                           f"the out-of-place {op} and convert explicitly")
    if recording:
        return _rebase(x, result, name)
    with no_grad():
        x._be.copy_into(x._data, cast(result, x.dtype)._data)
    x._storage.version += 1
    return x


def _logit(x, eps):
    x = _as_float(x)
    if eps is not None:
        x = x.clamp(eps, 1.0 - eps)
    return (x / (1.0 - x)).log()


@tensor_method(function=True)
def logit(input, eps=None):  # noqa: A002
    """logit(input, eps=None) -> Tensor

    log(input / (1 - input)), elementwise; with ``eps`` the input is clamped to
    [eps, 1 - eps] first (the gradient is 0 outside it)."""
    return _logit(input, eps)


@tensor_method(name="logit_")
def logit_(input, eps=None):  # noqa: A002
    """logit_(eps=None) -> Tensor

    In-place logit: writes the result into this tensor's memory."""
    return _in_place(input, "logit", lambda x: _logit(x, eps))


def _nan_to_num(x, nan, posinf, neginf):
    if not x.dtype.is_floating_point:
        return x.clone()  # (integers hold no NaN or infinity)
    info = np.finfo(np.float32 if x.dtype.name == "bfloat16" else x.dtype.np)
    if x.dtype.name == "bfloat16":  # (bfloat16's range is float32's, its precision less)
        top = float(np.float32(3.3895313892515355e38))
    else:
        top = float(info.max)
    hi = top if posinf is None else posinf
    lo = -top if neginf is None else neginf
    out = where(x != x, nan, x)
    return where(x == math.inf, hi, where(x == -math.inf, lo, out))


@tensor_method(function=True)
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):  # noqa: A002
    """nan_to_num(input, nan=0.0, posinf=None, neginf=None) -> Tensor

    input with NaN replaced by ``nan``, +inf by ``posinf`` and -inf by ``neginf`` (by
    default the largest and the lowest finite value of input's dtype)."""
    return _nan_to_num(input, nan, posinf, neginf)


@tensor_method(name="nan_to_num_")
def nan_to_num_(input, nan=0.0, posinf=None, neginf=None):  # noqa: A002
    """nan_to_num_(nan=0.0, posinf=None, neginf=None) -> Tensor

    In-place nan_to_num: writes the result into this tensor's memory."""
    return _in_place(input, "nan_to_num", lambda x: _nan_to_num(x, nan, posinf, neginf))


# -- prelu: a learned slope per channel ------------------------------------------------
def _prelu_layer(num_parameters=1, init=0.25, device=None, dtype=None):
    """nn.PReLU's state: ``num_parameters`` slopes, each ``init``: one shared by every
    channel, or one per channel (the input's dim 1)."""
    weight = creation.empty(num_parameters, dtype=dtype, device=device).fill_(init)
    return {"num_parameters": num_parameters, "init": init, "weight": weight}


@fused(None, arity=2, layer=Layer("PReLU", _prelu_layer, parameters=("weight",),
                                  shown="num_parameters={num_parameters}"))
@tensor_method(function=True)
def prelu(input, weight):  # noqa: A002 (PyTorch's names)
    """input where positive, weight * input elsewhere. ``weight`` holds one slope for
    every element, or one per channel: dim 1 of the input (a 1-d input has one
    channel), as PyTorch lays it over the input (not by broadcasting's rule)."""
    x, w = input, weight
    for name, t in (("input", x), ("weight", w)):
        if not isinstance(t, Tensor):
            raise TypeError(f"prelu: {name} must be a tensor, got {type(t).__name__}")
    if w.dtype is not x.dtype:
        raise OpTypeError(f"prelu: input ({x.dtype.name}) and weight ({w.dtype.name}) must "
                          f"have one dtype (PyTorch does not promote them); convert with "
                          f"weight.to(input.dtype)")
    if w.device is not x.device:
        raise RuntimeError(f"prelu: input on {x.device.type}, weight on {w.device.type}; "
                           f"move one with .to(...)")
    n = w.numel()
    if n != 1:
        if x.ndim == 0:
            raise OpError(f"prelu: a 0-d input takes one slope, got a weight of {n}")
        channels = x.shape[1] if x.ndim > 1 else 1
        if channels != n:
            raise OpError(f"prelu: a weight of {n} slopes for an input of shape {x.shape} "
                          f"with {channels} channels (dim 1); give one slope per channel, "
                          f"or one for all")
    if w.ndim > 1:
        raise OpError(f"prelu: the weight must be 0-d or 1-d, got shape {w.shape}")
    if not x.dtype.is_floating_point:
        raise OpTypeError(f"prelu: not defined for {x.dtype.name} tensors (as in PyTorch); "
                          f"convert with .float() first")
    if x.ndim != w.ndim:  # (the slopes along dim 1, ones elsewhere)
        w = w.reshape(*(n if d == 1 else 1 for d in range(x.ndim)))
    return where(x > 0, x, w * x)


# -- float_power: pow in float64 -------------------------------------------------------------
def _in_float64(v):
    if not isinstance(v, Tensor):
        return v  # (a number: pow with a float64 tensor stays float64)
    try:
        return cast(v, float64)
    except TypeError as e:
        raise TypeError(f"float_power: computes in float64, which {v.device.type} tensors "
                        f"cannot hold ({e}); move the operands to the CPU first") from None


@tensor_method(function=True)
def float_power(input, exponent):  # noqa: A002
    """float_power(input, exponent) -> Tensor

    input ** exponent computed in float64, whatever the operands' dtypes (the result is
    float64, as PyTorch's); either may be a number. Gradients reach each input in its
    own dtype."""
    if not isinstance(input, Tensor) and not isinstance(exponent, Tensor):
        raise TypeError(f"float_power: expected a tensor input or exponent, got "
                        f"{type(input).__name__} and {type(exponent).__name__}")
    return POW.apply(_in_float64(input), _in_float64(exponent))


@tensor_method(name="float_power_")
def float_power_(input, exponent):  # noqa: A002
    """float_power_(exponent) -> Tensor

    In-place float_power: the tensor must be float64 already, as PyTorch asks."""
    if input.dtype is not float64:
        raise OpTypeError(f"float_power_: the base has dtype {input.dtype.name} but the "
                          f"result requires float64 (as in PyTorch); use "
                          f"x.double().float_power_(...) or the out-of-place float_power")
    return POW.inplace(input, _in_float64(exponent))


def _mvlgamma(x, p, op):
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
        raise TypeError(f"{op}: p must be an int, got {type(p).__name__}")
    if p < 1:
        raise OpError(f"{op}: p has to be greater than or equal to 1, got {p}")
    if x.dtype is bool_:
        raise OpError(f"{op}: the input may not be a bool tensor (as in PyTorch); convert "
                      f"it with .float()")
    x = _as_float(x)
    # log Gamma_p(x) = p (p - 1) / 4 log(pi) + sum over j < p of lgamma(x - j / 2)
    offsets = Tensor._wrap(x._be.from_numpy(
        np.arange(-0.5 * (p - 1), 0.25, 0.5).astype(x.dtype.np)))
    return (x.unsqueeze(-1) + offsets).lgamma().sum(-1) + 0.25 * p * (p - 1) * math.log(math.pi)


@tensor_method(function=True)
def mvlgamma(input, p):  # noqa: A002
    """mvlgamma(input, p) -> Tensor

    The multivariate log-gamma function of dimension ``p``, elementwise:
    p (p - 1) / 4 log(pi) + sum over j < p of lgamma(input - j / 2), defined for input
    > (p - 1) / 2 (PyTorch computes the formula elsewhere too, and so does this)."""
    return _mvlgamma(input, p, "mvlgamma")


@tensor_method(name="mvlgamma_")
def mvlgamma_(input, p):  # noqa: A002
    """mvlgamma_(p) -> Tensor

    In-place mvlgamma: writes the result into this tensor's memory."""
    return _in_place(input, "mvlgamma", lambda x: _mvlgamma(x, p, "mvlgamma_"))


for _name, _arity in (("hstack", 2), ("vstack", 2), ("row_stack", 2), ("dstack", 2),
                      ("column_stack", 2), ("atleast_1d", 1), ("atleast_2d", 1),
                      ("atleast_3d", 1), ("tensordot", 2), ("kron", 2), ("cross", 2),
                      ("trace", 1), ("diag_embed", 1), ("nan_to_num", 1),
                      ("float_power", 2)):
    declare(_name, arity=_arity, dtypes="any")
declare("logit", dtypes="float")
declare("mvlgamma", dtypes="float")
