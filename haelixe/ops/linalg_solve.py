"""torch.linalg's determinants, inverse and solve: det, slogdet, inv, solve. Each is
computed on the host (LU through numpy's LAPACK) and recorded as a Factor node with its
standard gradient: inv's -X^T g X^T, det's g * cofactor(A), slogdet's g * A^-T, solve's
gB = A^-T g, gA = -gB X^T."""

from __future__ import annotations

import numpy as np

from .. import layout
from ..autograd.mode import STATE
from ..creation import zeros_like
from ..errors import OpError, OpTypeError
from ..tensor import Tensor
from .linalg import matmul
from .linalg_host import (
    LinAlgError,
    batch_prefix,
    check_matrices,
    first_failing,
    host,
    on_device,
    record,
    stack,
    zero_pivot,
)
from .linalg_results import SLogDet


# -- det and slogdet -----------------------------------------------------------------------
def det(A):
    """linalg.det(A) -> Tensor

    The determinant of each square matrix of A (*, n, n); 1 for a 0 x 0 matrix."""
    check_matrices("linalg.det", A)
    d = np.asarray(np.linalg.det(host(A)), dtype=A.dtype.np)
    return record("LinalgDet", (d,), (A,), _det_gradient, lambda a: (det(a),))[0]


def _det_gradient(inputs, outputs, grads):
    (A,), (d,), (g,) = inputs, outputs, grads
    if STATE.grad_enabled:  # (a graph of its own: det * A^-T with ops, A invertible)
        return (_scales(g * d) * inv(A).mT,)
    return (_scales(g) * on_device(_cofactors(host(A)), A),)


def _scales(t):
    """A batch of numbers (*,) as (*, 1, 1), to scale a batch of matrices."""
    return t.unsqueeze(-1).unsqueeze(-1)


def _cofactors(a):
    """The cofactor matrix of each matrix of ``a`` (the gradient of its determinant):
    det(A) A^-T where A is invertible; from the SVD A = U S V^T where it is singular,
    det(U) det(V) U diag(prod_{j != i} s_j) V^T, which stays exact there (PyTorch
    gives zeros for an exactly singular matrix)."""
    out = np.zeros_like(a)
    flat, res = stack(a), stack(out)
    if flat.shape[0] == 0 or a.shape[-1] == 0:
        return out
    d = np.linalg.det(flat)
    regular = d != 0
    if regular.any():
        res[regular] = d[regular, None, None] * np.linalg.inv(flat[regular]).swapaxes(-1, -2)
    if not regular.all():
        u, s, vt = np.linalg.svd(flat[~regular])
        n = s.shape[-1]
        others = np.where(np.eye(n, dtype=bool), 1, s[..., None, :]).prod(-1)
        signs = np.linalg.det(u) * np.linalg.det(vt)
        res[~regular] = signs[:, None, None] * ((u * others[..., None, :]) @ vt)
    return out


def slogdet(A):
    """linalg.slogdet(A) -> (Tensor, Tensor)

    (sign, logabsdet): the sign of each determinant (0 for a singular matrix) and the
    log of its absolute value (-inf there), without the overflow of det itself."""
    check_matrices("linalg.slogdet", A)
    sign, logabs = np.linalg.slogdet(host(A))
    arrays = tuple(np.asarray(v, dtype=A.dtype.np) for v in (sign, logabs))
    return SLogDet(*record("LinalgSlogdet", arrays, (A,), _slogdet_gradient,
                           lambda a: tuple(slogdet(a))))


def _slogdet_gradient(inputs, outputs, grads):
    (A,), (_, glog) = inputs, grads
    if glog is None:  # (the sign's gradient is zero)
        return (zeros_like(A),)
    return (_scales(glog) * _inverse_transpose(A),)


def _inverse_transpose(A):
    if STATE.grad_enabled:
        return inv(A).mT
    a = host(A)
    with np.errstate(divide="ignore", invalid="ignore"):  # (singular: infinite, as det is 0)
        d = np.linalg.det(a)
        return on_device(_cofactors(a) / d[..., None, None], A)


# -- inv -----------------------------------------------------------------------------------
def inv(A):
    """linalg.inv(A) -> Tensor

    The inverse of each square matrix of A (*, n, n); raises LinAlgError, naming the batch
    element, for a singular one."""
    return invert("linalg.inv", A)


def invert(op, A):
    """inv, its errors naming ``op``."""
    check_matrices(op, A)
    a = host(A)
    try:
        x = np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular(op, a, np.linalg.inv, "the inversion could not be completed "
                        "because the input matrix is singular; hx.linalg.pinv gives a "
                        "pseudo-inverse") from None
    return record("LinalgInv", (x,), (A,), _inv_gradient, lambda m: (invert(op, m),))[0]


def _inv_gradient(inputs, outputs, grads):
    (x,), (g,) = outputs, grads
    return (-matmul(matmul(x.mT, g), x.mT),)


def _singular(op, a, attempt, consequence):
    """The LinAlgError of a singular matrix: its batch element and LU's zero pivot."""
    found = first_failing(a, attempt)
    i = found[0] if found is not None else 0
    pivot = zero_pivot(stack(a)[i])
    where = f"The diagonal element {pivot} is zero, " if pivot is not None else \
        "The matrix is singular, "
    return LinAlgError(f"{op}: {batch_prefix(i, a.shape[:-2])}{where}{consequence} "
                       f"(shape {a.shape})")


# -- solve ---------------------------------------------------------------------------------
def _is_vector_rhs(A, B) -> bool:
    """PyTorch's rule: B is a batch of vectors when it is 1-D, or has A's shape less
    A's last dim."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])


def solve(A, B, *, left=True):
    """linalg.solve(A, B, *, left=True) -> Tensor

    X with A X = B (left=False: X A = B) for square invertible A (*, n, n) and B
    (*, n, k), or B (*, n), a batch of vectors; the batch dims broadcast."""
    return solve_with("linalg.solve", A, B, left, solve_matrices)


def solve_with(op, A, B, left, solver):
    """solve's checks and B's forms, its errors naming ``op``; ``solver(op, A, B)`` solves
    A X = B for matrices B."""
    check_matrices(op, A)
    if not isinstance(B, Tensor):
        raise TypeError(f"{op}: expected a Tensor for B, got {type(B).__name__}")
    if B.ndim == 0:
        raise OpError(f"{op}: The input tensor B must have at least 1 dimension (a vector "
                      f"of size {A.shape[-1]}) or 2 (matrices), got a 0-d tensor")
    if B.dtype is not A.dtype:
        raise OpTypeError(f"{op}: Expected A and B to have the same dtype, but found A of "
                          f"type {A.dtype.name} and B of type {B.dtype.name} instead; "
                          f"convert one with .to(...)")
    if B.device != A.device:
        raise OpError(f"{op}: A is on {A.device.type}, B on {B.device.type}; move one "
                      f"with .to(...)")
    vector = _is_vector_rhs(A, B)
    n = A.shape[-1]
    if not left:
        if vector or B.shape[-1] != n:
            k = 1 if vector else B.shape[-2]
            raise OpError(f"{op}: Incompatible shapes of A and B for the equation XA = B "
                          f"({n}x{n} and {k}x{B.shape[-1]}): B's last dim must be A's "
                          f"size {n}")
        return solver(op, A.mT, B.mT).mT
    b = B.unsqueeze(-1) if vector else B
    if b.shape[-2] != n:
        raise OpError(f"{op}: Incompatible shapes of A and B for the equation AX = B "
                      f"({n}x{n} and {b.shape[-2]}x{b.shape[-1]}): B's "
                      f"{'size' if vector else 'second-to-last dim'} must be A's size {n}")
    x = solver(op, A, b)
    return x.squeeze(-1) if vector else x


def solve_matrices(op, A, B):
    """A X = B for A (*, n, n) and B (*, n, k), their batch dims broadcast."""
    batch = layout.broadcast_shapes(A.shape[:-2], B.shape[:-2], op=f"{op} (batch dims)")
    A, B = A.expand(*batch, *A.shape[-2:]), B.expand(*batch, *B.shape[-2:])
    a, b = host(A), host(B)
    try:
        x = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _singular(op, a, np.linalg.inv, "the solver failed because the input matrix "
                        "is singular; hx.linalg.lstsq gives a least-squares solution") \
            from None
    return record("LinalgSolve", (x,), (A, B), _solve_gradient,
                  lambda m, r: (solve_matrices(op, m, r),))[0]


def _solve_gradient(inputs, outputs, grads):
    (A, _), (x,), (g,) = inputs, outputs, grads
    gb = solve_matrices("linalg.solve", A.mT, g)
    return -matmul(gb, x.mT), gb
