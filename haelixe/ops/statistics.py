"""Statistics composed of reductions: nansum, nanmean, var_mean, aminmax, cov, corrcoef,
cdist (pairwise p-norm distances) and pdist (cdist's pairs of one set of rows).

All but cdist record the ops they are made of, so autograd and every backend come with
them. cdist's gradient is PyTorch's subgradient, which composing the norms would not
give (0 where a distance is 0, the whole gradient to every tied maximum for p = inf): it
is a Function whose backward is written with ops.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections import namedtuple

from .. import layout
from ..autograd.function import Function
from ..autograd.mode import no_grad
from ..dtype import bool_
from ..errors import OpError, OpIndexError, OpTypeError
from ..tensor import Tensor
from .indexing import cat, where
from .reduce import amax_amin, mean, moment_arguments, var
from .reduce import sum as _sum
from .registry import declare, function, tensor_method

# (torch.return_types.aminmax: the minimum first)
AMinMax = namedtuple("aminmax", ["min", "max"])


# -- NaN-skipping reductions --------------------------------------------------------------
def _nan_as_zero(x):
    return where(x.isnan(), 0, x) if x.dtype.is_floating_point else x


@tensor_method(function=True)
def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002 (PyTorch's name)
    """nansum(input, dim=None, keepdim=False, *, dtype=None) -> Tensor

    The sum over ``dim`` (every dim when None) with NaN counted as zero; its gradient is
    zero at the NaNs. Integers and bools add up in int64, as sum."""
    x = input if dtype is None else input.to(dtype)
    return _sum(_nan_as_zero(x), dim, keepdim)


@tensor_method(function=True)
def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """nanmean(input, dim=None, keepdim=False, *, dtype=None) -> Tensor

    The mean of the non-NaN elements over ``dim``: nansum divided by their count (NaN
    where every element is NaN, as PyTorch's)."""
    if not input.dtype.is_floating_point:
        raise OpTypeError(f"nanmean: expected input to have a floating point dtype, got "
                          f"{input.dtype.name} (as PyTorch); convert with .float() first")
    counted = (~input.isnan()).sum(dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / counted


# -- moments ------------------------------------------------------------------------------
def var_mean(input, *args, **kwargs):  # noqa: A002
    """var_mean(input, dim=None, *, correction=1, keepdim=False) -> (Tensor, Tensor)

    The variance and the mean over ``dim`` (every dim when None), as the pair PyTorch
    returns; composed from var and mean, so both have their gradients. PyTorch's other
    forms bind too: ``var_mean(input, dim, unbiased, keepdim=False)`` and
    ``var_mean(input, unbiased)``."""
    dim, correction, keepdim = moment_arguments("var_mean", args, kwargs)
    if not input.dtype.is_floating_point:
        raise OpTypeError(f"var_mean: input dtype {input.dtype.name} is not floating point "
                          f"(as in PyTorch); use .float() first")
    return var(input, dim, keepdim, correction), mean(input, dim, keepdim)


var_mean.__signature__ = moment_arguments.signature
function(var_mean)


# -- extremes -----------------------------------------------------------------------------
@tensor_method(function=True)
def aminmax(input, *, dim=None, keepdim=False):  # noqa: A002
    """aminmax(input, *, dim=None, keepdim=False) -> (Tensor min, Tensor max)

    amin and amax over ``dim`` (one int; every element when None) as the named pair
    (min, max); each has amin's and amax's gradient (ties share it evenly)."""
    if dim is not None and not isinstance(dim, numbers.Integral):
        raise TypeError(f"aminmax: dim must be an int or None, got {dim!r}; use amin and "
                        f"amax for several dims")
    if dim is None and input.numel() == 0:
        raise OpError(f"aminmax: cannot compute over an empty tensor (shape "
                      f"{input.shape}), as the op has no identity")
    if dim is not None and input.ndim and \
            input.shape[layout.normalize_dim(dim, input.ndim, "aminmax")] == 0:
        raise OpIndexError(f"aminmax: dim {dim} of the input (shape {input.shape}) has "
                           f"size 0, and the op has no identity; reduce over a dim of "
                           f"nonzero size")
    return AMinMax(amax_amin("min", input, dim, keepdim),
                   amax_amin("max", input, dim, keepdim))


# -- covariance ---------------------------------------------------------------------------
def _weights(name, w, n, integral):
    if not isinstance(w, Tensor):
        raise TypeError(f"cov: {name} must be a tensor, got {type(w).__name__}")
    if w.ndim > 1:
        raise OpError(f"cov: {name} must have at most one dim, got shape {w.shape}")
    if integral and (w.dtype.is_floating_point or w.dtype is bool_):
        raise OpTypeError(f"cov: fweights must have an integer dtype, got {w.dtype.name}; "
                          f"pass frequencies as int64 (observation weights go in aweights)")
    if not integral and not w.dtype.is_floating_point:
        raise OpTypeError(f"cov: aweights must have a floating point dtype, got "
                          f"{w.dtype.name}; convert with .float() (integer frequencies go "
                          f"in fweights)")
    if w.numel() != n:
        raise OpError(f"cov: {name} has {w.numel()} entries for {n} observations (the "
                      f"input's columns); give one per observation")
    if n and bool((w.detach() < 0).any()):
        raise OpError(f"cov: {name} cannot be negative")
    return w.reshape(n)


@tensor_method(function=True)
def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """cov(input, *, correction=1, fweights=None, aweights=None) -> Tensor

    The covariance matrix of the variables in the rows of ``input`` (a 1-D input is one
    variable), its columns the observations; ``fweights`` (integers) and ``aweights``
    (floats) weigh the observations, ``correction`` is subtracted from the weights' sum
    (1: Bessel's). Size-1 dims are squeezed out, as PyTorch's."""
    if input.ndim > 2:
        raise OpError(f"cov: expected input with at most two dims (variables, "
                      f"observations), got shape {input.shape}")
    if not isinstance(correction, numbers.Integral):  # (PyTorch's argument is an int)
        raise TypeError(f"cov: correction must be an int, got {correction!r}")
    if input.dtype is bool_:
        raise OpTypeError("cov: bool input is not supported (as in PyTorch); convert with "
                          ".float() first")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = _weights("fweights", fweights, n, True)
    if aweights is not None:
        aw = _weights("aweights", aweights, n, False)
        w = aw if w is None else w * aw
    if w is None:
        total = n
        centre = x.sum(1) / n
    else:
        total = w.sum()
        if not bool(total.detach() != 0):
            raise OpError("cov: the weights sum to zero, so they cannot be normalised")
        centre = (x * w).sum(1) / total
    if w is not None and aweights is not None and correction != 0:
        dof = total - correction * (w * aw).sum() / total
    else:
        dof = total - correction
    if (dof if isinstance(dof, numbers.Number) else dof.item()) <= 0:
        warnings.warn("cov: degrees of freedom <= 0 (correction is not less than the "
                      "number of observations); the result is inf or nan",
                      RuntimeWarning, stacklevel=2)
        dof = dof * 0
    xc = x - centre.unsqueeze(1)
    c = xc @ (xc if w is None else xc * w).mT
    return (c / dof).squeeze()


@tensor_method(function=True)
def corrcoef(input):  # noqa: A002
    """corrcoef(input) -> Tensor

    The Pearson correlation coefficients of the variables in the rows of ``input``: cov
    divided by the product of the standard deviations, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:  # (one variable: 1, or nan where its variance is 0 or nan)
        return c / c
    spread = c.diagonal().sqrt()
    c = c / spread.unsqueeze(1)
    c = c / spread.unsqueeze(0)
    return c.clamp(-1, 1)


# -- distances ----------------------------------------------------------------------------
_MODES = {"use_mm_for_euclid_dist_if_necessary": 0, "use_mm_for_euclid_dist": 1,
          "donot_use_mm_for_euclid_dist": 2}


def _cdist_inputs(x1, x2, p):
    for name, t in (("x1", x1), ("x2", x2)):
        if not isinstance(t, Tensor):
            raise TypeError(f"cdist: {name} must be a tensor, got {type(t).__name__}")
        if t.ndim < 2:
            raise OpError(f"cdist: {name} must have at least 2 dims (rows, features), got "
                          f"shape {t.shape}")
    if x1.shape[-1] != x2.shape[-1]:
        raise OpError(f"cdist: x1 and x2 must have the same number of columns, got shapes "
                      f"{x1.shape} and {x2.shape}")
    if x1.device is not x2.device:
        raise RuntimeError(f"cdist: x1 on {x1.device.type}, x2 on {x2.device.type}; move "
                           f"one with .to(...)")
    for name, t in (("x1", x1), ("x2", x2)):
        if not t.dtype.is_floating_point:
            raise OpTypeError(f"cdist: only floating point inputs (as in PyTorch), {name} is "
                              f"{t.dtype.name}; convert with .float() first")
    if x1.dtype is not x2.dtype:
        raise OpTypeError(f"cdist: x1 ({x1.dtype.name}) and x2 ({x2.dtype.name}) must have "
                          f"the same dtype; convert one with .to(...)")
    if not isinstance(p, numbers.Real) or math.isnan(p) or p < 0:
        raise OpError(f"cdist: p must be a non-negative number, got {p!r}")
    batch = layout.broadcast_shapes(x1.shape[:-2], x2.shape[:-2], op="cdist")
    return (x1.expand(*batch, *x1.shape[-2:]), x2.expand(*batch, *x2.shape[-2:]))


def _differences(a, b):
    """a[..., i, :] - b[..., j, :] for every pair: shape (..., P, R, M)."""
    return a.unsqueeze(-2) - b.unsqueeze(-3)


def _p_distances(diff, p):
    a = diff.abs()
    if p == 0:
        return (diff != 0).to(diff.dtype).sum(-1)
    if p == 1:
        return a.sum(-1)
    if p == 2:
        return (a * a).sum(-1).sqrt()
    if p == math.inf:
        return a.amax(-1)
    return (a ** p).sum(-1) ** (1.0 / p)


def _distance_grad(g, diff, dist, p):
    """d dist / d a of dist = ||a - b||_p, times g, summed over b's rows: PyTorch's
    subgradient (0 where the distance is 0, or for p < 1 where a coordinate's difference
    is 0: sign(0) is 0, and the powers read 1 there instead of dividing by 0)."""
    if p == 0:  # (a count: no slope anywhere)
        return diff.new_zeros(diff.shape[:-2] + diff.shape[-1:])
    g = g.unsqueeze(-1)
    if p == 1:
        return (g * diff.sign()).sum(-2)
    d = dist.unsqueeze(-1)
    if p == math.inf:  # (every tied largest difference takes the whole gradient)
        return (g * diff.sign() * (diff.abs() == d).to(diff.dtype)).sum(-2)
    a = where(diff == 0, 1, diff.abs())
    d = where(d == 0, 1, d)
    return (diff.sign() * a ** (p - 1) * (g / d ** (p - 1))).sum(-2)


class _CDist(Function):
    """cdist's p-norm over the pairs of rows of x1 and x2 (of one batch shape)."""

    label = "Cdist"

    @staticmethod
    def forward(ctx, x1, x2, p):
        ctx.save_for_backward(x1, x2)
        ctx.p = p
        with no_grad():
            return _p_distances(_differences(x1.detach(), x2.detach()), p)._data

    @staticmethod
    def backward(ctx, g):
        x1, x2 = ctx.saved_tensors
        p = ctx.p
        diff = _differences(x1, x2)
        dist = _p_distances(diff, p)
        g1 = _distance_grad(g, diff, dist, p) if ctx.next[0] is not None else None
        g2 = None
        if ctx.next[1] is not None:  # (x2's rows against x1's: the difference negated)
            g2 = _distance_grad(g.mT, -diff.transpose(-3, -2), dist.mT, p)
        return g1, g2, None


def _products_distances(x1, x2):
    """The p = 2 distances from one product of the rows: [-2a, |a|^2, 1] . [b, 1, |b|^2]
    = |a - b|^2, floored at 0 before the root (rounding can make it negative)."""
    n1 = (x1 * x1).sum(-1, keepdim=True)
    n2 = (x2 * x2).sum(-1, keepdim=True)
    left = cat([x1 * -2.0, n1, n1 * 0.0 + 1.0], -1)
    right = cat([x2, n2 * 0.0 + 1.0, n2], -1)
    return (left @ right.mT).clamp(min=0.0).sqrt()


class _CDistByProducts(Function):
    """cdist's p = 2 distances from one matrix product, as PyTorch computes them for
    many rows: faster, less exact where two rows nearly coincide. Its gradient is the
    product form of (a - b) / dist, zero where a distance is 0."""

    label = "EuclideanDist"
    saves_output = True  # (the distances: the gradient divides by them)

    @staticmethod
    def forward(ctx, x1, x2):
        ctx.save_for_backward(x1, x2)
        with no_grad():
            return _products_distances(x1.detach(), x2.detach())

    @staticmethod
    def backward(ctx, g):
        x1, x2, dist = ctx.saved_tensors
        zero = dist == 0
        ratio = where(zero, 0, g / where(zero, 1, dist))
        g1 = x1 * ratio.sum(-1, keepdim=True) - ratio @ x2 if ctx.next[0] is not None \
            else None
        g2 = x2 * ratio.sum(-2).unsqueeze(-1) - ratio.mT @ x1 if ctx.next[1] is not None \
            else None
        return g1, g2


@function
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """cdist(x1, x2, p=2.0, compute_mode='use_mm_for_euclid_dist_if_necessary') -> Tensor

    The p-norm distance between each row of x1 (..., P, M) and each row of x2
    (..., R, M), batch dims broadcast: shape (..., P, R). p = 0 counts the coordinates
    that differ, p = inf takes the largest difference. For p = 2 with more than 25 rows
    on a side (or ``compute_mode='use_mm_for_euclid_dist'``) the distances come from one
    matrix product, as PyTorch's; 'donot_use_mm_for_euclid_dist' never does."""
    if compute_mode not in _MODES:
        raise ValueError(f"cdist: {compute_mode!r} is not a valid value for compute_mode; "
                         f"use one of {', '.join(map(repr, _MODES))}")
    a, b = _cdist_inputs(x1, x2, p)
    rows1, rows2 = a.shape[-2], b.shape[-2]
    shape = a.shape[:-1] + (rows2,)
    if 0 in shape or a.shape[-1] == 0:
        # (no pairs, or no features: every distance is 0), in the graph of both inputs
        # with a zero gradient, as PyTorch's
        return a.new_zeros(shape) + (a.sum() + b.sum()) * 0
    mode = _MODES[compute_mode]
    if p == 2 and (mode == 1 or (mode == 0 and (rows1 > 25 or rows2 > 25))):
        return _CDistByProducts.apply(a, b)
    return _CDist.apply(a, b, float(p))


@function
def pdist(input, p=2):  # noqa: A002 (PyTorch's name)
    """pdist(input, p=2) -> Tensor

    The p-norm distance between each pair of rows i < j of an (N, M) input, in the
    order of the upper triangle, row by row: N (N - 1) / 2 values (cdist of the input
    with itself, off its diagonal, with cdist's gradients)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"pdist: input must be a tensor, got {type(input).__name__}")
    if input.ndim != 2:
        raise OpError(f"pdist: expected a 2-D input (rows, features), got shape "
                      f"{tuple(input.shape)}")
    if not input.dtype.is_floating_point:
        raise OpTypeError(f"pdist: only floating point inputs (as in PyTorch), got "
                          f"{input.dtype.name}; convert with .float() first")
    if not isinstance(p, numbers.Real) or math.isnan(p) or p < 0:
        raise OpError(f"pdist: p must be a non-negative number, got {p!r}")
    from ..creation import triu_indices

    n = input.shape[0]
    rows, cols = triu_indices(n, n, 1, device=input.device)
    if rows.shape[0] == 0 or input.shape[1] == 0:
        # (no pairs, or no features: every distance is 0), in the input's graph
        return input.new_zeros((rows.shape[0],)) + input.sum() * 0
    return _CDist.apply(input, input, float(p))[rows, cols]


for _name, _arity, _kind in (("nansum", 1, "any"), ("nanmean", 1, "float"),
                             ("var_mean", 1, "float"), ("aminmax", 1, "any"),
                             ("cov", 1, "any"), ("corrcoef", 1, "any"),
                             ("cdist", 2, "float"), ("pdist", 1, "float")):
    declare(_name, arity=_arity, dtypes=_kind)
