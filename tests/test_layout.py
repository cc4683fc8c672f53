"""Property tests of haelixe.layout against numpy.

Each example builds a numpy array over a flat buffer with a random layout (shape,
strides in elements, possibly zero or negative, offset), applies a layout function and
compares the numpy array that layout describes with what numpy itself makes of the same
operation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from haelixe import layout

SETTINGS = settings(max_examples=120, deadline=None)

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)
nonempty_shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple)


def strided(shape, strides, offset, size):
    """numpy array over np.arange(size) with the given layout (elements)."""
    buf = np.arange(max(size, 1), dtype=np.int64)
    isz = buf.itemsize
    return np.lib.stride_tricks.as_strided(buf[offset:] if offset < buf.size else buf[:0],
                                           shape, tuple(s * isz for s in strides))


def positions(shape, strides, offset):
    return [layout.element_position(i, strides, offset) for i in np.ndindex(*shape)]


@st.composite
def layouts(draw, shape_st=shapes, allow_negative=True, allow_zero=True):
    """(shape, strides, offset, buffer size) with every element inside the buffer."""
    shape = draw(shape_st)
    lo_s = -6 if allow_negative else (0 if allow_zero else 1)
    strides = tuple(draw(st.integers(lo_s, 6).filter(lambda s: allow_zero or s != 0))
                    for _ in shape)
    lo, hi = layout.extent(shape, strides, 0)
    if hi < lo:
        lo, hi = 0, 0
    offset = -lo + draw(st.integers(0, 3))
    size = offset + hi + 1 + draw(st.integers(0, 3))
    return shape, strides, offset, size


def array_of(lay):
    shape, strides, offset, size = lay
    return strided(shape, strides, offset, size)


def check_view(lay, new_shape, new_strides, new_offset, expected):
    """The layout (new_shape, new_strides, new_offset) over the same buffer holds the
    values numpy computed."""
    got = strided(new_shape, new_strides, new_offset, lay[3])
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


# -- contiguity and extent ----------------------------------------------------------------

@SETTINGS
@given(layouts())
def test_is_contiguous_matches_numpy_flag(lay):
    a = array_of(lay)
    assert layout.is_contiguous(lay[0], lay[1]) == a.flags.c_contiguous


@given(shapes)
def test_contiguous_strides_are_numpy_c_strides(shape):
    if 0 not in shape:  # numpy zeroes the strides of empty arrays; PyTorch uses max(n, 1)
        a = np.empty(shape, np.int64)
        assert layout.contiguous_strides(shape) == tuple(s // 8 for s in a.strides)
    assert layout.is_contiguous(shape, layout.contiguous_strides(shape))


@SETTINGS
@given(layouts())
def test_extent_is_min_and_max_position(lay):
    shape, strides, offset, _ = lay
    pos = positions(shape, strides, offset)
    lo, hi = layout.extent(shape, strides, offset)
    if pos:
        assert (lo, hi) == (min(pos), max(pos))
    else:
        assert hi < lo


# -- broadcasting -------------------------------------------------------------------------

@SETTINGS
@given(st.lists(st.lists(st.sampled_from([0, 1, 2, 3]), max_size=4).map(tuple),
                min_size=1, max_size=3))
def test_broadcast_shapes_matches_numpy(shape_list):
    try:
        expected = np.broadcast_shapes(*shape_list)
    except ValueError:
        with pytest.raises(ValueError, match="cannot be broadcast"):
            layout.broadcast_shapes(*shape_list)
        return
    assert layout.broadcast_shapes(*shape_list) == expected


@SETTINGS
@given(layouts(), st.lists(st.integers(1, 3), max_size=2).map(tuple), st.data())
def test_expand_matches_broadcast_to(lay, lead, data):
    shape = lay[0]
    target = lead + tuple(data.draw(st.sampled_from([n, 3])) if n == 1 else n for n in shape)
    strides = layout.expand(shape, lay[1], target)
    assert all(s == 0 for s, n, t in zip(strides[len(lead):], shape, target[len(lead):])
               if n != t)
    check_view(lay, target, strides, lay[2], np.broadcast_to(array_of(lay), target))


def test_expand_keeps_size_with_minus_one():
    assert layout.expand((3, 1), (1, 1), (2, -1, 4)) == (0, 1, 0)
    assert layout.expand_shape((3, 1), (2, -1, 4)) == (2, 3, 4)


# -- view / reshape -----------------------------------------------------------------------

def factorisations(n, ndim):
    """Shapes of ``ndim`` dims holding ``n`` elements (ones included)."""
    if ndim == 0:
        return [()] if n == 1 else []
    out = []
    for d in range(1, n + 1):
        if n % d == 0:
            out += [(d,) + rest for rest in factorisations(n // d, ndim - 1)]
    return out


@settings(max_examples=300, deadline=None)
@given(layouts(nonempty_shapes), st.integers(0, 4), st.data())
def test_view_strides_agree_with_numpy_reshape(lay, ndim, data):
    shape, strides, offset, _ = lay
    n = math.prod(shape)
    options = factorisations(n, ndim)
    assume(options)
    new_shape = data.draw(st.sampled_from(options))
    a = array_of(lay)
    new_strides = layout.view_strides(shape, strides, new_shape)
    reshaped = a.reshape(new_shape)
    if new_strides is not None:
        check_view(lay, new_shape, new_strides, offset, reshaped)
    else:
        # no view exists: numpy must have copied too
        assert not np.shares_memory(reshaped, a), (shape, strides, new_shape)


def test_view_strides_examples():
    # a transposed (3, 4) cannot be flattened, but can split its dims
    assert layout.view_strides((4, 3), (1, 4), (12,)) is None
    assert layout.view_strides((4, 3), (1, 4), (2, 2, 3)) == (2, 1, 4)
    # contiguous in any grouping
    assert layout.view_strides((2, 3, 4), (12, 4, 1), (6, 4)) == (4, 1)


def test_infer_shape_resolves_minus_one_and_refuses_bad_sizes():
    assert layout.infer_shape((-1, 4), 12) == (3, 4)
    with pytest.raises(ValueError, match="only one dim may be -1"):
        layout.infer_shape((-1, -1), 12)
    with pytest.raises(ValueError, match="invalid for"):
        layout.infer_shape((5, -1), 12)
    with pytest.raises(ValueError, match="invalid for"):
        layout.infer_shape((5, 3), 12)


# -- permute, flip, squeeze ---------------------------------------------------------------

@SETTINGS
@given(layouts(), st.data())
def test_permute_matches_transpose(lay, data):
    perm = data.draw(st.permutations(range(len(lay[0]))))
    shape, strides = layout.permute(lay[0], lay[1], perm)
    check_view(lay, shape, strides, lay[2], np.transpose(array_of(lay), perm))
    inv = layout.inverse_permutation(perm)
    assert layout.permute(shape, strides, inv) == (lay[0], lay[1])


@SETTINGS
@given(layouts(), st.data())
def test_flip_matches_numpy(lay, data):
    nd = len(lay[0])
    dims = data.draw(st.lists(st.integers(0, max(nd - 1, 0)), unique=True,
                              max_size=nd)) if nd else []
    shape, strides, offset = layout.flip(lay[0], lay[1], lay[2], dims)
    check_view(lay, shape, strides, offset, np.flip(array_of(lay), tuple(dims)))


@SETTINGS
@given(layouts(), st.data())
def test_squeeze_matches_numpy(lay, data):
    shape = lay[0]
    ones = [i for i, n in enumerate(shape) if n == 1]
    if data.draw(st.booleans()) or not ones:
        new_shape, new_strides = layout.squeeze(shape, lay[1])
        expected = np.squeeze(array_of(lay))
    else:
        dims = data.draw(st.lists(st.sampled_from(ones), unique=True, min_size=1))
        new_shape, new_strides = layout.squeeze(shape, lay[1], dims)
        expected = np.squeeze(array_of(lay), tuple(dims))
    check_view(lay, new_shape, new_strides, lay[2], expected)


@SETTINGS
@given(layouts(), st.data())
def test_unsqueeze_matches_expand_dims(lay, data):
    nd = len(lay[0])
    dim = data.draw(st.integers(-nd - 1, nd))
    shape, strides = layout.unsqueeze(lay[0], lay[1], dim)
    check_view(lay, shape, strides, lay[2], np.expand_dims(array_of(lay), dim))
    if layout.is_contiguous(lay[0], lay[1]):
        assert layout.is_contiguous(shape, strides)


# -- indexing -----------------------------------------------------------------------------

def _dim_key(draw, n):
    kind = draw(st.sampled_from(["int", "slice", "slice"]))
    if kind == "int" and n > 0:
        return draw(st.integers(-n, n - 1))
    bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
    step = draw(st.one_of(st.none(), st.integers(-3, 3).filter(bool)))
    return slice(draw(bound), draw(bound), step)


def _with_nones(draw, entries):
    out = []
    for e in entries:
        if draw(st.integers(0, 4)) == 0:
            out.append(None)
        out.append(e)
    if draw(st.booleans()):
        out.append(None)
    return out


@st.composite
def basic_keys(draw, shape):
    """A key of ints, slices (any step, negative included), None and at most one
    Ellipsis, valid for ``shape``."""
    nd = len(shape)
    if draw(st.booleans()):
        # an Ellipsis standing for dims i..j-1; the entries after it cover the rest
        i = draw(st.integers(0, nd))
        j = draw(st.integers(i, nd))
        before = [_dim_key(draw, n) for n in shape[:i]]
        after = [_dim_key(draw, n) for n in shape[j:]]
        return tuple(_with_nones(draw, before) + [Ellipsis] + _with_nones(draw, after))
    k = draw(st.integers(0, nd))  # index only the first k dims
    return tuple(_with_nones(draw, [_dim_key(draw, n) for n in shape[:k]]))


@settings(max_examples=300, deadline=None)
@given(layouts(), st.data())
def test_index_matches_numpy_basic_indexing(lay, data):
    key = data.draw(basic_keys(lay[0]))
    expected = array_of(lay)[key]
    shape, strides, offset = layout.index(lay[0], lay[1], lay[2], key)
    check_view(lay, shape, strides, offset, expected)


def test_index_refuses_out_of_range_and_too_many():
    with pytest.raises(IndexError, match="out of bounds for dim 1 with size 3"):
        layout.index((2, 3), (3, 1), 0, (0, 3))
    with pytest.raises(IndexError, match="too many indices"):
        layout.index((2, 3), (3, 1), 0, (0, 0, 0))
    with pytest.raises(IndexError, match="single ellipsis"):
        layout.index((2, 3), (3, 1), 0, (Ellipsis, Ellipsis))
    with pytest.raises(ValueError, match="step cannot be zero"):
        layout.index((2, 3), (3, 1), 0, (slice(None, None, 0),))



@SETTINGS
@given(layouts(nonempty_shapes.filter(bool)), st.data())
def test_narrow_matches_slice(lay, data):
    nd = len(lay[0])
    dim = data.draw(st.integers(0, nd - 1))
    n = lay[0][dim]
    start = data.draw(st.integers(0, n))
    length = data.draw(st.integers(0, n - start))
    shape, strides, offset = layout.narrow(lay[0], lay[1], lay[2], dim, start, length)
    key = (slice(None),) * dim + (slice(start, start + length),)
    check_view(lay, shape, strides, offset, array_of(lay)[key])


@given(st.integers(0, 20), st.integers(1, 7))
def test_split_and_chunk_sizes(n, k):
    sizes = layout.split_sizes(n, k)
    assert sum(sizes) == n
    assert all(s == k for s in sizes[:-1]) and sizes[-1] <= k
    chunks = layout.chunk_sizes(n, k)
    assert sum(chunks) == n and len(chunks) <= max(k, 1)
    # torch.chunk: every chunk but the last has ceil(n / k) elements
    if n:
        assert all(c == -(-n // k) for c in chunks[:-1])


# -- as_strided bounds and overlap --------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=3).map(tuple), st.data(), st.integers(0, 30),
       st.integers(-3, 12))
def test_check_as_strided_refuses_exactly_the_out_of_range_layouts(shape, data, size,
                                                                   offset):
    strides = tuple(data.draw(st.integers(-4, 6)) for _ in shape)
    pos = positions(shape, strides, offset)
    inside = offset >= 0 and all(0 <= p < size for p in pos)
    if inside:
        layout.check_as_strided(size, shape, strides, offset)
    else:
        with pytest.raises(ValueError, match="as_strided"):
            layout.check_as_strided(size, shape, strides, offset)


def test_check_as_strided_refuses_mismatched_lengths():
    with pytest.raises(ValueError, match="same length"):
        layout.check_as_strided(10, (2, 2), (1,), 0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=4).map(tuple), st.data())
def test_is_non_overlapping_matches_brute_force(shape, data):
    strides = tuple(data.draw(st.integers(-7, 7)) for _ in shape)
    pos = positions(shape, strides, 100)
    assert layout.is_non_overlapping(shape, strides) == (len(set(pos)) == len(pos))


def test_element_position_and_normalize_dim():
    assert layout.element_position((1, 2), (4, -1), 10) == 12
    assert layout.normalize_dim(-1, 3) == 2
    assert layout.normalize_dim(0, 0) == 0  # a scalar accepts dim 0 and -1
    with pytest.raises(IndexError, match="out of range"):
        layout.normalize_dim(3, 3)
    with pytest.raises(ValueError, match="repeat"):
        layout.normalize_dims((0, -2), 2)


def test_reduced_dims_for_broadcast_gradients():
    # (3, 1) broadcast to (2, 3, 4): sum away the new leading dim, and dim 2 with keepdim
    assert layout.reduced_dims((3, 1), (2, 3, 4)) == ((0,), (2,))
    assert layout.reduced_dims((3,), (2, 3)) == ((0,), ())
    assert layout.reduced_dims((1, 3), (2, 3)) == ((), (0,))
    assert layout.reduced_dims((), (2, 3)) == ((0, 1), ())


@given(layouts(shape_st=nonempty_shapes))
@SETTINGS
def test_memory_order_lists_dims_by_falling_stride(lay):
    shape, strides, _, _ = lay
    order = layout.memory_order(shape, strides)
    assert sorted(order) == list(range(len(shape)))
    stepped = [abs(strides[d]) for d in order if shape[d] != 1]
    assert stepped == sorted(stepped, reverse=True)
    # a permuted contiguous layout is put back in the order it was made in
    perm = tuple(np.random.default_rng(len(shape)).permutation(len(shape)))
    c = layout.contiguous_strides(shape)
    got = layout.memory_order(tuple(shape[d] for d in perm), tuple(c[d] for d in perm))
    moved = [perm[d] for d in got if shape[perm[d]] != 1]
    assert moved == sorted(moved)


@settings(max_examples=200, deadline=None)
@given(layouts(allow_negative=True), st.data())
def test_a_slice_raw_view_is_its_layout_over_the_storage(lay, data):
    """x[key] on the CPU takes numpy's own indexing of x's raw view (Backend.index_view);
    that raw view must be exactly the slice's layout over the storage: same first
    element, shape and strides as make_view builds from the layout."""
    import haelixe as hx

    shape, strides, offset, size = lay
    base = hx.arange(size, dtype=hx.float32)
    x = base.as_strided(shape, strides, offset)
    key = data.draw(basic_keys(shape))
    y = x[key]
    want = y._be.make_view(y._storage, y.shape, y.strides, y.offset)
    np.testing.assert_array_equal(y.numpy(), np.asarray(x.numpy())[key])
    assert type(y._data) is np.ndarray  # a view (ints for every dim: 0-d), never a scalar
    assert y._data.shape == want.shape and y._data.strides == want.strides
    assert y._data.__array_interface__["data"][0] == want.__array_interface__["data"][0]
    if y.numel():  # writing through a view (0-d, from ints alone) writes the storage
        first = y[(0,) * y.ndim]
        assert type(first._data) is np.ndarray and first._data.ndim == 0
        before = float(base.numpy()[first.offset])
        first.add_(1.0)
        assert base.numpy()[first.offset] == before + 1.0


@settings(max_examples=150, deadline=None)
@given(layouts(allow_negative=True), st.data())
def test_a_permuted_raw_view_is_its_layout_over_the_storage(lay, data):
    """permute and transpose on the CPU take numpy's transpose of the raw view
    (Backend.permute_view); it must be make_view of the permuted layout."""
    import haelixe as hx

    shape, strides, offset, size = lay
    x = hx.arange(size, dtype=hx.float32).as_strided(shape, strides, offset)
    dims = tuple(data.draw(st.permutations(range(len(shape)))))
    for y in [x.permute(dims)] + ([x.transpose(0, -1)] if shape else []):
        want = y._be.make_view(y._storage, y.shape, y.strides, y.offset)
        assert type(y._data) is np.ndarray
        assert y._data.shape == want.shape
        if y.numel():
            assert y._data.strides == want.strides
            assert y._data.__array_interface__["data"][0] == \
                want.__array_interface__["data"][0]
    np.testing.assert_array_equal(x.permute(dims).numpy(), x.numpy().transpose(dims))
