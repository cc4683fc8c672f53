"""Optimizers step for step against PyTorch: unused, frozen, re-frozen parameters,
several groups, zero_grad(set_to_none=True/False), on the CPU and the GPU; the regression
cases of issue 14 (items 2 and 3); state dicts with per-parameter step counts."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn

torch = pytest.importorskip("torch")

# name -> (haelixe class, torch class, keyword arguments)
OPTIMIZERS = {
    "sgd": ("SGD", dict(lr=0.1)),
    "sgd_momentum": ("SGD", dict(lr=0.1, momentum=0.9)),
    "sgd_nesterov_wd": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    "sgd_dampening_wd": ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.05)),
    "sgd_maximize": ("SGD", dict(lr=0.05, momentum=0.5, maximize=True)),
    "adam": ("Adam", dict(lr=0.01)),
    "adam_l2": ("Adam", dict(lr=0.01, weight_decay=0.1)),
    "adam_amsgrad": ("Adam", dict(lr=0.01, betas=(0.8, 0.9), amsgrad=True, weight_decay=0.1)),
    "adamw": ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    "adamw_amsgrad": ("AdamW", dict(lr=0.02, amsgrad=True)),
}

SHAPES = {"w1": (3, 4), "w2": (4,), "unused": (2, 2), "frozen": (3,), "refrozen": (5,)}


def _initial(seed=0):
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}


def _groups(params, layout):
    """The parameter list or groups, by name, the same for both libraries."""
    names = list(SHAPES)
    if layout == "one":
        return [params[k] for k in names]
    if layout == "equal":  # two groups with equal hyperparameters (issue 14, item 3)
        return [{"params": [params[k] for k in names[:2]]},
                {"params": [params[k] for k in names[2:]]}]
    # three groups with their own hyperparameters
    return [{"params": [params["w1"]], "lr": 0.03},
            {"params": [params["w2"], params["unused"]], "weight_decay": 0.2},
            {"params": [params["frozen"], params["refrozen"]]}]


def _loss(params, x):
    out = (x @ params["w1"]).tanh() @ params["w2"]
    # frozen and refrozen take part in the loss: they get a gradient only while they
    # require one; "unused" never does
    return (out * out).mean() + (params["frozen"] * 1.5).sum() + \
        (params["refrozen"] * params["refrozen"]).sum() * 0.3


def _run(lib, device, opt_name, layout, set_to_none, steps=6, capturable=False):
    cls, kwargs = OPTIMIZERS[opt_name]
    if capturable:
        kwargs = {**kwargs, "capturable": True}
    init = _initial()
    x_np = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    if lib == "torch":
        params = {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}
        x = torch.tensor(x_np)
        opt_cls = getattr(torch.optim, cls)
    else:
        params = {k: hx.tensor(v, device=device, requires_grad=True) for k, v in init.items()}
        x = hx.tensor(x_np, device=device)
        opt_cls = getattr(hx.optim, cls)
    params["frozen"].requires_grad_(False)  # frozen before the optimizer: accepted
    opt = opt_cls(_groups(params, layout), **kwargs)
    history = []
    for step in range(steps):
        if step == 2:
            params["refrozen"].requires_grad_(False)  # frozen after the optimizer was built
        if step == 4:
            params["refrozen"].requires_grad_(True)  # and trained again
        opt.zero_grad(set_to_none=set_to_none)
        _loss(params, x).backward()
        opt.step()
        history.append({k: np.array(p.detach().cpu().numpy() if lib == "torch" else
                                    p.detach().numpy(), dtype=np.float64)
                        for k, p in params.items()})
    return history


def _compare(got, want, rtol, atol):
    for step, (g, w) in enumerate(zip(got, want)):
        for k in SHAPES:
            np.testing.assert_allclose(g[k], w[k], rtol=rtol, atol=atol,
                                       err_msg=f"parameter {k} after step {step + 1}")


@pytest.mark.parametrize("set_to_none", [True, False])
@pytest.mark.parametrize("layout", ["one", "equal", "three"])
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_item2_optimizers_equal_pytorch_step_for_step(opt_name, layout, set_to_none):
    want = _run("torch", None, opt_name, layout, set_to_none)
    got = _run("hx", "cpu", opt_name, layout, set_to_none)
    _compare(got, want, rtol=2e-5, atol=2e-6)
    # the parameters nothing trained did not move at all
    init = _initial()
    np.testing.assert_array_equal(got[-1]["unused"], init["unused"])
    np.testing.assert_array_equal(got[-1]["frozen"], init["frozen"])


@pytest.mark.gpu
@pytest.mark.parametrize("set_to_none", [True, False])
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_item2_optimizers_equal_pytorch_on_gpu(be, opt_name, set_to_none):
    want = _run("torch", None, opt_name, "three", set_to_none)
    got = _run("hx", "gpu", opt_name, "three", set_to_none)
    _compare(got, want, rtol=1e-4, atol=2e-5)


# capturable=True (step counts and lr on the device, bias corrections in float32) follows
# PyTorch as closely, with the masks that change the per-parameter counts above
@pytest.mark.parametrize("layout", ["one", "three"])
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_capturable_optimizers_equal_pytorch_step_for_step(opt_name, layout):
    want = _run("torch", None, opt_name, layout, True)
    got = _run("hx", "cpu", opt_name, layout, True, capturable=True)
    _compare(got, want, rtol=2e-5, atol=2e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_capturable_optimizers_equal_pytorch_on_gpu(be, opt_name):
    want = _run("torch", None, opt_name, "three", False)
    got = _run("hx", "gpu", opt_name, "three", False, capturable=True)
    _compare(got, want, rtol=1e-4, atol=2e-5)


# -- issue 14, item 2: the reported cases ---------------------------------------------------
def test_item2_adamw_leaves_an_unused_parameter_untouched():
    used = hx.tensor([1.0], requires_grad=True)
    unused = hx.tensor([1.0], requires_grad=True)
    opt = hx.optim.AdamW([used, unused], lr=0.01, weight_decay=0.1)
    for _ in range(3):
        opt.zero_grad()
        (used * 2).sum().backward()
        opt.step()
    assert unused.item() == 1.0 and unused.grad is None
    assert used.item() != 1.0


def test_item2_requires_grad_false_after_construction_freezes():
    p = hx.tensor([1.0, 2.0], requires_grad=True)
    opt = hx.optim.SGD([p], lr=0.1, momentum=0.9)
    (p * p).sum().backward()
    opt.step()
    moved = p.detach().numpy().copy()
    p.requires_grad_(False)
    for _ in range(3):
        opt.zero_grad()  # set_to_none=True: the grad stays None, so momentum is not applied
        opt.step()
    np.testing.assert_array_equal(p.detach().numpy(), moved)


def test_item2_frozen_parameter_is_accepted_and_zero_grad_sets_none():
    frozen = hx.ones(3)
    live = hx.ones(3, requires_grad=True)
    opt = hx.optim.Adam([frozen, live], lr=0.1)
    (live * 3).sum().backward()
    opt.step()
    np.testing.assert_array_equal(frozen.numpy(), np.ones(3))
    opt.zero_grad()  # PyTorch's default: set_to_none=True
    assert live.grad is None and frozen.grad is None
    (live * 3).sum().backward()
    opt.zero_grad(set_to_none=False)  # zeroed in place: still a view of the flat buffer
    assert live.grad is not None and not live.grad.numpy().any()
    assert frozen.grad is None


def test_item2_set_to_none_keeps_the_flat_buffers():
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
    opt = hx.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    params = list(model.parameters())
    storage = params[0].storage
    for _ in range(3):
        opt.zero_grad()
        assert all(p.grad is None for p in params)
        model(hx.randn(3, 4)).sum().backward()
        opt.step()
        # parameters and gradients are views of one flat buffer each, re-attached
        assert {id(p.storage) for p in params} == {id(storage)}
        assert len({id(p.grad.storage) for p in params}) == 1


def test_item2_steps_skip_runs_of_parameters_in_one_flat_buffer():
    # unused parameters between used ones: the step updates the used runs only
    ps = [hx.full((3,), float(i + 1), requires_grad=True) for i in range(5)]
    tps = [torch.full((3,), float(i + 1), requires_grad=True) for i in range(5)]
    opt = hx.optim.AdamW(ps, lr=0.1, weight_decay=0.5)
    topt = torch.optim.AdamW(tps, lr=0.1, weight_decay=0.5)
    for used in ([0, 2, 4], [1, 2], [0, 1, 2, 3, 4], [3]):
        for o, group in ((opt, ps), (topt, tps)):
            o.zero_grad()
            sum((group[i] * group[i]).sum() for i in used).backward()
            o.step()
        for p, tp in zip(ps, tps):
            np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-6)


# -- issue 14, item 3 --------------------------------------------------------------------------
def test_item3_groups_with_equal_one_element_tensors_keep_their_own_state():
    a, b = hx.tensor([1.0], requires_grad=True), hx.tensor([1.0], requires_grad=True)
    opt = hx.optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1, momentum=0.9)
    for _ in range(3):
        opt.zero_grad()
        (a * 0 + b * 5).sum().backward()
        opt.step()
    assert a.item() == pytest.approx(1.0)  # PyTorch: (1.0, -1.805)
    assert b.item() == pytest.approx(-1.805, rel=1e-6)


def test_item3_two_equal_groups_with_cosine_annealing():
    ps = [hx.ones(2, requires_grad=True), hx.ones(2, requires_grad=True)]
    opt = hx.optim.AdamW([{"params": [ps[0]]}, {"params": [ps[1]]}], lr=1e-3)
    sched = hx.optim.CosineAnnealing(opt, total=4, lr_max=1e-2)
    for _ in range(4):
        opt.zero_grad()
        (ps[0] * ps[1]).sum().backward()
        opt.step()
        sched.step()
    assert [g["lr"] for g in opt.param_groups] == [sched.get_last_lr()] * 2
    np.testing.assert_array_equal(ps[0].detach().numpy(), ps[1].detach().numpy())


def test_item3_a_parameter_in_two_groups_is_refused():
    p = hx.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="more than once"):
        hx.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


@pytest.mark.gpu
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_item3_sgd_on_bf16_gpu_weights(be, momentum):
    init = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    w = hx.tensor(init, device="gpu").to(hx.bfloat16).requires_grad_()
    tw = torch.tensor(init).to(torch.bfloat16).requires_grad_()
    opt = hx.optim.SGD([w], lr=0.1, momentum=momentum, weight_decay=0.01)
    topt = torch.optim.SGD([tw], lr=0.1, momentum=momentum, weight_decay=0.01)
    for _ in range(3):
        opt.zero_grad()
        topt.zero_grad()
        (hx.tensor(x, device="gpu").to(hx.bfloat16) @ w).float().square().mean().backward()
        (torch.tensor(x).to(torch.bfloat16) @ tw).float().square().mean().backward()
        opt.step()
        topt.step()
    assert w.dtype is hx.bfloat16 and w.device.type == "gpu"
    np.testing.assert_allclose(w.detach().float().numpy(), tw.detach().float().numpy(),
                               rtol=2e-2, atol=2e-2)


# -- state dicts -------------------------------------------------------------------------------
def train(opt, ps, rounds):
    """One step per round, with a gradient for the parameters the round lists."""
    for used in rounds:
        opt.zero_grad()
        sum((ps[i] ** 2).sum() for i in used).backward()
        opt.step()


def test_state_dict_keeps_per_parameter_steps():
    ps = [hx.full((2,), float(i + 1), requires_grad=True) for i in range(3)]
    opt = hx.optim.Adam(ps, lr=0.1)
    train(opt, ps, [[0], [0, 1], [0]])  # parameter 2 never stepped, 1 once
    saved = opt.state_dict()
    # (PyTorch's layout: a parameter that never stepped has no state)
    assert {k: float(v["step"]) for k, v in saved["state"].items()} == {0: 3.0, 1: 1.0}
    qs = [p.detach().clone().requires_grad_() for p in ps]
    opt2 = hx.optim.Adam(qs, lr=0.5)
    opt2.load_state_dict(saved)
    train(opt, ps, [[0, 1, 2]] * 2)
    train(opt2, qs, [[0, 1, 2]] * 2)
    for p, q in zip(ps, qs):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_capturable_state_dict_restores_the_device_counts_and_lr():
    ps = [hx.full((2,), float(i + 1), requires_grad=True) for i in range(3)]
    opt = hx.optim.AdamW(ps, lr=0.1, capturable=True)
    train(opt, ps, [[0], [0, 1], [0]])
    saved = opt.state_dict()
    np.testing.assert_array_equal(opt.flat_groups[0][0].device_steps.numpy(), [3, 1, 0])
    qs = [p.detach().clone().requires_grad_() for p in ps]
    opt2 = hx.optim.AdamW(qs, lr=0.5, capturable=True)
    opt2.load_state_dict(saved)  # the counts and the lr of the state dict reach the device
    fg = opt2.flat_groups[0][0]
    np.testing.assert_array_equal(fg.device_steps.numpy(), [3, 1, 0])
    assert fg.device_lr.item() == pytest.approx(0.1)
    train(opt, ps, [[0, 1, 2]] * 2)
    train(opt2, qs, [[0, 1, 2]] * 2)
    for p, q in zip(ps, qs):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    opt.set_lr(0.01)  # a new lr reaches the device on the next step
    train(opt, ps, [[0]])
    assert opt.flat_groups[0][0].device_lr.item() == pytest.approx(0.01)


def test_load_state_dict_checks_before_changing_anything():
    p = hx.ones(3, requires_grad=True)
    opt = hx.optim.Adam([p], lr=0.1)
    q = hx.ones(4, requires_grad=True)
    other = hx.optim.Adam([q], lr=0.7)
    q.sum().backward()
    other.step()  # (its state: one entry of shape (4,))
    bad = other.state_dict()
    with pytest.raises(ValueError, match=r"shape \(4,\) in the state dict, \(3,\) here"):
        opt.load_state_dict(bad)
    assert opt.param_groups[0]["lr"] == 0.1


def test_constructor_errors_name_the_parameter():
    p = hx.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="wrap it in a list"):
        hx.optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        hx.optim.SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="floating point, got int64"):
        hx.optim.Adam([hx.tensor([1, 2])])
    with pytest.raises(TypeError, match="must be a dict with 'params'"):
        hx.optim.Adam([{"lr": 0.1}])
    with pytest.raises(ValueError, match="betas must lie in"):
        hx.optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov momentum needs"):
        hx.optim.SGD([p], lr=0.1, nesterov=True)
    opt = hx.optim.SGD([p], lr=0.1)
    opt.add_param_group({"params": [hx.ones(3, requires_grad=True)], "lr": 0.5})
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
