"""multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss,
hinge_embedding_loss and triplet_margin_with_distance_loss against PyTorch: values and
float64 gradients over their options and reductions, unbatched, 0-size and strided
inputs, their layers and their errors."""

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import haelixe as hx
import haelixe.nn.functional as F

REDUCTIONS = ("mean", "sum", "none")


def _pair(a, grad=True):
    return (hx.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad))


def _check(got, want, xs, ts, rtol=1e-10):
    """Values, then the gradients of every float input under one random cotangent."""
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol,
                               atol=1e-12)
    assert got.shape == tuple(want.shape) and got.dtype.name == str(want.dtype)[6:]
    g = np.random.default_rng(7).standard_normal(tuple(want.shape))
    got.backward(hx.tensor(g))
    want.backward(torch.tensor(g))
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=1e-12)


def _scores(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- multi_margin_loss --------------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", (1, 2))
@pytest.mark.parametrize("weighted", (False, True))
def test_multi_margin_loss_matches_pytorch(reduction, p, weighted):
    a, labels = _scores((5, 4)), np.array([0, 3, 3, 1, 2])
    w = np.random.default_rng(1).random(4) + 0.1
    (x, t), (wx, wt) = _pair(a), _pair(w, grad=False)  # (weight: no gradient, as there)
    kw = {"p": p, "margin": 0.8, "reduction": reduction}
    got = F.multi_margin_loss(x, hx.tensor(labels), weight=wx if weighted else None, **kw)
    want = TF.multi_margin_loss(t, torch.tensor(labels), weight=wt if weighted else None,
                                **kw)
    _check(got, want, [x], [t])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multi_margin_loss_of_one_sample_and_of_a_strided_batch(reduction):
    a = _scores((6,))
    x, t = _pair(a)
    _check(F.multi_margin_loss(x, hx.tensor(4), reduction=reduction),
           TF.multi_margin_loss(t, torch.tensor(4), reduction=reduction), [x], [t])
    b = _scores((4, 8), 2)
    x, t = _pair(b)
    labels = np.array([1, 0, 3, 2])
    _check(F.multi_margin_loss(x[:, ::2], hx.tensor(labels), reduction=reduction),
           TF.multi_margin_loss(t[:, ::2], torch.tensor(labels), reduction=reduction),
           [x], [t])
    x, t = _pair(b.T.copy())  # (a transposed view: columns as samples)
    _check(F.multi_margin_loss(x.T, hx.tensor(labels), reduction=reduction),
           TF.multi_margin_loss(t.T, torch.tensor(labels), reduction=reduction), [x], [t])


def test_multi_margin_loss_layer_holds_its_options():
    w = np.array([1.0, 2.0, 0.5])
    ours = hx.nn.MultiMarginLoss(2, 0.5, hx.tensor(w), reduction="sum")
    theirs = torch.nn.MultiMarginLoss(2, 0.5, torch.tensor(w), reduction="sum")
    assert repr(ours) == repr(theirs) and list(ours.state_dict()) == ["weight"]
    a = _scores((4, 3))
    labels = np.array([2, 0, 1, 1])
    np.testing.assert_allclose(ours(hx.tensor(a), hx.tensor(labels)).numpy(),
                               theirs(torch.tensor(a), torch.tensor(labels)).numpy(),
                               rtol=1e-12)


# -- multilabel_margin_loss ---------------------------------------------------------------

LISTS = np.array([[3, 0, -1, 1, 2], [1, 2, 4, 0, 3], [-1, 0, 0, 0, 0], [2, 2, -1, 3, 3]])


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin_loss_matches_pytorch(reduction):
    a = _scores((4, 5)) * 0.5  # (small scores: most pairs inside the margin)
    x, t = _pair(a)
    _check(F.multilabel_margin_loss(x, hx.tensor(LISTS), reduction=reduction),
           TF.multilabel_margin_loss(t, torch.tensor(LISTS), reduction=reduction), [x], [t])
    assert F.multilabel_margin_loss(x, hx.tensor(LISTS), reduction="sum").item() > 0


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin_loss_of_one_sample_and_of_a_strided_batch(reduction):
    a = _scores((5,), 3)
    x, t = _pair(a)
    lst = np.array([4, 1, -1, 0, 0])
    _check(F.multilabel_margin_loss(x, hx.tensor(lst), reduction=reduction),
           TF.multilabel_margin_loss(t, torch.tensor(lst), reduction=reduction), [x], [t])
    x, t = _pair(_scores((4, 10), 4))
    _check(F.multilabel_margin_loss(x[:, 1::2], hx.tensor(LISTS), reduction=reduction),
           TF.multilabel_margin_loss(t[:, 1::2], torch.tensor(LISTS), reduction=reduction),
           [x], [t])


# -- multilabel_soft_margin_loss ------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", (False, True))
def test_multilabel_soft_margin_loss_matches_pytorch(reduction, weighted):
    a = _scores((4, 5)) * 30  # (large scores: the stable form; a zero: slope 1/2)
    a[0, 0] = 0.0
    y = (np.random.default_rng(5).random((4, 5)) > 0.5) * 1.0
    w = np.random.default_rng(6).random(5)
    (x, t), (yx, yt), (wx, wt) = _pair(a), _pair(y), _pair(w)
    got = F.multilabel_soft_margin_loss(x, yx, weight=wx if weighted else None,
                                        reduction=reduction)
    want = TF.multilabel_soft_margin_loss(t, yt, weight=wt if weighted else None,
                                          reduction=reduction)
    _check(got, want, [x, yx] + ([wx] if weighted else []),
           [t, yt] + ([wt] if weighted else []))


def test_multilabel_soft_margin_loss_of_one_sample_and_strided():
    x, t = _pair(_scores((6,)))
    y = np.array([1.0, 0, 0, 1, 1, 0])
    _check(F.multilabel_soft_margin_loss(x, hx.tensor(y), reduction="none"),
           TF.multilabel_soft_margin_loss(t, torch.tensor(y), reduction="none"), [x], [t])
    x, t = _pair(_scores((5, 4)))
    y = np.random.default_rng(2).random((4, 5))
    _check(F.multilabel_soft_margin_loss(x.T, hx.tensor(y)),
           TF.multilabel_soft_margin_loss(t.T, torch.tensor(y)), [x], [t])


# -- hinge_embedding_loss -------------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", (1.0, 0.3))
def test_hinge_embedding_loss_matches_pytorch(reduction, margin):
    a = np.abs(_scores((3, 4)))
    y = np.array([[1, -1, 1, -1]] * 3, dtype=np.float64)
    x, t = _pair(a)
    _check(F.hinge_embedding_loss(x, hx.tensor(y), margin, reduction=reduction),
           TF.hinge_embedding_loss(t, torch.tensor(y), margin, reduction=reduction),
           [x], [t])
    # broadcast labels, a strided input
    x, t = _pair(np.abs(_scores((4, 6))))
    yb = np.array([1.0, -1.0, -1.0])
    _check(F.hinge_embedding_loss(x[::2, ::2], hx.tensor(yb), margin, reduction=reduction),
           TF.hinge_embedding_loss(t[::2, ::2], torch.tensor(yb), margin,
                                   reduction=reduction), [x], [t])


def test_hinge_embedding_loss_keeps_the_inputs_dtype_as_pytorch():
    x = np.array([-2, 0, 1, 3], dtype=np.int16)
    y = np.array([1, -1, -1, -1])
    got = F.hinge_embedding_loss(hx.tensor(x), hx.tensor(y), 2.7, reduction="none")
    want = TF.hinge_embedding_loss(torch.tensor(x), torch.tensor(y), 2.7, reduction="none")
    assert got.dtype == hx.int16
    np.testing.assert_array_equal(got.numpy(), want.numpy())  # (the margin read as 2)
    got = F.hinge_embedding_loss(hx.tensor(x.astype(np.float32)),
                                 hx.tensor(y.astype(np.float64)), reduction="none")
    assert got.dtype == hx.float32
    with pytest.raises(TypeError, match="hinge_embedding_loss: not defined for bool"):
        F.hinge_embedding_loss(hx.tensor([True]), hx.tensor([1]))


# -- triplet_margin_with_distance_loss ------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("swap", (False, True))
def test_triplet_margin_with_distance_loss_matches_pytorch(reduction, swap):
    rng = np.random.default_rng(8)
    arrays = [rng.standard_normal((5, 3)) for _ in range(3)]
    pairs = [_pair(a) for a in arrays]
    ours = [p[0] for p in pairs]
    theirs = [p[1] for p in pairs]
    _check(F.triplet_margin_with_distance_loss(*ours, swap=swap, margin=2.0,
                                               reduction=reduction),
           TF.triplet_margin_with_distance_loss(*theirs, swap=swap, margin=2.0,
                                                reduction=reduction), ours, theirs)


def test_triplet_margin_with_distance_loss_takes_any_distance_and_its_layer():
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal((4, 6)) for _ in range(3)]
    pairs = [_pair(a) for a in arrays]
    ours = [p[0][:, ::2] for p in pairs]
    theirs = [p[1][:, ::2] for p in pairs]

    def cosine(lib):
        return lambda a, b: 1.0 - lib.nn.functional.cosine_similarity(a, b)
    layer = hx.nn.TripletMarginWithDistanceLoss(distance_function=cosine(hx), margin=0.5,
                                               swap=True)
    reference = torch.nn.TripletMarginWithDistanceLoss(distance_function=cosine(torch),
                                                       margin=0.5, swap=True)
    _check(layer(*ours), reference(*theirs), [p[0] for p in pairs], [p[1] for p in pairs])
    assert repr(hx.nn.TripletMarginWithDistanceLoss()) == \
        repr(torch.nn.TripletMarginWithDistanceLoss())
    with pytest.raises(ValueError, match="margin must be > 0"):
        hx.nn.TripletMarginWithDistanceLoss(margin=0.0)
    with pytest.raises(TypeError):
        hx.nn.TripletMarginWithDistanceLoss(None)  # (keyword-only, as PyTorch's)


# -- all of them ----------------------------------------------------------------------------

def _calls(lib, n):
    """Each loss on a batch of ``n`` samples of 4 classes, by name."""
    functional = lib.nn.functional
    x = lib.zeros(n, 4, dtype=lib.float64)
    labels = lib.zeros(n, dtype=lib.int64)
    return {
        "multi_margin_loss": lambda r: functional.multi_margin_loss(x, labels, reduction=r),
        "multilabel_margin_loss": lambda r: functional.multilabel_margin_loss(
            x, lib.zeros(n, 4, dtype=lib.int64), reduction=r),
        "multilabel_soft_margin_loss": lambda r: functional.multilabel_soft_margin_loss(
            x, x, reduction=r),
        "hinge_embedding_loss": lambda r: functional.hinge_embedding_loss(x, x, reduction=r),
        "triplet_margin_with_distance_loss": lambda r: functional.
        triplet_margin_with_distance_loss(x, x, x, reduction=r),
    }


@pytest.mark.parametrize("name", list(_calls(hx, 0)))
def test_an_empty_batch_gives_an_empty_loss_and_a_zero_sum(name):
    """reduction='none' as PyTorch's; 'sum' is 0 (PyTorch's multi_margin_loss and
    multilabel_margin_loss leave their empty sums unwritten, so no value to match)."""
    got, want = _calls(hx, 0)[name]("none"), _calls(torch, 0)[name]("none")
    assert got.shape == tuple(want.shape)
    assert _calls(hx, 0)[name]("sum").item() == 0.0


@pytest.mark.parametrize("call,message", [
    (lambda: F.multi_margin_loss(hx.ones(2, 3), hx.tensor([0, 1]), p=3), "only p == 1 and"),
    (lambda: F.multi_margin_loss(hx.ones(2, 3), hx.tensor([0, 3])), r"outside \[0, 3\)"),
    (lambda: F.multi_margin_loss(hx.ones(2, 3), hx.tensor([0, 1, 1])), "one label per"),
    (lambda: F.multi_margin_loss(hx.ones(2, 3), hx.tensor([0.0, 1.0])), "int64 class"),
    (lambda: F.multi_margin_loss(hx.ones(2, 3, 1), hx.tensor([0, 1])), r"\(N, C\) matrix"),
    (lambda: F.multi_margin_loss(hx.ones(2, 3), hx.tensor([0, 1]), weight=hx.ones(2)),
     r"one weight per class \(3,\)"),
    (lambda: F.multi_margin_loss(hx.tensor([1, 2]), hx.tensor(0)), "not defined for int64"),
    (lambda: F.multilabel_margin_loss(hx.ones(2, 3), hx.tensor([0, 1])), "input's shape"),
    (lambda: F.multilabel_margin_loss(hx.ones(1, 3), hx.tensor([[0, 3, -1]])),
     r"outside \[-1, 3\)"),
    (lambda: F.multilabel_soft_margin_loss(hx.ones(2), hx.ones(2), reduction="avg"),
     "reduction must be"),
    (lambda: F.hinge_embedding_loss(hx.ones(2), [1, -1]), "target must be a tensor"),
    (lambda: F.triplet_margin_with_distance_loss(hx.ones(2, 3), hx.ones(2, 3), hx.ones(3)),
     "one number of dimensions"),
    (lambda: F.triplet_margin_with_distance_loss(hx.ones(2), hx.ones(2), hx.ones(2),
                                                 margin=-1.0), "margin must be > 0"),
    (lambda: hx.nn.MultiMarginLoss(p=3), "only p == 1 and p == 2"),
    (lambda: F.multi_margin_loss(hx.ones(2, 3), hx.tensor([0, 1]),
                                 weight=hx.ones(3, requires_grad=True)), "weight.detach()"),
])
def test_errors_name_the_op_and_the_fix(call, message):
    with pytest.raises((ValueError, TypeError, hx.errors.OpError), match=message):
        call()


def test_pytorch_refuses_what_haelixe_refuses():
    """The shape and label errors above are PyTorch's too."""
    for call in (lambda: TF.multi_margin_loss(torch.ones(2, 3), torch.tensor([0, 1]), p=3),
                 lambda: TF.multi_margin_loss(torch.ones(2, 3), torch.tensor([0, 3])),
                 lambda: TF.multi_margin_loss(torch.ones(2, 3, 1), torch.tensor([0, 1])),
                 lambda: TF.multi_margin_loss(torch.ones(2, 3), torch.tensor([0, 1]),
                                              weight=torch.ones(3, requires_grad=True)),
                 lambda: TF.multilabel_margin_loss(torch.ones(1, 3),
                                                   torch.tensor([[0, 3, -1]])),
                 lambda: TF.triplet_margin_with_distance_loss(
                     torch.ones(2, 3), torch.ones(2, 3), torch.ones(3))):
        with pytest.raises((RuntimeError, ValueError, IndexError)):
            call()


@pytest.mark.gpu
def test_the_margin_losses_on_the_gpu_equal_the_cpu(be):
    a = _scores((4, 5)).astype(np.float32)
    results = []
    for device in ("cpu", "gpu"):
        x = hx.tensor(a, device=device, requires_grad=True)
        labels = hx.tensor([0, 4, 2, 1], device=device)
        lists = hx.tensor(LISTS, device=device)
        y = hx.tensor((a > 0).astype(np.float32), device=device)
        loss = F.multi_margin_loss(x, labels, p=2) + F.multilabel_margin_loss(x, lists) + \
            F.multilabel_soft_margin_loss(x, y) + F.hinge_embedding_loss(x, y * 2 - 1) + \
            F.triplet_margin_with_distance_loss(x, x.flip(0), x.flip(1))
        loss.backward()
        assert loss.device.type == device
        results.append((loss.cpu().item(), x.grad.cpu().numpy()))
    (cpu, cpu_grad), (gpu, gpu_grad) = results
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5)
    np.testing.assert_allclose(gpu_grad, cpu_grad, rtol=1e-4, atol=1e-6)
