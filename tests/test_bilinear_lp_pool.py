"""nn.Bilinear and the LPPool layers against PyTorch's: values and gradients from the same
weights, PyTorch's initialisation bounds, and errors that name the op."""

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn
from haelixe.errors import OpError

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)


def test_bilinear_layer_matches_pytorch():
    ours, theirs = nn.Bilinear(3, 4, 2).double(), torch.nn.Bilinear(3, 4, 2).double()
    bound = 1 / np.sqrt(3)
    w = ours.weight.detach().numpy()
    assert w.shape == (2, 3, 4) and np.abs(w).max() <= bound and np.abs(w).max() > bound / 2
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
        theirs.bias.copy_(torch.tensor(ours.bias.detach().numpy()))
    a, b = RNG.standard_normal((5, 2, 3)), RNG.standard_normal((5, 2, 4))
    ah, bh = hx.tensor(a, requires_grad=True), hx.tensor(b, requires_grad=True)
    at, bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    yh, yt = ours(ah, bh), theirs(at, bt)
    np.testing.assert_allclose(yh.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    yh.square().sum().backward()
    yt.square().sum().backward()
    for g, t in ((ah.grad, at.grad), (bh.grad, bt.grad), (ours.weight.grad, theirs.weight.grad),
                 (ours.bias.grad, theirs.bias.grad)):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-11)
    assert repr(ours) == repr(theirs)
    assert nn.Bilinear(3, 4, 2, bias=False).bias is None
    with pytest.raises(OpError, match="bilinear"):
        ours(ah, bh[..., :3])


@pytest.mark.parametrize("layer, shape, args", [
    ("LPPool1d", (2, 3, 9), (2, 3)), ("LPPool1d", (3, 8), (1.5, 2, 3, True)),
    ("LPPool2d", (2, 3, 6, 7), (2, (2, 3))), ("LPPool2d", (2, 6, 7), (3, 2, 1, True)),
    ("LPPool3d", (1, 2, 4, 5, 6), (2, 2))])
def test_lp_pool_layers_match_pytorch(layer, shape, args):
    x = np.abs(RNG.standard_normal(shape)) + 0.1  # (positive: every norm_type is defined)
    xh, xt = hx.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours, theirs = getattr(nn, layer)(*args), getattr(torch.nn, layer)(*args)
    yh, yt = ours(xh), theirs(xt)
    np.testing.assert_allclose(yh.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    yh.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(xh.grad.numpy(), xt.grad.numpy(), rtol=1e-11)
    assert repr(ours) == repr(theirs)
