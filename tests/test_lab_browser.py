"""The lab in a real browser: JupyterLab on 127.0.0.1 with a token, a lab notebook run in
headless Chromium (Debian's package, driven by Playwright), and the widgets checked in
the page: the GraphView's SVG must be there with one node group per graph node.

CI installs chromium (.ci/run); where it is absent the test is skipped with the reason.
"""

from __future__ import annotations

import pytest
from jupyterlab_session import (
    CHROMIUM,
    ROOT,
    SKIP_REASON,
    launch_chromium,
    open_notebook,
    running_jupyterlab,
)

SHOTS = ROOT / "build" / "screenshots"
LAB = "labs/02_autograd.ipynb"
GRAPH_NODES = 9  # the lab's loss graph: 3 leaves and 6 ops (its own check cell says so)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)


@pytest.fixture
def jupyterlab(tmp_path):
    with running_jupyterlab(ROOT, tmp_path) as server:
        yield server


def test_lab_runs_in_chromium_and_widgets_render(jupyterlab):
    playwright = pytest.importorskip("playwright.sync_api")
    base, token = jupyterlab
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            # wait for the kernel, then run every cell through JupyterLab's own command
            open_notebook(page, base, token, LAB)
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            graph = page.wait_for_selector("svg.hx-graph", timeout=120_000)
            # the last cell's output (second derivative check) means the run finished
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                ".some(e => e.textContent.includes('same buffer: True'))", timeout=120_000)
            nodes = graph.query_selector_all("g.node")
            graph.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "lab02_graphview.png"), full_page=False)
            errors = page.query_selector_all(".jp-OutputArea-output[data-mime-type="
                                             "'application/vnd.jupyter.stderr'] .ansi-red-fg")
            assert len(nodes) == GRAPH_NODES, f"GraphView drew {len(nodes)} nodes"
            assert not errors, [e.text_content()[:200] for e in errors]
        finally:
            browser.close()
