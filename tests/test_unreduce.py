"""Backend.unreduce, a sum's first-order gradient on raw arrays: the CPU's and the GPU's
views (stride 0 along the summed dims) equal the contract's composed default, which
copies the gradient out; and sums' gradients through it equal PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import haelixe as hx
from haelixe.backends.base import Backend
from haelixe.backends.cpu import CPU_BACKEND

# (input shape, summed dims, the gradient's shape: keepdim or not)
CASES = [((3, 4), (0, 1), ()), ((3, 4), (0,), (4,)), ((3, 4), (1,), (3, 1)),
         ((2, 3, 4), (0, 2), (3,)), ((), (), ()), ((0, 3), (0,), (3,)), ((2, 0), (1,), (2,))]


@pytest.mark.parametrize("shape,dims,gshape", CASES)
def test_cpu_view_equals_the_composed_default(shape, dims, gshape):
    g = np.arange(1, 1 + int(np.prod(gshape)), dtype=np.float32).reshape(gshape)
    got = CPU_BACKEND.unreduce(g, shape, dims)
    want = Backend.unreduce(CPU_BACKEND, g, shape, dims)
    assert got.shape == want.shape == shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    if g.size and got.size:
        assert np.shares_memory(got, g)  # a view, no copy
    if g.ndim:  # a strided gradient (every other element of a wider array)
        gs = np.repeat(g, 2, axis=-1)[..., ::2]
        np.testing.assert_array_equal(CPU_BACKEND.unreduce(gs, shape, dims), want)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,dims,gshape", CASES)
def test_gpu_view_equals_the_composed_default(shape, dims, gshape):
    from haelixe.backends.wgpu.backend import get_backend

    be = get_backend()
    full = np.arange(2 * int(np.prod(gshape)) or 1, dtype=np.float32)
    g = be.narrow(be.from_numpy(full), 0, 1, int(np.prod(gshape)))  # (an offset view)
    g = be.reshape(g, gshape)
    got = be.to_numpy(be.unreduce(g, shape, dims))
    want = be.to_numpy(Backend.unreduce(be, g, shape, dims))
    assert got.shape == want.shape == shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_sum_gradients_through_the_raw_view_equal_pytorch(device):
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


def test_a_full_sums_gradient_made_a_tensor_is_its_one_element_seen_everywhere():
    """A node that takes tensors after a full sum gets the unreduced seed as a tensor:
    one element, every stride 0, its views and gradients right."""
    seed = np.full((), 3.0, np.float32)
    t = hx.Tensor._wrap(CPU_BACKEND.unreduce(seed, (2, 3), (0, 1)))
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
