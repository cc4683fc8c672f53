"""torch.linalg's LU: lu_factor, lu_factor_ex, lu and lu_solve. numpy has no getrf, so
``getrf`` here is LAPACK's partial-pivoting LU written over numpy: vectorised over the
batch, one column at a time, each pivot the first largest |entry| of its column (LAPACK's
choice, so the pivots are PyTorch's). The pivots are 1-based int32, as LAPACK's and
PyTorch's. lu and lu_factor are Factor nodes with the LU gradient; lu_solve is composed of
solve_triangular on LU's two triangles and a gather of the pivots' permutation, so its
gradients (B's and LU's) come with them."""

from __future__ import annotations

import math

import numpy as np

from .. import layout
from ..creation import eye, zeros_like
from ..dtype import int32
from ..errors import OpError, OpTypeError
from ..tensor import Tensor
from .indexing import cat
from .linalg import matmul
from .linalg_host import (
    LinAlgError,
    batch_prefix,
    check_float,
    check_matrices,
    host,
    on_device,
    record,
)
from .linalg_results import LU, LUFactor, LUFactorEx
from .linalg_triangular import solve_triangular, triangular


def getrf(a):
    """numpy LU with partial pivoting of ``a`` (*, m, n): (LU packed as LAPACK's, the unit
    lower L below the diagonal and U on and above it; pivots (*, k) 1-based int32; info
    (*) int32, the 1-based column of U's first zero diagonal entry, or 0)."""
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = min(m, n)
    lu = np.array(a, copy=True).reshape((math.prod(batch), m, n))
    pivots = np.zeros((lu.shape[0], k), np.int32)
    info = np.zeros(lu.shape[0], np.int32)
    which = np.arange(lu.shape[0])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for j in range(k):
            p = j + np.argmax(np.abs(lu[:, j:, j]), axis=1)
            pivots[:, j] = p + 1
            row = lu[which, j].copy()
            lu[which, j] = lu[which, p]
            lu[which, p] = row
            d = lu[:, j, j]
            zero = d == 0
            info[(info == 0) & zero] = j + 1
            # (a zero pivot's column is zero below it too: nothing to scale, as LAPACK)
            scale = np.where(zero, 0, 1 / np.where(zero, 1, d)).astype(lu.dtype)
            lu[:, j + 1:, j] *= scale[:, None]
            lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j, None] * lu[:, j, None, j + 1:]
    return (lu.reshape(a.shape), pivots.reshape(batch + (k,)), info.reshape(batch))


def permutation(pivots, m):
    """The row order of P^T A for LAPACK's pivots (*, k): (P^T A)[i] = A[order[i]]."""
    flat = pivots.reshape((math.prod(pivots.shape[:-1]), pivots.shape[-1])).astype(np.int64) - 1
    order = np.broadcast_to(np.arange(m), (flat.shape[0], m)).copy()
    which = np.arange(flat.shape[0])
    for j in range(flat.shape[1]):
        p = flat[:, j]
        row = order[which, j].copy()
        order[which, j] = order[which, p]
        order[which, p] = row
    return order.reshape(pivots.shape[:-1] + (m,))


def _check_pivot(op, pivot):
    if not pivot:
        raise OpError(f"{op}: LU without pivoting is not implemented on the CPU (PyTorch "
                      f"has it on CUDA only; Haelixe computes LU on the host for every "
                      f"device): pass pivot=True")


def _lu_error(op, info, batch_shape):
    i = int(np.flatnonzero(info.reshape(-1))[0])
    j = int(info.reshape(-1)[i])
    return LinAlgError(f"{op}: {batch_prefix(i, batch_shape)}U[{j},{j}] is zero and using "
                       f"it on lu_solve would result in a division by zero. If you still "
                       f"want to perform the factorization, consider calling "
                       f"linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def lu_factor(A, *, pivot=True):
    """linalg.lu_factor(A, *, pivot=True) -> (Tensor, Tensor)

    (LU, pivots): A = P L U packed as LAPACK's (L unit lower below the diagonal, U on and
    above it), pivots (*, min(m, n)) 1-based int32, for A (*, m, n); raises LinAlgError
    where U has a zero on its diagonal (lu_factor_ex reports it instead)."""
    LU_, pivots, _ = factor_ex("linalg.lu_factor", A, pivot, True)
    return LUFactor(LU_, pivots)


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """linalg.lu_factor_ex(A, *, pivot=True, check_errors=False) -> (Tensor, Tensor, Tensor)

    (LU, pivots, info): lu_factor's results and info (*) int32, for each matrix the
    1-based column of U's first zero diagonal entry, or 0; ``check_errors`` raises
    LinAlgError where one is nonzero."""
    return LUFactorEx(*factor_ex("linalg.lu_factor_ex", A, pivot, check_errors))


def factor_ex(op, A, pivot, check_errors):
    _check_pivot(op, pivot)
    check_matrices(op, A, square=False)
    lu, pivots, info = getrf(host(A))
    if check_errors and info.any():
        raise _lu_error(op, info, A.shape[:-2])
    m, n = A.shape[-2:]

    def gradient(inputs, outputs, grads):
        (a,), (packed,), (g,) = inputs, outputs, grads
        k = min(m, n)
        L, U = _unpack(packed, m, n)
        return (_lu_gradient(a, perm, L, U, g[..., :, :k].tril(-1), g[..., :k, :].triu()),)

    perm = permutation(pivots, m)
    out = record("LinalgLuFactor", (lu,), (A,), gradient,
                 lambda a: (factor_ex(op, a, True, False)[0],))[0]
    return out, on_device(pivots, A), on_device(info, A)


def _unpack(packed, m, n):
    """(L (*, m, k) unit lower, U (*, k, n) upper) from LAPACK's packed LU, as tensors."""
    k = min(m, n)
    unit = eye(m, k, dtype=packed.dtype, device=packed.device)
    return packed[..., :, :k].tril(-1) + unit, packed[..., :k, :].triu()


def lu(A, *, pivot=True):
    """linalg.lu(A, *, pivot=True) -> (Tensor, Tensor, Tensor)

    (P, L, U) with A = P L U for A (*, m, n): P (*, m, m) a permutation matrix, L
    (*, m, k) unit lower triangular, U (*, k, n) upper triangular, k = min(m, n). No
    error for a singular A; P has no gradient, L and U have LU's."""
    op = "linalg.lu"
    _check_pivot(op, pivot)
    check_matrices(op, A, square=False)
    m, n = A.shape[-2:]
    k = min(m, n)
    packed, pivots, _ = getrf(host(A))
    perm = permutation(pivots, m)
    L = np.tril(packed[..., :, :k], -1) + np.eye(m, k, dtype=packed.dtype)
    U = np.triu(packed[..., :k, :])
    P = np.zeros(A.shape[:-2] + (m, m), packed.dtype)
    np.put_along_axis(P, perm[..., None, :], 1, axis=-2)  # P[order[i], i] = 1

    def gradient(inputs, outputs, grads):
        (a,), (l_, u_), (gl, gu) = inputs, outputs, grads
        return (_lu_gradient(a, perm, l_, u_, zeros_like(l_) if gl is None else gl,
                             zeros_like(u_) if gu is None else gu),)

    L, U = record("LinalgLu", (L, U), (A,), gradient, lambda a: tuple(lu(a)[1:]))
    return LU(on_device(P, A), L, U)


def _lu_gradient(A, perm, L, U, gL, gU):
    """The gradient of A = P L U from L's and U's: square, A' = P^T A has
    gA' = L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T; a wide A' = L [U1 | U2] adds
    U2 = L^-1 A2's, a tall A' = [L1; L2] U adds L2 = A2 U^-1's."""
    m, n = A.shape[-2:]
    if m < n:
        U1, U2, gU1, gU2 = U[..., :m], U[..., m:], gU[..., :m], gU[..., m:]
        g2 = solve_triangular(L.mT, gU2, upper=True, unitriangular=True)
        g1 = _square_gradient(L, U1, gL - matmul(g2, U2.mT), gU1)
        return _unpermute(cat([g1, g2], -1), perm)
    if m > n:
        L1, L2, gL1, gL2 = L[..., :n, :], L[..., n:, :], gL[..., :n, :], gL[..., n:, :]
        g2 = solve_triangular(U.mT, gL2, upper=False, left=False)
        g1 = _square_gradient(L1, U, gL1, gU - matmul(L2.mT, g2))
        return _unpermute(cat([g1, g2], -2), perm)
    return _unpermute(_square_gradient(L, U, gL, gU), perm)


def _square_gradient(L, U, gL, gU):
    inner = matmul(L.mT, gL).tril(-1) + matmul(gU, U.mT).triu()
    y = solve_triangular(L.mT, inner, upper=True, unitriangular=True)
    return solve_triangular(U.mT, y, upper=False, left=False)


def _unpermute(g, perm):
    """P g for the gradient g of P^T A: row i of g goes to row order[i]."""
    inverse = np.argsort(perm, axis=-1)
    return _rows(g, inverse)


def _rows(t, order):
    """t's rows (dim -2) in ``order`` (*, m), a host int array over t's batch."""
    index = np.broadcast_to(order[..., :, None], t.shape[:-1] + (1,))
    index = np.broadcast_to(index, t.shape)
    return t.gather(-2, on_device(np.ascontiguousarray(index).astype(np.int64), t))


# -- lu_solve ------------------------------------------------------------------------------
def lu_solve(LU, pivots, B, *, left=True, adjoint=False):  # noqa: N803 (PyTorch's names)
    """linalg.lu_solve(LU, pivots, B, *, left=True, adjoint=False) -> Tensor

    X with A X = B for A = P L U given as lu_factor's (LU, pivots); adjoint=True solves
    A^T X = B, left=False X A = B (or X A^T = B). LU (*, n, n), pivots (*, n) int32 of
    LU's batch shape, B (*, n, k) (left=False: (*, k, n)); B's batch broadcasts."""
    op = "linalg.lu_solve"
    check_float(op, LU, "LU")
    check_float(op, B, "B")
    if LU.ndim < 2:
        raise OpError(f"{op}: The input tensor LU must have at least 2 dimensions, got "
                      f"shape {LU.shape}")
    if LU.shape[-1] != LU.shape[-2]:
        raise OpError(f"{op}: A must be batches of square matrices, but they are "
                      f"{LU.shape[-2]} by {LU.shape[-1]} matrices")
    if B.ndim < 2:
        raise OpError(f"{op}: The input tensor B must have at least 2 dimensions, got "
                      f"shape {B.shape}; a vector b is b.unsqueeze(-1)")
    if not isinstance(pivots, Tensor) or pivots.dtype is not int32:
        what = pivots.dtype.name if isinstance(pivots, Tensor) else type(pivots).__name__
        raise OpTypeError(f"{op}: pivots should be a Tensor of scalar type torch.int32, got "
                          f"{what}; pass lu_factor's pivots")
    if B.dtype is not LU.dtype:
        raise OpTypeError(f"{op}: Expected LU and B to have the same dtype, but found LU of "
                          f"type {LU.dtype.name} and B of type {B.dtype.name} instead")
    n = LU.shape[-1]
    if pivots.ndim == 0 or pivots.shape[-1] != n:
        raise OpError(f"{op}: Number of pivots per batch should be same as the dimension "
                      f"of the matrix ({n}), got pivots of shape {pivots.shape}")
    if tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise OpError(f"{op}: Expected LU.shape[:-1] and pivots.shape to be the same, but "
                      f"got pivots with shape {list(pivots.shape)} instead (LU "
                      f"{list(LU.shape)})")
    rows = B.shape[-2] if left else B.shape[-1]
    if rows != n:
        raise OpError(f"{op}: Incompatible shapes of A and B for the equation "
                      f"{'AX = B' if left else 'XA = B'} ({n}x{n} and "
                      f"{B.shape[-2]}x{B.shape[-1]})")
    p = host(pivots)
    if p.size and (p.min() < 1 or p.max() > n):
        bound = "greater or equal to 1" if p.min() < 1 else "smaller or equal to LU.size(-2)"
        raise OpError(f"{op}: Pivots given to lu_solve must all be {bound}, got values in "
                      f"[{p.min()}, {p.max()}]. Did you properly pass the result of "
                      f"lu_factor?")
    if not left:  # X A = B is A^T X^T = B^T (and X A^T = B is A X^T = B^T)
        return _lu_solve(op, LU, p, B.mT, not adjoint).mT
    return _lu_solve(op, LU, p, B, adjoint)


def _lu_solve(op, LU, p, B, adjoint):  # noqa: N803
    batch = layout.broadcast_shapes(LU.shape[:-2], B.shape[:-2], op=f"{op} (batch dims)")
    n = LU.shape[-1]
    LU, B = LU.expand(*batch, n, n), B.expand(*batch, *B.shape[-2:])
    order = np.broadcast_to(permutation(p, n), batch + (n,))
    if not adjoint:  # U^-1 L^-1 P^T B
        y = triangular(op, LU, _rows(B, order), False, True)
        return triangular(op, LU, y, True, False)
    # A^T = U^T L^T P^T: X = P L^-T U^-T B
    y = triangular(op, LU.mT, B, False, False)
    z = triangular(op, LU.mT, y, True, True)
    return _rows(z, np.argsort(order, axis=-1))


