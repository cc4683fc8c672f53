"""Where the time of a GPU training step goes: the 6-block Transformer of
gpu_transformer.py (AdamW, ``loss.item()`` every step), eager and captured.

    python benchmarks/gpu_step_profile.py            # the full model (a real GPU), fp32
    python benchmarks/gpu_step_profile.py --dtype bf16   # bf16 weights, autocast, F32
                                                         # master weights (as there)
    python benchmarks/gpu_step_profile.py --small    # tiny: a smoke test on lavapipe

Prints, in milliseconds per step (medians over ``--steps`` steps):

- eager: the step as training runs it (Python records while the GPU works);
- host: recording the step alone (nothing submitted until the read-back);
- device: that recorded step's submit-and-wait, and a captured step's replay;
- with ``--attention-ab``: replays with attention's backward forced flash / matmuls;
- per kernel: every dispatch of the captured step run ``--repeats`` times in a row in
  one pass (no submit between), so small kernels are timed without launch gaps; summed
  by kernel (matmuls by shape and tile), largest first. Their sum is a lower bound for
  the device time (back-to-back repeats find their inputs in cache).
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import haelixe  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_transformer import FULL, LR, SMALL, WEIGHT_DECAY, haelixe_model, make_batches

import haelixe as hx
from haelixe.nn import functional as F
from haelixe.optim import AdamW


def train_step_of(model, opt, low=None):
    """A training step; ``low`` (a 16-bit dtype): the forward under autocast to it."""
    def train_step(x, y):
        opt.zero_grad(set_to_none=False)
        with hx.autocast(dtype=low or hx.bfloat16, enabled=low is not None):
            loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return train_step


def model_and_step(cfg, dtype: str, capturable: bool = False):
    """The model on the GPU and its training step: fp32, or bf16 weights with autocast
    and F32 master weights (gpu_transformer.py's --dtype bf16)."""
    model = haelixe_model(cfg).to("gpu")
    low = hx.bfloat16 if dtype == "bf16" else None
    if low is not None:
        model = model.to(low)
    opt = AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY,
                master_weights=low is not None, capturable=capturable)
    return train_step_of(model, opt, low)


def median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times)


def label(entry) -> str:
    """A dispatch's kernel, with a matmul's shape, variant and kinds (A/B/C)."""
    spec = entry.spec
    name = f"{spec.file.removesuffix('.wgsl')}:{spec.entry}"
    if spec.entry != "matmul":  # with its operands' kinds (a cast shows as two)
        return f"{name} {'/'.join(b.kind for b in spec.bindings)}"
    p = dict(spec.params)
    m, n, k = (int(x) for x in entry.meta[:3])
    tile = f"{p['BM']}x{p['BN']}k{p['BK']}s{p['STAGES']}"
    modes = p["SECTIONS"].split()[0]
    kinds = "/".join(b.kind for b in spec.bindings[:3])
    return (f"matmul {m}x{n}x{k} z{entry.grid[2]} {tile} {modes}/{spec.bindings[1].width} "
            f"{kinds}")


def kernel_table(be, graph, repeats: int) -> list:
    """(label, dispatches per step, ms per step) of a captured step's kernels."""
    from haelixe.backends.wgpu.graph import _Dispatch

    d = be.dispatcher
    ops = [(op, e) for op, e in zip(graph._ops, graph._entries) if isinstance(e, _Dispatch)]

    def run(op, times):
        enc = d.device.create_command_encoder()
        cpass = enc.begin_compute_pass()
        cpass.set_pipeline(op[0])
        cpass.set_bind_group(0, op[1], op[2])
        for _ in range(times):
            cpass.dispatch_workgroups(*op[3])
        cpass.end()
        d.queue.submit([enc.finish()])
        be.synchronize()

    if not ops:
        return []
    run(ops[0][0], 0)
    empty = median_ms(lambda: run(ops[0][0], 0), 5)  # a submit and a wait
    totals, counts = collections.defaultdict(float), collections.Counter()
    for op, e in ops:
        run(op, 1)  # warm
        t = median_ms(lambda op=op: run(op, repeats), 3)
        name = label(e)
        totals[name] += max(t - empty, 0.0) / repeats
        counts[name] += 1
    return sorted(((k, counts[k], totals[k]) for k in totals), key=lambda r: -r[2])


def measure_eager(be, cfg, x, y, steps: int, dtype: str = "f32") -> dict:
    """Eager step time; host recording and device time of a step recorded whole."""
    eager = model_and_step(cfg, dtype)
    for _ in range(2):
        eager(x, y).item()
    report = {"eager_ms": median_ms(lambda: eager(x, y).item(), steps)}
    d = be.dispatcher
    saved = d.max_pending
    d.max_pending = 1 << 30  # record the whole step before anything is submitted
    try:
        host, device = [], []
        for _ in range(steps):
            be.synchronize()
            t0 = time.perf_counter()
            loss = eager(x, y)
            t1 = time.perf_counter()
            loss.item()
            host.append(1e3 * (t1 - t0))
            device.append(1e3 * (time.perf_counter() - t1))
    finally:
        d.max_pending = saved
    report["host_ms"] = statistics.median(host)
    report["recorded_submit_ms"] = statistics.median(device)
    be.reset_stats()
    eager(x, y).item()
    report["dispatches"] = be.stats()["dispatches"]
    return report


def captured(be, cfg, x, y, steps: int, dtype: str = "f32"):
    """(median ms of a captured step's replay with its read-back, the captured step)."""
    step = hx.capture(model_and_step(cfg, dtype, capturable=True), device="gpu")
    for _ in range(3):
        step(x, y).item()
    return median_ms(lambda: step(x, y).item(), steps), step


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None, help="runs of each kernel")
    ap.add_argument("--top", type=int, default=40, help="kernels listed")
    ap.add_argument("--attention-ab", action="store_true",
                    help="also replay with attention's backward forced each way")
    args = ap.parse_args(argv)
    cfg = SMALL if args.small else FULL
    steps = args.steps or (2 if args.small else 5)
    repeats = args.repeats or (2 if args.small else 10)
    be = hx.Device.gpu().backend
    print(f"adapter: {be.info['device']}; model {cfg}; dtype {args.dtype}", flush=True)
    x, y = (hx.from_numpy(t).to("gpu") for t in make_batches(cfg, 1)[0])
    report = {}

    report.update(measure_eager(be, cfg, x, y, steps, args.dtype))

    report["replay_ms"], step = captured(be, cfg, x, y, steps, args.dtype)
    if args.attention_ab:  # the backward of attention both ways, replayed
        from haelixe.backends.wgpu import attention as at

        for way, forced in (("flash", False), ("matmuls", True)):
            saved, at.MATMUL_PATH = at.MATMUL_PATH, forced
            try:
                report[f"replay_ms_{way}"] = captured(be, cfg, x, y, steps, args.dtype)[0]
            finally:
                at.MATMUL_PATH = saved
        print(f"captured replay, attention backward flash {report['replay_ms_flash']:.2f} "
              f"ms, through matmuls {report['replay_ms_matmuls']:.2f} ms", flush=True)
    rows = kernel_table(be, step._graphs[0], repeats)
    report["kernels"] = rows
    print(f"per step: eager {report['eager_ms']:.2f} ms | host recording "
          f"{report['host_ms']:.2f} ms, then submit + wait {report['recorded_submit_ms']:.2f}"
          f" ms | captured replay {report['replay_ms']:.2f} ms | {report['dispatches']} "
          f"dispatches")
    total = sum(r[2] for r in rows)
    print(f"kernels, each repeated {repeats}x (sum {total:.2f} ms per step):")
    for name, n, ms in rows[:args.top]:
        print(f"  {ms:8.3f} ms {100 * ms / max(total, 1e-9):5.1f}%  {n:4d}x  {name}")
    groups = collections.defaultdict(float)
    for name, _, ms in rows:
        groups[name.split()[0]] += ms
    print("by kernel: " + ", ".join(f"{k} {v:.2f}" for k, v in
                                    sorted(groups.items(), key=lambda kv: -kv[1])))
    return report


if __name__ == "__main__":
    main()
