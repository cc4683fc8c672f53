"""`make lab` as a learner meets it, in headless Chromium: JupyterLab rooted where the
Makefile roots it, the learner's notebook open, and the instructor's version (with the
solutions) one click away, through the learner's own link and in the file browser."""

from __future__ import annotations

import re
import shutil
import subprocess

import jupyterlab_session as jl
import pytest

ROOT = jl.ROOT
pytestmark = pytest.mark.skipif(jl.CHROMIUM is None, reason=jl.SKIP_REASON)


def _make_lab_root() -> str:
    out = subprocess.run(["make", "-n", "lab"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return re.search(r"--ServerApp\.root_dir=(\S+)", out).group(1)


@pytest.fixture(scope="module")
def lab_root(tmp_path_factory):
    """A copy of the folder `make lab` serves (nothing is written into the checkout)."""
    root = tmp_path_factory.mktemp("lab") / "labs"
    shutil.copytree(ROOT / _make_lab_root(), root,
                    ignore=shutil.ignore_patterns("*.py", "__pycache__", ".ipynb_checkpoints"))
    return root


def test_make_lab_shows_the_instructors_notebooks_beside_the_learners(lab_root,
                                                                       tmp_path_factory):
    playwright = pytest.importorskip("playwright.sync_api")
    with jl.running_jupyterlab(lab_root, tmp_path_factory.mktemp("jupyter")) as (base, token):
        with playwright.sync_playwright() as p:
            browser = jl.launch_chromium(p)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                jl.open_notebook(page, base, token, "learner/01_tensors_and_strides.ipynb")
                listing = page.evaluate(
                    "async () => (await window.jupyterapp.serviceManager.contents.get(''))"
                    ".content.map(f => f.name)")
                assert "learner" in listing and "01_tensors_and_strides.ipynb" in listing
                # the learner's note links to the instructor's version; following it opens it
                # (JupyterLab rewrites a relative href into its own URL: found by its text)
                link = page.locator(".jp-RenderedMarkdown a",
                                    has_text="labs/01_tensors_and_strides.ipynb").first
                link.wait_for(timeout=30_000)
                link.click()
                page.wait_for_function(
                    "() => { const w = window.jupyterapp.shell.currentWidget;"
                    " return w && w.context && w.context.path === "
                    "'01_tensors_and_strides.ipynb'; }", timeout=60_000)
            finally:
                browser.close()
