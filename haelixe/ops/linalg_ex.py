"""torch.linalg's _ex forms and cond: solve_ex, inv_ex, cholesky_ex report LAPACK's info
per matrix (int32) instead of raising, unless check_errors=True. info comes from the
host factorization (getrf's first zero pivot; potrf's first leading minor that is not
positive-definite); where every matrix is regular the value is solve's, inv's or
cholesky's, with their gradients, else it is what LAPACK leaves (inf / NaN from the LU,
the partly factored matrix for cholesky). cond composes svdvals, or matrix_norm of A
and of its inverse, inf where A is singular."""

from __future__ import annotations

import functools
import math

import numpy as np

from ..creation import eye, zeros
from ..errors import OpError
from .indexing import where
from .linalg_factor import cholesky, svdvals
from .linalg_host import LinAlgError, batch_prefix, check_float, check_matrices, host, on_device
from .linalg_lu import factor_ex, getrf, lu_solve
from .linalg_norms import matrix_norm
from .linalg_results import CholeskyEx, InvEx, SolveEx
from .linalg_solve import invert, solve_matrices, solve_with


def _first(info):
    """(flat batch index, info) of the first matrix with a nonzero info."""
    i = int(np.flatnonzero(info.reshape(-1))[0])
    return i, int(info.reshape(-1)[i])


def _lu_solver(op, A, B, adjoint=False):  # noqa: N803
    """A X = B through the LU, which goes on past a zero pivot (to inf / NaN); adjoint:
    through the LU of A^T (solve_with's A for left=False, the matrix PyTorch factors)."""
    LU, pivots, _ = factor_ex(op, A.mT if adjoint else A, True, False)
    return lu_solve(LU, pivots, B, adjoint=adjoint)


def solve_ex(A, B, *, left=True, check_errors=False):
    """linalg.solve_ex(A, B, *, left=True, check_errors=False) -> (Tensor, Tensor)

    (result, info): solve's X, and for each matrix of A LU's info (int32): 0, or the
    1-based column of U's first zero diagonal entry (singular A; result is not finite
    there). ``check_errors`` raises LinAlgError for a singular A instead."""
    op = "linalg.solve_ex"
    check_matrices(op, A)
    _, _, info = getrf(host(A))  # (A itself for left=False too, as PyTorch)
    if check_errors and info.any():
        i, _ = _first(info)
        raise LinAlgError(f"{op}: {batch_prefix(i, A.shape[:-2])}The solver failed because "
                          f"the input matrix is singular (shape {A.shape})")
    solver = functools.partial(_lu_solver, adjoint=not left) if info.any() else solve_matrices
    return SolveEx(solve_with(op, A, B, left, solver), on_device(info, A))


def inv_ex(A, *, check_errors=False):
    """linalg.inv_ex(A, *, check_errors=False) -> (Tensor, Tensor)

    (inverse, info): inv's inverse, and LU's info per matrix (int32; nonzero for a
    singular one, whose inverse is not finite). ``check_errors`` raises instead."""
    op = "linalg.inv_ex"
    check_matrices(op, A)
    _, _, info = getrf(host(A))
    if not info.any():
        return InvEx(invert(op, A), on_device(info, A))
    i, j = _first(info)
    if check_errors:
        raise LinAlgError(f"{op}: {batch_prefix(i, A.shape[:-2])}The diagonal element {j} "
                          f"is zero, the inversion could not be completed because the input "
                          f"matrix is singular (shape {A.shape})")
    identity = eye(A.shape[-1], dtype=A.dtype, device=A.device).expand(*A.shape)
    return InvEx(_lu_solver(op, A, identity), on_device(info, A))


def potf2(a):
    """LAPACK's unblocked Cholesky over numpy for ``a`` (*, n, n), its lower triangle read:
    (the lower factor, info (*) int32). Where a leading minor of order j is not
    positive-definite, info is j and the matrix is left as LAPACK leaves it: its first
    j - 1 columns factored, the j-th diagonal entry the value that was not positive, the
    rest as it was."""
    n = a.shape[-1]
    w = np.tril(np.array(a, copy=True)).reshape((-1, n, n))
    info = np.zeros(w.shape[0], np.int32)
    running = np.ones(w.shape[0], bool)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for j in range(n):
            row = w[:, j, :j]
            d = w[:, j, j] - np.einsum("bk,bk->b", row, row)
            bad = running & ~(d > 0)  # (not positive, or NaN)
            info[bad] = j + 1
            w[bad, j, j] = d[bad]
            running &= ~bad
            r = running
            root = np.sqrt(d[r])
            w[r, j, j] = root
            below = w[r, j + 1:, j] - np.einsum("bik,bk->bi", w[r, j + 1:, :j], row[r])
            w[r, j + 1:, j] = below * (1 / root)[:, None]
    return w.reshape(a.shape), info.reshape(a.shape[:-2])


def cholesky_ex(A, *, upper=False, check_errors=False):
    """linalg.cholesky_ex(A, *, upper=False, check_errors=False) -> (Tensor, Tensor)

    (L, info): cholesky's factor and, per matrix, 0 or the order of the first leading
    minor that is not positive-definite (int32), where L is the partly factored matrix
    LAPACK leaves (no gradient then). ``check_errors`` raises LinAlgError instead."""
    op = "linalg.cholesky_ex"
    check_matrices(op, A)
    factor, info = potf2(host(A.mT if upper else A))
    if not info.any():
        return CholeskyEx(cholesky(A, upper=upper), on_device(info, A))
    if check_errors:
        i, j = _first(info)
        raise LinAlgError(f"{op}: {batch_prefix(i, A.shape[:-2])}The factorization could "
                          f"not be completed because the input is not positive-definite "
                          f"(the leading minor of order {j} is not positive-definite; shape "
                          f"{A.shape})")
    out = on_device(factor, A)
    return CholeskyEx(out.mT.contiguous() if upper else out, on_device(info, A))


#: the orders cond takes: the singular values' ratio, or a matrix norm's
COND_ORDERS = (None, 2, -2, "fro", "nuc", math.inf, -math.inf, 1, -1)


def cond(A, p=None):
    """linalg.cond(A, p=None) -> Tensor

    The condition number of each matrix of A in the p-norm: p None or 2 the largest over
    the smallest singular value (-2 the inverse; any A (*, m, n)), 'fro', 'nuc', inf,
    -inf, 1, -1 matrix_norm(A, p) * matrix_norm(inv(A), p) for square A, inf where A is
    singular. 0 for matrices with no entries."""
    op = "linalg.cond"
    check_float(op, A)
    if A.ndim < 2:
        raise OpError(f"{op}: The input tensor must have at least 2 dimensions, got shape "
                      f"{A.shape}")
    if isinstance(p, bool) or p not in COND_ORDERS:
        raise OpError(f"{op} got an invalid norm type: {p}; use None, 2, -2, 'fro', 'nuc', "
                      f"inf, -inf, 1 or -1")
    batch = A.shape[:-2]
    if p in (None, 2, -2):
        if A.numel() == 0:
            return zeros(*batch, dtype=A.dtype, device=A.device)
        s = svdvals(A)
        largest, smallest = s[..., 0], s[..., -1]
        return smallest / largest if p == -2 else largest / smallest
    check_matrices(f"{op}(ord={p})", A)
    n = A.shape[-1]
    if n == 0:
        return zeros(*batch, dtype=A.dtype, device=A.device)
    _, _, info = getrf(host(A))
    if not info.any():
        return matrix_norm(A, p) * matrix_norm(invert(op, A), p)
    # (a singular matrix is inverted as the identity, then its result masked to inf, so
    # no inf / NaN reaches the gradients of the others)
    singular = on_device(info > 0, A)
    identity = eye(n, dtype=A.dtype, device=A.device)
    regular = where(singular.unsqueeze(-1).unsqueeze(-1), identity, A)
    out = matrix_norm(A, p) * matrix_norm(invert(op, regular), p)
    return out.masked_fill(singular, math.inf)
