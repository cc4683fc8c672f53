"""Optimizers and schedules against their formulas (and PyTorch when installed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn
from haelixe.optim import SGD, AdamW, CosineAnnealing, clip_grad_norm_


def quadratic_grads(params, targets):
    loss = None
    for p, t in zip(params, targets):
        d = ((p - t) ** 2).sum()
        loss = d if loss is None else loss + d
    loss.backward()


def reference_adamw(p, grads, lr, b1, b2, eps, wd):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        p = p - lr * mhat / (np.sqrt(vhat) + eps)
    return p


def test_adamw_matches_reference_formula():
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal(7).astype(np.float32)
    grads = [rng.standard_normal(7).astype(np.float32) for _ in range(5)]
    p = hx.from_numpy(p0.copy()).requires_grad_()
    opt = AdamW([p], lr=0.1, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.05)
    for g in grads:
        opt.zero_grad()
        p.grad = hx.from_numpy(g)
        opt.step()
    want = reference_adamw(p0.astype(np.float64), grads, 0.1, 0.8, 0.9, 1e-6, 0.05)
    np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-5, atol=1e-6)


def test_adamw_matches_pytorch():
    torch = pytest.importorskip("torch")
    hx.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.GELU(), nn.Linear(5, 2))
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.GELU(), torch.nn.Linear(5, 2))
    with torch.no_grad():
        for tp, p in zip(tmodel.parameters(), model.parameters()):
            tp.copy_(torch.from_numpy(p.detach().numpy().copy()))
    opt = AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    topt = torch.optim.AdamW(tmodel.parameters(), lr=1e-2, weight_decay=0.1)
    x = np.random.default_rng(1).standard_normal((8, 3)).astype(np.float32)
    for _ in range(10):
        opt.zero_grad()
        (model(hx.from_numpy(x)) ** 2).mean().backward()
        opt.step()
        topt.zero_grad()
        (tmodel(torch.from_numpy(x)) ** 2).mean().backward()
        topt.step()
    for tp, p in zip(tmodel.parameters(), model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


@pytest.mark.parametrize("momentum,nesterov,wd", [(0, False, 0), (0.9, False, 0.01),
                                                  (0.9, True, 0.0)])
def test_sgd_matches_pytorch_formula(momentum, nesterov, wd):
    rng = np.random.default_rng(2)
    p0 = rng.standard_normal(4)
    grads = [rng.standard_normal(4) for _ in range(4)]
    p = hx.from_numpy(p0.copy()).requires_grad_()
    opt = SGD([p], lr=0.1, momentum=momentum, nesterov=nesterov, weight_decay=wd)
    want, buf = p0.copy(), None
    for g in grads:
        opt.zero_grad()
        p.grad = hx.from_numpy(g)
        opt.step()
        d = g + wd * want
        if momentum:
            buf = d if buf is None else momentum * buf + d
            d = d + momentum * buf if nesterov else buf
        want = want - 0.1 * d
    np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-12)


def test_parameters_live_in_one_flat_buffer_and_stay_views():
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
    before = [p.detach().numpy().copy() for p in model.parameters()]
    opt = AdamW(model.parameters())
    params = list(model.parameters())
    assert len({id(p.storage) for p in params}) == 1
    assert all(p.grad is None for p in params)  # as in PyTorch: no gradient before backward
    for p, b in zip(params, before):
        np.testing.assert_array_equal(p.detach().numpy(), b)
    # backward gives fresh gradients; the step copies them in and re-attaches the views
    model(hx.randn(3, 4)).sum().backward()
    opt.step()
    assert len({id(p.grad.storage) for p in params}) == 1
    # model.zero_grad(set_to_none) detaches the grads from the buffer: step re-attaches
    model.zero_grad()
    assert all(p.grad is None for p in params)
    model(hx.randn(3, 4)).sum().backward()
    opt.step()
    assert len({id(p.grad.storage) for p in params}) == 1


def test_grad_buffer_is_reused_across_steps():
    p = hx.randn(5, requires_grad=True)
    opt = SGD([p], lr=0.1)
    (p * p).sum().backward()
    opt.step()
    buf = p.grad.storage
    for _ in range(3):
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
        assert p.grad.storage is buf


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_fresh_gradients_land_in_the_flat_buffer(request, device):
    """With a flat buffer built, a first gradient (after zero_grad(set_to_none=True)) is
    written into the parameter's view of it by backward itself: one copy, no clone for
    the step to copy again; values as computed without an optimizer."""
    if device == "gpu":
        request.getfixturevalue("be")  # skips without an adapter
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2)).to(device)
    x = hx.randn(3, 4).to(device)
    model(x).sum().backward()
    want = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    opt = SGD(model.parameters(), lr=0.0)  # (the weights stay: the same gradients)
    flat = opt.flat_groups[0][0].grad.storage
    for _ in range(2):
        opt.zero_grad()
        model(x).sum().backward()
        for p, w in zip(model.parameters(), want):
            assert p.grad.storage is flat  # before step(): backward put it there
            np.testing.assert_allclose(p.grad.numpy(), w, rtol=1e-6)
        opt.step()


def test_one_gradient_shared_by_two_leaves_gets_two_homes():
    """An add hands its one gradient to both inputs: each leaf's home gets its own
    copy, so editing one .grad leaves the other alone."""
    a, b = hx.ones(4, requires_grad=True), hx.ones(4, requires_grad=True)
    opt = SGD([a, b], lr=0.1)  # noqa: F841 (it holds the homes)
    (a + b).sum().backward()
    assert a.grad.storage is b.grad.storage  # one flat buffer, two views
    a.grad.mul_(3.0)
    np.testing.assert_array_equal(b.grad.numpy(), np.ones(4))
    np.testing.assert_array_equal(a.grad.numpy(), np.full(4, 3.0))


def test_gradient_home_goes_with_its_optimizer():
    import gc

    p = hx.ones(3, requires_grad=True)
    opt = SGD([p], lr=0.1)
    flat = opt.flat_groups[0][0].grad.storage
    (p * 2.0).sum().backward()
    assert p.grad.storage is flat
    del opt, flat
    p.grad = None
    gc.collect()
    (p * 2.0).sum().backward()  # no optimizer left: a buffer of its own
    assert p.grad.storage.nbytes == 3 * 4
    np.testing.assert_array_equal(p.grad.numpy(), np.full(3, 2.0))


def test_create_graph_gradient_is_not_written_into_the_home():
    p = hx.tensor([1.0, 2.0], requires_grad=True)
    opt = SGD([p], lr=0.1)
    (p * p).sum().backward(create_graph=True)
    assert p.grad.grad_fn is not None  # recorded, as PyTorch's
    assert p.grad.storage is not opt.flat_groups[0][0].grad.storage
    opt.step()  # the step copies it in
    np.testing.assert_allclose(p.detach().numpy(), [0.8, 1.6], rtol=1e-6)


def test_cosine_annealing_formula_once():
    opt = SGD([hx.randn(2, requires_grad=True)], lr=1.0)
    sched = CosineAnnealing(opt, total=100, lr_max=1e-3, lr_min=5e-5)
    lrs = [opt.lr] + [sched.step() for _ in range(100)]
    for step, lr in enumerate(lrs):
        want = 5e-5 + 0.5 * (1e-3 - 5e-5) * (1 + math.cos(math.pi * step / 100))
        assert lr == pytest.approx(want, rel=1e-12)
    assert lrs[0] == pytest.approx(1e-3) and lrs[50] == pytest.approx((1e-3 + 5e-5) / 2)
    assert lrs[100] == pytest.approx(5e-5)


def test_cosine_warmup():
    opt = SGD([hx.randn(2, requires_grad=True)], lr=1.0)
    sched = CosineAnnealing(opt, total=10, lr_max=1.0, lr_min=0.0, warmup=4)
    assert [round(sched.lr(s), 6) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert sched.lr(10) == pytest.approx(0.0)


def test_clip_grad_norm():
    a = hx.zeros(3, requires_grad=True)
    b = hx.zeros(4, requires_grad=True)
    (a * hx.tensor([3.0, 0, 0])).sum().backward()
    (b * hx.tensor([0.0, 4, 0, 0])).sum().backward()
    norm = clip_grad_norm_([a, b], 1.0)
    assert isinstance(norm, hx.Tensor) and norm.ndim == 0  # a tensor, as in PyTorch
    assert float(norm) == pytest.approx(5.0)
    total = math.sqrt((a.grad.numpy() ** 2).sum() + (b.grad.numpy() ** 2).sum())
    assert total == pytest.approx(1.0, rel=1e-5)


def test_optimizer_state_dict_roundtrip():
    p = hx.randn(6, requires_grad=True)
    opt = AdamW([p], lr=0.01)
    for _ in range(3):
        opt.zero_grad()
        (p ** 2).sum().backward()
        opt.step()
    sd = opt.state_dict()
    q = p.detach().clone().requires_grad_()
    opt2 = AdamW([q], lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.lr == 0.01 and opt2.step_count == 3
    for o, t in ((opt, p), (opt2, q)):
        o.zero_grad()
        (t ** 2).sum().backward()
        o.step()
    np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_set_lr_and_empty_params_error():
    p = hx.randn(2, requires_grad=True)
    opt = AdamW([p])
    opt.set_lr(0.5)
    assert opt.param_groups[0]["lr"] == 0.5
    with pytest.raises(ValueError, match="empty parameter list"):
        AdamW([])
