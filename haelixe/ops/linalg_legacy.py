"""torch's older linear-algebra names beside linalg_toplevel's: cholesky_solve and
cholesky_inverse (a solve and an inverse of L L^T, its factor's triangle read as LAPACK
reads it, with PyTorch's gradients),
frobenius_norm and nuclear_norm (deprecated: linalg's norms), trapz (trapezoid's older
name) and matrix_rank, which PyTorch keeps only to say where it went."""

from __future__ import annotations

import warnings

from ..errors import OpError
from ..tensor import Tensor
from .calculus import trapezoid
from .linalg_norms import matrix_norm, vector_norm
from .linalg_solve import inv, solve
from .registry import declare, function, tensor_method


def _factor(op, L):
    if not isinstance(L, Tensor):
        raise TypeError(f"{op}: the factor must be a Tensor, got {type(L).__name__}")
    if L.ndim < 2 or L.shape[-1] != L.shape[-2]:
        raise OpError(f"{op}: the factor must be a batch of square matrices, got shape "
                      f"{L.shape}")


def _cholesky_solve(B, L, upper, op):
    _factor(op, L)
    if not isinstance(B, Tensor) or B.ndim < 2:
        raise OpError(f"{op}: B must be a batch of matrices (at least 2 dims), got "
                      f"{getattr(B, 'shape', type(B).__name__)}")
    if B.shape[-2] != L.shape[-1]:
        raise OpError(f"{op}: incompatible matrix sizes: B of shape {B.shape}, factor of "
                      f"shape {L.shape} ({B.shape[-2]} != {L.shape[-1]})")
    if B.dtype is not L.dtype:
        raise OpError(f"{op}: B ({B.dtype.name}) and the factor ({L.dtype.name}) must have "
                      f"the same dtype; convert one with .to(...)")
    return solve(_spd_of(L, upper), B)


def _spd_of(L, upper):
    """A = L L^T (or U^T U) from the factor's triangle alone, as LAPACK reads it, while
    the gradient reaches every entry of the factor: PyTorch's derivative is that of
    (L L^T)^-1 for the full matrix L (the other triangle's part added with value 0)."""
    half = L.triu() if upper else L.tril()
    other = L - L.detach()
    full = half + (other.tril(-1) if upper else other.triu(1))
    return full.mT @ full if upper else full @ full.mT


@tensor_method(function=True)
def cholesky_solve(B, L, upper=False, *, out=None):  # noqa: N803 (PyTorch's names)
    """cholesky_solve(B, L, upper=False) -> Tensor

    The solution X of A X = B, given A's Cholesky factor L (lower, or upper with
    upper=True: A = L L^T or U^T U); batches broadcast."""
    if out is not None:
        raise OpError("cholesky_solve: out= is not supported; assign the result instead")
    return _cholesky_solve(B, L, upper, "cholesky_solve")


@tensor_method(function=True)
def cholesky_inverse(L, upper=False, *, out=None):  # noqa: N803
    """cholesky_inverse(L, upper=False) -> Tensor

    The inverse of A given its Cholesky factor (A = L L^T, or U^T U with upper=True)."""
    if out is not None:
        raise OpError("cholesky_inverse: out= is not supported; assign the result instead")
    _factor("cholesky_inverse", L)
    return inv(_spd_of(L, upper))


@function
def frobenius_norm(input, dim, keepdim=False, *, out=None):  # noqa: A002
    """frobenius_norm(input, dim, keepdim=False) -> Tensor

    sqrt of the sum of squares over ``dim`` (deprecated, as in PyTorch: use
    linalg.vector_norm(input, 2, dim, keepdim))."""
    warnings.warn("frobenius_norm is deprecated; use linalg.vector_norm(A, 2., dim, "
                  "keepdim) instead", UserWarning, stacklevel=2)
    if out is not None:
        raise OpError("frobenius_norm: out= is not supported; assign the result instead")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise OpError(f"frobenius_norm: expected at most 2 dims, got {dims}")
    return vector_norm(input, 2, dims, keepdim)


@function
def nuclear_norm(input, dim=None, keepdim=False, *, out=None):  # noqa: A002
    """nuclear_norm(input, keepdim=False) or nuclear_norm(input, dim, keepdim=False)

    The sum of the singular values of the matrices over ``dim`` (a 2-D input's own by
    default); deprecated, as in PyTorch: use linalg.matrix_norm(input, 'nuc', ...)."""
    warnings.warn("nuclear_norm is deprecated; use linalg.matrix_norm(A, 'nuc', dim, "
                  "keepdim) instead", UserWarning, stacklevel=2)
    if out is not None:
        raise OpError("nuclear_norm: out= is not supported; assign the result instead")
    if isinstance(dim, bool):  # (the overload without dim: its second argument)
        dim, keepdim = None, dim
    if dim is None:
        if input.ndim != 2:
            raise OpError(f"nuclear_norm: expected a 2-D tensor without dim, got shape "
                          f"{input.shape}; pass the two matrix dims")
        dim = (0, 1)
    return matrix_norm(input, "nuc", tuple(dim), keepdim)


@function
def trapz(y, x=None, *, dx=None, dim=-1):
    """trapz(y, x=None, *, dim=-1) -> Tensor or trapz(y, *, dx=1, dim=-1) -> Tensor

    trapezoid's older name: the trapezoid rule along ``dim``."""
    return trapezoid(y, x, dx=dx, dim=dim)


@function
def matrix_rank(input, tol=None, symmetric=False, *, out=None):  # noqa: A002
    """matrix_rank(input, tol=None, symmetric=False) -> Tensor

    Removed, as in PyTorch (which keeps the name only to say so): use
    linalg.matrix_rank, whose ``hermitian`` was this ``symmetric``."""
    raise RuntimeError("matrix_rank: this function was deprecated and is now removed (as in "
                       "PyTorch); use linalg.matrix_rank(input, hermitian=symmetric) instead")


declare("cholesky_solve", arity=2)
declare("cholesky_inverse")
