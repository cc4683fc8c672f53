"""Shape helpers PyTorch has at the top level: broadcast_shapes, broadcast_tensors,
unravel_index, ravel, tile, and the function forms of the methods t, detach, detach_
and unflatten. Each is a view or a composition of recorded ops (expand, reshape,
repeat), so autograd and the GPU come with them."""

from __future__ import annotations

import numbers

from .. import layout
from ..dtype import int64
from ..errors import OpError, OpTypeError
from ..tensor import Tensor
from .convert import cast
from .registry import function, tensor_method
from .views import expand, reshape


def _sizes(op, shape) -> tuple:
    """One shape argument as a tuple of ints: an int is a 1-d shape, as PyTorch reads it."""
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        sizes = tuple(shape)
    except TypeError:
        raise TypeError(f"{op}: a shape is an int or a sequence of ints, got "
                        f"{type(shape).__name__}") from None
    for n in sizes:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"{op}: a shape is an int or a sequence of ints, got {shape!r}")
        if n < 0:
            raise OpError(f"{op}: trying to create a tensor with negative dimension {n} "
                          f"(shape {sizes}); sizes must be non-negative")
    return tuple(int(n) for n in sizes)


@function
def broadcast_shapes(*shapes):
    """broadcast_shapes(*shapes) -> Size

    The shape tensors of these shapes broadcast to, without making any tensor."""
    return layout.Size(layout.broadcast_shapes(*(_sizes("broadcast_shapes", s)
                                                 for s in shapes), op="broadcast_shapes"))


@function
def broadcast_tensors(*tensors):
    """broadcast_tensors(*tensors) -> List of Tensors

    Each tensor expanded to their common shape: views, differentiable (the gradient of a
    broadcast dim is summed back)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"broadcast_tensors: expected tensors, got a "
                            f"{type(t).__name__}; wrap numbers with hx.tensor(...)")
    shape = layout.broadcast_shapes(*(t.shape for t in tensors), op="broadcast_tensors")
    return tuple(expand(t, shape) for t in tensors)


@function
def unravel_index(indices, shape):
    """unravel_index(indices, shape) -> tuple of Tensors

    The coordinates in a tensor of ``shape`` of each flat index (row-major order): one
    int64 tensor per dim, each of indices' shape. As PyTorch's, coordinate i is
    ``(index // stride_i) % shape[i]``, so an index out of range (or negative) wraps."""
    dims = _sizes("unravel_index", shape)
    if not isinstance(indices, Tensor):
        raise TypeError(f"unravel_index: expected 'indices' to be an integer tensor, got "
                        f"{type(indices).__name__}; wrap it with hx.tensor(...)")
    if indices.dtype.is_floating_point or indices.dtype.name == "bool":
        raise OpTypeError(f"unravel_index: expected 'indices' to be an integer dtype, got "
                          f"{indices.dtype.name}; convert with .long() first")
    if 0 in dims:
        raise OpError(f"unravel_index: shape {dims} has a zero-size dim, so no index "
                      f"lies in it")
    flat = cast(indices.detach(), int64)
    coords, stride = [], 1
    for n in reversed(dims):
        coords.append((flat if stride == 1 else flat.div(stride, rounding_mode="floor"))
                      .remainder(n))
        stride *= n
    return tuple(reversed(coords))


@tensor_method(function=True)
def ravel(input):  # noqa: A002
    """ravel(input) -> Tensor

    input as one dim, in row-major order: a view where the layout allows, else a copy."""
    return reshape(input, (-1,))


def _tile(input, dims):  # noqa: A002
    dims = _sizes("tile", dims)
    # fewer counts than dims: the leading dims are kept (counts of 1), as PyTorch's
    dims = (1,) * (input.ndim - len(dims)) + dims
    return input.repeat(dims)


@function
def tile(input, dims):  # noqa: A002
    """tile(input, dims) -> Tensor

    input repeated dims[i] times along dim i (a copy); fewer counts than dims keep the
    leading dims, more add leading dims (Tensor.repeat, which needs one count per dim)."""
    return _tile(input, dims)


@tensor_method(name="tile")
def _tile_method(self, *dims):
    """tile(*dims) -> Tensor

    See hx.tile."""
    if len(dims) == 1 and not isinstance(dims[0], numbers.Integral):
        dims = dims[0]
    return _tile(self, dims)


@function
def t(input):  # noqa: A002
    """t(input) -> Tensor

    A tensor of at most 2 dims with its two dims swapped (a view); 0-d and 1-d tensors
    are returned as they are."""
    return input.t()


@function
def detach(input):  # noqa: A002
    """detach(input) -> Tensor

    A tensor over input's memory with no history, which does not require grad."""
    return input.detach()


@function
def detach_(input):  # noqa: A002
    """detach_(input) -> Tensor

    Detaches input itself from the graph (see Tensor.detach_)."""
    return input.detach_()


@function
def unflatten(input, dim, sizes):  # noqa: A002
    """unflatten(input, dim, sizes) -> Tensor

    Dim ``dim`` of input split into ``sizes`` (one of them may be -1)."""
    return input.unflatten(dim, sizes)
