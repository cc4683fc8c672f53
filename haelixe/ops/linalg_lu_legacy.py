"""torch's older LU names over linalg_lu's: lu (lu_factor_ex's LU and pivots, its infos
on request), lu_solve (linalg.lu_solve with B first) and lu_unpack (the P, L and U of
a packed LU). lu and lu_solve warn that they are deprecated, as PyTorch's do; lu_unpack
is composed of tril, triu and where, so its gradient reaches the packed LU."""

from __future__ import annotations

import warnings

import numpy as np

from ..creation import eye
from ..dtype import bool_, int32
from ..errors import OpError, OpTypeError
from ..tensor import Tensor
from .indexing import where
from .linalg_host import on_device
from .linalg_lu import factor_ex, permutation
from .linalg_lu import lu_solve as linalg_lu_solve
from .linalg_results import LU, LUFactor, LUFactorEx
from .registry import declare, function, tensor_method


@tensor_method(function=True)
def lu(A, pivot=True, get_infos=False):  # noqa: N803 (PyTorch's names)
    """lu(A, pivot=True, get_infos=False) -> (Tensor, Tensor[, Tensor])

    Deprecated, as in PyTorch: linalg.lu_factor_ex(A, pivot=pivot)'s (LU, pivots), and
    with get_infos=True its info too. A singular A is no error (its info says so)."""
    warnings.warn("torch.lu is deprecated in favor of torch.linalg.lu_factor / "
                  "torch.linalg.lu_factor_ex and will be removed in a future PyTorch "
                  "release: LU, pivots = torch.linalg.lu_factor(A), or LU, pivots, info = "
                  "torch.linalg.lu_factor_ex(A) with get_infos=True",
                  UserWarning, stacklevel=2)
    LU_, pivots, info = factor_ex("lu", A, pivot, False)
    return LUFactorEx(LU_, pivots, info) if get_infos else LUFactor(LU_, pivots)


@tensor_method(function=True)
def lu_solve(b, LU_data, LU_pivots):  # noqa: N803
    """lu_solve(b, LU_data, LU_pivots) -> Tensor

    Deprecated, as in PyTorch: X with A X = b, for A's (LU_data, LU_pivots) from
    lu_factor; linalg.lu_solve(LU_data, LU_pivots, b) with its arguments reversed."""
    warnings.warn("torch.lu_solve is deprecated in favor of torch.linalg.lu_solve and "
                  "will be removed in a future PyTorch release; note that "
                  "torch.linalg.lu_solve has its arguments reversed: X = "
                  "torch.linalg.lu_solve(LU, pivots, B)", UserWarning, stacklevel=2)
    return linalg_lu_solve(LU_data, LU_pivots, b)


@function
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):  # noqa: N803
    """lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True)
    -> (Tensor, Tensor, Tensor)

    (P, L, U) of lu_factor's packed result with A = P L U for A (*, m, n): P (*, m, m)
    the pivots' permutation matrix, L (*, m, k) unit lower triangular, U (*, k, n) upper
    triangular, k = min(m, n), in LU_data's dtype. ``unpack_data=False`` gives empty L
    and U, ``unpack_pivots=False`` an empty P."""
    op = "lu_unpack"
    if not isinstance(LU_data, Tensor) or not isinstance(LU_pivots, Tensor):
        raise TypeError(f"{op}: LU_data and LU_pivots must be tensors, got "
                        f"{type(LU_data).__name__} and {type(LU_pivots).__name__}")
    if LU_data.ndim < 2:
        raise OpError(f"{op}: Expected LU_data with 2 or more dimensions, got shape "
                      f"{LU_data.shape}; pass lu_factor's LU")
    if LU_pivots.dtype is not int32:
        raise OpTypeError(f"{op}: LU_pivots is expected to be a tensor of int32 dtype (as "
                          f"lu_factor gives it), got {LU_pivots.dtype.name}")
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    if tuple(LU_pivots.shape) != tuple(LU_data.shape[:-2]) + (k,):
        raise OpError(f"{op}: LU_pivots of shape {LU_pivots.shape} for LU_data of shape "
                      f"{LU_data.shape}: expected {tuple(LU_data.shape[:-2]) + (k,)} "
                      f"(min(m, n) pivots per matrix)")
    empty = LU_data.new_empty(0)
    P = empty
    if unpack_pivots:
        pivots = LU_pivots.detach().cpu().numpy()
        if pivots.size and (pivots.min() < 1 or pivots.max() > m):
            raise OpError(f"{op}: pivots passed to lu_unpack must be between 1 and "
                          f"LU.size(-2) = {m} inclusive, got values in [{pivots.min()}, "
                          f"{pivots.max()}]; did you pass the result of lu_factor?")
        P = np.zeros(LU_data.shape[:-2] + (m, m), LU_data.dtype.np)
        np.put_along_axis(P, permutation(pivots, m)[..., None, :], 1, axis=-2)
        P = on_device(P, LU_data)
    if not unpack_data:
        return LU(P, empty, LU_data.new_empty(0))
    # (the unit diagonal by where, not by adding an identity: any dtype, bool included)
    unit = eye(m, k, dtype=bool_, device=LU_data.device)
    L = where(unit, LU_data.new_ones(()), LU_data[..., :, :k].tril(-1))
    return LU(P, L, LU_data[..., :k, :].triu())


declare("lu")
declare("lu_solve", arity=2)
declare("lu_unpack", dtypes="any")
