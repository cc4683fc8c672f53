"""The denoiser's training step in Haelixe and in PyTorch (CPU), side by side in one run.

Same model (Linear(1,64) -> pre-norm TransformerBlock(64, 4) with RoPE and a GELU MLP ->
RMSNorm -> Linear(64,1)), same data, same AdamW. Each framework runs a warm-up, then the
two are timed in alternating rounds so that machine noise hits both alike; each round
gives both speeds and their ratio, reported as medians with their ranges.

    python benchmarks/denoiser_vs_torch.py [--batch-size 16] [--steps 200] [--rounds 5]
    python benchmarks/denoiser_vs_torch.py --busy       # beside a CPU-bound process
    python benchmarks/denoiser_vs_torch.py --captured   # + the step replayed (hx.capture)
    python benchmarks/denoiser_vs_torch.py --device gpu   # WGSL vs PyTorch CUDA eager
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from neighbour import busy_neighbour, load_note, median, median_range
from torch_twins import rope_and_block  # a neighbour in benchmarks/

import haelixe as hx
from haelixe.data.sine import random_batch
from haelixe.denoise import Denoiser
from haelixe.nn import functional as F
from haelixe.optim import AdamW


def haelixe_train_step(device="cpu", captured=False):
    """The denoiser's training step in Haelixe as the app runs it: ``step(x, y)`` gives
    the loss tensor; ``captured``: recorded once and replayed (hx.capture), with the
    capturable AdamW that needs (host batches then go straight into its inputs)."""
    hx.manual_seed(0)
    model = Denoiser().to(device)
    opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, capturable=captured)

    def train_step(x, y):
        opt.zero_grad(set_to_none=False)  # as the denoiser app: gradients in place
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return hx.capture(train_step, device=device) if captured else train_step


def haelixe_stepper(batches, device="cpu", captured=False):
    """``run(n)``: n training steps over the batches (device tensors)."""
    step = haelixe_train_step(device, captured)
    data = [(hx.from_numpy(x).to(device), hx.from_numpy(y).to(device)) for x, y in batches]

    def run(n):
        for i in range(n):
            loss = step(*data[i % len(data)])
        return loss.item()

    return run


def torch_denoiser(seq: int, device="cpu"):
    """The denoiser and its AdamW in PyTorch: (model, optimizer)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    _, Block = rope_and_block()
    model = nn.Sequential(nn.Linear(1, 64), Block(64, 4, seq),
                          nn.RMSNorm(64, eps=1e-6), nn.Linear(64, 1)).to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)


def torch_stepper(batches, device="cpu"):
    import torch

    model, opt = torch_denoiser(batches[0][0].shape[1], device)
    data = [(torch.from_numpy(x).to(device), torch.from_numpy(y).to(device))
            for x, y in batches]

    def run(n):
        for i in range(n):
            loss = torch_train_step(model, opt, *data[i % len(data)])
        return loss.item()

    return run


def torch_train_step(model, opt, x, y):
    """zero_grad, forward, MSE loss, backward, AdamW step; returns the loss tensor."""
    import torch

    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--busy", action="store_true",
                   help="time beside a CPU-bound neighbour process")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                   help="gpu: Haelixe on its WGSL backend vs PyTorch CUDA eager")
    p.add_argument("--captured", action="store_true",
                   help="also time Haelixe's step captured and replayed (hx.capture)")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    batches = [random_batch(rng, args.batch_size) for _ in range(50)]
    runners = {"haelixe": haelixe_stepper(batches, args.device)}
    if args.captured:
        runners["captured"] = haelixe_stepper(batches, args.device, captured=True)
    try:
        import torch

        if args.device == "gpu" and not torch.cuda.is_available():
            raise ImportError
        runners["pytorch"] = torch_stepper(batches, "cuda" if args.device == "gpu" else "cpu")
    except ImportError:
        print(f"PyTorch ({'CUDA' if args.device == 'gpu' else 'CPU'}) not available: timing "
              f"Haelixe alone")
    for run in runners.values():
        run(20)  # warm-up: caches, allocator, lazy imports, kernel compilation
    from haelixe.backends import cpu_jit

    cpu_jit.wait()  # the steady state: the compiled CPU kernels loaded (first_step.py times
    # the climb there)
    speeds = {k: [] for k in runners}
    with busy_neighbour(args.busy):
        for _ in range(args.rounds):
            for name, run in runners.items():
                t0 = time.perf_counter()
                run(args.steps)
                speeds[name].append(args.steps / (time.perf_counter() - t0))
    print(f"denoiser training step on {args.device}, batch {args.batch_size} x 32, "
          f"{args.rounds} alternating rounds of {args.steps} steps"
          f"{', beside a CPU-bound process' if args.busy else ''} ({load_note()})")
    print("  steps/s: median [range]")
    for name in runners:
        print(f"  {name:8s} {median_range(speeds[name])}")
    if "pytorch" in speeds:
        for name in ("haelixe", "captured"):
            if name in speeds:
                ratios = [h / t for h, t in zip(speeds[name], speeds["pytorch"])]
                print(f"  ratio {name} / pytorch: {median(ratios):.2f}x "
                      f"[{min(ratios):.2f} .. {max(ratios):.2f}]")


if __name__ == "__main__":
    main()
