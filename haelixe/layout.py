"""Pure shape / stride / offset arithmetic. No arrays live here.

A layout is (shape, strides, offset), strides and offset counted in elements of the
storage. Element ``idx`` of a tensor lives at ``offset + sum(i * s for i, s in zip(idx,
strides))`` in its storage. Every view in Haelixe is one of these functions applied to
the layout of its base; the bytes never move. Each function raises ValueError (or
IndexError) with a message naming the op, the shapes and the fix.
"""

from __future__ import annotations

import functools
import math
import operator

from .errors import OpError

Shape = tuple
Strides = tuple


# -- basics ------------------------------------------------------------------------------

def numel(shape: Shape) -> int:
    return math.prod(shape)


@functools.lru_cache(maxsize=1024)  # asked for on every op; a model uses few shapes
def contiguous_strides(shape: Shape) -> Strides:
    """Row-major (C) strides for ``shape``."""
    strides = []
    acc = 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def is_contiguous(shape: Shape, strides: Strides) -> bool:
    """True when the layout is row-major and dense. Size-1 dims may have any stride,
    as in PyTorch, since they are never stepped over."""
    if 0 in shape:
        return True  # no element is ever read (checked first: any dim may hold the 0)
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1:
            if s != expected:
                return False
            expected *= n
    return True


def normalize_dim(dim: int, ndim: int, op: str = "op") -> int:
    """Wrap a negative dim; a scalar (ndim 0) accepts dims -1 and 0 like PyTorch."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dims "
                         f"(valid: {-n}..{n - 1})")
    return dim + n if dim < 0 else dim


def normalize_dims(dims, ndim: int, op: str = "op") -> tuple:
    out = []
    for d in dims:  # a plain loop with an in-range fast path: every view op calls this
        d = operator.index(d)
        out.append(d if 0 <= d < ndim else normalize_dim(d, ndim, op))
    out = tuple(out)
    if len(set(out)) != len(out):
        raise OpError(f"{op}: dims {tuple(dims)} repeat a dim")
    return out


def extent(shape: Shape, strides: Strides, offset: int) -> tuple[int, int]:
    """(lowest, highest) storage index the layout touches; (offset, offset - 1) when
    the layout has no elements."""
    if any(n == 0 for n in shape):
        return offset, offset - 1
    lo = hi = offset
    for n, s in zip(shape, strides):
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi


# -- broadcasting ------------------------------------------------------------------------

def broadcast_shapes(*shapes: Shape, op: str = "broadcast") -> Shape:
    """numpy's rule: align from the right; each pair of sizes must match or be 1."""
    ndim = max(map(len, shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for i, n in enumerate(shape, start=ndim - len(shape)):
            m = out[i]
            if m == n or n == 1:
                continue
            if m == 1:
                out[i] = n
            else:
                shown = " and ".join(str(tuple(s)) for s in shapes)
                raise OpError(
                    f"{op}: shapes {shown} cannot be broadcast together: size {m} vs {n} "
                    f"at dim {i - ndim}; sizes must match or one of them be 1 "
                    f"(reshape or unsqueeze one input)")
    return tuple(out)


def expand(shape: Shape, strides: Strides, target: Shape, op: str = "expand") -> Strides:
    """Strides that view ``shape`` as ``target`` with zero strides on broadcast dims.
    -1 in ``target`` keeps the existing size."""
    if len(target) < len(shape):
        raise OpError(f"{op}: cannot expand shape {tuple(shape)} to {tuple(target)}: "
                      f"the target has fewer dims")
    lead = len(target) - len(shape)
    out = [0] * len(target)
    for i, t in enumerate(target):
        if i < lead:
            if t < 0:
                raise OpError(f"{op}: -1 is not allowed for new leading dim {i} "
                              f"(expanding {tuple(shape)} to {tuple(target)})")
            continue
        n, s = shape[i - lead], strides[i - lead]
        if t == -1 or t == n:
            out[i] = s
        elif n == 1:
            out[i] = 0
        else:
            raise OpError(f"{op}: cannot expand shape {tuple(shape)} to {tuple(target)}: "
                          f"size {n} at dim {i - lead} is not 1")
    return tuple(out)


def expand_shape(shape: Shape, target: Shape) -> Shape:
    lead = len(target) - len(shape)
    return tuple(shape[i - lead] if (t == -1 and i >= lead) else t for i, t in enumerate(target))


def reduced_dims(shape: Shape, target: Shape) -> tuple[tuple, tuple]:
    """For a gradient of ``target`` flowing back to ``shape`` (which broadcast to it):
    the leading dims to sum away, and the dims (in target numbering) summed with keepdim."""
    lead = len(target) - len(shape)
    keep = tuple(i for i in range(lead, len(target)) if shape[i - lead] == 1 and target[i] != 1)
    return tuple(range(lead)), keep


def keep_shape(shape: Shape, dims) -> Shape:
    """``shape`` with the dims in ``dims`` reduced to 1 (a reduction's keepdim shape)."""
    return tuple(1 if i in dims else n for i, n in enumerate(shape))


def unreduced_strides(reduced_shape: Shape, reduced_strides: Strides, shape: Shape,
                      dims) -> Strides:
    """Strides that show an array of ``reduced_shape`` and ``reduced_strides`` (a
    reduction over ``dims`` of an array of ``shape``, the dims kept or not) over
    ``shape``: 0 along the reduced dims."""
    ndim = len(reduced_shape)
    if not ndim:  # a full reduction to 0-d: the common case (loss.sum())
        return (0,) * len(shape)
    kept = ndim == len(shape)
    strides, j = [], 0
    for d in range(len(shape)):
        if d in dims:
            strides.append(0)
            j += kept
        else:
            strides.append(reduced_strides[j])
            j += 1
    return tuple(strides)


# -- view / reshape ----------------------------------------------------------------------

def infer_shape(shape, total: int, op: str = "view") -> Shape:
    """Resolve one -1 in ``shape`` so it holds ``total`` elements."""
    shape = tuple(map(operator.index, shape))
    if -1 not in shape and math.prod(shape) == total and min(shape, default=0) >= 0:
        return shape  # the common case: nothing to infer (two negatives multiply to +)
    if shape.count(-1) > 1:
        raise OpError(f"{op}: only one dim may be -1, got {shape}")
    known = math.prod(n for n in shape if n != -1)
    if -1 in shape:
        if known == 0 or total % known:
            raise OpError(f"{op}: shape {shape} is invalid for {total} elements")
        shape = tuple(total // known if n == -1 else n for n in shape)
    if any(n < 0 for n in shape) or math.prod(shape) != total:
        raise OpError(f"{op}: shape {shape} is invalid for input of {total} elements")
    return shape


def view_strides(shape: Shape, strides: Strides, new_shape: Shape):
    """Strides that reinterpret the layout as ``new_shape`` without moving data, or None
    when no such strides exist (then only a copy can reshape). PyTorch's algorithm: walk
    chunks of old dims that are contiguous with each other and split them anew."""
    if math.prod(shape) == 0 or not shape:
        return contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base_stride = strides[-1] if strides else 1
    tensor_numel = 1
    view_numel = 1
    for d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[d]
        # A chunk ends where the next-outer old dim does not continue this one.
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base_stride = strides[d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


# -- permutations ------------------------------------------------------------------------

def permute(shape: Shape, strides: Strides, dims) -> tuple[Shape, Strides]:
    dims = normalize_dims(dims, len(shape), "permute")
    if len(dims) != len(shape):
        raise OpError(f"permute: got {len(dims)} dims {tuple(dims)} for a tensor of shape "
                      f"{tuple(shape)}; give one entry per dim")
    # (from lists: a generator costs twice as much for these few dims)
    return tuple([shape[d] for d in dims]), tuple([strides[d] for d in dims])


def memory_order(shape: Shape, strides: Strides) -> tuple:
    """The dims from the outermost in memory to the innermost: largest |stride| first,
    ties in dim order, size-1 dims (never stepped over, so anywhere will do) first."""
    return tuple(sorted(range(len(shape)),
                        key=lambda d: -abs(strides[d]) if shape[d] != 1 else -math.inf))


def inverse_permutation(dims) -> tuple:
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return tuple(inv)


def transpose_dims(ndim: int, d0: int, d1: int) -> tuple:
    d0 = normalize_dim(d0, ndim, "transpose")
    d1 = normalize_dim(d1, ndim, "transpose")
    order = list(range(ndim))
    order[d0], order[d1] = order[d1], order[d0]
    return tuple(order)


# -- slicing -----------------------------------------------------------------------------

def index(shape: Shape, strides: Strides, offset: int, key) -> tuple[Shape, Strides, int]:
    """Basic indexing: ints, slices (any step), None and Ellipsis. Advanced (array)
    indexing is not a view and is handled by the caller."""
    if key.__class__ is not tuple:
        key = (key,)
    # (tuple.count compares with ==, which basic entries answer plainly; this runs on
    # every x[...])
    n_ellipsis = key.count(Ellipsis)
    consumed = len(key) - n_ellipsis - key.count(None)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > len(shape):
        raise IndexError(f"too many indices for tensor of shape {tuple(shape)}: "
                         f"{consumed} were given")
    if n_ellipsis:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - consumed) + key[i + 1:]
    new_shape, new_strides = [], []
    d = 0
    for k in key:
        if k is None:
            new_shape.append(1)
            new_strides.append(0)
            continue
        n, s = shape[d], strides[d]
        if k.__class__ is slice:
            start, stop, step = k.indices(n)  # Python's rules; refuses step 0
            if step == 1:  # (the usual slice: len(range(...)) costs more than this)
                size = stop - start if stop > start else 0
            else:
                size = len(range(start, stop, step))
            new_shape.append(size)
            new_strides.append(s * step)
            if size:
                offset += start * s
        else:
            i = operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for dim {d} with size {n} "
                                 f"(shape {tuple(shape)})")
            offset += (i + n if i < 0 else i) * s
        d += 1
    new_shape.extend(shape[d:])
    new_strides.extend(strides[d:])
    return tuple(new_shape), tuple(new_strides), offset


def narrow(shape, strides, offset, dim, start, length):
    dim = normalize_dim(dim, len(shape), "narrow")
    n = shape[dim]
    if start < 0:
        start += n
    if not (0 <= start <= n and 0 <= length and start + length <= n):
        raise IndexError(f"narrow: start {start} and length {length} exceed dim {dim} of "
                         f"size {n} (shape {tuple(shape)})")
    new_shape = shape[:dim] + (length,) + shape[dim + 1:]
    return new_shape, strides, offset + start * strides[dim]


def flip(shape, strides, offset, dims):
    """Reverse ``dims``: the stride turns negative and the offset moves to the last
    element, so element 0 of the view is the old last element."""
    dims = normalize_dims(dims, len(shape), "flip")
    new_strides = list(strides)
    for d in dims:
        if shape[d] > 1:
            offset += (shape[d] - 1) * strides[d]
        new_strides[d] = -strides[d]
    return tuple(shape), tuple(new_strides), offset


def squeeze(shape, strides, dims=None):
    if dims is None:
        keep = [i for i, n in enumerate(shape) if n != 1]
    else:
        dims = set(normalize_dims(dims, len(shape), "squeeze"))
        keep = [i for i in range(len(shape)) if i not in dims or shape[i] != 1]
    return tuple(shape[i] for i in keep), tuple(strides[i] for i in keep)


def unsqueeze(shape, strides, dim):
    dim = normalize_dim(dim, len(shape) + 1, "unsqueeze")
    # The stride of a size-1 dim is never used; this one keeps the layout contiguous.
    s = strides[dim] * shape[dim] if dim < len(shape) else 1
    return shape[:dim] + (1,) + shape[dim:], strides[:dim] + (s,) + strides[dim:]


def split_sizes(n: int, split_size_or_sections, dim_desc: str = "") -> list[int]:
    """torch.split: an int gives chunks of that size (the last may be smaller); a list
    gives the sizes, which must add up to the dim."""
    if isinstance(split_size_or_sections, int):
        k = split_size_or_sections
        if k <= 0:
            raise OpError(f"split: split_size must be positive, got {k}")
        return [min(k, n - i) for i in range(0, n, k)] or [0]
    sizes = list(split_size_or_sections)
    if sum(sizes) != n:
        raise OpError(f"split: sizes {sizes} sum to {sum(sizes)} but {dim_desc} has "
                      f"size {n}")
    return sizes


def chunk_sizes(n: int, chunks: int) -> list[int]:
    if chunks <= 0:
        raise OpError(f"chunk: chunks must be positive, got {chunks}")
    k = -(-n // chunks) if n else 1
    return split_sizes(n, k)


# -- as_strided --------------------------------------------------------------------------

def check_as_strided(storage_size: int, shape, strides, offset: int) -> None:
    """Refuse a layout that reaches outside its storage."""
    if len(shape) != len(strides):
        raise OpError(f"as_strided: shape {tuple(shape)} and strides {tuple(strides)} "
                      f"must have the same length")
    if any(n < 0 for n in shape):
        raise OpError(f"as_strided: negative size in shape {tuple(shape)}")
    if offset < 0:
        raise OpError(f"as_strided: storage offset {offset} is negative")
    lo, hi = extent(shape, strides, offset)
    if hi >= lo and (lo < 0 or hi >= storage_size):
        raise OpError(
            f"as_strided: shape {tuple(shape)}, strides {tuple(strides)} and offset {offset} "
            f"reach storage elements {lo}..{hi}, but the storage holds {storage_size} "
            f"(valid 0..{storage_size - 1}); shrink the shape or the strides")


def element_position(idx, strides, offset: int) -> int:
    """Storage index of the element at multi-index ``idx``."""
    return offset + sum(i * s for i, s in zip(idx, strides))


def is_non_overlapping(shape, strides) -> bool:
    """True when no two elements share a storage cell (needed to write through a view)."""
    if 0 in shape:
        return True  # an empty layout has no cells to share, whatever its strides
    dims = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    max_index = 0
    for s, n in dims:
        if s <= max_index:
            break
        max_index += (n - 1) * s
    else:
        return True
    # The nesting test above is only sufficient: interleaved layouts such as shape (3, 2)
    # with strides (2, 3) share no cell either. Settle those by visiting every cell.
    if any(s == 0 for s, _ in dims):
        return False
    cells = {0}
    for s, n in dims:
        grown = {c + i * s for c in cells for i in range(n)}
        if len(grown) != len(cells) * n:
            return False
        cells = grown
    return True


def bitcast(shape: Shape, strides: Strides, offset: int, old_size: int, new_size: int,
            names: str) -> tuple[Shape, Strides, int]:
    """(shape, strides, offset) of a layout whose elements of ``old_size`` bytes are read
    as elements of ``new_size`` bytes (PyTorch's view(dtype)): the same layout for one
    size; else the last dim, which must have stride 1, grows or shrinks, and every other
    stride and the offset must land on whole new elements. ``names`` reads "float32 as
    int16" in the errors, which are PyTorch's."""
    if old_size == new_size:
        return tuple(shape), tuple(strides), offset
    why = f"to view {names} (different element sizes)"
    if not shape:
        raise OpError(f"view: self.dim() cannot be 0 {why}")
    if strides[-1] != 1:
        raise OpError(f"view: self.stride(-1) must be 1 {why}, but got {strides[-1]}")
    if new_size > old_size:
        k = new_size // old_size
        if shape[-1] % k:
            raise OpError(f"view: self.size(-1) must be divisible by {k} {why}, but got "
                          f"{shape[-1]}")
        if offset % k:
            raise OpError(f"view: self.storage_offset() must be divisible by {k} {why}, "
                          f"but got {offset}")
        for d, s in enumerate(strides[:-1]):
            if s % k:
                raise OpError(f"view: self.stride({d}) must be divisible by {k} {why}, "
                              f"but got {s}")
        return (*shape[:-1], shape[-1] // k), (*(s // k for s in strides[:-1]), 1), offset // k
    k = old_size // new_size
    return (*shape[:-1], shape[-1] * k), (*(s * k for s in strides[:-1]), 1), offset * k


class Size(tuple):
    """torch.Size: a shape as a tuple of ints. Haelixe's ``.shape`` and ``.size()`` are
    plain tuples (equal to a Size of the same ints); Size is here for programs that make
    one, as ``dist.sample(torch.Size([n]))`` does."""

    def __new__(cls, sizes=()):
        sizes = tuple(sizes)
        for s in sizes:
            if not hasattr(s, "__index__"):
                raise TypeError(f"Size: expected a sequence of ints, got an element of type "
                                f"{type(s).__name__} in {sizes!r}")
        return super().__new__(cls, (operator.index(s) for s in sizes))

    def __getitem__(self, item):
        got = super().__getitem__(item)
        return Size(got) if isinstance(item, slice) else got

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))

    def numel(self) -> int:
        """The number of elements a tensor of this shape holds."""
        return math.prod(self)

    def __repr__(self) -> str:
        return f"Size({list(self)})"
