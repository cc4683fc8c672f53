"""Pooling against PyTorch: max (with indices, dilation, ceil_mode), unpooling, average
(count_include_pad, divisor_override) and the adaptive pools, forward and gradients, on
both devices; gradcheck in float64; errors naming the op and the fix."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch_ref import against_torch

import haelixe as hx
import haelixe.nn.functional as F
from haelixe import nn
from haelixe.autograd.gradcheck import gradcheck, gradgradcheck


def randn(*shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


POOL2D = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": (3, 2), "stride": (2, 3), "ceil_mode": True},
    {"kernel_size": 2, "stride": 3, "padding": 1, "ceil_mode": True},
    {"kernel_size": 1, "stride": 2},
]


@pytest.mark.parametrize("kw", POOL2D + [
    {"kernel_size": 2, "dilation": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": (1, 2), "ceil_mode": True}])
def test_max_pool2d_and_its_indices_match_pytorch(kw):
    x = randn(2, 3, 9, 8)
    against_torch(lambda x: F.max_pool2d(x, **kw, return_indices=True),
                  lambda x: TF.max_pool2d(x, **kw, return_indices=True), x,
                  rtol=1e-12, atol=1e-12, what=f"max_pool2d {kw}")


@pytest.mark.parametrize("kw", POOL2D)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool2d_matches_pytorch(kw, count_include_pad):
    against_torch(lambda x: F.avg_pool2d(x, **kw, count_include_pad=count_include_pad),
                  lambda x: TF.avg_pool2d(x, **kw, count_include_pad=count_include_pad),
                  randn(2, 3, 9, 8), rtol=1e-12, atol=1e-12, what=f"avg_pool2d {kw}")


def test_avg_pool2d_divisor_override_and_1d_pools_match_pytorch():
    against_torch(lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=5),
                  lambda x: TF.avg_pool2d(x, 3, 2, 1, divisor_override=5), randn(1, 2, 7, 6),
                  rtol=1e-12, atol=1e-12)
    x = randn(2, 3, 11)
    against_torch(lambda x: F.max_pool1d(x, 3, 2, 1, 2, True, True),
                  lambda x: TF.max_pool1d(x, 3, 2, 1, 2, True, True), x,
                  rtol=1e-12, atol=1e-12, what="max_pool1d")
    against_torch(lambda x: F.avg_pool1d(x, 3, 2, 1, True, False),
                  lambda x: TF.avg_pool1d(x, 3, 2, 1, True, False), x,
                  rtol=1e-12, atol=1e-12, what="avg_pool1d")


@pytest.mark.parametrize("size", [1, 2, (3, 5), (4, None), (9, 8), (6, 3)])
def test_adaptive_pools_match_pytorch(size):
    x = randn(2, 3, 9, 8)
    against_torch(lambda x: F.adaptive_avg_pool2d(x, size),
                  lambda x: TF.adaptive_avg_pool2d(x, size), x, rtol=1e-12, atol=1e-12,
                  what=f"adaptive_avg_pool2d {size}")
    against_torch(lambda x: F.adaptive_max_pool2d(x, size, return_indices=True),
                  lambda x: TF.adaptive_max_pool2d(x, size, return_indices=True), x,
                  rtol=1e-12, atol=1e-12, what=f"adaptive_max_pool2d {size}")


def test_adaptive_1d_pools_match_pytorch():
    x = randn(2, 3, 11)
    against_torch(lambda x: F.adaptive_avg_pool1d(x, 4), lambda x: TF.adaptive_avg_pool1d(x, 4),
                  x, rtol=1e-12, atol=1e-12)
    against_torch(lambda x: F.adaptive_max_pool1d(x, 4, True),
                  lambda x: TF.adaptive_max_pool1d(x, 4, True), x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("size", [1, (2, 3, 4), (4, None, 5), (5, 7, 6)])
def test_adaptive_max_pool3d_and_its_indices_match_pytorch(size):
    against_torch(lambda x: F.adaptive_max_pool3d(x, size, return_indices=True),
                  lambda x: TF.adaptive_max_pool3d(x, size, return_indices=True),
                  randn(2, 3, 5, 7, 6), rtol=1e-12, atol=1e-12,
                  what=f"adaptive_max_pool3d {size}")
    against_torch(lambda x: nn.AdaptiveMaxPool3d(size)(x),
                  lambda x: torch.nn.AdaptiveMaxPool3d(size)(x), randn(3, 4, 7, 5),
                  rtol=1e-12, atol=1e-12, what=f"AdaptiveMaxPool3d {size}, unbatched")


def test_max_unpool2d_puts_each_value_back_at_its_index():
    x = randn(2, 3, 9, 8)
    _, idx = TF.max_pool2d(torch.tensor(x), 3, 2, 1, return_indices=True)
    y = TF.max_pool2d(torch.tensor(x), 3, 2, 1).numpy()
    against_torch(lambda y: F.max_unpool2d(y, hx.tensor(idx.numpy()), 3, 2, 1, (9, 8)),
                  lambda y: TF.max_unpool2d(y, idx, 3, 2, 1, (9, 8)), y,
                  rtol=1e-12, atol=1e-12)
    hy, hidx = F.max_pool2d(hx.tensor(x), 2, return_indices=True)
    back = nn.MaxUnpool2d(2)(hy, hidx)
    assert back.shape == (2, 3, 8, 8)
    assert np.count_nonzero(back.numpy()) == hy.numel()


@pytest.mark.parametrize("shape", [(2, 3, 9), (2, 3, 9, 8), (2, 2, 5, 7, 6)])
def test_max_unpool_layers_take_the_output_size_in_forward_as_pytorchs(shape):
    d = len(shape) - 2
    x = torch.tensor(randn(*shape))
    y, idx = getattr(TF, f"max_pool{d}d")(x, 3, 2, 1, return_indices=True)
    ours = getattr(nn, f"MaxUnpool{d}d")(3, 2, 1)
    theirs = getattr(torch.nn, f"MaxUnpool{d}d")(3, 2, 1)
    # (an even size is not the default one: it must be asked for)
    against_torch(lambda y: ours(y, hx.tensor(idx.numpy()), output_size=shape[2:]),
                  lambda y: theirs(y, idx, output_size=shape[2:]), y.numpy(),
                  rtol=1e-12, atol=1e-12, what=f"MaxUnpool{d}d")


def test_max_pool_gradient_goes_to_the_first_of_tied_cells():
    x = hx.tensor(np.ones((1, 1, 2, 4)), requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], [[1, 0, 1, 0], [0, 0, 0, 0]])
    xt = torch.ones(1, 1, 2, 4, dtype=torch.float64, requires_grad=True)
    TF.max_pool2d(xt, 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def test_max_pool_picks_a_nan_and_routes_its_gradient_there_as_pytorch():
    a = randn(2, 3, 4, 6)
    a[0, 1, 2, 3] = a[1, 2, 0, 0] = np.nan
    x = hx.tensor(a, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    y, yt = F.max_pool2d(x, 2), TF.max_pool2d(xt, 2)
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    y.sum().backward()
    yt.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def test_max_pool_has_a_double_backward():
    x = hx.tensor(randn(1, 2, 5, 4), requires_grad=True)
    assert gradgradcheck(lambda x: F.max_pool2d(x, 2, 1, ceil_mode=True) ** 2, (x,),
                         name="max_pool2d")


def test_pools_of_overlapping_windows_sum_their_gradients_and_pass_gradcheck():
    x = hx.tensor(randn(1, 2, 6, 5), requires_grad=True)
    assert gradcheck(lambda x: F.max_pool2d(x, 3, 1, 1), (x,), name="max_pool2d")
    assert gradcheck(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                            count_include_pad=False), (x,), name="avg_pool2d")
    assert gradcheck(lambda x: F.adaptive_avg_pool2d(x, (4, 3)), (x,), name="adaptive_avg")
    assert gradcheck(lambda x: F.adaptive_max_pool2d(x, (4, 3)), (x,), name="adaptive_max")


def test_pools_read_a_channels_last_view_and_keep_low_precision():
    a = randn(2, 6, 5, 3, dtype=np.float32)  # (N, H, W, C) in memory
    x = hx.tensor(a).permute(0, 3, 1, 2)
    want = torch.tensor(a).permute(0, 3, 1, 2)
    np.testing.assert_array_equal(F.max_pool2d(x, 2).numpy(), TF.max_pool2d(want, 2).numpy())
    np.testing.assert_allclose(F.avg_pool2d(x, 2, 1).numpy(), TF.avg_pool2d(want, 2, 1).numpy(),
                               rtol=1e-6)
    low = F.max_pool2d(x.to(hx.bfloat16), 2)
    assert low.dtype is hx.bfloat16
    np.testing.assert_array_equal(low.float().numpy(),
                                  TF.max_pool2d(want.bfloat16(), 2).float().numpy())
    assert F.avg_pool2d(x.to(hx.bfloat16), 2).dtype is hx.bfloat16


def test_pool_layers_match_the_functions_and_pytorchs_reprs():
    x = hx.tensor(randn(1, 2, 8, 8))
    for hm, tm in ((nn.MaxPool2d(3, 2, 1, ceil_mode=True),
                    torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True)),
                   (nn.AvgPool2d(2), torch.nn.AvgPool2d(2)),
                   (nn.AdaptiveAvgPool2d((1, 1)), torch.nn.AdaptiveAvgPool2d((1, 1))),
                   (nn.AdaptiveMaxPool2d(3), torch.nn.AdaptiveMaxPool2d(3)),
                   (nn.MaxPool1d(2), torch.nn.MaxPool1d(2)),
                   (nn.AvgPool1d(3, 1, 1), torch.nn.AvgPool1d(3, 1, 1)),
                   (nn.AdaptiveAvgPool1d(2), torch.nn.AdaptiveAvgPool1d(2))):
        inp = x if "2d" in type(hm).__name__ else x[0]
        np.testing.assert_allclose(hm(inp).numpy(), tm(torch.tensor(inp.numpy())).numpy(),
                                   atol=1e-12, err_msg=type(hm).__name__)
        assert repr(hm) == repr(tm)
    y, idx = nn.MaxPool2d(2, return_indices=True)(x)
    assert idx.dtype is hx.int64 and y.shape == idx.shape == (1, 2, 4, 4)


def test_adaptive_and_unpool_layers_show_their_reprs_and_hold_no_state():
    for ours, theirs in ((nn.AdaptiveMaxPool1d(4, return_indices=True),
                          torch.nn.AdaptiveMaxPool1d(4, return_indices=True)),
                         (nn.AdaptiveAvgPool2d((None, 3)), torch.nn.AdaptiveAvgPool2d((None, 3))),
                         (nn.AdaptiveMaxPool3d((2, None, 1)),
                          torch.nn.AdaptiveMaxPool3d((2, None, 1)))):
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == [] and list(ours.parameters()) == []
    x = randn(2, 3, 9)
    y, idx = nn.AdaptiveMaxPool1d(4, return_indices=True)(hx.tensor(x))
    ty, tidx = torch.nn.AdaptiveMaxPool1d(4, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
    # (MaxUnpool*d keeps each size as a d-tuple, as PyTorch's does)
    for d, args in ((1, (2,)), (2, (3, 2, 1)), (3, ((1, 2, 2),))):
        name = f"MaxUnpool{d}d"
        ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
        assert repr(ours) == repr(theirs)
        assert (ours.kernel_size, ours.stride, ours.padding) == \
            (theirs.kernel_size, theirs.stride, theirs.padding)
    assert list(nn.MaxUnpool1d(2).state_dict()) == []


def test_pool_errors_name_the_op_and_the_fix():
    x = hx.zeros(1, 2, 4, 4)
    with pytest.raises(ValueError, match=r"max_pool2d: padding \(2, 2\) should be at most "
                                         r"half of the kernel size \(3, 3\)"):
        F.max_pool2d(x, 3, padding=2)
    with pytest.raises(ValueError, match=r"avg_pool2d: the kernel \(5, 5\).*larger than the "
                                         r"padded input's spatial size \(4, 4\)"):
        F.avg_pool2d(x, 5)
    with pytest.raises(ValueError, match=r"max_pool2d: expected a 3-D \(unbatched\) or 4-D"):
        F.max_pool2d(hx.zeros(4, 4), 2)
    with pytest.raises(TypeError, match="avg_pool2d: not defined for bool"):
        F.avg_pool2d(x.bool(), 2)
    # (max_pool1d takes no integers, as PyTorch's CPU kernel; its 2-D and 3-D forms do)
    with pytest.raises(TypeError, match=r"max_pool1d: not defined for int64 tensors "
                                        r"\(shape \(1, 1, 8\)\); convert with .float"):
        F.max_pool1d(hx.arange(8).reshape(1, 1, 8), 2)
    with pytest.raises(ValueError, match="max_unpool2d: indices must be a tensor of"):
        F.max_unpool2d(x, hx.zeros(1, 2, 2, 2, dtype="int64"), 2)


@pytest.mark.gpu
def test_pools_on_the_gpu_equal_the_cpu(be):
    a = randn(2, 3, 9, 8, dtype=np.float32)
    out = {}
    for device in ("cpu", "gpu"):
        x = hx.tensor(a, device=device, requires_grad=True)
        y, idx = F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)
        z = F.avg_pool2d(y, 2, 1, count_include_pad=False, padding=1)
        u = F.adaptive_avg_pool2d(z, (3, 2)) + F.adaptive_max_pool2d(z, (3, 2))
        v = F.max_unpool2d(y, idx, 3, 2, 1, (9, 8))
        ((u * u).sum() + (v * x).sum()).backward()
        assert u.device.type == device
        out[device] = (u.detach().cpu().numpy(), idx.cpu().numpy(), x.grad.cpu().numpy())
    for c, g in zip(out["cpu"], out["gpu"]):
        np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-5)
