"""PyTorch's top-level linear-algebra names and their Tensor methods: torch.det,
logdet, slogdet, inverse, cholesky, qr, svd, pinverse, matrix_power, matrix_exp and
triangular_solve.
Each is its torch.linalg counterpart under torch's older signature (torch.svd's V is
the transpose of linalg.svd's Vh; torch.qr's some= picks the mode)."""

from __future__ import annotations

import warnings

from ..creation import zeros
from ..errors import OpError, OpTypeError
from .linalg_compose import matrix_exp, power
from .linalg_factor import cholesky as _cholesky
from .linalg_factor import qr as _qr
from .linalg_factor import svd as _svd
from .linalg_factor import svdvals
from .linalg_lstsq import pinv
from .linalg_results import SVDWithV, TriangularSolve
from .linalg_solve import det as _det
from .linalg_solve import inv
from .linalg_solve import slogdet as _slogdet
from .linalg_triangular import solve_triangular
from .registry import declare, tensor_method


@tensor_method(function=True)
def det(input):  # noqa: A002 (PyTorch's name)
    """det(input) -> Tensor

    The determinant of each square matrix (linalg.det)."""
    return _det(input)


@tensor_method(function=True)
def slogdet(input):  # noqa: A002
    """slogdet(input) -> (Tensor, Tensor)

    (sign, logabsdet) of each determinant (linalg.slogdet)."""
    return _slogdet(input)


@tensor_method(function=True)
def logdet(input):  # noqa: A002
    """logdet(input) -> Tensor

    The log of each determinant: NaN where it is negative, -inf where it is 0."""
    sign, logabsdet = _slogdet(input)
    return logabsdet.masked_fill(sign < 0, float("nan"))


@tensor_method(function=True)
def inverse(input):  # noqa: A002
    """inverse(input) -> Tensor

    The inverse of each square matrix (linalg.inv)."""
    return inv(input)


@tensor_method(function=True)
def cholesky(input, upper=False):  # noqa: A002
    """cholesky(input, upper=False) -> Tensor

    linalg.cholesky under its deprecated name (PyTorch warns too)."""
    warnings.warn("torch.cholesky is deprecated in favor of torch.linalg.cholesky (U = "
                  "torch.linalg.cholesky(A).mH for upper=True)", UserWarning, stacklevel=2)
    return _cholesky(input, upper=upper)


@tensor_method(function=True)
def qr(input, some=True):  # noqa: A002
    """qr(input, some=True) -> (Tensor, Tensor)

    linalg.qr with mode 'reduced' (some=True) or 'complete', under its deprecated name
    (PyTorch warns too)."""
    warnings.warn("torch.qr is deprecated in favor of torch.linalg.qr: Q, R = "
                  "torch.linalg.qr(A, 'reduced' if some else 'complete')", UserWarning,
                  stacklevel=2)
    return _qr(input, "reduced" if some else "complete")


@tensor_method(function=True)
def svd(input, some=True, compute_uv=True):  # noqa: A002
    """svd(input, some=True, compute_uv=True) -> (Tensor, Tensor, Tensor)

    (U, S, V) with input = U diag(S) V^T: linalg.svd's U and S and its Vh transposed,
    reduced where ``some``. compute_uv=False gives S with U and V zero-filled (m x m
    and n x n), as PyTorch."""
    if compute_uv:
        u, s, vh = _svd(input, full_matrices=not some)
        return SVDWithV(u, s, vh.mT)
    s = svdvals(input)
    *batch, m, n = input.shape
    return SVDWithV(zeros(*batch, m, m, dtype=input.dtype, device=input.device), s,
                    zeros(*batch, n, n, dtype=input.dtype, device=input.device))


@tensor_method(function=True)
def pinverse(input, rcond=1e-15):  # noqa: A002
    """pinverse(input, rcond=1e-15) -> Tensor

    The pseudo-inverse, singular values at or below rcond times the largest counted as
    zero (linalg.pinv with rtol=rcond)."""
    return pinv(input, rtol=rcond)


@tensor_method(function=True)
def matrix_power(input, n):  # noqa: A002
    """matrix_power(input, n) -> Tensor

    input^n for square matrices and an int n (linalg.matrix_power)."""
    return power("matrix_power", input, n)


@tensor_method(function=True)
def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):  # noqa: N803
    """triangular_solve(b, A, upper=True, transpose=False, unitriangular=False) -> (Tensor, Tensor)

    (solution, cloned_coefficient): X with A X = b (A^T X = b where ``transpose``) for
    triangular A, linalg.solve_triangular under torch's older argument order (PyTorch
    warns that it is deprecated), and a copy of A broadcast to the batch."""
    warnings.warn("torch.triangular_solve is deprecated in favor of "
                  "torch.linalg.solve_triangular, which takes (A, B) and returns no copy "
                  "of A: X = torch.linalg.solve_triangular(A, B, upper=...)", UserWarning,
                  stacklevel=2)
    op = "triangular_solve"
    if getattr(b, "ndim", 2) < 2:
        raise OpError(f"{op}: Expected b to have at least 2 dimensions, but it has {b.ndim} "
                      f"dimensions instead (shape {b.shape}); a vector is b.unsqueeze(-1)")
    if getattr(A, "dtype", None) is not getattr(b, "dtype", None):
        raise OpTypeError(f"{op}: Expected b and A to have the same dtype, but found b of "
                          f"type {b.dtype.name} and A of type {A.dtype.name} instead")
    x = solve_triangular(A.mT if transpose else A, b, upper=upper != bool(transpose),
                         unitriangular=unitriangular)
    return TriangularSolve(x, A.expand(*x.shape[:-2], *A.shape[-2:]).clone())


tensor_method(matrix_exp, function=True)

for _name in ("det", "slogdet", "logdet", "inverse", "cholesky", "qr", "svd", "pinverse",
              "matrix_power", "matrix_exp"):
    declare(_name)
declare("triangular_solve", arity=2)
