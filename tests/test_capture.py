"""hx.capture's front end on the CPU, where a "replay" runs the step again (numpy kernels
have no launch cost to save): the same results and the same rules as on the GPU, so one
script runs on both; the decorator forms, arguments, outputs and signatures."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn
from haelixe.nn import functional as F
from haelixe.optim import SGD, AdamW, lr_scheduler


def _setup(capturable=True):
    hx.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.GELU(), nn.Linear(8, 2))
    return model, AdamW(model.parameters(), lr=1e-2, capturable=capturable)


def _batches(n=7):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((6, 5)).astype(np.float32),
             rng.standard_normal((6, 2)).astype(np.float32)) for _ in range(n)]


def _step_fn(model, opt, calls):
    def train_step(x, y):
        calls.append(1)
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return train_step


def test_on_the_cpu_every_call_runs_the_step_and_equals_eager():
    def run(captured):
        model, opt = _setup()
        sched = lr_scheduler.CosineAnnealingLR(opt, T_max=5)
        calls = []
        fn = _step_fn(model, opt, calls)
        step = hx.capture(fn) if captured else fn
        losses = []
        for x, y in _batches():
            losses.append(step(hx.from_numpy(x), hx.from_numpy(y)).item())
            sched.step()
        return losses, [p.detach().numpy() for p in model.parameters()], calls, opt

    (le, pe, ce, oe), (lr_, pr, cr, orr) = run(False), run(True)
    assert le == lr_
    for a, b in zip(pe, pr):
        np.testing.assert_array_equal(a, b)
    assert len(cr) == len(ce) == 7  # nothing skipped the step's Python
    assert orr.step_count == oe.step_count == 7


def test_on_the_cpu_the_rules_of_a_capture_still_hold():
    model, opt = _setup(capturable=False)
    step = hx.capture(_step_fn(model, opt, []))
    x, y = _batches(1)[0]
    step(hx.from_numpy(x), hx.from_numpy(y))  # the warm-up call runs as written
    with pytest.raises(hx.CaptureError, match=r"capturable=True"):
        step(hx.from_numpy(x), hx.from_numpy(y))


def test_decorator_forms_keywords_and_structured_outputs():
    Out = namedtuple("Out", "loss parts")
    w = hx.ones(3, 2)

    @hx.capture
    def plain(x):
        return x @ w

    @hx.capture(warmup=0)
    def structured(x, *, scale):
        h = x @ w
        return Out(h.sum() * scale, {"h": h, "none": None, "list": [h.mean()]})

    x = hx.arange(6, dtype=hx.float32).reshape(2, 3)
    assert plain.__name__ == "plain" and "plain" in repr(plain)
    for _ in range(4):
        np.testing.assert_array_equal(plain(x).numpy(), (x @ w).numpy())
        out = structured(x, scale=2.0)
        assert isinstance(out, Out) and out.parts["none"] is None
        assert out.loss.item() == 2.0 * float((x @ w).sum().item())
        np.testing.assert_array_equal(out.parts["list"][0].numpy(), (x @ w).mean().numpy())


def test_arguments_that_cannot_be_captured_are_refused():
    with pytest.raises(TypeError, match="needs a function"):
        hx.capture(3)
    with pytest.raises(ValueError, match="warmup"):
        hx.capture(lambda x: x, warmup=-1)
    step = hx.capture(lambda x, opts: x.sum())
    with pytest.raises(hx.CaptureError, match=r"argument 1 is a list.*hashable"):
        step(hx.ones(2), [1, 2])
    with pytest.raises(hx.CaptureError, match=r"returns tensors .* got a str"):
        hx.capture(lambda x: "done")(hx.ones(2))


def test_a_new_python_value_or_grad_mode_is_a_new_signature():
    seen = []

    def f(x, k):
        seen.append(k)
        return x * k

    step = hx.capture(f)
    for k in (1, 2, 1, 2):
        assert step(hx.ones(2), k).numpy().tolist() == [k, k]
    with hx.no_grad():
        step(hx.ones(2), 1)
    assert len(step._signatures) == 3 and seen == [1, 2, 1, 2, 1]


def test_sgd_capturable_on_the_cpu_matches_the_plain_one():
    def run(capturable):
        hx.manual_seed(1)
        model = nn.Linear(4, 3)
        opt = SGD(model.parameters(), lr=0.1, momentum=0.9, capturable=capturable)
        for x, _ in _batches(5):
            opt.zero_grad()
            model(hx.from_numpy(x[:, :4])).square().mean().backward()
            opt.step()
        return [p.detach().numpy() for p in model.parameters()]

    for a, b in zip(run(False), run(True)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_index_checks_stay_on_the_host_on_the_cpu():
    """The CPU never defers an index check (Backend.check_range's default reads the
    values and raises at once)."""
    be = hx.zeros(1)._be
    assert not be.checks_on_device()
    idx = np.array([[0, 3], [-100, -2]])
    be.check_range(idx, -2, 4, -100, IndexError, "bad {value}")  # all in range or ignored
    be.check_range(idx.T[:, ::-1], -100, 4, None, IndexError, "bad {value}")
    with pytest.raises(IndexError, match=r"^bad 3$"):
        be.check_range(idx, -2, 3, -100, IndexError, "bad {value}")
    with pytest.raises(KeyError, match="bad -100"):
        be.check_range(idx, -2, 4, None, KeyError, "bad {value}")
