"""The Cholesky factor and lower-triangular solves that MultivariateNormal needs,
composed from Haelixe ops one row or column at a time, so gradients (and their
gradients) come from the ops themselves, on either device. An event of n dims costs
n steps of a few ops each; distributions' events are small."""

from __future__ import annotations

from .. import creation
from ..ops.indexing import cat, stack
from ..tensor import Tensor


def cholesky(a: Tensor, op: str = "MultivariateNormal") -> Tensor:
    """L lower triangular with L @ L.mT == a, for a batch of symmetric positive-definite
    matrices. The gradient is the symmetric one PyTorch's linalg.cholesky gives: the
    factor is taken of (a + a.mT) / 2, equal to a for a symmetric a."""
    n = a.shape[-1]
    a = (a + a.mT) / 2
    cols = []  # column j: length n, zero above row j
    for j in range(n):
        v = a[..., :, j]
        if cols:
            done = stack(cols, -1)  # (..., n, j)
            v = v - (done @ done[..., j, :].unsqueeze(-1)).squeeze(-1)
        d = v[..., j:j + 1].sqrt()
        below = v[..., j:] / d
        if j:
            below = cat([creation.zeros(v.shape[:-1] + (j,), dtype=a.dtype,
                                        device=a.device), below], -1)
        cols.append(below)
    factor = stack(cols, -1) if cols else a
    _check_positive_definite(factor, op)
    return factor


def _check_positive_definite(factor: Tensor, op: str) -> None:
    """PyTorch's error where a pivot is not positive (sqrt made it NaN or 0)."""
    diag = factor.detach().diagonal(dim1=-2, dim2=-1).cpu().numpy()
    bad = ~(diag > 0)
    if not bad.any():
        return
    flat = bad.reshape(-1, bad.shape[-1])
    batch = int(flat.any(-1).argmax())
    order = int(flat[batch].argmax()) + 1
    where = f"(Batch element {batch}): " if bad.ndim > 1 else ""
    raise RuntimeError(f"{op}: linalg.cholesky: {where}The factorization could not be "
                       f"completed because the input is not positive-definite (the "
                       f"leading minor of order {order} is not positive-definite); pass "
                       f"a symmetric positive-definite matrix, or scale_tril")


def solve_lower(lower: Tensor, b: Tensor) -> Tensor:
    """x with lower @ x == b (forward substitution; batch dims broadcast), b of shape
    (..., n, k)."""
    n = lower.shape[-1]
    rows = []
    for i in range(n):
        r = b[..., i, :]
        if rows:
            done = stack(rows, -2)  # (..., i, k)
            r = r - (lower[..., i:i + 1, :i] @ done).squeeze(-2)
        rows.append(r / lower[..., i, i:i + 1])
    return stack(rows, -2)


def mahalanobis(lower: Tensor, x: Tensor) -> Tensor:
    """x.T (lower lower.T)^-1 x over the last dim of x (batch dims broadcast)."""
    return solve_lower(lower, x.unsqueeze(-1)).squeeze(-1).pow(2).sum(-1)
