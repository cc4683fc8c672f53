"""Dispatch overhead of a small model on the GPU: the denoiser's training step.

    python benchmarks/gpu_dispatch.py                 # 20 measured steps
    python benchmarks/gpu_dispatch.py --steps 50 --kernels

Prints, per training step (zero_grad, forward, backward, AdamW step, loss read-back):
the dispatches, submits, bind groups created, uploads and downloads the backend counted;
the host-side time (recording the step, up to the read-back's submit) and the total
time. ``--kernels`` then times every kernel on its own (a submit and a wait after each
dispatch, so the sum exceeds the batched step) to show where the device time goes.
Runs on whatever adapter wgpu finds; on a software adapter (lavapipe) the "device" is
the CPU too.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

try:
    import haelixe  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import haelixe as hx
from haelixe.data.sine import SineTask
from haelixe.denoise import Denoiser
from haelixe.nn import functional as F
from haelixe.optim import AdamW


class Step:
    """One denoiser training step, split where the host stops recording."""

    def __init__(self, batch_size: int, seed: int = 0):
        hx.manual_seed(seed)
        self.model = Denoiser().to("gpu")
        self.opt = AdamW(self.model.parameters(), lr=1e-3, weight_decay=0.01)
        self.data = SineTask("random", batch_size, seed)

    def record(self):
        """Everything up to the loss read-back; returns the loss tensor."""
        noisy, clean = self.data.batch()
        x = hx.from_numpy(noisy).to("gpu")
        y = hx.from_numpy(clean).to("gpu")
        self.opt.zero_grad(set_to_none=False)  # as the denoiser app: in-place grads
        loss = F.mse_loss(self.model(x).float(), y)
        loss.backward()
        self.opt.step()
        return loss


def measure(step: Step, be, steps: int) -> dict:
    host = total = 0.0
    counts = collections.Counter()
    for _ in range(steps):
        be.reset_stats()
        t0 = time.perf_counter()
        loss = step.record()
        t1 = time.perf_counter()
        loss.item()
        t2 = time.perf_counter()
        host += t1 - t0
        total += t2 - t0
        counts.update({k: v for k, v in be.stats().items() if isinstance(v, int)})
    per = {k: counts[k] / steps for k in ("dispatches", "submits", "bind_groups",
                                          "uploads", "downloads") if k in counts}
    per["host_ms"] = 1e3 * host / steps
    per["total_ms"] = 1e3 * total / steps
    return per


def kernel_times(step: Step, be, steps: int) -> list:
    """(kernel, calls per step, ms per step) with a wait after every dispatch."""
    disp = be.dispatcher
    original = disp.dispatch
    times = collections.defaultdict(float)
    calls = collections.Counter()

    def timed_dispatch(spec, buffers, meta, grid):
        be.synchronize()
        t0 = time.perf_counter()
        original(spec, buffers, meta, grid)
        be.synchronize()
        name = f"{spec.file.removesuffix('.wgsl')}:{spec.entry}"
        times[name] += time.perf_counter() - t0
        calls[name] += 1

    disp.dispatch = timed_dispatch
    try:
        for _ in range(steps):
            step.record().item()
    finally:
        disp.dispatch = original
    rows = [(k, calls[k] / steps, 1e3 * times[k] / steps) for k in times]
    return sorted(rows, key=lambda r: -r[2])


def gpu_backend():
    """(backend, adapter info) of the GPU, after printing which adapter it is."""
    be = hx.Device.gpu().backend
    info = be.info
    print(f"adapter: {info['device']} ({info['backend']}, {info['adapter_type']}"
          f"{', software' if info['software'] else ''})")
    return be, info


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--kernels", action="store_true", help="time each kernel alone")
    p.add_argument("--json", action="store_true", help="end with one JSON line")
    args = p.parse_args(argv)

    be, info = gpu_backend()
    step = Step(args.batch_size)
    for _ in range(args.warmup):  # compiles every pipeline, fills the allocator's bins
        step.record().item()
    per = measure(step, be, args.steps)
    print(f"denoiser training step (batch {args.batch_size}, "
          f"{step.model.num_parameters()} parameters), mean of {args.steps} steps:")
    for k, v in per.items():
        unit = " ms" if k.endswith("_ms") else ""
        print(f"  {k.removesuffix('_ms'):<12} {v:8.1f}{unit}")
    print(f"  {'steps/s':<12} {1e3 / per['total_ms']:8.2f}")
    if args.kernels:
        rows = kernel_times(step, be, max(1, args.steps // 4))
        print("per kernel, each timed alone (ms per step):")
        for name, n, ms in rows:
            print(f"  {name:<36} {n:5.1f} x {ms:8.2f} ms")
        per["kernels"] = rows
    if args.json:
        print(json.dumps({"adapter": info["device"], **per}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
