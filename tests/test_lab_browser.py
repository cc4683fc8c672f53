"""The lab in a real browser: JupyterLab on 127.0.0.1 with a token, a lab notebook run in
headless Chromium (Debian's package, driven by Playwright), and the widgets checked in
the page: the GraphView's SVG must be there with one node group per graph node.

CI installs chromium (.ci/run); where it is absent the test is skipped with the reason.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = ROOT / "build" / "screenshots"
LAB = "labs/02_autograd.ipynb"
GRAPH_NODES = 9  # the lab's loss graph: 3 leaves and 6 ops (its own check cell says so)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                                "(apt-get install chromium); .ci/run installs it")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def jupyterlab(tmp_path):
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"))
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={ROOT}", "--LabApp.expose_app_in_browser=True",
           "--ServerApp.open_browser=False", "--allow-root"]
    log = open(tmp_path / "jupyterlab.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError("JupyterLab did not start: "
                                       + (tmp_path / "jupyterlab.log").read_text()[-2000:]
                                       ) from None
                time.sleep(0.5)
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_lab_runs_in_chromium_and_widgets_render(jupyterlab):
    playwright = pytest.importorskip("playwright.sync_api")
    base, token = jupyterlab
    SHOTS.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{base}/lab/tree/{LAB}?token={token}&reset")
            page.wait_for_function("window.jupyterapp !== undefined", timeout=60_000)
            page.wait_for_selector(".jp-Notebook", timeout=60_000)
            # wait for the kernel, then run every cell through JupyterLab's own command
            page.wait_for_function(
                "() => { const w = window.jupyterapp.shell.currentWidget;"
                " return w && w.sessionContext && w.sessionContext.session"
                " && w.sessionContext.session.kernel"
                " && w.sessionContext.session.kernel.status === 'idle'; }",
                timeout=90_000)
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
