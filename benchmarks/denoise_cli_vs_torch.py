"""The denoiser app (``python -m haelixe.denoise``) against a PyTorch script doing the
same work per step, each in a fresh process, side by side.

Per step both draw a fresh batch (haelixe.data.sine.SineTask, batch 16), zero the
gradients, run forward, MSE, backward and an AdamW step, and read ``loss.item()``; the
learning rate is cosine-annealed per epoch in both. Each reports steps/s over the steps
after the first and the time to the first step; the two alternate run by run, and the
table gives medians with ranges.

    python benchmarks/denoise_cli_vs_torch.py [--runs 4] [--epochs 10] [--steps-per-epoch 50]
    python benchmarks/denoise_cli_vs_torch.py --busy   # beside a CPU-bound process
    python benchmarks/denoise_cli_vs_torch.py --device gpu   # the app on the GPU
                                                             # against PyTorch CUDA
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

from neighbour import busy_neighbour, load_note, median, median_range

HERE = os.path.dirname(os.path.abspath(__file__))


def torch_worker(epochs: int, steps_per_epoch: int, seed: int, device: str = "cpu") -> dict:
    """The PyTorch side, run in its own process: the app's loop, step for step (on
    CUDA for ``device`` gpu, TF32 off: float32 products as Haelixe's)."""
    start = time.perf_counter()
    import torch
    from denoiser_vs_torch import torch_denoiser

    from haelixe.data.sine import SineTask

    cuda = device == "gpu"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(seed)
    data = SineTask("random", None, seed)
    model, opt = torch_denoiser(32, "cuda" if cuda else "cpu")
    lr_max, lr_min = 1e-3, 5e-5
    first = None
    for epoch in range(epochs):
        for group in opt.param_groups:
            group["lr"] = lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * epoch
                                                                          / epochs))
        for _ in range(steps_per_epoch):
            noisy, clean = data.batch()
            x, y = torch.from_numpy(noisy), torch.from_numpy(clean)
            if cuda:
                x, y = x.to("cuda"), y.to("cuda")
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            loss.item()
            if first is None:
                first = time.perf_counter()
    end = time.perf_counter()
    return {"steps_per_sec": (epochs * steps_per_epoch - 1) / (end - first),
            "first_step_s": first - start}


def run_haelixe(epochs: int, steps_per_epoch: int, device: str = "cpu") -> dict:
    out = subprocess.run([sys.executable, "-m", "haelixe.denoise", "--task", "random",
                          "--epochs", str(epochs), "--steps-per-epoch", str(steps_per_epoch),
                          "--device", device, "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_torch(epochs: int, steps_per_epoch: int, device: str = "cpu") -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-worker",
                          "--epochs", str(epochs), "--steps-per-epoch", str(steps_per_epoch),
                          "--device", device],
                         capture_output=True, text=True, check=True, cwd=HERE)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--steps-per-epoch", type=int, default=50)
    p.add_argument("--busy", action="store_true",
                   help="time beside a CPU-bound neighbour process")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                   help="gpu: the app on its WGSL backend (its step captured and replayed) "
                        "against the script on PyTorch CUDA")
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_worker:
        print(json.dumps(torch_worker(args.epochs, args.steps_per_epoch, 0, args.device)))
        return
    res = {"haelixe": [], "pytorch": []}
    with busy_neighbour(args.busy):
        for _ in range(args.runs):
            res["haelixe"].append(run_haelixe(args.epochs, args.steps_per_epoch, args.device))
            res["pytorch"].append(run_torch(args.epochs, args.steps_per_epoch, args.device))
    print(f"denoiser CLI vs a PyTorch script on the {args.device}, batch 16, {args.epochs} x "
          f"{args.steps_per_epoch} steps, {args.runs} alternating runs"
          f"{', beside a CPU-bound process' if args.busy else ''} ({load_note()})")
    print("            steps/s after the first: median [range]   first step (s): median")
    for name, runs in res.items():
        print(f"  {name:8s} {median_range([r['steps_per_sec'] for r in runs])}"
              f"   {median([r['first_step_s'] for r in runs]):.2f}")
    ratios = [h["steps_per_sec"] / t["steps_per_sec"]
              for h, t in zip(res["haelixe"], res["pytorch"])]
    print(f"  ratio haelixe / pytorch: {median(ratios):.2f}x "
          f"[{min(ratios):.2f} .. {max(ratios):.2f}]")


if __name__ == "__main__":
    main()
