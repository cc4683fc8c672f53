"""Time to the first training step of the lab 05 denoiser in a fresh process: import,
model, data, one forward/backward/AdamW step, with the compiled kernels' caches empty
(the first run on a machine: kernels compile) and then filled (every later run).

    python benchmarks/first_step.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

from neighbour import load_note, median

CHILD = """
import time
t0 = time.perf_counter()
from haelixe.denoise import train
r = train("random", epochs=1, steps_per_epoch=2)
print(time.perf_counter() - t0, r["first_step_s"])
"""


def first_step(env) -> tuple[float, float]:
    """(seconds from the start of the imports to the end of the first step, seconds
    from the start of train())."""
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, check=True)
    total, first = out.stdout.split()
    return float(total), float(first)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    cold, warm = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, HAELIXE_CACHE_DIR=os.path.join(d, "hx"),
                       NUMBA_CACHE_DIR=os.path.join(d, "numba"))
            cold.append(first_step(env))
            warm.append(first_step(env))
    print(f"lab 05 denoiser, time to the first training step ({load_note()})")
    print("  (import + train() to the end of step 1 / train() alone), median of "
          f"{args.runs}")
    for name, runs in (("empty kernel caches", cold), ("filled caches", warm)):
        print(f"  {name:20s} {median([r[0] for r in runs]):6.2f} s  /  "
              f"{median([r[1] for r in runs]):.2f} s")


if __name__ == "__main__":
    main()
