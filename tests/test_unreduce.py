"""Unreduce, a sum's gradient: at first order (Sum's backward, no node) a view of the
gradient over the input's shape, stride 0 along the summed dims, on the CPU and the GPU,
equal to numpy's broadcast of it; sums' gradients through it equal PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import haelixe as hx
from haelixe import layout
from haelixe.ops.reduce import Unreduce

# (input shape, summed dims, the gradient's shape: keepdim or not)
CASES = [((3, 4), (0, 1), ()), ((3, 4), (0,), (4,)), ((3, 4), (1,), (3, 1)),
         ((2, 3, 4), (0, 2), (3,)), ((), (), ()), ((0, 3), (0,), (3,)), ((2, 0), (1,), (2,))]


def _broadcast(g, shape, dims):
    return np.broadcast_to(g.reshape(layout.keep_shape(shape, dims)), shape)


def _first_order(g, shape, dims):
    """Sum's first-order gradient of ``g``: Unreduce run with no node recorded."""
    with hx.no_grad():
        return Unreduce.apply(g, shape, dims)


@pytest.mark.parametrize("shape,dims,gshape", CASES)
def test_cpu_view_equals_the_broadcast(shape, dims, gshape):
    g = np.arange(1, 1 + int(np.prod(gshape)), dtype=np.float32).reshape(gshape)
    want = _broadcast(g, shape, dims)
    t = hx.from_numpy(g)
    got = _first_order(t, shape, dims)
    assert got.shape == shape and got.dtype is hx.float32 and got.grad_fn is None
    np.testing.assert_array_equal(got.numpy(), want)
    assert got._storage is t._storage  # a view, no copy
    if g.ndim:  # a strided gradient (every other element of a wider array, at an offset)
        wide = hx.from_numpy(np.repeat(g, 2, axis=-1).copy())
        strided = wide[..., 1::2]
        np.testing.assert_array_equal(_first_order(strided, shape, dims).numpy(), want)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,dims,gshape", CASES)
def test_gpu_view_equals_the_broadcast(shape, dims, gshape):
    n = int(np.prod(gshape))
    full = np.arange(2 * n or 1, dtype=np.float32)
    g = hx.from_numpy(full).to("gpu")[1:1 + n].reshape(gshape)  # (an offset view)
    got = _first_order(g, shape, dims)
    assert got.shape == shape and got._storage is g._storage
    np.testing.assert_array_equal(got.cpu().numpy(), _broadcast(full[1:1 + n].reshape(gshape),
                                                                shape, dims))


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_sum_gradients_through_the_view_equal_pytorch(device):
    rng = np.random.default_rng(0)
    a0, b0 = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))

    def run(lib, a, b):
        y = a * b  # two sums' gradients meet at y's node, one reaches a directly
        return (y.sum() + 2 * y.sum() + y.sum(0).sum() + y.sum(1, keepdim=True).sum()
                + a.sum())

    a, b = (hx.tensor(v, device=device, requires_grad=True) for v in (a0, b0))
    run(hx, a, b).backward()
    ta, tb = (torch.tensor(v, requires_grad=True) for v in (a0, b0))
    run(torch, ta, tb).backward()
    for mine, ref in ((a, ta), (b, tb)):
        np.testing.assert_allclose(mine.grad.cpu().numpy(), ref.grad.numpy(), rtol=1e-6)
    a.grad = None
    a.sum().backward()
    a.grad.add_(1.0)  # the leaf's gradient is its own buffer, not the seed's view
    np.testing.assert_array_equal(a.grad.cpu().numpy(), np.full((3, 4), 2.0, np.float32))


def test_one_element_seen_everywhere_made_a_tensor_is_that_element_with_stride_0():
    """A raw array that shows one element over a shape (every stride 0 over a one-element
    buffer: a broadcast scalar) made a tensor: its views and gradients right."""
    seed = np.full((), 3.0, np.float32)
    t = hx.Tensor._wrap(np.ndarray((2, 3), np.float32, seed, 0, (0, 0)))
    assert t.shape == (2, 3) and t.strides == (0, 0) and t.offset == 0
    assert np.shares_memory(t._storage.data, seed)
    np.testing.assert_array_equal(t.numpy(), np.full((2, 3), 3.0, np.float32))
    np.testing.assert_array_equal(t[1:, ::2].t().numpy(), np.full((2, 1), 3.0, np.float32))
    # one element of another dtype under it (bytes reinterpreted) is not read this way
    wide = np.zeros((), np.float64)
    narrow = np.ndarray((2, 2), np.float32, wide, 0, (0, 0))
    np.testing.assert_array_equal(hx.Tensor._wrap(narrow).numpy(), np.zeros((2, 2)))

    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((3, 4)).astype(np.float32)
    x, tx = hx.tensor(x0, requires_grad=True), torch.tensor(x0, requires_grad=True)
    for v in (x, tx):
        (v.t()[1:] * 2.0).sum().backward()
        v.permute(1, 0).sum().backward()  # the permute's backward takes a tensor
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
