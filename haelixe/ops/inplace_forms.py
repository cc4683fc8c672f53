"""The in-place forms PyTorch's Tensor has of ops declared elsewhere: the view ops
(unsqueeze_, squeeze_, t_, transpose_, as_strided_: the tensor itself takes the view's
layout), the scans and triangles (cumsum_, cumprod_, tril_, triu_) and fill_diagonal_.
(The comparisons' in-place forms are in ops/inplace_compare.py.)"""

from __future__ import annotations

import numpy as np

from ..dtype import bool_
from ..errors import OpError
from ..tensor import Tensor
from .arranging import view_in_place
from .composite import _in_place
from .convert import as_tensor_like
from .indexing import where
from .registry import tensor_method


# -- view ops: the tensor takes the view's layout ----------------------------------------------
@tensor_method(name="unsqueeze_")
def unsqueeze_(input, dim):  # noqa: A002 (PyTorch's names)
    """unsqueeze_(dim) -> Tensor

    In place: this tensor gains a dim of size 1 at ``dim`` (its memory untouched)."""
    return view_in_place(input, lambda t: t.unsqueeze(dim), "unsqueeze_")


@tensor_method(name="squeeze_")
def squeeze_(input, dim=None):  # noqa: A002
    """squeeze_(dim=None) -> Tensor

    In place: this tensor loses its dims of size 1 (those of ``dim``, an int or a tuple,
    where given)."""
    return view_in_place(input, lambda t: t.squeeze() if dim is None else t.squeeze(dim),
                         "squeeze_")


@tensor_method(name="transpose_")
def transpose_(input, dim0, dim1):  # noqa: A002
    """transpose_(dim0, dim1) -> Tensor

    In place: this tensor becomes its view with dims dim0 and dim1 swapped."""
    return view_in_place(input, lambda t: t.transpose(dim0, dim1), "transpose_")


@tensor_method(name="as_strided_")
def as_strided_(input, size, stride, storage_offset=None):  # noqa: A002
    """as_strided_(size, stride, storage_offset=None) -> Tensor

    In place: this tensor becomes the view of its storage with that size, stride and
    offset (its own offset when None)."""
    return view_in_place(input, lambda t: t.as_strided(size, stride, storage_offset),
                         "as_strided_")


@tensor_method(name="t_")
def t_(input):  # noqa: A002
    """t_() -> Tensor

    In place: this tensor (at most 2-D) becomes its transpose."""
    return view_in_place(input, lambda t: t.t(), "t_")


# -- scans and triangles: the result written into the tensor's memory --------------------------
@tensor_method(name="cumsum_")
def cumsum_(input, dim, *, dtype=None):  # noqa: A002
    """cumsum_(dim, *, dtype=None) -> Tensor

    In-place cumsum (an integer tensor keeps its dtype; dtype= must be its own)."""
    _own_dtype("cumsum_", input, dtype)
    return _in_place(input, "cumsum", lambda x: x.cumsum(dim))


@tensor_method(name="cumprod_")
def cumprod_(input, dim, *, dtype=None):  # noqa: A002
    """cumprod_(dim, *, dtype=None) -> Tensor

    In-place cumprod (an integer tensor keeps its dtype; dtype= must be its own)."""
    _own_dtype("cumprod_", input, dtype)
    return _in_place(input, "cumprod", lambda x: x.cumprod(dim))


def _own_dtype(op, x, dtype):
    if dtype is not None and dtype is not x.dtype:
        raise RuntimeError(f"{op}: bad in-place call: the tensor's dtype {x.dtype.name} and "
                           f"the output dtype {getattr(dtype, 'name', dtype)} should match; "
                           f"use the out-of-place {op[:-1]}(dtype=...)")


@tensor_method(name="tril_")
def tril_(input, diagonal=0):  # noqa: A002
    """tril_(diagonal=0) -> Tensor

    In-place tril: the elements above the ``diagonal``-th diagonal set to 0."""
    return _in_place(input, "tril", lambda x: x.tril(diagonal))


@tensor_method(name="triu_")
def triu_(input, diagonal=0):  # noqa: A002
    """triu_(diagonal=0) -> Tensor

    In-place triu: the elements below the ``diagonal``-th diagonal set to 0."""
    return _in_place(input, "triu", lambda x: x.triu(diagonal))


@tensor_method(name="fill_diagonal_")
def fill_diagonal_(input, fill_value, wrap=False):  # noqa: A002
    """fill_diagonal_(fill_value, wrap=False) -> Tensor

    In place: the main diagonal (every dim's index equal) set to ``fill_value``; a tall
    matrix with wrap=True starts again N + 1 rows further down, as numpy's."""
    x = input
    if x.ndim < 2:
        raise OpError(f"fill_diagonal_: dimensions must be larger than 1, got shape "
                      f"{x.shape}")
    if x.ndim > 2 and len(set(x.shape)) != 1:
        raise OpError(f"fill_diagonal_: all dimensions of input must be of equal length, "
                      f"got shape {x.shape}")
    mask = np.zeros(x.shape, bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    where_mask = as_tensor_like(mask, x)
    return _in_place(x, "fill_diagonal",
                     lambda t: where(where_mask, _as_number(fill_value, x.dtype), t))


def _as_number(value, dtype):
    """fill_value as the tensor's dtype holds it (an int tensor truncates a float)."""
    if isinstance(value, Tensor):
        value = value.item()
    return value if dtype.is_floating_point or dtype is bool_ else int(value)
