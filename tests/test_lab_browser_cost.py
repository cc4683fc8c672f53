"""benchmarks/lab_browser_cost.py --lab memory: the notebook it makes runs headless (its
training cell prints the steps/s line the benchmark reads), and its two copies differ
only in the widgets' redraw interval."""

from __future__ import annotations

import contextlib
import io
import json

import benchmark_script

import haelixe as hx


def test_memory_notebook_runs_and_its_copies_differ_only_in_the_interval(tmp_path,
                                                                          monkeypatch):
    bench = benchmark_script.load("lab_browser_cost")
    monkeypatch.setattr(bench, "MEMORY_STEPS", 4)
    paths = bench.copies(tmp_path, "memory")
    live, held = (json.loads(paths[k].read_text())["cells"] for k in ("live", "held back"))
    differ = [(a["source"], b["source"]) for a, b in zip(live, held)
              if a["source"] != b["source"]]
    assert len(differ) == 1
    assert differ[0][1] == differ[0][0].replace("live=False)", "live=False, interval=3600.0)") \
        .replace("memory=mem,", "memory=mem, interval=3600.0,")
    shown, out = [], io.StringIO()
    scope = {"display": lambda *widgets: shown.extend(type(w).__name__ for w in widgets)}
    try:
        with contextlib.redirect_stdout(out):
            for cell in held:
                exec(compile(cell["source"], "cell", "exec"), scope)
    finally:  # (the notebook stops it itself, unless a cell failed)
        hx.record_memory_history(False, device="cpu")
    assert bench.RATE.search(out.getvalue()) and bench.INSIDE.search(out.getvalue()), \
        out.getvalue()
    assert shown == ["KernelView", "MemorySnapshotView", "MemoryView", "TrainingDashboard"]
