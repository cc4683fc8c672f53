"""Numerical integration and differentiation of sampled values: trapezoid,
cumulative_trapezoid and gradient (PyTorch's), composed of slices, arithmetic, sums
and cat, so their gradients and every backend come with them."""

from __future__ import annotations

import numbers

from .. import dtype as _dtypes
from .. import layout
from ..errors import OpError
from ..tensor import Tensor
from .convert import cast
from .indexing import cat
from .registry import declare, function


def _along(t, dim, start, stop):
    """t[..., start:stop, ...] with the slice on ``dim``."""
    return t[(slice(None),) * dim + (slice(start, stop),)]


def _check_input(op, y):
    if not isinstance(y, Tensor):
        raise TypeError(f"{op}: y must be a Tensor, got {type(y).__name__}")


def _x_steps(op, y, x, dim):
    """x[1:] - x[:-1] along ``dim``, shaped to broadcast against y's slices: x is 1-d
    (one coordinate per sample) or broadcasts against y."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: x must be a Tensor (pass a constant spacing as dx=), got "
                        f"{type(x).__name__}")
    n = y.shape[dim]
    if x.ndim == 1:
        if x.shape[0] != n:
            raise OpError(f"{op}: There must be one `x` value for each sample point: y has "
                          f"{n} along dim {dim} (shape {y.shape}), x has {x.shape[0]}")
        x = x.reshape(tuple(n if d == dim else 1 for d in range(y.ndim)))
    else:
        if x.ndim < y.ndim:
            x = x.reshape((1,) * (y.ndim - x.ndim) + tuple(x.shape))
        at = dim - (y.ndim - x.ndim) if x.ndim > y.ndim else dim
        if x.ndim > y.ndim or x.shape[at] != n:
            raise OpError(f"{op}: There must be one `x` value for each sample point: y has "
                          f"shape {y.shape}, x has shape {x.shape} (dim {dim})")
    if x.device is not y.device:
        raise RuntimeError(f"{op}: y is on {y.device.type} and x on {x.device.type}; move "
                           f"one with .to(...)")
    return _along(x, dim, 1, n) - _along(x, dim, 0, max(n - 1, 0))


def _prepare(op, y, x, dx, dim):
    _check_input(op, y)
    if x is not None and dx is not None:
        raise OpError(f"{op}: pass x (the sample coordinates) or dx (a constant spacing), "
                      f"not both")
    if y.ndim == 0:
        raise IndexError(f"{op}: Dimension out of range: y is 0-d; integration needs a "
                         f"dim of samples")
    dim = layout.normalize_dim(dim, y.ndim, op)
    n = y.shape[dim]
    # (the pairs and steps in the samples' own dtype, integers included, as PyTorch adds
    # them; the halving makes the result floating)
    pairs = _along(y, dim, 1, n) + _along(y, dim, 0, max(n - 1, 0))
    return y, dim, pairs


@function
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """trapezoid(y, x=None, *, dx=None, dim=-1) -> Tensor

    The trapezoidal rule along ``dim``: sum of (y[i] + y[i+1]) / 2 times the step, the
    steps from the coordinates ``x`` (1-d, one per sample, or broadcasting against y)
    or the constant ``dx`` (1 by default). Integer samples give a float result; fewer
    than two samples give zeros."""
    op = "trapezoid"
    y, dim, pairs = _prepare(op, y, x, dx, dim)
    n = y.shape[dim]
    if n == 0:  # (no steps: zeros in y's own dtype, as PyTorch)
        return y.sum(dim) * 0
    if x is not None:
        steps = _x_steps(op, y, x, dim)
        return (pairs * steps).sum(dim) / 2
    # every sample counts once, the two ends half
    ends = _along(y, dim, 0, 1).sum(dim) + _along(y, dim, n - 1, n).sum(dim)
    return (y.sum(dim) - ends * 0.5) * (1 if dx is None else dx)


@function
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """cumulative_trapezoid(y, x=None, *, dx=None, dim=-1) -> Tensor

    trapezoid's partial sums: element i is the integral from sample 0 to sample i + 1,
    so ``dim`` has one element fewer than y's (none for one or no samples)."""
    op = "cumulative_trapezoid"
    y, dim, pairs = _prepare(op, y, x, dx, dim)
    if x is not None:
        steps = _x_steps(op, y, x, dim)
        return (pairs * steps / 2).cumsum(dim)
    return (pairs * ((1 if dx is None else dx) / 2)).cumsum(dim)


# -- gradient ---------------------------------------------------------------------------
def _dims(op, f, dim):
    if dim is None:
        return list(range(f.ndim)), False
    items = [dim] if isinstance(dim, numbers.Integral) else list(dim)
    dims = [layout.normalize_dim(d, f.ndim, op) for d in items]
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"{op}: dim {tuple(items)} appears multiple times in the list of "
                           f"dims")
    return dims, True


def _spacings(op, f, spacing, dims, dim_given):
    """One spacing per dim: a number (uniform steps) or a 1-d coordinate tensor."""
    if isinstance(spacing, (numbers.Number, Tensor)) and not (
            isinstance(spacing, Tensor) and spacing.ndim > 0):
        h = spacing.item() if isinstance(spacing, Tensor) else spacing
        return [h] * len(dims)
    if isinstance(spacing, Tensor):
        raise TypeError(f"{op}: spacing must be a number or a list/tuple (of numbers or 1-d "
                        f"coordinate tensors, one per dim), got a tensor of shape "
                        f"{spacing.shape}; wrap it in a tuple: spacing=(t,)")
    spacing = list(spacing)
    if len(spacing) != len(dims):
        if dim_given:
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar "
                               f"or it's spacing and dim arguments to have the same length, "
                               f"but got a spacing argument of length {len(spacing)} and a "
                               f"dim argument of length {len(dims)}.")
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or "
                           f"a list of length equal to 'self.dim() = {f.ndim}', since dim "
                           f"argument was not given, but got a list of length "
                           f"{len(spacing)}")
    kinds = {isinstance(s, Tensor) and s.ndim > 0 for s in spacing}
    if len(kinds) > 1:  # (PyTorch's overloads take numbers or tensors, not both)
        raise TypeError(f"{op}: spacing mixes numbers and coordinate tensors; give every "
                        f"dim a number, or every dim a 1-d tensor")
    out = []
    for s, d in zip(spacing, dims):
        if isinstance(s, Tensor) and s.ndim == 0:
            s = s.item()
        if isinstance(s, Tensor):
            if s.ndim != 1 or s.shape[0] != f.shape[d]:
                raise RuntimeError(f"torch.gradient expected each tensor to be 1-d with one "
                                   f"coordinate per sample: dim {d} has {f.shape[d]} "
                                   f"samples, the spacing tensor has shape {s.shape}")
            if s.device is not f.device:
                raise RuntimeError(f"torch.gradient expected each tensor to be on the same "
                                   f"device as the input ({f.device.type}), got "
                                   f"{s.device.type}")
            coords = f.dtype if f.dtype.is_floating_point else _dtypes.default_float
            s = cast(s, coords).reshape(tuple(f.shape[d] if k == d else 1
                                              for k in range(f.ndim)))
        elif not isinstance(s, numbers.Number):
            raise TypeError(f"{op}: each spacing must be a number or a 1-d tensor, got "
                            f"{type(s).__name__}")
        out.append(s)
    return out


def _uniform(f, d, h, edge_order):
    n = f.shape[d]
    at = lambda a, b: _along(f, d, a, b)  # noqa: E731
    interior = (at(2, n) - at(0, n - 2)) / (2 * h)
    if edge_order == 1:
        first = (at(1, 2) - at(0, 1)) / h
        last = (at(n - 1, n) - at(n - 2, n - 1)) / h
    else:
        first = (at(0, 1) * -1.5 + at(1, 2) * 2 - at(2, 3) * 0.5) / h
        last = (at(n - 3, n - 2) * 0.5 - at(n - 2, n - 1) * 2 + at(n - 1, n) * 1.5) / h
    return cat([first, interior, last], d)


def _coordinates(f, d, x, edge_order):
    n = f.shape[d]
    at = lambda a, b: _along(f, d, a, b)  # noqa: E731
    step = _along(x, d, 1, n) - _along(x, d, 0, n - 1)
    h1, h2 = _along(step, d, 0, n - 2), _along(step, d, 1, n - 1)
    # the second-order central difference on uneven steps h1 (left), h2 (right)
    interior = (at(0, n - 2) * (-h2 / (h1 * (h1 + h2))) + at(1, n - 1) * ((h2 - h1) / (h1 * h2))
                + at(2, n) * (h1 / (h2 * (h1 + h2))))
    if edge_order == 1:
        first = (at(1, 2) - at(0, 1)) / _along(step, d, 0, 1)
        last = (at(n - 1, n) - at(n - 2, n - 1)) / _along(step, d, n - 2, n - 1)
    else:
        a, b = _along(step, d, 0, 1), _along(step, d, 1, 2)
        first = (at(0, 1) * (-(2 * a + b) / (a * (a + b))) + at(1, 2) * ((a + b) / (a * b))
                 + at(2, 3) * (-a / (b * (a + b))))
        a, b = _along(step, d, n - 3, n - 2), _along(step, d, n - 2, n - 1)
        last = (at(n - 3, n - 2) * (b / (a * (a + b))) + at(n - 2, n - 1) * (-(a + b) / (a * b))
                + at(n - 1, n) * ((2 * b + a) / (b * (a + b))))
    return cat([first, interior, last], d)


@function
def gradient(input, *, spacing=1, dim=None, edge_order=1):  # noqa: A002 (PyTorch's names)
    """gradient(input, *, spacing=1, dim=None, edge_order=1) -> List of Tensors

    The derivative of sampled values along each of ``dim`` (all dims by default), a
    tuple of tensors of input's shape: central differences inside, one-sided ones
    (first or second order: ``edge_order``) at the ends. ``spacing`` is a number (the
    step of every dim), or a list with one number or 1-d coordinate tensor per dim."""
    op = "gradient"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    if edge_order not in (1, 2) or isinstance(edge_order, bool):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims, dim_given = _dims(op, input, dim)
    steps = _spacings(op, input, spacing, dims, dim_given)
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError(f"torch.gradient expected each dimension size to be at least "
                               f"edge_order+1: dim {d} has {input.shape[d]} (shape "
                               f"{input.shape}, edge_order={edge_order})")
    if input.dtype.name in ("bool", "uint8"):
        raise RuntimeError(f"torch.gradient does not support {input.dtype.name} input; "
                           f"convert it with .float() (or .int())")
    f = input
    return tuple(_coordinates(f, d, h, edge_order) if isinstance(h, Tensor)
                 else _uniform(f, d, h, edge_order) for d, h in zip(dims, steps))


for _name in ("trapezoid", "cumulative_trapezoid"):
    declare(_name, arity=1, dtypes="any")
declare("gradient", arity=1, dtypes="any")
del _name
