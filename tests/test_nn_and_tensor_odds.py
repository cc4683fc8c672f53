"""nn and functional pieces (LogSigmoid, SoftMarginLoss, CosineEmbeddingLoss,
LocalResponseNorm, CrossMapLRN2d, the Upsampling layers and F.upsample forms,
gumbel_softmax, pdist, the _with_indices pools, AdaptiveLogSoftmaxWithLoss,
SyncBatchNorm, nn.Buffer), the ATen forms of F's ops at the top level (torch.layer_norm,
torch.dropout...), and Tensor's odds (data_ptr, untyped_storage, resize_, new,
register_post_accumulate_grad_hook...), each against PyTorch."""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")
F, TF = hx.nn.functional, torch.nn.functional


def _arrays(*shapes, seed=0, scale=1.0):
    r = np.random.default_rng(seed)
    return [np.asarray(r.standard_normal(s) * scale) for s in shapes]


def _against_torch(ours, theirs, arrays, device, grad=True, ints=(), rtol=1e-11):
    """ours(*hx tensors) and theirs(*torch tensors) agree, forward and (where ``grad``)
    backward for a random output gradient: float64 on the CPU, float32 on the GPU.
    ``ints``: positions of integer inputs (no gradient)."""
    gpu = device == "gpu"
    dt = np.float32 if gpu else np.float64
    xs, ts = [], []
    for i, a in enumerate(arrays):
        if i in ints:
            xs.append(hx.tensor(a, device=device))
            ts.append(torch.tensor(a))
            continue
        xs.append(hx.tensor(a.astype(dt), device=device, requires_grad=grad))
        ts.append(torch.tensor(a.astype(dt), requires_grad=grad))
    got, want = ours(*xs), theirs(*ts)
    assert got.device.type == device and tuple(got.shape) == tuple(want.shape)
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    tol = {"rtol": 2e-5, "atol": 2e-6} if gpu else {"rtol": rtol, "atol": 1e-13}
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), **tol)
    if not grad:
        return
    g = np.random.default_rng(9).standard_normal(tuple(want.shape)).astype(dt)
    got.backward(hx.tensor(g, device=device))
    want.backward(torch.tensor(g))
    for i, (x, t) in enumerate(zip(xs, ts)):
        if i in ints or t.grad is None:
            continue
        np.testing.assert_allclose(x.grad.cpu().numpy(), t.grad.numpy(), **tol,
                                   err_msg=f"gradient of input {i}")


# -- F.logsigmoid and nn.LogSigmoid -------------------------------------------------------------
def test_logsigmoid_matches_pytorch_from_far_below_to_far_above(device):
    a = np.concatenate([np.array([-800.0, -40.0, -20.0, -1e-3, 0.0, 1e-3, 20.0, 40.0, 800.0]),
                        _arrays((20,), scale=5)[0]])
    if device == "gpu":
        a = a[np.abs(a) < 80]  # (float32: exp of what is left stays finite)
    _against_torch(F.logsigmoid, TF.logsigmoid, [a], device)


def test_logsigmoid_has_slope_one_half_at_zero_and_its_layer_is_pytorchs():
    x = hx.tensor([0.0], dtype=hx.float64, requires_grad=True)
    F.logsigmoid(x).sum().backward()
    assert x.grad.item() == 0.5
    layer = hx.nn.LogSigmoid()
    assert repr(layer) == repr(torch.nn.LogSigmoid()) == "LogSigmoid()"
    assert not list(layer.parameters()) and not layer.state_dict()
    a = _arrays((3, 4))[0]
    np.testing.assert_array_equal(layer(hx.tensor(a)).numpy(), F.logsigmoid(hx.tensor(a)).numpy())
    with pytest.raises(TypeError, match="LogSigmoid\\(\\) takes no arguments"):
        hx.nn.LogSigmoid(2)
    with pytest.raises(TypeError, match="logsigmoid: not defined for int64"):
        F.logsigmoid(hx.tensor([1, 2]))


# -- soft_margin_loss and cosine_embedding_loss -------------------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_soft_margin_loss_matches_pytorch(device, reduction):
    x, = _arrays((3, 4), scale=3)
    y = np.sign(_arrays((3, 4), seed=1)[0])
    _against_torch(lambda a: F.soft_margin_loss(a, hx.tensor(y.astype(a.dtype.np),
                                                             device=a.device),
                                                reduction=reduction),
                   lambda a: TF.soft_margin_loss(a, torch.tensor(y, dtype=a.dtype),
                                                 reduction=reduction), [x], device)


def test_soft_margin_loss_broadcasts_its_target_and_stays_finite():
    x, y = _arrays((3, 4), (4,), seed=2)
    _against_torch(lambda a, b: F.soft_margin_loss(a, b.detach()),
                   lambda a, b: TF.soft_margin_loss(a, b.detach()), [x, y], "cpu")
    big = F.soft_margin_loss(hx.tensor([-200.0]), hx.tensor([1.0]))
    assert big.item() == pytest.approx(200.0)  # (log1p(exp(200)) without overflowing)
    assert F.soft_margin_loss(hx.zeros(0, 3), hx.zeros(0, 3)).isnan().item()
    layer = hx.nn.SoftMarginLoss(reduction="sum")
    assert layer.reduction == "sum" and repr(hx.nn.SoftMarginLoss()) == "SoftMarginLoss()"
    with pytest.raises(Exception, match="not differentiable with respect to target"):
        F.soft_margin_loss(hx.ones(2), hx.ones(2, requires_grad=True))
    with pytest.raises(TypeError, match="soft_margin_loss: not defined for int64"):
        F.soft_margin_loss(hx.tensor([1, 2]), hx.tensor([1, 2]))
    with pytest.raises(ValueError, match="reduction must be"):
        F.soft_margin_loss(hx.ones(2), hx.ones(2), reduction="avg")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cosine_embedding_loss_matches_pytorch(device, reduction):
    a, b = _arrays((5, 4), (5, 4), seed=3)
    labels = np.array([1, -1, 0, -1, 1])
    _against_torch(
        lambda x, y, t: F.cosine_embedding_loss(x, y, t, 0.2, reduction=reduction),
        lambda x, y, t: TF.cosine_embedding_loss(x, y, t, 0.2, reduction=reduction),
        [a, b, labels], device, ints=(2,))


def test_cosine_embedding_loss_of_one_pair_zero_vectors_and_integers():
    a, b = _arrays((4,), (4,), seed=4)
    for label in (1, -1):
        _against_torch(lambda x, y, k=label: F.cosine_embedding_loss(x, y, hx.tensor(k)),
                       lambda x, y, k=label: TF.cosine_embedding_loss(x, y, torch.tensor(k)),
                       [a, b], "cpu")
    # (a zero vector: cosine 0, and the finite, large slope the 1e-12 under the root
    # gives, as PyTorch's: not a nan)
    _against_torch(lambda x, y: F.cosine_embedding_loss(x, y, hx.ones(2)),
                   lambda x, y: TF.cosine_embedding_loss(x, y, torch.ones(2)),
                   [np.zeros((2, 3)), np.ones((2, 3))], "cpu", rtol=1e-8)
    i = np.arange(6).reshape(2, 3)
    got = F.cosine_embedding_loss(hx.tensor(i), hx.tensor(i[::-1].copy()), hx.tensor([1, -1]))
    want = TF.cosine_embedding_loss(torch.tensor(i), torch.tensor(i[::-1].copy()),
                                    torch.tensor([1, -1]))
    assert got.dtype is hx.float32 and got.item() == pytest.approx(want.item(), rel=1e-6)
    layer, theirs = hx.nn.CosineEmbeddingLoss(0.5, reduction="sum"), \
        torch.nn.CosineEmbeddingLoss(0.5, reduction="sum")
    assert layer.margin == 0.5 and repr(layer) == repr(theirs)
    x, y = _arrays((3, 4), (3, 4), seed=5)
    t = np.array([1, -1, -1])
    assert layer(hx.tensor(x), hx.tensor(y), hx.tensor(t)).item() == pytest.approx(
        theirs(torch.tensor(x), torch.tensor(y), torch.tensor(t)).item(), rel=1e-12)


@pytest.mark.parametrize("shapes,message", [
    (((3, 4), (3, 5), (3,)), "must have one shape"),
    (((4,), (4,), (1,)), "a 1-D target expects 2-D inputs"),
    (((3, 4), (3, 4), (2,)), "a target of 2 labels for 3 pairs"),
    (((3, 4), (3, 4), (3, 1)), "expected a 0-d or 1-D target"),
])
def test_cosine_embedding_loss_refuses_what_pytorch_refuses(shapes, message):
    a, b, t = (hx.ones(*s) for s in shapes)
    with pytest.raises(Exception) as ours:
        F.cosine_embedding_loss(a, b, t)
    assert message in str(ours.value) and "cosine_embedding_loss" in str(ours.value)
    with pytest.raises(RuntimeError):
        TF.cosine_embedding_loss(*(torch.ones(*s) for s in shapes))


# -- local_response_norm, LocalResponseNorm, CrossMapLRN2d --------------------------------------
@pytest.mark.parametrize("shape,size", [((2, 5, 7), 3), ((2, 5, 7), 2), ((1, 6, 3, 4), 4),
                                        ((2, 3, 2, 2, 3), 5), ((1, 1, 4), 1)])
def test_local_response_norm_matches_pytorch(device, shape, size):
    a, = _arrays(shape, seed=6, scale=2)
    _against_torch(lambda x: F.local_response_norm(x, size, 0.5, 0.6, 1.5),
                   lambda x: TF.local_response_norm(x, size, 0.5, 0.6, 1.5), [a], device)


def test_local_response_norm_edges_and_its_layer():
    a, = _arrays((2, 6, 5), seed=7)
    strided = hx.tensor(a).transpose(1, 2).transpose(1, 2)[:, ::2]
    np.testing.assert_allclose(F.local_response_norm(strided, 2).numpy(),
                               TF.local_response_norm(torch.tensor(a)[:, ::2], 2).numpy(),
                               rtol=1e-12)
    empty = hx.zeros(2, 0, 3)
    assert F.local_response_norm(empty, 2) is empty
    i = (a * 4).astype(np.int64)
    np.testing.assert_array_equal(F.local_response_norm(hx.tensor(i), 3).numpy(),
                                  TF.local_response_norm(torch.tensor(i), 3).numpy())
    layer, theirs = hx.nn.LocalResponseNorm(3, k=2.0), torch.nn.LocalResponseNorm(3, k=2.0)
    assert repr(layer) == repr(theirs) and (layer.size, layer.alpha, layer.beta, layer.k) == \
        (3, 1e-4, 0.75, 2.0)
    np.testing.assert_allclose(layer(hx.tensor(a)).numpy(), theirs(torch.tensor(a)).numpy(),
                               rtol=1e-12)
    with pytest.raises(ValueError, match="expected an input of 3 or more dims"):
        F.local_response_norm(hx.ones(2, 3), 2)
    with pytest.raises(Exception, match="size .* must be a positive int, got 0"):
        F.local_response_norm(hx.ones(2, 3, 4), 0)


def _cross_map_reference(x, size, alpha, beta, k):
    """PyTorch's CrossMapLRN2d forward written with differentiable torch ops (its own
    backward is not the derivative of its forward): the channel windows it forms."""
    c = x.shape[1]
    ahead = int((size - 1) / 2 + 1)
    m = torch.zeros(c, c, dtype=x.dtype)
    m[0, :min(ahead, c)] = 1
    for i in range(1, c):
        m[i] = m[i - 1]
        if i < c - ahead + 1:
            m[i, i + ahead - 1] += 1
        if i > ahead:
            m[i, i - ahead] -= 1
    sums = torch.einsum("cj,njhw->nchw", m, x * x)
    return x * (k + alpha / size * sums) ** -beta


@pytest.mark.parametrize("size,channels", [(1, 3), (2, 4), (3, 6), (5, 7), (6, 3)])
def test_cross_map_lrn2d_matches_pytorchs_forward(device, size, channels):
    a, = _arrays((2, channels, 3, 2), seed=size, scale=2)
    theirs = torch.nn.CrossMapLRN2d(size, 0.3, 0.7, 1.5)
    got = hx.nn.CrossMapLRN2d(size, 0.3, 0.7, 1.5)(hx.tensor(a.astype(np.float32),
                                                             device=device))
    np.testing.assert_allclose(got.cpu().numpy(), theirs(torch.tensor(a, dtype=torch.float32))
                               .numpy(), rtol=2e-6, atol=1e-7)
    _against_torch(lambda x: hx.nn.CrossMapLRN2d(size, 0.3, 0.7, 1.5)(x),
                   lambda x: _cross_map_reference(x, size, 0.3, 0.7, 1.5), [a], device)
    assert torch.allclose(theirs(torch.tensor(a)), _cross_map_reference(torch.tensor(a), size,
                                                                         0.3, 0.7, 1.5))


def test_cross_map_lrn2d_shows_and_refuses_as_pytorchs():
    assert repr(hx.nn.CrossMapLRN2d(3)) == repr(torch.nn.CrossMapLRN2d(3))
    with pytest.raises(ValueError, match="CrossMapLRN2d: expected a 4D input"):
        hx.nn.CrossMapLRN2d(3)(hx.ones(2, 3, 4))
    with pytest.raises(ValueError):
        torch.nn.CrossMapLRN2d(3)(torch.ones(2, 3, 4))


# -- the upsample forms and layers; the pools' _with_indices forms ------------------------------
def test_the_upsample_functions_warn_and_equal_interpolate(device):
    a, = _arrays((1, 2, 3, 4), seed=8)
    for ours, theirs, kw in (
            (F.upsample, TF.upsample, {"scale_factor": 2, "mode": "bilinear"}),
            (F.upsample, TF.upsample, {"size": (5, 7)}),
            (F.upsample_nearest, TF.upsample_nearest, {"scale_factor": 3}),
            (F.upsample_bilinear, TF.upsample_bilinear, {"size": (4, 9)})):
        with pytest.warns(UserWarning, match=f"nn.functional.{ours.__name__}` is deprecated"):
            _against_torch(lambda x, f=ours, k=kw: f(x, **k),
                           lambda x, f=theirs, k=kw: f(x, **k), [a], device)
        assert list(inspect.signature(ours).parameters) == \
            list(inspect.signature(theirs).parameters)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(  # (bilinear with align_corners=True)
            F.upsample_bilinear(hx.tensor(a), scale_factor=2).numpy(),
            F.interpolate(hx.tensor(a), scale_factor=2, mode="bilinear",
                          align_corners=True).numpy())


def test_the_upsampling_layers_are_pytorchs(device):
    a, = _arrays((2, 3, 4, 5), seed=9)
    for cls, kw in (("UpsamplingNearest2d", {"scale_factor": 2}),
                    ("UpsamplingNearest2d", {"size": (3, 7)}),
                    ("UpsamplingBilinear2d", {"scale_factor": 1.5}),
                    ("UpsamplingBilinear2d", {"size": 6})):
        ours, theirs = getattr(hx.nn, cls)(**kw), getattr(torch.nn, cls)(**kw)
        assert repr(ours) == repr(theirs) and isinstance(ours, hx.nn.Upsample)
        assert (ours.mode, ours.align_corners) == (theirs.mode, theirs.align_corners)
        _against_torch(ours, theirs, [a], device)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_the_with_indices_pools_return_values_and_pytorchs_indices(d):
    a, = _arrays((2, 3) + (6,) * d, seed=10)
    pool, theirs = getattr(F, f"max_pool{d}d_with_indices"), \
        getattr(TF, f"max_pool{d}d_with_indices")
    got, want = pool(hx.tensor(a), 3, 2, 1), theirs(torch.tensor(a), 3, 2, 1)
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    adaptive = getattr(F, f"adaptive_max_pool{d}d_with_indices")
    got = adaptive(hx.tensor(a), 4, return_indices=False)  # (the flag is ignored)
    want = getattr(TF, f"adaptive_max_pool{d}d_with_indices")(torch.tensor(a), 4)
    assert isinstance(got, tuple)
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    for ours, pytorch in ((pool, theirs), (adaptive, getattr(TF, adaptive.__name__))):
        sig = inspect.signature(pytorch)
        assert [(p.name, p.default) for p in inspect.signature(ours).parameters.values()] == \
            [(p.name, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize("d", [2, 3])
def test_the_fractional_with_indices_pools_take_pytorchs_samples(d):
    a, = _arrays((1, 2) + (7,) * d, seed=17)
    samples = np.random.default_rng(3).random((1, 2, d))
    ours = getattr(F, f"fractional_max_pool{d}d_with_indices")(
        hx.tensor(a), 2, output_size=3, _random_samples=hx.tensor(samples))
    theirs = getattr(TF, f"fractional_max_pool{d}d_with_indices")(
        torch.tensor(a), 2, output_size=3, _random_samples=torch.tensor(samples))
    for got, want in zip(ours, theirs):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert [p.name for p in inspect.signature(getattr(F, f"fractional_max_pool{d}d_with_indices"))
            .parameters.values()] == list(inspect.signature(
                getattr(TF, f"fractional_max_pool{d}d_with_indices")).parameters)


def test_functional_conv_tbc_is_the_top_level_one():
    assert F.conv_tbc is hx.conv_tbc and TF.conv_tbc is torch.conv_tbc
    x, w, b = _arrays((5, 2, 3), (2, 3, 4), (4,), seed=18)
    _against_torch(lambda *v: F.conv_tbc(*v, 1), lambda *v: TF.conv_tbc(*v, 1), [x, w, b],
                   "cpu")
    with pytest.raises(Exception, match="conv_tbc: input channels 3 and bias 4 must match"):
        F.conv_tbc(hx.ones(5, 2, 3), hx.ones(2, 2, 4), hx.ones(4))


# -- gumbel_softmax ---------------------------------------------------------------------------
def test_gumbel_softmax_samples_rows_of_the_simplex_and_hard_one_hots():
    logits = hx.tensor(np.log([[0.7, 0.2, 0.1]] * 4000), requires_grad=True)
    hx.manual_seed(0)
    soft = F.gumbel_softmax(logits, tau=0.5)
    rows = soft.detach().numpy()
    np.testing.assert_allclose(rows.sum(1), 1.0, rtol=1e-6)
    assert (rows > 0).all()
    hx.manual_seed(0)
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    one_hot = hard.detach().numpy()
    assert set(np.unique(one_hot)) == {0.0, 1.0} and (one_hot.sum(1) == 1).all()
    # (the same draws: each hard sample is its soft sample's largest entry)
    np.testing.assert_array_equal(one_hot.argmax(1), rows.argmax(1))
    # the argmax of logits + Gumbel noise samples the softmax's categories
    np.testing.assert_allclose(one_hot.mean(0), [0.7, 0.2, 0.1], atol=0.03)
    # straight-through: the hard sample's gradient is the soft one's
    weights = hx.tensor(np.random.default_rng(1).standard_normal((4000, 3)))
    (hard * weights).sum().backward()
    via_hard = logits.grad.numpy().copy()
    logits.grad = None
    (soft * weights).sum().backward()
    np.testing.assert_allclose(via_hard, logits.grad.numpy(), rtol=1e-10, atol=1e-14)
    assert np.abs(via_hard).max() > 0.01


def test_gumbel_softmax_follows_dim_and_tau_and_refuses_integers():
    x = hx.tensor(np.zeros((3, 5)))
    hx.manual_seed(1)
    sharp = F.gumbel_softmax(x, tau=1e-4, dim=0).numpy()
    np.testing.assert_allclose(sharp.sum(0), 1.0, rtol=1e-9)
    assert (sharp.max(0) > 0.99).all()  # (a small tau: nearly one-hot already)
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated"):
        F.gumbel_softmax(x, eps=1e-3)
    with pytest.raises(TypeError, match="gumbel_softmax: logits must be floating point"):
        F.gumbel_softmax(hx.tensor([1, 2]))
    assert list(inspect.signature(F.gumbel_softmax).parameters) == \
        list(inspect.signature(TF.gumbel_softmax).parameters)


# -- pdist --------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0, 1, 1.5, 2, 3, math.inf])
def test_pdist_matches_pytorch(device, p):
    a, = _arrays((5, 3), seed=11)
    a[3] = a[1]  # (a zero distance: its gradient is 0)
    grad = device == "cpu" or p != 0
    _against_torch(lambda x: hx.pdist(x, p), lambda x: torch.pdist(x, p), [a], device,
                   grad=grad)


def test_pdist_edges_and_errors():
    assert F.pdist is hx.pdist
    for shape in ((1, 3), (0, 3), (4, 0)):
        got, want = hx.pdist(hx.zeros(*shape)), torch.pdist(torch.zeros(*shape))
        assert tuple(got.shape) == tuple(want.shape) and not got.numpy().any()
    a, = _arrays((4, 6), seed=12)
    view = hx.tensor(a).T[::2]
    np.testing.assert_allclose(hx.pdist(view).numpy(), torch.pdist(torch.tensor(a).T[::2])
                               .numpy(), rtol=1e-12)
    with pytest.raises(Exception, match="pdist: expected a 2-D input"):
        hx.pdist(hx.ones(3))
    with pytest.raises(Exception, match="pdist: p must be a non-negative number"):
        hx.pdist(hx.ones(3, 2), -1)
    with pytest.raises(TypeError, match="pdist: only floating point"):
        hx.pdist(hx.ones(3, 2, dtype=hx.int64))


# -- AdaptiveLogSoftmaxWithLoss -----------------------------------------------------------------
def _adaptive_pair(**kw):
    torch.manual_seed(0)
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], **kw).double()
    ours = hx.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], **kw).double()
    for p, q in zip(ours.parameters(), theirs.parameters()):
        with hx.no_grad():
            p.copy_(hx.tensor(q.detach().numpy()))
    return ours, theirs


@pytest.mark.parametrize("kw", [{}, {"div_value": 2.0, "head_bias": True}])
def test_adaptive_log_softmax_matches_pytorch(kw):
    ours, theirs = _adaptive_pair(**kw)
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert (ours.shortlist_size, ours.n_clusters, ours.head_size, ours.cutoffs) == \
        (theirs.shortlist_size, theirs.n_clusters, theirs.head_size, theirs.cutoffs)
    a, = _arrays((7, 8), seed=13)
    target = [0, 5, 9, 2, 3, 7, 6]
    x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    got, want = ours(x, hx.tensor(target)), theirs(t, torch.tensor(target))
    assert got._fields == ("output", "loss")
    np.testing.assert_allclose(got.output.detach().numpy(), want.output.detach().numpy(),
                               rtol=1e-12)
    assert got.loss.item() == pytest.approx(want.loss.item(), rel=1e-12)
    (got.output.sum() + got.loss).backward()
    (want.output.sum() + want.loss).backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-14)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-14,
                                   err_msg=name)
    np.testing.assert_allclose(ours.log_prob(hx.tensor(a)).detach().numpy(),
                               theirs.log_prob(torch.tensor(a)).detach().numpy(), rtol=1e-12)
    for scale in (0.1, 5.0, 50.0):  # (heads picking the shortlist, clusters, a mix)
        np.testing.assert_array_equal(ours.predict(hx.tensor(a * scale)).numpy(),
                                      theirs.predict(torch.tensor(a * scale)).numpy())
    one, ref = ours(hx.tensor(a[0]), hx.tensor(7)), theirs(torch.tensor(a[0]), torch.tensor(7))
    assert one.output.shape == () and one.output.item() == pytest.approx(ref.output.item())


def test_adaptive_log_softmax_refuses_what_pytorch_refuses():
    ours, _ = _adaptive_pair()
    with pytest.raises(RuntimeError, match=r"target values should be in \[0, 9\]"):
        ours(hx.ones(2, 8, dtype=hx.float64), hx.tensor([1, 10]))
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        ours(hx.ones(2, 8, dtype=hx.float64), hx.tensor([1, 2, 3]))
    with pytest.raises(RuntimeError, match="multi-target not supported"):
        ours(hx.ones(2, 8, dtype=hx.float64), hx.tensor([[1], [2]]))
    for cutoffs in ([6, 3], [0, 4], [3, 10], [3, 3]):
        with pytest.raises(ValueError, match="cutoffs should be a sequence of unique"):
            hx.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs)
        with pytest.raises(ValueError):
            torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs)


# -- SyncBatchNorm and nn.Buffer ----------------------------------------------------------------
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 2, 2, 3)])
def test_sync_batch_norm_normalizes_as_pytorchs_does_outside_a_group(shape):
    ours, theirs = hx.nn.SyncBatchNorm(3).double(), torch.nn.SyncBatchNorm(3).double()
    assert repr(ours) == repr(theirs)
    a, = _arrays(shape, seed=14, scale=3)
    for _ in range(2):
        _against_torch(ours, theirs, [a], "cpu")
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(getattr(ours, name).numpy(), getattr(theirs, name).numpy(),
                                   rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-10)
    ours.eval(), theirs.eval()
    _against_torch(ours, theirs, [a], "cpu")
    with pytest.raises(ValueError, match="expected at least 2D input"):
        ours(hx.ones(3))
    with pytest.raises(ValueError, match="process_group must be None"):
        hx.nn.SyncBatchNorm(3, process_group=object())


def test_convert_sync_batchnorm_swaps_batch_norms_and_keeps_their_state():
    nn = hx.nn
    model = nn.Sequential(nn.Conv2d(1, 3, 1), nn.BatchNorm2d(3),
                          nn.Sequential(nn.BatchNorm1d(3, affine=False)), nn.InstanceNorm2d(3))
    model[1].eval()
    weight, mean = model[1].weight, model[1].running_mean
    out = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    tmodel = torch.nn.Sequential(torch.nn.Conv2d(1, 3, 1), torch.nn.BatchNorm2d(3),
                                 torch.nn.Sequential(torch.nn.BatchNorm1d(3, affine=False)),
                                 torch.nn.InstanceNorm2d(3))
    assert repr(out) == repr(torch.nn.SyncBatchNorm.convert_sync_batchnorm(tmodel))
    assert out is model and type(out[1]) is nn.SyncBatchNorm
    assert type(out[2][0]) is nn.SyncBatchNorm and type(out[3]) is nn.InstanceNorm2d
    assert out[1].weight is weight and out[1].running_mean is mean and not out[1].training
    single = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm1d(2))
    assert type(single) is nn.SyncBatchNorm


def test_a_buffer_assigned_to_a_module_is_registered_as_pytorchs():
    class Holder(hx.nn.Module):
        def __init__(self):
            super().__init__()
            self.kept = hx.nn.Buffer(hx.ones(2))
            self.scratch = hx.nn.Buffer(hx.zeros(1), persistent=False)

    m = Holder()
    assert list(m.state_dict()) == ["kept"]
    assert [n for n, _ in m.named_buffers()] == ["kept", "scratch"]
    assert type(m.kept) is hx.Tensor and m.to(hx.float64).kept.dtype is hx.float64
    m.kept = hx.ones(3)  # (reassigned: still a buffer)
    assert [n for n, _ in m.named_buffers()] == ["kept", "scratch"]
    b = hx.nn.Buffer(hx.ones(2, requires_grad=True))
    assert b.persistent and b.requires_grad and isinstance(b, hx.Tensor)
    assert hx.nn.Buffer().shape == (0,)
    m.weight = hx.nn.Parameter(hx.ones(1))
    with pytest.raises(TypeError, match="cannot assign a Buffer as parameter 'weight'"):
        m.weight = hx.nn.Buffer(hx.ones(1))
    assert list(inspect.signature(hx.nn.Buffer.__new__).parameters) == \
        list(inspect.signature(torch.nn.Buffer.__new__).parameters)


# -- the ATen forms at the top level ------------------------------------------------------------
ATEN_FORMS = ["layer_norm", "group_norm", "instance_norm", "batch_norm", "rms_norm", "dropout",
              "dropout_", "alpha_dropout", "alpha_dropout_", "feature_alpha_dropout",
              "feature_alpha_dropout_", "feature_dropout", "feature_dropout_", "embedding",
              "kl_div", "binary_cross_entropy_with_logits", "hinge_embedding_loss",
              "margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss",
              "poisson_nll_loss", "ctc_loss", "max_pool1d", "max_pool2d", "max_pool3d",
              "max_pool1d_with_indices", "adaptive_max_pool1d", "constant_pad_nd",
              "convolution", "conv_tbc", "rrelu", "rrelu_", "pdist"]


@pytest.mark.parametrize("name", ATEN_FORMS)
def test_each_top_level_form_has_its_aten_signature(name):
    schema = torch._C._jit_get_schemas_for_operator(f"aten::{name}")[0]
    want = [("input" if a.name == "self" else a.name, a.kwarg_only,
             not a.has_default_value()) for a in schema.arguments if a.name != "out"]
    params = inspect.signature(getattr(hx, name)).parameters.values()
    got = [(p.name, p.kind is inspect.Parameter.KEYWORD_ONLY, p.default is p.empty)
           for p in params]
    assert got == want


def test_the_top_level_forms_compute_what_pytorchs_do():
    r = np.random.default_rng(15)
    a = r.standard_normal((2, 3, 4, 5))
    x, t = hx.tensor(a), torch.tensor(a)
    y = r.standard_normal((4, 6))
    h, g = hx.tensor(y), torch.tensor(y)
    w, b = r.standard_normal(5), r.standard_normal(5)
    weight, kernel = r.standard_normal((4, 3, 2, 2)), r.standard_normal((3, 2, 2, 2))
    tbc = (r.standard_normal((6, 2, 3)), r.standard_normal((3, 3, 4)), r.standard_normal(4))
    rows = r.standard_normal((5, 3))

    def both(lib):
        T = lib.tensor
        X, Y = (x, h) if lib is hx else (t, g)
        pairs = [
            lib.layer_norm(X, (5,), T(w), T(b), 1e-5, True),
            lib.group_norm(X, 3, None, None, 1e-3, True),
            lib.instance_norm(X, None, None, None, None, True, 0.1,
                              1e-5, True),
            lib.batch_norm(X, None, None, T(np.zeros(3)), T(np.ones(3)),
                           False, 0.1, 1e-5, True),
            lib.rms_norm(X, (4, 5)),
            lib.dropout(X, 0.5, False),
            lib.kl_div(Y, Y.exp(), 0),
            lib.kl_div(Y, Y.exp()),  # (PyTorch's default: 0, none)
            lib.kl_div(Y, Y.exp(), 1),
            lib.hinge_embedding_loss(Y, Y.sign()),
            lib.cosine_embedding_loss(Y, Y.flip(0), T([1.0, -1.0, 1.0, -1.0])),
            lib.ctc_loss(T(y.reshape(4, 2, 3)).log_softmax(2), T([[1, 2], [1, 1]]), [4, 3],
                         [2, 2]),
            lib.binary_cross_entropy_with_logits(Y,
                                                 Y.sigmoid(), None,
                                                 T(np.full(6, 2.0)), 2),
            lib.hinge_embedding_loss(Y, Y.sign(),
                                     0.5, 0),
            lib.margin_ranking_loss(Y, Y.flip(0),
                                    Y.sign(), 0.2, 1),
            lib.cosine_embedding_loss(Y, Y.flip(0),
                                      T([1.0, -1.0, 1.0, -1.0]), 0.2, 0),
            lib.triplet_margin_loss(Y, Y.flip(0),
                                    Y.flip(1), 1.0, 2.0, 1e-6, True, 2),
            lib.poisson_nll_loss(Y, Y.abs(), True,
                                 True, 1e-8, 0),
            lib.ctc_loss(T(y.reshape(4, 2, 3)).log_softmax(2), T([[1, 2], [1, 1]]), [4, 3],
                         [2, 2], 0, 2, False),
            lib.max_pool2d(X, 2),
            lib.max_pool1d(X[0], 2, 1, 1),
            lib.max_pool3d(X, (1, 2, 2), (), 0, 1, True),
            lib.max_pool1d_with_indices(X[0], 3, 2)[1],
            lib.adaptive_max_pool1d(X[0], 2)[0],
            lib.adaptive_max_pool1d(X[0], 2)[1],
            lib.constant_pad_nd(X, (1, -1, 2, 0), 2.5),
            lib.convolution(X, T(weight), None, (1, 1), (1, 0), (1, 1),
                            False, (0, 0), 1),
            lib.convolution(X, T(kernel), T(np.arange(2.0)), (2, 1),
                            (1, 0), (1, 1), True, (1, 0), 1),
            lib.conv_tbc(*(T(v) for v in tbc), 1),
            lib.embedding(T(rows), T([[0, 4], [2, 2]])),
            lib.rrelu(Y),
            lib.feature_dropout(X, 0.0, True),
            lib.pdist(T(rows), 1.5),
        ]
        return pairs

    for i, (ours, theirs) in enumerate(zip(both(hx), both(torch))):
        assert tuple(ours.shape) == tuple(theirs.shape), i
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-11, atol=1e-13,
                                   err_msg=f"form {i}")


def test_the_top_level_dropouts_draw_and_write_as_pytorchs():
    hx.manual_seed(2)
    x = hx.ones(400, 8, 2, 2, 2)
    y = hx.feature_dropout(x, 0.5, True).numpy().reshape(400, 8, -1)
    assert (y.std(-1) == 0).all() and set(np.unique(y)) == {0.0, 2.0}  # (whole channels)
    assert 0.4 < (y[..., 0] == 0).mean() < 0.6
    z = hx.ones(50, 50)
    assert hx.dropout_(z, 0.5, True) is z and (z.numpy() == 0).any()
    assert hx.dropout(x, 0.5, False) is x
    with pytest.raises(TypeError, match="reduction is ATen's int here"):
        hx.kl_div(hx.ones(2), hx.ones(2), "sum")
    with pytest.raises(Exception, match="scale_grad_by_freq and sparse"):
        hx.embedding(hx.ones(3, 2), hx.tensor([0]), -1, True)
    with pytest.raises(Exception, match="output_padding is for transposed"):
        hx.convolution(hx.ones(1, 1, 3), hx.ones(1, 1, 2), None, (1,), (0,), (1,), False,
                       (1,), 1)


# -- Tensor's odds ------------------------------------------------------------------------------
def test_post_accumulate_grad_hooks_run_after_each_accumulation_as_pytorchs():
    log = {}
    for lib in (hx, torch):
        p = lib.ones(2, requires_grad=True)
        seen = []
        handle = p.register_post_accumulate_grad_hook(
            lambda t, seen=seen: seen.append(t.grad.detach().clone().numpy()))
        (p * 3).sum().backward()
        (p * p).sum().backward()
        handle.remove()
        (p * 5).sum().backward()
        log[lib] = (seen, p.grad.detach().numpy())
    assert len(log[hx][0]) == 2
    for ours, theirs in zip(log[hx][0], log[torch][0]):
        np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(log[hx][1], log[torch][1])
    with pytest.raises(RuntimeError, match="cannot be registered on non-leaf"):
        (hx.ones(2, requires_grad=True) * 2).register_post_accumulate_grad_hook(print)
    with pytest.raises(RuntimeError, match="doesn't require grad"):
        hx.ones(2).register_post_accumulate_grad_hook(print)


def test_post_accumulate_grad_hook_can_step_the_parameter():
    p = hx.tensor([1.0, 2.0], requires_grad=True)

    def step(t):  # (an optimizer step per parameter, as in PyTorch's docs)
        with hx.no_grad():
            t.sub_(0.5 * t.grad)
        t.grad = None

    p.register_post_accumulate_grad_hook(step)
    (p * p).sum().backward()
    np.testing.assert_array_equal(p.detach().numpy(), [0.0, 0.0])
    assert p.grad is None


def test_data_ptr_and_untyped_storage_read_as_pytorchs():
    for lib in (hx, torch):
        z = lib.arange(12.0)
        view = z[3:]
        assert view.data_ptr() - z.data_ptr() == 12
        assert view.untyped_storage().data_ptr() == z.data_ptr()
        assert view.untyped_storage().nbytes() == view.untyped_storage().size() == 48
        assert z.reshape(3, 4).T.data_ptr() == z.data_ptr()
        assert lib.empty(0).data_ptr() == 0
        assert z.clone().data_ptr() != z.data_ptr()
        assert z.is_pinned() is False and z.is_shared() is False
        assert z.share_memory_() is z and z.is_shared() and view.is_shared()
    z = hx.arange(5.0)
    assert z[1:].data_ptr() == z.numpy()[1:].ctypes.data  # (the numpy view's address)


@pytest.mark.gpu
def test_gpu_pointers_name_their_buffer_and_offset(be):
    z = hx.arange(12.0, device="gpu")
    assert z[3:].data_ptr() - z.data_ptr() == 12 and z.data_ptr() != 0
    assert z[3:].untyped_storage() == z.untyped_storage() and z.is_shared()
    assert z.clone().data_ptr() != z.data_ptr()


def test_resize_keeps_the_storage_when_it_is_large_enough_as_pytorchs():
    results = {}
    for lib in (hx, torch):
        s = lib.arange(6.0)
        v = s[2:]
        v.resize_(2, 2)
        kept = (v.storage_offset(), v.data_ptr() - s.data_ptr(), v.numpy().tolist())
        v.resize_(1)
        shrunk = (v.shape, v.numpy().tolist())
        w = lib.arange(4.0)
        w.resize_as_(lib.ones(2, 3))
        grown = (tuple(w.shape), w.storage_offset(), w.flatten()[:4].numpy().tolist(),
                 w.untyped_storage().nbytes())
        results[lib] = kept, tuple(shrunk[0]), shrunk[1], grown
    assert results[hx] == results[torch]
    with pytest.raises(RuntimeError, match="cannot resize tensors that require grad"):
        hx.ones(2, requires_grad=True).resize_(3)


@pytest.mark.gpu
def test_resize_new_and_hooks_on_the_gpu(be):
    s = hx.arange(6.0, device="gpu")
    v = s[2:]
    v.resize_(2, 2)
    assert v.storage_offset() == 2 and v.cpu().numpy().tolist() == [[2.0, 3.0], [4.0, 5.0]]
    v.resize_(3, 3)  # (a larger storage, the old elements first)
    assert v.device.type == "gpu" and v.flatten()[:4].cpu().numpy().tolist() == [2.0, 3.0,
                                                                                  4.0, 5.0]
    n = s.new_empty_strided((2, 3), (1, 2))
    assert n.device.type == "gpu" and n.stride() == (1, 2)
    assert s.new([1, 2]).device.type == "gpu"
    p = hx.ones(2, device="gpu", requires_grad=True)
    seen = []
    p.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.cpu().numpy().tolist()))
    (p * 3).sum().backward()
    assert seen == [[3.0, 3.0]]


def test_new_new_empty_strided_and_as_subclass_as_pytorchs():
    x, t = hx.randn(2), torch.randn(2)
    for ours, theirs in ((x.new(), t.new()), (x.new(2, 3), t.new(2, 3)),
                         (x.new((2, 3)), t.new((2, 3))), (x.new([1, 2]), t.new([1, 2])),
                         (x.new(hx.Size([4])), t.new(torch.Size([4])))):
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype is hx.float32
    i = hx.ones(2, dtype=hx.int64).new([1.5, 2.0])
    assert i.dtype is hx.int64 and i.tolist() == [1, 2]
    assert x.new(x).data_ptr() == x.data_ptr()
    n = x.new_empty_strided((2, 3), (1, 2))
    tn = t.new_empty_strided((2, 3), (1, 2))
    assert n.stride() == tn.stride() and \
        n.untyped_storage().nbytes() == tn.untyped_storage().nbytes()
    d = x.new_empty_strided((2, 2), (2, 1), dtype=hx.float64, requires_grad=True)
    assert d.dtype is hx.float64 and d.requires_grad and d.is_leaf

    class Tagged(hx.Tensor):
        pass

    leaf = hx.tensor([1.0, 2.0], requires_grad=True)
    tagged = leaf.as_subclass(Tagged)
    assert type(tagged) is Tagged and tagged.data_ptr() == leaf.data_ptr()
    assert tagged.requires_grad and tagged.grad_fn is not None  # (in the graph, as PyTorch's)
    (tagged * tagged).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), [2.0, 4.0])
    assert type(hx.ones(2).as_subclass(Tagged)) is Tagged
    with pytest.raises(TypeError, match="cls must be a subclass of Tensor"):
        leaf.as_subclass(int)


def test_apply_and_map_call_python_per_element_as_pytorchs():
    for dtype in (hx.float32, hx.int64):
        a = hx.arange(6, dtype=dtype).reshape(2, 3)
        t = torch.arange(6, dtype=getattr(torch, dtype.name)).reshape(2, 3)
        assert a.apply_(lambda v: v * 10 + 1) is a
        t.apply_(lambda v: v * 10 + 1)
        np.testing.assert_array_equal(a.numpy(), t.numpy())
        a.map_(hx.tensor([1, 2, 3], dtype=dtype), lambda u, w: u - w)
        t.map_(torch.tensor([1, 2, 3], dtype=t.dtype), lambda u, w: u - w)
        np.testing.assert_array_equal(a.numpy(), t.numpy())
    view = hx.zeros(3, 4)[:, ::2]
    view.apply_(lambda v: 7.0)
    assert view.numpy().tolist() == [[7.0, 7.0]] * 3
    with pytest.raises(RuntimeError, match="Can't call apply_\\(\\) on a tensor that requires"):
        hx.ones(2, requires_grad=True).apply_(float)


def test_real_tensors_are_their_own_conjugates_as_in_pytorch():
    x = hx.randn(2, 3)
    for name in ("conj", "resolve_conj", "resolve_neg", "conj_physical"):
        assert getattr(x, name)() is x and getattr(hx, name)(x) is x
    assert x.real is x and hx.real(x) is x
    assert not x.is_conj() and not x.is_neg() and not x.is_inference()
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with "
                                           "non-complex dtypes"):
        _ = x.imag
    with pytest.raises(RuntimeError):
        _ = torch.randn(2).imag
    assert x.output_nr == 0 and (x * 2).output_nr == 0


@pytest.mark.parametrize("shape", [(2, 3), (4, 2, 3), ()])
def test_H_mH_and_adjoint_are_pytorchs_transposes(shape):
    a, = _arrays(shape, seed=16)
    x, t = hx.tensor(a), torch.tensor(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (both warn on 0-d)
        for ours, theirs in ((lambda v: v.mH, lambda v: v.mH),
                             (lambda v: v.adjoint(), lambda v: v.adjoint()),
                             (lambda v: hx.adjoint(v), lambda v: torch.adjoint(v))):
            np.testing.assert_array_equal(ours(x).numpy(), theirs(t).numpy())
        if len(shape) != 3:
            np.testing.assert_array_equal(x.H.numpy(), t.H.numpy())
    if len(shape) == 3:
        with pytest.raises(Exception, match="tensor.H is only supported on matrices"):
            _ = x.H
    with pytest.raises(Exception, match="only supported on matrices or batches"):
        _ = hx.ones(3).mH
    y = hx.ones(2, 3, requires_grad=True)
    (y.mH * hx.tensor([[1.0, 2.0]] * 3)).sum().backward()
    assert y.grad.numpy().tolist() == [[1.0] * 3, [2.0] * 3]
