"""The distance and ranking losses and functions (kl_div, margin_ranking_loss,
triplet_margin_loss, cosine_similarity, pairwise_distance) and their layers, against
PyTorch: values in float32 and float64, float64 gradients, reprs, errors."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import gradcheck
from haelixe.errors import OpError

torch = pytest.importorskip("torch")
F, TF = hx.nn.functional, torch.nn.functional
RNG = np.random.default_rng(7)


def _arrays(*shapes):
    return [RNG.standard_normal(s) for s in shapes]


def _kl_inputs(shape, log_target=False):
    x = RNG.standard_normal(shape)
    t = RNG.random(shape)
    t[..., 0] = 0.0  # (a zero target contributes nothing, and no log is taken)
    return [x, np.log(t + 1e-3) if log_target else t]


#: name -> (arrays, keywords): F.<name>(*arrays, **keywords) against PyTorch's
CASES = {
    "kl_div": [(_kl_inputs((3, 5)), {"reduction": r}) for r in ("batchmean", "sum", "none")]
    + [(_kl_inputs((3, 5), True), {"reduction": "batchmean", "log_target": True}),
       ([RNG.standard_normal((2, 3, 4)), RNG.random(4)], {"reduction": "none"})],
    "margin_ranking_loss": [
        (_arrays(6, 6) + [np.sign(RNG.standard_normal(6))], {"margin": m, "reduction": r})
        for m, r in ((0, "mean"), (0.3, "sum"), (1.0, "none"))]
    + [(_arrays((4, 3), (1, 3), (4, 1)), {"margin": 0.1})],  # (broadcast)
    "triplet_margin_loss": [
        (_arrays((5, 4), (5, 4), (5, 4)), {"margin": 1.5, "p": p, "swap": swap,
                                           "reduction": r})
        for p, swap, r in ((2, False, "mean"), (1, True, "sum"), (3, True, "none"))],
    "cosine_similarity": [(_arrays((3, 4), (3, 4)), {}),
                          (_arrays((2, 3, 4), (4,)), {"dim": -1}),
                          (_arrays((2, 5), (1, 5)), {"dim": 0, "eps": 1e-3})],
    "pairwise_distance": [(_arrays((3, 4), (3, 4)), {}),
                          (_arrays((3, 4), (4,)), {"p": 1.0, "keepdim": True}),
                          (_arrays((2, 3, 4), (2, 3, 4)), {"p": 3.0, "eps": 1e-3}),
                          (_arrays((), ()), {})],
}
PARAMS = [(name, i) for name, cases in CASES.items() for i in range(len(cases))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,i", PARAMS, ids=[f"{n}-{i}" for n, i in PARAMS])
def test_values_and_gradients_match_pytorch(name, i, dtype):
    arrays, kw = CASES[name][i]
    ours = [hx.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    got, want = getattr(F, name)(*ours, **kw), getattr(TF, name)(*theirs, **kw)
    assert got.dtype.name == dtype and got.shape == tuple(want.shape)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=tol,
                               atol=tol)
    seed = RNG.standard_normal(tuple(want.shape)).astype(dtype)
    got.backward(hx.tensor(seed))
    want.backward(torch.tensor(seed))
    for a, b in zip(ours, theirs):
        # (PyTorch's gradient of a zero target is NaN, Haelixe's finite: compared elsewhere)
        finite = np.isfinite(b.grad.numpy())
        np.testing.assert_allclose(a.grad.numpy()[finite], b.grad.numpy()[finite],
                                   rtol=tol * 10, atol=tol * 10)


@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_gradients_pass_gradcheck(name):
    arrays, kw = CASES[name][0]
    inputs = [hx.tensor(a, requires_grad=True) for a in arrays]
    if name == "kl_div":  # (the target's gradient has a log: keep it off zero)
        inputs[1] = hx.tensor(np.abs(arrays[1]) + 0.1, requires_grad=True)
    if name == "margin_ranking_loss":  # (the target is a label)
        inputs[2] = hx.tensor(arrays[2])
    assert gradcheck(lambda *xs: getattr(F, name)(*xs, **kw), tuple(inputs))


def test_kl_div_warns_for_mean_as_pytorch_and_not_for_batchmean():
    x, t = (hx.tensor(a) for a in _kl_inputs((4, 3)))
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        mean = F.kl_div(x, t)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batchmean = F.kl_div(x, t, reduction="batchmean")
        hx.nn.KLDivLoss(reduction="batchmean")(x, t)
    np.testing.assert_allclose(batchmean.item(), mean.item() * 3)


def test_empty_and_zero_d_inputs_as_pytorch():
    e = np.zeros((0, 4))
    for name, n in (("cosine_similarity", 2), ("pairwise_distance", 2),
                    ("triplet_margin_loss", 3), ("margin_ranking_loss", 3)):
        got = getattr(F, name)(*[hx.tensor(e)] * n)
        want = getattr(TF, name)(*[torch.tensor(e)] * n)
        assert got.shape == tuple(want.shape), name
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in ("mean", "batchmean", "sum"):
            got = F.kl_div(hx.tensor(e), hx.tensor(e), reduction=r)
            want = TF.kl_div(torch.tensor(e), torch.tensor(e), reduction=r)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    x, t = hx.tensor(0.5), hx.tensor(0.3)
    want = TF.kl_div(torch.tensor(0.5), torch.tensor(0.3), reduction="batchmean")
    np.testing.assert_allclose(F.kl_div(x, t, reduction="batchmean").item(), want.item())


LAYERS = [("KLDivLoss", (), {"reduction": "batchmean", "log_target": True}),
          ("MarginRankingLoss", (0.5,), {"reduction": "sum"}),
          ("TripletMarginLoss", (), {"margin": 0.5, "p": 1.0, "swap": True}),
          ("CosineSimilarity", (0, 1e-6), {}),
          ("PairwiseDistance", (1.0,), {"keepdim": True})]


@pytest.mark.parametrize("name,args,kw", LAYERS, ids=[n for n, _, _ in LAYERS])
def test_layers_hold_show_and_compute_what_pytorchs_do(name, args, kw):
    ours, theirs = getattr(hx.nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(ours) == repr(theirs) and repr(getattr(hx.nn, name)()) == \
        repr(getattr(torch.nn, name)())
    assert not list(ours.parameters()) and not ours.state_dict()
    n = 3 if name in ("MarginRankingLoss", "TripletMarginLoss") else 2
    arrays = [np.abs(a) for a in _arrays(*[(4, 5)] * n)]
    got = ours(*[hx.tensor(a) for a in arrays])
    want = theirs(*[torch.tensor(a) for a in arrays])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("call,error,match", [
    (lambda: F.kl_div(hx.ones(2, 3), hx.ones(2, 3), reduction="avg"), ValueError,
     "kl_div: reduction must be 'mean', 'batchmean', 'sum' or 'none'"),
    (lambda: hx.nn.KLDivLoss(reduction="avg"), ValueError, "KLDivLoss: reduction"),
    (lambda: F.kl_div(hx.ones(2, dtype=hx.int64), hx.ones(2, dtype=hx.int64)), TypeError,
     "kl_div: not defined for int64 inputs"),
    (lambda: F.kl_div(hx.ones(2), hx.ones(2), size_average=True), TypeError,
     "size_average and reduce are deprecated"),
    (lambda: F.margin_ranking_loss(hx.ones(3), hx.ones(3, 1), hx.ones(3)), OpError,
     r"margin_ranking_loss: the inputs must have one number of dimensions, got "
     r"input1 \(3,\), input2 \(3, 1\), target \(3,\)"),
    (lambda: F.triplet_margin_loss(hx.ones(2, 3), hx.ones(2, 3), hx.ones(3)), Exception,
     r"triplet_margin_loss: .* negative \(3,\)"),
    (lambda: F.triplet_margin_loss(hx.ones(2, 3), hx.ones(2, 3), hx.ones(2, 3), margin=0),
     ValueError, "triplet_margin_loss: margin must be > 0"),
    (lambda: F.cosine_similarity(hx.ones(3, 4), hx.ones(3, 5)), Exception,
     "cosine_similarity"),
    (lambda: F.cosine_similarity(hx.ones(3, dtype=hx.int64), hx.ones(3, dtype=hx.int64),
                                 dim=0), TypeError, "must be floating point"),
    (lambda: F.cosine_similarity(hx.tensor(1.0), hx.tensor(2.0)), Exception,
     "cosine_similarity: x1 and x2 are 0-d"),
    (lambda: F.pairwise_distance(hx.ones(3), [1.0, 2.0, 3.0]), TypeError,
     "pairwise_distance: x1 and x2 must be tensors"),
    (lambda: hx.nn.MarginRankingLoss()(hx.ones(3), hx.ones(3)), TypeError,
     r"MarginRankingLoss.forward takes 3 tensors \(input1, input2, target\), got 2"),
])
def test_errors_name_the_op_the_shapes_and_the_fix(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_the_functions_are_reachable_where_pytorch_has_them():
    # (hx's form is F's function itself, or F's with numpy's keepdims/axis bound too)
    assert inspect.unwrap(hx.cosine_similarity) is F.cosine_similarity
    assert inspect.unwrap(hx.pairwise_distance) is F.pairwise_distance
    for name in ("kl_div", "margin_ranking_loss", "triplet_margin_loss"):
        assert F.__doc__ is not None and getattr(F, name).__doc__.startswith(f"{name}(")


SHRINKS = [("tanhshrink", {}), ("softshrink", {}), ("softshrink", {"lambd": 1.2}),
           ("hardshrink", {}), ("hardshrink", {"lambd": 0.1})]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", SHRINKS, ids=[f"{n}{kw}" for n, kw in SHRINKS])
def test_the_shrinks_match_pytorch_values_gradients_and_layers(name, kw, dtype):
    a = np.concatenate([RNG.standard_normal(20) * 2, [0.0, 0.5, -0.5, 1.2, -1.2]])
    a = a.astype(dtype).reshape(5, 5)
    x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    got, want = getattr(F, name)(x, **kw), getattr(TF, name)(t, **kw)
    tol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=tol,
                               atol=tol)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)
    cls = {"tanhshrink": "Tanhshrink", "softshrink": "Softshrink",
           "hardshrink": "Hardshrink"}[name]
    ours, theirs = getattr(hx.nn, cls)(**kw), getattr(torch.nn, cls)(**kw)
    assert repr(ours) == repr(theirs)
    np.testing.assert_allclose(ours(hx.tensor(a)).numpy(), theirs(torch.tensor(a)).numpy(),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["tanhshrink", "softshrink", "hardshrink"])
def test_the_shrinks_pass_gradcheck_off_their_kinks(name):
    a = np.array([-2.0, -0.9, -0.2, 0.3, 0.8, 1.7])
    assert gradcheck(getattr(F, name), (hx.tensor(a, requires_grad=True),))


@pytest.mark.parametrize("shape,r", [((1, 8, 3, 5), 2), ((2, 3, 9, 2, 2), 3), ((4, 1, 1), 2),
                                     ((0, 4, 2, 2), 2)])
def test_pixel_shuffle_and_unshuffle_match_pytorch_and_invert(shape, r):
    a = RNG.standard_normal(shape)
    if shape[-3] % (r * r) == 0:
        x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        got, want = F.pixel_shuffle(x, r), TF.pixel_shuffle(t, r)
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        np.testing.assert_array_equal(F.pixel_unshuffle(got, r).detach().numpy(), a)
        assert gradcheck(lambda v: F.pixel_shuffle(v, r), (x,))
    b = RNG.standard_normal((*shape[:-2], shape[-2] * r, shape[-1] * r)).astype(np.float32)
    got = hx.nn.PixelUnshuffle(r)(hx.tensor(b))
    assert got.shape == (*shape[:-3], shape[-3] * r * r, *shape[-2:])
    if b.size:  # (PyTorch's returns an empty input's clone, its shape unchanged)
        np.testing.assert_array_equal(
            got.numpy(), torch.nn.PixelUnshuffle(r)(torch.tensor(b)).numpy())
    assert repr(hx.nn.PixelShuffle(r)) == repr(torch.nn.PixelShuffle(r))
    assert repr(hx.nn.PixelUnshuffle(r)) == repr(torch.nn.PixelUnshuffle(r))


@pytest.mark.parametrize("call,match", [
    (lambda: F.pixel_shuffle(hx.ones(4, 2), 2), r"at least 3 dims .* got shape \(4, 2\)"),
    (lambda: F.pixel_shuffle(hx.ones(3, 2, 2), 2), "3 channels .* not divisible by "
                                                   "upscale_factor\\^2 = 4"),
    (lambda: F.pixel_unshuffle(hx.ones(1, 3, 2), 2), "width 2 .* downscale_factor = 2"),
    (lambda: F.pixel_shuffle(hx.ones(4, 2, 2), 0), "upscale_factor must be a positive"),
])
def test_pixel_shuffle_errors_name_the_op_and_the_shapes(call, match):
    with pytest.raises((OpError, ValueError), match=match):
        call()
