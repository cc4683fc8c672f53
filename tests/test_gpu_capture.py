"""hx.capture on the GPU: a replayed step costs one submit, keeps its buffers from other
tensors, gives them back when released, captures again for new shapes, and refuses,
naming the op and the fix, the steps a replay would get wrong; its index checks run on
the device. (That replays equal eager mode bit for bit is tested on both devices in
test_capture.py.)"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from capture_steps import DIM, VOCAB, X, Y, call, lm_batches, lm_step, model_and_opt, train_step

import haelixe as hx
from haelixe.data.sine import SineTask
from haelixe.denoise import Denoiser
from haelixe.memory import get_allocator, round_size
from haelixe.nn import functional as F
from haelixe.optim import AdamW, lr_scheduler

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def gpu(be):
    return be


# -- what a replay costs ------------------------------------------------------------------
def test_gpu_a_replayed_step_is_one_submit_and_its_loss_read_needs_no_other(be):
    hx.manual_seed(0)
    model = Denoiser().to("gpu")
    opt = AdamW(model.parameters(), lr=1e-3, capturable=True)
    data = SineTask("random", 4, 0)

    def train_step(x, y):
        opt.zero_grad(set_to_none=False)
        loss = F.mse_loss(model(x).float(), y)
        loss.backward()
        opt.step()
        return loss

    step = hx.capture(train_step, device="gpu")
    eager_dispatches = []
    for i in range(6):
        noisy, clean = data.batch()
        be.reset_stats()
        loss = step(noisy, clean)
        value = loss.item()
        s = be.stats()
        if i < 3:
            eager_dispatches.append(s["dispatches"])
            continue
        assert np.isfinite(value)
        assert s["replays"] == 1 and s["submits"] == 1  # the read-back added no submit
        assert s["downloads"] == 1 and s["uploads"] == 2  # the two host batches
        assert s["bind_groups"] == 0 and s["pending"] == 0
        assert s["dispatches"] == eager_dispatches[-1]  # the recorded step's kernels
    graph = step.graph_stats()[0]
    assert graph["dispatches"] == eager_dispatches[-1] and graph["staged_outputs"] == 1


def test_gpu_a_staged_loss_edited_in_place_reads_the_new_value():
    w = hx.randn(5, 4, device="gpu")

    def f(x):
        return (x @ w).sum()

    step = hx.capture(f, device="gpu")
    x = np.ones((3, 5), np.float32)
    for _ in range(4):
        out = step(x)
    want = float((x @ w.numpy()).sum(dtype=np.float32))
    assert out.item() == pytest.approx(want, rel=1e-6)
    out.mul_(2.0)  # a kernel writes the output after the replay staged it
    assert out.item() == pytest.approx(2 * want, rel=1e-6)


def test_gpu_an_eager_read_back_is_one_submit(be):
    x = hx.randn(64, device="gpu")
    y = (x * 2.0 + 1.0).exp()
    be.reset_stats()
    y.sum().item()
    s = be.stats()
    assert (s["submits"], s["downloads"]) == (1, 1)


# -- memory --------------------------------------------------------------------------------
def _counting_step(shape=(37, 41)):
    w = hx.randn(*shape, device="gpu")

    def f(x):
        h = (x @ w).tanh()
        return (h * h).mean(), h.sum(0)

    return hx.capture(f, device="gpu"), w


def test_gpu_the_replay_keeps_its_buffers_from_other_tensors():
    step, w = _counting_step()
    x = np.random.default_rng(0).standard_normal((29, 37)).astype(np.float32)
    for _ in range(4):
        loss, col = step(x)
    want_loss, want_col = loss.item(), col.numpy()
    # tensors of every size the step allocates, made and written between replays: none
    # may land in a buffer the replay names
    sizes = [(29, 41), (29, 41), (29, 41), (41,), (1,), (29, 37)]
    clutter = [hx.full(s, 7.0, device="gpu") for s in sizes for _ in range(3)]
    hx.empty_cache("gpu")  # destroys the cached slabs, never the replay's
    loss, col = step(x)
    assert loss.item() == want_loss
    np.testing.assert_array_equal(col.numpy(), want_col)
    for c in clutter:
        assert float(c.min().item()) == 7.0 == float(c.max().item())


def test_gpu_release_gives_the_buffers_back():
    gc.collect()
    alloc = get_allocator("gpu")
    before = alloc.stats()
    step, w = _counting_step((53, 47))
    x = np.ones((31, 53), np.float32)
    for _ in range(4):
        out = step(x)
    del out
    held = alloc.stats()
    assert held["captured_bytes"] > before["captured_bytes"]  # intermediates kept free
    assert held["allocated_bytes"] > before["allocated_bytes"]  # inputs, outputs, w
    step.release()
    gc.collect()
    after = alloc.stats()
    assert after["captured_bytes"] == before["captured_bytes"]
    # only w is left (the step's closure holds it); the freed slabs are cached again
    assert after["allocated_bytes"] == before["allocated_bytes"] + round_size(53 * 47 * 4)
    assert after["cached_bytes"] >= held["captured_bytes"]
    del step, w
    gc.collect()
    assert alloc.stats()["allocated_bytes"] == before["allocated_bytes"]
    # a fresh capture computes the right thing
    step2, w2 = _counting_step((53, 47))
    for _ in range(4):
        loss, _ = step2(x)
    h = np.tanh(x @ w2.numpy())
    assert loss.item() == pytest.approx(float((h * h).mean()), rel=1e-5)


def test_gpu_a_dropped_capture_is_released_by_the_garbage_collector():
    gc.collect()
    alloc = get_allocator("gpu")
    before = alloc.stats()["captured_bytes"]
    step, w = _counting_step((43, 59))
    for _ in range(4):
        step(np.ones((7, 43), np.float32))
    assert alloc.stats()["captured_bytes"] > before
    del step
    gc.collect()
    assert alloc.stats()["captured_bytes"] == before


def test_gpu_an_object_capturing_its_own_method_is_collected():
    class Trainer:
        def __init__(self):
            self.w = hx.randn(8, 4, device="gpu")
            self.step = hx.capture(self.train_step, device="gpu")

        def train_step(self, x):
            return (x @ self.w).sum()

    gc.collect()
    alloc = get_allocator("gpu")
    before = alloc.stats()
    trainer = Trainer()
    for _ in range(4):
        trainer.step(X)
    assert alloc.stats()["captured_bytes"] > before["captured_bytes"]
    del trainer  # a cycle through the bound method: the garbage collector frees it
    gc.collect()
    after = alloc.stats()
    assert after["captured_bytes"] == before["captured_bytes"]
    assert after["allocated_bytes"] == before["allocated_bytes"]


# -- signatures -----------------------------------------------------------------------------
def test_gpu_new_shapes_capture_again():
    w = hx.randn(6, 3, device="gpu")
    calls = []

    def f(x):
        calls.append(x.shape)
        return (x @ w).relu().sum(0)

    step = hx.capture(f, device="gpu")
    rng = np.random.default_rng(0)
    for n in [4, 4, 4, 4, 9, 9, 9, 9, 4, 9, 4]:
        x = rng.standard_normal((n, 6)).astype(np.float32)
        got = step(x).numpy()
        np.testing.assert_allclose(got, np.maximum(x @ w.numpy(), 0).sum(0), rtol=1e-5,
                                   atol=1e-6)
    assert step.captured == 2
    assert calls.count((4, 6)) == 3 and calls.count((9, 6)) == 3
    step.release()
    assert step.captured == 0


# -- what cannot be captured ----------------------------------------------------------------
@pytest.mark.parametrize("read", [lambda t: t.item(), lambda t: t.numpy(),
                                  lambda t: print(t), lambda t: float(t)],
                         ids=["item", "numpy", "print", "float"])
def test_gpu_a_read_back_inside_the_step_is_refused(read):
    model, opt = model_and_opt("gpu")
    with pytest.raises(hx.CaptureError, match=r"read-back .* inside a captured step .*"
                       r"test_gpu_capture.py:\d+ in .*loss.item\(\)"):
        call(train_step(model, opt, extra=lambda loss: read(loss.detach())), X, Y,
              device="gpu")


def test_gpu_an_optimizer_without_capturable_is_refused():
    model, opt = model_and_opt("gpu", capturable=False)
    with pytest.raises(hx.CaptureError, match=r"AdamW.step\(\) inside a captured step.*"
                       r"capturable=True"):
        call(train_step(model, opt), X, Y, device="gpu")


@pytest.mark.parametrize("where", ["scheduler", "set_lr"])
def test_gpu_a_scheduler_stepped_inside_the_step_is_refused(where):
    model, opt = model_and_opt("gpu")
    sched = lr_scheduler.StepLR(opt, 2)
    act = (lambda loss: sched.step()) if where == "scheduler" else \
        (lambda loss: opt.set_lr(0.5))
    name = "StepLR.step()" if where == "scheduler" else "AdamW.set_lr()"
    with pytest.raises(hx.CaptureError, match=rf"{name.replace('(', '.').replace(')', '.')}"
                       r" inside a captured step.*outside the captured function"):
        call(train_step(model, opt, extra=act), X, Y, device="gpu")


def test_gpu_host_randomness_inside_the_step_is_refused():
    model, opt = model_and_opt("gpu", dropout=0.5)
    with pytest.raises(hx.CaptureError, match=r"upload of \d+ bytes inside the step .*"
                       r"dropout.* in train_step.*randomness"):
        call(train_step(model, opt), X, Y, device="gpu")


def test_gpu_a_changing_python_number_is_refused():
    scale = [1.0]
    w = hx.randn(8, 4, device="gpu")

    def f(x):
        scale[0] *= 2
        return (x @ w * scale[0]).sum()

    with pytest.raises(hx.CaptureError, match=r"kernel elementwise:\w+ .*Mul.forward.* "
                       r"in f\) got other values.*scalar operand 1 differs \(4 and 8"):
        call(f, X, device="gpu")


def test_gpu_data_read_through_a_closure_is_refused():
    w = hx.randn(8, 4, device="gpu")
    box = {}

    def f(y):
        return ((box["x"] @ w) - y).abs().sum()

    step = hx.capture(f, device="gpu")
    with pytest.raises(hx.CaptureError, match=r"(different tensor created outside the "
                       r"function|freed since the capture).*as an argument"):
        for i in range(5):
            box["x"] = hx.from_numpy(X + i).to("gpu")
            step(Y)


def test_gpu_state_replaced_instead_of_updated_is_refused():
    state = {"h": hx.zeros(4, 8, device="gpu")}

    def f(x):
        state["h"] = state["h"] * 0.5 + x
        return state["h"].sum()

    with pytest.raises(hx.CaptureError, match=r"reads a tensor the previous call created.*"
                       r"in place"):
        call(f, X, device="gpu")


def test_gpu_state_updated_in_place_replays():
    state = hx.zeros(4, 8, device="gpu")

    def f(x):
        state.mul_(0.5).add_(x)
        return state.sum()

    step = hx.capture(f, device="gpu")
    h = np.zeros((4, 8), np.float32)
    for i in range(6):
        got = step(X * i).item()
        h = h * np.float32(0.5) + X * i
        assert got == pytest.approx(float(h.sum()), rel=1e-6)


def test_gpu_a_cpu_tensor_mixed_in_is_refused():
    def f(x, y):
        return (x - y.to("gpu")).sum()

    with pytest.raises(hx.CaptureError, match=r"argument 1 is host data \(a CPU tensor\).*"
                       r"device='gpu'"):
        call(f, hx.ones(3, device="gpu"), hx.ones(3))


def test_gpu_a_cpu_tensor_moved_inside_the_step_is_refused_when_it_changes():
    host = [np.zeros(3, np.float32)]

    def f(x):
        host[0] = host[0] + 1
        return (x - hx.from_numpy(host[0]).to("gpu")).sum()

    with pytest.raises(hx.CaptureError, match=r"upload of 12 bytes .*CPU tensor moved to "
                       r"the GPU"):
        call(f, np.ones(3, np.float32), device="gpu")


def test_gpu_a_constant_moved_inside_the_step_is_baked():
    def f(x):
        return (x * hx.tensor([1.0, 2.0, 3.0], device="gpu")).sum()

    step = hx.capture(f, device="gpu")
    for i in range(5):
        assert step(np.full(3, float(i), np.float32)).item() == 6.0 * i
    assert step.graph_stats()[0]["copies"] == 1


@pytest.mark.parametrize("ret, msg", [
    (lambda loss: 3.0, r"returns tensors .* got a float"),
    (lambda loss: loss.cpu(), r"returned a tensor on cpu .*\.cpu\(\) after the call"),
])
def test_gpu_outputs_must_be_device_tensors(ret, msg):
    w = hx.randn(8, 4, device="gpu")
    with pytest.raises(hx.CaptureError, match=msg):
        call(lambda x: ret((x @ w).sum()), X, device="gpu")


def test_gpu_nested_captures_and_grad_arguments_are_refused():
    w = hx.randn(8, 4, device="gpu")
    inner = hx.capture(lambda x: (x @ w).sum(), device="gpu")
    with pytest.raises(hx.CaptureError, match="inside another captured function"):
        call(lambda x: inner(x) * 2.0, X, device="gpu")
    with pytest.raises(hx.CaptureError, match=r"argument 0 requires grad.*detach"):
        hx.capture(lambda x: x.sum())(hx.ones(3, device="gpu", requires_grad=True))


def test_gpu_a_freed_outside_tensor_stops_the_replay():
    w = [hx.randn(8, 4, device="gpu")]

    def f(x):
        return (x @ w[0]).sum()

    step = call(f, X, device="gpu")
    w[0] = hx.randn(8, 4, device="gpu")  # the one the replay reads dies
    with pytest.raises(hx.CaptureError, match=r"freed since the capture \(first read by "
                                              r"kernel matmul"):
        step(X)
    step.release()
    assert step(X).item() == pytest.approx(float((X @ w[0].numpy()).sum()), rel=1e-5)


# -- index checks on the device ----------------------------------------------------------
def test_gpu_an_embedding_and_cross_entropy_step_replays_bit_for_bit():
    runs = []
    for captured in (False, True):
        fn, params = lm_step("gpu")
        step = hx.capture(fn, device="gpu") if captured else fn
        losses = []
        for x, y in lm_batches(7):
            args = (x, y) if captured else (hx.from_numpy(x).to("gpu"),
                                            hx.from_numpy(y).to("gpu"))
            losses.append(step(*args).item())
        runs.append((losses, [p.detach().numpy() for p in params]))
        if captured:
            assert step.captured == 1  # the index checks did not stop the capture
    assert runs[0][0] == runs[1][0]
    for a, b in zip(runs[0][1], runs[1][1]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad", ["index", "target"])
def test_gpu_a_bad_index_in_a_replay_raises_at_the_next_read_back(bad):
    fn, params = lm_step("gpu")
    step = hx.capture(fn, device="gpu")
    batches = lm_batches(5)
    for x, y in batches[:4]:
        step(x, y).item()
    assert step.captured == 1
    x, y = (a.copy() for a in batches[4])
    if bad == "index":
        x[2, 3] = VOCAB  # one past the embedding's rows
        msg = (rf"indexing: index {VOCAB} is out of bounds for dim 0 of size {VOCAB} "
               rf"\(tensor shape \({VOCAB}, {DIM}\)\) \(found by a check on the GPU inside "
               rf"a captured step, and raised at the next read-back\)")
    else:
        y[1, 0] = -1  # neither a class nor ignore_index
        msg = (rf"cross_entropy: target -1 is out of bounds for {VOCAB} classes "
               rf"\(targets must lie in \[0, {VOCAB}\) or equal ignore_index=-100\)")
    loss = step(x, y)  # the replay runs: no read-back, so nothing is raised yet
    with pytest.raises(IndexError, match=msg):
        loss.item()
    loss.item()  # reported once (a value computed from a clamped read)
    # the error words are cleared, and good batches run on
    good = step(*batches[0])
    assert np.isfinite(good.item())


def test_gpu_index_select_under_capture_checks_on_the_device():
    w = hx.randn(6, 3, device="gpu")

    def f(i):
        return w.index_select(0, i).sum(0)

    step = hx.capture(f, device="gpu")
    for _ in range(4):
        got = step(np.array([0, 5, 4, 2]))
    np.testing.assert_allclose(got.numpy(), w.numpy()[[0, 5, 4, 2]].sum(0), rtol=1e-6)
    out = step(np.array([0, -1, 1, 1]))  # (PyTorch counts no index_select index from the end)
    with pytest.raises(IndexError, match=r"index_select: index -1 is out of bounds"):
        out.numpy()
    out = step(np.array([0, 6, 1, 1]))
    with pytest.raises(IndexError, match=r"index_select: index 6 is out of bounds for dim "
                                         r"0 of size 6 \(input shape \(6, 3\)\)"):
        out.numpy()


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_gpu_check_range_kernel(be, dtype):
    """The kernel alone: bounds, ignore, strided views, the first site reported and the
    words cleared after it."""
    dt = getattr(hx, dtype)
    grid_ = hx.tensor([[-3, 0, 2], [4, -100, 1]], dtype=dt, device="gpu")
    probe = hx.ones(2, device="gpu")  # any read-back reports a failed check
    ok = [(grid_, -100, 5, None), (grid_.T, -3, 5, -100), (grid_[:, ::2], -3, 5, None),
          (grid_[1:, 1:], 1, 2, -100)]  # (each value at a bound or ignored somewhere)
    for t, lo, hi, ignore in ok:
        be.check_range(t._data, lo, hi, ignore, IndexError, "bad {value}")
        probe.numpy()
    be.check_range(grid_._data, -2, 5, -100, IndexError, "first {value}")
    be.check_range(grid_._data, 0, 1, None, ValueError, "second {value}")
    with pytest.raises(IndexError, match=r"^first -3 \(found by a check on the GPU"):
        probe.numpy()
    probe.numpy()  # cleared
    be.check_range(grid_.T._data, -3, 4, -100, KeyError, "high {value}")
    with pytest.raises(KeyError, match="high 4"):
        probe.sum().item()
    be.check_range(hx.zeros(0, dtype=dt, device="gpu")._data, 0, 0, None, IndexError, "{value}")
    probe.numpy()
