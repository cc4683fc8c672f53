"""Convolutions in Haelixe and in PyTorch, side by side in one run.

1. The lab's small CNN (lab 08: conv 3x3 -> batch norm -> ReLU -> max-pool, twice, then
   Linear, on 8x8 one-channel images, batch 64) trained with AdamW: both frameworks start
   from the same weights (Haelixe's, loaded into PyTorch through the state dict) and see
   the same batches; the step time is the median (and range) over rounds that alternate
   between the two, and the losses after the last step are compared (within 1%).
2. conv2d forward + backward at a ResNet-like layer: batch 32, 64 -> 64 channels, 56x56,
   3x3, padding 1, timed the same way.

    python benchmarks/conv_vs_torch.py                  # CPU
    python benchmarks/conv_vs_torch.py --device gpu     # against PyTorch CUDA (TF32 off)
    python benchmarks/conv_vs_torch.py --quick          # small sizes: checks it runs
    python benchmarks/conv_vs_torch.py --threads 1      # both frameworks on one thread

The ratio printed is Haelixe's speed over PyTorch's (above 1: Haelixe is faster): the
median over rounds of the two frameworks' times in the same round, so a round slowed by
other work on the machine slows both. On a shared machine read the ranges too, and the
load average printed first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import haelixe as hx
from haelixe import nn

TOLERANCE = 0.01  # relative difference allowed between the two frameworks' losses


def cnn(nn, channels=(16, 32), classes=10, image=8):
    """The lab's CNN, written once against either framework's ``nn`` (haelixe.nn or
    torch.nn: the same layer names, so the same state-dict names)."""
    c1, c2 = channels
    return nn.Sequential(
        nn.Conv2d(1, c1, 3, padding=1), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(c2 * (image // 4) ** 2, classes))


def _batches(steps, batch, image, classes, seed):
    """Fixed batches of images whose class is a pattern plus noise (learnable)."""
    rng = np.random.default_rng(seed)
    patterns = rng.standard_normal((classes, 1, image, image)).astype(np.float32)
    out = []
    for _ in range(steps):
        y = rng.integers(0, classes, batch)
        x = patterns[y] + 0.8 * rng.standard_normal((batch, 1, image, image))
        out.append((x.astype(np.float32), y.astype(np.int64)))
    return out


class HaelixeCNN:
    def __init__(self, device, seed):
        hx.manual_seed(seed)
        self.device = device
        self.model = cnn(nn).to(device)
        self.opt = hx.optim.AdamW(self.model.parameters(), lr=3e-3, weight_decay=0.01)

    def state(self):
        return {k: v.cpu().numpy().copy() for k, v in self.model.state_dict().items()}

    def step(self, x, y) -> float:
        logits = self.model(hx.tensor(x, device=self.device))
        loss = nn.functional.cross_entropy(logits, hx.tensor(y, device=self.device))
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


class TorchCNN:
    def __init__(self, state, device):
        import torch

        self.torch, self.device = torch, "cuda" if device == "gpu" else "cpu"
        self.model = cnn(torch.nn)
        self.model.load_state_dict({k: torch.tensor(v) for k, v in state.items()})
        self.model.to(self.device)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=3e-3, weight_decay=0.01)

    def step(self, x, y) -> float:
        torch = self.torch
        logits = self.model(torch.tensor(x, device=self.device))
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(y, device=self.device))
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


def _torch(device):
    """PyTorch set up for a fair comparison (full fp32 on CUDA), or None."""
    try:
        import torch
    except ImportError:
        return None
    if device == "gpu":
        if not torch.cuda.is_available():
            return None
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return torch


def _settle():
    """Wait for the compiled CPU kernels the warm-up asked for: they load on a
    background thread of low priority, which a benchmark pinned to one busy core would
    otherwise time in their composed forms."""
    from haelixe.backends import cpu_jit

    cpu_jit.wait()


def cnn_steps(device="cpu", steps=60, rounds=5, seed=0, log=print) -> dict:
    """Train both CNNs on the same batches; per-round seconds per step and final losses."""
    ours = HaelixeCNN(device, seed)
    runs = {"haelixe": ours}
    if _torch(device) is not None:
        runs["pytorch"] = TorchCNN(ours.state(), device)
    else:
        log("PyTorch (for this device) not available: timing Haelixe alone")
    batches = _batches(steps + 1, 64, 8, 10, seed)
    losses = {name: [run.step(*batches[0])] for name, run in runs.items()}  # (warm-up)
    _settle()
    rest = batches[1:]
    chunks = [rest[i * len(rest) // rounds:(i + 1) * len(rest) // rounds]
              for i in range(rounds)]
    times = {name: [] for name in runs}
    for chunk in chunks:
        for name, run in runs.items():
            t0 = time.perf_counter()
            for x, y in chunk:
                losses[name].append(run.step(x, y))
            times[name].append((time.perf_counter() - t0) / max(len(chunk), 1))
    return {"times": times, "losses": losses}


def conv_layer(device="cpu", rounds=5, shape=(32, 64, 56, 56), log=print) -> dict:
    """Seconds per conv2d forward + backward (input and weight gradients), per round."""
    n, c, h, w = shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    k = (rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)

    xh = hx.tensor(x, device=device, requires_grad=True)
    kh = hx.tensor(k, device=device, requires_grad=True)
    gh = hx.tensor(g, device=device)

    def ours():
        xh.grad = kh.grad = None
        nn.functional.conv2d(xh, kh, padding=1).backward(gh)
        kh.grad.cpu().numpy()  # (waits for the device)

    fns = {"haelixe": ours}
    torch = _torch(device)
    if torch is not None:
        dev = "cuda" if device == "gpu" else "cpu"
        xt = torch.tensor(x, device=dev, requires_grad=True)
        kt = torch.tensor(k, device=dev, requires_grad=True)
        gt = torch.tensor(g, device=dev)

        def theirs():
            xt.grad = kt.grad = None
            torch.nn.functional.conv2d(xt, kt, padding=1).backward(gt)
            kt.grad.cpu()

        fns["pytorch"] = theirs
    for fn in fns.values():
        fn()  # (warm-up: first-touch of the buffers, kernel compilation)
    _settle()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {"times": times}


def _summary(ts) -> str:
    return f"{statistics.median(ts) * 1e3:8.1f} ms  (range {min(ts) * 1e3:.1f}-" \
           f"{max(ts) * 1e3:.1f})"


def report(title, times, log=print) -> float | None:
    log(title)
    for name, ts in times.items():
        log(f"  {name:8s} {_summary(ts)}")
    if "pytorch" not in times:
        return None
    rounds = [t / h for t, h in zip(times["pytorch"], times["haelixe"])]
    ratio = statistics.median(rounds)
    log(f"  Haelixe speed / PyTorch's: {ratio:.2f}x (median of the rounds' ratios; "
        f"range {min(rounds):.2f}-{max(rounds):.2f})")
    return ratio


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=60, help="CNN training steps (after one)")
    p.add_argument("--quick", action="store_true", help="small sizes: a check it runs")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for both frameworks (default: each one's own default)")
    args = p.parse_args(argv)
    if args.threads is not None:
        hx.set_num_threads(args.threads)
        torch = _torch(args.device)
        if torch is not None:
            torch.set_num_threads(args.threads)
    shape = (4, 8, 12, 12) if args.quick else (32, 64, 56, 56)
    steps = 6 if args.quick else args.steps
    rounds = 2 if args.quick else args.rounds
    torch = _torch(args.device)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") \
        else "unknown"
    print(f"device {args.device}, Haelixe {hx.get_num_threads()} threads, PyTorch "
          f"{torch.get_num_threads() if torch is not None else '-'}; load average {load} "
          f"on {os.cpu_count()} cores (a shared machine's timings are noisy)")
    cnn = cnn_steps(args.device, steps, rounds)
    report(f"lab CNN training step (batch 64, 8x8, AdamW), {steps} steps in {rounds} "
           f"rounds:", cnn["times"])
    ok = True
    if "pytorch" in cnn["losses"]:
        ours, theirs = (np.array(cnn["losses"][k]) for k in ("haelixe", "pytorch"))
        curve = float(np.max(np.abs(ours - theirs) / np.abs(theirs)))
        ok = curve <= TOLERANCE
        print(f"  loss after {steps + 1} steps: Haelixe {ours[-1]:.5f}, PyTorch "
              f"{theirs[-1]:.5f}; largest relative difference over the curve {curve:.2%} "
              f"({'within' if ok else 'beyond'} {TOLERANCE:.0%})")
    layer = conv_layer(args.device, rounds, shape)
    report(f"conv2d forward+backward {shape[0]}x{shape[1]}->{shape[1]}, {shape[2]}x"
           f"{shape[3]}, 3x3, padding 1:", layer["times"])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
