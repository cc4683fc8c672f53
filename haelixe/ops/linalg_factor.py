"""torch.linalg's factorizations: cholesky, qr, eigh, eigvalsh, svd, svdvals. Each is
computed on the host by numpy's LAPACK and recorded as one Factor node per output, with
the standard gradients (eigh's and svd's for distinct eigen / singular values, as
PyTorch's; where two are equal the gradient is not finite there either)."""

from __future__ import annotations

import functools

import numpy as np

from ..autograd.mode import STATE
from ..creation import eye, zeros_like
from ..errors import OpError
from .composite import diag_embed
from .indexing import cat
from .linalg import matmul
from .linalg_host import (
    LinAlgError,
    batch_failure,
    batch_prefix,
    check_matrices,
    first_failing,
    host,
    on_device,
    record,
    stack,
)
from .linalg_results import QR, SVD, Eigh
from .linalg_solve import inv, solve_matrices


def _off_diagonal_reciprocals(values):
    """F[..., i, j] = 1 / (values_j - values_i) off the diagonal, 0 on it (the diagonal's
    denominators are made 1 first, so no 1/0 enters a graph of the gradient)."""
    n = values.shape[-1]
    identity = eye(n, dtype=values.dtype, device=values.device)
    gaps = values.unsqueeze(-2) - values.unsqueeze(-1)
    return (1.0 - identity) / (gaps + identity)


# -- cholesky ------------------------------------------------------------------------------
def cholesky(A, *, upper=False):
    """linalg.cholesky(A, *, upper=False) -> Tensor

    L, lower triangular with a positive diagonal, with A = L L^T, for symmetric
    positive-definite A (*, n, n), of which only the lower triangle is read; upper=True
    gives U = L^T from the upper triangle."""
    op = "linalg.cholesky"
    check_matrices(op, A)
    return _cholesky(op, A.mT).mT if upper else _cholesky(op, A)


def _cholesky(op, A):
    a = host(A)
    try:
        factor = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise _not_positive_definite(op, a) from None
    return record("LinalgCholesky", (factor,), (A,), _cholesky_gradient,
                  lambda m: (_cholesky(op, m),))[0]


def _not_positive_definite(op, a):
    found = first_failing(a, np.linalg.cholesky)
    i = found[0] if found is not None else 0
    m = stack(a)[i]
    order = next((k for k in range(1, m.shape[0] + 1)
                  if first_failing(m[:k, :k], np.linalg.cholesky) is not None), m.shape[0])
    return LinAlgError(
        f"{op}: {batch_prefix(i, a.shape[:-2])}The factorization could not be completed "
        f"because the input is not positive-definite (the leading minor of order {order} "
        f"is not positive-definite; shape {a.shape}); for a semi-definite matrix add a "
        f"small multiple of the identity first")


def _cholesky_gradient(inputs, outputs, grads):
    # A = L L^T: gA = sym(L^-T Phi(L^T gL) L^-1), Phi the lower triangle, diagonal halved
    (factor,), (g,) = outputs, grads
    p = matmul(factor.mT, g)
    phi = p.tril(-1) + 0.5 * diag_embed(p.diagonal(0, -2, -1))
    li = inv(factor)
    s = matmul(matmul(li.mT, phi), li)
    return (0.5 * (s + s.mT),)


# -- qr ------------------------------------------------------------------------------------
QR_MODES = ("reduced", "complete", "r")


def qr(A, mode="reduced"):
    """linalg.qr(A, mode='reduced') -> (Tensor, Tensor)

    (Q, R) with A = Q R, Q with orthonormal columns, R upper triangular. mode='reduced':
    Q (*, m, k), R (*, k, n), k = min(m, n); 'complete': Q (*, m, m), R (*, m, n); 'r': R
    alone (Q is an empty tensor, and there is no gradient)."""
    op = "linalg.qr"
    if mode not in QR_MODES:
        raise OpError(f"qr received unrecognized mode {mode!r} but expected one of "
                      f"'reduced' (default), 'r', or 'complete'")
    check_matrices(op, A, square=False)
    a = host(A)
    if mode == "r":
        arrays = (np.zeros((0,), a.dtype), np.linalg.qr(a, mode="r"))
    else:
        arrays = tuple(np.linalg.qr(a, mode=mode))
    return QR(*record("LinalgQr", arrays, (A,), functools.partial(_qr_gradient, mode),
                      lambda m: tuple(qr(m, mode))))


def _qr_gradient(mode, inputs, outputs, grads):
    (A,), (q, r), (gq, gr) = inputs, outputs, grads
    m, n = A.shape[-2:]
    if mode == "r":
        raise OpError("linalg.qr: The derivative of linalg.qr depends on Q, which is not "
                      "computed when mode='r'. Please use linalg.qr(A, mode='reduced') if "
                      "you are going to differentiate through linalg.qr.")
    if mode == "complete" and m > n:
        raise OpError("linalg.qr: The QR decomposition is not differentiable when "
                      "mode='complete' and nrows > ncols; use mode='reduced'")
    if A.numel() == 0:
        return (zeros_like(A),)
    if m >= n:
        return (_qr_tall_gradient(q, r, gq, gr),)
    # wide: A = [X | Y] with X = Q U square and Y = Q V, where R = [U | V]
    y = A.narrow(-1, m, n - m)
    u = r.narrow(-1, 0, m)
    gu = gr.narrow(-1, 0, m) if gr is not None else None
    gv = gr.narrow(-1, m, n - m) if gr is not None else None
    if gv is not None:
        gy = matmul(q, gv)
        more = matmul(y, gv.mT)
        gq = more if gq is None else gq + more
    else:
        gy = zeros_like(y)
    return (cat([_qr_tall_gradient(q, u, gq, gu), gy], -1),)


def _qr_tall_gradient(q, r, gq, gr):
    # m >= n: M = R gR^T - gQ^T Q; gA = (gQ + Q copyltu(M)) R^-T, copyltu(M) the
    # symmetric matrix of M's lower triangle
    terms = []
    if gr is not None:
        terms.append(matmul(r, gr.mT))
    if gq is not None:
        terms.append(-matmul(gq.mT, q))
    big_m = terms[0] if len(terms) == 1 else terms[0] + terms[1]
    b = matmul(q, big_m.tril() + big_m.tril(-1).mT)
    if gq is not None:
        b = b + gq
    return solve_matrices("linalg.qr (backward: R must be invertible)", r, b.mT).mT


# -- eigh, eigvalsh ------------------------------------------------------------------------
def _uplo(op, UPLO):
    if not isinstance(UPLO, str) or UPLO.upper() not in ("L", "U"):
        raise OpError(f"{op}: Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO.upper()


def eigh(A, UPLO="L"):  # noqa: N803 (PyTorch's name)
    """linalg.eigh(A, UPLO='L') -> (Tensor, Tensor)

    (eigenvalues, eigenvectors) of symmetric A (*, n, n), of which only the lower
    (UPLO='L') or upper ('U') triangle is read: eigenvalues ascending (*, n), the
    eigenvectors the columns of (*, n, n). The gradient assumes A symmetric, as
    PyTorch's."""
    return _eigh("linalg.eigh", A, UPLO)


def eigvalsh(A, UPLO="L"):  # noqa: N803
    """linalg.eigvalsh(A, UPLO='L') -> Tensor

    The eigenvalues of symmetric A (*, n, n), ascending: eigh's first result."""
    return _eigh("linalg.eigvalsh", A, UPLO).eigenvalues


def _eigh(op, A, UPLO):  # noqa: N803
    uplo = _uplo(op, UPLO)
    check_matrices(op, A)
    a = host(A)

    def attempt(m):
        return np.linalg.eigh(m, UPLO=uplo)

    try:
        arrays = tuple(attempt(a))
    except np.linalg.LinAlgError:
        raise batch_failure(op, a, attempt, "The algorithm failed to converge because the input "
                      "matrix is ill-conditioned or has too many repeated eigenvalues") \
            from None
    return Eigh(*record("LinalgEigh", arrays, (A,), _eigh_gradient,
                        lambda m: tuple(_eigh(op, m, uplo))))


def _eigh_gradient(inputs, outputs, grads):
    # gA = V (diag(gL) + F o skew(V^T gV)) V^T, F_ij = 1 / (l_j - l_i): symmetric
    (values, vectors), (gl, gv) = outputs, grads
    if gv is not None:
        s = matmul(vectors.mT, gv)
        inner = _off_diagonal_reciprocals(values) * (0.5 * (s - s.mT))
    else:
        inner = diag_embed(gl)
    if gl is not None and gv is not None:
        inner = inner + diag_embed(gl)
    return (matmul(matmul(vectors, inner), vectors.mT),)


# -- svd, svdvals --------------------------------------------------------------------------
#: cuSOLVER's routines, which PyTorch's driver= picks on CUDA; all give one decomposition
SVD_DRIVERS = (None, "gesvd", "gesvdj", "gesvda")


def svd(A, full_matrices=True, *, driver=None):
    """linalg.svd(A, full_matrices=True, *, driver=None) -> (Tensor, Tensor, Tensor)

    (U, S, Vh) with A = U diag(S) Vh, S descending (*, k), k = min(m, n);
    full_matrices=True: U (*, m, m) and Vh (*, n, n), else U (*, m, k) and Vh (*, k, n).
    The gradient ignores the columns of U and rows of Vh beyond k, as PyTorch's."""
    return _svd("linalg.svd", A, full_matrices, driver)


def svdvals(A, *, driver=None):
    """linalg.svdvals(A, *, driver=None) -> Tensor

    The singular values of A (*, m, n), descending (*, k)."""
    op = "linalg.svdvals"
    _check_driver(op, driver)
    check_matrices(op, A, square=False)
    if STATE.grad_enabled and A.requires_grad:  # (U and V are the gradient's)
        return _svd(op, A, False, driver).S
    a = host(A)
    try:
        return on_device(np.linalg.svd(a, compute_uv=False), A)
    except np.linalg.LinAlgError:
        raise _svd_failed(op, a) from None


def _check_driver(op, driver):
    if driver not in SVD_DRIVERS:
        raise OpError(f"{op}: driver must be None or one of 'gesvd', 'gesvdj', 'gesvda' "
                      f"(cuSOLVER's names; Haelixe computes the SVD with LAPACK on every "
                      f"device, so all give one result), got {driver!r}")


def _svd_failed(op, a):
    return batch_failure(op, a, np.linalg.svd, "The algorithm failed to converge because the "
                   "input matrix is ill-conditioned or has too many repeated singular "
                   "values")


def _svd(op, A, full_matrices, driver):
    _check_driver(op, driver)
    check_matrices(op, A, square=False)
    a = host(A)
    try:
        arrays = tuple(np.linalg.svd(a, full_matrices=full_matrices))
    except np.linalg.LinAlgError:
        raise _svd_failed(op, a) from None
    return SVD(*record("LinalgSvd", arrays, (A,), _svd_gradient,
                       lambda m: tuple(_svd(op, m, full_matrices, None))))


def _svd_gradient(inputs, outputs, grads):
    (A,), (u, s, vh), (gu, gs, gvh) = inputs, outputs, grads
    m, n = A.shape[-2:]
    k = s.shape[-1]
    if A.numel() == 0:
        return (zeros_like(A),)
    # (full_matrices: only the first k columns of U and rows of Vh reach A)
    u, vh = u.narrow(-1, 0, k), vh.narrow(-2, 0, k)
    gu = gu.narrow(-1, 0, k) if gu is not None else None
    gvh = gvh.narrow(-2, 0, k) if gvh is not None else None
    f = _off_diagonal_reciprocals(s * s) if gu is not None or gvh is not None else None
    inner = diag_embed(gs) if gs is not None else zeros_like(u.mT @ u)
    if gu is not None:  # F o (U^T gU - gU^T U), its columns scaled by S
        j = matmul(u.mT, gu)
        inner = inner + (f * (j - j.mT)) * s.unsqueeze(-2)
    if gvh is not None:  # S (F o (V^T gV - gV^T V)), with gV = gVh^T
        kk = matmul(vh, gvh.mT)
        inner = inner + s.unsqueeze(-1) * (f * (kk - kk.mT))
    ga = matmul(matmul(u, inner), vh)
    if gu is not None and m > k:  # (I - U U^T) gU S^-1 Vh
        ga = ga + matmul((gu - matmul(u, matmul(u.mT, gu))) / s.unsqueeze(-2), vh)
    if gvh is not None and n > k:  # U S^-1 gVh (I - V Vh)
        ga = ga + matmul(u, (gvh - matmul(matmul(gvh, vh.mT), vh)) / s.unsqueeze(-1))
    return (ga,)
