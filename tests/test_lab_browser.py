"""The labs in a real browser, as a learner meets them: JupyterLab on 127.0.0.1 with a
token, a 1280x800 window with the file browser open, headless Chromium (Debian's
package, driven by Playwright).

For every lab notebook (each in a copy, so nothing is written into the repository):

- opened before running: no output shows a widget's raw text (``VBox(...``); every cell
  that will hold a widget shows its static picture; saving the notebook then leaves the
  file byte for byte as it was (no volatile metadata);
- then all cells run: no error output; the live widget replaces the static picture;
  every widget picture fits the output area's width (or sits in a frame that scrolls,
  at zoom), with the essential parts (the graph's output node, the storage strip, the
  editor) within reach; every select shows a value;
  the training dashboard redraws at least once per second of training; a click on a
  KernelView bar rings its node in the GraphView and shows the WGSL it ran;
- a screenshot of every widget goes to build/screenshots/.

Run it alone with ``python -m pytest -q tests/test_lab_browser.py -p no:cacheprovider``.
``HAELIXE_LABS_DIR`` points it at another directory of lab notebooks. The labs are saved
with their outputs by ``make learner`` (``python -m haelixe.exercises.make_learner
--execute``). CI installs chromium (.ci/run); where it is absent the browser tests are
skipped with the reason.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
from pathlib import Path

import jupyterlab_session as jl
import pytest

ROOT = jl.ROOT
SHOTS = ROOT / "build" / "screenshots"
LABS_DIR = Path(os.environ.get("HAELIXE_LABS_DIR") or ROOT / "labs")
LABS = sorted(p.name for p in LABS_DIR.glob("[0-9][0-9]_*.ipynb"))
VIEWPORT = {"width": 1280, "height": 800}
GRAPH_NODES = {"02_autograd.ipynb": 9}  # lab 02's loss graph: 3 leaves and 6 ops
RUN_TIMEOUT_S = 300
# Run All within a minute, as the README promises, where a lab trains live in the page
# (lab 07: the dashboard's redraws and messages share the cores with training)
RUN_ALL_BUDGET_S = {"07_char_language_model.ipynb": 60}

needs_chromium = pytest.mark.skipif(jl.CHROMIUM is None, reason=jl.SKIP_REASON)


def _missing_adapter():
    """Why lab 04 cannot run here (None when a wgpu adapter, even a software one, is)."""
    from haelixe.backends.wgpu.context import gpu_available

    try:
        return None if gpu_available() else "no wgpu adapter"
    except Exception as err:  # no Vulkan/GL loader at all
        return f"{type(err).__name__}: {err}"


@pytest.fixture(scope="module")
def lab_copy(tmp_path_factory):
    root = tmp_path_factory.mktemp("labs")
    for name in LABS:
        shutil.copy2(LABS_DIR / name, root / name)
    return root


@pytest.fixture(scope="module")
def jupyterlab(lab_copy, tmp_path_factory):
    with jl.running_jupyterlab(lab_copy, tmp_path_factory.mktemp("jupyter")) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        b = jl.launch_chromium(p)
        try:
            yield b
        finally:
            b.close()


# -- what the page is asked -----------------------------------------------------------------

OUTPUTS_JS = """() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map((cell, i) => ({
  index: i,
  text: [...cell.querySelectorAll('.jp-OutputArea-output')].map(e => e.textContent)
        .join('\\n'),
  statics: [...cell.querySelectorAll('img.hx-static-picture')].map(img => ({
      loaded: img.complete && img.naturalWidth > 0,
      width: img.getBoundingClientRect().width,
      area: img.closest('.jp-OutputArea-output').getBoundingClientRect().width})),
  live: cell.querySelectorAll('.jupyter-widgets .hx-frame').length,
}))"""

STATICS_LOADED_JS = """() => {
  const imgs = [...document.querySelectorAll('img.hx-static-picture')];
  return imgs.every(img => img.complete && img.naturalWidth > 0) ? imgs.length : -2;
}"""

DONE_JS = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const kernel = w && w.sessionContext.session && w.sessionContext.session.kernel;
  if (!kernel || kernel.status !== 'idle') return false;
  const cells = w.content.model.cells;
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    if (c.type === 'code' && c.sharedModel.getSource().trim() && !c.executionCount)
      return false;
  }
  return true;
}"""

ERRORS_JS = """() => {
  const w = window.jupyterapp.shell.currentWidget, cells = w.content.model.cells, out = [];
  for (let i = 0; i < cells.length; i++) {
    const c = cells.get(i);
    if (c.type !== 'code') continue;
    for (const o of c.outputs.toJSON()) {
      const text = o.output_type === 'stream' && o.name === 'stderr' ?
        (Array.isArray(o.text) ? o.text.join('') : o.text) : '';
      if (o.output_type === 'error') out.push(`cell ${i}: ${o.ename}: ${o.evalue}`);
      else if (/Traceback|\\w+Error\\b|^error:/m.test(text))
        out.push(`cell ${i} stderr: ${text.slice(0, 300)}`);
    }
  }
  return out;
}"""

# Every live picture and what must be within reach, measured after scrolling it into
# view (offscreen cells may skip layout).
FRAMES_JS = """(frame) => {
  const area = frame.closest('.jp-OutputArea-output').getBoundingClientRect();
  const f = frame.getBoundingClientRect();
  const svgs = [...frame.querySelectorAll('svg')].filter(s => !s.parentElement.closest('svg'));
  const scrolls = getComputedStyle(frame).overflowX === 'auto';
  const out = {zoom: frame.dataset.zoom, area: [area.left, area.right],
               frame: [f.left, f.right], clientWidth: frame.clientWidth, scrolls,
               svgs: svgs.map(s => { const r = s.getBoundingClientRect();
                                     return [r.left, r.right, s.getAttribute('class')]; }),
               essential: []};
  const pick = (sel, what) => frame.querySelectorAll(sel).forEach(e => {
    const r = e.getBoundingClientRect(); out.essential.push([what, r.left, r.right]); });
  pick('g.node[data-kind="output"]', 'output node');
  pick('rect.storage', 'storage cell');
  pick('svg.hx-layout .hx-layout-formula', 'formula');
  return out;
}"""

CONTROLS_JS = """(area) => {
  const a = area.getBoundingClientRect(), out = {outside: [], selects: []};
  area.querySelectorAll('.jupyter-widgets input, .jupyter-widgets button, '
                        + '.jupyter-widgets select, .hx-layout-editor').forEach(e => {
    const r = e.getBoundingClientRect();
    if (r.width && (r.right > a.right + 1 || r.left < a.left - 1))
      out.outside.push(`${e.tagName}.${e.className} ${Math.round(r.left)}..${Math.round(r.right)}`
                       + ` outside ${Math.round(a.left)}..${Math.round(a.right)}`);
  });
  area.querySelectorAll('select').forEach(s => {
    if (s.offsetParent === null) return;  // hidden (a menu with nothing to offer)
    const opt = s.options[s.selectedIndex];
    out.selects.push(opt ? opt.text.trim() : '');
  });
  area.querySelectorAll('.widget-toggle-buttons').forEach(t => {
    if (t.offsetParent === null) return;
    out.selects.push(t.querySelectorAll('button.mod-active').length === 1 ?
                     t.querySelector('button.mod-active').textContent.trim() : '');
  });
  return out;
}"""

WATCH_DASHBOARD_JS = """() => {
  window.hxRedraws = [];
  let last = null;
  new MutationObserver(() => {
    const svg = document.querySelector('.hx-training-dashboard svg.hx-training-loss');
    const step = svg && svg.getAttribute('data-step');
    if (step !== null && step !== last) {
      last = step;
      window.hxRedraws.push([performance.now() / 1000, Number(step)]);
    }
  }).observe(document.body, {childList: true, subtree: true});
}"""


def _open(page, base, token, name):
    jl.open_notebook(page, base, token, name)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.evaluate("window.jupyterapp.shell.activateById('filebrowser')")
    browser_w = page.evaluate(
        "() => document.querySelector('#filebrowser').getBoundingClientRect().width")
    assert browser_w > 150, "the file browser should be open, as JupyterLab opens it"
    page.wait_for_timeout(500)  # let outputs render, until their pictures stop arriving
    seen, deadline = -1, time.perf_counter() + 15
    while time.perf_counter() < deadline:
        count = page.evaluate(STATICS_LOADED_JS)
        if count == seen:
            break
        seen = count
        page.wait_for_timeout(700)


def _redraw_problems(redraws) -> list[str]:
    """Redraws must come at least once per second of training."""
    steps = [(t, s) for t, s in redraws if s > 0]
    if len(steps) < 2:
        return [f"the dashboard redrew {len(steps)} times while training"]
    (t0, _), (t1, _) = steps[0], steps[-1]
    duration = t1 - t0
    gaps = [b[0] - a[0] for a, b in zip(steps, steps[1:])]
    problems = []
    if len(steps) - 1 < math.floor(duration):
        problems.append(f"{len(steps) - 1} redraws in {duration:.1f} s of training")
    if max(gaps) > 2.5:  # once a second, plus the page's own delays on a busy machine
        problems.append(f"the dashboard stood still for {max(gaps):.1f} s")
    return problems


@needs_chromium
@pytest.mark.parametrize("name", LABS)
def test_lab_in_chromium(name, jupyterlab, lab_copy, browser):
    if name.startswith("04_") and (why := _missing_adapter()):
        pytest.skip(f"lab 04 needs a wgpu adapter ({why})")
    base, token = jupyterlab
    stem = name.removesuffix(".ipynb")
    SHOTS.mkdir(parents=True, exist_ok=True)
    original = (lab_copy / name).read_bytes()
    problems = []
    page = browser.new_page(viewport=VIEWPORT)
    try:
        _open(page, base, token, name)

        # -- opened before running ---------------------------------------------------
        before = page.evaluate(OUTPUTS_JS)
        for cell in before:
            if re.search(r"\b[HV]Box\(children=", cell["text"]):
                problems.append(f"cell {cell['index']} shows a widget's raw text before "
                                f"running: {cell['text'][:80]!r}")
            for img in cell["statics"]:
                if not img["loaded"]:
                    problems.append(f"cell {cell['index']}: static picture did not load")
                if img["width"] > img["area"] + 1:
                    problems.append(f"cell {cell['index']}: static picture "
                                    f"{img['width']:.0f} px in a {img['area']:.0f} px area")
        statics = {c["index"] for c in before if c["statics"]}
        for k, img in enumerate(page.query_selector_all(".jp-OutputArea-output:has("
                                                        "img.hx-static-picture)")):
            _shoot(page, img, SHOTS / f"{stem}_static_{k}.png")
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_timeout(1500)
        if not _same_notebook(original, saved := (lab_copy / name).read_bytes()):
            problems.append("opening and saving the notebook changed the file (volatile "
                            "metadata or outputs; run make learner):\n"
                            + _first_changes(original, saved))

        # -- run everything ------------------------------------------------------------
        page.evaluate(WATCH_DASHBOARD_JS)
        started = time.perf_counter()
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_timeout(1000)
        page.wait_for_function(DONE_JS, timeout=RUN_TIMEOUT_S * 1000, polling=500)
        run_all_s = time.perf_counter() - started
        print(f"{name}: Run All took {run_all_s:.1f} s in the browser")
        if run_all_s > RUN_ALL_BUDGET_S.get(name, RUN_TIMEOUT_S):
            problems.append(f"Run All took {run_all_s:.0f} s, over its "
                            f"{RUN_ALL_BUDGET_S[name]} s budget")
        page.wait_for_timeout(500)
        problems += page.evaluate(ERRORS_JS)
        after = page.evaluate(OUTPUTS_JS)
        live = {c["index"] for c in after if c["live"]}
        if missing := sorted(live - statics):
            problems.append(f"cells {missing} hold widgets but showed no static picture "
                            f"before running (save the notebook with make learner)")
        if still := sorted(c["index"] for c in after if c["live"] and c["statics"]):
            problems.append(f"cells {still} show the static picture beside the live "
                            f"widget: JupyterLab should prefer the widget view")

        areas = page.query_selector_all(".jp-OutputArea-output:has(.jupyter-widgets "
                                        ".hx-frame)")
        for k, area in enumerate(areas):
            area.scroll_into_view_if_needed()
            controls = area.evaluate(CONTROLS_JS)
            problems += [f"widget {k}: {o}" for o in controls["outside"]]
            problems += [f"widget {k}: a select shows no value" for v in controls["selects"]
                         if not v]
            for frame in area.query_selector_all(".hx-frame"):
                frame.scroll_into_view_if_needed()
                problems += _frame_problems(k, frame.evaluate(FRAMES_JS))
            _shoot(page, area, SHOTS / f"{stem}_widget_{k}.png")
        if name in GRAPH_NODES:
            nodes = page.query_selector_all(".hx-graph-view svg.hx-graph g.node")
            if len(nodes) != GRAPH_NODES[name]:
                problems.append(f"GraphView drew {len(nodes)} nodes, expected "
                                f"{GRAPH_NODES[name]}")
        if page.query_selector(".hx-kernel-view"):
            problems += _kernel_click_problems(page)
        if page.query_selector(".hx-training-dashboard"):
            redraws = page.evaluate("window.hxRedraws")
            problems += _redraw_problems(redraws)
            print(f"{name}: the dashboard redrew {len(redraws)} times, steps "
                  f"{[s for _, s in redraws][:3]}...{[s for _, s in redraws][-2:]} over "
                  f"{redraws[-1][0] - redraws[0][0]:.1f} s" if redraws else "no redraws")
        page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
    finally:
        page.close()
    assert not problems, "\n".join(problems)


def _kernel_click_problems(page) -> list[str]:
    """A click on a KernelView bar whose node the linked GraphView draws: the node (or
    its module box) is ringed there, and the WGSL the kernel ran shows, highlighted."""
    bar = page.query_selector(".hx-kernel-view button.hx-kernel-bar.hx-linked")
    if bar is None:
        return ["KernelView has no bar linked to a node of its GraphView"]
    bar.scroll_into_view_if_needed()
    bar.click()
    problems = []
    try:
        page.wait_for_selector(".hx-graph-view svg.hx-graph rect.ring", timeout=20_000)
    except Exception:
        problems.append("clicking a KernelView bar ringed no node in the GraphView")
    try:
        entry = page.wait_for_selector(".hx-kernel-view pre.hx-kernel-entry", timeout=20_000)
    except Exception:
        return problems + ["clicking a KernelView bar showed no WGSL entry point"]
    if "@compute" not in entry.text_content() or not entry.query_selector("span"):
        problems.append("the WGSL shown has no @compute entry point or no highlighting")
    if page.query_selector(".hx-kernel-view details pre.hx-kernel-source"
                           "[data-language='wgsl']") is None:
        problems.append("the WGSL module is not offered below its entry point")
    _shoot(page, page.query_selector(".jp-OutputArea-output:has(.hx-kernel-view)"),
           SHOTS / "04_gpu_kernel_clicked.png")
    return problems


def _shoot(page, element, path) -> None:
    """A screenshot of one output; a tall one in a taller window (same width, so the
    same layout across), which an element screenshot needs to show it whole."""
    height = element.evaluate("e => e.getBoundingClientRect().height")
    tall = height + 150 > VIEWPORT["height"]
    if tall:
        page.set_viewport_size({"width": VIEWPORT["width"], "height": 2400})
        page.wait_for_timeout(200)
    element.scroll_into_view_if_needed()
    element.screenshot(path=str(path))
    if tall:
        page.set_viewport_size(VIEWPORT)


def _same_notebook(before: bytes, after: bytes) -> bool:
    """Byte for byte the same, except for the one field that depends on who opens the
    lab: JupyterLab writes the running kernel's Python version into language_info."""
    if before == after:
        return True
    a, b = json.loads(before), json.loads(after)
    versions = [nb.get("metadata", {}).get("language_info", {}).pop("version", None)
                for nb in (a, b)]
    return versions[0] != versions[1] and a == b


def _first_changes(a: bytes, b: bytes, n: int = 12) -> str:
    import difflib

    diff = difflib.unified_diff(a.decode().splitlines(), b.decode().splitlines(),
                                "before", "after", lineterm="", n=1)
    return "\n".join(line[:160] for line in list(diff)[:n])


def _frame_problems(k, m) -> list[str]:
    out = []
    (a0, a1), (f0, f1) = m["area"], m["frame"]
    if f1 > a1 + 1 or f0 < a0 - 1:
        out.append(f"widget {k}: picture frame {f0:.0f}..{f1:.0f} leaves the output area "
                   f"{a0:.0f}..{a1:.0f}")
    fits = m["zoom"] == "0"
    for left, right, cls in m["svgs"]:
        if fits and right - left > m["clientWidth"] + 1:
            out.append(f"widget {k}: {cls} is {right - left:.0f} px in a "
                       f"{m['clientWidth']} px frame")
        if not fits and not m["scrolls"]:
            out.append(f"widget {k}: zoomed {cls} cannot be scrolled to")
    if fits:
        for what, left, right in m["essential"]:
            if right > f1 + 1 or left < f0 - 1:
                out.append(f"widget {k}: the {what} is outside the picture frame")
    return out


# -- what `make learner` saves ------------------------------------------------------------

def test_saved_outputs_are_what_jupyterlab_writes_back():
    """JupyterLab merges consecutive outputs of one stream when it opens a notebook, so
    the saved labs hold them merged (else re-saving a lab would change it)."""
    import nbformat

    from haelixe.exercises.notebooks import normalize

    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    cell = nbformat.v4.new_code_cell("view", execution_count=3)
    cell.metadata["execution"] = {"iopub.execute_input": "2026-01-01T00:00:00Z"}
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="a\n"),
        nbformat.v4.new_output("stream", name="stdout", text="b\n"),
        nbformat.v4.new_output("stream", name="stderr", text="c\n"),
        nbformat.v4.new_output("stream", name="stdout", text="d\n"),
        nbformat.v4.new_output("display_data", data={"text/plain": "GraphView of loss",
                                                     "text/html": "<img/>"})]
    nb.cells = [cell]
    normalize(nb)
    assert "widgets" not in nb.metadata and "execution" not in cell.metadata
    assert [(o.output_type, o.get("name")) for o in cell.outputs] == [
        ("stream", "stdout"), ("stream", "stderr"), ("stream", "stdout"),
        ("display_data", None)]
    assert cell.outputs[0].text == "a\nb\n" and cell.execution_count == 3
    json.dumps(nb)  # still plain JSON
