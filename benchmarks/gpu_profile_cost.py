"""What hx.profile() costs a chain of small GPU dispatches, with and without device times.

A chain of ``--ops`` elementwise ops on a ``--size``-element tensor (one dispatch each),
then one read-back, is timed in three arms, in rotating order each round: no profile,
``hx.profile(device_times=False)`` (every backend call and dispatch recorded, host
encode times) and ``hx.profile()`` (each dispatch also between two timestamp queries,
read on the device's clock). Figures: ms per chain, median [range] over rounds, each arm
over no profile, and what each adds per dispatch.

    python benchmarks/gpu_profile_cost.py [--ops 64] [--size 4096] [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import time

import haelixe as hx

ARMS = ("no profile", "host times", "device times")


def chain(x, ops: int) -> float:
    for _ in range(ops):
        x = x + 1.0  # (one dispatch: an elementwise add)
    return x.sum().item()


def timed(x, ops: int, arm: str, reps: int) -> float:
    """Seconds per chain in ``arm``, over ``reps`` chains."""
    prof = None if arm == "no profile" else hx.profile(device_times=arm == "device times")
    if prof is not None:
        prof.__enter__()
    try:
        t = time.perf_counter()
        for _ in range(reps):
            chain(x, ops)
        return (time.perf_counter() - t) / reps
    finally:
        if prof is not None:
            prof.__exit__(None, None, None)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", type=int, default=64)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--reps", type=int, default=10, help="chains per arm and round")
    args = p.parse_args(argv)
    x = hx.randn(args.size, device="gpu")
    for arm in ARMS:  # (pipelines compiled, slabs cached, timers' query sets made)
        timed(x, args.ops, arm, 2)
    times: dict = {arm: [] for arm in ARMS}
    for k in range(args.rounds):
        for arm in ARMS[k % 3:] + ARMS[:k % 3]:
            times[arm].append(timed(x, args.ops, arm, args.reps))
    info = getattr(x._be, "info", None) or {}
    print(f"{args.ops} elementwise dispatches on {args.size} elements, then a read-back "
          f"({info.get('name', 'GPU')}), {args.rounds} rounds of {args.reps}:")
    base = statistics.median(times["no profile"])
    for arm in ARMS:
        v = times[arm]
        med = statistics.median(v)
        print(f"{arm:13s} {1e3 * med:8.3f} ms [{1e3 * min(v):.3f}-{1e3 * max(v):.3f}]  "
              f"{med / base:6.2f}x  {1e6 * (med - base) / args.ops:+8.1f} us a dispatch")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
