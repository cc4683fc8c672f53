"""What the live widgets cost: denoiser training steps/s with a TrainingDashboard and a
MemoryView attached vs without, side by side in one run.

The two arms run in alternating rounds (so machine noise hits both alike) on the same
seed and data; each round is a fresh ``haelixe.denoise.train`` of ``--steps`` steps. The
attached arm calls ``dash.update`` every step (which also marks the memory timeline) and
its MemoryView follows every allocator event; their closing redraw (``finish``) comes
after the loop and is reported apart.

Two figures per arm, each the median over rounds:

- wall: steps / seconds from the first to the last step, everything included;
- steady: 1 / (median time of one step + redraw seconds per step), the redraws timed
  by the widgets' own throttles. On a shared machine other programs stretch random steps
  by tens of milliseconds; the median step ignores that noise while the redraw term keeps
  every millisecond the widgets spend drawing.

On the CPU, tensors live in numpy memory, so the MemoryView of the "cpu" allocator
receives no events; on the GPU every buffer comes from the slab allocator and the view
records each of its events. Headless, widget updates go nowhere; in a notebook each
redraw also sends the new picture to the browser (once per redraw, not per step).

    python benchmarks/viz_overhead.py [--steps 1000] [--rounds 4] [--device cpu|gpu|both]
"""

from __future__ import annotations

import argparse
import statistics
import time

import haelixe as hx
from haelixe.denoise import train


class Clock:
    """``on_step`` for both arms: the time at every step (calling ``inner`` first)."""

    def __init__(self, inner=None):
        self.inner = inner
        self.times = []

    def __call__(self, step, loss, lr, model):
        if self.inner is not None:
            self.inner(step, loss, lr, model)
        self.times.append(time.perf_counter())

    def wall_rate(self) -> float:
        return (len(self.times) - 1) / (self.times[-1] - self.times[0])

    def median_step(self) -> float:
        t = self.times
        return statistics.median(b - a for a, b in zip(t, t[1:]))


def run_arm(attached: bool, steps: int, device: str) -> dict:
    if not attached:
        clock = Clock()
        train(epochs=1, steps_per_epoch=steps, device=device, on_step=clock)
        return {"wall": clock.wall_rate(), "steady": 1 / clock.median_step()}
    mem = hx.viz.MemoryView(device)
    dash = hx.viz.TrainingDashboard(total_steps=steps, memory=mem)
    throttles = (dash.throttle, mem.throttle)
    drawn = [(t.redraws, t.total_cost) for t in throttles]
    clock = Clock(dash.update)
    r = train(epochs=1, steps_per_epoch=steps, device=device, on_step=clock)
    redraws = sum(t.redraws - n for t, (n, _) in zip(throttles, drawn))
    draw_s = sum(t.total_cost - c for t, (_, c) in zip(throttles, drawn))
    t0 = time.perf_counter()
    dash.finish(r["model"])
    mem.refresh()
    closing = time.perf_counter() - t0
    mem.close()
    steady = 1 / (clock.median_step() + draw_s / (steps - 1))
    return {"wall": clock.wall_rate(), "steady": steady, "closing_s": closing,
            "redraws": redraws, "draw_s": draw_s, "events": mem.timeline.last_seq}


def bench(device: str, steps: int, rounds: int) -> dict:
    print(f"\n== denoiser on {device}: {steps} steps per round, {rounds} rounds ==")
    run_arm(False, min(steps, 20), device)  # warm-up: imports, kernels, caches
    run_arm(True, min(steps, 20), device)
    bare, live = [], []
    for k in range(rounds):
        order = (False, True) if k % 2 == 0 else (True, False)
        for attached in order:
            r = run_arm(attached, steps, device)
            (live if attached else bare).append(r)
            extra = ""
            if attached:
                extra = (f"  {r['redraws']} redraws in the loop ({r['draw_s']:.2f} s), "
                         f"{r['events']} allocator events")
            print(f"round {k}  {'attached' if attached else 'bare    '}  wall "
                  f"{r['wall']:7.1f} steps/s  steady {r['steady']:7.1f} steps/s{extra}",
                  flush=True)
    ratios = {}
    for key in ("wall", "steady"):
        b = statistics.median(r[key] for r in bare)
        a = statistics.median(r[key] for r in live)
        ratios[key] = a / b
        print(f"{key:6}: bare {b:7.1f} steps/s  attached {a:7.1f} steps/s  ratio "
              f"{a / b:.3f}  (slowdown {100 * (1 - a / b):+.1f}%)")
    print(f"closing redraw after the loop: "
          f"{statistics.median(r['closing_s'] for r in live):.2f} s, once per run")
    return ratios


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=1000,
                   help="steps per round (long enough for live redraws to happen)")
    p.add_argument("--gpu-steps", type=int, default=40,
                   help="steps per round on the GPU (a software adapter is slow)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--device", choices=["cpu", "gpu", "both"], default="cpu")
    args = p.parse_args(argv)
    ratios = {}
    if args.device in ("cpu", "both"):
        ratios["cpu"] = bench("cpu", args.steps, args.rounds)
    if args.device in ("gpu", "both"):
        ratios["gpu"] = bench("gpu", args.gpu_steps, args.rounds)
    print("\nsteps/s ratio, attached / bare (goal: above 0.95): " + "; ".join(
        f"{d}: wall {r['wall']:.3f}, steady {r['steady']:.3f}" for d, r in ratios.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
