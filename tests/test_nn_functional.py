"""nn.functional against torch.nn.functional: the losses (every option), activations,
one_hot, pad, normalize, layer_norm, embedding, dropout; forward and gradients on the
CPU and the GPU, and float64 gradchecks of the losses."""

from __future__ import annotations

import math

import numpy as np
import pytest
from torch_ref import against_torch

import haelixe as hx
from haelixe.autograd import gradcheck
from haelixe.errors import OpError
from haelixe.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


@pytest.fixture(params=DEVICES)
def device(request):
    if request.param == "gpu":
        request.getfixturevalue("be")  # skips where there is no adapter
    return request.param


def randn(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def classes(*shape, c, seed=0, ignore=None):
    t = np.random.default_rng(seed).integers(0, c, shape).astype(np.int64)
    if ignore is not None:
        t.reshape(-1)[::3] = ignore
    return t


def tol(device):
    return dict(rtol=1e-5, atol=1e-6) if device == "cpu" else dict(rtol=1e-4, atol=2e-5)


def both(name):
    """The same functional name in both libraries."""
    return getattr(F, name), getattr(TF, name)


def weight_of(lib, w):
    if w is None:
        return None
    return torch.tensor(w) if lib is torch else hx.tensor(w)


# -- cross_entropy / nll_loss ---------------------------------------------------------------
CE_CASES = {
    "2d": ((6, 5), (6,)),
    "4d": ((2, 5, 3, 4), (2, 3, 4)),
    "unbatched": ((5,), ()),
    "3d": ((3, 5, 7), (3, 7)),
}


@pytest.mark.parametrize("case", sorted(CE_CASES))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", ["plain", "weight", "ignore", "smooth", "ignore_smooth",
                                     "all"])
def test_cross_entropy_class_indices(device, case, reduction, options):
    xs, ts = CE_CASES[case]
    ignore = options in ("ignore", "ignore_smooth", "all") and case != "unbatched"
    w = np.linspace(0.5, 2.0, 5).astype(np.float32) if options in ("weight", "all") else None
    ls = 0.2 if options in ("smooth", "ignore_smooth", "all") else 0.0
    x = randn(*xs, seed=1, scale=2.0)
    t = classes(*ts, c=5, seed=2, ignore=3 if ignore else None)
    kw = dict(reduction=reduction, label_smoothing=ls, ignore_index=3 if ignore else -100)

    def ours(x, t):
        wt = None if w is None else hx.tensor(w, device=x.device)
        return F.cross_entropy(x, t, weight=wt, **kw)

    def theirs(x, t):
        return TF.cross_entropy(x, t, weight=weight_of(torch, w), **kw)

    against_torch(ours, theirs, x, t, device=device, what=f"cross_entropy {case}", **tol(device))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", ["plain", "weight", "smooth"])
def test_cross_entropy_class_probabilities(device, reduction, options):
    x = randn(4, 6, 3, seed=3)
    p = np.random.default_rng(4).random((4, 6, 3)).astype(np.float32)
    p /= p.sum(1, keepdims=True)
    w = np.linspace(0.5, 1.5, 6).astype(np.float32) if options == "weight" else None
    ls = 0.1 if options == "smooth" else 0.0

    def ours(x, p):
        wt = None if w is None else hx.tensor(w, device=x.device)
        return F.cross_entropy(x, p, weight=wt, reduction=reduction, label_smoothing=ls)

    def theirs(x, p):
        return TF.cross_entropy(x, p, weight=weight_of(torch, w), reduction=reduction,
                                label_smoothing=ls)

    against_torch(ours, theirs, x, p, device=device, what="soft cross_entropy", **tol(device))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(device, reduction, weighted):
    logp = np.log(np.random.default_rng(5).dirichlet(np.ones(4), size=(3, 5))).astype(
        np.float32).transpose(0, 2, 1).copy()  # (N, C, d) log-probabilities
    t = classes(3, 5, c=4, seed=6, ignore=-100)
    w = np.array([1.0, 0.5, 2.0, 0.1], np.float32) if weighted else None

    def ours(x, t):
        wt = None if w is None else hx.tensor(w, device=x.device)
        return F.nll_loss(x, t, weight=wt, reduction=reduction)

    def theirs(x, t):
        return TF.nll_loss(x, t, weight=weight_of(torch, w), reduction=reduction)

    against_torch(ours, theirs, logp, t, device=device, what="nll_loss", **tol(device))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_gradient_has_a_graph_under_create_graph(device, reduction, smoothing):
    x, t = randn(3, 5, 4, seed=7), classes(3, 4, c=5, seed=8, ignore=2)
    w = np.linspace(0.5, 2.0, 5).astype(np.float32)

    def second(lib, x, t, weight):  # d/dx of sum(sin(d loss / dx))
        loss = lib.nn.functional.cross_entropy(x * 1.5, t, weight=weight, ignore_index=2,
                                               reduction=reduction, label_smoothing=smoothing)
        (g,) = lib.autograd.grad(loss.sum() * 3, x, create_graph=True)
        g.sin().sum().backward()
        return g.detach(), x.grad

    ours = second(hx, hx.tensor(x, device=device, requires_grad=True),
                  hx.tensor(t, device=device), hx.tensor(w, device=device))
    theirs = second(torch, torch.tensor(x, requires_grad=True), torch.tensor(t),
                    torch.tensor(w))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.cpu().numpy(), b.numpy(), **tol(device))


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_soft_cross_entropy_gradients_of_logits_target_and_weight_to_second_order(
        device, reduction, smoothing):
    x, w = randn(3, 5, 4, seed=9), np.linspace(0.5, 2.0, 5).astype(np.float32)
    p = np.random.default_rng(10).random((3, 5, 4)).astype(np.float32)

    def grads(lib, *arrays):  # first and second order, each w.r.t. (x, p, w)
        x, p, w = leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        if lib is hx:
            x, p, w = leaves = [t.to(device).detach().requires_grad_() for t in leaves]
        loss = lib.nn.functional.cross_entropy(x * 1.5, p, weight=w, reduction=reduction,
                                               label_smoothing=smoothing)
        first = lib.autograd.grad(loss.sum() * 3, leaves, create_graph=True)
        sum(g.sin().sum() for g in first).backward()
        return [g.detach() for g in first] + [t.grad for t in leaves]

    for a, b in zip(grads(hx, x, p, w), grads(torch, x, p, w)):
        np.testing.assert_allclose(a.cpu().numpy(), b.numpy(), rtol=1e-4, atol=2e-5)


def test_cross_entropy_refuses_a_class_weight_that_requires_grad_as_pytorch():
    x, t = hx.randn(4, 3, requires_grad=True), hx.tensor([0, 1, 2, 1])
    with pytest.raises(OpError, match="cross_entropy: .* not differentiable with respect to "
                                      "weight"):
        F.cross_entropy(x, t, weight=hx.ones(3, requires_grad=True))
    with hx.no_grad():  # nothing to differentiate: the loss alone
        assert F.cross_entropy(x, t, weight=hx.ones(3, requires_grad=True)).item() > 0


def test_cross_entropy_every_target_ignored_is_nan_as_pytorch():
    x = hx.randn(3, 4, requires_grad=True)
    t = hx.tensor([-100, -100, -100])
    assert math.isnan(F.cross_entropy(x, t).item())
    assert math.isnan(TF.cross_entropy(torch.randn(3, 4), torch.tensor([-100] * 3)).item())


def test_cross_entropy_errors_name_the_problem():
    x = hx.randn(4, 3)
    with pytest.raises(IndexError, match="target 3 is out of bounds for 3 classes"):
        F.cross_entropy(x, hx.tensor([0, 1, 3, 2]))
    with pytest.raises(ValueError, match=r"target of class indices with shape \(4,\)"):
        F.cross_entropy(x, hx.tensor([0, 1]))
    with pytest.raises(TypeError, match="pass the reduction by keyword"):
        F.cross_entropy(x, hx.tensor([0, 1, 2, 2]), "sum")
    with pytest.raises(ValueError, match="one entry per class"):
        F.cross_entropy(x, hx.tensor([0, 1, 2, 2]), weight=hx.ones(4))
    with pytest.raises(ValueError, match="reduction must be"):
        F.nll_loss(x, hx.tensor([0, 1, 2, 2]), reduction="avg")
    with pytest.raises(TypeError, match="class targets must be integers"):
        F.nll_loss(x, hx.tensor([0.0, 1.0, 2.0, 2.0]))


# -- binary cross-entropy with logits, regression losses ------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", ["plain", "weight", "pos_weight", "both"])
def test_binary_cross_entropy_with_logits(device, reduction, options):
    x = randn(4, 3, seed=7, scale=3.0)
    x[0, 0], x[1, 1] = 60.0, -60.0  # far in the tails: finite, no overflow
    t = np.random.default_rng(8).random((4, 3)).astype(np.float32)
    w = randn(4, 1, seed=9) ** 2 if options in ("weight", "both") else None
    pw = np.array([0.5, 2.0, 3.0], np.float32) if options in ("pos_weight", "both") else None

    def ours(x, t):
        opt = {k: None if v is None else hx.tensor(v, device=x.device)
               for k, v in (("weight", w), ("pos_weight", pw))}
        return F.binary_cross_entropy_with_logits(x, t, reduction=reduction, **opt)

    def theirs(x, t):
        opt = {k: None if v is None else torch.tensor(v) for k, v in
               (("weight", w), ("pos_weight", pw))}
        return TF.binary_cross_entropy_with_logits(x, t, reduction=reduction, **opt)

    against_torch(ours, theirs, x, t, device=device, what="bce_with_logits", **tol(device))


@pytest.mark.parametrize("name,kw", [
    ("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {"beta": 1.0}),
    ("smooth_l1_loss", {"beta": 0.3}), ("smooth_l1_loss", {"beta": 0.0}),
    ("huber_loss", {"delta": 0.7}),
])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(device, name, kw, reduction):
    ours, theirs = both(name)
    against_torch(lambda a, b: ours(a, b, reduction=reduction, **kw),
                  lambda a, b: theirs(a, b, reduction=reduction, **kw),
                  randn(5, 4, seed=10), randn(5, 4, seed=11), device=device,
                  what=name, **tol(device))


def f64_leaf(*shape, seed=0):
    return hx.from_numpy(np.random.default_rng(seed).standard_normal(shape)).requires_grad_()


def test_gradcheck_losses_in_float64():
    x4, x2 = f64_leaf(2, 4, 3, seed=1), f64_leaf(5, 4, seed=2)
    t4 = hx.tensor(classes(2, 3, c=4, seed=3, ignore=1))
    t2 = hx.tensor(classes(5, c=4, seed=4))
    w = hx.from_numpy(np.array([1.0, 0.5, 2.0, 1.5]))
    probs = hx.from_numpy(np.random.default_rng(5).dirichlet(np.ones(4), size=5))
    target = f64_leaf(5, 4, seed=6)
    y = hx.from_numpy(np.random.default_rng(7).random((5, 4)))
    cases = {
        "cross_entropy 4d weight ignore smooth": (
            lambda x: F.cross_entropy(x, t4, weight=w, ignore_index=1, label_smoothing=0.1),
            (x4,)),
        "cross_entropy 4d weight ignore": (
            lambda x: F.cross_entropy(x, t4, weight=w, ignore_index=1), (x4,)),
        "cross_entropy none": (lambda x: F.cross_entropy(x, t2, reduction="none"), (x2,)),
        "cross_entropy probabilities": (lambda x: F.cross_entropy(x, probs), (x2,)),
        "nll_loss": (lambda x: F.nll_loss(x.log_softmax(1), t2, weight=w), (x2,)),
        "bce_with_logits": (lambda x: F.binary_cross_entropy_with_logits(
            x, y, pos_weight=hx.from_numpy(np.array([1.0, 2.0, 0.5, 3.0]))), (x2,)),
        "smooth_l1": (lambda a, b: F.smooth_l1_loss(a, b, beta=0.5), (x2, target)),
        "huber": (lambda a, b: F.huber_loss(a, b, delta=0.5), (x2, target)),
        "l1": (lambda a, b: F.l1_loss(a, b, reduction="sum"), (x2, target)),
        "mse": (lambda a, b: F.mse_loss(a, b, reduction="none"), (x2, target)),
    }
    for name, (fn, inputs) in cases.items():
        assert gradcheck(fn, inputs, name=name)


# -- activations and friends ---------------------------------------------------------------
@pytest.mark.parametrize("name,ours,theirs", [
    ("sigmoid", F.sigmoid, torch.sigmoid),
    ("tanh", F.tanh, torch.tanh),
    ("softplus", F.softplus, TF.softplus),
    ("softplus beta", lambda x: F.softplus(x, beta=2.0, threshold=5.0),
     lambda x: TF.softplus(x, beta=2.0, threshold=5.0)),
    ("logsigmoid", F.logsigmoid, TF.logsigmoid),
    ("softmax", lambda x: F.softmax(x, dim=0), lambda x: TF.softmax(x, dim=0)),
    ("log_softmax float64", lambda x: F.log_softmax(x, 1, dtype=hx.float64),
     lambda x: TF.log_softmax(x, 1, dtype=torch.float64)),
])
def test_activations(device, name, ours, theirs):
    if device == "gpu" and "float64" in name:
        pytest.skip("float64 does not exist on the GPU")
    x = randn(4, 5, seed=12, scale=4.0)
    x[0, :3] = [-80.0, 80.0, 30.0]  # the tails stay finite, forward and backward
    against_torch(ours, theirs, x, device=device, what=name, **tol(device))


def test_gradcheck_activations_in_float64():
    x = f64_leaf(3, 4, seed=13)
    for name, fn in (("softplus", lambda t: F.softplus(t, beta=1.5, threshold=2.0)),
                     ("logsigmoid", F.logsigmoid),
                     ("normalize", lambda t: F.normalize(t, dim=1)),
                     ("normalize p=1", lambda t: F.normalize(t, p=1.0, dim=0)),
                     ("layer_norm 2 dims", lambda t: F.layer_norm(t, (3, 4))),
                     ("pad", lambda t: F.pad(t, (1, -1, 2, 0), value=0.5))):
        assert gradcheck(fn, (x,), name=name)


def test_one_hot(device):
    t = hx.tensor([[0, 3], [2, 1]], device=device)
    got = F.one_hot(t, 5)
    assert got.shape == (2, 2, 5)
    assert got.dtype is hx.int64  # as PyTorch, on the GPU too (int64 stays int64)
    np.testing.assert_array_equal(got.numpy(), TF.one_hot(torch.tensor([[0, 3], [2, 1]]),
                                                          5).numpy())
    assert F.one_hot(hx.tensor([1, 4])).shape == (2, 5)  # num_classes inferred
    with pytest.raises(ValueError, match="does not fit num_classes=3"):
        F.one_hot(hx.tensor([1, 4]), 3)
    with pytest.raises(ValueError, match="non-negative"):
        F.one_hot(hx.tensor([-1, 0]))
    with pytest.raises(TypeError, match="integer tensor"):
        F.one_hot(hx.tensor([1.0]))


@pytest.mark.parametrize("pad,mode,value", [
    ((1, 2), "constant", None), ((1, 0, 2, 3), "constant", -1.5),
    ((0, 1, 1, 0, 2, 2), "constant", 2.0), ((-1, 2, 1, -2), "constant", 0.0),
    ((2, 1), "reflect", None), ((1, 2, 2, 1), "replicate", None),
    ((2, 3, 1, 1), "circular", None), ((0, 0), "constant", None),
])
def test_pad(device, pad, mode, value):
    x = randn(2, 3, 4, 5, seed=14)
    if mode != "constant":  # PyTorch pads these modes on (N, C, *spatial) inputs only
        x = x.reshape((-1,) + x.shape[-len(pad) // 2 - 1:])
    kw = {} if value is None else {"value": value}
    against_torch(lambda t: F.pad(t, pad, mode=mode, **kw),
                  lambda t: TF.pad(t, pad, mode=mode, **kw), x, device=device,
                  what=f"pad {pad} {mode}", **tol(device))


def test_pad_errors():
    x = hx.zeros(2, 3)
    with pytest.raises(ValueError, match="even number"):
        F.pad(x, (1,))
    with pytest.raises(ValueError, match="mode must be"):
        F.pad(x, (1, 1), mode="wrap")
    with pytest.raises(ValueError, match="must be less than its size 3"):
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(ValueError, match="crops more than the 3 elements of dim 1"):
        F.pad(x, (-2, -2))


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (math.inf, -1), (3.0, 1)])
def test_normalize(device, p, dim):
    x = randn(3, 4, seed=15)
    x[1] = 0.0  # a zero row: clamped by eps, gradient 0 (not NaN)
    against_torch(lambda t: F.normalize(t, p=p, dim=dim),
                  lambda t: TF.normalize(t, p=p, dim=dim), x, device=device,
                  what=f"normalize p={p}", **tol(device))


@pytest.mark.parametrize("shape,affine", [
    (5, "both"), ((5,), "weight"), ((4, 5), "both"), ((3, 4, 5), "none"),
])
def test_layer_norm(device, shape, affine):
    x = randn(2, 3, 4, 5, seed=16, scale=2.0) + 1.0
    ns = (shape,) if isinstance(shape, int) else shape
    w = randn(*ns, seed=17) if affine != "none" else None
    b = randn(*ns, seed=18) if affine == "both" else None
    arrays = [x] + [a for a in (w, b) if a is not None]

    def call(fn, shape):
        def run(x, *wb):
            weight = wb[0] if w is not None else None
            bias = wb[1] if b is not None else None
            return fn(x, shape, weight, bias, 1e-5)
        return run

    # ours takes an int as well; torch's functional form wants a tuple
    against_torch(call(F.layer_norm, shape), call(TF.layer_norm, ns), *arrays, device=device,
                  what=f"layer_norm {shape}", rtol=1e-4, atol=5e-5)


def test_layer_norm_errors():
    with pytest.raises(ValueError, match="trailing dims"):
        F.layer_norm(hx.zeros(2, 5), (4,))
    with pytest.raises(TypeError, match="normalized_shape must be an int or a tuple"):
        F.layer_norm(hx.zeros(2, 5), hx.ones(5))
    with pytest.raises(ValueError, match="weight has shape"):
        F.layer_norm(hx.zeros(2, 5), 5, hx.ones(4))


@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("shape", [(7,), (2, 3, 4), (0,)])
def test_embedding_lookup_and_gradient_match_pytorch(device, index_dtype, shape):
    """Rows at int64 and int32 indices of one or more dims (repeated rows, an empty
    lookup) and the weight's gradient, against PyTorch; in float64 a gradcheck."""
    w = randn(6, 3, seed=20)
    idx = np.random.default_rng(21).integers(0, 6, shape).astype(index_dtype)
    idx.reshape(-1)[:2] = 4  # (a repeated row: its gradients add up)
    against_torch(F.embedding, TF.embedding, idx, w, device=device, what="embedding")
    if device == "cpu":
        table = f64_leaf(6, 3, seed=22)
        assert gradcheck(lambda t: F.embedding(hx.tensor(idx), t), (table,))


def test_embedding_out_of_range_index_names_the_problem():
    with pytest.raises(IndexError, match="index 6 is out of bounds for dim 0 of size 6"):
        F.embedding(hx.tensor([1, 6]), hx.zeros(6, 3))


def test_embedding_padding_idx_gets_no_gradient(device):
    w = randn(6, 3, seed=19)
    idx = np.array([[0, 2, 2], [5, 0, 1]], np.int64)
    against_torch(lambda i, w: F.embedding(i, w, padding_idx=2),
                  lambda i, w: TF.embedding(i, w, padding_idx=2), idx, w, device=device,
                  what="embedding padding_idx")
    against_torch(lambda i, w: F.embedding(i, w, padding_idx=-1),
                  lambda i, w: TF.embedding(i, w, padding_idx=-1), idx, w, device=device,
                  what="embedding padding_idx=-1")


def test_dropout_p_one_inplace_and_scale():
    x = hx.ones(1000)
    assert not F.dropout(x, 1.0).numpy().any()
    y = F.dropout(x, 0.25)
    kept = y.numpy()[y.numpy() != 0]
    np.testing.assert_allclose(kept, 1 / 0.75)
    assert 0.65 < kept.size / 1000 < 0.85
    z = hx.ones(1000)
    out = F.dropout(z, 0.5, inplace=True)
    assert out is z and (z.numpy() == 0).any()
    # in place on a non-leaf keeps the gradient right: d/dx of x*mask*2 is the mask*2
    leaf = hx.ones(200, requires_grad=True)
    h = leaf * 1.0
    F.dropout(h, 0.5, inplace=True).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), h.detach().numpy())
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\]"):
        F.dropout(x, 1.5)


def test_missing_functional_names_point_to_the_closest():
    with pytest.raises(AttributeError, match="hx.nn.functional has no "
                                             "native_channel_shuffle; the closest is "
                                             "hx.nn.functional.channel_shuffle"):
        F.native_channel_shuffle  # noqa: B018
    with pytest.raises(AttributeError, match="closest is hx.nn.functional.cross_entropy"):
        F.crossentropy  # noqa: B018


def test_cross_entropy_against_probabilities_of_another_dtype_promotes_as_pytorch():
    """bf16 logits against float32 probabilities give a float32 loss (and the reverse),
    as PyTorch's; equal dtypes keep theirs."""
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((4, 5)).astype(np.float32)
    probs = rng.dirichlet(np.ones(5), 4).astype(np.float32)
    for a, b in (("bfloat16", "float32"), ("float32", "bfloat16"), ("bfloat16", "bfloat16"),
                 ("float64", "float32")):
        want = torch.nn.functional.cross_entropy(
            torch.tensor(logits).to(getattr(torch, a)), torch.tensor(probs).to(getattr(torch, b)))
        got = F.cross_entropy(hx.tensor(logits).to(getattr(hx, a)),
                              hx.tensor(probs).to(getattr(hx, b)))
        assert got.dtype.name == str(want.dtype).replace("torch.", ""), (a, b)
        np.testing.assert_allclose(float(got), float(want), rtol=2e-2 if "bfloat16" in (a, b)
                                   else 1e-6)
