"""Ops that rearrange, pick or fill elements: argwhere, nonzero_static, take_along_dim,
index_fill, index_copy, tensor_split and hsplit/vsplit/dsplit, swapaxes/swapdims, msort,
rot90, block_diag, cartesian_prod, combinations and vander.

Each is composed of existing views, gathers and joins (positions worked out on the host
where they depend on an index's values), so autograd and both devices come with them.
index_copy alone is a Function: its source's gradient reaches every listed position, as
PyTorch's does, duplicates included, which the composed copy (the last one wins) would
not give.
"""

from __future__ import annotations

import itertools
import numbers

import numpy as np

from .. import layout
from ..autograd.function import Function
from ..autograd.mode import STATE, no_grad
from ..dtype import int32, int64, promote_types, result_type
from ..errors import OpError, OpIndexError, OpTypeError
from ..tensor import Tensor
from .composite import _in_place
from .convert import as_tensor_like, cast
from .indexing import cat, gather, nonzero, stack, where
from .ordering import sort
from .registry import declare, function, tensor_method
from .views import meshgrid, transpose


# -- picking ------------------------------------------------------------------------------
@tensor_method(function=True)
def argwhere(input):  # noqa: A002 (PyTorch's name)
    """argwhere(input) -> Tensor

    The indices of the non-zero elements, one row each: nonzero(input), shape
    (count, input.ndim), int64."""
    return nonzero(input)


@tensor_method(function=True)
def nonzero_static(input, *, size, fill_value=-1):  # noqa: A002
    """nonzero_static(input, *, size, fill_value=-1) -> Tensor

    nonzero(input) with exactly ``size`` rows, shape (size, input.ndim) int64: the first
    ``size`` indices when there are more, padded with rows of ``fill_value`` when there
    are fewer."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise OpError(f"nonzero_static: 'size' must be a non-negative integer, got "
                      f"{size!r}")
    found = nonzero(input)
    if found.shape[0] >= size:
        return found[:size].clone()
    pad = found.new_full((size - found.shape[0], found.shape[1]), fill_value)
    return cat([found, pad])


def _long_index(op, index, error=OpTypeError, dtypes=(int64,)):
    if not isinstance(index, Tensor):
        raise TypeError(f"{op}: index must be a tensor, got {type(index).__name__}")
    if index.dtype not in dtypes:
        raise error(f"{op}: index must be {' or '.join(d.name for d in dtypes)} (as in "
                    f"PyTorch), got {index.dtype.name}; convert with .long()")


@tensor_method(function=True)
def take_along_dim(input, indices, dim=None):  # noqa: A002
    """take_along_dim(input, indices, dim=None) -> Tensor

    The values of ``input`` at ``indices`` along ``dim``, input and indices broadcast
    over the other dims (what argsort, argmax(keepdim=True) and topk's indices pick);
    with no dim, of the flattened input at the flattened indices."""
    if dim is None:  # (PyTorch takes int32 indices here, as its gather does)
        _long_index("take_along_dim", indices, dtypes=(int64, int32))
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    _long_index("take_along_dim", indices)
    if input.ndim != indices.ndim:
        raise OpError(f"take_along_dim: input and indices must have the same number of "
                      f"dims, got shapes {input.shape} and {indices.shape}")
    if input.ndim == 0:  # (PyTorch's too: a 0-d input has no dim to take along)
        raise IndexError(f"take_along_dim: dim {dim} given for a 0-d input; pass dim=None")
    d = layout.normalize_dim(dim, input.ndim, "take_along_dim")
    # (each broadcast over the other's dims, keeping its own size along d)
    wide = list(input.shape)
    wide[d] = indices.shape[d]
    index_shape = layout.broadcast_shapes(tuple(wide), indices.shape, op="take_along_dim")
    wide = list(indices.shape)
    wide[d] = input.shape[d]
    input_shape = layout.broadcast_shapes(tuple(wide), input.shape, op="take_along_dim")
    return gather(input.expand(*input_shape), d, indices.expand(*index_shape))


# -- index_fill and index_copy ------------------------------------------------------------
def _positions(op, x, dim, index, wraps, error):
    """(dim, the index's entries on the host, size of dim) for an op over ``dim`` of
    ``x`` (a 0-d x counts as one element); negative entries count from the end where
    the op ``wraps`` them (index_fill), else are refused (index_copy). ``error``: the
    class of a wrong index's error (PyTorch's differ between the two)."""
    _long_index(op, index, error)
    d = layout.normalize_dim(dim, x.ndim, op)
    if index.ndim > 1:
        raise error(f"{op}: index must be 0-D or 1-D, got shape {index.shape}")
    if index.device is not x.device:
        raise RuntimeError(f"{op}: index on {index.device.type}, input on "
                           f"{x.device.type}; move the index with .to(...)")
    n = x.shape[d] if x.ndim else 1
    host = index.detach()._be.to_numpy(index._data).reshape(-1).astype(np.int64)
    bad = host[(host < (-n if wraps else 0)) | (host >= n)]
    if bad.size:
        raise OpIndexError(f"{op}: index {int(bad[0])} is out of range for dim {d} of size "
                           f"{n} (input shape {x.shape})")
    return d, np.where(host < 0, host + n, host), n


def _mask_along(x, d, n, picked):
    """A bool tensor over x's shape (size 1 off dim d): True at the picked positions."""
    mask = np.zeros(n, bool)
    mask[picked] = True
    shape = [1] * x.ndim
    if x.ndim:
        shape[d] = n
    return as_tensor_like(mask.reshape(shape), x)


def _fill_value(op, x, value):
    if isinstance(value, Tensor):
        if value.ndim:
            raise OpError(f"{op}: value must be a number or a 0-d tensor, got a tensor of "
                          f"shape {value.shape}")
        if value.device is not x.device:
            value = value.to(x.device)
        return cast(value, x.dtype)
    if not isinstance(value, (numbers.Number, np.generic)):
        raise TypeError(f"{op}: value must be a number or a 0-d tensor, got "
                        f"{type(value).__name__}")
    return as_tensor_like(value, x, x.dtype)


def _index_fill(x, dim, index, value, op):
    # (PyTorch's index_fill counts negative indices from the end; a wrong index dtype
    # is an IndexError there)
    d, picked, n = _positions(op, x, dim, index, True, OpIndexError)
    return where(_mask_along(x, d, n, picked), _fill_value(op, x, value), x)


@tensor_method(function=True)
def index_fill(input, dim, index, value):  # noqa: A002
    """index_fill(input, dim, index, value) -> Tensor

    A copy of input with ``value`` (a number or a 0-d tensor) written at the positions
    ``index`` lists along ``dim``; the gradient of input is zero there, a tensor value's
    is the sum of the gradient over them."""
    return _index_fill(input, dim, index, value, "index_fill")


@tensor_method(name="index_fill_")
def index_fill_(input, dim, index, value):  # noqa: A002
    """index_fill_(dim, index, value) -> Tensor

    In-place index_fill: writes the result into this tensor's memory."""
    return _in_place(input, "index_fill",
                     lambda x: _index_fill(x, dim, index, value, "index_fill_"),
                     other=value if isinstance(value, Tensor) else None)


class _IndexCopy(Function):
    """x with the slices of ``source`` along ``dim`` written at ``index``'s positions (the
    last of repeated positions wins); the gradient of x is zero there, and each slice of
    source gets the gradient at its position."""

    label = "IndexCopy"

    @staticmethod
    def forward(ctx, x, dim, index, source, mask, sources):
        ctx.dim = dim
        ctx.save_for_backward(index, mask)
        with no_grad():
            x = x.detach()
            # (no slices to copy: nothing to select them from, and the mask is all False)
            spread = source.detach().index_select(dim, sources) if source.shape[dim] else x
            return where(mask, spread, x)

    @staticmethod
    def backward(ctx, g):
        index, mask = ctx.saved_tensors
        gx = where(mask, 0, g) if ctx.next[0] is not None else None
        gs = g.index_select(ctx.dim, index.reshape(-1)) if ctx.next[3] is not None else None
        return gx, None, None, gs, None, None


def _index_copy(x, dim, index, source, op):
    if not isinstance(source, Tensor):
        raise TypeError(f"{op}: source must be a tensor, got {type(source).__name__}")
    # (PyTorch's scalar forms: a 0-d input is one element; a 0-d source is one slice of
    # a 1-D input)
    xs = x.reshape(1) if x.ndim == 0 else x
    src = source.reshape(1) if source.ndim == 0 and xs.ndim == 1 else source
    if x.ndim == 0 and src.numel() != 1:
        raise OpError(f"{op}: a 0-d input takes one element of source, got shape "
                      f"{source.shape}")
    d, picked, n = _positions(op, xs, dim, index, False, OpIndexError)
    if x.ndim == 0:
        src = src.reshape(1)
    if src.ndim != xs.ndim:
        raise OpIndexError(f"{op}: source (shape {source.shape}) and the input (shape "
                           f"{x.shape}) must have the same number of dims")
    if src.shape[d] != picked.size:
        raise OpIndexError(f"{op}: {picked.size} indices for source's dim {d} of size "
                           f"{src.shape[d]}; give one index per slice of source")
    if any(a != b for i, (a, b) in enumerate(zip(xs.shape, src.shape)) if i != d):
        raise OpError(f"{op}: source of shape {source.shape} and the input of shape "
                      f"{x.shape} must match outside dim {d}")
    same_dtype_and_device(op, x, src, "source")
    # the slice of source each position takes: the last that names it (0 where none)
    sources = np.zeros(n, np.int64)
    sources[picked] = np.arange(picked.size)
    out = _IndexCopy.apply(xs, d, index, src, _mask_along(xs, d, n, picked),
                           as_tensor_like(sources, xs))
    return out.reshape(()) if x.ndim == 0 else out


@tensor_method(function=True)
def index_copy(input, dim, index, source):  # noqa: A002
    """index_copy(input, dim, index, source) -> Tensor

    A copy of input with slice i of ``source`` along ``dim`` written at position
    index[i] (source has input's shape outside dim and one slice per index)."""
    return _index_copy(input, dim, index, source, "index_copy")


@tensor_method(name="index_copy_")
def index_copy_(input, dim, index, source):  # noqa: A002
    """index_copy_(dim, index, source) -> Tensor

    In-place index_copy: writes the result into this tensor's memory."""
    return _in_place(input, "index_copy",
                     lambda x: _index_copy(x, dim, index, source, "index_copy_"),
                     other=source)


# -- splitting ----------------------------------------------------------------------------
def _section_bounds(n, sections, op):
    if sections <= 0:
        raise OpError(f"{op}: the number of sections must be larger than 0, got {sections}")
    size, extra = divmod(n, sections)
    bounds, start = [], 0
    for i in range(sections):
        stop = start + size + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def _index_bounds(n, indices):
    """Each piece between consecutive indices, as a Python slice reads them (negative
    ones from the end, clamped, empty where an index is below the one before)."""
    cuts = [0, *indices, n]
    out = []
    for a, b in zip(cuts, cuts[1:]):
        start, stop, _ = slice(a, b).indices(n)
        out.append((start, max(start, stop)))
    return out


def _split_spec(op, indices_or_sections):
    """An int (sections) or a list of ints (indices) from what the caller gave."""
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.dtype is not int64:
            raise OpTypeError(f"{op}: a tensor of indices or sections must be int64, got "
                              f"{spec.dtype.name}")
        if spec.ndim > 1:
            raise OpError(f"{op}: a tensor of indices or sections must be 0-D or 1-D, got "
                          f"shape {spec.shape}")
        host = spec.detach()._be.to_numpy(spec._data)
        return int(host) if spec.ndim == 0 else [int(i) for i in host.reshape(-1)]
    if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
        return int(spec)
    if isinstance(spec, (list, tuple)) and all(
            isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in spec):
        return [int(i) for i in spec]
    raise TypeError(f"{op}: indices_or_sections must be an int or a list of ints, got "
                    f"{spec!r}")


def _pieces(input, spec, d, op):  # noqa: A002
    n = input.shape[d]
    bounds = _section_bounds(n, spec, op) if isinstance(spec, int) else _index_bounds(n, spec)
    lead = (slice(None),) * d
    return tuple(input[lead + (slice(a, b),)] for a, b in bounds)


@tensor_method(function=True)
def tensor_split(input, indices_or_sections, dim=0):  # noqa: A002
    """tensor_split(input, indices_or_sections, dim=0) -> tuple of Tensors

    Views of input along ``dim``: an int n gives n pieces as equal as can be (the first
    size % n one longer), a list of indices the pieces between them."""
    if input.ndim == 0:
        raise OpError("tensor_split: expected a tensor with at least one dim, got a 0-d "
                      "one")
    d = layout.normalize_dim(dim, input.ndim, "tensor_split")
    return _pieces(input, _split_spec("tensor_split", indices_or_sections), d,
                   "tensor_split")


def _split_along(op, input, indices_or_sections, least, d):  # noqa: A002
    if input.ndim < least:
        raise OpError(f"{op}: expected a tensor with at least {least} dim"
                      f"{'s' if least > 1 else ''}, got shape {input.shape}")
    spec = _split_spec(op, indices_or_sections)
    if isinstance(spec, int) and (spec == 0 or input.shape[d] % spec):
        raise OpError(f"{op}: dim {d} of size {input.shape[d]} is not divisible by "
                      f"{spec}; pass a divisor, or a list of indices (or use "
                      f"tensor_split for unequal pieces)")
    return _pieces(input, spec, d, op)


@tensor_method(function=True)
def hsplit(input, indices_or_sections):  # noqa: A002
    """hsplit(input, indices_or_sections) -> tuple of Tensors

    tensor_split along dim 1 (dim 0 for a 1-D input); an int must divide that dim."""
    return _split_along("hsplit", input, indices_or_sections, 1, 0 if input.ndim == 1 else 1)


@tensor_method(function=True)
def vsplit(input, indices_or_sections):  # noqa: A002
    """vsplit(input, indices_or_sections) -> tuple of Tensors

    tensor_split along dim 0 of an input with at least 2 dims; an int must divide it."""
    return _split_along("vsplit", input, indices_or_sections, 2, 0)


@tensor_method(function=True)
def dsplit(input, indices_or_sections):  # noqa: A002
    """dsplit(input, indices_or_sections) -> tuple of Tensors

    tensor_split along dim 2 of an input with at least 3 dims; an int must divide it."""
    return _split_along("dsplit", input, indices_or_sections, 3, 2)


# -- transposes under numpy's names, with their in-place forms ------------------------------
def _transpose_in_place(x, d0, d1, op):
    """x itself seen with dims d0 and d1 swapped (its memory untouched), recorded as the
    transpose it is."""
    return view_in_place(x, lambda t: transpose(t, d0, d1), op)


def view_in_place(x, view, op):
    """x itself becomes ``view(x)``, a view of its memory (untouched), recorded as the
    view op it is (unsqueeze_, squeeze_, t_, transpose_...)."""
    if x._requires_grad and x.grad_fn is None and STATE.grad_enabled:
        raise RuntimeError(f"{op}: a leaf tensor that requires grad (shape {x.shape}) "
                           f"cannot change its layout in place; use the out-of-place "
                           f"{op[:-1]}, or do it inside `with hx.no_grad():`")
    y = view(x)
    base = x._base
    x._set_data(y)
    x._base = base
    # (a node that saved x saved this object: its version check sees the new layout)
    x._storage.version += 1
    if y._requires_grad:
        x.grad_fn, x._requires_grad = y.grad_fn, True
    return x


@tensor_method(function=True)
def swapaxes(input, axis0, axis1):  # noqa: A002
    """swapaxes(input, axis0, axis1) -> Tensor

    transpose under numpy's name: a view with dims axis0 and axis1 swapped."""
    return transpose(input, axis0, axis1)


@tensor_method(function=True)
def swapdims(input, dim0, dim1):  # noqa: A002
    """swapdims(input, dim0, dim1) -> Tensor

    transpose's other name: a view with dims dim0 and dim1 swapped."""
    return transpose(input, dim0, dim1)


@tensor_method(name="swapaxes_")
def swapaxes_(input, axis0, axis1):  # noqa: A002
    """swapaxes_(axis0, axis1) -> Tensor

    In place: this tensor becomes its view with dims axis0 and axis1 swapped."""
    return _transpose_in_place(input, axis0, axis1, "swapaxes_")


@tensor_method(name="swapdims_")
def swapdims_(input, dim0, dim1):  # noqa: A002
    """swapdims_(dim0, dim1) -> Tensor

    In place: this tensor becomes its view with dims dim0 and dim1 swapped."""
    return _transpose_in_place(input, dim0, dim1, "swapdims_")


# -- orders and rotations -----------------------------------------------------------------
@tensor_method(function=True)
def msort(input):  # noqa: A002
    """msort(input) -> Tensor

    input sorted along dim 0, ascending: sort(input, dim=0).values."""
    return sort(input, 0).values


@tensor_method(function=True)
def rot90(input, k=1, dims=(0, 1)):  # noqa: A002
    """rot90(input, k=1, dims=(0, 1)) -> Tensor

    input rotated by 90 degrees k times in the plane of ``dims``, from the first dim
    towards the second (k < 0 turns the other way)."""
    dims = tuple(dims)
    nd = input.ndim
    if len(dims) != 2:
        raise OpError(f"rot90: dims must name 2 dims, got {dims}")
    if nd < 2:
        raise OpError(f"rot90: input needs at least 2 dims, got shape {input.shape}")
    a, b = (layout.normalize_dim(d, nd, "rot90") for d in dims)
    if a == b:
        raise OpError(f"rot90: dims must name two different dims, got {dims}")
    k %= 4
    if k == 1:
        return input.flip(b).transpose(a, b)
    if k == 2:
        return input.flip(a, b)
    if k == 3:
        return input.flip(a).transpose(a, b)
    return input.clone()


# -- building matrices --------------------------------------------------------------------
def _tensors_of(op, tensors):
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected tensors, argument {i} is a "
                            f"{type(t).__name__}; wrap numbers with hx.tensor(...)")
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise RuntimeError(f"{op}: the tensors are on different devices "
                           f"({sorted(d.type for d in devices)}); move them to one")
    return tensors


@function
def block_diag(*tensors):
    """block_diag(*tensors) -> Tensor

    The tensors as the blocks of a block-diagonal matrix, zeros elsewhere (a 0-d tensor is
    a 1 x 1 block, a 1-D one a single row), in the dtype they promote to."""
    _tensors_of("block_diag", tensors)
    blocks = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise OpError(f"block_diag: the tensors must have at most 2 dims, tensor {i} "
                          f"has shape {t.shape}")
        blocks.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not blocks:  # (PyTorch's empty matrix)
        from ..creation import zeros

        return zeros(1, 0)
    dt = result_type(*((t.dtype, t.ndim == 0) for t in tensors))
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    ref = blocks[0]
    for b in blocks:
        right = width - left - b.shape[1]
        parts = [ref.new_zeros((b.shape[0], left), dtype=dt), cast(b, dt),
                 ref.new_zeros((b.shape[0], right), dtype=dt)]
        rows.append(cat(parts, 1))
        left += b.shape[1]
    return cat(rows, 0)


def _vector(op, t, i):
    if t.ndim != 1:
        raise OpError(f"{op}: expected 1-D tensors, tensor {i} has shape {t.shape}")


@function
def cartesian_prod(*tensors):
    """cartesian_prod(*tensors) -> Tensor

    Every tuple of one element from each 1-D tensor, in row-major order, as the rows of
    a (product of the sizes, number of tensors) tensor; a single tensor is returned as
    it is."""
    if not tensors:
        raise OpError("cartesian_prod: expected at least one tensor")
    _tensors_of("cartesian_prod", tensors)
    for i, t in enumerate(tensors):
        _vector("cartesian_prod", t, i)
    if len({t.dtype for t in tensors}) > 1:
        raise OpTypeError(f"cartesian_prod: the tensors must have one dtype, got "
                          f"{[t.dtype.name for t in tensors]}; convert them with .to(...)")
    if len(tensors) == 1:
        return tensors[0]
    return stack([g.reshape(-1) for g in meshgrid(*tensors, indexing="ij")], 1)


@function
def combinations(input, r=2, with_replacement=False):  # noqa: A002
    """combinations(input, r=2, with_replacement=False) -> Tensor

    The length-r combinations of the elements of a 1-D input, as itertools.combinations
    (or combinations_with_replacement) orders them: one per row."""
    _vector("combinations", input, 0)
    if not isinstance(r, numbers.Integral) or isinstance(r, bool) or r < 0:
        raise OpError(f"combinations: r must be a non-negative int, got {r!r}")
    if r == 0:
        return input.new_zeros((0,))
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    rows = np.array(list(pick(range(input.shape[0]), r)), np.int64).reshape(-1, r)
    return input[as_tensor_like(rows, input)]


@function
def vander(x, N=None, increasing=False):  # noqa: N803 (PyTorch's name)
    """vander(x, N=None, increasing=False) -> Tensor

    The Vandermonde matrix of the 1-D x: column j holds x ** (N - 1 - j) (x ** j with
    ``increasing``), N columns (len(x) by default); integers and bools give int64."""
    if not isinstance(x, Tensor) or x.ndim != 1:
        raise OpError(f"vander: x must be a 1-D tensor, got "
                      f"{getattr(x, 'shape', type(x).__name__)}")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise OpError(f"vander: N must be non-negative, got {n}")
    dt = promote_types(x.dtype, int64)
    x = cast(x, dt)
    ones = x.new_ones((x.shape[0], min(n, 1)))
    if n > 1:  # (the powers as running products: exact for integers)
        powers = x.unsqueeze(1).expand(x.shape[0], n - 1).cumprod(1)
        out = cat([ones, powers], 1)
    else:
        out = ones
    return out if increasing else out.flip(1)


for _name, _arity in (("argwhere", 1), ("take_along_dim", 1), ("index_fill", 1),
                      ("index_copy", 2), ("tensor_split", 1), ("hsplit", 1), ("vsplit", 1),
                      ("dsplit", 1), ("swapaxes", 1), ("swapdims", 1), ("msort", 1),
                      ("rot90", 1), ("block_diag", 2), ("cartesian_prod", 2),
                      ("combinations", 1), ("vander", 1)):
    declare(_name, arity=_arity, differentiable=_name != "argwhere", dtypes="any")
declare("nonzero_static", differentiable=False, dtypes="any")


def same_dtype_and_device(op, x, src, what):
    """Refuse ``src`` (named ``what``) of another dtype or device than the input ``x``:
    the ops writing one into the other do not promote or move (as PyTorch's)."""
    if src.dtype is not x.dtype:
        raise OpTypeError(f"{op}: {what} has dtype {src.dtype.name} and the input "
                          f"{x.dtype.name}; they must match (as in PyTorch): convert with "
                          f"{what}.to({x.dtype!r})")
    if src.device is not x.device:
        raise RuntimeError(f"{op}: {what} on {src.device.type}, input on {x.device.type}; "
                           f"move it with .to(...)")

