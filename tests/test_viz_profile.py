"""KernelView and MemorySnapshotView: the bars are the profile's kernels per node, a
selected bar rings its node in the GraphView and shows the code it ran (WGSL on the
GPU), the snapshot's picture marks the peak and lists what held it, and a saved
snapshot reopens in the widget."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

import haelixe as hx
import haelixe.nn as nn
import haelixe.nn.functional as F
from haelixe.viz.kernels import KernelView, highlight, kernel_rows
from haelixe.viz.memory_snapshot import MemorySnapshotView, live_at, snapshot_series

NS = "{http://www.w3.org/2000/svg}"


def _model(device):
    hx.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(device)
    x, y = hx.randn(6, 8).to(device), hx.randn(6, 4).to(device)
    return model, hx.optim.AdamW(model.parameters()), x, y


def _profiled(device):
    model, opt, x, y = _model(device)
    with hx.profile() as prof:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    return prof, loss, model


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_a_bar_selects_its_node_and_shows_the_code_it_ran(device, request):
    if device == "gpu":
        request.getfixturevalue("be")
    prof, loss, model = _profiled(device)
    graph = hx.viz.GraphView(loss, model=model)
    view = KernelView(prof, graph=graph)
    kernels = prof.kernels()
    assert sum(r["calls"] for r in view.rows if r["phase"] != "replay") == len(kernels)
    assert sum(r["total_ns"] for r in view.rows) == sum(e.duration_ns for e in kernels)
    backward = next(r for r in view.rows if r["phase"] == "backward"
                    and r["node_id"] in graph._ids and r["node"] == "Linear")
    view.select(backward["key"])
    assert graph.selected == backward["node_id"]
    ringed = ET.fromstring(graph.to_svg()).find(
        f".//{NS}g[@data-id='{backward['node_id']}']/{NS}rect[@class='ring']")
    assert ringed is not None
    details = view._details.value
    if device == "gpu":
        assert 'data-language="wgsl"' in details and "@compute" in details
        entry = backward["name"].split(":")[1]
        assert '<pre class="hx-kernel-entry"' in details and entry in details
    else:
        assert 'data-language="python"' in details and "linear_backward" in details
    assert "hx-selected" in view._buttons[backward["key"]]._dom_classes
    static = ET.fromstring(view.static_svgs()[0])
    rows = static.findall(f".//{NS}g[@class='kernel-row']")
    assert len(rows) == min(view.limit, len(view.rows))
    assert [g.get("data-key") for g in rows if g.get("data-selected")] == [backward["key"]]
    assert {r.get("data-phase") for r in static.findall(f".//{NS}rect[@class='kernel']")} \
        == {"forward", "backward", "optimizer"}
    assert "<img" in view._repr_mimebundle_()["text/html"]
    view.select(None)
    assert "Click a bar" in view._details.value
    folded = hx.viz.GraphView(loss, model=model, collapse=1)  # each layer one box
    KernelView(prof, graph=folded).select(backward["key"])
    box = folded.collapsed.member_of[backward["node_id"]]
    assert folded.selected == box and box in folded._layout.shown


def test_rows_group_kernels_per_phase_name_and_node():
    prof, loss, model = _profiled("cpu")
    rows = kernel_rows(prof.kernels())
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys))
    linears = [r for r in rows if r["name"] == "linear" and r["phase"] == "forward"]
    assert len(linears) == 2 and {r["node"] for r in linears} == {"Linear"}
    assert len({r["node_id"] for r in linears}) == 2  # one row per layer
    assert [r["total_ns"] for r in rows] == sorted((r["total_ns"] for r in rows),
                                                   reverse=True)


def test_entry_point_is_the_function_with_its_attributes():
    from haelixe.viz.kernels import entry_point

    src = ("fn helper() -> u32 { return 1u; }\n@compute @workgroup_size(64)\n"
           "fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n  if (g.x > 0u) { "
           "out[0] = helper(); }\n}\nfn after() {}\n")
    assert entry_point(src, "main") == src[src.index("@compute"):src.index("\nfn after")]
    assert entry_point(src, "helper").startswith("fn helper")
    assert entry_point(src, "missing") is None


def test_highlight_escapes_and_colours():
    html = highlight("fn main() { let a: vec4<f32> = x < 2u; } // done <b>", "wgsl")
    assert "<b>" not in html and "&lt;b&gt;" in html and "&lt; 2u" not in html
    assert '<span class="hx-keyword"' in html and '<span class="hx-type"' in html
    assert '<span class="hx-comment"' in html and '<span class="hx-number"' in html


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_snapshot_view_marks_the_peak_and_what_held_it(device, request, tmp_path):
    if device == "gpu":
        request.getfixturevalue("be")
    model, opt, x, y = _model(device)
    hx.record_memory_history(device=device)
    try:
        hx.reset_peak_stats(device)
        F.mse_loss(model(x), y).backward()
        opt.step()
        snap = hx.memory_snapshot(device)
    finally:
        hx.record_memory_history(False, device=device)
    peak = snap["peak"]
    series = snapshot_series(snap)
    assert max(sum(p[1]) for p in series) == peak["allocated_bytes"] \
        == hx.memory_stats(device)["peak_allocated_bytes"]
    held = live_at(snap, peak["event"])
    assert sum(b["size"] for b in held) + peak["before_recording_bytes"] \
        == peak["allocated_bytes"]
    path = tmp_path / "step.json"
    hx.save_memory_snapshot(path, snap)
    view = MemorySnapshotView(path)  # reopened from the file
    root = ET.fromstring(view.to_svg())
    assert root.get("data-at") == str(peak["event"])
    assert root.find(f".//{NS}line[@class='peak']") is not None
    rows = root.findall(f".//{NS}g[@class='block-row']")
    assert [int(r.get("data-size")) for r in rows] == [b["size"] for b in held[:view.rows]]
    assert any(b["op"] for b in held)  # the peak falls in backward: activations saved
    view.scrub(0)
    root = ET.fromstring(view.to_svg())
    assert root.get("data-at") == "0" and root.find(f".//{NS}line[@class='at']") is not None
    assert len(root.findall(f".//{NS}g[@class='block-row']")) == 1
    static = ET.fromstring(view.static_svgs()[0])
    assert static.get("data-at") == str(peak["event"])  # the saved page shows the peak
    assert repr(view).startswith(f"MemorySnapshotView of {device}: ")
