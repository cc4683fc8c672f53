"""F.poisson_nll_loss / nn.PoissonNLLLoss and F.gaussian_nll_loss / nn.GaussianNLLLoss
against PyTorch: every option and reduction, broadcasting, var's shapes and its clamp,
float64 gradients of every input (and gradcheck), dtypes, the errors PyTorch gives,
the deprecated arguments, the layers' signatures, attributes and repr, and the GPU
against the CPU."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
F, TF = hx.nn.functional, torch.nn.functional
REDUCTIONS = ("mean", "sum", "none")


def _pair(fh, ft, arrays, grads=None, rtol=1e-11):
    """Values and float64 gradients (of the inputs at ``grads``, all by default)."""
    grads = range(len(arrays)) if grads is None else grads
    xs = [hx.tensor(a, requires_grad=i in grads) for i, a in enumerate(arrays)]
    ts = [torch.tensor(a, requires_grad=i in grads) for i, a in enumerate(arrays)]
    got, want = fh(*xs), ft(*ts)
    assert got.shape == tuple(want.shape) and got.dtype is hx.float64
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol,
                               atol=1e-13)
    gy = np.random.default_rng(5).standard_normal(tuple(want.shape))
    got.backward(hx.tensor(gy))
    want.backward(torch.tensor(gy))
    for i in grads:
        np.testing.assert_allclose(xs[i].grad.numpy(), ts[i].grad.numpy(), rtol=rtol,
                                   atol=1e-12, err_msg=f"input {i}")


_R = np.random.default_rng(0)
RATES = _R.uniform(0.1, 3.0, (4, 5))
LOGS = _R.standard_normal((4, 5))
# (counts above 1, where the Stirling term applies, and at or below it, where it is 0)
COUNTS = _R.integers(0, 6, (4, 5)).astype(np.float64)


# -- poisson_nll_loss ---------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input,full", [(True, False), (True, True), (False, False),
                                            (False, True)])
def test_poisson_nll_loss_matches_pytorch(log_input, full, reduction):
    x = LOGS if log_input else RATES
    kw = {"log_input": log_input, "full": full, "reduction": reduction}
    # (the target's gradient only where it is positive: at 0 PyTorch's full form gives NaN)
    _pair(lambda a, b: F.poisson_nll_loss(a, b, **kw),
          lambda a, b: TF.poisson_nll_loss(a, b, **kw), [x, COUNTS + 0.5])
    _pair(lambda a, b: F.poisson_nll_loss(a, b, **kw),
          lambda a, b: TF.poisson_nll_loss(a, b, **kw), [x, COUNTS], grads=(0,))
    _pair(lambda a, b: hx.nn.PoissonNLLLoss(**kw)(a, b),
          lambda a, b: torch.nn.PoissonNLLLoss(**kw)(a, b), [x, COUNTS], grads=(0,))


def test_poisson_nll_loss_takes_eps_broadcasts_and_positions_as_pytorch():
    zeros = np.zeros((3, 4))
    for eps in (1e-8, 0.5):  # (a rate of 0: log(0 + eps))
        got = F.poisson_nll_loss(hx.tensor(zeros), hx.tensor(zeros + 2.0), False, eps=eps)
        want = TF.poisson_nll_loss(torch.tensor(zeros), torch.tensor(zeros + 2.0), False,
                                   eps=eps)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    _pair(lambda a, b: F.poisson_nll_loss(a, b, True, True, None, 1e-8, None, "sum"),
          lambda a, b: TF.poisson_nll_loss(a, b, True, True, None, 1e-8, None, "sum"),
          [LOGS, COUNTS[0] + 1.5])  # (a target of one row for every row)
    x = hx.tensor(LOGS, requires_grad=True)
    assert gradcheck(lambda v: F.poisson_nll_loss(v, hx.tensor(COUNTS), full=True), (x,))
    assert gradgradcheck(lambda v: F.poisson_nll_loss(v, hx.tensor(COUNTS)), (x,))


def test_poisson_nll_loss_dtypes_as_pytorch():
    a = np.arange(12).reshape(3, 4) % 5
    for dtype in ("float32", "float16", "bfloat16", "int32", "int64", "uint8"):
        got = F.poisson_nll_loss(hx.tensor(a, dtype=dtype), hx.tensor(a, dtype=dtype))
        want = TF.poisson_nll_loss(*(torch.tensor(a).to(getattr(torch, dtype)),) * 2)
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), dtype
        np.testing.assert_allclose(got.float().item(), want.float().item(), rtol=1e-2)
    with pytest.raises(RuntimeError):  # (a bool subtraction, refused by both)
        TF.poisson_nll_loss(torch.tensor([True]), torch.tensor([True]))
    with pytest.raises(TypeError):
        F.poisson_nll_loss(hx.tensor([True]), hx.tensor([True]))


def test_poisson_nll_loss_refuses_what_it_does_not_take():
    x = hx.tensor(LOGS)
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none', got 'x'"):
        F.poisson_nll_loss(x, x, reduction="x")
    with pytest.raises(ValueError):
        TF.poisson_nll_loss(torch.tensor(LOGS), torch.tensor(LOGS), reduction="x")
    for call in (lambda: F.poisson_nll_loss(x, x, size_average=False),
                 lambda: F.poisson_nll_loss(x, x, reduce=True),
                 lambda: hx.nn.PoissonNLLLoss(size_average=True)):
        with pytest.raises(TypeError, match="size_average and reduce are deprecated"):
            call()
    with pytest.raises(TypeError, match="poisson_nll_loss: target must be a tensor"):
        F.poisson_nll_loss(x, 2.0)


# -- gaussian_nll_loss --------------------------------------------------------------------
MEANS = _R.standard_normal((4, 3))
TARGETS = _R.standard_normal((4, 3))
#: var's shapes PyTorch takes for an input of shape (4, 3): one per element, one per row
#: (with and without the last dim), one dim of size 1 where the input's differs
VARS = {"each": _R.uniform(0.2, 2.0, (4, 3)), "per row": _R.uniform(0.2, 2.0, (4,)),
        "per row, kept": _R.uniform(0.2, 2.0, (4, 1)),
        "per column": _R.uniform(0.2, 2.0, (1, 3))}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("var", sorted(VARS))
def test_gaussian_nll_loss_matches_pytorch(var, full, reduction):
    kw = {"full": full, "reduction": reduction}
    arrays = [MEANS, TARGETS, VARS[var]]
    _pair(lambda a, b, v: F.gaussian_nll_loss(a, b, v, **kw),
          lambda a, b, v: TF.gaussian_nll_loss(a, b, v, **kw), arrays)
    _pair(lambda a, b, v: hx.nn.GaussianNLLLoss(**kw)(a, b, v),
          lambda a, b, v: torch.nn.GaussianNLLLoss(**kw)(a, b, v), arrays)


def test_gaussian_nll_loss_clamps_var_at_eps_passing_its_gradient_through():
    v = np.array([1e-9, 0.0, 0.5, 2.0])
    x, t = np.array([0.3, -0.2, 0.1, -1.0]), np.zeros(4)
    for eps in (1e-6, 0.7):
        _pair(lambda a, b, w, eps=eps: F.gaussian_nll_loss(a, b, w, eps=eps, reduction="sum"),
              lambda a, b, w, eps=eps: TF.gaussian_nll_loss(a, b, w, eps=eps,
                                                            reduction="sum"),
              [x, t, v], rtol=1e-10)
    var = hx.tensor(v)
    F.gaussian_nll_loss(hx.tensor(x), hx.tensor(t), var)
    np.testing.assert_array_equal(var.numpy(), v)  # (the clamp is of a copy)


def test_gaussian_nll_loss_takes_a_float_var_0d_and_broadcast_targets():
    for var in (2.0, 0.0):
        got = F.gaussian_nll_loss(hx.tensor(MEANS), hx.tensor(TARGETS), var, full=True)
        want = TF.gaussian_nll_loss(torch.tensor(MEANS), torch.tensor(TARGETS), var, full=True)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    _pair(lambda a, b, v: F.gaussian_nll_loss(a, b, v),
          lambda a, b, v: TF.gaussian_nll_loss(a, b, v),
          [MEANS[0], TARGETS[0], np.array(0.7)])  # (a 1-d input, a 0-d var: one per row)
    _pair(lambda a, b, v: F.gaussian_nll_loss(a, b, v, reduction="none"),
          lambda a, b, v: TF.gaussian_nll_loss(a, b, v, reduction="none"),
          [MEANS, TARGETS[0], VARS["each"]])
    x, v = (hx.tensor(a, requires_grad=True) for a in (MEANS, VARS["per row"]))
    assert gradcheck(lambda a, w: F.gaussian_nll_loss(a, hx.tensor(TARGETS), w), (x, v))
    assert gradgradcheck(lambda a, w: F.gaussian_nll_loss(a, hx.tensor(TARGETS), w), (x, v))


def test_gaussian_nll_loss_dtypes_as_pytorch():
    a = np.arange(12).reshape(3, 4) % 5
    for dtype in ("float32", "float16", "bfloat16", "int32", "int64", "uint8"):
        mine = hx.tensor(a, dtype=dtype)
        theirs = torch.tensor(a).to(getattr(torch, dtype))
        got = F.gaussian_nll_loss(mine, mine.flip(0), 1.5)
        want = TF.gaussian_nll_loss(theirs, theirs.flip(0), 1.5)
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), dtype
        np.testing.assert_allclose(got.float().item(), want.float().item(), rtol=1e-2)
        if dtype.startswith(("int", "uint")):  # (an integer var: its clamp to eps fails)
            with pytest.raises(RuntimeError):
                TF.gaussian_nll_loss(theirs, theirs, theirs)
            with pytest.raises(RuntimeError, match="can't be cast"):
                F.gaussian_nll_loss(mine, mine, mine)


def test_gaussian_nll_loss_refuses_what_pytorch_refuses():
    x = hx.tensor(MEANS)
    cases = [  # var, of each library, that PyTorch refuses for an input of shape (4, 3)
        lambda m: m.ones(3), lambda m: m.ones(1, 1), lambda m: m.ones(4, 2),
        lambda m: m.ones(4, 3, 1), lambda m: -m.ones(4, 3), lambda m: -2.0,
        lambda m: m.tensor([[1.0, 1.0, -1e-3]] * 4),
    ]
    for make in cases:
        with pytest.raises(Exception) as theirs:
            TF.gaussian_nll_loss(torch.tensor(MEANS), torch.tensor(TARGETS), make(torch))
        with pytest.raises(type(theirs.value)) as ours:
            F.gaussian_nll_loss(x, hx.tensor(TARGETS), make(hx))
        assert str(ours.value).startswith("gaussian_nll_loss: ")
    with pytest.raises(ValueError, match=r"var of shape \(3,\) does not fit the input of "
                                         r"shape \(4, 3\); give one variance per element"):
        F.gaussian_nll_loss(x, x, hx.ones(3))
    with pytest.raises(ValueError, match="var has negative entries"):
        F.gaussian_nll_loss(x, x, -hx.ones(4, 3))
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none'"):
        F.gaussian_nll_loss(x, x, hx.ones(4, 3), reduction="batchmean")
    with pytest.raises(TypeError):  # (a Python int: PyTorch takes a float only)
        TF.gaussian_nll_loss(torch.tensor(MEANS), torch.tensor(MEANS), 2)
    with pytest.raises(TypeError, match="var must be a tensor or a float, got int"):
        F.gaussian_nll_loss(x, x, 2)


# -- the layers -----------------------------------------------------------------------------
@pytest.mark.parametrize("ours,theirs,attributes", [
    (hx.nn.PoissonNLLLoss(), torch.nn.PoissonNLLLoss(),
     ("log_input", "full", "eps", "reduction")),
    (hx.nn.PoissonNLLLoss(False, True, eps=0.1, reduction="sum"),
     torch.nn.PoissonNLLLoss(False, True, eps=0.1, reduction="sum"),
     ("log_input", "full", "eps", "reduction")),
    (hx.nn.GaussianNLLLoss(), torch.nn.GaussianNLLLoss(), ("full", "eps", "reduction")),
    (hx.nn.GaussianNLLLoss(full=True, eps=0.2, reduction="none"),
     torch.nn.GaussianNLLLoss(full=True, eps=0.2, reduction="none"),
     ("full", "eps", "reduction")),
])
def test_the_loss_layers_are_pytorchs(ours, theirs, attributes):
    assert type(ours).__module__ == "haelixe.nn.fused_layers"
    assert repr(ours) == repr(theirs)
    for name in attributes:
        assert getattr(ours, name) == getattr(theirs, name), name
    assert not ours.state_dict() and not list(ours.parameters())
    def plain(cls):  # (names, kinds and defaults; no annotations)
        return [(p.name, p.kind, p.default)
                for p in inspect.signature(cls.__init__).parameters.values()]
    assert plain(type(ours)) == plain(type(theirs))


def test_the_gaussian_layer_takes_keywords_only_and_three_inputs():
    with pytest.raises(TypeError, match="GaussianNLLLoss"):
        hx.nn.GaussianNLLLoss(True)
    with pytest.raises(TypeError, match=r"GaussianNLLLoss.forward takes 3 tensors "
                                        r"\(input, target, var\), got 2"):
        hx.nn.GaussianNLLLoss()(hx.ones(2), hx.ones(2))
    with pytest.raises(ValueError, match="reduction must be"):
        hx.nn.GaussianNLLLoss(reduction="batchmean")


@pytest.mark.gpu
def test_the_losses_on_the_gpu_equal_the_cpu(be):
    arrays = [m.astype(np.float32) for m in (MEANS, TARGETS, VARS["per row"])]
    calls = [lambda a, b, v: F.poisson_nll_loss(a, b.abs(), full=True),
             lambda a, b, v: F.poisson_nll_loss(a.abs(), b.abs() * 3.0, False, True,
                                                reduction="sum"),
             lambda a, b, v: F.gaussian_nll_loss(a, b, v, full=True),
             lambda a, b, v: F.gaussian_nll_loss(a, b, 0.5, reduction="none")]
    for call in calls:
        out = []
        for device in ("cpu", "gpu"):
            xs = [hx.tensor(a, device=device, requires_grad=True) for a in arrays]
            y = call(*xs)
            assert y.device.type == device
            y.sum().backward()
            out.append([y.detach().cpu().numpy()] + [
                None if x.grad is None else x.grad.cpu().numpy() for x in xs])
        for c, g in zip(*out):
            assert (c is None) == (g is None)
            if c is not None:
                np.testing.assert_allclose(g, c, rtol=2e-5, atol=2e-6)
