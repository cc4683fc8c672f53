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

The tracking part (``--part tracking``) times an eager denoiser step (forward, backward,
AdamW) in five arms, in many short rounds, rotating their order each round: off, off
again (the noise floor: two arms of the same code), memory history recorded
(``hx.record_memory_history``: the engine tells its one observer of each tensor and
node, and each allocation walks up to its user's frames), inside ``hx.profile()``
(every backend call wrapped, and on the GPU each dispatch timed on the device's clock)
and inside ``hx.profile(device_times=False)`` (the same with host times: what the
timestamps cost is the difference). The first
"off" round runs before either was ever on; the later ones after each was switched off
again, so "off" also shows that stopping puts everything back. Figures: ms per step,
and each arm over the same round's "off": the median of the rounds' ratios with their
quartiles and range (on a virtual machine a slow spell of a few seconds slows every
arm of its round alike: the ratio within a round cancels it, where bests and medians
across rounds do not).

    python benchmarks/viz_overhead.py [--steps 3000] [--rounds 3] [--device cpu|gpu|both]
    python benchmarks/viz_overhead.py --part tracking [--tracking-rounds 40]
        [--tracking-steps 10] [--device both]
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


def _eager_step(device: str):
    """One eager denoiser training step on a fixed batch, and the step function."""
    import numpy as np

    from haelixe.data.sine import random_batch
    from haelixe.denoise import Denoiser
    from haelixe.nn import functional as F
    from haelixe.optim import AdamW

    hx.manual_seed(0)
    model = Denoiser().to(device)
    opt = AdamW(model.parameters(), lr=1e-3)
    noisy, clean = random_batch(np.random.default_rng(0), 16)
    x, y = hx.from_numpy(noisy).to(device), hx.from_numpy(clean).to(device)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()  # (a read-back: on the GPU the step's work is done)

    return step


def _warm(step) -> None:
    """Steps until every compiled kernel the step uses has loaded (they compile in the
    background once hot; until then their composed forms run) and slabs are cached."""
    from haelixe.backends import cpu_jit

    for _ in range(3):
        for _ in range(20):
            step()
        cpu_jit.wait()


def _time_steps(step, steps: int, arm: str, device: str) -> tuple[float, float]:
    """(wall, process CPU) seconds per step of ``steps`` steps in ``arm``."""
    if arm == "history":
        hx.record_memory_history(device=device)
    prof = hx.profile(device_times=arm == "profile") if arm.startswith("profile") else None
    try:
        if prof is not None:
            prof.__enter__()
        step()  # (the arm's first step: wrappers made, entries started)
        t, c = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        return (time.perf_counter() - t) / steps, (time.process_time() - c) / steps
    finally:
        if prof is not None:
            prof.__exit__(None, None, None)
        if arm == "history":
            hx.record_memory_history(False, device=device)


TRACKING_ARMS = ("off", "off again", "history", "profile", "profile, host times")


def _quartiles(values) -> tuple[float, float, float]:
    v = sorted(values)
    q = len(v) // 4
    return v[q], statistics.median(v), v[-q - 1]


def bench_tracking(device: str, steps: int, rounds: int) -> dict:
    """Each arm over "off" of the same round: many short rounds, the arms in rotating
    order within each, so a slow spell of the machine (a virtual machine's neighbours,
    clock changes) slows the arms of its round alike and cancels in their ratio."""
    print(f"\n== tracking on an eager denoiser step on {device}: {rounds} rounds of "
          f"{steps} steps per arm ==")
    step = _eager_step(device)
    _warm(step)
    times: dict = {arm: [] for arm in TRACKING_ARMS}
    cpu: dict = {arm: [] for arm in TRACKING_ARMS}
    for k in range(rounds):
        turn = k % len(TRACKING_ARMS)
        for arm in TRACKING_ARMS[turn:] + TRACKING_ARMS[:turn]:
            wall, used = _time_steps(step, steps, arm, device)
            times[arm].append(wall)
            cpu[arm].append(used)
    out = {}
    for arm in TRACKING_ARMS:
        ratios = [t / off for t, off in zip(times[arm], times["off"])]
        cpu_ratios = [t / off for t, off in zip(cpu[arm], cpu["off"])]
        lo, med, hi = _quartiles(ratios)
        out[arm] = (med, statistics.median(cpu_ratios))
        print(f"{arm:19s} {1e3 * statistics.median(times[arm]):.2f} ms/step (median); over "
              f"off in the same round: median {med:.3f} [quartiles {lo:.3f}-{hi:.3f}, range "
              f"{min(ratios):.3f}-{max(ratios):.3f}]; by process CPU time {out[arm][1]:.3f}")
    return out


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
    p.add_argument("--part", choices=["widgets", "tracking", "both"], default="widgets",
                   help="the widgets' cost, memory history's and the profiler's, or both")
    p.add_argument("--tracking-steps", type=int, default=10,
                   help="eager steps per arm and round in the tracking part")
    p.add_argument("--tracking-rounds", type=int, default=40,
                   help="rounds of the tracking part")
    args = p.parse_args(argv)
    devices = ["cpu", "gpu"] if args.device == "both" else [args.device]
    if args.part in ("tracking", "both"):
        tracked = {d: bench_tracking(d, args.tracking_steps, args.tracking_rounds if d == "cpu"
                                     else max(args.tracking_rounds // 4, 5))
                   for d in devices}
        print("\nan eager step over tracking off, medians of the rounds' ratios, wall "
              "(process CPU) (goal: off again ~1.00, history and profile under 1.10): " +
              "; ".join(
                  f"{d}: " + ", ".join(f"{a} {r[a][0]:.3f} ({r[a][1]:.3f})"
                                       for a in TRACKING_ARMS[1:])
                  for d, r in tracked.items()))
        if args.part == "tracking":
            return 0
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
