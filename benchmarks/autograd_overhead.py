"""Autograd overhead: small graphs recorded and run backward, in Haelixe and in PyTorch
(CPU), side by side in one run.

- ``(a * b).sum()`` on (4, 32, 64) float32 leaves: two nodes;
- a mix of ops, ``(((a + b) / c)[:, ::2, 1:] @ w).softmax(-1).sum()``: add, div, a
  strided slice, a batched matmul, softmax and a reduction, six nodes.

Each step records the graph, runs its backward and accumulates into the leaves'
``.grad`` (in place after the first call, in both libraries). The two libraries are
timed in alternating rounds; the table gives the median and range of the rounds'
per-step times, and the ratio of the medians.

    python benchmarks/autograd_overhead.py [--repeat 7] [--number 2000] [--busy]
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np
from neighbour import busy_neighbour, load_note, median

import haelixe as hx

SHAPE = (4, 32, 64)


def graphs(lib, arrays):
    """name -> step function over leaves made by ``lib`` (haelixe or torch)."""
    a, b, c, w = (lib.from_numpy(x.copy()).requires_grad_() for x in arrays)

    def mul_sum():
        (a * b).sum().backward()

    def mix():
        (((a + b) / c)[:, ::2, 1:] @ w).softmax(-1).sum().backward()

    return {"(a * b).sum()": mul_sum, "mix": mix}, a, b


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--number", type=int, default=2000)
    ap.add_argument("--busy", action="store_true",
                    help="time beside a CPU-bound neighbour process")
    args = ap.parse_args()

    g = np.random.default_rng(0)
    arrays = [g.standard_normal(SHAPE, dtype=np.float32),
              g.standard_normal(SHAPE, dtype=np.float32),
              g.standard_normal(SHAPE, dtype=np.float32) + 4.0,
              g.standard_normal((SHAPE[2] - 1, 32), dtype=np.float32)]
    libs = {"haelixe": graphs(hx, arrays)}
    try:
        import torch

        libs["torch"] = graphs(torch, arrays)
    except ImportError:
        pass

    names = list(libs["haelixe"][0])
    times = {(lib, n): [] for lib in libs for n in names}
    for steps, _, _ in libs.values():  # warm-up; the first backward allocates .grad
        for fn in steps.values():
            fn()
    with busy_neighbour(args.busy):
        for _ in range(args.repeat):
            for n in names:
                for lib, (steps, _, _) in libs.items():
                    t = timeit.timeit(steps[n], number=args.number) / args.number * 1e6
                    times[lib, n].append(t)

    # sanity: the gradients are right (a accumulated b once per mul_sum call, and the
    # mix adds a gradient too, so compare the mul_sum part through torch when present)
    if "torch" in libs:
        for (x, tx) in zip(libs["haelixe"][1:], libs["torch"][1:]):
            np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-3,
                                       atol=1e-2)

    print(f"autograd overhead on {SHAPE} float32, {args.repeat} alternating rounds of "
          f"{args.number} steps{', beside a CPU-bound process' if args.busy else ''} "
          f"({load_note()})")
    print(f"{'graph':<16}" + "".join(f"{lib:>26}" for lib in libs) + "   haelixe / torch")
    for n in names:
        row = f"{n:<16}"
        for lib in libs:
            ts = times[lib, n]
            row += f"{median(ts):>9.1f} us [{min(ts):.1f} .. {max(ts):.1f}]".rjust(26)
        if "torch" in libs:
            row += f"   {median(times['haelixe', n]) / median(times['torch', n]):.2f}x"
        print(row)


if __name__ == "__main__":
    main()
