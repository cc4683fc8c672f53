"""View ops: each computes a new layout with haelixe.layout and returns a tensor over
the same Storage. Backward maps the gradient through the inverse of the view."""

from __future__ import annotations

import weakref

import numpy as np

from .. import layout
from ..autograd.function import Function, PartialGrad, SavedTensorError
from ..autograd.mode import STATE
from ..dtype import DType
from ..errors import OpError
from ..tensor import Tensor
from .registry import Layer, declare, function, fused, tensor_method


def _view_of(ctx, x, shape, strides, offset, raw=None):
    """x._view(...) for a view op, remembering how many recorded in-place ops had
    written x's storage when the view was taken (see _check_history)."""
    storage = x._storage
    ctx.history = (weakref.ref(storage), storage.history, shape, strides, offset)
    return x._view(shape, strides, offset, raw)


def _check_history(ctx):
    ref, seen = ctx.history[:2]
    storage = ref()
    if storage is not None and storage.history != seen and \
            not _untouched(storage, seen, *ctx.history[2:]):
        raise SavedTensorError(
            f"{ctx.name}: this view was taken before an in-place op that autograd "
            f"recorded on the tensor it views (add_, mul_, ... on a non-leaf); its "
            f"values changed but its gradient would still flow to the old history. "
            f"Take the view after the in-place op, or clone() before changing it.")


def _untouched(storage, seen, shape=None, strides=None, offset=None) -> bool:
    """Whether the writes recorded on ``storage`` since it counted ``seen`` of them left
    this view's elements alone (then its values, and its history, are still right)."""
    if shape is None:
        return False
    from .overwrite import untouched

    return untouched(storage, seen, storage_positions(shape, strides, offset).reshape(-1))


class View(Function):
    """reshape without a copy (and squeeze / unsqueeze / flatten)."""

    small_state = True

    @staticmethod
    def forward(ctx, x, shape, strides):
        ctx.in_shape = x.shape
        # a contiguous x: the backend's reshape is that view, at a fifth of make_view's
        # cost
        raw = x._be.reshape(x._data, shape) if x._layout is None else None
        return _view_of(ctx, x, shape, strides, x.offset, raw)

    @staticmethod
    def backward(ctx, g):
        _check_history(ctx)
        if not STATE.grad_enabled:  # first order: the view of g itself, no node to record
            strides = layout.view_strides(g.shape, g.strides, ctx.in_shape)
            if strides is not None:
                return g._view(ctx.in_shape, strides, g.offset), None, None
        return reshape(g, ctx.in_shape), None, None


def view(x, shape):
    shape = layout.infer_shape(shape, x.numel(), "view")
    if shape == x.shape:
        return View.apply(x, shape, x.strides)
    strides = layout.view_strides(x.shape, x.strides, shape)
    if strides is None:
        raise RuntimeError(
            f"view: shape {shape} is not compatible with input shape {x.shape} and strides "
            f"{x.strides}: at least one dim spans across two non-adjacent memory runs. "
            f"Use .reshape(...) (which copies when it must) or call .contiguous() first.")
    return View.apply(x, shape, strides)


def reshape(x, shape):
    shape = layout.infer_shape(shape, x.numel(), "reshape")
    strides = layout.view_strides(x.shape, x.strides, shape)
    if strides is None:
        x = x.clone()
        strides = layout.contiguous_strides(shape)
    return View.apply(x, shape, strides)


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return reshape(x, (1,))
    s = layout.normalize_dim(start_dim, x.ndim, "flatten")
    e = layout.normalize_dim(end_dim, x.ndim, "flatten")
    if s > e:
        raise OpError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    n = 1
    for d in x.shape[s:e + 1]:
        n *= d
    return reshape(x, x.shape[:s] + (n,) + x.shape[e + 1:])


def unsqueeze(input, dim):
    shape, strides = layout.unsqueeze(input.shape, input.strides, dim)
    return View.apply(input, shape, strides)


def squeeze(x, dim=None):
    if dim is not None and not isinstance(dim, (tuple, list)):
        dim = (dim,)
    shape, strides = layout.squeeze(x.shape, x.strides, dim)
    return View.apply(x, shape, strides)


class Permute(Function):
    small_state = True

    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        shape, strides = layout.permute(x.shape, x.strides, dims)
        offset = x.offset
        return _view_of(ctx, x, shape, strides, offset,
                        x._be.permute_view(x._data, dims, x._storage, shape, strides, offset))

    @staticmethod
    def backward(ctx, g):
        _check_history(ctx)
        dims = layout.inverse_permutation(ctx.dims)
        if not STATE.grad_enabled:  # first order: the view of g itself, no node to record
            return g._view(*layout.permute(g.shape, g.strides, dims), g.offset), None
        return permute(g, dims), None


def permute(x, dims):
    return Permute.apply(x, layout.normalize_dims(dims, x.ndim, "permute"))


class Expand(Function):
    """Broadcast by zero strides; backward sums over the broadcast dims."""

    small_state = True

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        strides = layout.expand(x.shape, x.strides, shape)
        return _view_of(ctx, x, layout.expand_shape(x.shape, shape), strides, x.offset)

    @staticmethod
    def backward(ctx, g):
        _check_history(ctx)
        return g.sum_to(ctx.in_shape), None


def expand(x, shape):
    return Expand.apply(x, tuple(shape))


class Flip(Function):
    small_state = True

    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        shape, strides, offset = layout.flip(x.shape, x.strides, x.offset, dims)
        return _view_of(ctx, x, shape, strides, offset)

    @staticmethod
    def backward(ctx, g):
        _check_history(ctx)
        return flip(g, ctx.dims), None


def flip(x, dims):
    return Flip.apply(x, layout.normalize_dims(dims, x.ndim, "flip"))


class Slice(Function):
    """Basic indexing (ints, slices with any step, None, Ellipsis)."""

    label = "Slice"
    small_state = True

    @staticmethod
    def forward(ctx, x, key):
        ctx.in_shape = x.shape
        ctx.in_layout = x._layout  # (None: contiguous) the order its gradient is laid out in
        ctx.key = key
        shape, strides, offset = ctx.part = layout.index(x.shape, x.strides, x.offset, key)
        return _view_of(ctx, x, shape, strides, offset,
                        x._be.index_view(x._data, key, x._storage, shape, strides, offset))

    @staticmethod
    def backward(ctx, g):
        _check_history(ctx)
        if not STATE.grad_enabled:  # first order: kept partial until needed whole
            like = ctx.in_layout
            return SliceGrad(ctx.in_shape, ctx.key, g, like,
                             ctx.part if like is None else None), None
        return SliceBackward.apply(g, ctx.in_shape, ctx.key), None


class SliceGrad(PartialGrad):
    """A slice's first-order gradient: ``g`` where ``key`` picks out of ``shape``, zero
    elsewhere (the engine adds several into one buffer; see PartialGrad)."""

    __slots__ = ("shape", "key", "g", "like", "part")

    def __init__(self, shape, key, g, like=None, part=None):
        # like: the sliced tensor's (strides, offset) where it is not contiguous; part:
        # the slice's layout in a contiguous tensor of ``shape``, where the forward had
        # it (a contiguous input: the key need not be worked out again)
        self.shape, self.key, self.g, self.like, self.part = shape, key, g, like, part

    @property
    def dtype(self):
        return self.g.dtype

    @property
    def device(self):
        return self.g.device

    def dense(self) -> Tensor:
        # (first order only, as every SliceGrad is: the scatter itself, recording nothing)
        return _scatter_into_zeros(self.g, self.shape, self.key, self.like, self.part)

    def add_into(self, t: Tensor) -> None:
        be = t._be
        part = self.part if self.part is not None and t._layout is None else \
            layout.index(t.shape, t.strides, t.offset, self.key)
        be.add_into(be.make_view(t._storage, *part), self.g._data)


def _scatter_into_zeros(g, shape, key, like=None, part=None) -> Tensor:
    """A fresh tensor of zeros of ``shape`` with ``g`` written where ``key`` picks; laid
    out in memory in the order of the layout ``like`` (strides, offset) where one is
    given, as PyTorch's gradients follow their input's layout. The gradient of q, k and
    v sliced out of a permuted projection then comes back in the projection's own order,
    and the reshape that made the heads undoes itself without a copy."""
    be = g._be
    order = None if like is None else layout.memory_order(shape, like[0])
    if order is None or order == tuple(range(len(shape))):
        out = Tensor._wrap(be.full(shape, 0, g.dtype.np))
    else:
        dense = Tensor._wrap(be.full(tuple(shape[d] for d in order), 0, g.dtype.np))
        out = dense._view(*layout.permute(dense.shape, dense.strides,
                                          layout.inverse_permutation(order)), 0)
    if part is None or out._layout is not None:
        part = layout.index(out.shape, out.strides, out.offset, key)
    dst = be.make_view(out._storage, *part)
    be.copy_into(dst, g._data)
    return out


class SliceBackward(Function):
    """Scatter a slice's gradient into zeros of the base shape; its own backward slices
    again, so second derivatives pass through views."""

    small_state = True

    @staticmethod
    def forward(ctx, g, shape, key):
        ctx.key = key
        return _scatter_into_zeros(g, shape, key)

    @staticmethod
    def backward(ctx, gg):
        return Slice.apply(gg, ctx.key), None, None


def narrow(input, dim, start, length):
    dim = layout.normalize_dim(dim, input.ndim, "narrow")
    layout.narrow(input.shape, input.strides, input.offset, dim, start, length)  # validates
    if start < 0:
        start += input.shape[dim]
    return Slice.apply(input, (slice(None),) * dim + (slice(start, start + length),))


def split(tensor, split_size_or_sections, dim=0):
    dim = layout.normalize_dim(dim, tensor.ndim, "split")
    sizes = layout.split_sizes(tensor.shape[dim], split_size_or_sections, f"dim {dim}")
    out, start = [], 0
    for n in sizes:
        out.append(narrow(tensor, dim, start, n))
        start += n
    return tuple(out)


def chunk(input, chunks, dim=0):
    dim = layout.normalize_dim(dim, input.ndim, "chunk")
    return split(input, layout.chunk_sizes(input.shape[dim], chunks), dim)


class AsStrided(Function):
    """Any layout over the storage, bounds-checked. Backward scatter-adds the gradient
    into the storage cells each output element reads (overlaps accumulate), then reads
    those cells back through the input's own layout. Both steps are differentiable ops
    (IndexAdd and Take, each other's adjoint), so second derivatives pass through."""

    small_state = True

    @staticmethod
    def forward(ctx, x, shape, strides, offset):
        ctx.in_layout = (x.shape, x.strides, x.offset)
        ctx.out_layout = (shape, strides, offset)
        return _view_of(ctx, x, shape, strides, offset)

    @staticmethod
    def backward(ctx, g):
        _check_history(ctx)
        pos_out = storage_positions(*ctx.out_layout).reshape(-1)
        pos_in = storage_positions(*ctx.in_layout)
        if not layout.is_non_overlapping(ctx.in_layout[0], ctx.in_layout[1]):
            raise RuntimeError("as_strided backward: the input itself overlaps in memory "
                               "(a zero or repeating stride); call .contiguous() on it "
                               "before as_strided")
        from .indexing import IndexAdd, Take

        size = int(max(pos_out.max(initial=0), pos_in.max(initial=0))) + 1
        be = g._be
        cells = IndexAdd.apply(g.reshape(-1), (size,),
                               (be.from_numpy(pos_out.astype(np.int32)),))
        gin = Take.apply(cells, (be.from_numpy(pos_in.astype(np.int32)),))
        return gin, None, None, None


def storage_positions(shape, strides, offset):
    """Storage index of every element of a layout, as an int64 array of ``shape``."""
    pos = np.full(shape, offset, np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        idx = np.arange(n, dtype=np.int64) * s
        pos += idx.reshape((n,) + (1,) * (len(shape) - d - 1))
    return pos


def as_strided(x, shape, strides, offset=None):
    offset = x.offset if offset is None else offset
    layout.check_as_strided(x.storage.size, shape, strides, offset)
    return AsStrided.apply(x, tuple(shape), tuple(strides), offset)


# -- the Tensor methods -----------------------------------------------------------------------
def _shape_args(args) -> tuple:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


for _name in ("view", "reshape", "permute", "movedim", "transpose", "expand", "squeeze",
              "unsqueeze", "flip", "narrow", "split", "chunk", "as_strided", "select", "unbind",
              "repeat"):
    declare(_name, differentiable=True, dtypes="any")


@tensor_method(name="view")
def _view_method(self, *shape):
    """``view(*shape)``: the same memory in another shape; ``view(dtype)``: the same
    bytes read as ``dtype`` (see view_dtype)."""
    if len(shape) == 1 and isinstance(shape[0], DType):
        return view_dtype(self, shape[0])
    return view(self, _shape_args(shape))


def view_dtype(x, dtype):
    """The bytes of ``x`` read as ``dtype`` (PyTorch's view(dtype)), sharing its memory
    and its version counter. An element size that differs changes the last dim, which
    must have stride 1. Not differentiable (as in PyTorch): the result is a leaf that
    does not require grad, whatever x and dtype are."""
    names = f"{x.dtype.name} as {dtype.name}"
    shape, strides, offset = layout.bitcast(x.shape, x.strides, x.offset, x.dtype.itemsize,
                                            dtype.itemsize, names)
    storage = x._be.reinterpret(x._storage, dtype)
    raw = x._be.make_view(storage, shape, strides, offset)
    return Tensor._over(raw, storage, shape, strides, offset)


@tensor_method(name="reshape", function=True)
def _reshape_method(self, *shape):
    return reshape(self, _shape_args(shape))


@tensor_method
def view_as(self, other):
    return view(self, other.shape)


@tensor_method
def reshape_as(self, other):
    return reshape(self, other.shape)


tensor_method(flatten, function=True)


@tensor_method
def unflatten(self, dim, sizes):
    dim = layout.normalize_dim(dim, self.ndim, "unflatten")
    sizes = tuple(sizes)
    if not sizes:
        raise OpError("unflatten: sizes must be non-empty")
    # (-1 inferred from the dim's own size, as PyTorch's; the errors name unflatten)
    sizes = layout.infer_shape(sizes, self.shape[dim], f"unflatten (dim {dim} of "
                                                        f"{self.shape})")
    return reshape(self, self.shape[:dim] + sizes + self.shape[dim + 1:])


@tensor_method(name="permute", function=True)
def _permute_method(self, *dims):
    return permute(self, _shape_args(dims))


@tensor_method(function=True)
def movedim(input, source, destination):
    """The dims ``source`` moved to the places ``destination`` (ints or sequences of
    them), the others keeping their order: a permute, as PyTorch's movedim."""
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    if len(src) != len(dst):
        raise OpError(f"movedim: source {source} and destination {destination} must name "
                      f"as many dims")
    src = layout.normalize_dims(src, input.ndim, "movedim")
    dst = layout.normalize_dims(dst, input.ndim, "movedim")
    rest = iter(d for d in range(input.ndim) if d not in src)
    placed = dict(zip(dst, src))
    return permute(input, tuple(placed[i] if i in placed else next(rest)
                                for i in range(input.ndim)))


tensor_method(movedim, name="moveaxis", function=True)


@tensor_method(function=True)
def transpose(input, dim0, dim1):
    # (transpose_dims gives a checked permutation: permute's normalisation is not needed)
    return Permute.apply(input, layout.transpose_dims(input.ndim, dim0, dim1))


@tensor_method
def t(self):
    if self.ndim > 2:
        raise OpError(f"t() expects a tensor with <= 2 dims, got shape {self.shape}; "
                      f"use .mT or transpose(-2, -1)")
    return self if self.ndim < 2 else self.transpose(0, 1)


Tensor.T = property(lambda self: permute(self, tuple(range(self.ndim - 1, -1, -1))))


def _mT(self):
    if self.ndim < 2:
        raise OpError(f"mT needs at least 2 dims, got shape {self.shape}")
    return self.transpose(-2, -1)


Tensor.mT = property(_mT)


@tensor_method(name="expand")
def _expand_method(self, *size):
    return expand(self, _shape_args(size))


@tensor_method
def expand_as(self, other):
    return expand(self, other.shape)


@tensor_method(function=True)
def broadcast_to(self, shape):
    return expand(self, tuple(shape))


@tensor_method(name="repeat")
def _repeat_method(self, *repeats):
    """Tile: dim i repeated repeats[i] times, extra leading counts adding dims (PyTorch's
    Tensor.repeat). A copy, made by reshaping an expanded view; backward sums the tiles."""
    sizes = _shape_args(repeats)
    if len(sizes) < self.ndim or any(s < 0 for s in sizes):
        raise OpError(f"repeat: sizes {sizes} for a tensor of shape {self.shape}; give one "
                      f"non-negative count per dim (more add leading dims)")
    shape = (1,) * (len(sizes) - self.ndim) + self.shape
    tiles = expand(reshape(self, tuple(d for n in shape for d in (1, n))),
                   tuple(d for s, n in zip(sizes, shape) for d in (s, n)))
    return reshape(tiles, tuple(s * n for s, n in zip(sizes, shape)))


tensor_method(unsqueeze, function=True)
tensor_method(squeeze, function=True)


@tensor_method(name="flip", function=True)
def _flip_method(self, *dims):
    return flip(self, _shape_args(dims))


tensor_method(narrow, function=True)
tensor_method(split, function=True)
tensor_method(chunk, function=True)


@tensor_method(function=True)
def unbind(input, dim=0):
    if input.ndim == 0:
        raise IndexError("unbind: a 0-d tensor has no dim to unbind; it is one value "
                         "already (.item(), or reshape(1) for a 1-element tensor)")
    dim = layout.normalize_dim(dim, input.ndim, "unbind")
    return tuple(input.select(dim, i) for i in range(input.shape[dim]))


@tensor_method(function=True)
def select(input, dim, index):
    dim = layout.normalize_dim(dim, input.ndim, "select")
    return input[(slice(None),) * dim + (index,)]


@tensor_method(function=True)
def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of dims (dim1, dim2) as a view (a new last dim), as torch.diagonal."""
    d1 = layout.normalize_dim(dim1, input.ndim, "diagonal")
    d2 = layout.normalize_dim(dim2, input.ndim, "diagonal")
    if d1 == d2:
        raise OpError(f"diagonal: dim1 and dim2 must differ, got {dim1} and {dim2}")
    n1, n2 = input.shape[d1], input.shape[d2]
    s1, s2 = input.strides[d1], input.strides[d2]
    start = input.offset + (offset * s2 if offset >= 0 else -offset * s1)
    length = max(0, min(n1 - max(-offset, 0), n2 - max(offset, 0)))
    keep = [i for i in range(input.ndim) if i not in (d1, d2)]
    shape = tuple(input.shape[i] for i in keep) + (length,)
    strides = tuple(input.strides[i] for i in keep) + (s1 + s2,)
    return DiagonalView.apply(input, shape, strides, start if length else input.offset)


class DiagonalView(AsStrided):
    """A diagonal over the input's storage: an as_strided view by another name (its
    gradient fills the diagonal of zeros)."""

    label = "Diagonal"


declare("diagonal", dtypes="any")


@tensor_method(name="as_strided", function=True)
def _as_strided_method(input, size, stride, storage_offset=None):
    return as_strided(input, tuple(size), tuple(stride), storage_offset)


# -- roll: one node per rolled dim, whose gradient is a roll back ------------------------
class Roll(Function):
    """``x`` shifted by ``shift`` (0 < shift < n) along ``dim`` of size n, wrapping
    around: its two parts copied into one fresh array (one node, not two narrows and a
    cat); the gradient is the gradient rolled back."""

    label = "Roll"
    small_state = True

    @staticmethod
    def forward(ctx, x, shift, dim):
        ctx.shift, ctx.dim = shift, dim
        be, raw, n = x._be, x._data, x.shape[dim]
        out = be.empty(x.shape, x.dtype.np)
        be.copy_into(be.narrow(out, dim, 0, shift), be.narrow(raw, dim, n - shift, shift))
        be.copy_into(be.narrow(out, dim, shift, n - shift), be.narrow(raw, dim, 0, n - shift))
        return out

    @staticmethod
    def backward(ctx, g):
        return Roll.apply(g, g.shape[ctx.dim] - ctx.shift, ctx.dim), None, None


@tensor_method(function=True)
def roll(input, shifts, dims=None) -> Tensor:
    """Elements shifted by ``shifts`` along ``dims`` (wrapping around); without ``dims``
    the tensor is rolled as if flattened, then given its shape back."""
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"roll: shifts {shifts} without dims: give one shift (the "
                               f"tensor is rolled flattened) or one dim per shift")
        return roll(input.reshape(-1), shifts, 0).reshape(input.shape)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts and dimensions must align: {len(shifts)} shifts "
                           f"{shifts} for {len(dims)} dims {dims}")
    out = input
    for s, d in zip(shifts, dims):  # a dim may repeat: its shifts add up, as PyTorch
        d = layout.normalize_dim(d, input.ndim, "roll")
        n = out.shape[d]
        s = s % n if n else 0
        if s:
            out = Roll.apply(out, s, d)
    return out.clone() if out is input else out


declare("roll", differentiable=True, dtypes="any")


# -- unfold: the sliding windows along one dim, a view ---------------------------------------
class UnfoldView(AsStrided):
    """Windows of ``size`` every ``step`` along ``dim``, as a new last dim over the
    input's storage. The gradient adds each window's gradient back where it was read
    (index_add along ``dim``, so windows that overlap accumulate, on any input layout,
    and it has a graph of its own)."""

    label = "Unfold"

    @staticmethod
    def forward(ctx, x, shape, strides, offset, dim, step):
        ctx.dim, ctx.step, ctx.in_shape = dim, step, x.shape
        return AsStrided.forward(ctx, x, shape, strides, offset)

    @staticmethod
    def backward(ctx, g):
        _check_history(ctx)
        if not ctx.in_shape:  # a 0-d input: one window of its one element, or none
            return g.sum(), None, None, None, None, None
        d, count, size = ctx.dim, g.shape[ctx.dim], g.shape[-1]
        windows = np.arange(count)[:, None] * ctx.step + np.arange(size)[None, :]
        index = Tensor._wrap(g._be.from_numpy(windows.reshape(-1).astype(np.int64)))
        # (..., count, ..., size) -> (..., count * size, ...): window-major, as the index
        order = list(range(g.ndim - 1))
        order.insert(d + 1, g.ndim - 1)
        merged = g.permute(order).reshape(g.shape[:d] + (count * size,) + g.shape[d + 1:-1])
        zeros = Tensor._wrap(g._be.full(ctx.in_shape, 0, g.dtype.np))
        return zeros.index_add(d, index, merged), None, None, None, None, None


@tensor_method()
def unfold(self, dimension, size, step):
    """unfold(dimension, size, step) -> Tensor

    A view of the windows of ``size`` elements every ``step`` along ``dimension``: that
    dim becomes the number of windows, (n - size) // step + 1, and a new last dim of
    ``size`` holds each window, as PyTorch's Tensor.unfold (F.unfold is im2col)."""
    x = self
    shape, strides = (x.shape, x.strides) if x.ndim else ((1,), (1,))
    d = layout.normalize_dim(dimension, len(shape), "unfold")
    n = shape[d]
    if size < 0 or size > n:
        raise OpError(f"unfold: size {size} must be between 0 and the size of dimension "
                      f"{dimension}, {n} (tensor of shape {x.shape})")
    if step <= 0:
        raise OpError(f"unfold: step must be positive, got {step}")
    new_shape = shape[:d] + ((n - size) // step + 1,) + shape[d + 1:] + (size,)
    new_strides = strides[:d] + (strides[d] * step,) + strides[d + 1:] + (strides[d],)
    if not x.ndim:  # (PyTorch: a 0-d input gives its window alone, of shape (size,))
        new_shape, new_strides = (size,), (0,)
    return UnfoldView.apply(x, new_shape, new_strides, x.offset, d, step)


declare("unfold", dtypes="any")


# -- diag: a vector onto a matrix's diagonal, or a matrix's diagonal as a vector ------------
@tensor_method(function=True)
def diag(input, diagonal=0):  # noqa: A002 (PyTorch's names)
    """diag(input, diagonal=0) -> Tensor

    A 1-D input becomes the ``diagonal``-th diagonal of a square matrix of zeros (above
    the main one for diagonal > 0, below for < 0); a 2-D input gives a copy of its
    ``diagonal``-th diagonal, as torch.diag."""
    x, k = input, diagonal
    if x.ndim == 2:
        return x.diagonal(k).clone()
    if x.ndim != 1:
        raise OpError(f"diag: input must be 1-D or 2-D, got shape {x.shape}; use "
                      f"torch.diagonal or diag_embed for batches")
    from .indexing import cat, where

    n = x.shape[0] + abs(k)
    pad = Tensor._wrap(x._be.full((abs(k),), 0, x.dtype.np))
    # row r of the result is the padded vector, kept where column - r == k
    row = cat([pad, x] if k >= 0 else [x, pad]) if k else x
    mask = np.eye(n, k=k, dtype=bool)
    zero = Tensor._wrap(x._be.full((), 0, x.dtype.np))
    return where(Tensor._wrap(x._be.from_numpy(mask)), row.unsqueeze(0).expand(n, n), zero)


declare("diag", dtypes="any")


# -- meshgrid: each input broadcast over the grid, as expanded views -------------------------
@function
def meshgrid(*tensors, indexing=None):
    """meshgrid(*tensors, indexing=None) -> tuple of Tensors

    Grids of the 0-d or 1-D inputs: output i holds input i along dim i (``indexing="ij"``,
    the default, as PyTorch's) or with the first two dims swapped (``"xy"``, numpy's
    Cartesian order). Each output is an expanded view of its input."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    indexing = "ij" if indexing is None else indexing
    if indexing not in ("ij", "xy"):
        raise OpError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if not tensors or any(t.ndim > 1 for t in tensors):
        raise OpError(f"meshgrid: expects one or more 0-D or 1-D tensors, got shapes "
                      f"{[tuple(t.shape) for t in tensors]}")
    sizes = [t.numel() for t in tensors]
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        order[0], order[1] = 1, 0
    shape = tuple(sizes[i] for i in order)
    out = []
    for i, t in enumerate(tensors):
        view = [1] * len(tensors)
        view[order.index(i)] = sizes[i]
        out.append(t.reshape(view).expand(shape))
    return tuple(out)


declare("meshgrid", arity=2, dtypes="any")


# -- pixel shuffles (torch.nn.functional's, also torch.<name>): a reshape, a permute, a
# reshape ---------------------------------------------------------------------------------
def _pixel_input(op, input, factor, name):  # noqa: A002 (PyTorch's name)
    if not isinstance(factor, int) or isinstance(factor, bool) or factor < 1:
        raise ValueError(f"{op}: {name} must be a positive integer, got {factor!r}")
    if input.ndim < 3:
        raise OpError(f"{op}: input must have at least 3 dims (*, C, H, W), got shape "
                      f"{input.shape}; unsqueeze a channel dim first")
    return input.shape[:-3], input.shape[-3:]


def _pixel_shuffle_layer(upscale_factor):
    return {"upscale_factor": upscale_factor}


@function
@fused(None, arity=1, dtypes="any",
       layer=Layer("PixelShuffle", _pixel_shuffle_layer,
                   shown="upscale_factor={upscale_factor}"))
def pixel_shuffle(input, upscale_factor):  # noqa: A002
    """(*, C r^2, H, W) to (*, C, H r, W r): each group of r^2 channels becomes an
    r x r block of pixels (sub-pixel convolution's upsampling)."""
    r = upscale_factor
    lead, (c, h, w) = _pixel_input("pixel_shuffle", input, r, "upscale_factor")
    if c % (r * r):
        raise OpError(f"pixel_shuffle: the {c} channels of input {input.shape} are not "
                      f"divisible by upscale_factor^2 = {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def _pixel_unshuffle_layer(downscale_factor):
    return {"downscale_factor": downscale_factor}


@function
@fused(None, arity=1, dtypes="any",
       layer=Layer("PixelUnshuffle", _pixel_unshuffle_layer,
                   shown="downscale_factor={downscale_factor}"))
def pixel_unshuffle(input, downscale_factor):  # noqa: A002
    """(*, C, H r, W r) to (*, C r^2, H, W): pixel_shuffle's inverse."""
    r = downscale_factor
    lead, (c, h, w) = _pixel_input("pixel_unshuffle", input, r, "downscale_factor")
    if h % r or w % r:
        raise OpError(f"pixel_unshuffle: the height {h} and width {w} of input "
                      f"{input.shape} must be divisible by downscale_factor = {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def _channel_shuffle_layer(groups):
    return {"groups": groups}


@function
@fused(None, arity=1, dtypes="any",
       layer=Layer("ChannelShuffle", _channel_shuffle_layer, shown="groups={groups}"))
def channel_shuffle(input, groups):  # noqa: A002
    """(N, C, *) with its C channels split into ``groups`` groups and interleaved: the
    channels read as (groups, C / groups), transposed (ShuffleNet)."""
    if input.ndim < 3:
        raise OpError(f"channel_shuffle: expects an input of 3 or more dims (N, C, *), got "
                      f"shape {tuple(input.shape)}")
    if not isinstance(groups, int) or groups <= 0:
        raise OpError(f"channel_shuffle: groups must be a positive int, got {groups!r}")
    n, c, rest = input.shape[0], input.shape[1], tuple(input.shape[2:])
    if c % groups:
        raise OpError(f"channel_shuffle: the {c} channels of input {tuple(input.shape)} "
                      f"are not divisible by groups = {groups}")
    x = input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
    return x.reshape(n, c, *rest)
