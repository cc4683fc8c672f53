"""What the live widgets cost: denoiser training steps/s with a TrainingDashboard and a
MemoryView attached vs without, side by side in one run.

The two arms run in alternating rounds (so machine noise hits both alike) on the same
seed and data; each round is a fresh ``haelixe.denoise.train`` of ``--steps`` steps. The
attached arm calls ``dash.update`` every step (which also marks the memory timeline, and
every ``--eval-every`` steps evaluates the held-out set through the denoiser's
``dashboard_hooks``) and its MemoryView follows every allocator event; their closing
redraw (``finish``) comes after the loop and is reported apart.

Two figures:

- side by side: steps/s from the first to the last step of the loop, everything
  included, attached over bare, for the best round of each arm (noise from other
  programs only ever slows a round down; the medians are printed too), and the same by
  the main thread's CPU time;
- direct: within the attached rounds, the share of the loop's wall time spent inside
  the widgets' code (``dash.update`` and the allocator subscriber, redraws included),
  timed around each call. Other programs on a shared machine slow both parts alike, so
  this share stays meaningful when the side-by-side figure is swamped by their noise;
  it misses only indirect costs (caches, garbage collection), which the side-by-side
  figure includes.

On the CPU, tensors live in numpy memory, so the MemoryView of the "cpu" allocator
receives no events; on the GPU every buffer comes from the slab allocator and the view
records each of its events. Headless, widget updates go nowhere; in a notebook each
redraw also sends the new picture to the browser (once per redraw, not per step).

    python benchmarks/viz_overhead.py [--steps 3000] [--rounds 3] [--device cpu|gpu|both]
"""

from __future__ import annotations

import argparse
import statistics
import time

import haelixe as hx
from haelixe.denoise import dashboard_hooks, train


class Clock:
    """``on_step`` for both arms: the time at every step; with ``inner`` (the dashboard)
    also the seconds spent inside it after the first step."""

    def __init__(self, inner=None):
        self.inner = inner
        self.times = []
        self.cpu = []
        self.inner_s = 0.0

    def __call__(self, step, loss, lr, model):
        if self.inner is not None:
            t = time.perf_counter()
            self.inner(step, loss, lr, model)
            if self.times:
                self.inner_s += time.perf_counter() - t
        self.times.append(time.perf_counter())
        self.cpu.append(time.thread_time())

    def cpu_rate(self) -> float:
        return (len(self.cpu) - 1) / (self.cpu[-1] - self.cpu[0])

    def loop_s(self) -> float:
        return self.times[-1] - self.times[0]

    def wall_rate(self) -> float:
        return (len(self.times) - 1) / self.loop_s()


def run_arm(attached: bool, steps: int, device: str, eval_every: int) -> dict:
    if not attached:
        clock = Clock()
        train(epochs=1, steps_per_epoch=steps, device=device, on_step=clock)
        return {"wall": clock.wall_rate(), "cpu": clock.cpu_rate()}
    mem = hx.viz.MemoryView(device, live=False)
    in_events = [0.0]
    record = mem._on_event

    def timed_record(ev):  # the allocator subscriber, timed
        t = time.perf_counter()
        record(ev)
        in_events[0] += time.perf_counter() - t

    mem._on_event = timed_record
    mem.start()
    dash = hx.viz.TrainingDashboard(total_steps=steps, memory=mem, eval_every=eval_every,
                                    **dashboard_hooks())
    clocks = (dash.clock, mem.clock)
    drawn = [t.redraws for t in clocks]
    clock = Clock(dash.update)
    r = train(epochs=1, steps_per_epoch=steps, device=device, on_step=clock)
    redraws = sum(t.redraws - n for t, n in zip(clocks, drawn))
    t0 = time.perf_counter()
    dash.finish(r["model"])
    mem.refresh()
    closing = time.perf_counter() - t0
    mem.close()
    inside = clock.inner_s + in_events[0]
    return {"wall": clock.wall_rate(), "cpu": clock.cpu_rate(),
            "inside": inside / clock.loop_s(),
            "closing_s": closing, "redraws": redraws, "events": mem.timeline.last_seq}


def bench(device: str, steps: int, rounds: int, eval_every: int) -> dict:
    print(f"\n== denoiser on {device}: {steps} steps per round, {rounds} rounds, held-out "
          f"evaluation every {eval_every} steps ==")
    run_arm(False, min(steps, 20), device, eval_every)  # warm-up: imports, kernels, caches
    run_arm(True, min(steps, 20), device, eval_every)
    bare, live = [], []
    for k in range(rounds):
        order = (False, True) if k % 2 == 0 else (True, False)
        for attached in order:
            r = run_arm(attached, steps, device, eval_every)
            (live if attached else bare).append(r)
            extra = ""
            if attached:
                extra = (f"  {100 * r['inside']:.2f}% of the loop inside widget code, "
                         f"{r['redraws']} redraws, {r['events']} allocator events")
            print(f"round {k}  {'attached' if attached else 'bare    '}  "
                  f"{r['wall']:7.1f} steps/s ({r['cpu']:7.1f} by main-thread CPU time)"
                  f"{extra}", flush=True)
    best = max(r["wall"] for r in live) / max(r["wall"] for r in bare)
    med = statistics.median(r["wall"] for r in live) / statistics.median(r["wall"] for r in bare)
    cpu = max(r["cpu"] for r in live) / max(r["cpu"] for r in bare)
    inside = statistics.median(r["inside"] for r in live)
    print(f"side by side: best rounds bare {max(r['wall'] for r in bare):.1f} steps/s, "
          f"attached {max(r['wall'] for r in live):.1f} steps/s, ratio {best:.3f} "
          f"(medians: {med:.3f}; main-thread CPU time, best rounds: {cpu:.3f})")
    print(f"direct: {100 * inside:.2f}% of the attached loop runs widget code (recording, "
          f"redraw-clock checks, held-out evaluation, redraws), ratio {1 - inside:.3f}")
    print(f"closing redraw after the loop: "
          f"{statistics.median(r['closing_s'] for r in live):.2f} s, once per run")
    return {"side_by_side": best, "median": med, "direct": 1 - inside}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=3000,
                   help="steps per round (long enough for live redraws to happen)")
    p.add_argument("--gpu-steps", type=int, default=600,
                   help="steps per round on the GPU (fewer on a slow software adapter)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--eval-every", type=int, default=500,
                   help="steps between held-out evaluations (the dashboard's interval)")
    p.add_argument("--device", choices=["cpu", "gpu", "both"], default="cpu")
    args = p.parse_args(argv)
    ratios = {}
    if args.device in ("cpu", "both"):
        ratios["cpu"] = bench("cpu", args.steps, args.rounds, args.eval_every)
    if args.device in ("gpu", "both"):
        ratios["gpu"] = bench("gpu", args.gpu_steps, args.rounds, args.eval_every)
    print("\nsteps/s ratio, attached / bare (goal: above 0.95): " + "; ".join(
        f"{d}: side by side {r['side_by_side']:.3f} (medians {r['median']:.3f}), direct "
        f"{r['direct']:.3f}"
        for d, r in ratios.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
