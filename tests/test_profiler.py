"""hx.profile(): the kernels of a step, their table and their Chrome trace."""

import json
import threading

import pytest

import haelixe as hx
import haelixe.nn as nn
import haelixe.nn.functional as F
from haelixe.backends import backend_for
from haelixe.device import CPU


def _linear_step(device="cpu"):
    hx.manual_seed(0)
    model = nn.Linear(4, 3).to(device)
    x, y = hx.randn(5, 4).to(device), hx.randn(5, 3).to(device)

    def step(x, y):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    return step, x, y


def test_profile_records_every_backend_call_a_captured_step_records():
    step, x, y = _linear_step()
    captured = hx.capture(step)
    for _ in range(3):  # warmup, then the two recorded calls
        captured(x, y)
    recorded = captured.graph_stats()[0]["dispatches"]
    with hx.profile() as prof:
        step(x, y)
    assert recorded > 0
    assert len(prof.kernels("cpu")) == recorded
    names = [e.name for e in prof.events]
    assert "linear" in names and "linear_backward" in names
    assert "mse_loss" in names and "mse_loss_backward" in names


def test_profile_event_holds_shapes_dtypes_time_and_bytes():
    step, x, y = _linear_step()
    with hx.profile() as prof:
        step(x, y)
    (mse,) = [e for e in prof.events if e.name == "mse_loss"]
    assert mse.device == "cpu" and mse.kind == "op" and mse.clock == "host"
    assert (5, 3) in mse.shapes and "float32" in mse.dtypes
    assert mse.duration_ns > 0 and mse.start_ns >= 0
    assert mse.bytes_moved >= 2 * 5 * 3 * 4  # both inputs, at least


def test_a_kernel_s_bytes_are_its_inputs_and_outputs_and_views_run_none(device):
    # a view lays a new shape over the same memory: no kernel, so no event; a copy of
    # a strided view is one, moving its input's and its output's bytes
    x = hx.randn(6, 8).to(device)
    with hx.profile() as prof:
        t = x.t()  # a permuted view
        row = x[2:]  # an indexed view
        v = x.view(8, 6)  # a view of another shape
        c = t.contiguous()  # a kernel: the copy
        s = row.sum()  # and another
    ops = [e for e in prof.events if e.kind == "op"]
    assert not {e.name for e in ops} & backend_for(x.device).layout_only
    (copy,) = [e for e in ops if e.name == "copy"]
    assert copy.shapes == [(8, 6)] and copy.bytes_moved == 2 * 6 * 8 * 4
    assert any((4, 8) in e.shapes for e in ops)  # the sum over the indexed view
    assert v.shape == (8, 6) and c.shape == (8, 6) and s.shape == ()


def test_backward_kernels_name_the_autograd_node_that_ran_them():
    step, x, y = _linear_step()
    with hx.profile() as prof:
        step(x, y)
    node_of = {e.name: e.node for e in prof.events}
    assert node_of["linear"] is None and node_of["mse_loss"] is None  # forward
    assert node_of["linear_backward"] == "Linear"
    assert node_of["mse_loss_backward"] == "MSELoss"
    assert {e.node for e in prof.events if e.name == "copy"} == {"AccumulateGrad"}


def test_each_kernel_has_its_phase_forward_backward_or_optimizer():
    step, x, y = _linear_step()
    model_params = [p for p in hx.nn.Linear(4, 3).parameters()]
    opt = hx.optim.AdamW(model_params)
    for p in model_params:
        p.grad = hx.ones_like(p)
    with hx.profile() as prof:
        step(x, y)
        opt.step()
    phase_of = {e.name: e.phase for e in prof.events}
    assert phase_of["linear"] == phase_of["mse_loss"] == "forward"
    assert phase_of["linear_backward"] == phase_of["mse_loss_backward"] == "backward"
    optimizer = [e for e in prof.events if e.phase == "optimizer"]
    assert optimizer and all(e.node is None for e in optimizer)
    assert {e.phase for e in prof.events} == {"forward", "backward", "optimizer"}
    by_phase = prof.time_by_phase()
    assert sum(by_phase.values()) == sum(e.duration_ns for e in prof.events)
    assert prof.table().splitlines()[-1].startswith("by phase: forward")
    args = {ev["name"]: ev["args"]["phase"] for ev in prof.chrome_trace()["traceEvents"]}
    assert args["linear_backward"] == "backward" and args["linear"] == "forward"


@pytest.mark.gpu
@pytest.mark.parametrize("in_passes", [True, False], ids=["inside-passes", "own-passes"])
def test_gpu_times_are_the_device_s_where_it_writes_timestamps(be, tmp_path, in_passes,
                                                               monkeypatch):
    """Each dispatch timed on the device (lavapipe grants 'timestamp-query' and
    'timestamp-query-inside-passes'), read inside the shared pass or in a pass of its
    own: one positive duration per dispatch the backend counted, on a track of its own
    in the Chrome trace; the step's result is what it is untimed."""
    if be.device_timer() is None:
        pytest.skip("this adapter grants no 'timestamp-query'")
    if in_passes and not be.dispatcher.context.timestamps_in_passes:
        pytest.skip("this adapter grants no 'timestamp-query-inside-passes'")
    monkeypatch.setattr(be.dispatcher.context, "timestamps_in_passes", in_passes)
    step, x, y = _linear_step("gpu")
    untimed = step(x, y).item()  # (pipelines compiled)
    before = be.dispatcher.counters["dispatches"]
    with hx.profile() as prof:
        loss = step(x, y)
    counted = be.dispatcher.counters["dispatches"] - before
    kernels = prof.kernels("gpu")
    assert counted > 0 and len(kernels) == counted
    assert all(k.clock == "device" and k.duration_ns > 0 for k in kernels)
    assert all(k.extra["host_encode_ns"] > 0 and "device_slot" not in k.extra
               for k in kernels)
    starts = [k.start_ns for k in kernels]
    assert starts == sorted(starts)  # one queue: in the order they were recorded
    assert "the device's (timestamp queries" in prof.table().splitlines()[-2]
    assert be.dispatcher.timer is None  # stopped: later dispatches share passes again
    assert loss.item() == pytest.approx(untimed, rel=1e-6)
    prof.export_chrome_trace(tmp_path / "t.json")
    trace = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    device = [ev for ev in trace if ev["args"]["clock"] == "device"]
    assert len(device) == counted and len({ev["tid"] for ev in device}) == 1
    assert all(ev["ph"] == "X" and ev["dur"] > 0 for ev in device)
    assert device[0]["tid"] not in {ev["tid"] for ev in trace if ev not in device}


@pytest.mark.gpu
def test_a_profile_without_device_times_leaves_the_device_untimed(be):
    """hx.profile(device_times=False) starts no device timer: every dispatch keeps its
    host encode time, the table says it was not asked for, and the same dispatches are
    listed as with device times."""
    if be.device_timer() is None:
        pytest.skip("this adapter grants no 'timestamp-query'")
    step, x, y = _linear_step("gpu")
    step(x, y).item()
    timers = []
    with hx.profile(device_times=False) as prof:
        timers.append(be.dispatcher.timer)
        step(x, y)
    with hx.profile() as timed:
        step(x, y)
    assert timers == [None]
    assert {k.clock for k in prof.kernels("gpu")} == {"host"}
    assert [k.name for k in prof.kernels("gpu")] == [k.name for k in timed.kernels("gpu")]
    assert "device times were not asked for" in prof.table().splitlines()[-2]


def _timed_flushes(be, flushes: int, dispatches: int):
    """``flushes`` flushes of ``dispatches`` dispatches each, inside a profile: its GPU
    kernels, and the dispatches the backend counted."""
    x = hx.randn(64, device="gpu")
    (x + 1).sum().item()  # (its pipelines compiled)
    before = be.dispatcher.counters["dispatches"]
    with hx.profile() as prof:
        for _ in range(flushes):
            for _ in range(dispatches):
                x = x + 1
            be.dispatcher.flush()
    return prof.kernels("gpu"), be.dispatcher.counters["dispatches"] - before


@pytest.mark.gpu
@pytest.mark.parametrize("in_passes", [True, False], ids=["inside-passes", "own-passes"])
@pytest.mark.parametrize(("queries", "resolve_bytes", "per_flush", "sets"), [
    # 7 flushes of 3: inside passes a flush takes 4 stamps (one for each dispatch and
    # one at the pass's start), so sets of 10 take 4 + 4 + 2 | 3 + 4 + 3 | 2 + 4 + 4
    # (a set that runs out mid-flush: the rest in a new pass, with a start of its own);
    # in passes of their own a dispatch takes 2 stamps (21 = 5 + 5 + 5 + 5 + 1)
    (10, 1 << 16, 3, {True: 3, False: 5}),
    # 7 flushes of 1: each takes a 256-byte region, two to a set
    (128, 512, 1, {True: 4, False: 4}),
], ids=["queries-run-out", "regions-run-out"])
def test_one_query_set_times_many_flushes_until_it_is_full(be, monkeypatch, queries,
                                                           resolve_bytes, per_flush, sets,
                                                           in_passes):
    """The device timer resolves each flush's stamps into a region of its own (aligned
    to 256 bytes) of one query set's buffers, so a flush makes no new GPU objects, and
    takes another set only when its queries or its regions run out: every dispatch gets
    its own reading, in order."""
    from haelixe.backends.wgpu.dispatch import DispatchTimer
    if be.device_timer() is None:
        pytest.skip("this adapter grants no 'timestamp-query'")
    if in_passes and not be.dispatcher.context.timestamps_in_passes:
        pytest.skip("this adapter grants no 'timestamp-query-inside-passes'")
    monkeypatch.setattr(be.dispatcher.context, "timestamps_in_passes", in_passes)
    sets = sets[in_passes]
    monkeypatch.setattr(DispatchTimer, "QUERIES", queries)
    monkeypatch.setattr(DispatchTimer, "RESOLVE_BYTES", resolve_bytes)
    made = []
    new_batch = DispatchTimer._new_batch
    monkeypatch.setattr(DispatchTimer, "_new_batch",
                        lambda self: made.append(len(self._spare)) or new_batch(self))
    kernels, counted = _timed_flushes(be, 7, per_flush)
    assert counted == 7 * per_flush and len(kernels) == counted
    assert all(k.clock == "device" and k.duration_ns > 0 for k in kernels)
    starts = [k.start_ns for k in kernels]
    assert starts == sorted(starts)
    assert made == [0] * sets  # (a new set each time: none read yet to reuse)


@pytest.mark.gpu
def test_inside_passes_a_dispatch_takes_one_timestamp_and_starts_where_the_last_ended(
        be, monkeypatch):
    """Inside a shared compute pass each timed dispatch writes one timestamp after it,
    and the pass one before its first (a stamp makes the device wait for the work before
    it: a pair for each dispatch would wait twice as often); a dispatch then starts on
    the device's clock where the one before it in the pass ended."""
    from haelixe.backends.wgpu import dispatch
    if be.device_timer() is None or not be.dispatcher.context.timestamps_in_passes:
        pytest.skip("this adapter grants no 'timestamp-query-inside-passes'")
    stamps = []
    stamp = dispatch._ENCODE.timestamp
    monkeypatch.setattr(dispatch._ENCODE, "timestamp",
                        lambda cpass, qs, i: stamps.append(i) or stamp(cpass, qs, i))
    kernels, counted = _timed_flushes(be, 2, 5)
    assert counted == 10 and len(kernels) == 10
    assert stamps == [0, 1, 2, 3, 4, 5] + [6, 7, 8, 9, 10, 11]  # (a pass for each flush)
    assert all(k.clock == "device" and k.duration_ns > 0 for k in kernels)
    for flush in (kernels[:5], kernels[5:]):
        for before, k in zip(flush, flush[1:]):  # (rounding ticks to ns: 1 ns apart)
            assert abs(before.start_ns + before.duration_ns - k.start_ns) <= 1


@pytest.mark.gpu
def test_a_flush_wgpu_refuses_loses_only_its_own_times(be, monkeypatch):
    """Where wgpu refuses a flush's commands (its encoder does not finish), the
    dispatches in it ran not and have no device time (their events keep the host's
    encode time), while every other dispatch of the same query set keeps its own."""
    if be.device_timer() is None:
        pytest.skip("this adapter grants no 'timestamp-query'")
    d = be.dispatcher
    flush = d.flush
    calls = []

    class Refusing:  # (the encoder, except that finishing it fails)
        def __init__(self, encoder):
            self._encoder = encoder

        def __getattr__(self, name):
            return getattr(self._encoder, name)

        def finish(self):
            raise RuntimeError("refused")

    def flaky_flush():  # (the fourth flush with dispatches in it is refused: the
        # warm-up's, then the profiled step's first three)
        if d._encoder is not None:
            calls.append(d.pending)
        if len(calls) == 4 and d._encoder is not None:
            d._encoder = Refusing(d._encoder)
            with pytest.raises(RuntimeError, match="refused"):
                flush()
            return
        flush()

    monkeypatch.setattr(d, "flush", flaky_flush)
    kernels, counted = _timed_flushes(be, 5, 2)
    assert len(kernels) == counted == 10
    clocks = [k.clock for k in kernels]
    assert calls == [2] * 6
    assert clocks == ["device"] * 4 + ["host"] * 2 + ["device"] * 4


@pytest.mark.gpu
def test_gpu_table_says_why_its_times_are_the_host_s(be, monkeypatch):
    """Where the device writes no timestamps (here: as if the adapter lacked them), a
    dispatch's time is its host encode time, and the table says why."""
    monkeypatch.setattr(be.dispatcher.context, "timestamps", False)
    assert be.device_timer() is None
    step, x, y = _linear_step("gpu")
    with hx.profile() as prof:
        step(x, y)
    footer = prof.table().splitlines()[-2]
    assert "host encode times" in footer and "no 'timestamp-query' feature" in footer
    assert {e.clock for e in prof.kernels("gpu")} == {"host"}


def test_profile_table_is_sorted_by_total_time():
    step, x, y = _linear_step()
    with hx.profile() as prof:
        step(x, y)
    table = prof.table()
    rows = table.splitlines()[2:-2]  # (the last two: totals, and time by phase)
    totals = [float(r.split()[4]) for r in rows]
    assert totals == sorted(totals, reverse=True)
    assert "linear_backward" in table


def test_chrome_trace_file_is_valid_json_with_complete_events(tmp_path):
    step, x, y = _linear_step()
    with hx.profile() as prof:
        step(x, y)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert len(events) == len(prof.events)
    for e in events:
        assert e["ph"] == "X"
        assert {"name", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["dur"] >= 0 and e["ts"] >= 0
        assert isinstance(e["args"]["shapes"], list)
    assert [f.name for f in tmp_path.iterdir()] == ["trace.json"]  # no temporary left


def test_nothing_is_recorded_or_wrapped_when_no_profile_is_active():
    step, x, y = _linear_step()
    backend = backend_for(CPU)
    before = dict(backend.__dict__)
    with hx.profile() as prof:
        step(x, y)
    n = len(prof.events)
    assert dict(backend.__dict__) == before  # the wrappers are off again
    step(x, y)
    assert len(prof.events) == n


def test_nested_profile_is_refused_and_the_outer_keeps_recording():
    step, x, y = _linear_step()
    with hx.profile() as outer:
        with pytest.raises(RuntimeError, match="already active"):
            with hx.profile():
                pass
        step(x, y)
    assert any(e.name == "linear" for e in outer.events)


def test_profile_from_another_thread_is_refused_while_one_is_active():
    errors = []

    def other():
        try:
            with hx.profile():
                pass
        except RuntimeError as err:
            errors.append(err)

    with hx.profile():
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert len(errors) == 1 and "another thread" in str(errors[0])


def test_captured_step_recorded_inside_a_profile_replays_and_is_profiled():
    step, x, y = _linear_step()
    eager = step(x, y).item()
    with hx.profile() as prof:
        captured = hx.capture(step)
        losses = [captured(x, y).item() for _ in range(3)]
        n = len(prof.events)
        replay = captured(x, y)
        replayed = len(prof.events) - n
        losses.append(replay.item())
    assert captured.captured == 1
    assert losses == [eager] * 4
    assert replayed == captured.graph_stats()[0]["dispatches"]


@pytest.mark.gpu
def test_gpu_profile_kernels_match_the_dispatches_the_backend_counted(be):
    step, x, y = _linear_step("gpu")
    step(x, y)  # compile the pipelines first
    before = be.dispatcher.counters["dispatches"]
    with hx.profile() as prof:
        step(x, y)
    counted = be.dispatcher.counters["dispatches"] - before
    kernels = prof.kernels("gpu")
    assert counted > 0 and len(kernels) == counted
    assert all(k.kind == "dispatch" and ":" in k.name for k in kernels)
    assert any(k.parent == "mse_loss" for k in kernels)
    ops = {e.name for e in prof.events if e.device == "gpu" and e.kind == "op"}
    assert "linear_backward" in ops or "matmul" in ops


@pytest.mark.gpu
def test_gpu_replay_is_one_event_counting_the_dispatches_of_the_captured_step(be):
    step, x, y = _linear_step("gpu")
    with hx.profile() as prof:
        captured = hx.capture(step)
        for _ in range(3):
            captured(x, y)
        before, n = be.dispatcher.counters["dispatches"], len(prof.events)
        captured(x, y)
        counted = be.dispatcher.counters["dispatches"] - before
    call = prof.events[n:]
    (replay,) = [e for e in call if e.kind == "replay"]
    loads = [e for e in call if e.kind == "dispatch"]  # (arguments into static inputs)
    assert counted > 0 and replay.extra["dispatches"] + len(loads) == counted
    assert replay.extra["dispatches"] == captured.graph_stats()[0]["dispatches"]


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_each_kernel_names_the_graph_node_it_ran_for_and_its_source(device, request):
    if device == "gpu":
        request.getfixturevalue("be")
    hx.manual_seed(0)
    model = nn.Linear(4, 3).to(device)
    x, y = hx.randn(5, 4).to(device), hx.randn(5, 3).to(device)
    with hx.profile() as prof:
        out = model(x)
        loss = F.mse_loss(out, y)
        loss.backward()
    linear = out.grad_fn
    graph_ids = {n.id for n in hx.autograd.graph(loss).nodes}
    assert id(linear) in graph_ids
    mine = [e for e in prof.events if e.node_id == id(linear)]
    assert {e.phase for e in mine} == {"forward", "backward"}
    assert all(e.made == "Linear" for e in mine if e.phase == "forward")
    assert all(e.node == "Linear" for e in mine if e.phase == "backward")
    kernels = [e for e in mine if e in prof.kernels(device)]
    assert kernels
    language, source = prof.kernel_source(kernels[0])
    if device == "gpu":
        assert language == "wgsl" and "@compute" in source
        entry = kernels[0].name.split(":")[1]
        assert f"fn {entry}" in source
    else:
        assert language == "python" and f"def {kernels[0].name}(" in source


class _Scale(hx.autograd.Function):
    """A user's own op: its kernels run inside frames of this file, not Haelixe's."""

    @staticmethod
    def forward(ctx, x):
        return x._be.mul(x._data, x._be.full((), 3.0, x.dtype.np))

    @staticmethod
    def backward(ctx, g):
        return g * 3.0


def test_a_user_s_function_and_optimizer_keep_their_phases():
    x = hx.randn(4, requires_grad=True)

    class Plain(hx.optim.Optimizer):  # a user's optimizer: its step in this file
        def __init__(self, params):
            super().__init__(params, {"lr": 0.1})

        def step(self, closure=None):
            with hx.no_grad():
                for p in self.param_groups[0]["params"]:
                    p.sub_(p.grad * 0.1)

    with hx.profile() as prof:
        y = _Scale.apply(x)
        y.sum().backward()
        Plain([x]).step()
    mine = [e for e in prof.events if e.node_id == id(y.grad_fn)]
    assert {e.phase for e in mine} == {"forward", "backward"}, \
        [(e.name, e.phase) for e in prof.events]
    assert all(e.node == "_Scale" for e in mine if e.phase == "backward")
    assert any(e.phase == "optimizer" for e in prof.events)
