"""Lab 01 · Tensors and strides: the exercises and their checkers.

Every expected answer is the engine's own: the checker builds the view with Haelixe and
compares the learner's numbers with its shape, strides and offset. Wrong layouts are
drawn beside the right one (the storage cell each element reads), from the first element
where they disagree.
"""

from __future__ import annotations

import numpy as np

from .. import layout as L
from ..creation import arange
from ..viz.layout import element_positions, render_layout_svg
from .core import Lab, first_hint
from .values import as_int, as_int_tuple, describe

LAB = Lab(1, "Tensors and strides")


def _same_layout(shape, a, b) -> bool:
    """Two stride tuples give the same element positions: a dim of size 1 never moves,
    so its stride does not matter."""
    return all(n <= 1 or sa == sb for n, sa, sb in zip(shape, a, b))


def _layout_pictures(shape, offset, storage_size, expected, got, name):
    """The right layout (drawn as "y", short enough for its slices' titles) and the
    learner's, the first element where they differ selected."""
    pe = element_positions(shape, expected, offset)
    pg = element_positions(shape, got, offset)
    diff = np.argwhere(pe != pg)
    sel = tuple(int(i) for i in diff[0]) if len(diff) else None
    return [(f"the engine's y = {name}: strides {expected}",
             render_layout_svg(shape, expected, offset, storage_size, sel, name="y")),
            (f"your strides {got} over the same storage (red: outside it)",
             render_layout_svg(shape, got, offset, storage_size, sel, name="yours"))]


# -- 1.1 strides of a permute -------------------------------------------------------------

def _permute_cases():
    x = arange(24).reshape(2, 3, 4)
    y = arange(120).reshape(2, 3, 4, 5)
    return [(x, "x", (2, 0, 1)), (x, "x", (1, 0, 2)), (x[:, ::2], "x[:, ::2]", (2, 1, 0)),
            (y, "y", (3, 1, 0, 2))]


def _permute_hint(x, dims, got) -> str:
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = x.strides[i]
    shape = tuple(x.shape[d] for d in dims)
    return first_hint(
        (got == x.strides,
         "these are the strides before the permute: the stride of a dimension moves with "
         "it, so new dim i (old dim dims[i]) keeps stride strides[dims[i]]"),
        (got == L.contiguous_strides(shape),
         "these are the strides of a fresh contiguous tensor of the permuted shape, which "
         "would be a copy; a permute copies nothing: every dim keeps its own stride and "
         "only their order changes"),
        (got == tuple(inverse),
         "you moved old dim i to position dims[i]; permute goes the other way: position i "
         "gets old dim dims[i], so new strides[i] = strides[dims[i]]"),
        otherwise="new dim i is old dim dims[i], and it keeps that dim's stride")


@LAB.exercise("1.1", "Strides of a permute", section="2. Positions by hand")
def permute(answer, fb):
    for x, name, dims in _permute_cases():
        y = x.permute(*dims)
        call = f"permute_strides({x.strides}, {dims})"
        raw = fb.call(answer, x.strides, dims, shown=call)
        got, complaint = as_int_tuple(raw, len(dims), call)
        if complaint:
            fb.fail(complaint, expected=y.strides, got=raw,
                    hint="return a tuple with one stride per dim of the permuted view")
        if not _same_layout(y.shape, y.strides, got):
            fb.fail(f"{call}: the strides of {name}.permute{dims} (shape {y.shape})",
                    expected=y.strides, got=got, hint=_permute_hint(x, dims, got),
                    pictures=_layout_pictures(y.shape, y.offset, x.storage.size, y.strides,
                                              got, f"{name}.permute{dims}"))
    return "every permuted layout matches the engine's, non-contiguous and 4-D ones too"


# -- 1.2 the position of an element in a flipped view -------------------------------------

def _flip_cases():
    x = arange(12).reshape(3, 4)
    z = arange(24).reshape(2, 3, 4)
    # the first case tells the typical mistakes apart (flip ignored / offset not moved)
    return [(x, "x", 1, (2, 1)), (x, "x", 1, (0, 0)), (x, "x", 0, (0, 3)),
            (x.T, "x.T", 0, (1, 2)), (x[1:, ::2], "x[1:, ::2]", 1, (1, 0)),
            (z, "z", 2, (1, 2, 0))]


@LAB.exercise("1.2", "The position of an element in a flipped view",
              section="3. Steps, flips and zero strides")
def flip_position(answer, fb):
    for x, name, dim, index in _flip_cases():
        v = x.flip(dim)
        want = L.element_position(index, v.strides, v.offset)
        call = f"flipped_position({x.shape}, {x.strides}, {x.offset}, {dim}, {index})"
        raw = fb.call(answer, x.shape, x.strides, x.offset, dim, index, shown=call)
        got, complaint = as_int(raw, call)
        if complaint:
            fb.fail(complaint, expected=want, got=raw, hint="return one storage position, "
                    "an integer")
        if got == want:
            continue
        hint = first_hint(
            (got == L.element_position(index, x.strides, x.offset),
             f"{got} is where {name}{list(index)} lives, before the flip; the flip reads "
             f"dim {dim} backwards, so its index i is element n-1-i of {name}"),
            (got == L.element_position(index, v.strides, x.offset),
             "the stride along the flipped dim is negative, right; the offset must move "
             "too, to the last element along that dim: offset + (n-1)·stride"),
            otherwise="flip(d) negates stride d and moves the offset to offset + "
                      "(shape[d]-1)·stride[d]; then the position is offset + Σ stride·index")
        picture = render_layout_svg(v.shape, v.strides, v.offset, x.storage.size, index,
                                    name=f"{name}.flip({dim})",
                                    highlight_positions={got} if got != want else ())
        fb.fail(f"{call}: the storage position of {name}.flip({dim}){list(index)}",
                expected=want, got=got, hint=hint,
                pictures=[(f"the selected element reads storage[{want}]; the cell you "
                           f"named, {got}, is outlined (when it is in the storage)",
                           picture)])
    return "every flipped position matches, on transposed and strided inputs too"


# -- 1.3 strides of an expand -------------------------------------------------------------

def _expand_cases():
    x = arange(12).reshape(3, 4)
    # first a case where keeping the old strides and making contiguous ones differ
    return [(x[:, 1:2], "x[:, 1:2]", (3, 5)), (x[0:1], "x[0:1]", (3, 4)),
            (arange(4), "arange(4)", (2, 3, 4)), (x.T[:, 2:3], "x.T[:, 2:3]", (2, 4, 6))]


@LAB.exercise("1.3", "Strides of an expand", section="3. Steps, flips and zero strides")
def expand(answer, fb):
    for x, name, shape in _expand_cases():
        v = x.expand(*shape)
        call = f"expand_strides({x.shape}, {x.strides}, {shape})"
        raw = fb.call(answer, x.shape, x.strides, shape, shown=call)
        got, complaint = as_int_tuple(raw, len(shape), call)
        if complaint:
            fb.fail(complaint, expected=v.strides, got=raw,
                    hint="one stride per dim of the expanded shape: new leading dims too")
        if _same_layout(shape, v.strides, got):
            continue
        lead = len(shape) - x.ndim
        hint = first_hint(
            (got == L.contiguous_strides(shape) and got != (0,) * lead + x.strides,
             "these are the strides of a contiguous tensor of the new shape, a copy; an "
             "expand copies nothing: a repeated dim reads the same cells again, so its "
             "stride is 0"),
            (any(n == 1 and m > 1 and g != 0
                 for n, m, g in zip(x.shape, shape[lead:], got[lead:])),
             "a dim of size 1 that is repeated must step 0, not its old stride: every "
             "index along it reads the one cell there is"),
            otherwise="new leading dims and repeated size-1 dims get stride 0; the other "
                      "dims keep their strides")
        fb.fail(f"{call}: the strides of {name}.expand{shape}", expected=v.strides, got=got,
                hint=hint, pictures=_layout_pictures(shape, v.offset, x.storage.size,
                                                     v.strides, got, f"{name}.expand{shape}"))
    return "every expanded layout matches: zero strides for every repeated dim"


# -- 1.4 a view that must not be possible -------------------------------------------------

@LAB.exercise("1.4", "A view that must not be possible",
              section="4. When a view is impossible")
def impossible_view(answer, fb):
    x = arange(12).reshape(3, 4)
    raw = fb.call(answer, x, shown="impossible_view(x)")
    from ..tensor import Tensor

    if not (isinstance(raw, (tuple, list)) and len(raw) == 2
            and isinstance(raw[0], Tensor)):
        fb.fail("impossible_view(x) should return a pair (v, shape): a view v of x and a "
                "shape that v.view refuses", got=raw)
    v, shape = raw
    shape, complaint = as_int_tuple(shape, what="the shape")
    if complaint:
        fb.fail(complaint, hint="the second item is a shape, e.g. (12,)")
    if v.storage is not x.storage:
        fb.fail("v has a storage of its own: it is a copy of x's values, not a view of x",
                got=v, hint="make v from x with view operations only (transpose, permute, "
                "slicing, flip, expand): they keep x's storage")
    if (v.shape, v.strides, v.offset, shape) == ((4, 3), (1, 4), 0, (12,)):
        fb.fail("x.T with (12,) is the example above: find another view and shape",
                hint="a flip, a slice with a step, a permute: which of them leaves rows "
                     "that do not follow each other in memory?")
    if L.numel(shape) != v.numel():
        fb.fail(f"v has {v.numel()} elements and the shape {shape} holds {L.numel(shape)}: "
                f"view refuses that for the sizes, not for the layout",
                hint="pick a shape with the same number of elements that the layout "
                     "cannot provide without copying")
    call = f"v.view({', '.join(map(str, shape))})"
    try:
        out = v.view(*shape)
    except RuntimeError as e:
        return (f"v (shape {v.shape}, strides {v.strides}) refuses {call[1:]}, as it "
                f"should. The engine says: {e}")
    except Exception as e:  # noqa: BLE001 (any other refusal is still a wrong answer)
        fb.fail(f"{call} raised {type(e).__name__}: {e}", hint="the shape itself is "
                "invalid; choose a valid shape that the layout cannot provide")
    picture = render_layout_svg(v.shape, v.strides, v.offset, x.storage.size,
                                (0,) * v.ndim if v.numel() else None, name="v")
    fb.fail(f"{call} worked: it gave a view of shape {out.shape} with strides "
            f"{out.strides}, so this view is possible", got=describe(v, 80),
            hint="view fails only when dims you merge are not one run of memory: a dim "
                 "with stride s followed by one of size n must have s = n·(its stride). "
                 "Transposed dims break that",
            pictures=[("your v: a view has to merge these dims without copying", picture)])
