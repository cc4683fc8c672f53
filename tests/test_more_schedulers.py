"""The learning-rate schedulers beyond the basic ones (MultiplicativeLR, MultiStepLR,
ConstantLR, ExponentialLR, PolynomialLR, CosineAnnealingWarmRestarts, CyclicLR,
OneCycleLR, ReduceLROnPlateau, ChainedScheduler) against PyTorch's: every group's
learning rate and cycled momentum after each step, state dicts, signatures, errors."""

from __future__ import annotations

import copy
import inspect
import warnings

import numpy as np
import pytest

import haelixe as hx
from haelixe.optim import lr_scheduler as hx_sched

torch = pytest.importorskip("torch")
t_sched = torch.optim.lr_scheduler


class Scale:
    """A callable object: its __dict__ is saved in the state dict."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, x):
        return self.rate ** x


def _optimizer(lib, kind):
    """Two parameter groups with their own learning rates."""
    if lib == "torch":
        a, b = torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)
        optim = torch.optim
    else:
        a, b = hx.zeros(2, requires_grad=True), hx.zeros(3, requires_grad=True)
        optim = hx.optim
    groups = [{"params": [a]}, {"params": [b], "lr": 0.5}]
    if kind == "sgd":
        return optim.SGD(groups, lr=0.1, momentum=0.9)
    return optim.AdamW(groups, lr=0.1, betas=(0.9, 0.99))


# name -> (optimizer, scheduler from (module, optimizer), steps)
CASES = {
    "multiplicative": ("sgd", lambda S, o: S.MultiplicativeLR(o, lambda e: 0.95), 30),
    "multiplicative_each": ("sgd", lambda S, o: S.MultiplicativeLR(
        o, [lambda e: 0.9, lambda e: 1 - 0.01 * e]), 30),
    "multistep": ("sgd", lambda S, o: S.MultiStepLR(o, [3, 7, 7, 12], gamma=0.5), 20),
    "constant": ("sgd", lambda S, o: S.ConstantLR(o, factor=0.25, total_iters=4), 10),
    "exponential": ("sgd", lambda S, o: S.ExponentialLR(o, 0.9), 30),
    "polynomial": ("sgd", lambda S, o: S.PolynomialLR(o, total_iters=8, power=2.0), 15),
    "polynomial_linear": ("sgd", lambda S, o: S.PolynomialLR(o), 10),
    "warm_restarts": ("sgd", lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=4), 14),
    "warm_restarts_mult": ("sgd", lambda S, o: S.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=0.01), 30),
    "cyclic": ("sgd", lambda S, o: S.CyclicLR(o, 0.01, [0.1, 0.4], step_size_up=3,
                                              step_size_down=5), 30),
    "cyclic_triangular2": ("adamw", lambda S, o: S.CyclicLR(
        o, [0.001, 0.01], 0.1, step_size_up=4, mode="triangular2",
        base_momentum=0.85, max_momentum=0.95), 30),
    "cyclic_exp_range": ("sgd", lambda S, o: S.CyclicLR(
        o, 0.01, 0.1, step_size_up=3, mode="exp_range", gamma=0.9), 24),
    "cyclic_scale_fn": ("adamw", lambda S, o: S.CyclicLR(
        o, 0.01, 0.1, step_size_up=2, scale_fn=Scale(0.95), scale_mode="iterations"), 20),
    "cyclic_no_momentum": ("sgd", lambda S, o: S.CyclicLR(
        o, 0.01, 0.1, step_size_up=2, cycle_momentum=False), 12),
    "one_cycle": ("sgd", lambda S, o: S.OneCycleLR(o, 1.0, total_steps=20), 20),
    "one_cycle_linear": ("adamw", lambda S, o: S.OneCycleLR(
        o, [0.1, 1.0], epochs=4, steps_per_epoch=5, anneal_strategy="linear",
        base_momentum=[0.8, 0.85], max_momentum=0.9), 20),
    "one_cycle_three_phase": ("adamw", lambda S, o: S.OneCycleLR(
        o, 0.5, total_steps=25, pct_start=0.25, three_phase=True, div_factor=10.0,
        final_div_factor=100.0), 25),
    "one_cycle_no_momentum": ("sgd", lambda S, o: S.OneCycleLR(
        o, 0.3, total_steps=10, cycle_momentum=False), 10),
    "chained": ("sgd", lambda S, o: S.ChainedScheduler(
        [S.ConstantLR(o, factor=0.5, total_iters=3), S.ExponentialLR(o, 0.9)]), 12),
    "chained_milestones": ("sgd", lambda S, o: S.ChainedScheduler(
        [S.LinearLR(o, 0.2, total_iters=4), S.MultiStepLR(o, [2, 6], 0.3)], o), 12),
    "sequential_new": ("sgd", lambda S, o: S.SequentialLR(
        o, [S.ConstantLR(o, 0.1, 3), S.PolynomialLR(o, 6, 1.5)], milestones=[3]), 12),
}


def _hyper(opt):
    """Every group's lr and momentum (or beta1)."""
    return [(g["lr"], g["momentum"] if "momentum" in g else g["betas"][0])
            for g in opt.param_groups]


def _build(lib, name):
    kind, make, _ = CASES[name]
    opt = _optimizer(lib, kind)
    return opt, make(t_sched if lib == "torch" else hx_sched, opt)


def _run(lib, name, steps=None):
    opt, sched = _build(lib, name)
    seq = [_hyper(opt)]
    for _ in range(steps or CASES[name][2]):
        opt.step()
        sched.step()
        seq.append(_hyper(opt))
        assert sched.get_last_lr() == [g["lr"] for g in opt.param_groups]
    return seq


@pytest.mark.parametrize("name", list(CASES))
def test_rates_and_momenta_equal_pytorchs(name):
    np.testing.assert_allclose(_run("hx", name), _run("torch", name), rtol=1e-12,
                               atol=1e-16)


def _group_hyper(opt):
    return [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]


@pytest.mark.parametrize("name", list(CASES))
def test_state_dict_round_trip_continues_the_schedule(name):
    steps = min(CASES[name][2], 14)
    full = _run("hx", name, steps)
    opt, sched = _build("hx", name)
    for _ in range(5):
        opt.step()
        sched.step()
    saved = copy.deepcopy(sched.state_dict())
    opt2, sched2 = _build("hx", name)
    for g2, g in zip(opt2.param_groups, _group_hyper(opt)):
        g2.update(g)  # the optimizer's own state dict would restore these
    sched2.load_state_dict(saved)
    assert _hyper(opt2) == full[5]
    for k in range(6, steps + 1):
        opt2.step()
        sched2.step()
        assert _hyper(opt2) == full[k]


@pytest.mark.parametrize("name", ["multiplicative", "multistep", "warm_restarts_mult",
                                  "cyclic_scale_fn", "one_cycle", "chained"])
def test_state_dict_keys_match_pytorchs(name):
    _, ours = _build("hx", name)
    _, theirs = _build("torch", name)
    want, got = theirs.state_dict(), ours.state_dict()
    assert set(want) <= set(got) | {"_get_lr_called_within_step"}
    if name == "cyclic_scale_fn":  # a callable object's state is saved
        assert got["_scale_fn_custom"] == want["_scale_fn_custom"] == {"rate": 0.95}
    if name == "chained":
        assert [set(s) - {"_get_lr_called_within_step"} for s in want["_schedulers"]] == \
            [set(s) - {"_get_lr_called_within_step"} for s in got["_schedulers"]]


NAMES = ["MultiplicativeLR", "MultiStepLR", "ConstantLR", "ExponentialLR", "PolynomialLR",
         "CosineAnnealingWarmRestarts", "CyclicLR", "OneCycleLR", "ReduceLROnPlateau",
         "ChainedScheduler"]


def _params(cls):
    return [(p.name, p.default, p.kind) for p in inspect.signature(cls).parameters.values()]


@pytest.mark.parametrize("name", NAMES)
def test_signatures_are_pytorchs(name):
    assert _params(getattr(hx_sched, name)) == _params(getattr(t_sched, name))
    assert name in hx_sched.__all__


def _stepped_to(lib, name, epochs):
    opt, sched = _build(lib, name)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's deprecation of step(epoch)
        for epoch in epochs:
            opt.step()
            sched.step(epoch)
            out.append(_hyper(opt))
    return out


@pytest.mark.parametrize("name", ["multistep", "constant", "exponential", "polynomial"])
def test_step_with_epoch_uses_the_closed_form(name):
    epochs = [3, 9, 4, 7, 12, 2]
    np.testing.assert_allclose(_stepped_to("hx", name, epochs),
                               _stepped_to("torch", name, epochs), rtol=1e-12)


@pytest.mark.parametrize("name", ["warm_restarts", "warm_restarts_mult"])
def test_warm_restarts_with_fractional_epochs(name):
    # a step per batch (epoch + i / batches), then jumps back and forth
    epochs = [e + i / 5 for e in range(12) for i in range(5)] + [2.5, 20.0, 0, 9.99]
    np.testing.assert_allclose(_stepped_to("hx", name, epochs),
                               _stepped_to("torch", name, epochs), rtol=1e-12, atol=1e-16)


# -- ReduceLROnPlateau ----------------------------------------------------------------------
LOSSES = [1.0, 0.9, 0.9, 0.95, 0.9, 0.8999, 0.85, 0.85, 0.86, 0.87, 0.7, 0.7, 0.7, 0.7,
          0.7, 0.69995, 0.6, 0.61, 0.62, 0.63, 0.64, 0.65, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
ACCURACY = [0.1, 0.3, 0.35, 0.38, 0.39, 0.5, 0.5, 0.55, 0.61, 0.6, 0.6, 0.7, 0.71, 0.72,
            0.72, 0.9, 0.9, 0.9, 0.9, 0.9]

PLATEAU = {
    "default": (dict(patience=1), LOSSES),
    "cooldown_min_lr": (dict(factor=0.5, patience=1, cooldown=2, min_lr=[0.02, 0.1]),
                        LOSSES),
    "abs": (dict(threshold=0.02, threshold_mode="abs", patience=0, min_lr=0.003), LOSSES),
    "max_rel": (dict(mode="max", factor=0.3, patience=1, threshold=0.05), ACCURACY),
    "max_abs": (dict(mode="max", patience=2, threshold=0.015, threshold_mode="abs",
                     cooldown=1), ACCURACY),
    "eps": (dict(factor=0.9, patience=0, eps=0.02), LOSSES),
}


def _plateau(lib, name, metrics=None):
    kwargs, script = PLATEAU[name]
    opt = _optimizer(lib, "sgd")
    sched = (t_sched if lib == "torch" else hx_sched).ReduceLROnPlateau(opt, **kwargs)
    seq = []
    for m in script if metrics is None else metrics:
        opt.step()
        sched.step(m)
        seq.append((*[g["lr"] for g in opt.param_groups], sched.best, sched.num_bad_epochs,
                    sched.cooldown_counter, sched.last_epoch))
        assert sched.get_last_lr() == [g["lr"] for g in opt.param_groups]
    return opt, sched, seq


@pytest.mark.parametrize("name", list(PLATEAU))
def test_reduce_on_plateau_equals_pytorchs(name):
    np.testing.assert_allclose(_plateau("hx", name)[2], _plateau("torch", name)[2],
                               rtol=1e-12)


@pytest.mark.parametrize("name", ["cooldown_min_lr", "max_abs"])
def test_reduce_on_plateau_state_dict(name):
    script = PLATEAU[name][1]
    _, _, full = _plateau("hx", name)
    opt, sched, _ = _plateau("hx", name, script[:9])
    _, theirs, _ = _plateau("torch", name, script[:9])
    saved = copy.deepcopy(sched.state_dict())
    assert set(saved) == set(theirs.state_dict())
    assert saved == theirs.state_dict()  # the same operations: equal values
    opt2, sched2, _ = _plateau("hx", name, [])
    for g2, g in zip(opt2.param_groups, opt.param_groups):
        g2["lr"] = g["lr"]
    sched2.load_state_dict(saved)
    for k, m in enumerate(script[9:], start=9):
        opt2.step()
        sched2.step(m)
        assert [g["lr"] for g in opt2.param_groups] == list(full[k][:2])
        assert (sched2.best, sched2.num_bad_epochs, sched2.cooldown_counter) == full[k][2:5]


def test_reduce_on_plateau_takes_a_tensor_metric():
    opt = _optimizer("hx", "sgd")
    sched = hx_sched.ReduceLROnPlateau(opt, patience=0)
    sched.step(hx.tensor(1.0))
    sched.step(hx.tensor(2.0))
    assert sched.get_last_lr() == pytest.approx([0.01, 0.05], rel=1e-12)


# -- errors ---------------------------------------------------------------------------------
def _sgd(lr=0.1, momentum=0.9):
    return hx.optim.SGD([hx.zeros(2, requires_grad=True)], lr=lr, momentum=momentum)


class NoMomentum(hx.optim.SGD):
    """An optimizer without momentum or betas among its defaults."""

    def __init__(self, params):
        super().__init__(params, lr=0.1)
        del self.defaults["momentum"]


ERRORS = [
    (lambda: hx_sched.MultiplicativeLR(_sgd(), 0.9), TypeError,
     "MultiplicativeLR: lr_lambda must be a function"),
    (lambda: hx_sched.ConstantLR(_sgd(), factor=1.5), ValueError,
     r"ConstantLR: factor must be in \[0, 1\]"),
    (lambda: hx_sched.CosineAnnealingWarmRestarts(_sgd(), T_0=0), ValueError,
     "CosineAnnealingWarmRestarts: T_0 must be a positive integer"),
    (lambda: hx_sched.CosineAnnealingWarmRestarts(_sgd(), T_0=2, T_mult=1.5), ValueError,
     "T_mult must be an integer >= 1"),
    (lambda: hx_sched.CosineAnnealingWarmRestarts(_sgd(), 2).step(-1), ValueError,
     "CosineAnnealingWarmRestarts: epoch must be >= 0"),
    (lambda: hx_sched.CyclicLR(_sgd(), 0.01, 0.1, mode="sine"), ValueError,
     "CyclicLR: mode must be"),
    (lambda: hx_sched.CyclicLR(_sgd(), [0.01, 0.02], 0.1), ValueError,
     "CyclicLR: base_lr: 2 values for 1 parameter groups"),
    (lambda: hx_sched.CyclicLR(NoMomentum([hx.zeros(1, requires_grad=True)]), 0.01, 0.1),
     ValueError, "CyclicLR: cycle_momentum=True needs an optimizer with momentum"),
    (lambda: hx_sched.OneCycleLR(_sgd(), 0.1), ValueError,
     "OneCycleLR: give total_steps, or both epochs and steps_per_epoch"),
    (lambda: hx_sched.OneCycleLR(_sgd(), 0.1, total_steps=0), ValueError,
     "OneCycleLR: total_steps must be a positive integer"),
    (lambda: hx_sched.OneCycleLR(_sgd(), 0.1, epochs=2, steps_per_epoch=2.5), ValueError,
     "OneCycleLR: steps_per_epoch must be a positive integer"),
    (lambda: hx_sched.OneCycleLR(_sgd(), 0.1, total_steps=9, pct_start=1.2), ValueError,
     r"OneCycleLR: pct_start must be a float in \[0, 1\]"),
    (lambda: hx_sched.OneCycleLR(_sgd(), 0.1, total_steps=9, anneal_strategy="exp"),
     ValueError, "OneCycleLR: anneal_strategy must be 'cos' or 'linear'"),
    (lambda: hx_sched.OneCycleLR(object(), 0.1, total_steps=9), TypeError,
     "OneCycleLR: object is not an Optimizer"),
    (lambda: hx_sched.ReduceLROnPlateau(_sgd(), factor=1.0), ValueError,
     "ReduceLROnPlateau: factor must be < 1.0"),
    (lambda: hx_sched.ReduceLROnPlateau(_sgd(), mode="lowest"), ValueError,
     "ReduceLROnPlateau: mode must be 'min' or 'max'"),
    (lambda: hx_sched.ReduceLROnPlateau(_sgd(), threshold_mode="pct"), ValueError,
     "ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs'"),
    (lambda: hx_sched.ReduceLROnPlateau(_sgd(), min_lr=[0.0, 0.1]), ValueError,
     "ReduceLROnPlateau: min_lr: 2 values for 1 parameter groups"),
    (lambda: hx_sched.ChainedScheduler([]), ValueError,
     "ChainedScheduler expects at least one scheduler"),
    (lambda: hx_sched.ChainedScheduler([hx_sched.ReduceLROnPlateau(_sgd())]), ValueError,
     "ChainedScheduler: scheduler 0 is a ReduceLROnPlateau"),
    (lambda: hx_sched.ChainedScheduler([hx_sched.ExponentialLR(_sgd(), 0.9),
                                        hx_sched.ExponentialLR(_sgd(), 0.9)]), ValueError,
     "ChainedScheduler: scheduler 1 \\(ExponentialLR\\) belongs to another optimizer"),
]


@pytest.mark.parametrize("make,error,match", ERRORS)
def test_errors_name_the_scheduler(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_one_cycle_past_total_steps_is_an_error():
    for lib, S in (("torch", t_sched), ("hx", hx_sched)):
        opt = _optimizer(lib, "sgd")
        sched = S.OneCycleLR(opt, 0.1, total_steps=4)
        for _ in range(4):  # the last step reaches min_lr
            opt.step()
            sched.step()
        with pytest.raises(ValueError) as err:
            sched.step()
    assert "OneCycleLR: step() called 5 times, past total_steps=4" in str(err.value)


def test_one_cycle_with_adamw_cycles_beta1_and_keeps_beta2():
    opt = _optimizer("hx", "adamw")
    sched = hx_sched.OneCycleLR(opt, 0.1, total_steps=10)
    betas = []
    for _ in range(10):
        opt.step()
        sched.step()
        betas.append(opt.param_groups[0]["betas"])
    assert all(b2 == 0.99 for _, b2 in betas)
    assert min(b1 for b1, _ in betas) == pytest.approx(0.85)
