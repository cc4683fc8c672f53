"""ops/arranging.py against PyTorch: argwhere, take_along_dim, index_fill(_),
index_copy(_), tensor_split, hsplit/vsplit/dsplit, swapaxes/swapdims and their in-place
forms, msort, rot90, block_diag, cartesian_prod, combinations and vander: values and
dtypes on views, 0-d and 0-size inputs, float64 gradients, errors, and the GPU against the
CPU.

(tests/test_op_registry.py runs each over every dtype and layout as well.)"""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import gradcheck

torch = pytest.importorskip("torch")


def _pair(a, grad=False):
    h, t = hx.tensor(a), torch.tensor(a)
    if grad:
        h.requires_grad_()
        t.requires_grad_()
    return h, t


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.shape == tuple(want.shape), (got.shape, want.shape)
    assert got.dtype.name == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
    np.testing.assert_array_equal(got.detach().cpu().numpy(), want.detach().numpy())


def _grads_match(fh, ft, a, seed=0):
    h, t = _pair(a, grad=True)
    oh, ot = fh(h), ft(t)
    gy = np.random.default_rng(seed).standard_normal(tuple(ot.shape))
    oh.backward(hx.tensor(gy))
    ot.backward(torch.tensor(gy))
    np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def _arange(*shape):
    return np.arange(np.prod(shape, dtype=int), dtype=np.float64).reshape(shape) * 0.5 - 2.0


VIEWS = [lambda t: t, lambda t: t.transpose(0, 1), lambda t: t.flip(1),
         lambda t: t[:, 1:]]


# -- argwhere and take_along_dim -------------------------------------------------------------
@pytest.mark.parametrize("a", [np.array([[0, 1, 0], [2, 0, 3]]), np.array(0.0),
                               np.array(2.0), np.zeros((0, 3)), np.array([True, False, True])])
def test_argwhere_is_nonzero_with_pytorchs_shapes(a):
    h, t = _pair(a)
    _same(hx.argwhere(h), torch.argwhere(t))
    _same(h.argwhere(), t.argwhere())


@pytest.mark.parametrize("view", VIEWS)
def test_take_along_dim_picks_what_argsort_and_topk_index(view):
    h, t = _pair(np.random.default_rng(0).permutation(12).reshape(3, 4) * 1.0)
    h, t = view(h), view(t)
    for dim in (0, 1, -1):
        _same(hx.take_along_dim(h, hx.argsort(h, dim), dim),
              torch.take_along_dim(t, torch.argsort(t, dim), dim))
        _same(h.take_along_dim(h.argmax(dim, keepdim=True), dim),
              t.take_along_dim(t.argmax(dim, keepdim=True), dim))
    _same(hx.take_along_dim(h, hx.tensor([5, 0, 5])), torch.take_along_dim(
        t.contiguous(), torch.tensor([5, 0, 5])))


@pytest.mark.parametrize("xshape,ishape,dim", [((3, 4), (1, 2), 1), ((3, 1), (1, 2), 1),
                                               ((1, 4), (3, 1), 1), ((2, 3, 4), (2, 1, 4), 1),
                                               ((3, 4), (0, 4), 0)])
def test_take_along_dim_broadcasts_the_other_dims_with_gradients(xshape, ishape, dim):
    r = np.random.default_rng(1)
    idx = r.integers(0, xshape[dim], ishape)
    _grads_match(lambda x: hx.take_along_dim(x, hx.tensor(idx), dim),
                 lambda x: torch.take_along_dim(x, torch.tensor(idx), dim),
                 r.standard_normal(xshape))


def test_take_along_dim_with_no_dim_reads_the_flattened_input():
    h, t = _pair(_arange(2, 3))
    idx = np.array([[5, 0], [0, 3]])
    _same(hx.take_along_dim(h, hx.tensor(idx)), torch.take_along_dim(t, torch.tensor(idx)))
    _same(hx.take_along_dim(h, hx.tensor(idx, dtype=hx.int32)),
          torch.take_along_dim(t, torch.tensor(idx, dtype=torch.int32)))
    _same(hx.take_along_dim(hx.tensor(3.0), hx.tensor(0)),
          torch.take_along_dim(torch.tensor(3.0), torch.tensor(0)))
    # (PyTorch's view(-1) refuses a transposed input here; Haelixe reshapes it)
    np.testing.assert_array_equal(hx.take_along_dim(h.mT, hx.tensor([1])).numpy(),
                                  h.mT.reshape(-1).numpy()[[1]])


@pytest.mark.parametrize("call,error,match", [
    (lambda m, x: m.take_along_dim(x, m.tensor([[0]], dtype=m.int32), 1), RuntimeError,
     "index must be int64"),
    (lambda m, x: m.take_along_dim(x, m.tensor([0]), 1), RuntimeError,
     "same number of dims"),
    (lambda m, x: m.take_along_dim(x, m.tensor([[0], [1]]), 1), RuntimeError,
     "cannot be broadcast"),
    (lambda m, x: m.take_along_dim(x, m.tensor([[0]]), 2), IndexError, "out of range"),
    (lambda m, x: m.take_along_dim(x[0, 0], m.tensor(0), 0), IndexError, "a 0-d input"),
])
def test_take_along_dim_refuses_what_pytorch_refuses(call, error, match):
    with pytest.raises(error):
        call(torch, torch.ones(3, 4))
    with pytest.raises(error, match=f"take_along_dim: .*{match}"):
        call(hx, hx.ones(3, 4))


def test_take_along_dim_refuses_an_index_outside_the_dim():
    with pytest.raises(IndexError, match="gather: index 4 is out of bounds for dim 1"):
        hx.take_along_dim(hx.ones(3, 4), hx.tensor([[4]]), 1)


# -- index_fill ------------------------------------------------------------------------------
@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("dim,index,value", [(1, [0, 2], 1.5), (0, [-1], -3.0), (1, 1, 7),
                                             (-1, [1, 1, 0], True), (0, [], 2.0)])
def test_index_fill_matches_pytorch(view, dim, index, value):
    h, t = _pair(_arange(3, 4))
    hi = hx.tensor(index, dtype=hx.int64)
    ti = torch.tensor(index, dtype=torch.int64)
    _same(view(h).index_fill(dim, hi, value), view(t).index_fill(dim, ti, value))
    _same(hx.index_fill(view(h), dim, hi, value), torch.index_fill(view(t), dim, ti, value))
    hv, tv = view(h).clone(), view(t).clone()
    assert hv.index_fill_(dim, hi, value) is hv
    _same(hv, tv.index_fill_(dim, ti, value))


@pytest.mark.parametrize("dtype,value", [("int64", 7.5), ("int64", hx.tensor(7.9)),
                                         ("float32", hx.tensor(2, dtype=hx.int64)),
                                         ("float32", hx.tensor(2.5, dtype=hx.float64)),
                                         ("bool", 0), ("uint8", 3)])
def test_index_fill_writes_the_value_in_the_inputs_dtype(dtype, value):
    a = np.array([[1, 0, 2], [3, 1, 0]]).astype(dtype)
    tvalue = torch.tensor(value.item(), dtype=getattr(torch, value.dtype.name)) \
        if isinstance(value, hx.Tensor) else value
    _same(hx.tensor(a).index_fill(1, hx.tensor([2]), value),
          torch.tensor(a).index_fill(1, torch.tensor([2]), tvalue))


def test_index_fill_of_a_0d_tensor():
    for dim, index in ((0, [0]), (-1, [-1]), (0, 0)):
        _same(hx.tensor(3.0).index_fill(dim, hx.tensor(index), 1.0),
              torch.tensor(3.0).index_fill(dim, torch.tensor(index), 1.0))


def test_index_fill_gradients_reach_the_input_and_a_tensor_value():
    a = _arange(3, 4)
    # (not a negative index: PyTorch's gradient of the value then fails)
    for index in ([1, 1, 3], [0], [2, 0]):
        h, t = _pair(a, grad=True)
        hv, tv = _pair(np.array(2.0), grad=True)
        oh = h.index_fill(1, hx.tensor(index), hv * 1.0)
        ot = t.index_fill(1, torch.tensor(index), tv * 1.0)
        gy = np.random.default_rng(2).standard_normal((3, 4))
        oh.backward(hx.tensor(gy))
        ot.backward(torch.tensor(gy))
        np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(hv.grad.numpy(), tv.grad.numpy(), rtol=1e-12)


def test_index_fill_in_place_records_the_fill():
    a = _arange(3, 4)
    h, t = _pair(a, grad=True)
    yh, yt = h * 2.0, t * 2.0
    yh.index_fill_(0, hx.tensor([1]), 0.5)
    yt.index_fill_(0, torch.tensor([1]), 0.5)
    (yh * yh).sum().backward()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy())
    # a tensor value that requires grad makes the target require it, as PyTorch's
    v = hx.tensor(2.0, requires_grad=True)
    z = hx.zeros(3)
    z.index_fill_(0, hx.tensor([1, 2]), v)
    assert z.requires_grad
    z.sum().backward()
    assert v.grad.item() == 2.0
    with pytest.raises(RuntimeError, match="index_fill_: a leaf tensor that requires grad"):
        hx.ones(3, requires_grad=True).index_fill_(0, hx.tensor([1]), 1.0)


@pytest.mark.parametrize("call,error,match", [
    (lambda m: m.ones(3, 4).index_fill(1, m.tensor([4]), 0.0), IndexError,
     "index 4 is out of range"),
    (lambda m: m.ones(3, 4).index_fill(1, m.tensor([-5]), 0.0), IndexError,
     "index -5 is out of range"),
    (lambda m: m.ones(3, 4).index_fill(1, m.tensor([1], dtype=m.int32), 0.0), IndexError,
     "index must be int64"),
    (lambda m: m.ones(3, 4).index_fill(1, m.tensor([[1]]), 0.0), RuntimeError, "0-D or 1-D"),
    (lambda m: m.ones(3, 4).index_fill(1, m.tensor([1]), m.ones(1)), RuntimeError,
     "value must be a number or a 0-d tensor"),
    (lambda m: m.ones(3, 4).index_fill(2, m.tensor([1]), 0.0), IndexError, "out of range"),
])
def test_index_fill_refuses_what_pytorch_refuses(call, error, match):
    with pytest.raises(error):
        call(torch)
    with pytest.raises(error, match=f"index_fill: .*{match}"):
        call(hx)


# -- index_copy ------------------------------------------------------------------------------
@pytest.mark.parametrize("view", VIEWS[:3])
@pytest.mark.parametrize("dim,index", [(1, [2, 0]), (0, [2, 0, 1]), (1, [2]), (-2, [1]),
                                       (1, [])])
def test_index_copy_matches_pytorch(view, dim, index):
    x = view(hx.tensor(_arange(3, 4)))
    tx = view(torch.tensor(_arange(3, 4)))
    n = len(index)
    shape = list(x.shape)
    shape[dim] = n
    src = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) * 10
    hi, ti = hx.tensor(index, dtype=hx.int64), torch.tensor(index, dtype=torch.int64)
    _same(x.index_copy(dim, hi, hx.tensor(src)), tx.index_copy(dim, ti, torch.tensor(src)))
    _same(hx.index_copy(x, dim, hi, hx.tensor(src).mT.mT),
          torch.index_copy(tx, dim, ti, torch.tensor(src)))
    hc, tc = x.clone(), tx.clone()
    assert hc.index_copy_(dim, hi, hx.tensor(src)) is hc
    _same(hc, tc.index_copy_(dim, ti, torch.tensor(src)))


def test_index_copy_of_repeated_positions_keeps_the_last_and_grads_every_slice():
    _same(hx.zeros(5).index_copy(0, hx.tensor([1, 1, 1]), hx.tensor([1.0, 2.0, 3.0])),
          torch.zeros(5).index_copy(0, torch.tensor([1, 1, 1]), torch.tensor([1.0, 2, 3])))
    for index in ([1, 1, 3], [3, 0, 2], [0, 0, 0]):
        h, t = _pair(_arange(3, 4), grad=True)
        hs, ts = _pair(_arange(3, 3) + 10, grad=True)
        oh = h.index_copy(1, hx.tensor(index), hs)
        ot = t.index_copy(1, torch.tensor(index), ts)
        gy = np.random.default_rng(3).standard_normal((3, 4))
        oh.backward(hx.tensor(gy))
        ot.backward(torch.tensor(gy))
        np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(hs.grad.numpy(), ts.grad.numpy(), rtol=1e-12)


def test_index_copy_scalar_forms():
    cases = [((), (), [0]), ((), (1,), [0]), ((2,), (), [1]), ((3,), (), 2)]
    for xs, ss, index in cases:
        got = hx.full(xs, 3.0).index_copy(0, hx.tensor(index), hx.full(ss, 5.0))
        want = torch.full(xs, 3.0).index_copy(0, torch.tensor(index), torch.full(ss, 5.0))
        _same(got, want)


def test_index_copy_in_place_with_a_source_that_requires_grad():
    s = hx.tensor([[1.0, 2.0]], requires_grad=True)
    z = hx.zeros(3, 2)
    z.index_copy_(0, hx.tensor([2]), s)
    assert z.requires_grad and z.grad_fn is not None
    (z * hx.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])).sum().backward()
    np.testing.assert_array_equal(s.grad.numpy(), [[5.0, 6.0]])
    with pytest.raises(RuntimeError, match="index_copy_: a leaf tensor that requires grad"):
        hx.ones(3, requires_grad=True).index_copy_(0, hx.tensor([1]), hx.ones(1))


@pytest.mark.parametrize("call,error,match", [
    (lambda m, s: m.ones(3, 4).index_copy(1, m.tensor([-1, 0]), s), IndexError,
     "index -1 is out of range"),
    (lambda m, s: m.ones(3, 4).index_copy(1, m.tensor([4, 0]), s), IndexError,
     "index 4 is out of range"),
    (lambda m, s: m.ones(3, 4).index_copy(1, m.tensor([3, 0], dtype=m.int32), s),
     RuntimeError, "index must be int64"),
    (lambda m, s: m.ones(3, 4).index_copy(1, m.tensor([3]), s), IndexError,
     "1 indices for source's dim 1 of size 2"),
    (lambda m, s: m.ones(3, 4).index_copy(1, m.tensor([3, 0]), s[:2]), RuntimeError,
     "must match outside dim 1"),
    (lambda m, s: m.ones(3, 4).index_copy(1, m.tensor([3, 0]), s.reshape(-1)), IndexError,
     "same number of dims"),
    (lambda m, s: m.ones(3, 4).index_copy(1, m.tensor([3, 0]), s.double()), RuntimeError,
     "source has dtype float64"),
    (lambda m, s: m.ones(3, 4).index_copy(1, m.tensor([[3, 0]]), s), IndexError, "0-D or 1-D"),
])
def test_index_copy_refuses_what_pytorch_refuses(call, error, match):
    with pytest.raises(error):
        call(torch, torch.ones(3, 2))
    with pytest.raises(error, match=f"index_copy: .*{match}"):
        call(hx, hx.ones(3, 2))


# -- splitting -------------------------------------------------------------------------------
SPLITS = [3, 1, 7, 2, [2], [-2], [3, 1, 4], [2, 9], [-9, 2], [], (2, 5)]


@pytest.mark.parametrize("spec", SPLITS, ids=[str(s) for s in SPLITS])
def test_tensor_split_pieces_are_pytorchs(spec):
    h, t = _pair(_arange(2, 5))
    for dim in (1, -1):
        _same(hx.tensor_split(h, spec, dim), torch.tensor_split(t, spec, dim))
        _same(h.tensor_split(spec, dim=dim), t.tensor_split(spec, dim=dim))
    _same(hx.tensor_split(h.mT, spec), torch.tensor_split(t.mT, spec))


def test_tensor_split_takes_int64_tensors_and_gives_views_with_gradients():
    h, t = _pair(_arange(7))
    for spec in (2, [2, 4]):
        _same(hx.tensor_split(h, hx.tensor(spec)), torch.tensor_split(t, torch.tensor(spec)))
    pieces = hx.tensor_split(h, 3)
    assert all(p.storage is h.storage for p in pieces)
    _grads_match(lambda x: hx.tensor_split(x, [1, 3], 1)[1] * 2.0,
                 lambda x: torch.tensor_split(x, [1, 3], 1)[1] * 2.0, _arange(3, 5))


@pytest.mark.parametrize("call,error,match", [
    (lambda m: m.tensor_split(m.arange(7), 0), RuntimeError, "larger than 0, got 0"),
    (lambda m: m.tensor_split(m.arange(7), -1), RuntimeError, "larger than 0, got -1"),
    (lambda m: m.tensor_split(m.tensor(1.0), 1), RuntimeError, "at least one dim"),
    (lambda m: m.tensor_split(m.arange(7), m.tensor([2.0])), RuntimeError, "must be int64"),
    (lambda m: m.tensor_split(m.arange(7), m.tensor([[2]])), RuntimeError, "0-D or 1-D"),
    (lambda m: m.tensor_split(m.arange(7), 2, 1), IndexError, "out of range"),
])
def test_tensor_split_refuses_what_pytorch_refuses(call, error, match):
    with pytest.raises(error):
        call(torch)
    with pytest.raises(error, match=f"tensor_split: .*{match}"):
        call(hx)


@pytest.mark.parametrize("name,shape,spec", [
    ("hsplit", (6,), 3), ("hsplit", (2, 6), 2), ("hsplit", (2, 6, 1), [1, 4]),
    ("vsplit", (4, 3), 2), ("vsplit", (4, 3), [3]), ("dsplit", (1, 2, 6), 3),
    ("dsplit", (2, 1, 4, 2), [1, -1])])
def test_hsplit_vsplit_dsplit_split_pytorchs_dim(name, shape, spec):
    h, t = _pair(_arange(*shape))
    _same(getattr(hx, name)(h, spec), getattr(torch, name)(t, spec))
    _same(getattr(h, name)(spec), getattr(t, name)(spec))


@pytest.mark.parametrize("name,shape,spec,match", [
    ("hsplit", (), 1, "at least 1 dim"), ("vsplit", (6,), 2, "at least 2 dims"),
    ("dsplit", (2, 3), 1, "at least 3 dims"), ("hsplit", (1, 6), 4, "not divisible by 4"),
    ("hsplit", (1, 6), 0, "not divisible by 0"), ("vsplit", (5, 1), 2, "not divisible")])
def test_hsplit_vsplit_dsplit_refuse_what_pytorch_refuses(name, shape, spec, match):
    with pytest.raises(RuntimeError):
        getattr(torch, name)(torch.ones(shape), spec)
    with pytest.raises(RuntimeError, match=f"{name}: .*{match}"):
        getattr(hx, name)(hx.ones(shape), spec)


# -- swapaxes and swapdims ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["swapaxes", "swapdims"])
def test_swapaxes_and_swapdims_are_transposes_under_pytorchs_names(name):
    h, t = _pair(_arange(2, 3, 4))
    names = ("axis0", "axis1") if name == "swapaxes" else ("dim0", "dim1")
    for a, b in ((0, 2), (-1, 1), (1, 1)):
        _same(getattr(hx, name)(h, a, b), getattr(torch, name)(t, a, b))
        _same(getattr(h, name)(**dict(zip(names, (a, b)))),
              getattr(t, name)(**dict(zip(names, (a, b)))))
    assert getattr(h, name)(0, 2).storage is h.storage


@pytest.mark.parametrize("name", ["swapaxes_", "swapdims_"])
def test_in_place_swap_changes_the_layout_and_records_a_transpose(name):
    a = _arange(2, 3)
    x = hx.tensor(a)
    before = x._version
    assert getattr(x, name)(0, 1) is x
    assert x.shape == (3, 2) and x.strides == (1, 3) and x._version == before + 1
    np.testing.assert_array_equal(x.numpy(), a.T)
    h, t = _pair(a, grad=True)
    yh, yt = h * 1.0, t * 1.0
    getattr(yh, name)(0, 1)
    getattr(yt, name)(0, 1)
    w = np.arange(6.0).reshape(3, 2)
    (yh * hx.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(h.grad.numpy(), t.grad.numpy())
    base = hx.tensor(a)
    view = base[0:1]
    getattr(view, name)(0, 1)
    assert view.shape == (3, 1) and view._base is base
    with pytest.raises(RuntimeError, match=f"{name}: a leaf tensor that requires grad"):
        getattr(hx.ones(2, 3, requires_grad=True), name)(0, 1)


def test_an_in_place_swap_of_a_saved_tensor_fails_its_backward_as_pytorchs():
    x = hx.ones(2, 3, requires_grad=True)
    w = x * 1.0
    z = w * w
    w.swapaxes_(0, 1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


# -- msort and rot90 -------------------------------------------------------------------------
@pytest.mark.parametrize("a", [np.array([[3.0, 1.0], [1.0, 5.0], [2.0, -1.0]]),
                               np.array([3.0, 1.0, 2.0]), np.array(2.0), np.zeros((0, 2))])
def test_msort_sorts_along_dim_0(a):
    h, t = _pair(a)
    _same(hx.msort(h), torch.msort(t))
    _same(h.mT.msort() if a.ndim == 2 else h.msort(), t.mT.msort() if a.ndim == 2 else
          t.msort())
    if a.size:
        _grads_match(hx.msort, torch.msort, a)


@pytest.mark.parametrize("k", [-5, -1, 0, 1, 2, 3, 4, 6])
@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (-1, 0), (0, 2), [2, 1]])
def test_rot90_matches_pytorch_with_gradients(k, dims):
    h, t = _pair(_arange(2, 3, 4))
    _same(hx.rot90(h, k, dims), torch.rot90(t, k, dims))
    _same(h.rot90(k, dims), t.rot90(k, dims))
    _grads_match(lambda x: x.rot90(k, dims), lambda x: x.rot90(k, dims), _arange(2, 3, 4))
    assert hx.rot90(h, 0, dims).storage is not h.storage  # (a copy, as PyTorch's)
    _same(hx.rot90(h), torch.rot90(t))


@pytest.mark.parametrize("shape,dims,error,match", [
    ((3,), (0, 1), RuntimeError, "at least 2 dims"), ((2, 3), (0, 0), RuntimeError,
                                                        "two different dims"),
    ((2, 3), (0, -2), RuntimeError, "two different dims"),
    ((2, 3), (0, 1, 1), RuntimeError, "must name 2 dims"),
    ((2, 3), (0, 2), IndexError, "out of range")])
def test_rot90_refuses_what_pytorch_refuses(shape, dims, error, match):
    with pytest.raises(error):
        torch.rot90(torch.ones(shape), 1, dims)
    with pytest.raises(error, match=f"rot90: .*{match}"):
        hx.rot90(hx.ones(shape), 1, dims)


# -- block_diag, cartesian_prod, combinations, vander ---------------------------------------
@pytest.mark.parametrize("parts", [
    [np.ones((2, 2)), np.arange(3.0), np.array(5.0)], [np.arange(6).reshape(2, 3)],
    [np.zeros(0), np.array([[1, 2]])], [np.zeros((0, 3)), np.array([[1.0, 2.0]])],
    [np.array([True]), np.array([[False, True]])],
    [np.array(2, np.int32), np.array([1.5, 2.0], np.float32)],
    [np.array(2.0), np.array([1, 2], np.int8)], [np.array(2.0), np.array([1.0, 2.0],
                                                                         np.float32)]])
def test_block_diag_matches_pytorch(parts):
    _same(hx.block_diag(*[hx.tensor(p) for p in parts]),
          torch.block_diag(*[torch.tensor(p) for p in parts]))


def test_block_diag_with_nothing_and_its_gradients():
    _same(hx.block_diag(), torch.block_diag())
    r = np.random.default_rng(4)
    a, b = r.standard_normal((2, 3)), r.standard_normal(2)
    ha, ta = _pair(a, grad=True)
    hb, tb = _pair(b, grad=True)
    oh, ot = hx.block_diag(ha.mT, hb, ha[0, 0]), torch.block_diag(ta.mT, tb, ta[0, 0])
    gy = r.standard_normal(tuple(ot.shape))
    oh.backward(hx.tensor(gy))
    ot.backward(torch.tensor(gy))
    np.testing.assert_allclose(ha.grad.numpy(), ta.grad.numpy())
    np.testing.assert_allclose(hb.grad.numpy(), tb.grad.numpy())
    with pytest.raises(RuntimeError, match="block_diag: the tensors must have at most 2"):
        hx.block_diag(hx.ones(1, 1, 1))
    with pytest.raises(TypeError, match="block_diag: expected tensors, argument 1"):
        hx.block_diag(hx.ones(2), 3)


def test_cartesian_prod_matches_pytorch_with_gradients():
    parts = [np.array([1, 2]), np.array([3, 4, 5]), np.array([7])]
    for n in (2, 3):
        _same(hx.cartesian_prod(*[hx.tensor(p) for p in parts[:n]]),
              torch.cartesian_prod(*[torch.tensor(p) for p in parts[:n]]))
    one = hx.tensor([1.0, 2.0])
    assert hx.cartesian_prod(one) is one
    _same(hx.cartesian_prod(hx.tensor([1, 2]), hx.tensor([], dtype=hx.int64)),
          torch.cartesian_prod(torch.tensor([1, 2]), torch.tensor([], dtype=torch.long)))
    ha, ta = _pair(np.array([0.5, -1.0, 2.0]), grad=True)
    oh, ot = hx.cartesian_prod(ha, ha[:2] * 3.0), torch.cartesian_prod(ta, ta[:2] * 3.0)
    gy = np.random.default_rng(5).standard_normal((6, 2))
    oh.backward(hx.tensor(gy))
    ot.backward(torch.tensor(gy))
    np.testing.assert_allclose(ha.grad.numpy(), ta.grad.numpy())


@pytest.mark.parametrize("call,match", [
    (lambda m: m.cartesian_prod(m.tensor([1, 2]), m.tensor([3.0])), "one dtype"),
    (lambda m: m.cartesian_prod(m.tensor([[1, 2]]), m.tensor([3])), "1-D tensors"),
    (lambda m: m.cartesian_prod(m.tensor(1), m.tensor([3])), "1-D tensors"),
    (lambda m: m.cartesian_prod(), "at least one tensor")])
def test_cartesian_prod_refuses_what_pytorch_refuses(call, match):
    with pytest.raises(RuntimeError):
        call(torch)
    with pytest.raises(RuntimeError, match=f"cartesian_prod: .*{match}"):
        call(hx)


@pytest.mark.parametrize("n", [0, 1, 3, 4])
@pytest.mark.parametrize("r", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("with_replacement", [False, True])
def test_combinations_match_pytorch(n, r, with_replacement):
    h, t = _pair(np.arange(n) * 2 + 1)
    _same(hx.combinations(h, r, with_replacement),
          torch.combinations(t, r, with_replacement))
    _same(hx.combinations(h, r=r, with_replacement=with_replacement),
          torch.combinations(t, r=r, with_replacement=with_replacement))


def test_combinations_gradient_adds_up_over_repeats():
    _grads_match(lambda x: hx.combinations(x, 3, True), lambda x: torch.combinations(x, 3, True),
                 np.array([0.5, -1.0, 2.0, 3.0]))
    for bad in (lambda m: m.combinations(m.ones(2, 2)), lambda m: m.combinations(m.ones(2), -1),
                lambda m: m.combinations(m.tensor(1.0))):
        with pytest.raises(RuntimeError):
            bad(torch)
        with pytest.raises(RuntimeError, match="combinations: "):
            bad(hx)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int8", "uint8", "bool",
                                   "float16"])
@pytest.mark.parametrize("N", [None, 0, 1, 2, 5])
@pytest.mark.parametrize("increasing", [False, True])
def test_vander_matches_pytorch(dtype, N, increasing):
    a = np.array([1, 2, 0, 3]).astype(dtype)
    _same(hx.vander(hx.tensor(a), N, increasing), torch.vander(torch.tensor(a), N, increasing))
    _same(hx.vander(hx.tensor(a[::2]), N=N, increasing=increasing),
          torch.vander(torch.tensor(a[::2]), N=N, increasing=increasing))


def test_vander_gradient_is_that_of_the_powers():
    # (PyTorch's own vander cannot backward: it writes into what its cumprod saved; its
    # powers x ** k have the same derivative)
    a = np.array([0.5, -1.5, 0.0, 2.0])

    def powers(x):
        return torch.stack([x ** k for k in range(4, -1, -1)], 1)

    _grads_match(lambda x: hx.vander(x, 5), powers, a)
    assert gradcheck(lambda x: hx.vander(x, 4, increasing=True),
                     (hx.tensor(a, requires_grad=True),))
    _same(hx.vander(hx.zeros(0)), torch.vander(torch.zeros(0)))
    for bad in (lambda m: m.vander(m.ones(2, 2)), lambda m: m.vander(m.ones(2), N=-1),
                lambda m: m.vander(m.tensor(2.0))):
        with pytest.raises(RuntimeError):
            bad(torch)
        with pytest.raises(RuntimeError, match="vander: "):
            bad(hx)


# -- the GPU against the CPU -----------------------------------------------------------------
GPU_CASES = {
    "argwhere": lambda x: hx.argwhere(x > 0).float(),
    "take_along_dim": lambda x: hx.take_along_dim(x, x.argsort(1), 1),
    "index_fill": lambda x: x.index_fill(1, hx.tensor([0, -1], device=x.device), 2.0),
    "index_copy": lambda x: x.index_copy(0, hx.tensor([2, 0], device=x.device), x[:2] * 2.0),
    "tensor_split": lambda x: x.tensor_split([1, 3], 1)[1] * 1.0,
    "swapaxes": lambda x: x.swapaxes(0, 1) * 1.0,
    "msort": lambda x: x.msort(),
    "rot90": lambda x: x.rot90(-1),
    "block_diag": lambda x: hx.block_diag(x, x[0]),
    "cartesian_prod": lambda x: hx.cartesian_prod(x[0], x[1]),
    "combinations": lambda x: hx.combinations(x[0], 2, True),
    "vander": lambda x: hx.vander(x[0], 3),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GPU_CASES))
def test_arranging_ops_on_the_gpu_match_the_cpu(be, name):
    a = np.random.default_rng(7).standard_normal((3, 4)).astype(np.float32)
    f = GPU_CASES[name]
    cpu = hx.tensor(a, requires_grad=True)
    gpu = hx.tensor(a, device="gpu", requires_grad=True)
    yc, yg = f(cpu), f(gpu)
    assert yg.device.type == "gpu" and yg.shape == yc.shape
    np.testing.assert_allclose(yg.detach().cpu().numpy(), yc.detach().numpy(), rtol=3e-5,
                               atol=3e-5)
    if yc.requires_grad:
        yc.sum().backward()
        yg.sum().backward()
        np.testing.assert_allclose(gpu.grad.cpu().numpy(), cpu.grad.numpy(), rtol=3e-5,
                                   atol=3e-5)
