"""Two versions of Haelixe side by side: the same workloads timed in alternating rounds,
each round a fresh interpreter importing one source tree, medians and ranges printed
with the ratio after / before (below 1.00x: the after tree is faster).

    git worktree add /tmp/before <commit>
    python benchmarks/before_after.py --before /tmp/before [--after .] [--rounds 7]

Workloads: autograd on a mix of ops (add, div, a slice, matmul, a reduction, softmax;
forward and backward), ``(a * b).sum().backward()``, the denoiser's training step at
batch 16 (AdamW, loss read every step), and, where a wgpu adapter exists, the GPU
dispatches and submits of one denoiser step (counts: deterministic, one round).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

WORKLOADS = {
    "autograd mix (us/step)": """
import numpy as np, haelixe as hx, time
g = np.random.default_rng(0)
a, b, c = (hx.from_numpy(g.standard_normal((4, 32, 64), dtype=np.float32)).requires_grad_()
           for _ in range(3))
w = hx.from_numpy(g.standard_normal((63, 32), dtype=np.float32)).requires_grad_()
def step():
    h = (a + b) / (c * c + 1.0)
    y = (h[:, :, 1:] @ w).sum(-1).softmax(-1)
    y.sum().backward()
""",
    "(a*b).sum().backward() (us/step)": """
import numpy as np, haelixe as hx
g = np.random.default_rng(0)
a, b = (hx.from_numpy(g.standard_normal((4, 32, 64), dtype=np.float32)).requires_grad_()
        for _ in range(2))
def step():
    (a * b).sum().backward()
""",
    "denoiser step, batch 16 (us/step)": """
import numpy as np, haelixe as hx
from haelixe.data.sine import random_batch
from haelixe.denoise import Denoiser
from haelixe.nn import functional as F
from haelixe.optim import AdamW
hx.manual_seed(0)
model = Denoiser()
opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
rng = np.random.default_rng(0)
data = [tuple(hx.from_numpy(v) for v in random_batch(rng, 16, 32)) for _ in range(8)]
i = [0]
def step():
    x, y = data[i[0] % 8]; i[0] += 1
    opt.zero_grad(set_to_none=False)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    loss.item()
""",
}

TIMER = """
import time, json
for _ in range(WARM): step()
t0 = time.perf_counter()
for _ in range(N): step()
print(json.dumps((time.perf_counter() - t0) / N * 1e6))
"""

GPU_COUNTS = """
import json, numpy as np, haelixe as hx
from haelixe.data.sine import random_batch
from haelixe.denoise import Denoiser
from haelixe.nn import functional as F
from haelixe.optim import AdamW
hx.manual_seed(0)
be = hx.Device.gpu().backend if hasattr(hx.Device, "backend") else None
if be is None:
    from haelixe.device import backend_for
    be = backend_for(hx.Device.gpu())
model = Denoiser().to("gpu")
opt = AdamW(model.parameters(), lr=1e-3)
x, y = (hx.from_numpy(v).to("gpu") for v in random_batch(np.random.default_rng(0), 16, 32))
def step():
    opt.zero_grad(set_to_none=False)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss
for _ in range(3): step().item()
be.flush(); be.reset_stats()
step().item()
s = be.stats()
print(json.dumps([s["dispatches"], s["submits"]]))
"""


def run(tree: str, code: str) -> object:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, cwd=os.path.abspath(tree))
    if r.returncode:
        raise RuntimeError(f"{tree}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=".")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=300, help="steps per round")
    args = ap.parse_args()
    trees = {"before": args.before, "after": args.after}
    print(f"{'workload':<36}{'before':>22}{'after':>22}{'after/before':>16}")
    for name, body in WORKLOADS.items():
        code = body + TIMER.replace("WARM", "20").replace("N", str(args.n))
        times = {k: [] for k in trees}
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(trees)[::-1]
            for k in order:
                times[k].append(run(trees[k], code))
        med = {k: statistics.median(v) for k, v in times.items()}
        cells = [f"{med[k]:8.1f} ({min(v):.1f}-{max(v):.1f})" for k, v in times.items()]
        ratios = sorted(a / b for a, b in zip(times["after"], times["before"]))
        print(f"{name:<36}{cells[0]:>22}{cells[1]:>22}"
              f"{med['after'] / med['before']:>10.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})")
    try:
        counts = {k: run(t, GPU_COUNTS) for k, t in trees.items()}
        print(f"{'GPU denoiser step (dispatches, submits)':<36}{str(counts['before']):>22}"
              f"{str(counts['after']):>22}")
    except RuntimeError as e:
        print(f"GPU counts skipped: {str(e).splitlines()[-1][:120]}")


if __name__ == "__main__":
    main()
