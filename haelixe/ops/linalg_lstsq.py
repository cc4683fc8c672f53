"""torch.linalg's pseudo-inverse, rank and least squares: pinv, matrix_rank, lstsq. pinv is
computed on the host from the SVD (eigh where hermitian) and recorded with the
pseudo-inverse's gradient; lstsq's solution is pinv(A) @ B (the minimum-norm solution,
PyTorch's gradient too), its residuals composed from it."""

from __future__ import annotations

import numpy as np

from .. import layout
from ..dtype import int64
from ..errors import OpError, OpTypeError
from ..tensor import Tensor
from .linalg import matmul
from .linalg_host import batch_failure, check_matrices, host, on_device, record
from .linalg_results import Lstsq


def _spectrum(op, a, hermitian):
    """(the singular values of each matrix, descending; the factors that rebuild the
    pseudo-inverse from their reciprocals): the SVD, or for hermitian=True eigh (lower
    triangle) with |eigenvalues|."""
    try:
        if hermitian:
            w, v = np.linalg.eigh(a)
            return np.abs(w), (w, v)
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return s, (u, s, vh)
    except np.linalg.LinAlgError:
        attempt = np.linalg.eigh if hermitian else np.linalg.svd
        raise batch_failure(op, a, attempt, "The algorithm failed to converge") from None


def _tolerance(op, A, sv, atol, rtol):
    """max(atol, rtol * largest singular value) per matrix, PyTorch's rule: atol None is
    0; rtol None is eps * max(m, n) where atol is not above 0, else 0. atol and rtol may
    be tensors broadcast against the batch."""
    m, n = A.shape[-2:]
    dt = A.dtype.np
    batch = A.shape[:-2]

    def values(t, name):
        if t is None:
            return None
        v = host(t).astype(dt) if isinstance(t, Tensor) else np.asarray(t, dtype=dt)
        try:
            return np.broadcast_to(v, batch) if v.ndim else v
        except ValueError:
            raise OpError(f"{op}: {name} of shape {v.shape} does not broadcast against "
                          f"the batch shape {batch} of A") from None

    a, r = values(atol, "atol"), values(rtol, "rtol")
    if r is None:
        default = np.finfo(dt).eps * max(m, n)
        r = np.asarray(default, dt) if a is None else np.where(a > 0, 0, default).astype(dt)
    if a is None:
        a = np.zeros((), dt)
    largest = sv.max(axis=-1) if sv.shape[-1] else np.zeros(sv.shape[:-1], dt)
    return np.maximum(a, r * largest)


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """linalg.pinv(A, *, atol=None, rtol=None, hermitian=False) -> Tensor

    The Moore-Penrose pseudo-inverse of A (*, m, n), (*, n, m): singular values at or
    below max(atol, rtol * the largest) count as zero. hermitian=True reads the lower
    triangle of a symmetric A and uses its eigendecomposition."""
    op = "linalg.pinv"
    check_matrices(op, A, square=hermitian)
    a = host(A)
    sv, factors = _spectrum(op, a, hermitian)
    kept = sv > _tolerance(op, A, sv, atol, rtol)[..., None]
    with np.errstate(divide="ignore"):
        if hermitian:
            w, v = factors
            x = (v * np.where(kept, 1 / np.where(kept, w, 1), 0)[..., None, :]) @ \
                v.swapaxes(-1, -2)
        else:
            u, s, vh = factors
            x = (vh.swapaxes(-1, -2) * np.where(kept, 1 / np.where(kept, s, 1), 0)
                 [..., None, :]) @ u.swapaxes(-1, -2)
    x = x.astype(a.dtype, copy=False)
    return record("LinalgPinv", (x,), (A,), _pinv_gradient,
                  lambda m: (pinv(m, atol=atol, rtol=rtol, hermitian=hermitian),))[0]


def _pinv_gradient(inputs, outputs, grads):
    # dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X, transposed onto dA
    (A,), (x,), (g,) = inputs, outputs, grads
    xt, gt = x.mT, g.mT
    left = matmul(matmul(gt, x), xt)      # g^T X X^T, then (I - A X) times it
    right = matmul(matmul(xt, x), gt)     # X^T X g^T, then times (I - X A)
    return (-matmul(matmul(xt, g), xt) + left - matmul(A, matmul(x, left))
            + right - matmul(matmul(right, x), A),)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """linalg.matrix_rank(A, *, atol=None, rtol=None, hermitian=False) -> Tensor

    The number of singular values of each matrix above max(atol, rtol * the largest)
    (int64); pinv's tolerances."""
    op = "linalg.matrix_rank"
    check_matrices(op, A, square=hermitian)
    a = host(A)
    sv = (np.abs(np.linalg.eigvalsh(a)) if hermitian else
          np.linalg.svd(a, compute_uv=False))
    tol = _tolerance(op, A, sv, atol, rtol)
    return on_device((sv > tol[..., None]).sum(-1).astype(np.int64), A)


LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """linalg.lstsq(A, B, rcond=None, *, driver=None) -> (Tensor, Tensor, Tensor, Tensor)

    (solution, residuals, rank, singular_values): the X of least ||A X - B|| (the
    minimum-norm one) for A (*, m, n) and B (*, m, k) or (*, m); singular values of A at
    or below rcond times the largest (rcond=None: eps * max(m, n)) count as zero. As
    PyTorch's CPU drivers: rank is computed by all but 'gels', singular_values by
    'gelsd' and 'gelss', and residuals (||A X - B||^2 per column) where m > n, the
    driver is not 'gelsy' and every matrix has full rank (empty tensors otherwise)."""
    op = "linalg.lstsq"
    check_matrices(op, A, square=False)
    if not isinstance(B, Tensor):
        raise TypeError(f"{op}: expected a Tensor for B, got {type(B).__name__}")
    if B.dtype is not A.dtype:
        raise OpTypeError(f"{op}: Expected A and B to have the same dtype, but got A's "
                          f"dtype {A.dtype.name} and B's dtype {B.dtype.name}; convert one "
                          f"with .to(...)")
    if B.device != A.device:
        raise OpError(f"{op}: A is on {A.device.type}, B on {B.device.type}; move one "
                      f"with .to(...)")
    if not (A.ndim >= B.ndim and A.ndim - B.ndim <= 1):
        raise OpError(f"{op}: A.dim() must be greater or equal to B.dim() and (A.dim() - "
                      f"B.dim()) <= 1, got shapes {A.shape} and {B.shape}")
    driver = "gelsy" if driver is None else driver
    if driver not in LSTSQ_DRIVERS:
        raise OpError(f"{op}: parameter `driver` should be one of (gels, gelsy, gelsd, "
                      f"gelss), got {driver!r}")
    vector = A.ndim - B.ndim == 1
    b = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2:]
    if b.shape[-2] != m:
        raise OpError(f"{op}: A.size(-2) should match B.size(-2): A has {m} rows, B "
                      f"{b.shape[-2]} (shapes {A.shape} and {B.shape})")
    batch = layout.broadcast_shapes(A.shape[:-2], b.shape[:-2], op=f"{op} (batch dims)")
    A, b = A.expand(*batch, m, n), b.expand(*batch, *b.shape[-2:])
    if rcond is None:
        rcond = float(np.finfo(A.dtype.np).eps) * max(m, n)
    solution = matmul(pinv(A, rtol=rcond), b)
    sv = np.linalg.svd(host(A), compute_uv=False)
    rank = (sv > _tolerance(op, A, sv, None, rcond)[..., None]).sum(-1)
    empty = on_device(np.zeros((0,), A.dtype.np), A)
    residuals = empty
    if m > n and driver != "gelsy" and (driver == "gels" or (rank == n).all()):
        residuals = (matmul(A, solution) - b).square().sum(-2)
    return Lstsq(solution.squeeze(-1) if vector else solution, residuals,
                 on_device(rank.astype(np.int64), A) if driver != "gels" else
                 on_device(np.zeros((0,), int64.np), A),
                 on_device(sv, A) if driver in ("gelsd", "gelss") else empty)
