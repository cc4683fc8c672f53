"""Extra memory hx.load needs for a checkpoint, as a multiple of the file's size.

    python benchmarks/checkpoint_memory.py [--mib 200] [--tensors 8]

The checkpoint is written by one process and loaded by a fresh one, so nothing the
writer allocated counts. Two figures: the growth of the loading process's peak resident
size (VmHWM after the load less VmRSS before it; what the kernel charges), and the peak
of tracemalloc (every Python and numpy allocation made by the load). What the loaded
tensors themselves hold is one file size: a load that reads the file whole and then
copies each tensor shows about 2.0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WRITE = textwrap.dedent("""
    import sys
    import numpy as np
    import haelixe as hx

    path, mib, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = np.random.default_rng(0)
    n = (mib << 20) // (4 * count)
    hx.save({"model": {f"layer{i}.weight": rng.standard_normal(n, dtype=np.float32)
                       for i in range(count)}, "step": 1000}, path)
""")

LOAD = textwrap.dedent("""
    import json, pathlib, sys, tracemalloc
    import haelixe as hx
    import haelixe.serialization  # imported before the baseline

    def status(key):  # bytes, from the kernel's accounting of this process
        lines = pathlib.Path("/proc/self/status").read_text().splitlines()
        return next(int(s.split()[1]) << 10 for s in lines if s.startswith(key + ":"))

    path, traced = sys.argv[1], sys.argv[2] == "1"
    if traced:
        tracemalloc.start()
    before = status("VmRSS")
    ck = hx.load(path)
    peak = tracemalloc.get_traced_memory()[1] if traced else status("VmHWM") - before
    print(json.dumps({"peak": peak}))
""")


def _run(script: str, *args) -> str:
    env = dict(os.environ, PYTHONPATH=REPO)
    r = subprocess.run([sys.executable, "-c", script, *map(str, args)], env=env,
                       capture_output=True, text=True, check=True)
    return r.stdout


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", type=int, default=200, help="checkpoint size")
    p.add_argument("--tensors", type=int, default=8)
    p.add_argument("--dir", default=None, help="where to write it (default: tmp)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hx-ckpt-mem-", dir=args.dir) as root:
        path = os.path.join(root, "c.safetensors")
        _run(WRITE, path, args.mib, args.tensors)
        size = os.path.getsize(path)
        rss = json.loads(_run(LOAD, path, 0))["peak"]
        traced = json.loads(_run(LOAD, path, 1))["peak"]
    print(f"checkpoint {size / 2**20:.1f} MiB in {args.tensors} tensors")
    print(f"hx.load peak extra resident memory: {rss / 2**20:.1f} MiB = {rss / size:.3f}x")
    print(f"hx.load peak traced allocations:    {traced / 2**20:.1f} MiB = "
          f"{traced / size:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
