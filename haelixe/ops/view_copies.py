"""PyTorch's view-copy ops (view_copy, permute_copy, split_copy...) and its unsafe splits.

A view-copy op is its view op, then each result copied into memory of its own (a
contiguous tensor sharing nothing with the input). ``_view_copy`` makes every one of them
from a function that returns the view, so each is one line over its view op and its
gradient is the view's, through a Clone. unsafe_split, unsafe_split_with_sizes and
unsafe_chunk are PyTorch's splits without its view bookkeeping: their results are
split's, as views here too."""

from __future__ import annotations

import functools

from .. import layout
from ..dtype import DType
from ..errors import OpError
from ..tensor import Tensor
from .registry import declare, function, tensor_method
from .shape_compose import split_with_sizes
from .views import chunk, split


def _renamed(op, error):
    """``error`` (a view op's) with the copy's name in front: the user called op."""
    try:
        renamed = type(error)(f"{op}: {error}")
    except TypeError:  # (an error class whose constructor wants more than a message)
        return error
    return renamed


def _view_copy(view=None, *, method=False):
    """Declare ``view``'s copy form under view's own name (permute_copy...): the function
    returns what its view op returns; the form clones each result. ``method`` attaches it
    to Tensor too, where PyTorch has the method (narrow_copy)."""

    def make(view):
        op = view.__name__

        @functools.wraps(view)
        def copy_form(*args, **kwargs):
            try:
                out = view(*args, **kwargs)
            except (RuntimeError, ValueError, IndexError) as e:
                raise _renamed(op, e) from None
            if isinstance(out, Tensor):
                return out.clone()
            return tuple(t.clone() for t in out)

        if method:
            tensor_method(copy_form, name=op, function=True)
        else:
            function(copy_form, name=op)
        declare(op, dtypes="any")
        return copy_form

    return make(view) if view is not None else make


def _ints(sizes) -> tuple:
    """An int list argument as PyTorch's parser takes it: a sequence, or one int."""
    return (sizes,) if isinstance(sizes, int) else tuple(sizes)


def _tensor(op, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, not "
                        f"{type(x).__name__}")
    return x


@_view_copy
def alias_copy(input):  # noqa: A002 (PyTorch's names)
    """alias_copy(input) -> Tensor

    A copy of input (the copy of PyTorch's alias, a view of the whole tensor)."""
    return _tensor("alias_copy", input)


@_view_copy
def as_strided_copy(input, size, stride, storage_offset=None):  # noqa: A002
    """as_strided_copy(input, size, stride, storage_offset=None) -> Tensor

    as_strided(input, size, stride, storage_offset), copied."""
    return _tensor("as_strided_copy", input).as_strided(size, stride, storage_offset)


@_view_copy
def detach_copy(input):  # noqa: A002
    """detach_copy(input) -> Tensor

    input.detach(), copied: no gradient reaches input (PyTorch's result says it requires
    grad, and its backward raises "not implemented")."""
    return _tensor("detach_copy", input).detach()


@_view_copy
def diagonal_copy(input, offset=0, dim1=0, dim2=1):  # noqa: A002
    """diagonal_copy(input, offset=0, dim1=0, dim2=1) -> Tensor

    diagonal(input, offset, dim1, dim2), copied."""
    return _tensor("diagonal_copy", input).diagonal(offset, dim1, dim2)


@_view_copy
def expand_copy(input, size, *, implicit=False):  # noqa: A002
    """expand_copy(input, size, *, implicit=False) -> Tensor

    input.expand(size), copied: every repeated element its own memory (``implicit`` is
    ATen's note of who expanded, and changes nothing)."""
    return _tensor("expand_copy", input).expand(_ints(size))


@_view_copy(method=True)
def narrow_copy(input, dim, start, length):  # noqa: A002
    """narrow_copy(input, dim, start, length) -> Tensor

    narrow(input, dim, start, length), copied."""
    return _tensor("narrow_copy", input).narrow(dim, start, length)


@_view_copy
def permute_copy(input, dims):  # noqa: A002
    """permute_copy(input, dims) -> Tensor

    input.permute(dims), copied (contiguous in the new order)."""
    return _tensor("permute_copy", input).permute(_ints(dims))


@_view_copy
def select_copy(input, dim, index):  # noqa: A002
    """select_copy(input, dim, index) -> Tensor

    select(input, dim, index), copied."""
    return _tensor("select_copy", input).select(dim, index)


@_view_copy
def slice_copy(input, dim=0, start=None, end=None, step=1):  # noqa: A002
    """slice_copy(input, dim=0, start=None, end=None, step=1) -> Tensor

    input[start:end:step] along ``dim``, copied (start and end clamped to the dim, as a
    Python slice's; the step must be positive)."""
    _tensor("slice_copy", input)
    if input.ndim == 0:
        raise OpError("slice() cannot be applied to a 0-dim tensor")
    d = layout.normalize_dim(dim, input.ndim, "slice")
    if step <= 0:
        raise OpError(f"slice step must be positive, got {step}")
    return input[(slice(None),) * d + (slice(start, end, step),)]


@_view_copy
def split_copy(input, split_size, dim=0):  # noqa: A002
    """split_copy(input, split_size, dim=0) -> tuple of Tensors

    split(input, split_size, dim), each part copied; ``split_size`` is one int (the last
    part may be smaller): split_with_sizes_copy takes a list of sizes."""
    _tensor("split_copy", input)
    _one_size("split_copy", split_size, "split_with_sizes_copy")
    return split(input, split_size, dim)


@_view_copy
def split_with_sizes_copy(input, split_sizes, dim=0):  # noqa: A002
    """split_with_sizes_copy(input, split_sizes, dim=0) -> tuple of Tensors

    split_with_sizes(input, split_sizes, dim), each part copied."""
    return split_with_sizes(_tensor("split_with_sizes_copy", input), split_sizes, dim)


@_view_copy
def squeeze_copy(input, dim=None):  # noqa: A002
    """squeeze_copy(input, dim=None) -> Tensor

    squeeze(input, dim), copied: ``dim`` an int, a tuple of them, or None for every dim
    of size 1."""
    return _tensor("squeeze_copy", input).squeeze(dim)


@_view_copy
def t_copy(input):  # noqa: A002
    """t_copy(input) -> Tensor

    input.t(), copied (a tensor of at most 2 dims)."""
    return _tensor("t_copy", input).t()


@_view_copy
def transpose_copy(input, dim0, dim1):  # noqa: A002
    """transpose_copy(input, dim0, dim1) -> Tensor

    transpose(input, dim0, dim1), copied."""
    return _tensor("transpose_copy", input).transpose(dim0, dim1)


@_view_copy
def unbind_copy(input, dim=0):  # noqa: A002
    """unbind_copy(input, dim=0) -> tuple of Tensors

    unbind(input, dim), each slice copied."""
    return _tensor("unbind_copy", input).unbind(dim)


@_view_copy
def unfold_copy(input, dimension, size, step):  # noqa: A002
    """unfold_copy(input, dimension, size, step) -> Tensor

    input.unfold(dimension, size, step), copied: the overlapping windows each their own
    memory."""
    return _tensor("unfold_copy", input).unfold(dimension, size, step)


@_view_copy
def unsqueeze_copy(input, dim):  # noqa: A002
    """unsqueeze_copy(input, dim) -> Tensor

    unsqueeze(input, dim), copied."""
    return _tensor("unsqueeze_copy", input).unsqueeze(dim)


@_view_copy
def view_copy(input, size=None, *, dtype=None):  # noqa: A002
    """view_copy(input, size) -> Tensor; view_copy(input, dtype) -> Tensor

    input.view(size), copied (any layout: the copy reads input's elements in order,
    as reshape does); or input.view(dtype), its bytes read as ``dtype``, copied."""
    _tensor("view_copy", input)
    if isinstance(size, DType):
        size, dtype = None, size
    if (size is None) == (dtype is None):
        raise TypeError("view_copy() takes a size or a dtype (one of them)")
    if dtype is not None:
        return input.view(dtype)
    return input.reshape(_ints(size))


# -- the unsafe splits: split's results (PyTorch skips its view checks for them) ---------------
def _one_size(op, split_size, instead):
    if isinstance(split_size, bool) or not isinstance(split_size, int):
        raise TypeError(f"{op}(): split_size must be an int, not "
                        f"{type(split_size).__name__}; {instead} takes a list of sizes")


@tensor_method(function=True)
def unsafe_split(input, split_size, dim=0):  # noqa: A002
    """unsafe_split(input, split_size, dim=0) -> tuple of Tensors

    split(input, split_size, dim) for an int ``split_size`` (unsafe_split_with_sizes
    takes a list)."""
    _one_size("unsafe_split", split_size, "unsafe_split_with_sizes")
    return split(_tensor("unsafe_split", input), split_size, dim)


@tensor_method(function=True)
def unsafe_split_with_sizes(input, split_sizes, dim=0):  # noqa: A002
    """unsafe_split_with_sizes(input, split_sizes, dim=0) -> tuple of Tensors

    split_with_sizes(input, split_sizes, dim)."""
    return split_with_sizes(_tensor("unsafe_split_with_sizes", input), split_sizes, dim)


@tensor_method(function=True)
def unsafe_chunk(input, chunks, dim=0):  # noqa: A002
    """unsafe_chunk(input, chunks, dim=0) -> tuple of Tensors

    chunk(input, chunks, dim)."""
    return chunk(_tensor("unsafe_chunk", input), chunks, dim)


for _name in ("unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk"):
    declare(_name, dtypes="any")
