"""rrelu, alpha_dropout, feature_alpha_dropout, dropout1d, dropout3d, Softmax2d and
channel_shuffle against PyTorch: exact values and float64 gradients where they are
deterministic (eval mode), the statistics of their draws in training, the gradients
through what was drawn, their shape rules, layers and errors."""

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import haelixe as hx
import haelixe.nn.functional as F

SELU_FLOOR = 1.7580993408473766


def _pair(a):
    return hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _check(got, want, x, t):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                               atol=1e-14)
    assert got.shape == tuple(want.shape)
    g = np.random.default_rng(3).standard_normal(tuple(want.shape))
    got.backward(hx.tensor(g))
    want.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)


# -- rrelu ----------------------------------------------------------------------------------

@pytest.mark.parametrize("lower,upper", [(1 / 8, 1 / 3), (0.2, 0.2), (0.0, 0.9)])
def test_rrelu_in_eval_is_pytorchs_mean_slope(lower, upper):
    a = np.random.default_rng(0).standard_normal((4, 6))
    a[0, :2] = 0.0  # (the slope at 0: the mean slope, as PyTorch's)
    x, t = _pair(a)
    _check(F.rrelu(x, lower, upper), TF.rrelu(t, lower, upper), x, t)
    x, t = _pair(a)  # strided
    _check(F.rrelu(x[:, ::2].T, lower, upper), TF.rrelu(t[:, ::2].T, lower, upper), x, t)
    x, t = _pair(a)
    layer, reference = hx.nn.RReLU(lower, upper).eval(), torch.nn.RReLU(lower, upper).eval()
    _check(layer(x), reference(t), x, t)


def test_rrelu_in_place_and_on_empty_and_0d_inputs():
    a = np.random.default_rng(1).standard_normal((3, 5))
    y = hx.tensor(a)
    assert F.rrelu(y, inplace=True) is y
    np.testing.assert_allclose(y.numpy(), TF.rrelu(torch.tensor(a)).numpy(), rtol=1e-15)
    leaf = hx.tensor(a, requires_grad=True)
    h = leaf * 1.0
    F.rrelu(h, 0.1, 0.3, training=True, inplace=True).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), h.detach().numpy() / a, rtol=1e-12)
    assert F.rrelu(hx.zeros(0, 3), training=True).shape == (0, 3)
    np.testing.assert_allclose(F.rrelu(hx.tensor(-2.0)).item(), TF.rrelu(
        torch.tensor(-2.0)).item(), rtol=1e-7)


def test_rrelu_in_training_draws_a_uniform_slope_per_negative_element():
    n, lower, upper = 200_000, 0.1, 0.4
    a = np.where(np.arange(n) % 2 == 0, -1.5, 2.0)
    x = hx.tensor(a, requires_grad=True)
    hx.manual_seed(11)
    y = F.rrelu(x, lower, upper, training=True)
    y.backward(hx.ones(n, dtype=hx.float64))
    out, grad = y.detach().numpy(), x.grad.numpy()
    np.testing.assert_array_equal(out[1::2], 2.0)  # (positives pass unchanged)
    np.testing.assert_array_equal(grad[1::2], 1.0)
    slopes = out[0::2] / -1.5
    np.testing.assert_allclose(grad[0::2], slopes, rtol=1e-15)  # (the drawn slope)
    assert lower <= slopes.min() and slopes.max() <= upper
    half = n // 2
    width = upper - lower
    # uniform on [lower, upper]: mean and variance within 5 standard errors
    assert abs(slopes.mean() - (lower + upper) / 2) < 5 * width / math.sqrt(12 * half)
    assert abs(slopes.var() - width ** 2 / 12) < 5 * width ** 2 / math.sqrt(180 * half)
    assert len(np.unique(slopes)) > half * 0.99  # (one draw per element)
    hx.manual_seed(11)
    np.testing.assert_array_equal(F.rrelu(hx.tensor(a), lower, upper, True).numpy(), out)
    layer = hx.nn.RReLU(lower, upper)
    hx.manual_seed(11)
    np.testing.assert_array_equal(layer(hx.tensor(a)).numpy(), out)  # (training by default)


def test_rrelu_errors_and_layer():
    with pytest.raises(ValueError, match=r"rrelu: lower \(0.5\) must be <= upper \(0.2\)"):
        F.rrelu(hx.ones(3), 0.5, 0.2)
    with pytest.raises(TypeError, match="rrelu: not defined for int64"):
        F.rrelu(hx.tensor([1, 2]))
    for args in ((), (0.1, 0.2, True)):
        assert repr(hx.nn.RReLU(*args)) == repr(torch.nn.RReLU(*args))


# -- alpha_dropout, feature_alpha_dropout ----------------------------------------------------

def _kept_and_dropped(p):
    """The values kept zeros and dropped elements take: PyTorch's affine map's."""
    a = 1.0 / math.sqrt((SELU_FLOOR ** 2 * p + 1.0) * (1.0 - p))
    return SELU_FLOOR * a * p, -SELU_FLOOR * a * (1.0 - p), a


@pytest.mark.parametrize("fn", ["alpha_dropout", "feature_alpha_dropout"])
def test_alpha_dropouts_take_pytorchs_two_values_on_zeros(fn):
    p = 0.3
    ours = getattr(F, fn)(hx.zeros(400, 50, dtype=hx.float64), p, True).numpy()
    theirs = getattr(TF, fn)(torch.zeros(400, 50, dtype=torch.float64), p, True).numpy()
    kept, dropped, _ = _kept_and_dropped(p)
    np.testing.assert_allclose(np.unique(theirs), [dropped, kept], rtol=1e-15)
    np.testing.assert_allclose(np.unique(ours), [dropped, kept], rtol=1e-15)


def test_alpha_dropout_keeps_a_standard_normal_input_standard():
    n, p = 400_000, 0.2
    hx.manual_seed(5)
    a = np.random.default_rng(5).standard_normal(n)
    x = hx.tensor(a, requires_grad=True)
    y = F.alpha_dropout(x, p, True)
    y.backward(hx.ones(n, dtype=hx.float64))
    out = y.detach().numpy()
    kept_shift, dropped, scale = _kept_and_dropped(p)
    dropped_mask = np.isclose(out, dropped, rtol=0, atol=1e-12)
    assert abs(dropped_mask.mean() - p) < 5 * math.sqrt(p * (1 - p) / n)
    np.testing.assert_allclose(out[~dropped_mask], scale * a[~dropped_mask] + kept_shift,
                               rtol=1e-12)
    # the gradient is the scale where kept, 0 where dropped
    np.testing.assert_allclose(x.grad.numpy(), np.where(dropped_mask, 0.0, scale), rtol=1e-15)
    assert abs(out.mean()) < 5 / math.sqrt(n) and abs(out.var() - 1.0) < 5 * math.sqrt(2 / n)


def test_feature_alpha_dropout_drops_whole_channels():
    p = 0.5
    hx.manual_seed(2)
    x = hx.tensor(np.random.default_rng(2).standard_normal((300, 8, 3, 2)),
                  requires_grad=True)
    y = F.feature_alpha_dropout(x, p, True)
    y.sum().backward()
    _, dropped, scale = _kept_and_dropped(p)
    out = y.detach().numpy().reshape(2400, 6)
    gone = np.isclose(out, dropped, rtol=0, atol=1e-7).all(1)
    grads = x.grad.numpy().reshape(2400, 6)
    np.testing.assert_allclose(grads, np.where(gone[:, None], 0.0, scale) * np.ones((1, 6)),
                               rtol=1e-6)
    assert abs(gone.mean() - p) < 5 * math.sqrt(p * (1 - p) / 2400)
    assert F.feature_alpha_dropout(hx.ones(4), 0.5, False).shape == (4,)


@pytest.mark.parametrize("fn", ["alpha_dropout", "feature_alpha_dropout"])
def test_alpha_dropouts_edges_match_pytorch(fn):
    ours, theirs = getattr(F, fn), getattr(TF, fn)
    a = np.random.default_rng(4).standard_normal((3, 4))
    x = hx.tensor(a)
    assert ours(x) is x and ours(x, 0.9, training=False) is x  # (eval by default)
    assert ours(x, 0.0, True) is x
    np.testing.assert_array_equal(ours(x, 1.0, True).numpy(),
                                  theirs(torch.tensor(a), 1.0, True).numpy())
    assert ours(hx.zeros(0, 3), 0.5, True).shape == (0, 3)
    y = hx.tensor(a)
    assert ours(y, 0.5, True, inplace=True) is y and not np.array_equal(y.numpy(), a)
    with pytest.raises(ValueError, match=rf"{fn}: p must be in \[0, 1\], got 1.5"):
        ours(x, 1.5)
    with pytest.raises(TypeError, match="convert with .float"):
        ours(hx.tensor([[1, 2]]), 0.5, True)
    assert np.array_equal(ours(hx.tensor([[1, 2]]), 0.5).numpy(), [[1, 2]])


def test_feature_alpha_dropout_needs_a_channel_dim_as_pytorch():
    for shape in ((), (3,)):
        with pytest.raises(RuntimeError):
            TF.feature_alpha_dropout(torch.ones(shape), 0.5, True)
        with pytest.raises(hx.errors.OpError, match="needs at least 2 dims"):
            F.feature_alpha_dropout(hx.ones(*shape), 0.5, True)


# -- dropout1d, dropout3d -------------------------------------------------------------------

@pytest.mark.parametrize("fn,shape,channels", [
    ("dropout1d", (200, 10, 7), (200, 10, 1)), ("dropout1d", (500, 7), (500, 1)),
    ("dropout3d", (40, 10, 2, 3, 2), (40, 10, 1, 1, 1)),
    ("dropout3d", (300, 2, 3, 2), (300, 1, 1, 1))])
def test_channel_dropouts_drop_whole_channels_and_scale_the_rest(fn, shape, channels):
    p = 0.4
    hx.manual_seed(9)
    x = hx.tensor(np.random.default_rng(9).standard_normal(shape), requires_grad=True)
    y = getattr(F, fn)(x, p)
    y.sum().backward()
    keep = x.grad.numpy()
    # each channel's elements share one draw: kept (scaled by 1 / (1 - p)) or zeroed
    flat = keep.reshape(int(np.prod(channels)), -1)
    assert (flat == flat[:, :1]).all()
    np.testing.assert_allclose(np.unique(flat), [0.0, 1 / (1 - p)], rtol=1e-15)
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy() * keep, rtol=1e-15)
    frac = (flat[:, 0] == 0).mean()
    assert abs(frac - p) < 5 * math.sqrt(p * (1 - p) / flat.shape[0])
    layer = getattr(hx.nn, fn.capitalize())(p)
    hx.manual_seed(9)
    np.testing.assert_array_equal(layer(x.detach()).numpy(), y.detach().numpy())
    assert layer.eval()(x) is x


def test_channel_dropouts_shape_rules_match_pytorch():
    for shape in ((), (3,), (2, 3, 4, 5)):
        with pytest.raises(RuntimeError, match="Expected 2D or 3D input"):
            TF.dropout1d(torch.ones(shape))
        with pytest.raises(hx.errors.OpError, match="dropout1d: expected a 2-D"):
            F.dropout1d(hx.ones(*shape))
    # another rank warns and drops along the first dim, as PyTorch's
    for shape in ((6, 200), (6, 3, 100)):
        with pytest.warns(UserWarning, match="dropout3d: received a"):
            y = F.dropout3d(hx.ones(*shape), 0.5).numpy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = TF.dropout3d(torch.ones(shape), 0.5).numpy()
        for out in (y, theirs):
            rows = out.reshape(6, -1)
            assert (rows == rows[:, :1]).all()
    with pytest.raises(hx.errors.OpError, match="dropout3d: a 0-d input"):
        F.dropout3d(hx.tensor(1.0))
    with pytest.raises(RuntimeError), pytest.warns(UserWarning):
        TF.dropout3d(torch.tensor(1.0))
    x = hx.ones(2, 3, 4)
    assert F.dropout1d(x, 0.5, training=False) is x and F.dropout1d(x, 0.0) is x
    assert np.array_equal(F.dropout1d(x, 1.0).numpy(), np.zeros((2, 3, 4)))
    assert F.dropout1d(x, 0.5, inplace=True) is x
    with pytest.raises(hx.errors.OpError, match=r"p must be in \[0, 1\]"):
        F.dropout3d(hx.ones(1, 2, 2, 2), -0.1)


@pytest.mark.parametrize("name,args", [
    ("AlphaDropout", ()), ("AlphaDropout", (0.2, True)), ("FeatureAlphaDropout", (0.1,)),
    ("Dropout1d", ()), ("Dropout3d", (0.3, True)), ("Softmax2d", ()),
    ("ChannelShuffle", (3,))])
def test_the_layers_are_pytorchs(name, args):
    ours, theirs = getattr(hx.nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    assert not ours.state_dict() and type(ours).__module__ == "haelixe.nn.fused_layers"
    if "Dropout" in name:
        with pytest.raises(ValueError, match=r"p must be in \[0, 1\]"):
            getattr(hx.nn, name)(1.5)


# -- Softmax2d ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 3, 4, 2), (0, 3, 2, 2)])
def test_softmax2d_normalises_over_the_channels(shape):
    a = np.random.default_rng(6).standard_normal(shape) * 3
    x, t = _pair(a)
    _check(hx.nn.Softmax2d()(x), torch.nn.Softmax2d()(t), x, t)
    x, t = _pair(np.ascontiguousarray(np.swapaxes(a, -1, -2)))
    _check(hx.nn.Softmax2d()(x.transpose(-1, -2)), torch.nn.Softmax2d()(t.transpose(-1, -2)),
           x, t)


def test_softmax2d_refuses_other_ranks_and_arguments():
    for shape in ((3, 4), (1, 2, 3, 4, 5)):
        with pytest.raises(ValueError, match="Softmax2d: expected a 3-D"):
            hx.nn.Softmax2d()(hx.ones(*shape))
        with pytest.raises(ValueError):
            torch.nn.Softmax2d()(torch.ones(shape))
    with pytest.raises(TypeError, match="Softmax2d"):
        hx.nn.Softmax2d(1)


# -- channel_shuffle ------------------------------------------------------------------------

@pytest.mark.parametrize("shape,groups", [((2, 6, 3), 3), ((1, 8, 2, 2), 2), ((2, 4, 1, 1, 2), 4),
                                          ((0, 6, 2), 2), ((3, 5, 2), 1)])
def test_channel_shuffle_matches_pytorch(shape, groups):
    a = np.random.default_rng(7).standard_normal(shape)
    x, t = _pair(a)
    _check(F.channel_shuffle(x, groups), TF.channel_shuffle(t, groups), x, t)
    x, t = _pair(a)
    _check(hx.nn.ChannelShuffle(groups)(x.flip(0)), torch.nn.ChannelShuffle(groups)(t.flip(0)),
           x, t)
    i = np.arange(int(np.prod(shape))).reshape(shape)
    np.testing.assert_array_equal(hx.channel_shuffle(hx.tensor(i), groups).numpy(),
                                  torch.channel_shuffle(torch.tensor(i), groups).numpy())


def test_channel_shuffle_errors_match_pytorchs():
    for args in (((2, 4), 2), ((2, 5, 3), 2), ((2, 4, 3), 0)):
        with pytest.raises(RuntimeError):
            TF.channel_shuffle(torch.ones(args[0]), args[1])
        with pytest.raises(hx.errors.OpError, match="channel_shuffle: "):
            F.channel_shuffle(hx.ones(*args[0]), args[1])


@pytest.mark.gpu
def test_the_layers_run_on_the_gpu(be):
    a = np.random.default_rng(8).standard_normal((2, 4, 3, 2)).astype(np.float32)
    results = []
    for device in ("cpu", "gpu"):
        x = hx.tensor(a, device=device, requires_grad=True)
        y = F.rrelu(x, 0.1, 0.5) + hx.nn.Softmax2d()(x) + F.channel_shuffle(x, 2)
        y.sum().backward()
        assert y.device.type == device
        results.append((y.detach().cpu().numpy(), x.grad.cpu().numpy()))
        for fn in (F.alpha_dropout, F.feature_alpha_dropout, F.dropout1d, F.dropout3d):
            shaped = x.detach().reshape(2, 4, 6) if fn is F.dropout1d else x.detach()
            out = fn(shaped, 0.5, True)
            assert out.device.type == device and out.shape == shaped.shape
        out = F.rrelu(-hx.ones(200, device=device), 0.1, 0.5, True).cpu().numpy()
        assert (out <= -0.1).all() and (out >= -0.5).all() and len(np.unique(out)) > 150
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5, atol=1e-6)
