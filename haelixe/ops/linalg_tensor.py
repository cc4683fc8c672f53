"""torch.linalg's tensor forms, Vandermonde matrices and Householder products: tensorinv
and tensorsolve (inv and solve of the tensor read as a matrix), vander (the powers x^0 ..
x^(N-1) as running products, exact for integers), householder_product (the reflectors
applied to the identity). All compositions, so their gradients come with them."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import layout
from ..creation import eye
from ..dtype import bool_
from ..errors import OpError, OpTypeError
from ..tensor import Tensor
from .indexing import cat
from .linalg import matmul
from .linalg_host import check_float, on_device
from .linalg_solve import invert, solve_matrices, solve_with


def _tensor(op, t, name):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected a Tensor for {name}, got {type(t).__name__}")


def tensorinv(A, ind=2):
    """linalg.tensorinv(A, ind=2) -> Tensor

    The inverse X of A in tensordot's sense, tensordot(X, A, ind) the identity: A's
    first ``ind`` dims read as the rows of a square matrix, the others as its columns;
    X has shape A.shape[ind:] + A.shape[:ind]."""
    op = "linalg.tensorinv"
    _tensor(op, A, "A")
    if isinstance(ind, bool) or not isinstance(ind, numbers.Integral):
        raise TypeError(f"{op}: argument 'ind' must be int, not {type(ind).__name__}")
    if ind <= 0:
        raise OpError(f"{op}: Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = A.shape[:ind], A.shape[ind:]
    if math.prod(cols) != math.prod(rows):
        raise OpError(f"{op}: Expected self to satisfy the requirement prod(self.shape[ind:]) "
                      f"== prod(self.shape[:ind]), but got {math.prod(cols)} != "
                      f"{math.prod(rows)} (shape {A.shape}, ind={ind})")
    n = math.prod(rows)
    return invert(op, A.reshape(n, n)).reshape(*cols, *rows)


def tensorsolve(A, B, dims=None):
    """linalg.tensorsolve(A, B, dims=None) -> Tensor

    X with tensordot(A, X, X.ndim) = B: A's first B.ndim dims read as the rows of a
    square matrix, the others as its columns (``dims``: dims of A moved to the end
    first); X has shape A.shape[B.ndim:]."""
    op = "linalg.tensorsolve"
    _tensor(op, A, "A")
    _tensor(op, B, "B")
    if dims is not None:
        dims = [dims] if isinstance(dims, numbers.Integral) else list(dims)
        moved = [layout.normalize_dim(d, A.ndim, op) for d in dims]
        A = A.movedim(moved, list(range(A.ndim - len(moved), A.ndim)))
    rows, cols = A.shape[:B.ndim], A.shape[B.ndim:]
    n = math.prod(cols)
    if n != B.numel():
        raise OpError(f"{op}: Expected self to satisfy the requirement "
                      f"prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but "
                      f"got {n} != {B.numel()} (A {A.shape}, B {B.shape}: B's elements must "
                      f"number those of X, A.shape[B.ndim:])")
    if math.prod(rows) != n:
        raise OpError(f"{op}: A's first {B.ndim} dims {rows} hold {math.prod(rows)} "
                      f"elements, B {n} (A {A.shape}, B {B.shape})")
    return solve_with(op, A.reshape(n, n), B.reshape(n), True, solve_matrices).reshape(*cols)


def vander(x, N=None):  # noqa: N803 (PyTorch's name)
    """linalg.vander(x, N=None) -> Tensor

    The Vandermonde matrices of the vectors of x (*, n): (*, n, N), column j holding
    x ** j (increasing powers, unlike torch.vander); N defaults to n and must be above
    1. Integers keep their dtype's promotion to int64, as cumprod's."""
    op = "linalg.vander"
    _tensor(op, x, "x")
    if x.dtype is bool_:
        raise OpTypeError(f"{op} supports floating point, complex, and integer tensors, but "
                          f"got bool; convert with .long() or .float()")
    if x.ndim == 0:
        raise OpError(f"{op}: x must have at least one dimension, got a 0-d tensor")
    n = x.shape[-1] if N is None else N
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"{op}: N must be an int, got {type(n).__name__}")
    if n <= 1:
        raise OpError(f"{op}: N must be greater than 1, got N={n} (x of shape {x.shape})")
    powers = x.unsqueeze(-1).expand(*x.shape, n - 1).cumprod(-1)
    return cat([x.new_ones((*x.shape, 1)).to(powers.dtype), powers], -1)


def householder_product(A, tau):
    """householder_product(A, tau) -> Tensor

    The first n columns of H_1 H_2 ... H_k for A (*, m, n) and tau (*, k), m >= n >= k:
    H_i = I - tau_i v_i v_i^T, v_i A's column i below the diagonal with a 1 on it (as
    geqrf leaves them; LAPACK's orgqr). Composed of products, applied to the identity
    from the last reflector on, so its gradients come with them."""
    op = "torch.linalg.householder_product"
    check_float(op, A, "input")
    check_float(op, tau, "tau")
    if A.ndim < 2:
        raise OpError(f"{op}: input must have at least 2 dimensions, got shape {A.shape}")
    m, n = A.shape[-2:]
    if m < n:
        raise OpError(f"{op}: input.shape[-2] must be greater than or equal to "
                      f"input.shape[-1], got shape {A.shape}")
    if tau.ndim != A.ndim - 1:
        raise OpError(f"{op}: Expected tau to have one dimension less than input, but got "
                      f"tau.ndim equal to {tau.ndim} and input.ndim is equal to {A.ndim}")
    k = tau.shape[-1]
    if n < k:
        raise OpError(f"{op}: input.shape[-1] must be greater than or equal to "
                      f"tau.shape[-1], got {n} and {k}")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise OpError(f"{op}: Expected batch dimensions of tau to be equal to "
                      f"input.shape[:-2], but got {list(tau.shape[:-1])} (input "
                      f"{list(A.shape)})")
    if tau.dtype is not A.dtype:
        raise OpTypeError(f"{op}: tau dtype {tau.dtype.name} does not match input dtype "
                          f"{A.dtype.name}; convert one with .to(...)")
    q = eye(m, n, dtype=A.dtype, device=A.device).expand(*A.shape).clone()
    rows = np.arange(m)
    for i in range(k - 1, -1, -1):
        below = on_device((rows > i).astype(A.dtype.np), A)
        unit = on_device((rows == i).astype(A.dtype.np), A)
        v = A[..., :, i] * below + unit
        w = matmul(v.unsqueeze(-2), q)  # (*, 1, n): v^T Q
        q = q - tau[..., i].unsqueeze(-1).unsqueeze(-1) * (v.unsqueeze(-1) * w)
    return q
