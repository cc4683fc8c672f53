"""What the live TrainingDashboard costs lab 07 inside a real browser.

Lab 07 (the character language model) runs top to bottom in JupyterLab, in headless
Chromium at 1280x800, as a learner runs it (Run All), in alternating rounds of two
copies: the lab as shipped (the dashboard redrawing live) and the same lab with the
dashboard's redraws held back until the end (``interval`` longer than the run). The
training cell prints its own steps/s; the ratio of the two is the share of the training
loop the live dashboard costs in the browser (redraws, message traffic, the page's
parsing on the same cores). Run All's wall time is printed too.

    python benchmarks/lab_browser_cost.py --rounds 3

Run it alone: on two cores a second busy process wrecks the figures.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import jupyterlab_session as jl  # noqa: E402

LAB = ROOT / "labs" / "07_char_language_model.ipynb"
DASHBOARD = "dash = hx.viz.TrainingDashboard(total_steps=cfg.steps, lr_plan=charlm.lr_plan(cfg),"
DONE = """() => { const w = window.jupyterapp.shell.currentWidget;
  return w && w.sessionContext.session && w.sessionContext.session.kernel &&
    w.sessionContext.session.kernel.status === 'idle' &&
    [...w.content.widgets].every(c => c.model.type !== 'code' ||
                                     c.model.executionCount !== null); }"""
OUTPUTS = """() => { const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
  let out = ''; for (let i = 0; i < cells.length; i++) { const c = cells.get(i);
  if (c.type === 'code') out += JSON.stringify(c.toJSON().outputs); } return out; }"""
RATE = re.compile(r"first step ([0-9.]+) s, then ([0-9.]+) steps/s")


def copies(folder: Path) -> dict[str, Path]:
    src = LAB.read_text()
    if DASHBOARD not in src:
        raise SystemExit(f"{LAB.name}: the dashboard's cell changed; update DASHBOARD here")
    held = src.replace(DASHBOARD, DASHBOARD + " interval=3600.0,")
    out = {"live": folder / "live.ipynb", "held back": folder / "held.ipynb"}
    out["live"].write_text(src)
    out["held back"].write_text(held)
    return out


def run_once(browser, base, token, path: Path) -> tuple[float, float]:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        jl.open_notebook(page, base, token, path.name)
        t0 = time.perf_counter()
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_timeout(1000)
        page.wait_for_function(DONE, timeout=600_000, polling=250)
        wall = time.perf_counter() - t0
        m = RATE.search(page.evaluate(OUTPUTS))
        if m is None:
            raise SystemExit(f"{path.name}: the training cell printed no steps/s")
        page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
        return wall, float(m.group(2))
    finally:
        page.close()


def summary(values) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f} .. {max(values):.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if jl.CHROMIUM is None:
        raise SystemExit(jl.SKIP_REASON)
    from playwright.sync_api import sync_playwright

    scratch = Path(tempfile.mkdtemp(prefix="hx-browser-cost-"))
    labs = scratch / "labs"
    labs.mkdir()
    notebooks = copies(labs)
    walls = {k: [] for k in notebooks}
    rates = {k: [] for k in notebooks}
    with jl.running_jupyterlab(labs, scratch / "jl") as (base, token), \
            sync_playwright() as p:
        browser = jl.launch_chromium(p)
        for r in range(args.rounds):
            order = list(notebooks) if r % 2 == 0 else list(reversed(notebooks))
            for kind in order:
                wall, rate = run_once(browser, base, token, notebooks[kind])
                walls[kind].append(wall)
                rates[kind].append(rate)
                print(f"round {r + 1} {kind:>10}: Run All {wall:5.1f} s, "
                      f"training {rate:5.1f} steps/s", flush=True)
        browser.close()
    print()
    for kind in notebooks:
        print(f"{kind:>10}: Run All {summary(walls[kind])} s; training "
              f"{summary(rates[kind])} steps/s")
    share = [1 - live / held for live, held in zip(rates["live"], rates["held back"])]
    print(f"the live dashboard's share of the training loop: "
          f"{100 * statistics.median(share):.1f}% [{100 * min(share):.1f} .. "
          f"{100 * max(share):.1f}] (per round, live against held back)")


if __name__ == "__main__":
    main()
