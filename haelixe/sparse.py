"""Sparse matrices in coordinate form (PyTorch's ``torch.sparse_coo_tensor``): the
positions of the nonzero entries (``indices``, int64 of shape (ndim, nnz)) and their
``values`` (nnz,), over a dense ``size``, as graph programs keep an adjacency matrix.

    adj = torch.sparse_coo_tensor(edges, torch.ones(E), (V, V))
    h = torch.spmm(adj, x @ w)           # (V, V) sparse times (V, F) dense: dense

What a sparse tensor does is what those programs ask of one: ``to_dense()``,
``coalesce()``, ``indices()`` / ``values()``, ``t()``, a product with a dense matrix on
either side (``@``, ``mm``, ``spmm``, ``torch.sparse.mm``), ``sum()``, and any
elementwise op with a dense tensor, where it takes part as its dense form (so ``eye + adj``
is dense, as PyTorch's). Each is composed of dense ops (the product gathers the rows each
entry reads and adds them up with ``index_add``), so gradients reach both the dense
operand and the values, on the CPU and the GPU alike. Every other op raises, naming
``to_dense()``. The values are one number per entry (no dense trailing dims, which
PyTorch calls a hybrid tensor).
"""

from __future__ import annotations

from . import creation
from .ops.indexing import cat, stack
from .tensor import Tensor

__all__ = ["SparseTensor", "sparse_coo_tensor", "spmm", "mm", "sum"]


class SparseTensor:
    """A sparse COO tensor: ``indices`` (ndim, nnz) int64 and ``values`` (nnz,)."""

    is_sparse = True

    def __init__(self, indices: Tensor, values: Tensor, size: tuple, coalesced: bool):
        self._indices_t, self._values_t = indices, values
        self.shape, self._coalesced = tuple(size), coalesced

    # -- what it is ----------------------------------------------------------------------
    dtype = property(lambda self: self._values_t.dtype)
    device = property(lambda self: self._values_t.device)
    ndim = property(lambda self: len(self.shape))
    requires_grad = property(lambda self: self._values_t.requires_grad)
    grad_fn = property(lambda self: self._values_t.grad_fn)

    @property
    def grad(self):
        """The gradient over this tensor's entries, as a sparse tensor of its pattern
        (PyTorch's spmm gives the dense gradient, whose values at these positions are
        the same)."""
        g = self._values_t.grad
        return None if g is None else SparseTensor(self._indices_t, g, self.shape,
                                                   self._coalesced)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def _nnz(self) -> int:
        return self._values_t.shape[0]

    def _indices(self) -> Tensor:
        return self._indices_t

    def _values(self) -> Tensor:
        return self._values_t

    def is_coalesced(self) -> bool:
        return self._coalesced

    def indices(self) -> Tensor:
        self._need_coalesced("indices")
        return self._indices_t

    def values(self) -> Tensor:
        self._need_coalesced("values")
        return self._values_t

    def _need_coalesced(self, op):
        if not self._coalesced:
            raise RuntimeError(f"{op}: this sparse tensor may hold one position twice; "
                               f"call .coalesce() first (or ._{op}() for the raw ones), "
                               f"as in PyTorch")

    def __repr__(self) -> str:
        return (f"tensor(indices={self._indices_t!r},\n       values={self._values_t!r},\n"
                f"       size={self.shape}, nnz={self._nnz()}, layout=torch.sparse_coo)")

    # -- conversions ---------------------------------------------------------------------
    def _flat_positions(self) -> Tensor:
        """Each entry's position in the dense tensor read row-major."""
        flat = creation.zeros(self._nnz(), dtype="int64", device=self.device)
        for d, n in enumerate(self.shape):
            flat = flat * n + self._indices_t[d]
        return flat

    def to_dense(self, dtype=None) -> Tensor:
        """The dense tensor (entries at one position add up), differentiable in values."""
        n = 1
        for s in self.shape:
            n *= s
        dense = creation.zeros(n, dtype=self.dtype, device=self.device)
        dense = dense.index_add(0, self._flat_positions(), self._values_t)
        dense = dense.reshape(self.shape)
        return dense if dtype is None else dense.to(dtype)

    def coalesce(self) -> SparseTensor:
        """One entry per position, sorted row-major, duplicates added up."""
        if self._coalesced:
            return self
        flat = self._flat_positions()
        unique, inverse = flat.unique(sorted=True, return_inverse=True)
        values = creation.zeros(unique.shape[0], dtype=self.dtype, device=self.device)
        values = values.index_add(0, inverse, self._values_t)
        return SparseTensor(_unflatten(unique, self.shape), values, self.shape, True)

    def to(self, *args, **kwargs) -> SparseTensor:
        values = self._values_t.to(*args, **kwargs)
        return SparseTensor(self._indices_t.to(values.device), values, self.shape,
                            self._coalesced)

    def cpu(self) -> SparseTensor:
        return self.to("cpu")

    def detach(self) -> SparseTensor:
        return SparseTensor(self._indices_t, self._values_t.detach(), self.shape,
                            self._coalesced)

    def requires_grad_(self, requires_grad: bool = True) -> SparseTensor:
        self._values_t.requires_grad_(requires_grad)
        return self

    def to_sparse(self) -> SparseTensor:
        return self

    # -- ops -----------------------------------------------------------------------------
    def t(self) -> SparseTensor:
        if self.ndim != 2:
            raise RuntimeError(f"t: expects a 2-D sparse tensor, got size {self.shape}")
        swapped = self._indices_t.flip(0)
        return SparseTensor(swapped, self._values_t, self.shape[::-1], False)

    def transpose(self, dim0: int, dim1: int) -> SparseTensor:
        if {dim0 % max(self.ndim, 1), dim1 % max(self.ndim, 1)} != {0, 1} or self.ndim != 2:
            raise RuntimeError(f"transpose: Haelixe's sparse tensors transpose their two "
                               f"dims only, got size {self.shape} and dims {dim0}, {dim1}")
        return self.t()

    def sum(self, dim=None, keepdim=False, dtype=None) -> Tensor:
        if dim is not None:
            return self.to_dense().sum(dim, keepdim=keepdim, dtype=dtype)
        return self._values_t.sum(dtype=dtype)

    def mm(self, mat2) -> Tensor:
        return mm(self, mat2)

    def __matmul__(self, other) -> Tensor:
        return mm(self, other)

    def __rmatmul__(self, other) -> Tensor:
        return mm(other, self)

    def __mul__(self, other) -> SparseTensor:
        if isinstance(other, (int, float)):  # (a number keeps it sparse, as in PyTorch)
            return SparseTensor(self._indices_t, self._values_t * other, self.shape,
                                self._coalesced)
        return self.to_dense() * other

    __rmul__ = __mul__

    def __neg__(self) -> SparseTensor:
        return self * -1

    def __add__(self, other):
        if isinstance(other, SparseTensor):
            _same_size("add", self, other)
            return SparseTensor(cat([self._indices_t, other._indices_t], 1),
                                cat([self._values_t, other._values_t], 0),
                                self.shape, False)
        return self.to_dense() + other

    def __radd__(self, other):
        return other + self.to_dense()

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return other - self.to_dense()

    def __truediv__(self, other):
        if isinstance(other, (int, float)):
            return self * (1.0 / other)
        return self.to_dense() / other

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"a sparse tensor has no {name} in Haelixe (its sparse tensors "
                             f"do to_dense, coalesce, indices/values, t, sum, the product "
                             f"with a dense matrix and elementwise ops with dense tensors); "
                             f"call .to_dense() first")


def _unflatten(flat: Tensor, shape: tuple) -> Tensor:
    rows = []
    for n in reversed(shape):
        rows.append(flat % n)
        flat = flat // n
    if not rows:  # (a 0-d tensor's entries: no index rows)
        return creation.zeros(0, flat.shape[0], dtype="int64", device=flat.device)
    return stack(rows[::-1])


def _same_size(op, a, b):
    if a.shape != b.shape:
        raise RuntimeError(f"{op}: sparse tensors of sizes {a.shape} and {b.shape}; they "
                           f"must match")


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None,
                      is_coalesced=None) -> SparseTensor:
    """A sparse tensor with ``values[k]`` at position ``indices[:, k]`` (entries at one
    position add up); ``size`` defaults to the smallest that holds every index."""
    idx = indices if isinstance(indices, Tensor) else creation.tensor(indices)
    vals = values if isinstance(values, Tensor) else creation.tensor(values)
    if idx.dtype.is_floating_point or idx.dtype.name == "bool":
        raise TypeError(f"sparse_coo_tensor: indices must be integers, got {idx.dtype.name}")
    if idx.ndim != 2:
        raise ValueError(f"sparse_coo_tensor: indices must be 2-D (ndim, nnz), got shape "
                         f"{idx.shape}")
    if vals.ndim != 1 or vals.shape[0] != idx.shape[1]:
        raise ValueError(f"sparse_coo_tensor: values must be 1-D with one value per index "
                         f"column ({idx.shape[1]}), got shape {vals.shape}; Haelixe's "
                         f"sparse tensors hold one number per entry")
    idx = idx.to("int64")
    if device is not None:
        idx, vals = idx.to(device), vals.to(device)
    else:
        idx = idx.to(vals.device)
    if dtype is not None:
        vals = vals.to(dtype)
    if idx.shape[1] and (idx.min().item() < 0):
        raise RuntimeError("sparse_coo_tensor: indices must be >= 0")
    reach = tuple(int(m) + 1 for m in idx.max(1).values.tolist()) if idx.shape[1] else \
        (0,) * idx.shape[0]
    if size is None:
        size = reach
    size = tuple(int(s) for s in size)
    if len(size) != idx.shape[0]:
        raise ValueError(f"sparse_coo_tensor: size {size} has {len(size)} dims, the "
                         f"indices {idx.shape[0]} rows; Haelixe's sparse tensors have no "
                         f"dense dims")
    if any(r > s for r, s in zip(reach, size)):
        raise RuntimeError(f"sparse_coo_tensor: an index reaches {reach}, beyond size {size}")
    if requires_grad:
        vals = vals.detach().requires_grad_(True)
    return SparseTensor(idx, vals, size, bool(is_coalesced) or idx.shape[1] <= 1)


def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None,
              dense_dim=None) -> SparseTensor:
    """The sparse form of a dense tensor: its nonzero entries, coalesced (differentiable
    in the values kept)."""
    if sparse_dim not in (None, self.ndim) or dense_dim not in (None, 0) or \
            layout not in (None, "sparse_coo") or blocksize is not None:
        raise RuntimeError("to_sparse: Haelixe makes COO tensors over every dim only; call "
                           "to_sparse() with no arguments")
    positions = self.nonzero().T  # (ndim, nnz), row-major: coalesced
    values = self[tuple(positions[d] for d in range(self.ndim))] if self.ndim else \
        self.reshape(1)
    return SparseTensor(positions, values, self.shape, True)


def mm(mat1, mat2) -> Tensor:
    """The product of a sparse and a dense matrix (either way round): dense."""
    if isinstance(mat1, SparseTensor) and isinstance(mat2, SparseTensor):
        return mm(mat1, mat2.to_dense())
    if isinstance(mat2, SparseTensor):  # dense @ sparse = (sparse^T @ dense^T)^T
        return mm(mat2.t(), mat1.T).T
    if not isinstance(mat1, SparseTensor) or not isinstance(mat2, Tensor):
        raise TypeError(f"mm: expected a sparse and a dense matrix, got "
                        f"{type(mat1).__name__} and {type(mat2).__name__}")
    if mat1.ndim != 2 or mat2.ndim not in (1, 2) or mat1.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mm: sizes {mat1.shape} (sparse) and {tuple(mat2.shape)} cannot "
                           f"be multiplied: the sparse matrix's columns must equal the dense "
                           f"one's rows")
    rows, cols = mat1._indices_t[0], mat1._indices_t[1]
    values = mat1._values_t.to(mat2.dtype)
    picked = mat2[cols]  # (nnz, n): the row of mat2 each entry multiplies
    weighted = picked * (values if mat2.ndim == 1 else values.unsqueeze(1))
    out = creation.zeros(mat1.shape[0], *mat2.shape[1:], dtype=mat2.dtype,
                         device=mat2.device)
    return out.index_add(0, rows, weighted)


def spmm(input, mat2) -> Tensor:
    """torch.spmm: a sparse matrix times a dense one."""
    return mm(input, mat2)


def sum(input, dim=None):  # noqa: A001 (PyTorch's name)
    """torch.sparse.sum: every entry added up (or, with ``dim``, the dense sums)."""
    return input.sum(dim)


Tensor.is_sparse = False
Tensor.to_sparse = to_sparse
