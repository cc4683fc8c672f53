"""A picture an exercise asks the learner to read stays on the page after Run All."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("ipywidgets")

ROOT = Path(__file__).resolve().parent.parent


def test_stopping_a_memory_view_keeps_its_widget_on_the_page():
    import haelixe as hx

    view = hx.viz.MemoryView("cpu")
    view.stop()
    assert view.widget.comm is not None  # still displayed, no longer following events
    view.close()
    assert view.widget.comm is None


@pytest.mark.parametrize("name", ["04_gpu.ipynb", "learner/04_gpu.ipynb"])
def test_lab_04_keeps_the_memory_view_exercise_4_2_reads(name):
    cells = json.loads((ROOT / "labs" / name).read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert "scene = hx.viz.MemoryView" in code
    assert "scene.close()" not in code and "scene.stop()" in code
