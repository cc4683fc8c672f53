"""Small shape ops composed of views and reductions (fliplr, flipud, diagflat,
split_with_sizes, Tensor.sum_to_size), and unique_consecutive (host runs, no gradient,
as unique)."""

from __future__ import annotations

import numpy as np

from .. import layout
from ..errors import OpError
from ..tensor import Tensor
from .composite import diag_embed
from .registry import declare, tensor_method


@tensor_method(function=True)
def fliplr(input):  # noqa: A002 (PyTorch's names)
    """fliplr(input) -> Tensor

    input with its columns (dim 1) in reverse order; it needs at least 2 dims."""
    if input.ndim < 2:
        raise OpError(f"fliplr: input must be >= 2-d, got shape {input.shape}")
    return input.flip(1)


@tensor_method(function=True)
def flipud(input):  # noqa: A002
    """flipud(input) -> Tensor

    input with its rows (dim 0) in reverse order; it needs at least 1 dim."""
    if input.ndim < 1:
        raise OpError("flipud: input must be >= 1-d, got a 0-d tensor")
    return input.flip(0)


@tensor_method(function=True)
def diagflat(input, offset=0):  # noqa: A002
    """diagflat(input, offset=0) -> Tensor

    A square matrix with input's elements (flattened) on its ``offset``-th diagonal and
    zeros elsewhere."""
    return diag_embed(input.reshape(-1), offset)


@tensor_method(function=True)
def split_with_sizes(input, split_sizes, dim=0):  # noqa: A002
    """split_with_sizes(input, split_sizes, dim=0) -> List of Tensors

    input cut along ``dim`` into consecutive views of the given sizes, which must add up
    to the dim's size."""
    d = layout.normalize_dim(dim, input.ndim, "split_with_sizes")
    sizes = [int(s) for s in split_sizes]
    if any(s < 0 for s in sizes) or sum(sizes) != input.shape[d]:
        raise OpError(f"split_with_sizes: expects split_sizes to sum exactly to "
                      f"{input.shape[d]} (input tensor's size at dimension {d}), with "
                      f"none negative, but got split_sizes={sizes}")
    return list(input.split(sizes, d))


def sum_to_size(self, *size):
    """sum_to_size(*size) -> Tensor

    This tensor summed down to ``size``, which must expand to its shape (the adjoint of
    expand): dims of size 1 in ``size`` are summed with keepdim, leading ones removed."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    try:
        expanded = layout.broadcast_shapes(size, self.shape)
    except OpError:
        expanded = None
    if expanded != self.shape:
        raise OpError(f"sum_to_size: size {list(size)} is not expandable to size "
                      f"{list(self.shape)}")
    if size == self.shape:
        return self
    lead, keep = layout.reduced_dims(size, self.shape)
    out = self.sum(tuple(keep), keepdim=True) if keep else self  # (ints sum in int64)
    out = out.sum(tuple(lead)) if lead else out
    return out.reshape(size)


Tensor.sum_to_size = sum_to_size


@tensor_method(function=True)
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """unique_consecutive(input, return_inverse=False, return_counts=False, dim=None)

    The input with each run of equal consecutive elements (or, with ``dim``, equal
    consecutive slices along dim) kept once; with ``return_inverse`` also each element's
    run (the input's shape, or dim's length), with ``return_counts`` each run's length.
    No gradient, as in PyTorch."""
    host = input.detach().cpu().numpy()
    if dim is None:
        rows = host.reshape(-1)
        change = rows[1:] != rows[:-1]
    else:
        d = layout.normalize_dim(dim, input.ndim, "unique_consecutive")
        rest = int(np.prod([s for i, s in enumerate(host.shape) if i != d]))
        if rest == 0 and input.ndim > 1:  # (no slice to compare: PyTorch refuses)
            raise OpError(f"unique_consecutive: shape {input.shape} has 0-sized dims other "
                          f"than dim {d}, so there are no slices to compare; select the "
                          f"0-sized dim or drop it first")
        rows = np.moveaxis(host, d, 0).reshape(host.shape[d], rest)
        change = (rows[1:] != rows[:-1]).any(axis=1)
    n = rows.shape[0]
    starts = np.flatnonzero(np.concatenate([[True], change])) if n else \
        np.zeros(0, np.int64)
    inverse = np.concatenate([[0], np.cumsum(change)]) if n else np.zeros(0, np.int64)
    counts = np.diff(np.append(starts, n))
    values = rows[starts] if dim is None else np.take(host, starts, axis=d)
    if dim is None:
        inverse = inverse.reshape(host.shape)

    def back(a):
        return Tensor._wrap(input._be.from_numpy(np.array(a, order="C")))

    out = back(values.astype(host.dtype, copy=False))
    extra = [back(a.astype(np.int64)) for a, want in ((inverse, return_inverse),
                                                     (counts, return_counts)) if want]
    return (out, *extra) if extra else out


for _name in ("fliplr", "flipud", "diagflat", "split_with_sizes"):
    declare(_name, dtypes="any")
declare("sum_to_size", dtypes="any")
declare("unique_consecutive", dtypes="any", differentiable=False)
