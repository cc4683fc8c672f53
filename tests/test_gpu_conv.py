"""conv2d on the GPU as implicit-GEMM matmuls (ops/conv_gemm.py, backends/wgpu/conv.py,
matmul.wgsl's b_win): the windows matrix read inside the matmul kernel, checked against
PyTorch and the CPU over paddings, dilations, groups and input layouts, forward, both
gradients and a graph through them, and every tile (split-K too) against numpy's
im2col product on ragged sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import haelixe as hx
from haelixe.nn import functional as F

pytestmark = pytest.mark.gpu

CASES = [  # (input, weight, conv2d keywords)
    ((2, 4, 7, 6), (6, 4, 3, 3), {"padding": 1}),
    ((2, 4, 7, 6), (6, 2, 3, 3), {"padding": 2, "dilation": 2, "groups": 2}),
    ((3, 3, 5, 9), (5, 3, 2, 4), {"padding": "same"}),  # (uneven: one more cell after)
    ((2, 3, 8, 5), (2, 3, 3, 2), {"padding": (0, 1)}),
    ((2, 6, 9, 9), (6, 1, 3, 3), {"padding": 1, "groups": 6}),  # depthwise
    ((1, 5, 6, 6), (4, 5, 1, 1), {}),
]


def _gpu_input(x, layout):
    """x on the GPU as a leaf, and the view of it conv2d gets: contiguous, channels-last
    (a permuted view), flipped along H (a negative stride) or a strided slice."""
    if layout == "channels_last":
        leaf = hx.tensor(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), device="gpu",
                         requires_grad=True)
        return leaf, leaf.permute(0, 3, 1, 2), lambda g: g.transpose(0, 3, 1, 2)
    if layout == "flipped":
        leaf = hx.tensor(np.ascontiguousarray(x[:, :, ::-1]), device="gpu",
                         requires_grad=True)
        return leaf, leaf.flip(2), lambda g: g[:, :, ::-1]
    if layout == "sliced":
        wide = np.zeros(x.shape[:3] + (2 * x.shape[3],), np.float32)
        wide[..., ::2] = x
        leaf = hx.tensor(wide, device="gpu", requires_grad=True)
        return leaf, leaf[..., ::2], lambda g: g[..., ::2]
    leaf = hx.tensor(x, device="gpu", requires_grad=True)
    return leaf, leaf, lambda g: g


@pytest.fixture
def implicit_calls(be, monkeypatch):
    """How many convolutions ran the backend's implicit GEMM (so a test of it cannot
    pass through the composed path instead)."""
    calls = []
    real = type(be).conv2d
    monkeypatch.setattr(type(be), "conv2d", lambda *a: calls.append(1) or real(*a))
    return calls


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # (PyTorch's, on the even kernel)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "flipped", "sliced"])
def test_conv2d_reads_its_windows_in_the_kernel_and_equals_pytorch(be, layout,
                                                                    implicit_calls):
    rng = np.random.default_rng(0)
    for shape, wshape, kw in CASES:
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal(wshape).astype(np.float32)
        b = rng.standard_normal(wshape[0]).astype(np.float32)
        xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
        yt = torch.nn.functional.conv2d(xt, wt, bt, **kw)
        g = rng.standard_normal(yt.shape).astype(np.float32)
        yt.backward(torch.tensor(g))
        leaf, xin, back = _gpu_input(x, layout)
        wh, bh = (hx.tensor(a, device="gpu", requires_grad=True) for a in (w, b))
        calls = len(implicit_calls)
        y = F.conv2d(xin, wh, bh, **kw)
        assert len(implicit_calls) == calls + 1, f"{shape} {kw}: not the implicit GEMM"
        y.backward(hx.tensor(g, device="gpu"))
        for got, want in ((y.detach().cpu().numpy(), yt), (back(leaf.grad.cpu().numpy()),
                                                           xt.grad),
                          (wh.grad.cpu().numpy(), wt.grad), (bh.grad.cpu().numpy(), bt.grad)):
            np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=1e-4,
                                       err_msg=f"{shape} {wshape} {kw}")


def test_a_graph_through_the_gradients_equals_the_cpu(be, implicit_calls):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    out = {}
    for device in ("cpu", "gpu"):
        xh, wh = (hx.tensor(a, device=device, requires_grad=True) for a in (x, w))
        y = F.conv2d(xh, wh, padding=(1, 2), dilation=(1, 2), groups=2)
        gx, gw = hx.autograd.grad((y * y).sum(), (xh, wh), create_graph=True)
        ((gx * gx).sum() + (gw * gw).sum()).backward()
        out[device] = [t.detach().cpu().numpy() for t in (gx, gw, xh.grad, wh.grad)]
    assert implicit_calls  # (the forward on the GPU; its graph's gradients composed)
    for got, want in zip(out["gpu"], out["cpu"]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def _im2col(x, kernel, stride, pad, dilation, out):
    """numpy's (C * kh * kw, N * Ho * Wo) windows matrix of x (N, C, H, W)."""
    n, c, h, w = x.shape
    (kh, kw), (ho, wo) = kernel, out
    xp = np.zeros((n, c, h + 2 * pad[0] + kh * dilation[0], w + 2 * pad[1] + kw * dilation[1]),
                  x.dtype)
    xp[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w] = x
    cols = np.empty((c, kh, kw, n, ho, wo), x.dtype)
    for i in range(kh):
        for j in range(kw):
            y0, x0 = i * dilation[0], j * dilation[1]
            cols[:, i, j] = xp[:, :, y0:y0 + stride[0] * ho:stride[0],
                               x0:x0 + stride[1] * wo:stride[1]].transpose(1, 0, 2, 3)
    return cols.reshape(c * kh * kw, n * ho * wo)


def test_every_tile_reads_windows_both_ways_on_ragged_sizes(be):
    from haelixe.backends.wgpu import matmul as mm

    rng = np.random.default_rng(2)
    # a stride of 2 and uneven padding: the kernel's loader takes both (conv2d's fast
    # path itself is stride 1); 5 x 7 output pixels of 3 images, 3 * 3 * 2 taps
    x = rng.standard_normal((3, 3, 10, 13)).astype(np.float32)
    geometry = ((3, 2), (2, 2), (1, 0), (1, 2), (5, 5))
    cols = _im2col(x, *geometry)
    xg = be.from_numpy(x)
    a_fwd = rng.standard_normal((5, cols.shape[0])).astype(np.float32)
    a_dw = rng.standard_normal((7, cols.shape[1])).astype(np.float32)
    # (looped K steps: a software adapter's compiler is slow on unrolled ones)
    tiles = {n: t._replace(unrolled=False) for n, t in mm.TILES.items()}
    variants = [mm.Variant(tiles["128x256"]), mm.Variant(tiles["64x64"], 3),
                mm.Variant(tiles["128x64"], 2), mm.Variant(tiles["64x64n8"], 5)]
    for variant in variants:
        for taps, a, want in ((True, a_fwd, a_fwd @ cols), (False, a_dw, a_dw @ cols.T)):
            got = mm.windows_matmul(be, be.from_numpy(a), xg, *geometry, 1, taps, variant)
            np.testing.assert_allclose(be.to_numpy(got)[0], want, rtol=1e-4, atol=1e-4,
                                       err_msg=f"{variant} taps along k: {taps}")


def test_short_products_take_tiles_that_fit_them():
    from haelixe.backends.wgpu import matmul as mm

    # 64 output channels over many pixels: 64-row tiles, not half-empty 128-row ones
    assert mm.choose(64, 100352, 576, 1, "a_k4", "b_win").tile == mm.TILES["64x128"]
    # a weight gradient summed over 100352 pixels splits further than a Linear's
    assert mm.choose(64, 576, 100352, 1, "a_k4", "b_win") == \
        mm.Variant(mm.TILES["64x64n8"], 64)
    assert mm.choose(64, 576, 100352, 1, "a_k4", "b_k4") == mm.Variant(mm.TILES["64x64"], 32)
    assert mm.choose(64, 576, 8192, 1, "a_k4", "b_k4").splits == 16
