"""Optimizer state dicts in PyTorch's layout: a checkpoint of a model and its SGD, Adam
or AdamW written by PyTorch resumes in Haelixe, and one written by Haelixe resumes in
PyTorch, the next steps giving the same parameters."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

import haelixe as hx
from haelixe import pickled

CASES = {
    "sgd momentum": ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    "sgd dampened": ("SGD", dict(lr=0.1, momentum=0.8, dampening=0.3)),
    "sgd plain": ("SGD", dict(lr=0.1)),
    "adam": ("Adam", dict(lr=0.05, weight_decay=0.1)),
    "adam amsgrad": ("Adam", dict(lr=0.05, amsgrad=True)),
    "adamw": ("AdamW", dict(lr=0.05, betas=(0.8, 0.9))),
}
RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 3)).astype(np.float64)
W0 = RNG.standard_normal((2, 3)).astype(np.float64)
B0 = RNG.standard_normal(2).astype(np.float64)


def torch_run(cls, kw):
    model = torch.nn.Linear(3, 2, dtype=torch.float64)
    with torch.no_grad():
        model.weight.copy_(torch.from_numpy(W0))
        model.bias.copy_(torch.from_numpy(B0))
    return model, getattr(torch.optim, cls)(model.parameters(), **kw)


def hx_run(cls, kw):
    model = hx.nn.Linear(3, 2, dtype=hx.float64)
    model.load_state_dict({"weight": hx.from_numpy(W0.copy()), "bias": hx.from_numpy(B0.copy())})
    return model, getattr(hx.optim, cls)(model.parameters(), **kw)


def steps(lib, model, opt, n, only_weight_at=()):
    x = lib.from_numpy(X.copy())
    for k in range(n):
        opt.zero_grad()
        out = model(x)
        loss = (out * out).sum() if k not in only_weight_at else (x @ model.weight.T).sum()
        loss.backward()
        opt.step()


def params(model):
    return [p.detach().numpy().copy() for p in (model.weight, model.bias)]


@pytest.mark.parametrize("case", list(CASES))
def test_a_pytorch_checkpoint_resumes_here(case):
    cls, kw = CASES[case]
    model, opt = torch_run(cls, kw)
    steps(torch, model, opt, 3, only_weight_at=(0,))  # (the bias misses a step)
    buf = io.BytesIO()
    torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, buf)
    ckpt = pickled.load(io.BytesIO(buf.getvalue()))
    ours, our_opt = hx_run(cls, {k: (v * 3 if k == "lr" else v) for k, v in kw.items()})
    ours.load_state_dict(ckpt["model"])
    our_opt.load_state_dict(ckpt["optim"])
    assert our_opt.param_groups[0]["lr"] == kw["lr"]  # (the saved hyperparameters)
    steps(torch, model, opt, 2)
    steps(hx, ours, our_opt, 2)
    for a, b in zip(params(ours), params(model)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("case", list(CASES))
def test_a_haelixe_checkpoint_resumes_in_pytorch(case):
    cls, kw = CASES[case]
    ours, our_opt = hx_run(cls, kw)
    steps(hx, ours, our_opt, 3, only_weight_at=(0,))
    buf = io.BytesIO()
    pickled.save({"model": ours.state_dict(), "optim": our_opt.state_dict()}, buf)
    ckpt = torch.load(io.BytesIO(buf.getvalue()))  # (weights_only=True there)
    model, opt = torch_run(cls, kw)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optim"])
    steps(hx, ours, our_opt, 2)
    steps(torch, model, opt, 2)
    for a, b in zip(params(ours), params(model)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_the_state_dict_has_pytorchs_keys_and_steps():
    for case, (cls, kw) in CASES.items():
        model, opt = torch_run(cls, kw)
        ours, our_opt = hx_run(cls, kw)
        for lib, m, o in ((torch, model, opt), (hx, ours, our_opt)):
            steps(lib, m, o, 2, only_weight_at=(0,))
        theirs, mine = opt.state_dict(), our_opt.state_dict()
        assert mine["state"].keys() == theirs["state"].keys(), case
        for k, entry in theirs["state"].items():
            assert mine["state"][k].keys() == entry.keys(), case
            if "step" in entry:
                assert float(mine["state"][k]["step"]) == float(entry["step"]), case
        assert mine["param_groups"][0]["params"] == theirs["param_groups"][0]["params"]


def test_master_weights_are_kept_beside_pytorchs_state():
    p = hx.nn.Parameter(hx.tensor([1.0, 2.0], dtype=hx.bfloat16))
    opt = hx.optim.AdamW([p], lr=1e-3, master_weights=True)
    for _ in range(3):
        opt.zero_grad()
        (p.float() * hx.tensor([1.0, -1.0])).sum().backward()
        opt.step()
    saved = opt.state_dict()
    master = saved["state"][0]["master_weight"]
    assert master.dtype is hx.float32 and not np.array_equal(
        master.numpy(), p.detach().float().numpy())  # (updates below a bf16 ulp)
    q = hx.nn.Parameter(p.detach().clone())
    opt2 = hx.optim.AdamW([q], lr=1e-3, master_weights=True)
    opt2.load_state_dict(saved)
    np.testing.assert_array_equal(opt2.flat_groups[0][0].state["master"].numpy(),
                                  master.numpy())
    del saved["state"][0]["master_weight"]  # PyTorch's state: the master from the weights
    opt2.load_state_dict(saved)
    np.testing.assert_array_equal(opt2.flat_groups[0][0].state["master"].numpy(),
                                  q.detach().float().numpy())


def test_a_state_dict_of_another_layout_is_refused_by_name():
    opt = hx.optim.Adam([hx.zeros(2, requires_grad=True)])
    with pytest.raises(ValueError, match="no 'params' list"):
        opt.load_state_dict({"step": 1, "param_groups": [{"lr": 0.1}], "state": {}})
    with pytest.raises(KeyError, match="parameter 0 lacks 'exp_avg_sq'"):
        opt.load_state_dict({"state": {0: {"step": hx.tensor(1.0), "exp_avg": hx.zeros(2)}},
                             "param_groups": [{**opt.param_groups[0], "params": [0]}]})
