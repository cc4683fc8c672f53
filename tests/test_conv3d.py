"""The 3-D convolutions and pools (the same windows view and product as the 2-D ones,
over three windowed dims) against PyTorch: forward and gradients over strides,
paddings, dilations, groups, ceil_mode and input layouts; gradcheck in float64; the
layers; errors naming the op and the fix; the GPU against the CPU. (conv3d's and
conv_transpose3d's cases over shapes and arguments are in test_conv.py's tables.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_ref import against_torch

import haelixe as hx
import haelixe.nn.functional as F
from haelixe import nn
from haelixe.autograd.gradcheck import gradcheck


def randn(*shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


MAX_POOL3D_CASES = [
    (2, {}),
    ((2, 3, 2), {"stride": (1, 2, 2), "padding": 1, "dilation": (2, 1, 1)}),
    (3, {"stride": 2, "padding": 1, "ceil_mode": True}),
    ((1, 2, 3), {"stride": 1, "dilation": (1, 2, 1)}),
]


@pytest.mark.parametrize("kernel,kw", MAX_POOL3D_CASES)
def test_max_pool3d_matches_pytorch_with_its_indices(kernel, kw):
    # distinct values: a tie would let each framework pick a different cell
    x = np.random.default_rng(0).permutation(2 * 3 * 5 * 6 * 7).reshape(2, 3, 5, 6, 7) / 7.0
    against_torch(lambda x: F.max_pool3d(x, kernel, **kw),
                  lambda x: TF.max_pool3d(x, kernel, **kw), x, rtol=0, atol=0,
                  what=f"max_pool3d {kernel} {kw}")
    got, gi = F.max_pool3d(hx.tensor(x), kernel, return_indices=True, **kw)
    want, wi = TF.max_pool3d(torch.tensor(x), kernel, return_indices=True, **kw)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())


AVG_POOL3D_CASES = [
    (2, {}),
    ((3, 2, 3), {"stride": (2, 1, 2), "padding": (1, 0, 1)}),
    (3, {"stride": 2, "padding": 1, "count_include_pad": False, "ceil_mode": True}),
    (3, {"stride": 2, "padding": 1, "ceil_mode": True}),
    (2, {"divisor_override": 3}),
]


@pytest.mark.parametrize("kernel,kw", AVG_POOL3D_CASES)
def test_avg_pool3d_matches_pytorch(kernel, kw):
    against_torch(lambda x: F.avg_pool3d(x, kernel, **kw),
                  lambda x: TF.avg_pool3d(x, kernel, **kw), randn(2, 3, 5, 6, 7),
                  rtol=1e-12, atol=1e-12, what=f"avg_pool3d {kernel} {kw}")


def _layouts(a):
    """The same values as a contiguous tensor, a channels-last view (N, D, H, W, C in
    memory), a slice of a larger tensor and an expanded (zero-stride) tensor."""
    n, c, d, h, w = a.shape
    last = hx.tensor(np.ascontiguousarray(a.transpose(0, 2, 3, 4, 1))).permute(0, 4, 1, 2, 3)
    big = np.zeros((n, c, d + 1, 2 * h, w + 3))
    big[:, :, 1:, ::2, 1:w + 1] = a
    sliced = hx.tensor(big)[:, :, 1:, ::2, 1:w + 1]
    row = hx.tensor(a[:1]).expand(n, c, d, h, w)
    return {"contiguous": (hx.tensor(a), a), "channels_last": (last, a),
            "sliced": (sliced, a), "expanded": (row, np.broadcast_to(a[:1], a.shape))}


@pytest.mark.parametrize("name", ["contiguous", "channels_last", "sliced", "expanded"])
def test_3d_ops_read_every_input_layout(name):
    x, values = _layouts(randn(2, 4, 4, 5, 3))[name]
    assert name == "contiguous" or not x.is_contiguous()
    w = randn(6, 2, 3, 2, 3, seed=1)
    xt = torch.tensor(np.ascontiguousarray(values))
    wt = torch.tensor(w, requires_grad=True)
    wh = hx.tensor(w, requires_grad=True)
    for got, want in (
            (F.conv3d(x, wh, stride=(1, 2, 1), padding=1, groups=2),
             TF.conv3d(xt, wt, stride=(1, 2, 1), padding=1, groups=2)),
            (F.max_pool3d(x, 2, padding=1), TF.max_pool3d(xt, 2, padding=1)),
            (F.avg_pool3d(x, (2, 3, 2), stride=1), TF.avg_pool3d(xt, (2, 3, 2), stride=1))):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=1e-12)
    y = F.conv3d(x, wh, padding=1, groups=2)
    g = randn(*y.shape, seed=3)
    y.backward(hx.tensor(g))
    TF.conv3d(xt, wt, padding=1, groups=2).backward(torch.tensor(g))
    np.testing.assert_allclose(wh.grad.numpy(), wt.grad.numpy(), atol=1e-10)


def test_3d_ops_take_float32():
    x, w = randn(2, 3, 4, 5, 4, dtype=np.float32), randn(4, 3, 3, 3, 3, seed=1,
                                                        dtype=np.float32)
    got = F.conv3d(hx.tensor(x), hx.tensor(w), padding=1)
    assert got.dtype is hx.float32
    want = TF.conv3d(torch.tensor(x), torch.tensor(w), padding=1)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    assert F.max_pool3d(hx.tensor(x), 2).dtype is hx.float32
    assert F.avg_pool3d(hx.tensor(x), 2).dtype is hx.float32


def test_3d_ops_pass_gradcheck_in_float64():
    x = hx.tensor(randn(1, 2, 4, 3, 4), requires_grad=True)
    w = hx.tensor(randn(4, 1, 2, 2, 3, seed=1), requires_grad=True)
    b = hx.tensor(randn(4, seed=2), requires_grad=True)
    conv = lambda x, w, b: F.conv3d(x, w, b, stride=(2, 1, 1), padding=1,  # noqa: E731
                                    dilation=(1, 1, 2), groups=2)
    assert gradcheck(conv, (x, w, b), name="conv3d")
    wt = hx.tensor(randn(2, 2, 2, 3, 2, seed=3), requires_grad=True)
    convt = lambda x, w: F.conv_transpose3d(x, w, stride=2, padding=1,  # noqa: E731
                                            output_padding=1)
    assert gradcheck(convt, (x, wt), name="conv_transpose3d")
    # distinct, well separated values: the max is stable under gradcheck's nudges
    distinct = np.random.default_rng(4).permutation(2 * 4 * 3 * 4).reshape(1, 2, 4, 3, 4)
    xd = hx.tensor(distinct / 4.0, requires_grad=True)
    assert gradcheck(lambda x: F.max_pool3d(x, 2, stride=1, padding=1), (xd,),
                     name="max_pool3d")
    assert gradcheck(lambda x: F.avg_pool3d(x, 2, stride=1, padding=1,
                                            count_include_pad=False), (x,),
                     name="avg_pool3d")


def test_3d_ops_of_an_empty_batch_are_empty():
    x = hx.zeros(0, 2, 4, 4, 4, requires_grad=True)
    assert F.conv3d(x, hx.zeros(3, 2, 3, 3, 3)).shape == (0, 3, 2, 2, 2)
    assert F.conv_transpose3d(x, hx.zeros(2, 3, 2, 2, 2)).shape == (0, 3, 5, 5, 5)
    assert F.max_pool3d(x, 2).shape == (0, 2, 2, 2, 2)
    assert F.avg_pool3d(x, 2).shape == (0, 2, 2, 2, 2)


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv3d_layer_matches_pytorch_with_every_padding_mode(mode):
    hx.manual_seed(0)
    ours = nn.Conv3d(4, 6, (3, 2, 3), padding=(1, 1, 2), groups=2, padding_mode=mode)
    theirs = torch.nn.Conv3d(4, 6, (3, 2, 3), padding=(1, 1, 2), groups=2, padding_mode=mode)
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    assert repr(ours) == repr(theirs)
    x = randn(2, 4, 4, 5, 5, dtype=np.float32)
    np.testing.assert_allclose(ours(hx.tensor(x)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_3d_layers_have_pytorchs_parameters_reprs_and_output_size():
    for cls, args in (("Conv3d", (4, 6, 3)), ("ConvTranspose3d", (4, 6, (2, 3, 2)))):
        ours = getattr(nn, cls)(*args, stride=2, groups=2, bias=False)
        theirs = getattr(torch.nn, cls)(*args, stride=2, groups=2, bias=False)
        assert repr(ours) == repr(theirs)
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
            {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    up = nn.ConvTranspose3d(2, 3, 3, stride=2)
    assert up(hx.zeros(1, 2, 3, 3, 3), output_size=(8, 7, 8)).shape == (1, 3, 8, 7, 8)
    for ours, theirs in ((nn.MaxPool3d(2, padding=1), torch.nn.MaxPool3d(2, padding=1)),
                         (nn.AvgPool3d(3, 2), torch.nn.AvgPool3d(3, 2))):
        assert repr(ours) == repr(theirs)
        x = randn(1, 2, 5, 6, 7, dtype=np.float32)
        np.testing.assert_allclose(ours(hx.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(),
                                   rtol=1e-6, atol=1e-6)
    pool = nn.AvgPool3d(2, divisor_override=5)
    assert pool.divisor_override == 5
    np.testing.assert_allclose(pool(hx.ones(1, 1, 2, 2, 2)).numpy(), [[[[[8 / 5]]]]],
                               rtol=1e-6)


def test_3d_errors_name_the_op_the_shapes_and_the_fix():
    x = hx.zeros(1, 4, 5, 5, 5)
    with pytest.raises(ValueError, match=r"conv3d: in_channels \(4\) and out_channels \(6\) "
                                         r"must both be divisible by groups \(4\)"):
        F.conv3d(x, hx.zeros(6, 1, 3, 3, 3), groups=4)
    with pytest.raises(ValueError, match=r"conv3d: input of shape \(1, 4, 5, 5, 5\) has 4 "
                                         r"channels, but the weight of shape "
                                         r"\(2, 3, 3, 3, 3\)"):
        F.conv3d(x, hx.zeros(2, 3, 3, 3, 3))
    with pytest.raises(ValueError, match=r"conv3d: the kernel \(3, 7, 3\).*larger than the "
                                         r"padded input's spatial size \(5, 5, 5\); use a "
                                         r"smaller kernel or dilation, or more padding"):
        F.conv3d(x, hx.zeros(2, 4, 3, 7, 3))
    with pytest.raises(ValueError, match=r"conv3d: expected a 4-D \(unbatched\) or 5-D "
                                         r"\(batched\) input of shape \(N, C, D, H, W\), got "
                                         r"shape \(4, 5, 5\)"):
        F.conv3d(hx.zeros(4, 5, 5), hx.zeros(2, 4, 3, 3, 3))
    with pytest.raises(ValueError, match=r"conv3d: weight must be 5-D"):
        F.conv3d(x, hx.zeros(2, 4, 3, 3))
    with pytest.raises(ValueError, match=r"conv_transpose3d: in_channels \(4\) must be "
                                         r"divisible by groups \(3\)"):
        F.conv_transpose3d(x, hx.zeros(4, 1, 2, 2, 2), groups=3)
    with pytest.raises(ValueError, match="conv_transpose3d: output_padding .* must be "
                                         "smaller"):
        F.conv_transpose3d(x, hx.zeros(4, 2, 3, 3, 3), stride=2, output_padding=2)
    with pytest.raises(ValueError, match=r"max_pool3d: the kernel \(6, 6, 6\).*larger than "
                                         r"the padded input's spatial size"):
        F.max_pool3d(x, 6)
    with pytest.raises(ValueError, match=r"avg_pool3d: expected a 4-D \(unbatched\) or 5-D "
                                         r"\(batched\) input, got shape \(5, 5\)"):
        F.avg_pool3d(hx.zeros(5, 5), 2)
    with pytest.raises(ValueError, match=r"max_pool3d: padding \(2, 2, 2\) should be at most "
                                         r"half of the kernel size"):
        F.max_pool3d(x, 2, padding=2)
    with pytest.raises(ValueError, match=r"Conv3d: out_channels \(5\) must be divisible by "
                                         r"groups \(2\)"):
        nn.Conv3d(4, 5, 3, groups=2)


@pytest.mark.gpu
def test_3d_ops_on_the_gpu_equal_the_cpu(be):
    x, w, wt = (randn(2, 4, 5, 4, 6, dtype=np.float32),
                randn(6, 2, 3, 2, 3, seed=1, dtype=np.float32),
                randn(6, 2, 2, 3, 2, seed=2, dtype=np.float32))
    out = {}
    for device in ("cpu", "gpu"):
        xs = [hx.tensor(a, device=device, requires_grad=True) for a in (x, w, wt)]
        y = F.conv3d(xs[0].permute(0, 1, 2, 4, 3), xs[1], stride=(1, 2, 1), padding=1,
                     groups=2)
        z = F.conv_transpose3d(y, xs[2], stride=2, output_padding=1, groups=2)
        m = F.max_pool3d(z, 2, stride=(1, 2, 2), padding=1)
        a = F.avg_pool3d(z, (2, 1, 2), stride=(1, 2, 2), padding=(1, 0, 1))
        ((m * m).sum() + (a * a).sum()).backward()
        assert m.device.type == a.device.type == device
        out[device] = [m.detach().cpu().numpy(), a.detach().cpu().numpy()] + \
            [t.grad.cpu().numpy() for t in xs]
    for c, g in zip(out["cpu"], out["gpu"]):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-3)
