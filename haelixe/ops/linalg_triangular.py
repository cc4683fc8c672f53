"""torch.linalg.solve_triangular: X with A X = B (or X A = B) for triangular A, by
substitution on the host, vectorised over the batch and B's columns, one row at a time.
Only A's upper (or lower) triangle is read, and its diagonal not at all where
``unitriangular``; a zero on the diagonal gives inf / NaN, as LAPACK's trsm (PyTorch does
not check either). The gradient is gB = A^-T g (the transposed triangle), gA = -gB X^T
kept to the triangle that was read."""

from __future__ import annotations

import numpy as np

from .. import layout
from ..dtype import promote_types
from ..errors import OpError
from .linalg import matmul
from .linalg_host import check_float, check_matrices, host, record


def substitute(a, b, upper, unitriangular):
    """numpy: X with A X = B for (batch..., n, n) a and (batch..., n, k) b of one batch
    shape, reading one triangle of a."""
    n = a.shape[-1]
    x = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:], a.dtype)
    order = range(n - 1, -1, -1) if upper else range(n)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in order:
            done = slice(i + 1, n) if upper else slice(0, i)
            row = b[..., i, :] - (a[..., i:i + 1, done] @ x[..., done, :])[..., 0, :]
            x[..., i, :] = row if unitriangular else row / a[..., i, i, None]
    return x


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """linalg.solve_triangular(A, B, *, upper, left=True, unitriangular=False) -> Tensor

    X with A X = B (left=False: X A = B) for triangular A (*, n, n), upper or lower as
    ``upper`` says, and B (*, n, k) (left=False: (*, k, n)); the batch dims broadcast, and
    A and B promote to one float dtype. ``unitriangular``: A's diagonal is taken as ones
    and not read."""
    op = "linalg.solve_triangular"
    check_matrices(op, A)
    check_float(op, B, "B")
    if B.ndim < 2:
        raise OpError(f"{op}: The input tensor B must have at least 2 dimensions, got "
                      f"shape {B.shape}; a vector b is b.unsqueeze(-1)")
    if B.device != A.device:
        raise OpError(f"{op}: A is on {A.device.type}, B on {B.device.type}; move one "
                      f"with .to(...)")
    dt = promote_types(A.dtype, B.dtype)
    A, B = A.to(dt), B.to(dt)
    n = A.shape[-1]
    rows = B.shape[-2] if left else B.shape[-1]
    if rows != n:
        eq = "AX = B" if left else "XA = B"
        raise OpError(f"{op}: Incompatible shapes of A and B for the equation {eq} "
                      f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    if not left:  # X A = B is A^T X^T = B^T, the other triangle
        return triangular(op, A.mT, B.mT, not upper, unitriangular).mT
    return triangular(op, A, B, upper, unitriangular)


def triangular(op, A, B, upper, unitriangular):
    """A X = B for A (*, n, n), B (*, n, k) of one dtype, the batch dims broadcast."""
    batch = layout.broadcast_shapes(A.shape[:-2], B.shape[:-2], op=f"{op} (batch dims)")
    A, B = A.expand(*batch, *A.shape[-2:]), B.expand(*batch, *B.shape[-2:])
    x = substitute(host(A), host(B), upper, unitriangular)

    def gradient(inputs, outputs, grads):
        (a, _), (sol,), (g,) = inputs, outputs, grads
        gb = triangular(op, a.mT, g, not upper, unitriangular)
        ga = -matmul(gb, sol.mT)
        offset = 1 if unitriangular else 0
        return (ga.triu(offset) if upper else ga.tril(-offset)), gb

    return record("LinalgSolveTriangular", (x,), (A, B), gradient,
                  lambda a, b: (triangular(op, a, b, upper, unitriangular),))[0]


