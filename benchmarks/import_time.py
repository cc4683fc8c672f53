"""Milliseconds to `import haelixe` in a fresh interpreter, side by side with numpy (its floor)
and with ml_dtypes (loaded by the first bfloat16 only), with the bytecode cache filled
and, as under PYTHONDONTWRITEBYTECODE=1, compiled from source each time. ``--against
DIR`` adds another checkout's `import haelixe` (DIR holds its haelixe/ package).

    python benchmarks/import_time.py [--rounds 7] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from neighbour import load_note, median, median_range

HERE = str(Path(__file__).resolve().parents[1])
LINES = {"numpy": "import numpy", "ml_dtypes": "import ml_dtypes",
         "haelixe": "import haelixe",
         "haelixe + a bfloat16 tensor": "import haelixe; haelixe.ones(2, dtype='bfloat16')"}


def millis(code: str, tree: str, cache: str | None, cwd: str) -> float:
    env = dict(os.environ, PYTHONPATH=tree)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if cache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = cache
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, check=True)
    return 1000 * (time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--against", help="another checkout: the folder holding its haelixe/")
    args = p.parse_args()
    cases = {name: (code, HERE) for name, code in LINES.items()}
    if args.against:
        cases["haelixe of --against"] = ("import haelixe", os.path.abspath(args.against))
    with tempfile.TemporaryDirectory() as cwd:  # (not a checkout: -c imports from cwd)
        caches = {"bytecode cached": os.path.join(cwd, "pyc"), "compiled each time": None}
        times = {(c, n): [] for c in caches for n in cases}
        for code, tree in cases.values():  # fill the caches
            millis(code, tree, caches["bytecode cached"], cwd)
        for _ in range(args.rounds):  # interleaved, so a busy spell hits every case
            for (c, name), runs in times.items():
                runs.append(millis(*cases[name][:2], caches[c], cwd))
    print(f"fresh interpreter, ms, median [range] of {args.rounds} ({load_note()})")
    for c in caches:
        floor = median(times[(c, "numpy")])
        print(f"  {c}")
        for name in cases:
            runs = times[(c, name)]
            print(f"    {name:28s} {median_range(runs)}   {median(runs) / floor:4.1f}x numpy")
        if args.against:
            ratio = median(times[(c, "haelixe of --against")]) / median(times[(c, "haelixe")])
            print(f"    --against / this checkout: {ratio:.2f}x")


if __name__ == "__main__":
    main()
