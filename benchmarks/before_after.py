"""Two versions of Haelixe side by side: the same workloads timed in alternating rounds,
each round a fresh interpreter importing one source tree, medians and ranges printed
with the ratio after / before (below 1.00x: the after tree is faster).

    python benchmarks/before_after.py --before <git ref or directory> [--after .]
    python benchmarks/before_after.py --before . --before-env HAELIXE_TUNING=0

A git ref is exported (git archive) into a temporary directory, removed afterwards. The
``--*-env`` options set variables for one side: the same tree with a setting changed.

Workloads: autograd on a mix of ops (add, div, a slice, matmul, a reduction, softmax;
forward and backward), ``(a * b).sum().backward()``, the denoiser's training step at
batch 16 (AdamW, loss read every step), a makemore-style character RNN step (an
embedding, the cell h = tanh(x @ Wx + h @ Wh + b) unrolled over 16 steps at batch 32,
hidden 64, a cross-entropy per step, backward and AdamW) and, where a wgpu adapter
exists, the GPU dispatches and submits of one denoiser step (counts: deterministic, one
round) and the host's time recording an eager denoiser step (GPU_HOST: the queue's
calls left out), per step and per dispatch. Ranges are min-max over the rounds; on a
shared machine they are wide, and only a median ratio outside both sides' ranges says
much. Each round times both trees one after the other, so the median of the rounds' own
ratios (after over before in the same round) is printed too: a slow spell of the machine
slows both sides of its round alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

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
    "char RNN step, 16 x 32 x 64 (us/step)": """
import numpy as np, haelixe as hx
from haelixe.nn import functional as F
from haelixe.optim import AdamW
g = np.random.default_rng(0)
V, E, H, T, B = 27, 16, 64, 16, 32
def param(*shape, scale=0.1):
    return hx.from_numpy((g.standard_normal(shape) * scale).astype(np.float32)).requires_grad_()
C, Wx, Wh, b, Wo, bo = param(V, E), param(E, H), param(H, H), param(H), param(H, V), param(V)
opt = AdamW([C, Wx, Wh, b, Wo, bo], lr=1e-3)
data = [hx.from_numpy(g.integers(0, V, (B, T + 1))) for _ in range(8)]
i = [0]
def step():
    idx = data[i[0] % 8]; i[0] += 1
    x = F.embedding(idx[:, :T], C)
    h = hx.zeros(B, H)
    loss = 0
    for t in range(T):
        h = (x[:, t] @ Wx + h @ Wh + b).tanh()
        loss = loss + F.cross_entropy(h @ Wo + bo, idx[:, t + 1])
    opt.zero_grad()
    (loss / T).backward()
    opt.step()
    loss.item()
""",
}

# The timed steps are the steady state on both sides: a tree whose compiled CPU kernels
# load in the background (cpu_jit.wait) has them all loaded first (how soon a fresh
# interpreter gets there is first_step.py's and real_programs.py's figure).
TIMER = """
import time, json
for _ in range(WARM): step()
from haelixe.backends import cpu_jit
if hasattr(cpu_jit, "wait"): cpu_jit.wait()
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


# The host's share of an eager GPU step: recording the denoiser's step (batch 2, so
# that a software adapter's execution is small) up to loss.item(), less the time inside
# the queue's submit and write_buffer; everything is submitted at the read-back
# (HAELIXE_GPU_MAX_PENDING, set by the caller), so no early submit runs beside the
# recording. Prints [host us per step (median of N), dispatches per step].
GPU_HOST = """
import json, os, sys, time, statistics, numpy as np, haelixe as hx
from haelixe.data.sine import random_batch
from haelixe.denoise import Denoiser
from haelixe.nn import functional as F
from haelixe.optim import AdamW
hx.manual_seed(0)
be = hx.Device.gpu().backend
d = be.dispatcher
class Queue:
    def __init__(self, q): self.q, self.t = q, 0.0
    def __getattr__(self, k): return getattr(self.q, k)
    def _timed(self, f, *a):
        t0 = time.perf_counter(); r = f(*a); self.t += time.perf_counter() - t0; return r
    def submit(self, *a): return self._timed(self.q.submit, *a)
    def write_buffer(self, *a): return self._timed(self.q.write_buffer, *a)
d.queue = q = Queue(d.queue)
model = Denoiser().to("gpu")
opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
rng = np.random.default_rng(0)
data = [tuple(hx.from_numpy(v).to("gpu") for v in random_batch(rng, 2, 32)) for _ in range(8)]
def step(i):
    x, y = data[i % 8]
    opt.zero_grad(set_to_none=False)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss
for i in range(20): step(i).item()
from haelixe.backends import cpu_jit
if hasattr(cpu_jit, "wait"): cpu_jit.wait()
host = []
be.reset_stats()
for i in range(N):
    q.t = 0.0
    t0 = time.perf_counter(); loss = step(i); host.append(time.perf_counter() - t0 - q.t)
    loss.item()
print(json.dumps([1e6 * statistics.median(host), be.stats()["dispatches"] / N]))
"""


def run(tree: str, code: str, extra_env: dict) -> object:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), OPENBLAS_NUM_THREADS="1",
               **extra_env)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, cwd=os.path.abspath(tree))
    if r.returncode:
        raise RuntimeError(f"{tree}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _env(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"before_after: expected KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def _tree(where: str, tmp: str) -> str:
    """``where`` itself if it is a directory, else the git ref exported under ``tmp``."""
    if os.path.isdir(where):
        return where
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                          text=True, check=True).stdout.strip()
    dest = os.path.join(tmp, where.replace("/", "_"))
    os.makedirs(dest)
    archive = subprocess.run(["git", "-C", root, "archive", where], capture_output=True)
    if archive.returncode:
        raise SystemExit(f"before_after: {where!r} is neither a directory nor a git ref "
                         f"({archive.stderr.decode().strip()})")
    subprocess.run(["tar", "-x", "-C", dest], input=archive.stdout, check=True)
    return dest


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="a directory or a git ref")
    ap.add_argument("--after", default=".", help="a directory or a git ref")
    ap.add_argument("--before-env", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--after-env", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=300, help="steps per round")
    ap.add_argument("--only", default="", help="run the workloads whose name has this")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="before-after-") as tmp:
        trees = {"before": _tree(args.before, tmp), "after": _tree(args.after, tmp)}
        envs = {"before": _env(args.before_env), "after": _env(args.after_env)}
        compare(trees, envs, args)


def compare(trees: dict, envs: dict, args) -> None:
    print(f"{'workload':<36}{'before':>22}{'after':>22}{'after/before':>16}")
    for name, body in WORKLOADS.items():
        if args.only not in name:
            continue
        code = body + TIMER.replace("WARM", "20").replace("N", str(args.n))
        times = {k: [] for k in trees}
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(trees)[::-1]
            for k in order:
                times[k].append(run(trees[k], code, envs[k]))
        med = {k: statistics.median(v) for k, v in times.items()}
        cells = [f"{med[k]:8.1f} ({min(v):.1f}-{max(v):.1f})" for k, v in times.items()]
        ratios = sorted(a / b for a, b in zip(times["after"], times["before"]))
        print(f"{name:<36}{cells[0]:>22}{cells[1]:>22}"
              f"{med['after'] / med['before']:>10.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f}; "
              f"the rounds' own ratios: median {statistics.median(ratios):.2f})")
    try:
        counts = {k: run(t, GPU_COUNTS, envs[k]) for k, t in trees.items()}
        print(f"{'GPU denoiser step (dispatches, submits)':<36}{str(counts['before']):>22}"
              f"{str(counts['after']):>22}")
    except RuntimeError as e:
        print(f"GPU counts skipped: {str(e).splitlines()[-1][:120]}")
        return
    if args.only in GPU_HOST_NAME:
        gpu_host(trees, envs, args)


GPU_HOST_NAME = "GPU host, denoiser batch 2 (us/step)"


def gpu_host(trees: dict, envs: dict, args) -> None:
    """GPU_HOST in alternating rounds: the host's microseconds per eager step, and per
    dispatch."""
    code = f"N = {args.n}\n" + GPU_HOST
    times = {k: [] for k in trees}
    per = {}
    for r in range(args.rounds):
        for k in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
            host, per[k] = run(trees[k], code, {"HAELIXE_GPU_MAX_PENDING": "100000",
                                                **envs[k]})
            times[k].append(host)
    med = {k: statistics.median(v) for k, v in times.items()}
    cells = [f"{med[k]:8.1f} ({min(v):.1f}-{max(v):.1f})" for k, v in times.items()]
    ratios = sorted(a / b for a, b in zip(times["after"], times["before"]))
    print(f"{GPU_HOST_NAME:<36}{cells[0]:>22}{cells[1]:>22}"
          f"{med['after'] / med['before']:>10.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})")
    print(f"{'  per dispatch (us)':<36}" + "".join(
        f"{med[k] / per[k]:>16.1f} ({per[k]:.0f})" for k in trees))


if __name__ == "__main__":
    main()
