"""Autograd overhead: ``y = (a * b).sum(); y.backward()`` on (4, 32, 64) float32 leaves,
in Haelixe and in PyTorch (CPU), side by side in one run.

The step records two nodes, runs their backward and accumulates into both leaves'
``.grad`` (in place after the first call, in both libraries). The two are timed in
alternating rounds; the best round of each and their ratio are printed.

    python benchmarks/autograd_overhead.py [--repeat 7] [--number 2000]
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np

import haelixe as hx

SHAPE = (4, 32, 64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--number", type=int, default=2000)
    args = ap.parse_args()

    g = np.random.default_rng(0)
    a_np = g.standard_normal(SHAPE, dtype=np.float32)
    b_np = g.standard_normal(SHAPE, dtype=np.float32)

    a = hx.from_numpy(a_np.copy()).requires_grad_()
    b = hx.from_numpy(b_np.copy()).requires_grad_()

    def hx_step():
        y = (a * b).sum()
        y.backward()

    steps = {"haelixe": hx_step}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        ta = torch.from_numpy(a_np.copy()).requires_grad_()
        tb = torch.from_numpy(b_np.copy()).requires_grad_()

        def torch_step():
            y = (ta * tb).sum()
            y.backward()

        steps["torch"] = torch_step

    for fn in steps.values():  # warm-up; the first backward allocates .grad
        fn()
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(args.repeat):
        for name, fn in steps.items():
            t = timeit.timeit(fn, number=args.number) / args.number * 1e6
            best[name] = min(best[name], t)

    # sanity: the gradients are right (b accumulated once per call)
    calls = 1 + args.repeat * args.number
    np.testing.assert_allclose(a.grad.numpy(), calls * b_np, rtol=1e-2)  # (float32 sums)

    print(f"y = (a * b).sum(); y.backward()  on {SHAPE} float32, best of {args.repeat} "
          f"x {args.number}")
    for name, t in best.items():
        print(f"{name:<10}{t:>9.2f} us")
    if "torch" in best:
        print(f"haelixe / torch: {best['haelixe'] / best['torch']:.2f}x "
              f"({'faster' if best['haelixe'] < best['torch'] else 'slower'} than PyTorch)")


if __name__ == "__main__":
    main()
