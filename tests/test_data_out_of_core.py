"""A dataset file several times larger than a memory bound the test sets itself: written
chunk by chunk and iterated (in order and shuffled) in a subprocess whose peak resident
size (VmHWM) must stay under the bound."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np

    def status(key):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) << 10

    from haelixe.data import DataLoader, DatasetWriter, MemmapDataset

    path, mib, resident_mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    row, chunk = 1024, 1024  # 4 KiB samples, 4 MiB chunks
    n = (mib << 20) // (row * 4)
    base = status("VmRSS")
    fields = {"inputs": ((row,), "float32"), "targets": ((), "int64")}
    with DatasetWriter(path, fields) as w:
        for k in range(n // chunk):
            ids = np.arange(k * chunk, (k + 1) * chunk)
            w.append(np.broadcast_to(ids[:, None].astype(np.float32), (chunk, row)), ids)
    ds = MemmapDataset(path, max_resident_bytes=resident_mib << 20)
    ok, count = True, 0
    for x, y in DataLoader(ds, 256):
        ok &= bool(np.array_equal(x.numpy().mean(axis=1), y.numpy()))  # touches every page
        count += len(y)
    seen = np.zeros(n, bool)
    for x, y in DataLoader(ds, 64, shuffle=True, seed=0):
        ok &= bool(np.array_equal(x.numpy()[:, -1], y.numpy()))
        seen[y.numpy()] = True
    print(json.dumps({"base": base, "peak": status("VmHWM"), "file": ds.nbytes, "ok": ok,
                      "count": count, "n": n, "all": bool(seen.all())}))
""")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux procfs")
def test_iterates_a_file_several_times_larger_than_the_memory_bound(tmp_path):
    file_mib, growth_bound_mib = 384, 64
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    try:
        out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "big"),
                              str(file_mib), "24"], capture_output=True, text=True,
                             env=env, timeout=120)
    finally:
        shutil.rmtree(tmp_path / "big", ignore_errors=True)  # pytest keeps tmp dirs
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["ok"] and r["all"] and r["count"] == r["n"]
    assert r["file"] >= 6 * (growth_bound_mib << 20)  # the data is 6x the bound
    grew = r["peak"] - r["base"]
    assert grew < growth_bound_mib << 20, (
        f"peak RSS grew by {grew >> 20} MiB over {r['base'] >> 20} MiB while reading a "
        f"{r['file'] >> 20} MiB file; the bound is {growth_bound_mib} MiB")
