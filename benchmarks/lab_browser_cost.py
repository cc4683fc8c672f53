"""What the live widgets cost training inside a real browser.

A notebook runs top to bottom in JupyterLab, in headless Chromium at 1280x800, as a
learner runs it (Run All), in alternating rounds of two copies: as written (the widgets
redrawing live) and the same with their redraws held back until the end (``interval``
longer than the run). The training cell prints its own steps/s; the ratio of the two is
the share of the training loop the live widgets cost in the browser (redraws, message
traffic, the page's parsing on the same cores). Run All's wall time is printed too.

``--lab 07``: lab 07 (the character language model) and its TrainingDashboard.
``--lab memory``: a notebook made here from what lab 04's section 7 shows: a KernelView
of one profiled eager denoiser step and a MemorySnapshotView of one recorded step
(drawn once, above), then the denoiser trained on the CPU with memory history recorded,
a MemoryView following the CPU allocator live (its timeline by category) and a
TrainingDashboard marking each step on it (its held-out evaluation once, at the last
step: a cost of the training script, not of a redraw). Both copies record memory
history, so the figure is the widgets' redraws in the browser, not the recording (which
benchmarks/viz_overhead.py --part tracking measures). Its training cell also times the
widgets' code inside the loop (the allocator's subscriber and the dashboard's update,
redraws and their messages to the page included): a direct figure that other programs
on a shared machine do not swamp, as they do the side-by-side one. The page is checked
to fit the 1280-pixel window (no picture ends past the notebook's column).

    python benchmarks/lab_browser_cost.py --rounds 3 [--lab 07|memory]

Run it alone: on two cores a second busy process wrecks the figures.
"""

from __future__ import annotations

import argparse
import json
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
INSIDE = re.compile(r"([0-9.]+)% of the loop in widget code")
WIDEST = """() => { const nb = document.querySelector('.jp-NotebookPanel .jp-Notebook');
  let widest = 0; for (const el of nb.querySelectorAll('.jp-OutputArea-output svg, '
    + '.jp-OutputArea-output img, .widget-box')) {
    widest = Math.max(widest, el.getBoundingClientRect().right); }
  return [widest, nb.getBoundingClientRect().right]; }"""

# the memory notebook: widgets over one step, drawn once, then training with the live ones
MEMORY_STEPS = 400
MEMORY_CELLS = [
    """import time

import numpy as np

import haelixe as hx
from haelixe.data.sine import random_batch
from haelixe.denoise import Denoiser, dashboard_hooks, train
from haelixe.nn import functional as F
from haelixe.optim import AdamW""",
    """hx.manual_seed(0)
model, rng = Denoiser(), np.random.default_rng(0)
opt = AdamW(model.parameters(), lr=1e-3)
noisy, clean = (hx.from_numpy(a) for a in random_batch(rng, 16))


def step():
    opt.zero_grad(set_to_none=False)
    loss = F.mse_loss(model(noisy), clean)
    loss.backward()
    opt.step()


step()
with hx.profile() as prof:
    step()
hx.record_memory_history(device="cpu")
step()
snap = hx.memory_snapshot("cpu")
display(hx.viz.KernelView(prof), hx.viz.MemorySnapshotView(snap))""",
    """mem = hx.viz.MemoryView("cpu", live=False{interval})
dash = hx.viz.TrainingDashboard(total_steps=STEPS, memory=mem{interval}, eval_every=STEPS,
                                **dashboard_hooks())
display(mem, dash)""",
    """times, inside = [], [0.0]
follow = mem._on_event  # (the allocator's subscriber, timed: the direct figure)


def timed_follow(event):
    t = time.perf_counter()
    follow(event)
    inside[0] += time.perf_counter() - t


def on_step(step, loss, lr, model):
    t = time.perf_counter()
    dash.update(step, loss, lr, model)
    times.append(time.perf_counter())
    if len(times) > 1:
        inside[0] += times[-1] - t


mem._on_event = timed_follow
mem.start()
t0 = time.perf_counter()
r = train(epochs=1, steps_per_epoch=STEPS, device="cpu", on_step=on_step)
dash.finish(r["model"])
hx.record_memory_history(False, device="cpu")
print(f"first step {times[0] - t0:.2f} s, then "
      f"{(len(times) - 1) / (times[-1] - times[0]):.1f} steps/s; "
      f"{100 * inside[0] / (times[-1] - times[0]):.2f}% of the loop in widget code")""",
]


def memory_notebook(interval: str) -> str:
    cells = [c.replace("STEPS", str(MEMORY_STEPS)).replace("{interval}", interval)
             for c in MEMORY_CELLS]
    return json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}",
                                  "metadata": {}, "outputs": [], "source": c}
                                 for i, c in enumerate(cells)],
                       "metadata": {"kernelspec": {"name": "python3",
                                                   "display_name": "Python 3",
                                                   "language": "python"}},
                       "nbformat": 4, "nbformat_minor": 5})


def copies(folder: Path, lab: str = "07") -> dict[str, Path]:
    out = {"live": folder / "live.ipynb", "held back": folder / "held.ipynb"}
    if lab == "memory":
        out["live"].write_text(memory_notebook(""))
        out["held back"].write_text(memory_notebook(", interval=3600.0"))
        return out
    src = LAB.read_text()
    if DASHBOARD not in src:
        raise SystemExit(f"{LAB.name}: the dashboard's cell changed; update DASHBOARD here")
    held = src.replace(DASHBOARD, DASHBOARD + " interval=3600.0,")
    out["live"].write_text(src)
    out["held back"].write_text(held)
    return out


def run_once(browser, base, token, path: Path) -> tuple[float, float, list, float | None]:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        jl.open_notebook(page, base, token, path.name)
        t0 = time.perf_counter()
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_timeout(1000)
        page.wait_for_function(DONE, timeout=600_000, polling=250)
        wall = time.perf_counter() - t0
        outputs = page.evaluate(OUTPUTS)
        m = RATE.search(outputs)
        if m is None:
            raise SystemExit(f"{path.name}: the training cell printed no steps/s:\n"
                             f"{outputs[-2000:]}")
        fit = page.evaluate(WIDEST)
        page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
        inside = INSIDE.search(outputs)
        return wall, float(m.group(2)), fit, inside and float(inside.group(1))
    finally:
        page.close()


def summary(values) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f} .. {max(values):.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lab", choices=["07", "memory"], default="07")
    args = ap.parse_args()
    if jl.CHROMIUM is None:
        raise SystemExit(jl.SKIP_REASON)
    from playwright.sync_api import sync_playwright

    scratch = Path(tempfile.mkdtemp(prefix="hx-browser-cost-"))
    labs = scratch / "labs"
    labs.mkdir()
    notebooks = copies(labs, args.lab)
    walls = {k: [] for k in notebooks}
    rates = {k: [] for k in notebooks}
    inside = []
    with jl.running_jupyterlab(labs, scratch / "jl") as (base, token), \
            sync_playwright() as p:
        browser = jl.launch_chromium(p)
        for r in range(args.rounds):
            order = list(notebooks) if r % 2 == 0 else list(reversed(notebooks))
            for kind in order:
                wall, rate, (widest, column), share = run_once(browser, base, token,
                                                               notebooks[kind])
                walls[kind].append(wall)
                rates[kind].append(rate)
                if kind == "live" and share is not None:
                    inside.append(share)
                print(f"round {r + 1} {kind:>10}: Run All {wall:5.1f} s, "
                      f"training {rate:5.1f} steps/s; widest picture ends at "
                      f"{widest:.0f} px, the column at {column:.0f} px"
                      f"{'' if widest <= column + 1 else ' (does not fit)'}", flush=True)
        browser.close()
    print()
    for kind in notebooks:
        print(f"{kind:>10}: Run All {summary(walls[kind])} s; training "
              f"{summary(rates[kind])} steps/s")
    share = [1 - live / held for live, held in zip(rates["live"], rates["held back"])]
    print(f"the live widgets' share of the training loop: "
          f"{100 * statistics.median(share):.1f}% [{100 * min(share):.1f} .. "
          f"{100 * max(share):.1f}] (per round, live against held back)")
    if inside:  # (other programs slow both parts alike: this stays meaningful then)
        print(f"direct: {summary(inside)}% of the live loop ran widget code (the "
              f"allocator's subscriber and the dashboard's update, redraws included)")


if __name__ == "__main__":
    main()
