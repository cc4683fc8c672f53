"""``nn.utils.parametrizations.orthogonal``: a weight kept (semi-)orthogonal by
computing it from an unconstrained one.

A tall matrix X (n >= k; a wide one is transposed and back) maps to an orthogonal Q by
one of three maps: ``matrix_exp`` (the exponential of the skew-symmetric X - X^T of
X's lower triangle), ``cayley`` ((I - A/2)^-1 (I + A/2) of that A) or ``householder``
(the product of the reflectors in X's strict lower triangle). With
``use_trivialization`` (the default) the result is multiplied by a fixed orthogonal
``base`` (a buffer): registering, or assigning to the weight, stores the orthogonal
matrix closest in the QR sense as ``base`` and resets the original so that the map
gives the identity, as PyTorch does.
"""

from __future__ import annotations

import numpy as np

from .. import creation
from ..autograd.mode import no_grad
from ..ops.indexing import cat
from ..ops.linalg_compose import matrix_exp
from ..ops.linalg_factor import qr
from ..ops.linalg_solve import solve
from ..ops.linalg_tensor import householder_product
from ..tensor import Tensor
from .module import Module
from .parametrize import register_parametrization

__all__ = ["orthogonal"]

_MAPS = ("matrix_exp", "cayley", "householder")


def _is_orthogonal(Q: Tensor) -> bool:
    n, k = Q.shape[-2], Q.shape[-1]
    q = Q.detach().cpu().numpy()
    gram = np.swapaxes(q, -1, -2) @ q
    eps = 10.0 * n * np.finfo(q.dtype).eps
    return bool(np.allclose(gram, np.eye(k, dtype=q.dtype), rtol=1e-5, atol=eps))


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q of A = QR (A tall) with R's diagonal made non-negative."""
    Q, R = qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


class _Orthogonal(Module):
    def __init__(self, weight: Tensor, orthogonal_map: str, *,
                 use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:  # embedded in a square matrix
                pad = creation.zeros(n, n - k, dtype=X.dtype, device=X.device)
                X = cat([X, pad.expand(*X.shape[:-2], n, n - k)], dim=-1)
            A = X - X.mT
            if self.orthogonal_map == "matrix_exp":
                Q = matrix_exp(A)
            else:
                eye = creation.eye(n, dtype=A.dtype, device=A.device)
                Q = solve(eye - 0.5 * A, eye + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = householder_product(A, tau)
            # X's diagonal holds the signs +-1 (no gradient flows through them)
            Q = Q * X.detach().diagonal(dim1=-2, dim2=-1).int().to(Q.dtype).unsqueeze(-2)
        if self._has_base():
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def _has_base(self) -> bool:
        return "base" in self._buffers

    def right_inverse(self, Q: Tensor) -> Tensor:
        if tuple(Q.shape) != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {tuple(Q.shape)}.")
        with no_grad():
            return self._right_inverse(Q)

    def _right_inverse(self, Q: Tensor) -> Tensor:
        given = Q
        n, k = Q.shape[-2], Q.shape[-1]
        transposed = n < k
        if transposed:
            Q = Q.mT
            n, k = k, n
        if not self._has_base():
            if self.orthogonal_map != "householder":
                raise NotImplementedError(
                    "It is not possible to assign to the matrix exponential or the Cayley "
                    "parametrizations when use_trivialization=False.")
            return _householder_original(Q, transposed)
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:  # completed to a square orthogonal matrix by random columns
            extra = creation.randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype, device=Q.device)
            Q = _make_orthogonal(cat([Q, extra], dim=-1))
        self.base = Q
        # -I: the Householder map takes it to the identity (the others take any
        # diagonal to it)
        neg_eye = creation.zeros_like(given)
        neg_eye.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_eye


def _householder_original(Q: Tensor, transposed: bool) -> Tensor:
    """The reflectors of Q's QR (LAPACK's geqrf layout), with the signs of R's diagonal
    on the diagonal: what the Householder map takes back to Q."""
    q = Q.detach().cpu().numpy()
    flat = q.reshape(-1, *q.shape[-2:])
    out = np.empty_like(flat)
    for i, m in enumerate(flat):
        h, tau = np.linalg.qr(m, mode="raw")  # (h is geqrf's output, transposed)
        a = h.T.copy()
        signs = np.sign(np.diagonal(a))
        signs[tau == 0.0] *= -1
        np.fill_diagonal(a, signs)
        out[i] = a
    out = out.reshape(q.shape)
    A = creation.tensor(out, dtype=Q.dtype, device=Q.device)
    return A.mT if transposed else A


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """``module.<name>`` (a matrix, or a batch of them) kept orthogonal (orthonormal
    columns or rows where it is not square); ``orthogonal_map`` is "matrix_exp",
    "cayley" or "householder" (default: matrix_exp for a square weight, householder
    otherwise)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else \
            "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    if not weight.dtype.is_floating_point or weight.dtype.name in ("float16", "bfloat16"):
        raise TypeError(f"orthogonal: the weight must be float32 or float64 (its QR runs "
                        f"in LAPACK), got {weight.dtype.name}")
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    register_parametrization(module, name, orth, unsafe=True)
    return module
