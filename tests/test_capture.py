"""hx.capture's front end and its CPU graph: a replay runs the recorded backend calls
without the Python above them and equals eager mode bit for bit; the decorator forms,
arguments, outputs and signatures; and, as on the GPU, the steps a replay would get
wrong are refused naming the call and the fix."""

from __future__ import annotations

import gc
from collections import namedtuple

import numpy as np
import pytest
from capture_steps import (
    OPTIMIZERS,
    VOCAB,
    X,
    Y,
    assert_identical,
    call,
    lm_batches,
    lm_step,
    mlp,
    mlp_batches,
    model_and_opt,
    train_run,
    train_step,
)

import haelixe as hx
from haelixe import nn
from haelixe.data.sine import SineTask
from haelixe.denoise import Denoiser
from haelixe.nn import functional as F
from haelixe.optim import SGD, AdamW, CosineAnnealing, clip_grad_norm_, lr_scheduler


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


def test_on_the_cpu_a_replay_equals_eager_bit_for_bit(one_blas_thread):
    def run(captured):
        model, opt = _setup()
        sched = lr_scheduler.CosineAnnealingLR(opt, T_max=5)
        calls = []
        fn = _step_fn(model, opt, calls)
        step = hx.capture(fn) if captured else fn
        losses, grads = [], []
        for x, y in _batches():
            losses.append(step(hx.from_numpy(x), hx.from_numpy(y)).item())
            grads.append([p.grad.numpy().copy() for p in model.parameters()])
            sched.step()
        return losses, grads, [p.detach().numpy() for p in model.parameters()], calls, \
            step, opt

    (le, ge, pe, ce, _, oe), (lr_, gr, pr, cr, step, orr) = run(False), run(True)
    assert le == lr_ and len(set(le)) == len(le)
    for a, b in zip(pe, pr):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(ge, gr):  # .grad after a replay holds that replay's gradient
        for ga, gb in zip(a, b):
            np.testing.assert_array_equal(ga, gb)
    # the warm-up call and the two recorded ones ran the Python; four replays did not
    assert len(ce) == 7 and len(cr) == 3
    assert step.captured == 1 and step.graph_stats()[0]["dispatches"] > 10
    assert orr.step_count == oe.step_count == 7  # (host counts kept by the replays)


def test_on_the_cpu_an_optimizer_without_capturable_is_refused():
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


# -- replays equal eager mode bit for bit, on either device --------------------------------
@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    """Each device: the GPU where an adapter exists; the CPU with BLAS on one thread (its
    thread count would otherwise follow the machine's load, and with it the rounding)."""
    if request.param == "gpu":
        request.getfixturevalue("be")  # (skips without an adapter)
    else:
        request.getfixturevalue("one_blas_thread")
    return request.param


def _denoiser_run(device, captured: bool, steps=9):
    hx.manual_seed(0)
    model = Denoiser().to(device)
    opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, capturable=True)
    sched = CosineAnnealing(opt, total=4, lr_max=1e-3, lr_min=5e-5)
    data = SineTask("random", 4, 0)
    batches = [data.batch() for _ in range(steps)]
    out = train_run(model, opt, batches, captured, device,
                    on_call=lambda i: sched.step() if i % 2 else None)
    return out, opt


def test_denoiser_replay_equals_eager_bit_for_bit(device):
    eager, opt_e = _denoiser_run(device, False)
    replayed, opt_r = _denoiser_run(device, True)
    assert_identical(eager, replayed)
    assert replayed[3] == 3  # warm-up + two recorded calls: the rest ran no Python
    assert replayed[4].captured == 1
    # the host's step counts advanced with the replays (state dicts, schedulers)
    assert opt_r.step_count == opt_e.step_count == 9
    steps = [{k: float(v["step"]) for k, v in o.state_dict()["state"].items()}
             for o in (opt_r, opt_e)]
    assert steps[0] == steps[1] and set(steps[0].values()) == {9.0}


def test_bf16_autocast_master_weights_and_clipping_replay_bit_for_bit(device):
    def run(captured):
        hx.manual_seed(0)
        model = Denoiser().to(device).to(hx.bfloat16)
        opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, master_weights=True,
                    capturable=True)
        data = SineTask("random", 4, 0)

        def train_step(x, y):
            opt.zero_grad(set_to_none=False)
            with hx.autocast(dtype=hx.bfloat16):
                loss = F.mse_loss(model(x).float(), y)
            loss.backward()
            norm = clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            return loss, norm

        step = hx.capture(train_step, device=device) if captured else train_step
        values = []
        for _ in range(6):
            noisy, clean = data.batch()
            if not captured:
                noisy, clean = (hx.from_numpy(noisy).to(device),
                                hx.from_numpy(clean).to(device))
            loss, norm = step(noisy, clean)
            values.append((loss.item(), norm.item()))
        return values, [p.detach().float().numpy() for p in model.parameters()]

    (ve, pe), (vr, pr) = run(False), run(True)
    assert ve == vr
    for a, b in zip(pe, pr):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_mlp_with_a_cosine_schedule_replays_bit_for_bit(name, device):
    def run(captured):
        model = mlp(device)
        opt = OPTIMIZERS[name](model.parameters())
        sched = lr_scheduler.CosineAnnealingLR(opt, T_max=6, eta_min=1e-4)
        return train_run(model, opt, mlp_batches(10), captured, device,
                         on_call=lambda i: sched.step())

    eager, replayed = run(False), run(True)
    assert_identical(eager, replayed)
    assert replayed[3] == 3


def test_device_arguments_are_copied_into_the_static_inputs(device):
    model = mlp(device)
    opt = AdamW(model.parameters(), lr=1e-2, capturable=True)

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss, model(x)

    step = hx.capture(train_step)
    ref_model = mlp(device)
    ref_opt = AdamW(ref_model.parameters(), lr=1e-2, capturable=True)
    for x, y in mlp_batches(6):
        xd, yd = hx.from_numpy(x).to(device), hx.from_numpy(y).to(device)
        strided = hx.from_numpy(np.ascontiguousarray(x.T)).to(device).T  # read by strides
        loss, pred = step(strided, yd)
        ref_opt.zero_grad()
        ref_loss = F.mse_loss(ref_model(xd), yd)
        ref_loss.backward()
        ref_opt.step()
        assert loss.item() == ref_loss.item()
        np.testing.assert_array_equal(pred.numpy(), ref_model(xd).detach().numpy())
        assert isinstance(pred, hx.Tensor) and not pred.requires_grad
    assert step.captured == 1


def test_a_backward_observer_is_told_no_norms_while_a_step_is_recorded(device):
    """A live graph view watches every backward pass: a captured step's recorded calls
    tell it each node without reading its gradients back (norms None), its replays run no
    Python to tell it anything, and the step still equals eager mode."""
    from haelixe.autograd import add_backward_observer

    events = []
    remove = add_backward_observer(lambda event, node, norms: events.append((event, norms)))
    try:
        eager, _ = _denoiser_run(device, False, steps=5)
        n_eager = len(events)
        events.clear()
        replayed, _ = _denoiser_run(device, True, steps=5)
    finally:
        remove()
    assert_identical(eager, replayed)
    per_call = n_eager // 5
    assert per_call > 0 and len(events) == 3 * per_call  # warm-up + two recorded calls
    norms = [n for event, n in events if event == "finish"]
    warm, recorded = norms[:len(norms) // 3], norms[len(norms) // 3:]
    assert any(isinstance(v, float) for ns in warm for v in ns)
    assert all(v is None for ns in recorded for v in ns)


def test_in_anomaly_mode_every_call_runs_eagerly(device):
    model, opt = model_and_opt(device)
    calls = []
    step = hx.capture(train_step(model, opt, extra=lambda loss: calls.append(1)),
                      device=device)
    with hx.autograd.detect_anomaly():
        for _ in range(5):
            assert np.isfinite(step(X, Y).item())
        assert len(calls) == 5 and step.captured == 0
        bad = X.copy()
        bad[0, 0] = np.nan
        with pytest.raises(RuntimeError, match="NaN"):
            step(bad, Y)
    for _ in range(4):  # outside: a signature of its own, captured as usual
        step(X, Y)
    assert len(calls) == 5 + 3 and step.captured == 1


# -- the CPU graph: what it refuses, naming the call and the fix ---------------------------
@pytest.mark.parametrize("read", [lambda t: t.item(), lambda t: t.numpy(),
                                  lambda t: print(t), lambda t: float(t)],
                         ids=["item", "numpy", "print", "float"])
def test_cpu_a_read_back_inside_the_step_is_refused(read):
    model, opt = model_and_opt()
    with pytest.raises(hx.CaptureError, match=r"read-back .* inside a captured step .*"
                       r"test_capture.py:\d+ in .*loss.item\(\)"):
        call(train_step(model, opt, extra=lambda loss: read(loss.detach())), X, Y)


def test_cpu_host_randomness_inside_the_step_is_refused():
    model, opt = model_and_opt(dropout=0.5)
    with pytest.raises(hx.CaptureError, match=r"from_numpy .*dropout.* in train_step\) "
                       r"turned other host data into a tensor.*randomness"):
        call(train_step(model, opt), X, Y)


def test_cpu_a_changing_python_number_is_refused():
    scale = [1.0]
    w = hx.randn(8, 4)

    def f(x):
        scale[0] *= 2
        return (x @ w * scale[0]).sum()

    with pytest.raises(hx.CaptureError, match=r"capture: mul \(backend call #\d+, .*in f\) "
                       r"got other values on two calls: its argument 1 was np.float32\(4.0\) "
                       r"and then np.float32\(8.0\)"):
        call(f, X)


def test_cpu_data_read_through_a_closure_is_refused():
    w = hx.randn(8, 4)
    box = {}

    def f(y):
        return ((box["x"] @ w) - y).abs().sum()

    step = hx.capture(f)
    with pytest.raises(hx.CaptureError, match=r"(different tensor created outside the "
                       r"function|freed since the capture).*as an argument"):
        for i in range(5):
            box["x"] = hx.from_numpy(X + i)
            step(Y)


def test_cpu_state_replaced_instead_of_updated_is_refused():
    state = {"h": hx.zeros(4, 8)}

    def f(x):
        state["h"] = state["h"] * 0.5 + x
        return state["h"].sum()

    with pytest.raises(hx.CaptureError, match=r"reads a tensor the previous call created.*"
                       r"in place"):
        call(f, X)


def test_cpu_state_updated_in_place_replays():
    state = hx.zeros(4, 8)

    def f(x):
        state.mul_(0.5).add_(x)
        return state.sum()

    step = hx.capture(f)
    h = np.zeros((4, 8), np.float32)
    for i in range(6):
        got = step(X * i).item()
        h = h * np.float32(0.5) + X * i
        assert got == float(h.sum())
        np.testing.assert_array_equal(state.numpy(), h)
    assert step.captured == 1


def test_cpu_host_data_made_inside_the_step_is_refused_when_it_changes():
    host = [np.zeros(3, np.float32)]

    def f(x):
        host[0] = host[0] + 1
        return (x - hx.from_numpy(host[0])).sum()

    with pytest.raises(hx.CaptureError, match=r"from_numpy .*other host data into a tensor"):
        call(f, np.ones(3, np.float32))


def test_cpu_a_constant_made_inside_the_step_is_baked_and_fresh_every_replay():
    def f(x):
        c = hx.tensor([1.0, 2.0, 3.0])
        c.mul_(2.0)  # written in place: the next replay must start from the constant again
        return (x * c).sum()

    step = hx.capture(f)
    for i in range(5):
        assert step(np.full(3, float(i), np.float32)).item() == 12.0 * i
    assert step.captured == 1


def test_cpu_outputs_are_rewritten_by_the_next_replay():
    w = hx.randn(8, 4)
    step = call(lambda x: x @ w, X)
    first = step(X)
    kept = first.clone()
    second = step(2 * X)
    np.testing.assert_array_equal(second.numpy(), (2 * X) @ w.numpy())
    np.testing.assert_array_equal(first.numpy(), second.numpy())  # the same buffer
    np.testing.assert_array_equal(kept.numpy(), X @ w.numpy())


def test_cpu_nested_captures_are_refused():
    w = hx.randn(8, 4)
    inner = hx.capture(lambda x: (x @ w).sum())
    with pytest.raises(hx.CaptureError, match="inside another captured function"):
        call(lambda x: inner(x) * 2.0, X)


def test_cpu_a_freed_outside_tensor_stops_the_replay():
    w = [hx.randn(8, 4)]

    def f(x):
        return (x @ w[0]).sum()

    step = call(f, X)
    w[0] = hx.randn(8, 4)  # the one the replay reads dies
    gc.collect()
    with pytest.raises(hx.CaptureError, match=r"freed since the capture \(first read by "
                                              r"matmul"):
        step(X)
    step.release()
    assert step(X).item() == pytest.approx(float((X @ w[0].numpy()).sum()), rel=1e-6)


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_a_step_whose_work_changes_is_refused(device, request):
    if device == "gpu":
        request.getfixturevalue("be")  # (skips without an adapter)
    w = hx.randn(8, 4, device=device)
    n = [0]

    def f(x):
        n[0] += 1
        y = x @ w
        return y.exp().sum() if n[0] % 2 else y.sum()

    with pytest.raises(hx.CaptureError, match=r"two calls of the step launched different "
                       r"work.*warmup="):
        call(f, X, device=device)


def test_cpu_a_captured_step_and_what_it_holds_are_collected():
    import weakref

    class Trainer:
        def __init__(self):
            self.w = hx.randn(8, 4)
            self.step = hx.capture(self.train_step)

        def train_step(self, x):
            return (x @ self.w).sum() * 2.0

    trainer = Trainer()
    for _ in range(4):
        out = trainer.step(X)
    assert trainer.step.captured == 1
    held = [weakref.ref(trainer), weakref.ref(trainer.w._data), weakref.ref(out._data)]
    del trainer, out  # a cycle through the bound method: the garbage collector frees it
    gc.collect()
    assert all(r() is None for r in held)


# -- a language-model step: embedding, cross-entropy, index checks --------------------------
def test_cpu_an_embedding_and_cross_entropy_step_replays_bit_for_bit(one_blas_thread):
    runs = []
    for captured in (False, True):
        fn, params = lm_step()
        step = hx.capture(fn) if captured else fn
        losses = []
        for x, y in lm_batches(7):
            args = (x, y) if captured else (hx.from_numpy(x), hx.from_numpy(y))
            losses.append(step(*args).item())
        runs.append((losses, [p.detach().numpy() for p in params]))
        if captured:
            assert step.captured == 1
    assert runs[0][0] == runs[1][0]
    for a, b in zip(runs[0][1], runs[1][1]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad", ["index", "target"])
def test_cpu_a_bad_index_in_a_replay_raises_at_once(bad):
    fn, params = lm_step()
    step = hx.capture(fn)
    batches = lm_batches(5)
    for x, y in batches[:4]:
        step(x, y).item()
    assert step.captured == 1
    before = [p.detach().numpy().copy() for p in params]
    x, y = (a.copy() for a in batches[4])
    if bad == "index":
        x[2, 3] = VOCAB  # one past the embedding's rows
        msg = rf"index {VOCAB} is out of bounds for dim 0 of size {VOCAB}"
    else:
        y[1, 0] = -1  # neither a class nor ignore_index
        msg = rf"cross_entropy: target -1 is out of bounds for {VOCAB} classes"
    with pytest.raises(IndexError, match=msg):
        step(x, y)
    for a, p in zip(before, params):  # raised before the optimizer's update
        np.testing.assert_array_equal(a, p.detach().numpy())
    assert np.isfinite(step(*batches[0]).item())
