"""hx.linalg: PyTorch's torch.linalg (``import torch.linalg`` resolves here under
Haelixe's torch alias), with its signatures, batching over leading dims, errors and
gradients.

    import haelixe as hx
    A = hx.randn(4, 3, 3, dtype=hx.float64, requires_grad=True)
    sign, logabsdet = hx.linalg.slogdet(A)
    x = hx.linalg.solve(A, hx.randn(4, 3, dtype=hx.float64))

The decompositions (det, slogdet, inv, solve, cholesky, qr, eigh, svd, pinv, lstsq...)
run on the host through numpy's LAPACK, in float32 or float64 (16-bit and integer inputs
raise TypeError, as PyTorch refuses them), and return on the input's device; the norms,
cross, vecdot, multi_dot, matrix_power and matrix_exp are compositions of Haelixe ops.
"""

from __future__ import annotations

from .ops.linalg import matmul
from .ops.linalg_compose import cross, diagonal, matrix_exp, matrix_power, multi_dot, vecdot
from .ops.linalg_factor import cholesky, eigh, eigvalsh, qr, svd, svdvals
from .ops.linalg_host import LinAlgError
from .ops.linalg_lstsq import lstsq, matrix_rank, pinv
from .ops.linalg_lu import lu, lu_factor, lu_factor_ex, lu_solve
from .ops.linalg_norms import matrix_norm, norm, vector_norm
from .ops.linalg_solve import det, inv, slogdet, solve
from .ops.linalg_triangular import solve_triangular

__all__ = ["LinAlgError", "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv",
           "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve", "matmul", "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank",
           "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_triangular", "svd", "svdvals",
           "vecdot", "vector_norm"]

#: torch.linalg names Haelixe does not have, with what to use instead
_MISSING = {
    "eig": "hx.linalg.eigh for a symmetric matrix (Haelixe has no complex dtypes)",
    "eigvals": "hx.linalg.eigvalsh for a symmetric matrix (Haelixe has no complex dtypes)",
    "ldl_factor": "hx.linalg.cholesky, or hx.linalg.eigh for an indefinite matrix",
    "ldl_factor_ex": "hx.linalg.cholesky, or hx.linalg.eigh for an indefinite matrix",
    "ldl_solve": "hx.linalg.solve",
    "solve_ex": "hx.linalg.solve, which raises LinAlgError where solve_ex reports info",
    "inv_ex": "hx.linalg.inv, which raises LinAlgError where inv_ex reports info",
    "cholesky_ex": "hx.linalg.cholesky, which raises LinAlgError where cholesky_ex "
                   "reports info",
    "cond": "hx.linalg.svdvals(A) (its first over its last value is the 2-norm "
            "condition number)",
    "householder_product": "hx.linalg.qr",
    "tensorinv": "hx.linalg.inv of the tensor reshaped to a matrix",
    "tensorsolve": "hx.linalg.solve of the tensors reshaped to matrices",
    "vander": "x.unsqueeze(-1) ** hx.arange(n)",
}


def __getattr__(name):
    from .closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), _MISSING)
