"""scatter_reduce (sum, prod, mean, amax, amin; the input included or not) and scatter's
reduce='add' / 'multiply' against PyTorch: values over dtypes, duplicate indices, 0-size
and strided inputs, gradients (PyTorch's, and float64 gradcheck), bad inputs."""

import numpy as np
import pytest
import torch

import haelixe as hx
from haelixe.autograd import gradcheck
from haelixe.errors import OpError

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
_DTYPES = {"float32": (hx.float32, torch.float32), "float64": (hx.float64, torch.float64),
           "int64": (hx.int64, torch.int64), "int32": (hx.int32, torch.int32)}


def _case(rng, dtype, shape=(4, 5), index_shape=(6, 5), dim=0):
    """Input, index (with repeats) and src, values small enough for an exact prod."""
    x = rng.integers(-3, 4, shape).astype(dtype)
    src = rng.integers(-3, 4, index_shape).astype(dtype)
    index = rng.integers(0, shape[dim], index_shape)
    return x, index, src


def _both(x, dim, index, src, reduce, include_self, dtype_name="float64"):
    hd, td = _DTYPES[dtype_name]
    mine = hx.scatter_reduce(hx.tensor(x, dtype=hd), dim, hx.tensor(index), hx.tensor(
        src, dtype=hd), reduce, include_self=include_self)
    theirs = torch.scatter_reduce(torch.tensor(x, dtype=td), dim, torch.tensor(index),
                                  torch.tensor(src, dtype=td), reduce,
                                  include_self=include_self)
    return mine, theirs


@pytest.mark.parametrize("dtype_name", list(_DTYPES))
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_forward_matches_pytorch_with_repeated_indices(reduce, include_self, dtype_name):
    rng = np.random.default_rng(hash((reduce, include_self, dtype_name)) % 2**32)
    for dim in (0, 1):
        x, index, src = _case(rng, np.float64, index_shape=(6, 5) if dim == 0 else (4, 7),
                              dim=dim)
        mine, theirs = _both(x, dim, index, src, reduce, include_self, dtype_name)
        assert str(mine.dtype).split(".")[-1] == dtype_name
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-6)


def test_an_integer_mean_rounds_down_as_in_pytorch():
    mine, theirs = _both(np.zeros(2), 0, np.array([0, 0, 1]), np.array([-1., -2., -5.]),
                         "mean", False, "int64")
    assert mine.tolist() == theirs.tolist() == [-2, -5]


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin"])
def test_bool_matches_pytorch(reduce):
    x, index, src = [True, False, False], [1, 1, 2, 0], [True, False, False, False]
    mine = hx.tensor(x).scatter_reduce(0, hx.tensor(index), hx.tensor(src), reduce)
    theirs = torch.tensor(x).scatter_reduce(0, torch.tensor(index), torch.tensor(src), reduce)
    assert mine.tolist() == theirs.tolist()


def test_nan_propagates_through_amax_and_amin_as_in_pytorch():
    for reduce in ("amax", "amin"):
        mine, theirs = _both(np.array([1., 2., 3.]), 0, np.array([0, 0, 1]),
                             np.array([np.nan, 5., 6.]), reduce, True)
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_zero_size_and_strided_inputs(reduce):
    empty_index = np.zeros((0, 3), np.int64)
    mine, theirs = _both(np.ones((2, 3)), 0, empty_index, np.zeros((0, 3)), reduce, False)
    np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    mine, theirs = _both(np.ones((0, 3)), 0, empty_index, np.zeros((0, 3)), reduce, True)
    assert mine.shape == theirs.shape == (0, 3)
    rng = np.random.default_rng(3)
    x, src = rng.standard_normal((6, 8)), rng.standard_normal((8, 6))
    index = rng.integers(0, 3, (8, 6))
    hx_x, t_x = hx.tensor(x)[::2, 1::2], torch.tensor(x)[::2, 1::2]  # (3, 4), strided
    hx_s, t_s = hx.tensor(src).t()[:, :4], torch.tensor(src).t()[:, :4]  # transposed
    hx_i, t_i = hx.tensor(index).t()[:, :4], torch.tensor(index).t()[:, :4]
    mine = hx_x.scatter_reduce(0, hx_i, hx_s, reduce, include_self=False)
    theirs = t_x.scatter_reduce(0, t_i, t_s, reduce, include_self=False)
    np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-12)


def test_src_larger_than_the_index_is_read_over_the_index_only():
    mine, theirs = _both(np.zeros((3, 2)), 0, np.array([[0], [0]]),
                         np.arange(8.).reshape(4, 2), "sum", True)
    np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_gradients_equal_pytorchs_with_ties_and_zeros(reduce, include_self):
    rng = np.random.default_rng(7)
    x, index, src = _case(rng, np.float64)  # small integers: many ties and zeros
    grad = rng.standard_normal(x.shape)
    a, b = hx.tensor(x, requires_grad=True), hx.tensor(src, requires_grad=True)
    (hx.scatter_reduce(a, 0, hx.tensor(index), b, reduce, include_self=include_self)
     * hx.tensor(grad)).sum().backward()
    ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(src, requires_grad=True)
    (torch.scatter_reduce(ta, 0, torch.tensor(index), tb, reduce, include_self=include_self)
     * torch.tensor(grad)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_float64_gradcheck(reduce, include_self):
    rng = np.random.default_rng(11)
    # distinct values: amax / amin have no ties, so the gradient is the derivative
    x = hx.tensor(rng.permutation(12).reshape(3, 4) / 7.0 + 0.5, requires_grad=True)
    src = hx.tensor(rng.permutation(20).reshape(5, 4) / 9.0 + 0.3, requires_grad=True)
    index = hx.tensor(rng.integers(0, 3, (5, 4)))
    assert gradcheck(lambda a, b: a.scatter_reduce(0, index, b, reduce,
                                                   include_self=include_self), (x, src))


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_with_reduce_matches_pytorch_for_a_tensor_and_a_number(reduce):
    x, index, src = np.arange(1., 7.).reshape(2, 3), np.array([[0, 1, 0], [0, 0, 1]]), \
        np.array([[2., 3., 4.], [5., 6., 7.]])
    mine = hx.tensor(x).scatter(0, hx.tensor(index), hx.tensor(src), reduce=reduce)
    theirs = torch.tensor(x).scatter(0, torch.tensor(index), torch.tensor(src), reduce=reduce)
    np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
    mine = hx.tensor([1, 2, 3]).scatter(0, hx.tensor([0, 0, 2]), 3, reduce=reduce)
    theirs = torch.tensor([1, 2, 3]).scatter(0, torch.tensor([0, 0, 2]), 3, reduce=reduce)
    assert mine.tolist() == theirs.tolist() and mine.dtype == hx.int64
    inplace = hx.tensor(x)
    assert inplace.scatter_(0, hx.tensor(index), hx.tensor(src), reduce=reduce) is inplace
    np.testing.assert_array_equal(inplace.numpy(), theirs_full(x, index, src, reduce))


def theirs_full(x, index, src, reduce):
    return torch.tensor(x).scatter_(0, torch.tensor(index), torch.tensor(src),
                                    reduce=reduce).numpy()


def test_scatter_reduce_in_place_writes_into_the_input():
    x = hx.tensor([1., 2., 3.])
    assert x.scatter_reduce_(0, hx.tensor([2, 2]), hx.tensor([5., 7.]), "amax") is x
    assert x.tolist() == [1., 2., 7.]


def test_bad_inputs_raise_errors_naming_the_op():
    x, index, src = hx.zeros(3, 2), hx.tensor([[0, 1]]), hx.ones(1, 2)
    with pytest.raises(OpError, match="scatter_reduce: reduce must be one of sum, prod"):
        x.scatter_reduce(0, index, src, "max")
    with pytest.raises(OpError, match=r"scatter: reduce must be 'add' or 'multiply'"):
        x.scatter(0, index, src, reduce="max")
    with pytest.raises(IndexError, match="scatter_reduce"):
        x.scatter_reduce(0, hx.tensor([[0, 3]]), src, "sum")
    with pytest.raises(OpError, match=r"scatter_reduce: index of shape \(1, 3\) must be "
                                      r"no larger than the input \(3, 2\) outside dim 0"):
        x.scatter_reduce(0, hx.tensor([[0, 1, 0]]), hx.ones(1, 3), "sum")
    with pytest.raises(OpError, match="same number of dims"):
        x.scatter_reduce(0, hx.tensor([0, 1]), src, "sum")
    with pytest.raises(OpError, match=r"scatter_reduce: src has dtype float64 .* src.to"):
        x.scatter_reduce(0, index, src.double(), "sum")
    with pytest.raises(TypeError, match="scatter_reduce: index must be an integer"):
        x.scatter_reduce(0, index.float(), src, "sum")
    with pytest.raises(TypeError, match="scatter_reduce: src must be a tensor"):
        x.scatter_reduce(0, index, 1.0, "sum")
    with pytest.raises(TypeError, match="scatter_reduce: reduce='mean' is not supported "
                                        "on bool"):
        x.bool().scatter_reduce(0, index, src.bool(), "mean")
    with pytest.raises(IndexError, match="scatter_reduce"):
        x.scatter_reduce(2, index, src, "sum")


@pytest.mark.gpu
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_on_the_gpu_it_equals_pytorch(be, reduce, include_self):
    rng = np.random.default_rng(5)
    x, index, src = _case(rng, np.float32)
    a = hx.tensor(x, device="gpu", requires_grad=True)
    b = hx.tensor(src, device="gpu", requires_grad=True)
    out = a.scatter_reduce(0, hx.tensor(index, device="gpu"), b, reduce,
                           include_self=include_self)
    assert out.device.type == "gpu"
    out.sum().backward()
    ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(src, requires_grad=True)
    theirs = ta.scatter_reduce(0, torch.tensor(index), tb, reduce, include_self=include_self)
    theirs.sum().backward()
    np.testing.assert_allclose(out.detach().cpu().numpy(), theirs.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(a.grad.cpu().numpy(), ta.grad.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(b.grad.cpu().numpy(), tb.grad.numpy(), rtol=1e-6, atol=1e-6)
    ints = hx.tensor(x.astype(np.int32), device="gpu").scatter_reduce(
        0, hx.tensor(index, device="gpu"), hx.tensor(src.astype(np.int32), device="gpu"),
        reduce, include_self=include_self)
    t_ints = torch.tensor(x.astype(np.int32)).scatter_reduce(
        0, torch.tensor(index), torch.tensor(src.astype(np.int32)), reduce,
        include_self=include_self)
    assert ints.cpu().tolist() == t_ints.tolist()


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_a_captured_step_replays_with_new_values(reduce):
    index = hx.tensor([0, 0, 2])
    step = hx.capture(lambda x, s: x.scatter_reduce(0, index, s, reduce, include_self=False))
    for k in range(1, 4):
        x, s = hx.tensor([1., 2., 3.]) * k, hx.tensor([4., 5., 6.]) * k
        want = torch.tensor([1., 2., 3.]).mul(k).scatter_reduce(
            0, torch.tensor([0, 0, 2]), torch.tensor([4., 5., 6.]).mul(k), reduce,
            include_self=False)
        assert step(x, s).tolist() == want.tolist()


@pytest.mark.gpu
@pytest.mark.parametrize("reduce", ["prod", "amax", "amin"])
def test_on_the_gpu_a_captured_step_combines_on_the_device(be, reduce):
    """prod, amax and amin combine on the device for float32 and int32 (no read-back),
    so a captured GPU step takes them and replays with new values; a NaN wins a max or
    a min, as in PyTorch."""
    index = hx.tensor([[0, 0, 2, 2], [1, 1, 1, 0]], device="gpu")
    step = hx.capture(lambda x, s: x.scatter_reduce(1, index, s, reduce, include_self=False),
                      device="gpu")
    rng = np.random.default_rng(9)
    for k in range(3):
        x = rng.standard_normal((2, 3)).astype(np.float32)
        s = rng.standard_normal((4, 2)).astype(np.float32).T  # a transposed src
        if k == 2:
            s[0, 1] = np.nan
        got = step(hx.tensor(x, device="gpu"), hx.tensor(s, device="gpu"))
        want = torch.tensor(x).scatter_reduce(1, torch.tensor(index.cpu().numpy()),
                                              torch.tensor(s), reduce, include_self=False)
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("reduce", ["prod", "amax", "amin"])
def test_on_the_gpu_other_dtypes_combine_as_on_the_cpu(be, reduce):
    """bfloat16 max and min through a float32 copy (exact), a bfloat16 product and bool
    on the host; an int32 product wraps as PyTorch's does."""
    index = np.array([0, 1, 0, 2, 0, 0])
    src = np.array([3., -2., 0.5, 7., 1.5, -4.], np.float32)
    x = np.array([1., 2., 3.], np.float32)
    for dt, tdt in ((hx.bfloat16, torch.bfloat16), (hx.bool, torch.bool)):
        got = hx.tensor(x, device="gpu").to(dt).scatter_reduce(
            0, hx.tensor(index, device="gpu"), hx.tensor(src, device="gpu").to(dt), reduce,
            include_self=False)
        want = torch.tensor(x).to(tdt).scatter_reduce(
            0, torch.tensor(index), torch.tensor(src).to(tdt), reduce, include_self=False)
        assert got.dtype == dt and got.float().cpu().tolist() == want.float().tolist()
    big = np.full(6, 46341, np.int32)  # a product past int32's range
    got = hx.tensor(x.astype(np.int32), device="gpu").scatter_reduce(
        0, hx.tensor(index, device="gpu"), hx.tensor(big, device="gpu"), reduce)
    want = torch.tensor(x.astype(np.int32)).scatter_reduce(0, torch.tensor(index),
                                                           torch.tensor(big), reduce)
    assert got.cpu().tolist() == want.tolist()


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_zero_d_input_index_and_src_work_as_one_element_as_in_pytorch(request, device):
    """gather, scatter (a tensor or a number), scatter_add and every scatter_reduce on a
    0-d input with a 0-d index and src: PyTorch's values, 0-d results and gradients."""
    if device == "gpu":
        request.getfixturevalue("be")

    def results(lib, **on):
        x = lib.tensor(1.5, requires_grad=True, **on)
        s = lib.tensor(-2.0, requires_grad=True, **on)
        i = lib.tensor(0, **on)
        outs = [x.gather(0, i), x.scatter(-1, i, s), x.scatter(0, i, 5.0),
                x.scatter_add(0, i, s)]
        outs += [x.scatter_reduce(0, i, s, r, include_self=inc)
                 for r in REDUCTIONS for inc in (True, False)]
        sum(outs).backward()
        return ([tuple(o.shape) for o in outs], [o.detach().cpu().tolist() for o in outs],
                x.grad.cpu().tolist(), s.grad.cpu().tolist())

    assert results(hx, device=device) == results(torch)
