"""The named tuples the linear-algebra ops return, with PyTorch's field names
(torch.return_types.linalg_eigh and the others)."""

from __future__ import annotations

from collections import namedtuple

SLogDet = namedtuple("SLogDet", ["sign", "logabsdet"])
Eigh = namedtuple("Eigh", ["eigenvalues", "eigenvectors"])
QR = namedtuple("QR", ["Q", "R"])
SVD = namedtuple("SVD", ["U", "S", "Vh"])
Lstsq = namedtuple("Lstsq", ["solution", "residuals", "rank", "singular_values"])
#: torch.svd's result: V itself, not its transpose
SVDWithV = namedtuple("SVDWithV", ["U", "S", "V"])
LUFactor = namedtuple("LUFactor", ["LU", "pivots"])
LUFactorEx = namedtuple("LUFactorEx", ["LU", "pivots", "info"])
LU = namedtuple("LU", ["P", "L", "U"])
#: the _ex forms' results: the value and LAPACK's info per matrix
SolveEx = namedtuple("SolveEx", ["result", "info"])
InvEx = namedtuple("InvEx", ["inverse", "info"])
CholeskyEx = namedtuple("CholeskyEx", ["L", "info"])
#: torch.triangular_solve's result
TriangularSolve = namedtuple("TriangularSolve", ["solution", "cloned_coefficient"])
