"""torch.linalg's ops composed of matmul and elementwise ops: cross, vecdot, multi_dot,
diagonal, matrix_power and matrix_exp. Each records the ops it is made of, so autograd
and every device come with them."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import layout
from ..creation import eye
from ..dtype import bfloat16, float16, float32
from ..errors import OpError, OpTypeError
from ..tensor import Tensor
from .composite import cross as _cross
from .linalg import matmul
from .linalg_host import check_float, check_matrices, host
from .linalg_solve import inv


def cross(input, other, *, dim=-1):  # noqa: A002 (PyTorch's names)
    """linalg.cross(input, other, *, dim=-1) -> Tensor

    The cross product of the 3-vectors along ``dim`` (of size 3 in both), the other dims
    broadcast; both of one dtype and number of dims."""
    op = "linalg.cross"
    for t in (input, other):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected tensors, got {type(t).__name__}")
    if input.ndim != other.ndim:
        raise OpError(f"{op}: inputs must have the same number of dimensions, got shapes "
                      f"{input.shape} and {other.shape}")
    if input.dtype is not other.dtype:
        raise OpTypeError(f"{op}: inputs must have one dtype, got {input.dtype.name} and "
                          f"{other.dtype.name}; convert one with .to(...)")
    d = layout.normalize_dim(dim, input.ndim, op)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise OpError(f"{op}: inputs dimension {dim} must have length 3. Got "
                      f"{input.shape[d]} and {other.shape[d]}")
    return _cross(input, other, dim=d)


def vecdot(x, y, *, dim=-1):
    """linalg.vecdot(x, y, *, dim=-1) -> Tensor

    The dot product of the vectors of x and y along ``dim``, the other dims broadcast."""
    op = "linalg.vecdot"
    check_float(op, x, "x", low_precision=True)
    check_float(op, y, "y", low_precision=True)
    if x.dtype is not y.dtype:
        raise OpTypeError(f"{op}: Expected x and y to have the same dtype, but found x of "
                          f"type {x.dtype.name} and y of type {y.dtype.name} instead")
    layout.broadcast_shapes(x.shape, y.shape, op=op)
    return (x * y).sum(dim)


def multi_dot(tensors):
    """linalg.multi_dot(tensors) -> Tensor

    The product of two or more matrices, multiplied in the order that costs the fewest
    multiplications; the first may be a row vector (1-D) and the last a column vector."""
    op = "multi_dot()"
    ts = list(tensors)
    if len(ts) < 2:
        raise OpError(f"{op}: expected at least 2 tensors but got {len(ts)}")
    for i, t in enumerate(ts):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: tensor {i} is a {type(t).__name__}, not a Tensor")
        end = i in (0, len(ts) - 1)
        if t.ndim != 2 and not (end and t.ndim == 1):
            which = "the first tensor" if i == 0 else "the last tensor" if \
                i == len(ts) - 1 else f"tensor {i}"
            raise OpError(f"{op}: {which} must be {'1D or 2D' if end else '2D'} but got "
                          f"{t.ndim}D (shape {t.shape})")
        if t.dtype is not ts[0].dtype:
            raise OpTypeError(f"{op}: all tensors must have the same dtype, but tensor 0 "
                              f"is {ts[0].dtype.name} and tensor {i} {t.dtype.name}")
    row, column = ts[0].ndim == 1, ts[-1].ndim == 1
    if row:
        ts[0] = ts[0].unsqueeze(0)
    if column:
        ts[-1] = ts[-1].unsqueeze(-1)
    for i in range(len(ts) - 1):
        if ts[i].shape[1] != ts[i + 1].shape[0]:
            raise OpError(f"{op}: tensors {i} and {i + 1} with shapes "
                          f"{list(ts[i].shape)} and {list(ts[i + 1].shape)} cannot be "
                          f"multiplied")
    out = _chain(ts, _chain_order([t.shape[0] for t in ts] + [ts[-1].shape[1]]),
                 0, len(ts) - 1)
    if row:
        out = out.squeeze(0)
    return out.squeeze(-1) if column else out


def _chain_order(sizes):
    """split[i][j]: where the cheapest product of matrices i..j splits (the classic
    dynamic programme over the chain's sizes p0 x p1, p1 x p2, ...)."""
    n = len(sizes) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + sizes[i] * sizes[k + 1] * sizes[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(ts, split, i, j):
    if i == j:
        return ts[i]
    k = split[i][j]
    return matmul(_chain(ts, split, i, k), _chain(ts, split, k + 1, j))


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """linalg.diagonal(A, *, offset=0, dim1=-2, dim2=-1) -> Tensor

    The ``offset``-th diagonals of the matrices over ``dim1`` and ``dim2`` (a view):
    torch.diagonal with the last two dims by default."""
    return A.diagonal(offset, dim1, dim2)


def power(op, A, n):
    """A^n for matrix_power and torch.matrix_power (their errors named ``op``)."""
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(A).__name__}")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"{op}: n must be an int, got {type(n).__name__} {n!r}")
    if A.ndim < 2:
        raise OpError(f"{op}: The input tensor A must have at least 2 dimensions, got "
                      f"shape {A.shape}")
    if A.shape[-1] != A.shape[-2]:
        raise OpError(f"{op}: A must be batches of square matrices, but they are "
                      f"{A.shape[-2]} by {A.shape[-1]} matrices")
    n = int(n)
    if n == 0:
        identity = eye(A.shape[-1], dtype=A.dtype, device=A.device)
        return identity.expand(*A.shape).clone()
    if n < 0:
        A, n = inv(A), -n
    # by squaring: A^n as the product of the powers A^(2^i) of n's set bits
    result, base = None, A
    while True:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if not n:
            break
        base = matmul(base, base)
    return result.clone() if result is A else result


def matrix_power(A, n):
    """linalg.matrix_power(A, n) -> Tensor

    A^n for square A (*, m, m) and an int n: the identity for n = 0, inv(A)^-n for
    n < 0 (which needs a float A)."""
    return power("linalg.matrix_power", A, n)


#: Taylor terms that keep the truncation below the dtype's rounding for ||X||_1 <= 1
#: (1 / 19! and 1 / 13!)
_TAYLOR_TERMS = {"float64": 18, "float32": 12}


def matrix_exp(A):
    """matrix_exp(A) -> Tensor

    The matrix exponential e^A = sum A^k / k! of square A (*, n, n): scaled by 2^-s to a
    1-norm at most 1, a Taylor polynomial there, squared s times. bfloat16 and float16
    are computed in float32 and rounded once."""
    op = "linalg.matrix_exp"
    check_matrices(op, A, low_precision=True)
    if A.dtype in (bfloat16, float16):
        return matrix_exp(A.to(float32)).to(A.dtype)
    n = A.shape[-1]
    if A.numel() == 0:
        return A.clone()
    norm = float(np.abs(host(A)).sum(-2).max())
    squarings = max(0, math.ceil(math.log2(norm))) if math.isfinite(norm) and norm > 1 else 0
    x = A / float(2 ** squarings) if squarings else A
    identity = eye(n, dtype=A.dtype, device=A.device)
    terms = _TAYLOR_TERMS[A.dtype.name]
    result = identity + x / float(terms)  # Horner: I + X/1 (I + X/2 (I + ...))
    for k in range(terms - 1, 0, -1):
        result = identity + matmul(x, result) / float(k)
    for _ in range(squarings):
        result = matmul(result, result)
    return result
