"""hx.linalg: PyTorch's torch.linalg (``import torch.linalg`` resolves here under
Haelixe's torch alias), with its signatures, batching over leading dims, errors and
gradients.

    import haelixe as hx
    A = hx.randn(4, 3, 3, dtype=hx.float64, requires_grad=True)
    sign, logabsdet = hx.linalg.slogdet(A)
    x = hx.linalg.solve(A, hx.randn(4, 3, dtype=hx.float64))

The decompositions (det, slogdet, inv, solve, cholesky, qr, eigh, svd, pinv, lstsq, the
LU family, solve_triangular, the _ex forms...) run on the host through numpy (its LAPACK,
or LAPACK's LU and substitution written over numpy), in float32 or float64 (16-bit and
integer inputs raise TypeError, as PyTorch refuses them), and return on the input's device;
the norms, cross, vecdot, multi_dot, matrix_power, matrix_exp, cond, tensorinv,
tensorsolve and vander are compositions of Haelixe ops.
"""

from __future__ import annotations

from .ops.linalg import matmul
from .ops.linalg_compose import cross, diagonal, matrix_exp, matrix_power, multi_dot, vecdot
from .ops.linalg_ex import cholesky_ex, cond, inv_ex, solve_ex
from .ops.linalg_factor import cholesky, eigh, eigvalsh, qr, svd, svdvals
from .ops.linalg_host import LinAlgError
from .ops.linalg_lstsq import lstsq, matrix_rank, pinv
from .ops.linalg_lu import lu, lu_factor, lu_factor_ex, lu_solve
from .ops.linalg_norms import matrix_norm, norm, vector_norm
from .ops.linalg_solve import det, inv, slogdet, solve
from .ops.linalg_tensor import householder_product, tensorinv, tensorsolve, vander
from .ops.linalg_triangular import solve_triangular

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal",
           "eigh", "eigvalsh", "householder_product", "inv", "inv_ex", "lstsq", "lu",
           "lu_factor", "lu_factor_ex", "lu_solve", "matmul", "matrix_exp", "matrix_norm",
           "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet",
           "solve", "solve_ex", "solve_triangular", "svd", "svdvals", "tensorinv",
           "tensorsolve", "vander", "vecdot", "vector_norm"]

#: torch.linalg names Haelixe does not have, with what to use instead
_MISSING = {
    "eig": "hx.linalg.eigh for a symmetric matrix (Haelixe has no complex dtypes)",
    "eigvals": "hx.linalg.eigvalsh for a symmetric matrix (Haelixe has no complex dtypes)",
    "ldl_factor": "hx.linalg.lu_factor (hx.linalg.cholesky where positive-definite)",
    "ldl_factor_ex": "hx.linalg.lu_factor (hx.linalg.cholesky where positive-definite)",
    "ldl_solve": "hx.linalg.lu_factor and hx.linalg.lu_solve",
}


def __getattr__(name):
    from .closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), _MISSING)
