"""Convolutions, unfold and fold against PyTorch: forward and gradients over shapes,
strides, paddings and their modes, dilations, groups, dtypes and input layouts, on the CPU
and the GPU; gradcheck and gradgradcheck in float64; errors naming the op and the fix."""

from __future__ import annotations

import math

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


CONV_CASES = [
    # (input shape, weight shape, keyword arguments); the weight's rank names the op
    ((2, 3, 7, 6), (4, 3, 3, 3), {}),
    ((2, 3, 7, 6), (4, 3, 3, 2), {"stride": 2, "padding": 1}),
    ((1, 4, 9, 8), (6, 2, 3, 3), {"groups": 2, "padding": (2, 1), "dilation": (2, 1)}),
    ((2, 4, 6, 6), (4, 1, 3, 3), {"groups": 4, "padding": "same"}),  # depthwise
    ((2, 2, 8, 7), (3, 2, 2, 3), {"padding": "same", "dilation": 2}),  # even kernel
    ((1, 2, 5, 5), (3, 2, 1, 1), {"stride": (2, 3)}),
    ((2, 3, 5, 6), (2, 3, 5, 6), {"padding": "valid"}),  # kernel the whole image
    ((3, 6, 6), (4, 3, 3, 3), {"padding": 1}),  # unbatched
    ((2, 3, 5, 6, 4), (4, 3, 3, 3, 3), {}),
    ((2, 3, 6, 5, 5), (4, 3, 2, 3, 2), {"stride": (2, 1, 2), "padding": (1, 0, 1)}),
    ((1, 4, 5, 7, 6), (6, 2, 3, 2, 3), {"groups": 2, "padding": 2, "dilation": (1, 2, 2)}),
    ((2, 4, 4, 4, 5), (4, 1, 3, 3, 3), {"groups": 4, "padding": "same"}),  # depthwise
    ((1, 2, 5, 4, 6), (3, 2, 2, 2, 3), {"padding": "same", "dilation": 2}),  # even kernel
    ((1, 2, 3, 5, 4), (3, 2, 1, 1, 1), {"stride": (1, 2, 3)}),  # 1x1x1
    ((3, 4, 5, 5), (2, 3, 3, 3, 3), {"padding": 1}),  # unbatched
]


@pytest.mark.parametrize("x_shape,w_shape,kw", CONV_CASES)
def test_conv2d_and_conv3d_match_pytorch_forward_and_gradients(x_shape, w_shape, kw):
    name = f"conv{len(w_shape) - 2}d"
    ours, theirs = getattr(F, name), getattr(TF, name)
    against_torch(lambda x, w, b: ours(x, w, b, **kw),
                  lambda x, w, b: theirs(x, w, b, **kw),
                  randn(*x_shape), randn(*w_shape, seed=1), randn(w_shape[0], seed=2),
                  rtol=1e-10, atol=1e-10, what=f"{name} {x_shape} {w_shape} {kw}")


@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 2}, {"dilation": 3},
                                {"groups": 3, "padding": "same"}])
def test_conv1d_matches_pytorch(kw):
    against_torch(lambda x, w: F.conv1d(x, w, **kw), lambda x, w: TF.conv1d(x, w, **kw),
                  randn(2, 6, 11), randn(3, 6 // kw.get("groups", 1), 3, seed=1),
                  rtol=1e-10, atol=1e-10, what=f"conv1d {kw}")


CONV_T_CASES = [
    ((2, 4, 5, 4), (4, 3, 3, 3), {}),
    ((2, 4, 5, 4), (4, 3, 3, 2), {"stride": 2, "padding": 1, "output_padding": 1}),
    ((1, 4, 4, 5), (4, 2, 3, 3), {"groups": 2, "dilation": (2, 1), "padding": (1, 0)}),
    ((1, 2, 3, 3), (2, 2, 2, 2), {"stride": 3, "dilation": 2, "output_padding": (2, 1)}),
    ((2, 4, 3, 4, 3), (4, 3, 3, 3, 2), {}),
    ((1, 4, 3, 3, 4), (4, 2, 3, 2, 3), {"stride": 2, "padding": 1, "output_padding": 1,
                                        "groups": 2}),
    ((1, 2, 3, 2, 3), (2, 3, 2, 3, 2), {"stride": (1, 3, 2), "dilation": (2, 1, 2),
                                        "padding": (0, 1, 1), "output_padding": (1, 2, 0)}),
    ((4, 3, 3, 2), (4, 2, 2, 2, 2), {"stride": 2}),  # unbatched
]


@pytest.mark.parametrize("x_shape,w_shape,kw", CONV_T_CASES)
def test_conv_transpose2d_and_3d_match_pytorch(x_shape, w_shape, kw):
    name = f"conv_transpose{len(w_shape) - 2}d"
    ours, theirs = getattr(F, name), getattr(TF, name)
    o = w_shape[1] * kw.get("groups", 1)
    against_torch(lambda x, w, b: ours(x, w, b, **kw),
                  lambda x, w, b: theirs(x, w, b, **kw),
                  randn(*x_shape), randn(*w_shape, seed=1), randn(o, seed=2),
                  rtol=1e-10, atol=1e-10, what=f"{name} {x_shape} {kw}")


def test_conv_transpose1d_matches_pytorch():
    kw = {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}
    against_torch(lambda x, w: F.conv_transpose1d(x, w, **kw),
                  lambda x, w: TF.conv_transpose1d(x, w, **kw),
                  randn(2, 4, 6), randn(4, 3, 3, seed=1), rtol=1e-10, atol=1e-10)


def test_conv_transpose2d_is_the_adjoint_of_conv2d():
    # <conv(x), y> = <x, conv_transpose(y)>: the one is the other's gradient
    x, w = hx.tensor(randn(2, 3, 7, 7)), hx.tensor(randn(4, 3, 3, 3, seed=1))
    y = hx.tensor(randn(2, 4, 4, 4, seed=2))
    lhs = (F.conv2d(x, w, stride=2, padding=1) * y).sum().item()
    rhs = (x * F.conv_transpose2d(y, w, stride=2, padding=1, output_padding=0)).sum().item()
    assert math.isclose(lhs, rhs, rel_tol=1e-10)


@pytest.mark.parametrize("kw", [{}, {"padding": 1, "stride": 2}, {"dilation": (2, 1)},
                                {"stride": (3, 4), "padding": (1, 0)}])  # (disjoint)
def test_unfold_and_fold_match_pytorch(kw):
    against_torch(lambda x: F.unfold(x, (2, 3), **kw), lambda x: TF.unfold(x, (2, 3), **kw),
                  randn(2, 3, 6, 7), rtol=1e-12, atol=1e-12, what=f"unfold {kw}")
    blocks = TF.unfold(torch.zeros(1, 1, 6, 7), (2, 3), **kw).shape[-1]
    against_torch(lambda c: F.fold(c, (6, 7), (2, 3), **kw),
                  lambda c: TF.fold(c, (6, 7), (2, 3), **kw),
                  randn(2, 3 * 6, blocks), rtol=1e-12, atol=1e-12, what=f"fold {kw}")


def _layouts(a):
    """The same values as a contiguous tensor, a channels-last view, a slice and an
    expanded (zero-stride) tensor."""
    n, c, h, w = a.shape
    last = hx.tensor(np.ascontiguousarray(a.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
    big = np.zeros((n, c, 2 * h, w + 3))
    big[:, :, ::2, 1:w + 1] = a
    sliced = hx.tensor(big)[:, :, ::2, 1:w + 1]
    row = hx.tensor(a[:1]).expand(n, c, h, w)
    return {"contiguous": (hx.tensor(a), a), "channels_last": (last, a),
            "sliced": (sliced, a), "expanded": (row, np.broadcast_to(a[:1], a.shape))}


@pytest.mark.parametrize("name", ["contiguous", "channels_last", "sliced", "expanded"])
def test_conv2d_reads_every_input_layout(name):
    x, values = _layouts(randn(2, 4, 6, 5))[name]
    assert name == "contiguous" or not x.is_contiguous()
    w = randn(6, 2, 3, 3, seed=1)
    xt = torch.tensor(np.ascontiguousarray(values), requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    xh = x.requires_grad_() if x.grad_fn is None else x
    wh = hx.tensor(w, requires_grad=True)
    want = TF.conv2d(xt, wt, stride=(1, 2), padding=1, groups=2)
    got = F.conv2d(xh, wh, stride=(1, 2), padding=1, groups=2)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=1e-12)
    g = randn(*want.shape, seed=3)
    want.backward(torch.tensor(g))
    got.backward(hx.tensor(g))
    np.testing.assert_allclose(wh.grad.numpy(), wt.grad.numpy(), atol=1e-10)


def test_conv2d_gradient_reaches_a_channels_last_leaf():
    base = hx.tensor(randn(2, 5, 6, 3), requires_grad=True)  # (N, H, W, C) in memory
    x = base.permute(0, 3, 1, 2)
    w = randn(4, 3, 3, 3, seed=1)
    F.conv2d(x, hx.tensor(w), padding=1).square().sum().backward()
    xt = torch.tensor(randn(2, 5, 6, 3), requires_grad=True)
    TF.conv2d(xt.permute(0, 3, 1, 2), torch.tensor(w), padding=1).square().sum().backward()
    np.testing.assert_allclose(base.grad.numpy(), xt.grad.numpy(), atol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_conv2d_in_low_precision_and_under_autocast(dtype):
    x, w, b = randn(2, 3, 8, 8), randn(4, 3, 3, 3, seed=1), randn(4, seed=2)
    want = TF.conv2d(*(torch.tensor(a) for a in (x, w, b)), padding=1).numpy()
    if dtype == "float32":
        got = F.conv2d(*(hx.tensor(a, dtype="float32") for a in (x, w, b)), padding=1)
        assert got.dtype is hx.float32
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
        return
    xs = [hx.tensor(a, dtype="float32", requires_grad=True) for a in (x, w, b)]
    with hx.autocast(hx.bfloat16):
        got = F.conv2d(*xs, padding=1)
    assert got.dtype is hx.bfloat16
    np.testing.assert_allclose(got.detach().float().numpy(), want, rtol=3e-2, atol=6e-2)
    got.float().sum().backward()
    assert all(t.grad is not None and t.grad.dtype is hx.float32 for t in xs)
    ones = torch.ones(want.shape, dtype=torch.float64)
    want_gw = torch.nn.grad.conv2d_weight(torch.tensor(x), w.shape, ones, padding=1).numpy()
    np.testing.assert_allclose(xs[1].grad.numpy(), want_gw, rtol=3e-2, atol=0.5)


def test_conv_gradcheck_and_double_backward_in_float64():
    x = hx.tensor(randn(1, 2, 5, 4), requires_grad=True)
    w = hx.tensor(randn(4, 1, 2, 3, seed=1), requires_grad=True)
    b = hx.tensor(randn(4, seed=2), requires_grad=True)
    conv = lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2),  # noqa: E731
                                    groups=2)
    assert gradcheck(conv, (x, w, b), name="conv2d")
    assert gradgradcheck(conv, (x, w, b), name="conv2d")
    wt = hx.tensor(randn(2, 2, 3, 2, seed=3), requires_grad=True)
    convt = lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)  # noqa: E731
    assert gradcheck(convt, (x, wt), name="conv_transpose2d")
    assert gradgradcheck(convt, (x, wt), name="conv_transpose2d")


@pytest.mark.parametrize("groups,channels_last", [(1, False), (1, True), (2, False)])
def test_conv_forward_and_first_order_backward_are_one_node_on_raw_arrays(
        monkeypatch, groups, channels_last):
    """Forward and the first-order backward run the backend's primitives: the only ops
    dispatched are the convolution's node and the loss's sum (per-op dispatch would
    otherwise cost more than a small CNN's products), and the gradients are PyTorch's."""
    from haelixe.autograd.function import Function

    x = randn(2, 4, 5, 6)
    w, b = randn(6, 4 // groups, 3, 3, seed=1), randn(6, seed=2)
    xh = hx.tensor(x.transpose(0, 2, 3, 1).copy()).permute(0, 3, 1, 2) if channels_last \
        else hx.tensor(x)
    ours = [xh.requires_grad_(), hx.tensor(w, requires_grad=True),
            hx.tensor(b, requires_grad=True)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    dispatched = []
    apply = Function.apply.__func__

    def counted(cls, *args):
        dispatched.append(cls.__name__)
        return apply(cls, *args)

    monkeypatch.setattr(Function, "apply", classmethod(counted))
    F.conv2d(*ours, padding=1, groups=groups).square().sum().backward()
    monkeypatch.undo()
    TF.conv2d(*theirs, padding=1, groups=groups).square().sum().backward()
    assert dispatched.count("Conv") == 1
    assert not {"Permute", "View", "Windows", "Pad", "MatMul", "SumWindows"} & set(dispatched)
    for a, t in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), atol=1e-10)


def test_conv2d_input_windows_are_a_view_of_the_image():
    from haelixe.ops.windows import windows

    x = hx.tensor(randn(2, 3, 6, 7))
    win = windows(x, (3, 2), (2, 1), (1, 2))
    assert win.shape == (2, 3, 3, 2, 2, 5)
    assert win.storage is x.storage  # no byte copied
    want = torch.tensor(x.numpy()).unfold(2, 3, 2).unfold(3, 3, 1)[..., ::2]  # (.., i, j)
    np.testing.assert_array_equal(win.numpy(), want.permute(0, 1, 4, 5, 2, 3).numpy())


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv_layers_match_pytorch_with_every_padding_mode(mode):
    torch.manual_seed(0)
    tm = torch.nn.Conv2d(4, 6, (3, 2), stride=(1, 2), padding=(2, 1), dilation=(1, 2),
                         groups=2, padding_mode=mode).double()
    hm = nn.Conv2d(4, 6, (3, 2), stride=(1, 2), padding=(2, 1), dilation=(1, 2), groups=2,
                   padding_mode=mode).double()
    hm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = randn(2, 4, 6, 7)
    xt, xh = torch.tensor(x, requires_grad=True), hx.tensor(x, requires_grad=True)
    yt, yh = tm(xt), hm(xh)
    np.testing.assert_allclose(yh.detach().numpy(), yt.detach().numpy(), atol=1e-12)
    yt.square().sum().backward()
    yh.square().sum().backward()
    np.testing.assert_allclose(xh.grad.numpy(), xt.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(hm.weight.grad.numpy(), tm.weight.grad.numpy(), atol=1e-10)
    m1 = nn.Conv1d(3, 4, 3, padding="same", padding_mode=mode).double()
    t1 = torch.nn.Conv1d(3, 4, 3, padding="same", padding_mode=mode).double()
    m1.load_state_dict({k: v.detach().numpy() for k, v in t1.state_dict().items()})
    x1 = randn(2, 3, 9)
    np.testing.assert_allclose(m1(hx.tensor(x1)).detach().numpy(),
                               t1(torch.tensor(x1)).detach().numpy(), atol=1e-12)


@pytest.mark.parametrize("cls", ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"])
def test_conv_layers_have_pytorchs_parameters_and_init(cls):
    d = 1 if cls.endswith("1d") else 2
    args = (4, 6, 3)
    tm, hm = getattr(torch.nn, cls)(*args, groups=2), getattr(nn, cls)(*args, groups=2)
    assert [(k, tuple(v.shape)) for k, v in tm.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in hm.state_dict().items()]
    fan_in = hm.weight.shape[1] * 3 ** d
    bound = 1 / math.sqrt(fan_in)
    w = hm.weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.5 * bound
    assert np.abs(hm.bias.detach().numpy()).max() <= bound
    assert repr(hm) == repr(tm)
    assert nn.Conv2d(2, 2, 1, bias=False).bias is None


@pytest.mark.parametrize("d", [1, 2, 3])
def test_conv_transpose_layers_take_dtype_and_bias_and_refuse_other_padding_modes(d):
    ours = getattr(nn, f"ConvTranspose{d}d")(2, 4, 3, bias=False, dtype=hx.float64)
    theirs = getattr(torch.nn, f"ConvTranspose{d}d")(2, 4, 3, bias=False, dtype=torch.float64)
    assert isinstance(ours.weight, nn.Parameter) and ours.weight.dtype is hx.float64
    assert ours.bias is None and [n for n, _ in ours.named_parameters()] == ["weight"]
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    assert repr(ours) == repr(theirs)
    with pytest.raises(ValueError, match=f"ConvTranspose{d}d: only padding_mode='zeros'"):
        getattr(nn, f"ConvTranspose{d}d")(2, 4, 3, padding_mode="reflect")
    with pytest.raises(ValueError):  # (PyTorch's refuses it too)
        getattr(torch.nn, f"ConvTranspose{d}d")(2, 4, 3, padding_mode="reflect")


def test_conv_transpose_layer_takes_output_size():
    torch.manual_seed(0)
    tm = torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1).double()
    hm = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1).double()
    hm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = randn(1, 3, 4, 5)
    got = hm(hx.tensor(x), output_size=(8, 10))
    want = tm(torch.tensor(x), output_size=(8, 10))
    assert got.shape == (1, 2, 8, 10)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="valid sizes range from 7 to 8"):
        hm(hx.tensor(x), output_size=(10, 10))


def test_conv_errors_name_the_op_the_shapes_and_the_fix():
    # the functions raise RuntimeError, as PyTorch's do (OpError: a ValueError too); the
    # layer's constructor a ValueError, as PyTorch's
    x = hx.zeros(1, 4, 5, 5)
    with pytest.raises(RuntimeError, match=r"conv2d: in_channels \(4\) and out_channels \(6\) "
                                           r"must both be divisible by groups \(4\)"):
        F.conv2d(x, hx.zeros(6, 1, 3, 3), groups=4)
    with pytest.raises(RuntimeError, match=r"conv2d: input of shape \(1, 4, 5, 5\) has 4 "
                                           r"channels, but the weight of shape \(2, 3, 3, 3\)"):
        F.conv2d(x, hx.zeros(2, 3, 3, 3))
    with pytest.raises(RuntimeError, match=r"conv2d: the kernel \(7, 7\).*larger than the "
                                           r"padded input's spatial size \(5, 5\); use a "
                                           r"smaller kernel or dilation, or more padding"):
        F.conv2d(x, hx.zeros(2, 4, 7, 7))
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided"):
        F.conv2d(x, hx.zeros(2, 4, 3, 3), stride=2, padding="same")
    with pytest.raises(RuntimeError, match=r"conv2d: expected a 3-D \(unbatched\) or 4-D"):
        F.conv2d(hx.zeros(4, 5), hx.zeros(2, 4, 3, 3))
    with pytest.raises(TypeError, match="conv2d: input is float32 but weight is float64"):
        F.conv2d(x, hx.zeros(2, 4, 3, 3, dtype="float64"))
    with pytest.raises(ValueError, match="Conv2d: in_channels \\(3\\) must be divisible"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(RuntimeError, match="output_padding .* must be smaller"):
        F.conv_transpose2d(x, hx.zeros(4, 2, 3, 3), stride=2, output_padding=2)
    with pytest.raises(RuntimeError, match="fold: an output of size"):
        F.fold(hx.zeros(1, 12, 5), (4, 4), 2)


def test_conv_of_an_empty_batch_is_empty():
    y = F.conv2d(hx.zeros(0, 3, 5, 5, requires_grad=True), hx.zeros(2, 3, 3, 3))
    assert y.shape == (0, 2, 3, 3)


@pytest.mark.gpu
def test_conv_ops_on_the_gpu_equal_the_cpu(be):
    x, w, wt = randn(2, 4, 7, 6, dtype=np.float32), randn(6, 2, 3, 3, seed=1,
                                                          dtype=np.float32), \
        randn(6, 2, 2, 3, seed=2, dtype=np.float32)
    out = {}
    for device in ("cpu", "gpu"):
        xs = [hx.tensor(a, device=device, requires_grad=True) for a in (x, w, wt)]
        y = F.conv2d(xs[0].permute(0, 1, 3, 2), xs[1], stride=2, padding=1, groups=2)
        z = F.conv_transpose2d(y, xs[2], stride=2, output_padding=1, groups=2)
        u = F.fold(F.unfold(z, 2, padding=1), z.shape[2:], 2, padding=1)
        (u * u).sum().backward()
        assert u.device.type == device
        out[device] = [u.detach().cpu().numpy()] + [t.grad.cpu().numpy() for t in xs]
    for c, g in zip(out["cpu"], out["gpu"]):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-3)


def test_a_captured_cnn_step_replays_bit_for_bit(one_blas_thread):
    # conv, batch norm (its running statistics and batch count updated in place), ReLU,
    # max-pool and Linear under hx.capture: the replay equals the eager steps exactly
    def build():
        hx.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 3))
        opt = hx.optim.AdamW(model.parameters(), lr=1e-2, capturable=True)

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        return model, step

    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((8, 1, 6, 6)).astype(np.float32),
                rng.integers(0, 3, 8)) for _ in range(5)]
    runs = {}
    for name in ("eager", "captured"):
        model, step = build()
        run = hx.capture(step) if name == "captured" else step
        losses = [run(hx.tensor(x), hx.tensor(y)).item() for x, y in batches]
        runs[name] = (losses, model.state_dict())
    assert runs["eager"][0] == runs["captured"][0]
    for key, value in runs["eager"][1].items():
        np.testing.assert_array_equal(runs["captured"][1][key].numpy(), value.numpy(),
                                      err_msg=key)
