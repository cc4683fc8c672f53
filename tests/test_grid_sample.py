"""F.affine_grid and F.grid_sample against PyTorch: values and float64 gradients for the
image and the grid, over every mode, padding mode and corner convention."""

import numpy as np
import pytest

import haelixe as hx
from haelixe.errors import OpError
from haelixe.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 5, 4))
# points inside, on the edges and well outside the image
G = RNG.uniform(-1.4, 1.4, (2, 6, 7, 2))
G[0, 0, :3] = [[-1.0, 1.0], [1.0, -1.0], [0.0, 0.0]]


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_matches_pytorch(mode, padding_mode, align_corners):
    xt, gt = torch.tensor(X, requires_grad=True), torch.tensor(G, requires_grad=True)
    xh, gh = hx.tensor(X, requires_grad=True), hx.tensor(G, requires_grad=True)
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    ot, oh = TF.grid_sample(xt, gt, **kw), F.grid_sample(xh, gh, **kw)
    np.testing.assert_allclose(oh.detach().numpy(), ot.detach().numpy(), rtol=1e-12,
                               atol=1e-13)
    w = RNG.standard_normal(ot.shape)
    (ot * torch.tensor(w)).sum().backward()
    (oh * hx.tensor(w)).sum().backward()
    np.testing.assert_allclose(xh.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(gh.grad.numpy(), gt.grad.numpy(), rtol=1e-11, atol=1e-12)


def test_grid_sample_float32_strided_and_zero_size():
    x = X.astype(np.float32)[:, :, ::-1]  # (a negative stride)
    g = np.ascontiguousarray(G.astype(np.float32).transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    ours = F.grid_sample(hx.tensor(x.copy()).flip(2).flip(2), hx.tensor(g),
                         align_corners=False)
    theirs = TF.grid_sample(torch.tensor(x.copy()), torch.tensor(g), align_corners=False)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
    empty = F.grid_sample(hx.tensor(X), hx.tensor(np.zeros((2, 0, 3, 2))), align_corners=True)
    assert empty.shape == (2, 3, 0, 3)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.filterwarnings("ignore:Since version 1.3.0, affine_grid")  # (PyTorch's)
def test_affine_grid_matches_pytorch(align_corners):
    th = RNG.standard_normal((2, 2, 3))
    tt, thh = torch.tensor(th, requires_grad=True), hx.tensor(th, requires_grad=True)
    a = F.affine_grid(thh, (2, 3, 5, 4), align_corners=align_corners)
    b = TF.affine_grid(tt, (2, 3, 5, 4), align_corners=align_corners)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
    w = RNG.standard_normal(b.shape)
    (a * hx.tensor(w)).sum().backward()
    (b * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(thh.grad.numpy(), tt.grad.numpy(), rtol=1e-12)
    th3 = RNG.standard_normal((1, 3, 4))
    np.testing.assert_allclose(
        F.affine_grid(hx.tensor(th3), (1, 2, 3, 1, 4), align_corners=align_corners).numpy(),
        TF.affine_grid(torch.tensor(th3), (1, 2, 3, 1, 4), align_corners=align_corners).numpy(),
        rtol=1e-12, atol=1e-15)


def test_a_spatial_transformer_step_matches_pytorch():
    th = np.array([[[0.9, 0.1, 0.05], [-0.2, 1.1, 0.0]]] * 2)
    tt, thh = torch.tensor(th, requires_grad=True), hx.tensor(th, requires_grad=True)
    out_t = TF.grid_sample(torch.tensor(X), TF.affine_grid(tt, (2, 3, 6, 6),
                                                           align_corners=False),
                           align_corners=False)
    out_h = F.grid_sample(hx.tensor(X), F.affine_grid(thh, (2, 3, 6, 6), align_corners=False),
                          align_corners=False)
    out_t.square().sum().backward()
    out_h.square().sum().backward()
    np.testing.assert_allclose(out_h.detach().numpy(), out_t.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(thh.grad.numpy(), tt.grad.numpy(), rtol=1e-10)


def test_the_default_warns_as_pytorch_and_errors_name_the_op():
    x, g = hx.tensor(X), hx.tensor(G)
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        F.grid_sample(x, g)
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        F.affine_grid(hx.tensor(np.eye(2, 3)[None]), (1, 1, 2, 2))
    with pytest.raises(ValueError, match="expected mode to be"):
        F.grid_sample(x, g, mode="foo", align_corners=False)
    with pytest.raises(ValueError, match="padding_mode"):
        F.grid_sample(x, g, padding_mode="wrap", align_corners=False)
    with pytest.raises(OpError, match="size 2 in last dimension"):
        F.grid_sample(x, g[..., :1], align_corners=False)
    with pytest.raises(OpError, match="same batch size"):
        F.grid_sample(x, g[:1], align_corners=False)
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.grid_sample(x, g, mode="bicubic", align_corners=False)
    with pytest.raises(TypeError, match="floating point"):
        F.grid_sample(x.long(), g, align_corners=False)
    with pytest.raises(NotImplementedError, match="4D and 5D sizes"):
        F.affine_grid(hx.tensor(np.eye(2, 3)[None]), (1, 1, 3), align_corners=False)
    with pytest.raises(ValueError, match="Nx2x3"):
        F.affine_grid(hx.tensor(np.eye(3)[None]), (1, 1, 3, 3), align_corners=False)


@pytest.mark.gpu
def test_on_the_gpu_as_on_the_cpu():
    x, g = X.astype(np.float32), G.astype(np.float32)
    for padding_mode in ("zeros", "reflection"):
        outs = []
        for device in ("cpu", "gpu"):
            xh = hx.tensor(x, device=device, requires_grad=True)
            gh = hx.tensor(g, device=device, requires_grad=True)
            out = F.grid_sample(xh, gh, padding_mode=padding_mode, align_corners=False)
            out.sum().backward()
            outs.append([t.cpu().numpy() for t in (out.detach(), xh.grad, gh.grad)])
        for a, b in zip(*outs):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
