"""The denoiser's training step as real training runs it: fresh data uploaded and the loss
read back (``loss.item()``) every step. Haelixe eager, Haelixe replaying a captured step
(``hx.capture``), and PyTorch CUDA eager (when torch sees a GPU), side by side in one run.

    python benchmarks/gpu_denoiser_replay.py                      # 5 rounds of 200 steps
    python benchmarks/gpu_denoiser_replay.py --rounds 9 --steps 300 --batch-size 16
    python benchmarks/gpu_denoiser_replay.py --steps 3 --rounds 2 --batch-size 2  # a check

Each mode warms up (pipelines compiled, allocator bins filled, the capture recorded),
then the modes take turns, one round of ``--steps`` steps each, so machine noise hits them
alike. Per mode: steps/s as the median and the range over rounds, and the per-step
counters of the backend (dispatches, submits, uploads, downloads). The batches are drawn
on the host beforehand and cycled; every step uploads its batch. PyTorch runs with TF32
off, as Haelixe's float32 kernels.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import haelixe  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import haelixe as hx
from haelixe.data.sine import random_batch

COUNTERS = ("dispatches", "submits", "uploads", "downloads")


def haelixe_step(mode: str):
    """One step (host batch in, loss value out) of the eager or the captured denoiser."""
    from denoiser_vs_torch import haelixe_train_step

    step = haelixe_train_step("gpu", captured=(mode == "replay"))
    if mode == "replay":
        return lambda noisy, clean: step(noisy, clean).item()
    return lambda noisy, clean: step(hx.from_numpy(noisy).to("gpu"),
                                     hx.from_numpy(clean).to("gpu")).item()


def torch_step(seq: int):
    import torch
    from denoiser_vs_torch import torch_denoiser, torch_train_step

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model, opt = torch_denoiser(seq, "cuda")
    return lambda noisy, clean: torch_train_step(
        model, opt, torch.from_numpy(noisy).to("cuda"), torch.from_numpy(clean).to("cuda")
    ).item()


def run_round(step, batches, start: int, steps: int) -> float:
    """steps/s over ``steps`` calls."""
    t0 = time.perf_counter()
    for i in range(start, start + steps):
        step(*batches[i % len(batches)])
    return steps / (time.perf_counter() - t0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=200, help="steps per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=20, help="steps before timing")
    p.add_argument("--no-torch", action="store_true", help="time Haelixe only")
    p.add_argument("--json", action="store_true", help="end with one JSON line")
    args = p.parse_args(argv)

    from gpu_dispatch import gpu_backend  # a neighbour in benchmarks/

    be, info = gpu_backend()
    rng = np.random.default_rng(0)
    batches = [random_batch(rng, args.batch_size) for _ in range(64)]
    steps = {"eager": haelixe_step("eager"), "replay": haelixe_step("replay")}
    if not args.no_torch:
        try:
            import torch

            if torch.cuda.is_available():
                steps["pytorch"] = torch_step(batches[0][0].shape[1])
            else:
                print("PyTorch sees no CUDA device: timing Haelixe alone")
        except ImportError:
            print("PyTorch is not installed: timing Haelixe alone")

    counters = {}
    for name, step in steps.items():
        run_round(step, batches, 0, max(args.warmup, 4))  # the capture needs 3 calls
        if name != "pytorch":  # the counters of one more step
            be.reset_stats()
            step(*batches[0])
            s = be.stats()
            counters[name] = {k: s[k] for k in COUNTERS}
    rates = {name: [] for name in steps}
    for r in range(args.rounds):
        for name, step in steps.items():
            rates[name].append(run_round(step, batches, r * args.steps, args.steps))

    print(f"denoiser training step, batch {args.batch_size} x {batches[0][0].shape[1]}, "
          f"loss.item() and a fresh upload every step; {args.rounds} rounds of "
          f"{args.steps} steps")
    summary = {}
    for name, rs in rates.items():
        med = statistics.median(rs)
        summary[name] = {"median": med, "min": min(rs), "max": max(rs),
                         **counters.get(name, {})}
        per = counters.get(name)
        extra = ("   per step: " + ", ".join(f"{k} {per[k]}" for k in COUNTERS)) if per else ""
        print(f"  {name:8s} {med:8.1f} steps/s  (range {min(rs):.1f} - {max(rs):.1f}){extra}")
    eager = summary["eager"]["median"]
    print(f"  replay / eager: {summary['replay']['median'] / eager:.2f}x")
    if "pytorch" in summary:
        torch_rate = summary["pytorch"]["median"]
        for name in ("eager", "replay"):
            print(f"  {name} / pytorch: {summary[name]['median'] / torch_rate:.2f}x")
    if args.json:
        print(json.dumps({"adapter": info["device"], "batch_size": args.batch_size,
                          **summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
