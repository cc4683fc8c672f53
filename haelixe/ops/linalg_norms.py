"""torch.linalg's norms: vector_norm, matrix_norm and norm, which picks one of them.
Composed of recorded ops (abs, sums, amax / amin, powers, the 2-norm's Function, svdvals
for the spectral and nuclear norms), so their gradients come with them: at zero the
2-norm's is 0, and a maximum tied between entries shares its gradient, as PyTorch's."""

from __future__ import annotations

import math
import numbers

from .. import layout
from ..dtype import as_dtype, bfloat16, float16, float32, promote_types
from ..errors import OpError, OpIndexError, OpTypeError
from ..tensor import Tensor
from .linalg_factor import svdvals
from .linalg_host import check_float
from .reduce import _dims, _Norm2


def _cast(op, x, dtype):
    """x in ``dtype`` (None: as it is), which must be a float it widens to."""
    if dtype is None:
        return x
    dtype = as_dtype(dtype)
    if not dtype.is_floating_point:
        raise OpTypeError(f"{op}: dtype should be floating point, but got {dtype.name}")
    if promote_types(x.dtype, dtype) is not dtype:
        raise OpTypeError(f"{op}: the dtype of the input ({x.dtype.name}) should be "
                          f"convertible without narrowing to the specified dtype "
                          f"({dtype.name})")
    return x.to(dtype)


def _order(op, ord):  # noqa: A002 (PyTorch's name)
    if isinstance(ord, Tensor):
        ord = ord.item()  # noqa: A001
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real):
        raise TypeError(f"{op}: ord must be a number (inf, -inf, 0 or any real), got "
                        f"{ord!r}; 'fro' and 'nuc' are matrix norms (linalg.matrix_norm)")
    return float(ord)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """linalg.vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None) -> Tensor

    The ord-norm of x over ``dim`` (all of x, as one vector, by default): inf the
    largest |x|, -inf the smallest, 0 the count of nonzeros, else sum(|x|^ord)^(1/ord).
    ``dtype``: x is cast to it first (a float it widens to)."""
    op = "linalg.vector_norm"
    check_float(op, x, "input", low_precision=True)
    p = _order(op, ord)
    x = _cast(op, x, dtype)
    dims = _dims(x, dim, op)
    if (p < 0 or p == math.inf) and math.prod(x.shape[d] for d in dims) == 0 and x.ndim:
        raise OpError(f"{op}: cannot compute the {p:g} norm over an empty dimension (shape "
                      f"{x.shape}, dim={dim}): the operation has no identity")
    if x.dtype in (bfloat16, float16):  # (summed in float32, rounded once)
        return _vector_norm(x.to(float32), p, dims, keepdim).to(x.dtype)
    return _vector_norm(x, p, dims, keepdim)


def _vector_norm(x, p, dims, keepdim):
    if p == 2:
        return _Norm2.apply(x, dims, keepdim)
    a = x.abs()
    if p == math.inf:
        return a.amax(dims, keepdim)
    if p == -math.inf:
        return a.amin(dims, keepdim)
    if p == 0:
        return (x != 0).to(x.dtype).sum(dims, keepdim)
    if p == 1:
        return a.sum(dims, keepdim)
    return (a ** p).sum(dims, keepdim) ** (1.0 / p)


MATRIX_ORDERS = ("fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2)


def _matrix_dims(op, A, dim):
    if not isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}: dim must be a 2-tuple of ints, got {dim!r}")
    if len(dim) != 2:
        raise OpError(f"{op}: dim must be a 2-tuple. Got {' '.join(map(str, dim))}")
    d0, d1 = (layout.normalize_dim(d, A.ndim, op) for d in dim)
    if d0 == d1:
        raise OpError(f"{op}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002
    """linalg.matrix_norm(A, ord='fro', dim=(-2, -1), keepdim=False, *, dtype=None) -> Tensor

    The ord-norm of the matrices over the two dims ``dim``: 'fro' sqrt(sum A^2), 'nuc'
    the sum of singular values, 2 / -2 the largest / smallest singular value, 1 / -1
    the largest / smallest column sum of |A|, inf / -inf the same of row sums."""
    op = "linalg.matrix_norm"
    check_float(op, A, low_precision=True)
    if isinstance(ord, Tensor):
        ord = ord.item()  # noqa: A001
    if A.ndim < 2:
        raise OpError(f"{op}: The input tensor A must have at least 2 dimensions, got "
                      f"shape {A.shape}")
    if isinstance(ord, bool) or ord not in MATRIX_ORDERS:
        raise OpError(f"{op}: Order {ord} not supported; use one of 'fro', 'nuc', inf, "
                      f"-inf, 1, -1, 2, -2")
    d0, d1 = _matrix_dims(op, A, dim)
    A = _cast(op, A, dtype)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        if A.dtype in (bfloat16, float16):
            raise OpTypeError(f"{op}: the {ord} norm needs singular values, which are "
                              f"not computed for {A.dtype.name} (as in PyTorch); convert "
                              f"with .float() first")
        s = svdvals(A.movedim((d0, d1), (-2, -1)))
        out = s.sum(-1) if ord == "nuc" else _extreme(op, s, -1, ord, ord > 0)
        return out.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1)) if keepdim else out
    # 1 / -1: sums over rows (d0), the extreme over columns; inf / -inf the other way
    summed, across = (d0, d1) if abs(ord) == 1 else (d1, d0)
    sums = A.abs().sum(summed, keepdim=True)
    out = _extreme(op, sums, across, ord, ord > 0, keepdim=True)
    return out if keepdim else out.squeeze(max(d0, d1)).squeeze(min(d0, d1))


def _extreme(op, t, dim, ord, largest, keepdim=False):  # noqa: A002
    """The max (or min) of the non-negative ``t`` over ``dim``: 0 over no values for a
    max, as PyTorch's matrix norms give; an IndexError for a min, as PyTorch raises."""
    if t.shape[dim] == 0:
        if not largest:
            raise OpIndexError(f"{op}: the {ord} norm takes a minimum over a dim of size "
                               f"0 (shape {t.shape}); it has no value there")
        return t.sum(dim, keepdim)  # (a sum over no values: zeros of the result's shape)
    return t.amax(dim, keepdim) if largest else t.amin(dim, keepdim)


def norm(input, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """linalg.norm(input, ord=None, dim=None, keepdim=False, *, dtype=None) -> Tensor

    vector_norm where ``dim`` is an int or one dim, matrix_norm where it is two dims or
    ``ord`` is a string; without dim, the 2-norm of all of input (ord=None), or ord's norm
    of input as a vector (1-D) or a matrix (2-D)."""
    op, A = "linalg.norm", input
    check_float(op, A, "input", low_precision=True)
    if isinstance(ord, str):
        return matrix_norm(A, ord, (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if dim is not None:
        dims = (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise OpError(f"{op}: If dim is specified, it must be of length 1 or 2. Got "
                      f"{list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise OpError(f"{op}: If dim is not specified but ord is, the input must be 1D or 2D. "
                  f"Got {A.ndim}D (shape {A.shape}); pass dim=")
