"""JupyterLab in a real browser, for the browser tests: a server on 127.0.0.1 with a
token over a chosen root folder, headless Chromium (Debian's package, driven by
Playwright), and a wait for a notebook's kernel."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SKIP_REASON = "chromium is not installed (apt-get install chromium); .ci/run installs it"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_jupyterlab(root: Path, scratch: Path):
    """JupyterLab serving ``root`` (config, runtime, workspaces and user settings under
    ``scratch``); yields (base url, token). Kernels import this checkout's haelixe."""
    port, token = _free_port(), secrets.token_hex(16)
    settings = scratch / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True, exist_ok=True)  # no "Jupyter news?" toast over the page
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(scratch / "config"),
               JUPYTER_RUNTIME_DIR=str(scratch / "runtime"),
               JUPYTERLAB_WORKSPACES_DIR=str(scratch / "workspaces"),
               JUPYTERLAB_SETTINGS_DIR=str(scratch / "settings"),
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get(
                   "PYTHONPATH", "").split(os.pathsep) if p]))
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
           f"--port={port}", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
           "--ServerApp.open_browser=False", "--allow-root"]
    log_path = scratch / "jupyterlab.log"
    log = open(log_path, "w")
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")  # as under nbval: labs/conftest.py says why
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
                                       + log_path.read_text()[-2000:]) from None
                time.sleep(0.5)
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                      args=CHROMIUM_ARGS)


def open_notebook(page, base: str, token: str, path: str) -> None:
    """Open ``path`` (relative to the server's root) and wait until its kernel is idle."""
    page.goto(f"{base}/lab/tree/{path}?token={token}&reset")
    page.wait_for_function("window.jupyterapp !== undefined", timeout=60_000)
    page.wait_for_selector(".jp-Notebook", timeout=60_000)
    page.wait_for_function(
        "() => { const w = window.jupyterapp.shell.currentWidget;"
        " return w && w.sessionContext && w.sessionContext.session"
        " && w.sessionContext.session.kernel"
        " && w.sessionContext.session.kernel.status === 'idle'; }",
        timeout=90_000)
