"""hx.memory_snapshot(): the live blocks of a known step with their category, op and the
user's source line, and the step's timeline whose peak is memory_stats' peak, on the
CPU (tensors adopted while recorded) and on the GPU (the slab allocator)."""

import sys

import pytest

import haelixe as hx
import haelixe.nn as nn
import haelixe.nn.functional as F

B, S, E, H = 2, 8, 16, 2


class Block(nn.Module):
    """Self-attention and a linear head: what a denoiser's layer keeps, in small."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(E, 3 * E)
        self.out = nn.Linear(E, E)

    def forward(self, x):
        q, k, v = self.qkv(x).view(B, S, 3, H, E // H).permute(2, 0, 3, 1, 4).unbind(0)
        a, self.line = F.scaled_dot_product_attention(q, k, v), sys._getframe().f_lineno
        return self.out(a.transpose(1, 2).reshape(B, S, E))


@pytest.fixture
def recorded(device):
    if device == "gpu":
        pytest.importorskip("wgpu")
    hx.manual_seed(0)
    model = Block().to(device)
    opt = hx.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = hx.randn(B, S, E).to(device), hx.randn(B, S, E).to(device)
    hx.record_memory_history(device=device)
    try:
        yield device, model, opt, x, y
    finally:
        hx.record_memory_history(False, device=device)
    assert hx.memory.get_allocator(device).on_allocate is None


def _step(model, opt, x, y):
    opt.zero_grad(set_to_none=False)
    F.mse_loss(model(x), y).backward()
    opt.step()


def test_a_step_s_blocks_have_their_category_op_and_line(recorded):
    device, model, opt, x, y = recorded
    n_params = sum(p.numel() for p in model.parameters())
    with hx.no_grad():
        scratch, scratch_line = x * 2, sys._getframe().f_lineno  # held, saved by nothing
    opt = hx.optim.AdamW(model.parameters())  # flat buffers and state made while recorded
    _step(model, opt, x, y)
    out, line = model(x), sys._getframe().f_lineno  # forward: what backward will need
    snap = hx.memory_snapshot(device)
    by = {}
    for b in snap["blocks"]:
        by.setdefault(b["category"], []).append(b)
        assert not b["frames"][0]["filename"].startswith(hx.__path__[0])
    assert sum(b["requested_size"] for b in by["parameter"]) >= 4 * n_params
    assert sum(b["requested_size"] for b in by["gradient"]) >= 4 * n_params
    assert sum(b["requested_size"] for b in by["optimizer_state"]) >= 2 * 4 * n_params
    saved_by_attention = [b for b in by["activation"] if b["op"] == "Attention"]
    assert saved_by_attention, [(b["op"], b["size"]) for b in by["activation"]]
    lines = {(__file__, model.line - 1), (__file__, model.line)}  # q, k, v; its own
    for b in saved_by_attention:  # the line inside the model, then the caller's
        assert {(f["filename"], f["line"]) for f in b["frames"][:2]} in \
            [{at, (__file__, line)} for at in lines]
    assert any(b["frames"][0]["line"] == model.line for b in saved_by_attention)
    assert {n for b in by["activation"] for n in b["saved_by"]} >= {"Attention", "Linear"}
    temps = [b for b in by["temporary"] if b["requested_size"] == x.numel() * 4]
    assert any(b["frames"][0]["line"] == scratch_line for b in temps)
    assert all(b["op"] is None for b in by["temporary"])
    del out, scratch


def test_the_timeline_s_peak_is_memory_stats_peak(recorded):
    device, model, opt, x, y = recorded
    _step(model, opt, x, y)  # warm: the GPU's slabs cached, gradients in place
    hx.reset_peak_stats(device)
    before = hx.memory_stats(device)["allocated_bytes"]
    _step(model, opt, x, y)
    snap = hx.memory_snapshot(device)
    stats = hx.memory_stats(device)
    peak = snap["peak"]
    assert peak["allocated_bytes"] == stats["peak_allocated_bytes"] > before
    assert snap["trace"][peak["event"]]["action"] == "alloc"
    running = snap["start_allocated_bytes"]
    for ev in snap["trace"]:  # each event's total is the one before plus or minus it
        size = snap["timeline_blocks"][ev["block"]]["size"]
        running += size if ev["action"] == "alloc" else -size
        assert ev["allocated_bytes"] == running
    held = sum(snap["timeline_blocks"][b]["size"] for b in peak["blocks"])
    assert held + peak["before_recording_bytes"] == peak["allocated_bytes"]
    assert sum(peak["by_category"].values()) == held
    # the step's activations were freed by its backward, each named as one
    assert "activation" in {b["category"] for b in snap["timeline_blocks"]}
    assert stats["allocated_bytes"] == snap["trace"][-1]["allocated_bytes"]


def test_a_saved_snapshot_reopens_as_it_was(recorded, tmp_path):
    device, model, opt, x, y = recorded
    _step(model, opt, x, y)
    snap = hx.memory_snapshot(device)
    path = tmp_path / "step.json"
    hx.save_memory_snapshot(path, snap)
    assert [p.name for p in tmp_path.iterdir()] == ["step.json"]  # no temporary left
    assert hx.load_memory_snapshot(path) == snap
    hx.save_memory_snapshot(path, device=device)  # now, replacing the file
    assert hx.load_memory_snapshot(path)["trace"][:len(snap["trace"])] == snap["trace"]
    for body, why in ((b"\x89PNG", "not JSON"), (b"[1, 2]", "not a memory snapshot"),
                      (b'{"format": "haelixe-memory-snapshot", "version": 9}', "version 9"),
                      (b'{"format": "haelixe-memory-snapshot", "version": 1}', "lacks")):
        path.write_bytes(body)
        with pytest.raises(ValueError, match=why):
            hx.load_memory_snapshot(path)
    with pytest.raises(ValueError, match="not a memory snapshot"):
        hx.save_memory_snapshot(path, {"blocks": []})


def _bound_wrap():
    """What the elementwise ops' direct path calls to make its output tensor."""
    mul = hx.Tensor.__mul__
    return dict(zip(mul.__code__.co_freevars, (c.cell_contents for c in mul.__closure__)))[
        "wrap"]


def test_cpu_tensors_are_counted_only_while_recorded():
    stats = hx.memory_stats("cpu")
    assert stats["tensors_counted"] is False
    start = stats["allocated_bytes"]
    wrap = _bound_wrap()
    assert not hx.storage.OBSERVERS  # off: the engine's one check finds nothing
    x = hx.randn(1000)
    hx.record_memory_history(device="cpu")
    try:
        assert hx.memory_stats("cpu")["tensors_counted"] is True
        assert len(hx.storage.OBSERVERS) == 1 and _bound_wrap() is wrap  # nothing patched
        made = [hx.ones(1000), x * x, x * 2.0, x.exp(), hx.stack([x, x])]  # each path
        sizes = [b["requested_size"] for b in hx.memory_snapshot("cpu")["blocks"]]
        assert sorted(sizes) == [4000, 4000, 4000, 4000, 8000]
        assert hx.memory_stats("cpu")["allocated_bytes"] == start + 24000
        del made[1:]
        sizes = [b["requested_size"] for b in hx.memory_snapshot("cpu")["blocks"]]
        assert sizes == [4000]
        for _ in range(50):  # (each buffer's memory, and so its id, likely the last's)
            x * 3.0
        assert hx.memory_stats("cpu")["allocated_bytes"] == start + 4000
        snap = hx.memory_snapshot("cpu")
        assert [b["requested_size"] for b in snap["blocks"]] == [4000]
        frees = [e for e in snap["trace"] if e["action"] == "free"]
        assert len(frees) == 4 + 50
        assert [e["allocated_bytes"] for e in snap["trace"][-100:]] == \
            [start + 8000, start + 4000] * 50
    finally:
        hx.record_memory_history(False, device="cpu")
    assert hx.memory_stats("cpu")["allocated_bytes"] == start
    assert not hx.storage.OBSERVERS
    assert hx.Tensor.__dict__["_wrap"].__func__ is wrap is _bound_wrap()


def test_each_backward_and_hook_places_its_allocations_on_its_own_line():
    # (a second backward from another line, and a hook, are placed on their own lines)
    hx.manual_seed(0)
    x, w = hx.randn(4, 8, requires_grad=True), hx.randn(8, 8)
    hx.record_memory_history(device="cpu")
    try:
        h = (x @ w).tanh()
        h.register_hook(lambda g: g * 2); hook_line = sys._getframe().f_lineno  # noqa: E702
        y = (h * h).sum()
        y.backward(retain_graph=True); first = sys._getframe().f_lineno  # noqa: E702
        y.backward(); second = sys._getframe().f_lineno  # noqa: E702
        snap = hx.memory_snapshot("cpu")
    finally:
        hx.record_memory_history(False, device="cpu")
    lines = [b["frames"][0]["line"] for b in snap["timeline_blocks"]
             if b["frames"] and b["frames"][0]["filename"] == __file__]
    assert lines.count(first) >= 2 and lines.count(second) >= 2
    assert lines.count(hook_line) == 2  # (one per backward: the hook's own product)


def test_a_cpu_tensor_takes_the_tag_of_the_thread_that_made_it():
    """A tag set in one thread names the tensors made there, not those of another
    (the tag is per thread: memory.tagged)."""
    import threading

    from haelixe.memory import tagged

    made = {}

    def worker():
        with tagged("optimizer_state"):
            made["tagged"] = hx.ones(1000)

    hx.record_memory_history(device="cpu")
    try:
        made["plain"] = hx.ones(2000)
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        categories = {b["requested_size"]: b["category"]
                      for b in hx.memory_snapshot("cpu")["blocks"]}
    finally:
        hx.record_memory_history(False, device="cpu")
    assert categories == {8000: "temporary", 4000: "optimizer_state"}


@pytest.mark.gpu
def test_snapshot_drops_freed_blocks_and_needs_history(be):
    with pytest.raises(RuntimeError, match="record_memory_history"):
        hx.memory_snapshot("gpu")
    hx.record_memory_history(device="gpu")
    try:
        t = hx.ones(1000, device="gpu")
        assert any(b["requested_size"] == 4000 for b in hx.memory_snapshot("gpu")["blocks"])
        del t
        assert not any(b["requested_size"] == 4000
                       for b in hx.memory_snapshot("gpu")["blocks"])
    finally:
        hx.record_memory_history(False, device="gpu")
    assert hx.memory.get_allocator("gpu").on_allocate is None


def test_cpu_events_past_a_batch_are_counted_in_their_order():
    # more allocations and frees than wait for one drain: each total, the peak and the
    # counters as if every event had been counted as it came
    from haelixe import memory_history

    start = hx.memory_stats("cpu")["allocated_bytes"]
    n = memory_history._BATCH + 500  # (each pass below makes two events)
    hx.record_memory_history(device="cpu")
    try:
        hx.reset_peak_stats("cpu")
        x = hx.ones(250)  # 1000 bytes, held throughout
        for _ in range(n):
            y = x * 2.0  # 1000 bytes made, and the last y freed as it is replaced
        del y
        stats = hx.memory_stats("cpu")
        snap = hx.memory_snapshot("cpu")
    finally:
        hx.record_memory_history(False, device="cpu")
    trace = snap["trace"]
    assert len(trace) == 1 + 2 * n
    # x, the first y, then each new y before the one it replaces goes, and the last y
    assert [e["action"] for e in trace] == \
        ["alloc", "alloc"] + ["alloc", "free"] * (n - 1) + ["free"]
    running = start
    for ev in trace:
        running += (1 if ev["action"] == "alloc" else -1) * 1000
        assert ev["allocated_bytes"] == running
    assert stats["allocated_bytes"] == start + 1000 == running
    assert stats["peak_allocated_bytes"] == snap["peak"]["allocated_bytes"] == start + 3000
    # a free is timed when the next thing ran: the next allocation
    for before, ev, after in zip(trace, trace[1:], trace[2:]):
        assert before["time_ns"] <= ev["time_ns"]
        if ev["action"] == "free" and after["action"] == "alloc":
            assert ev["time_ns"] == after["time_ns"]


def test_snapshots_while_another_thread_makes_tensors():
    # a buffer another thread makes between a drain and the snapshot's read is left for
    # the next one; when the thread is done every total is whole again
    import threading

    start = hx.memory_stats("cpu")["allocated_bytes"]
    hx.record_memory_history(device="cpu")
    done, errors = threading.Event(), []

    def churn():
        try:
            x = hx.ones(256)
            while not done.is_set():
                y = x * 2.0  # noqa: F841 (made and freed, over and over)
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        for _ in range(8):
            snap = hx.memory_snapshot("cpu")
            assert all(b["size"] > 0 for b in snap["blocks"])
            hx.memory_stats("cpu")
    finally:
        done.set()
        worker.join()
        try:
            snap = hx.memory_snapshot("cpu")
            stats = hx.memory_stats("cpu")
        finally:
            hx.record_memory_history(False, device="cpu")
    assert not errors
    assert stats["allocated_bytes"] == start == snap["trace"][-1]["allocated_bytes"]
    assert hx.memory_stats("cpu")["allocated_bytes"] == start
