"""MemoryView: bar heights equal the allocator's stats under the documented scale, the
timeline follows events, and live redraws are throttled."""

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


def test_view_follows_events_with_throttled_redraws():
    alloc = Allocator("test", NumpyDriver())
    view = MemoryView(alloc, interval=10.0)
    redraws = view.throttle.redraws
    keep = _workload(alloc)
    for step in range(5):
        view.mark_step(step)
    assert view.throttle.redraws == redraws  # inside the interval: numbers only
    view.refresh()
    root = ET.fromstring(view._svg.value)
    assert len([g for g in root.iter(f"{NS}g") if g.get("class") == "bin"]) == \
        len(alloc.stats()["bins"])
    assert "step 4" in view._svg.value
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
