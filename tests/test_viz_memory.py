"""MemoryView: bar heights equal the allocator's stats under the documented scale, the
timeline follows events, live redraws wait for the redraw clock, labels keep clear of the
legend, and sizes use the units Haelixe prints."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from haelixe.memory import Allocator, NumpyDriver, tagged
from haelixe.viz.memory import MemoryTimeline, MemoryView, render_memory_svg

NS = "{http://www.w3.org/2000/svg}"


def _workload(alloc):
    keep = []
    with tagged("parameter"):
        keep += [alloc.allocate(1000 * k) for k in range(1, 5)]
    with tagged("optimizer_state"):
        keep.append(alloc.allocate(3000))
    tmp = [alloc.allocate(700 + 90 * k) for k in range(8)]  # rounding waste, then cached
    del tmp
    with tagged("gradient"):
        keep.append(alloc.allocate(5000))
    return keep


def test_bar_heights_equal_stats():
    alloc = Allocator("test", NumpyDriver())
    keep = _workload(alloc)
    stats = alloc.stats()
    root = ET.fromstring(render_memory_svg(stats))
    assert root.get("class") == "hx-memory"
    scale = float(root.get("data-bin-scale"))
    bins = [g for g in root.iter(f"{NS}g") if g.get("class") == "bin"]
    assert [int(g.get("data-size")) for g in bins] == sorted(stats["bins"])
    tallest = 0
    for g in bins:
        b = stats["bins"][int(g.get("data-size"))]
        assert int(g.get("data-in-use")) == b["in_use"]
        assert int(g.get("data-cached")) == b["cached"]
        rects = {r.get("class"): r for r in g.iter(f"{NS}rect")}
        expect = {"bin-requested": b["requested_bytes"],
                  "bin-waste": b["allocated_bytes"] - b["requested_bytes"],
                  "bin-cached": b["cached"] * int(g.get("data-size"))}
        for cls, nbytes in expect.items():
            assert int(rects[cls].get("data-bytes")) == nbytes
            assert float(rects[cls].get("height")) == pytest.approx(nbytes * scale, abs=0.01)
        tallest = max(tallest, sum(expect.values()))
    assert tallest * scale == pytest.approx(150)  # the tallest bin fills the chart
    assert any(int(r.get("data-bytes")) > 0 for r in root.iter(f"{NS}rect")
               if r.get("class") == "bin-waste")
    tags = {r.get("data-tag"): int(r.get("data-bytes")) for r in root.iter(f"{NS}rect")
            if r.get("class") == "tag"}
    assert tags == {t: b for t, b in stats["by_tag"].items() if b}
    text = ET.tostring(root, "unicode")
    hits, misses = stats["cache_hits"], stats["cache_misses"]
    assert f"cache hit rate {100 * hits / (hits + misses):.1f}%" in text
    del keep


def test_timeline_tracks_tags_and_bounds_its_points():
    alloc = Allocator("test", NumpyDriver())
    tl = MemoryTimeline(max_points=50)
    alloc.subscribe(tl.record)
    keep = _workload(alloc)
    by_tag = alloc.stats()["by_tag"]
    assert dict(zip(("parameter", "gradient", "optimizer_state", "activation",
                     "temporary"), tl.tags)) == by_tag
    last = tl.series()[-1]
    assert last[1] == alloc.stats()["reserved_bytes"]
    for _ in range(200):
        alloc.allocate(600)
    assert len(tl.points) < 100 and tl.stride > 1
    peak = max(sum(p[2]) for p in tl.series())
    assert peak <= alloc.stats()["peak_allocated_bytes"]
    keep[0].retag("temporary")
    assert tl.needs_resync
    del keep


def test_view_follows_events_with_clocked_redraws():
    alloc = Allocator("test", NumpyDriver())
    view = MemoryView(alloc, interval=10.0)
    redraws = view.clock.redraws
    keep = _workload(alloc)
    for step in range(5):
        view.mark_step(step)
    assert view.clock.redraws == redraws  # inside the interval: numbers only
    view.refresh()
    assert view.clock.redraws == redraws + 1
    root = ET.fromstring(view.picture.svg)
    assert len([g for g in root.iter(f"{NS}g") if g.get("class") == "bin"]) == \
        len(alloc.stats()["bins"])
    assert "step 4" in view.picture.svg
    view.stop()
    n = len(view.timeline.series())
    alloc.allocate(4096)
    assert len(view.timeline.series()) == n
    view.close()
    del keep


def test_cpu_allocator_view_renders_empty():
    view = MemoryView("cpu")
    assert 'class="hx-memory"' in view.to_svg()
    view.close()


def _text_boxes(root, pred):
    """Approximate boxes (x0, y0, x1, y1) of the text elements ``pred`` picks."""
    from haelixe.viz import svg

    out = []
    for t in root.iter(f"{NS}text"):
        if not pred(t):
            continue
        size = float(t.get("font-size"))
        w = svg.text_width(t.text or "", size)
        x, y = float(t.get("x")), float(t.get("y"))
        x0 = {"start": x, "middle": x - w / 2, "end": x - w}[t.get("text-anchor", "start")]
        out.append((x0, y - size, x0 + w, y + 0.25 * size))
    return out


def _overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_bin_labels_keep_clear_of_the_legend_and_title():
    alloc = Allocator("test", NumpyDriver())
    keep = _workload(alloc)
    keep += [alloc.allocate(1 << 20) for _ in range(3)]  # one bin far taller than others
    root = ET.fromstring(render_memory_svg(alloc.stats()))
    legend = next(g for g in root.iter(f"{NS}g") if g.get("class") == "legend")
    in_legend = {id(t) for t in legend.iter(f"{NS}text")}
    labels = _text_boxes(root, lambda t: t.get("class") == "bin-label")
    others = _text_boxes(root, lambda t: id(t) in in_legend
                         or (t.text or "").startswith("bins:"))
    swatches = [(float(r.get("x")), float(r.get("y")),
                 float(r.get("x")) + float(r.get("width")),
                 float(r.get("y")) + float(r.get("height"))) for r in legend.iter(f"{NS}rect")]
    assert labels and len(others) == 4
    for a in labels:
        for b in others + swatches:
            assert not _overlap(a, b), (a, b)
    for a, b in [(a, b) for a in others for b in others if a < b]:
        assert not _overlap(a, b)
    del keep


def test_sizes_use_the_units_haelixe_prints():
    import re

    from haelixe.memory import format_bytes

    alloc = Allocator("test", NumpyDriver())
    keep = _workload(alloc) + [alloc.allocate(3 << 20)]
    text = render_memory_svg(alloc.stats())
    assert "MiB" in text and "KiB" in text
    assert not re.search(r"\d (MB|KB|GB)\b", text)
    assert format_bytes(3 << 20) == "3 MiB" and format_bytes(1536) == "1.5 KiB"
    assert f"allocated {format_bytes(alloc.stats()['allocated_bytes'])}" in text
    del keep


def test_repr_and_static_picture():
    alloc = Allocator("test", NumpyDriver())
    view = MemoryView(alloc)
    keep = _workload(alloc)
    assert repr(view).startswith("MemoryView of the test allocator: allocated ")
    bundle = view._repr_mimebundle_()
    assert bundle["text/plain"] == repr(view) and "<img" in bundle["text/html"]
    assert 'viewBox="0 0 ' in view.picture.svg and "width:100%" in view.picture.html.value
    view.close()
    del keep


@pytest.mark.gpu
def test_gpu_view_opens_before_the_first_gpu_tensor():
    """MemoryView("gpu") reads the allocator through haelixe.memory alone, which starts
    the GPU backend when nothing has yet (a fresh interpreter)."""
    import subprocess
    import sys

    code = ("import sys, haelixe as hx\n"
            "from haelixe.backends.wgpu.context import GpuUnavailableError\n"
            "assert 'haelixe.backends.wgpu.backend' not in sys.modules\n"
            "try:\n    view = hx.viz.MemoryView('gpu')\n"
            "except GpuUnavailableError as e:\n    print('no adapter', e); sys.exit(0)\n"
            "x = hx.zeros(1000, 1000, device='gpu')\n"
            "view.refresh()\n"
            "print(view.stats()['device'], view.stats()['allocated_bytes'] >= 4_000_000)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    if out.stdout.startswith("no adapter"):
        pytest.skip(out.stdout.strip())
    assert out.stdout.split() == ["gpu", "True"], out.stdout
