"""Per-op overhead of small tensors, and large matmul throughput, side by side in one run.

Every op runs on a (4, 32, 64) float32 tensor in Haelixe, in raw numpy and (when it is
installed) in PyTorch on the CPU; the table shows microseconds per call and the ratios.
Then a 1024 x 1024 float32 matmul, as GFLOP/s and as a ratio to numpy's, numpy's BLAS on
as many threads as it takes by itself (Haelixe's thread policy keeps it on one between
its own calls). Each figure is the median of timeit rounds taken in alternating order,
so that machine noise hits all three alike, with the range of the rounds; the ratios are
of the medians.

    python benchmarks/overhead.py [--repeat 7] [--number 2000]
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np
from neighbour import median
from threadpoolctl import ThreadpoolController

import haelixe as hx
from haelixe.backends.threads import _usable_cores

SHAPE = (4, 32, 64)


def small_ops(a_np, b_np, m_np):
    """name -> (haelixe thunk, numpy thunk, torch thunk or None)."""
    a, b, m = hx.from_numpy(a_np), hx.from_numpy(b_np), hx.from_numpy(m_np)
    ops = {
        "add": (lambda: a + b, lambda: a_np + b_np),
        "mul": (lambda: a * b, lambda: a_np * b_np),
        "exp": (lambda: a.exp(), lambda: np.exp(a_np)),
        "sum": (lambda: a.sum(), lambda: a_np.sum()),
        "sum(dim=-1)": (lambda: a.sum(-1), lambda: a_np.sum(-1)),
        "matmul": (lambda: a @ m, lambda: a_np @ m_np),
        "transpose+contiguous": (lambda: a.transpose(1, 2).contiguous(),
                                 lambda: np.ascontiguousarray(a_np.transpose(0, 2, 1))),
        "slice [:, ::2, 1:]": (lambda: a[:, ::2, 1:], lambda: a_np[:, ::2, 1:]),
        "cat(dim=-1)": (lambda: hx.cat([a, b], -1),
                        lambda: np.concatenate([a_np, b_np], -1)),
    }
    try:
        import torch
    except ImportError:
        return {k: (h, n, None) for k, (h, n) in ops.items()}
    ta, tb, tm = torch.from_numpy(a_np), torch.from_numpy(b_np), torch.from_numpy(m_np)
    th = {
        "add": lambda: ta + tb,
        "mul": lambda: ta * tb,
        "exp": lambda: ta.exp(),
        "sum": lambda: ta.sum(),
        "sum(dim=-1)": lambda: ta.sum(-1),
        "matmul": lambda: ta @ tm,
        "transpose+contiguous": lambda: ta.transpose(1, 2).contiguous(),
        "slice [:, ::2, 1:]": lambda: ta[:, ::2, 1:],
        "cat(dim=-1)": lambda: torch.cat([ta, tb], -1),
    }
    return {k: (h, n, th[k]) for k, (h, n) in ops.items()}


def interleaved(thunks, number, repeat):
    """Per thunk (None stays None) the list of its rounds' times per call (us), measured
    in alternating rounds whose starting thunk rotates: the first call of a round pays for
    what the previous one left behind (freed pages, cold caches), and no thunk should
    always be first."""
    rounds = [[] if t is not None else None for t in thunks]
    n = len(thunks)
    for r in range(max(repeat, n)):
        for j in range(n):
            i = (r + j) % n
            if thunks[i] is not None:
                rounds[i].append(timeit.timeit(thunks[i], number=number) / number * 1e6)
    return rounds


def on_all_blas_threads(fn):
    """``fn`` with numpy's BLAS on every usable core, as a program without Haelixe runs
    it (the limit is restored after each call, so Haelixe's policy stays right)."""
    controller = ThreadpoolController()

    def run():
        with controller.limit(limits=_usable_cores(), user_api="blas"):
            return fn()

    return run


def fmt_us(times):
    return f"{median(times):.2f} [{min(times):.2f}..{max(times):.2f}]"


def fmt_ratio(x):
    return "-" if x is None else f"{x:6.2f}x"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--number", type=int, default=2000)
    ap.add_argument("--matmul-n", type=int, default=1024)
    args = ap.parse_args()

    g = np.random.default_rng(0)
    a_np = g.standard_normal(SHAPE, dtype=np.float32)
    b_np = g.standard_normal(SHAPE, dtype=np.float32)
    m_np = g.standard_normal((SHAPE[-1], SHAPE[-1]), dtype=np.float32)
    ops = small_ops(a_np, b_np, m_np)
    have_torch = any(t is not None for _, _, t in ops.values())

    print(f"per-op time on {SHAPE} float32, us: median [range] of {args.repeat} "
          f"alternating rounds of {args.number} calls")
    head = f"{'op':<22}{'haelixe':>20}{'numpy':>20}{'hx/numpy':>10}"
    if have_torch:
        head += f"{'torch':>20}{'hx/torch':>10}"
    print(head)
    for name, (h, n, t) in ops.items():
        rh, rn, rt = interleaved([h, n, t], args.number, args.repeat)
        th, tn = median(rh), median(rn)
        row = f"{name:<22}{fmt_us(rh):>20}{fmt_us(rn):>20}{fmt_ratio(th / tn):>10}"
        if have_torch:
            row += f"{fmt_us(rt):>20}{fmt_ratio(th / median(rt)):>10}"
        print(row)

    n = args.matmul_n
    x_np = g.standard_normal((n, n), dtype=np.float32)
    y_np = g.standard_normal((n, n), dtype=np.float32)
    x, y = hx.from_numpy(x_np), hx.from_numpy(y_np)
    yt = hx.from_numpy(np.ascontiguousarray(y_np.T)).T  # a transposed view, read by BLAS
    thunks = [lambda: x @ y, lambda: x @ yt, on_all_blas_threads(lambda: x_np @ y_np)]
    if have_torch:
        import torch

        xt_, yt_ = torch.from_numpy(x_np), torch.from_numpy(y_np)
        thunks.append(lambda: xt_ @ yt_)
    rounds = interleaved(thunks, 3, args.repeat)
    flops = 2.0 * n ** 3
    gf = [[flops / (us * 1e-6) / 1e9 for us in r] for r in rounds]
    print(f"\n{n}x{n} float32 matmul, GFLOP/s: median [range] of {args.repeat} alternating "
          f"rounds of 3 calls")
    print(f"{'':<24}{'GFLOP/s':>24}{'vs numpy':>10}")
    labels = ["haelixe a @ b", "haelixe a @ b.T (view)", "numpy", "torch"]
    ref = median(gf[2])
    for label, v in zip(labels, gf):
        span = f"{median(v):.1f} [{min(v):.1f} .. {max(v):.1f}]"
        print(f"{label:<24}{span:>24}{median(v) / ref:>9.2f}x")


if __name__ == "__main__":
    main()
