"""Batch, group and instance norm, Dropout2d, interpolate/Upsample, Unfold/Fold and
Unflatten against PyTorch: outputs, gradients, running statistics and state dicts over
train and eval, on both devices."""

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


def _twins(hx_cls, torch_cls, *args, **kw):
    tm = torch_cls(*args, **kw).double()
    hm = hx_cls(*args, **kw).double()
    with torch.no_grad():
        for p in tm.parameters():
            p.copy_(torch.randn_like(p))
    hm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return hm, tm


def _same_step(hm, tm, x, seed=5):
    xt = torch.tensor(x, requires_grad=True)
    xh = hx.tensor(x, requires_grad=True)
    yt, yh = tm(xt), hm(xh)
    np.testing.assert_allclose(yh.detach().numpy(), yt.detach().numpy(), rtol=1e-9,
                               atol=1e-10)
    g = randn(*yt.shape, seed=seed)
    yt.backward(torch.tensor(g))
    yh.backward(hx.tensor(g))
    np.testing.assert_allclose(xh.grad.numpy(), xt.grad.numpy(), rtol=1e-8, atol=1e-10)
    for (name, p), q in zip(hm.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-8, atol=1e-10,
                                   err_msg=name)


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm2d_trains_evaluates_and_tracks_like_pytorch(momentum, affine):
    hm, tm = _twins(nn.BatchNorm2d, torch.nn.BatchNorm2d, 3, momentum=momentum,
                    affine=affine, eps=1e-3)
    for step in range(3):
        _same_step(hm, tm, randn(4, 3, 5, 6, seed=step) * 2 + 1)
    for (k, a), (kt, b) in zip(hm.state_dict().items(), tm.state_dict().items()):
        assert k == kt
        np.testing.assert_allclose(np.asarray(a.numpy(), np.float64),
                                   np.asarray(b.numpy(), np.float64), rtol=1e-9, err_msg=k)
    assert int(hm.num_batches_tracked.item()) == 3
    hm.eval()
    tm.eval()
    _same_step(hm, tm, randn(2, 3, 5, 6, seed=9))
    assert repr(hm) == repr(tm)


def test_batchnorm1d_over_2d_and_3d_inputs_and_without_running_stats():
    hm, tm = _twins(nn.BatchNorm1d, torch.nn.BatchNorm1d, 4)
    _same_step(hm, tm, randn(8, 4))
    _same_step(hm, tm, randn(3, 4, 7, seed=1))
    np.testing.assert_allclose(hm.running_var.numpy(), tm.running_var.numpy(), rtol=1e-9)
    hm, tm = _twins(nn.BatchNorm1d, torch.nn.BatchNorm1d, 4, track_running_stats=False)
    assert list(hm.state_dict()) == list(tm.state_dict()) == ["weight", "bias"]
    hm.eval()
    tm.eval()
    _same_step(hm, tm, randn(5, 4, seed=2))  # batch statistics even in eval


def test_batchnorm_gradcheck_and_double_backward():
    x = hx.tensor(randn(3, 2, 2, 2), requires_grad=True)
    w = hx.tensor(randn(2, seed=1), requires_grad=True)
    b = hx.tensor(randn(2, seed=2), requires_grad=True)
    bn = lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)  # noqa: E731
    assert gradcheck(bn, (x, w, b), name="batch_norm")
    assert gradgradcheck(bn, (x, w, b), name="batch_norm")


@pytest.mark.parametrize("groups,affine", [(1, True), (2, True), (6, False)])
def test_groupnorm_matches_pytorch(groups, affine):
    hm, tm = _twins(nn.GroupNorm, torch.nn.GroupNorm, groups, 6, affine=affine)
    _same_step(hm, tm, randn(2, 6, 4, 3) * 3)
    assert repr(hm) == repr(tm)


@pytest.mark.parametrize("affine,track", [(False, False), (True, True)])
def test_instancenorm2d_matches_pytorch(affine, track):
    hm, tm = _twins(nn.InstanceNorm2d, torch.nn.InstanceNorm2d, 3, affine=affine,
                    track_running_stats=track)
    _same_step(hm, tm, randn(2, 3, 4, 5) + 2)
    _same_step(hm, tm, randn(3, 4, 5, seed=1))  # unbatched
    if track:
        np.testing.assert_allclose(hm.running_mean.numpy(), tm.running_mean.numpy(),
                                   rtol=1e-9)
        np.testing.assert_allclose(hm.running_var.numpy(), tm.running_var.numpy(),
                                   rtol=1e-9)
        hm.eval()
        tm.eval()
        _same_step(hm, tm, randn(2, 3, 4, 5, seed=2))


def test_norm_errors_name_the_layer_and_the_fix():
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected 4D input, got a 3D input"):
        nn.BatchNorm2d(3)(hx.zeros(3, 4, 4))
    with pytest.raises(ValueError, match="expected more than 1 value per channel when "
                                         "training"):
        nn.BatchNorm1d(3)(hx.zeros(1, 3))
    with pytest.raises(ValueError, match=r"group_norm: the input's 6 channels .* divisible "
                                         r"by num_groups \(4\)"):
        F.group_norm(hx.zeros(2, 6, 3), 4)
    with pytest.raises(ValueError, match=r"batch_norm: weight of shape \(2,\) does not fit"):
        F.batch_norm(hx.zeros(2, 3), None, None, hx.ones(2), training=True)


def test_batchnorm_under_autocast_computes_in_float32():
    m = nn.BatchNorm2d(3)
    x = hx.tensor(randn(2, 3, 4, 4, dtype=np.float32)).to(hx.bfloat16)
    with hx.autocast(hx.bfloat16):
        y = m(x)
    assert y.dtype is hx.float32
    want = TF.batch_norm(torch.tensor(x.float().numpy()), None, None, training=True)
    np.testing.assert_allclose(y.detach().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_dropout2d_zeroes_whole_channels():
    hx.manual_seed(0)
    x = hx.ones(8, 16, 3, 3)
    y = nn.Dropout2d(0.5)(x).numpy()
    per_channel = y.reshape(8, 16, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2.0).all(-1))
    assert 0.25 < (per_channel[..., 0] == 0).mean() < 0.75
    m = nn.Dropout2d(0.5).eval()
    assert m(x) is x
    assert F.dropout2d(hx.ones(4, 3, 3), 1.0).numpy().sum() == 0  # unbatched (C, H, W)


INTERPOLATE = [
    ({"scale_factor": 2}, "nearest"), ({"size": (5, 7)}, "nearest"),
    ({"scale_factor": 0.5}, "nearest"), ({"size": (7, 3)}, "nearest-exact"),
    ({"scale_factor": 2}, "bilinear"), ({"size": (5, 11)}, "bilinear"),
    ({"scale_factor": (1.5, 0.5)}, "bilinear"), ({"size": (3, 4)}, "area"),
]


@pytest.mark.parametrize("kw,mode", INTERPOLATE)
def test_interpolate_matches_pytorch(kw, mode):
    x = randn(2, 3, 4, 6)
    corners = [None] if mode != "bilinear" else [False, True]
    for align in corners:
        against_torch(lambda x, a=align: F.interpolate(x, mode=mode, align_corners=a, **kw),
                      lambda x, a=align: TF.interpolate(x, mode=mode, align_corners=a, **kw),
                      x, rtol=1e-10, atol=1e-12, what=f"interpolate {mode} {kw} {align}")


def test_interpolate_linear_1d_and_upsample_layer():
    against_torch(lambda x: F.interpolate(x, size=9, mode="linear", align_corners=True),
                  lambda x: TF.interpolate(x, size=9, mode="linear", align_corners=True),
                  randn(2, 3, 5), rtol=1e-10, atol=1e-12)
    hm = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
    tm = torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
    x = randn(1, 2, 3, 3)
    np.testing.assert_allclose(hm(hx.tensor(x)).numpy(), tm(torch.tensor(x)).numpy(),
                               atol=1e-12)
    assert repr(hm) == repr(tm)
    assert repr(nn.Upsample(size=(4, 4))) == repr(torch.nn.Upsample(size=(4, 4)))
    with pytest.raises(ValueError, match="align_corners can only be set with the "
                                         "interpolating modes"):
        F.interpolate(hx.tensor(x), scale_factor=2, align_corners=True)
    with pytest.raises(ValueError, match="mode 'bicubic' is not supported"):
        F.interpolate(hx.tensor(x), scale_factor=2, mode="bicubic")


def test_unfold_fold_and_unflatten_layers_match_pytorch():
    x = randn(2, 3, 5, 6)
    hu, tu = nn.Unfold((2, 3), padding=1, stride=2), torch.nn.Unfold((2, 3), padding=1,
                                                                      stride=2)
    cols = hu(hx.tensor(x))
    np.testing.assert_allclose(cols.numpy(), tu(torch.tensor(x)).numpy(), atol=1e-12)
    hf = nn.Fold((5, 6), (2, 3), padding=1, stride=2)
    tf = torch.nn.Fold((5, 6), (2, 3), padding=1, stride=2)
    np.testing.assert_allclose(hf(cols).numpy(), tf(torch.tensor(cols.numpy())).numpy(),
                               atol=1e-12)
    assert repr(hu) == repr(tu) and repr(hf) == repr(tf)
    un = nn.Unflatten(1, (3, 2))
    assert un(hx.zeros(4, 6, 5)).shape == (4, 3, 2, 5)
    assert repr(un) == repr(torch.nn.Unflatten(1, (3, 2)))


@pytest.mark.gpu
def test_norms_and_resampling_on_the_gpu_equal_the_cpu(be):
    a = randn(2, 4, 5, 6, dtype=np.float32)
    out = {}
    for device in ("cpu", "gpu"):
        hx.manual_seed(0)
        bn = nn.BatchNorm2d(4).to(device)
        gn = nn.GroupNorm(2, 4).to(device)
        x = hx.tensor(a, device=device, requires_grad=True)
        y = F.interpolate(gn(bn(x)), scale_factor=2, mode="bilinear")
        z = F.interpolate(y, size=(7, 5)) + F.instance_norm(y).mean()
        (z * z).sum().backward()
        out[device] = (z.detach().cpu().numpy(), x.grad.cpu().numpy(),
                       bn.running_var.cpu().numpy(), bn.weight.grad.cpu().numpy())
    for c, g in zip(out["cpu"], out["gpu"]):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4)
