"""In-place ops on the output of a convolution or a pool while autograd records (a
model's nn.ReLU(inplace=True) after nn.Conv2d): gradients as PyTorch's."""

import numpy as np
import pytest

import haelixe as hx
from haelixe.nn import functional as F

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("pool", [False, True])
def test_relu_in_place_after_conv_and_pool_matches_pytorch(pool):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 1, 9, 9)), rng.standard_normal((3, 1, 3, 3))
    grads = []
    for lib, fn in ((hx, F), (torch, torch.nn.functional)):
        xt, wt = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = fn.conv2d(xt, wt)
        if pool:
            y = fn.max_pool2d(y, 2)
        assert y._base is None if lib is hx else True  # (its own tensor, not a view)
        fn.relu(y, inplace=True)
        (y * y).sum().backward()
        grads.append((y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_a_view_of_an_input_stays_a_view():
    x = hx.ones(2, 3, requires_grad=True) * 1.0
    v = x.reshape(3, 2)
    assert v._base is not None
    v.relu_()  # (recorded on its base, as PyTorch's CopySlices)
    assert x.grad_fn is not None and v.grad_fn is not None
