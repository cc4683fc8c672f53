"""optim.lr_scheduler against PyTorch's learning-rate sequences and state dicts, the
package's CosineAnnealing with several groups, and gradient clipping against
torch.nn.utils (CPU and GPU)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import haelixe as hx
from haelixe.optim import lr_scheduler as hx_sched

torch = pytest.importorskip("torch")
t_sched = torch.optim.lr_scheduler


class Decay:
    """A callable object: LambdaLR saves its __dict__ in the state dict."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, epoch):
        return self.rate ** epoch


def _make(lib, name):
    """An optimizer with two groups (their own lrs) and the scheduler ``name``."""
    if lib == "torch":
        a, b = torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)
        opt = torch.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
        mod = t_sched
    else:
        a, b = hx.zeros(2, requires_grad=True), hx.zeros(3, requires_grad=True)
        opt = hx.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
        mod = hx_sched
    if name == "lambda":
        return opt, mod.LambdaLR(opt, lambda e: 1.0 / (1 + e))
    if name == "lambda_object":
        return opt, mod.LambdaLR(opt, [Decay(0.9), Decay(0.7)])
    if name == "step":
        return opt, mod.StepLR(opt, step_size=3, gamma=0.5)
    if name == "cosine":
        return opt, mod.CosineAnnealingLR(opt, T_max=7, eta_min=0.01)
    if name == "linear":
        return opt, mod.LinearLR(opt, start_factor=0.1, end_factor=0.9, total_iters=5)
    if name == "warmup_cosine":
        warm = mod.LinearLR(opt, start_factor=0.01, total_iters=4)
        cos = mod.CosineAnnealingLR(opt, T_max=12, eta_min=1e-4)
        return opt, mod.SequentialLR(opt, [warm, cos], milestones=[4])
    raise KeyError(name)


NAMES = ["lambda", "lambda_object", "step", "cosine", "linear", "warmup_cosine"]


def _sequence(lib, name, steps=25):
    opt, sched = _make(lib, name)
    seq = [list(sched.get_last_lr())]
    for _ in range(steps):
        opt.step()
        sched.step()
        seq.append(list(sched.get_last_lr()))
        assert [g["lr"] for g in opt.param_groups] == seq[-1]
    return seq


@pytest.mark.parametrize("name", NAMES)
def test_learning_rates_equal_pytorchs(name):
    want = _sequence("torch", name)
    got = _sequence("hx", name)
    # the same formulas in the same order: equal to rounding (the cosine runs past
    # T_max, through its restart branch)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-16)


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_resumes_the_sequence(name):
    full = _sequence("hx", name, steps=12)
    opt, sched = _make("hx", name)
    for _ in range(5):
        opt.step()
        sched.step()
    saved = sched.state_dict()
    assert "optimizer" not in saved
    opt2, sched2 = _make("hx", name)
    for g, g_saved in zip(opt2.param_groups, opt.param_groups):
        g["lr"] = g_saved["lr"]
    sched2.load_state_dict(saved)
    assert sched2.get_last_lr() == full[5]
    for k in range(6, 13):
        opt2.step()
        sched2.step()
        assert sched2.get_last_lr() == pytest.approx(full[k], rel=1e-13)


def test_state_dict_keys_match_pytorchs():
    for name in ("step", "cosine", "linear"):
        _, ours = _make("hx", name)
        _, theirs = _make("torch", name)
        assert set(theirs.state_dict()) <= set(ours.state_dict()) | {"_get_lr_called_within_step"}


@pytest.mark.parametrize("name", ["step", "cosine", "linear"])
def test_step_with_epoch_uses_the_closed_form(name):
    _, ours = _make("hx", name)
    _, theirs = _make("torch", name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in (3, 9, 4):
            ours.step(epoch)
            theirs.step(epoch)
            assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-13)


def test_scheduler_errors():
    p = hx.zeros(2, requires_grad=True)
    opt = hx.optim.SGD([p], lr=0.1)
    with pytest.raises(TypeError, match="not an Optimizer"):
        hx_sched.StepLR(object(), 3)
    with pytest.raises(KeyError, match="initial_lr"):
        hx_sched.StepLR(hx.optim.SGD([hx.zeros(1, requires_grad=True)], lr=1.0), 3,
                        last_epoch=4)
    with pytest.raises(ValueError, match="milestones"):
        hx_sched.SequentialLR(opt, [hx_sched.StepLR(opt, 2), hx_sched.StepLR(opt, 3)], [])
    with pytest.raises(ValueError, match="start_factor"):
        hx_sched.LinearLR(opt, start_factor=0.0)
    with pytest.raises(ValueError, match="2 values for 1 parameter groups"):
        hx_sched.LambdaLR(opt, [Decay(0.5), Decay(0.5)])


def test_cosine_annealing_with_two_groups_keeps_working():
    ps = [hx.ones(1, requires_grad=True), hx.ones(1, requires_grad=True)]
    opt = hx.optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]]}], lr=1.0)
    sched = hx.optim.CosineAnnealing(opt, total=10, lr_max=0.1, lr_min=0.0, warmup=2)
    lrs = [sched.step() for _ in range(10)]
    assert lrs[-1] == pytest.approx(0.0, abs=1e-15)
    assert all(g["lr"] == lrs[-1] for g in opt.param_groups)


# -- gradient clipping ---------------------------------------------------------------------
def _grads_pair(device, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(np.float32) * scale for s in ((3, 4), (5,), (2,))]
    ours = [hx.zeros(*a.shape, device=device, requires_grad=True) for a in arrays]
    theirs = [torch.zeros(a.shape, requires_grad=True) for a in arrays]
    for p, tp, a in zip(ours, theirs, arrays):
        p.grad = hx.tensor(a, device=device)
        tp.grad = torch.tensor(a)
    return ours, theirs


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_equals_pytorch(request, device, norm_type, max_norm):
    if device == "gpu":
        request.getfixturevalue("be")
    ours, theirs = _grads_pair(device)
    total = hx.nn.utils.clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    want = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    assert isinstance(total, hx.Tensor) and total.ndim == 0
    assert total.item() == pytest.approx(want.item(), rel=1e-5)
    for p, tp in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_over_an_optimizers_flat_gradients():
    ps = [hx.tensor(np.arange(1.0, 5.0, dtype=np.float32), requires_grad=True),
          hx.tensor(np.ones((2, 2), np.float32), requires_grad=True)]
    tps = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in ps]
    opt = hx.optim.SGD(ps, lr=0.1)
    for o, group in ((opt, ps), (torch.optim.SGD(tps, lr=0.1), tps)):
        (group[0] ** 3).sum().backward()
        (group[1] * 7).sum().backward()
        o.step()  # our grads now are views of one flat buffer
        o.zero_grad(set_to_none=False)
        (group[0] ** 2).sum().backward()
        (group[1] * 7).sum().backward()
    assert ps[0].grad._base is ps[1].grad._base is not None
    total = hx.optim.clip_grad_norm_(ps, 1.0)  # the alias under optim
    want = torch.nn.utils.clip_grad_norm_(tps, 1.0)
    assert total.item() == pytest.approx(want.item(), rel=1e-6)
    for p, tp in zip(ps, tps):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("listed", ["all", "one_left_out", "one_twice"])
def test_clip_grad_norm_over_two_parameter_groups(listed):
    """Two groups (two flat gradient buffers), and lists that do not tile them: a
    parameter left out (a gap) or listed twice (counted twice, as PyTorch does)."""
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5,), (2, 2), (6,))]
    ps = [hx.tensor(a, requires_grad=True) for a in arrays]
    tps = [torch.tensor(a, requires_grad=True) for a in arrays]
    opt = hx.optim.AdamW([{"params": ps[:2]}, {"params": ps[2:], "weight_decay": 0.0}])
    for group in (ps, tps):
        sum(((p * p).sum() * (i + 1) for i, p in enumerate(group))).backward()
    assert ps[0].grad._base is ps[1].grad._base is not ps[2].grad._base  # two buffers
    pick = {"all": [0, 1, 2, 3], "one_left_out": [0, 2, 3], "one_twice": [0, 1, 2, 3, 3]}
    total = hx.optim.clip_grad_norm_([ps[i] for i in pick[listed]], 1.0)
    want = torch.nn.utils.clip_grad_norm_([tps[i] for i in pick[listed]], 1.0)
    assert total.item() == pytest.approx(want.item(), rel=1e-6)
    for p, tp in zip(ps, tps):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-6)
    del opt


def test_clip_grad_norm_edge_cases():
    assert hx.nn.utils.clip_grad_norm_([hx.zeros(2, requires_grad=True)], 1.0).item() == 0
    ours, _ = _grads_pair("cpu")
    ours[1].grad = hx.tensor([math.inf, 0, 0, 0, 0])
    with pytest.raises(RuntimeError, match="non-finite"):
        hx.nn.utils.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)
    single, _ = _grads_pair("cpu")
    total = hx.nn.utils.clip_grad_norm_(single[0], 1.0)  # one tensor, not a list
    assert total.item() > 1.0
    assert np.sqrt((single[0].grad.numpy() ** 2).sum()) == pytest.approx(1.0, rel=1e-5)


def test_clip_grad_value_equals_pytorch():
    ours, theirs = _grads_pair("cpu", scale=3.0)
    hx.nn.utils.clip_grad_value_(ours, 1.5)
    torch.nn.utils.clip_grad_value_(theirs, 1.5)
    for p, tp in zip(ours, theirs):
        np.testing.assert_array_equal(p.grad.numpy(), tp.grad.numpy())
