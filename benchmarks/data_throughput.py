"""Batch read throughput: hx.data.DataLoader over a MemmapDataset against raw numpy
memmap slicing (sequential) and fancy indexing (shuffled), side by side in one run.

    python benchmarks/data_throughput.py [--mib 512] [--batch 256] [--repeats 3]

Every batch is consumed the same way on both sides (a sum over every value, so every
byte is read). The file is read once before timing, so both sides read from the page
cache: the figures compare the loaders' overheads, not the disk. The raw side sorts each
shuffled batch's indices too, as the DataLoader does.

Two DataLoader columns: "bounded" is the default MemmapDataset, which keeps its resident
pages under max_resident_bytes (256 MiB) when the data is larger (its shuffled batches
are then read with pread, one call per run of consecutive samples); "unbounded" passes
max_resident_bytes=None and, like numpy's memmap, lets the mapping grow to the whole
file. Ratios are DataLoader / numpy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np

from haelixe.data import DataLoader, DatasetWriter, MemmapDataset


def _write(path: str, n: int, row: int) -> None:
    fields = {"inputs": ((row,), "float32"), "targets": ((row,), "float32")}
    chunk = max(1, (8 << 20) // (row * 4))
    rng = np.random.default_rng(0)
    with DatasetWriter(path, fields) as w:
        for lo in range(0, n, chunk):
            k = min(chunk, n - lo)
            x = rng.standard_normal((k, row), dtype=np.float32)
            w.append(x, x * 0.5)


def _consume(*arrays) -> float:
    return float(sum(np.add.reduce(a, axis=None) for a in arrays))


def _raw(path: str, batch: int, shuffle: bool, seed: int) -> int:
    x = np.load(os.path.join(path, "inputs.npy"), mmap_mode="r")
    y = np.load(os.path.join(path, "targets.npy"), mmap_mode="r")
    n = len(x)
    if not shuffle:
        for lo in range(0, n, batch):
            _consume(x[lo:lo + batch], y[lo:lo + batch])
    else:
        perm = np.random.default_rng(seed).permutation(n)
        for lo in range(0, n, batch):
            idx = np.sort(perm[lo:lo + batch])
            _consume(x[idx], y[idx])
    return x.nbytes + y.nbytes


def _loader(path: str, batch: int, shuffle: bool, seed: int, prefetch: int,
            bound) -> int:
    ds = MemmapDataset(path, max_resident_bytes=bound)
    for xb, yb in DataLoader(ds, batch, shuffle=shuffle, seed=seed, prefetch=prefetch):
        _consume(xb.numpy(), yb.numpy())
    return ds.nbytes


def _best(repeats: int, fn, *args) -> tuple[float, int]:
    best, nbytes = float("inf"), 0
    for _ in range(repeats):
        t = time.perf_counter()
        nbytes = fn(*args)
        best = min(best, time.perf_counter() - t)
    return best, nbytes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", type=int, default=512, help="dataset size (both fields)")
    p.add_argument("--rows", default="128,4096",
                   help="bytes per sample per field, comma-separated (128 = a sine sample)")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--prefetch", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dir", default=None, help="where to write the dataset (default: tmp)")
    args = p.parse_args(argv)

    root = tempfile.mkdtemp(prefix="hx-data-bench-", dir=args.dir)
    try:
        print(f"{args.mib} MiB per dataset, batch {args.batch}, prefetch {args.prefetch}, "
              f"best of {args.repeats}, page cache warm")
        print(f"{'sample':>8} {'order':>10} {'numpy':>7} {'bounded':>8} {'ratio':>6} "
              f"{'unbounded':>10} {'ratio':>6}   (GB/s)")
        for row_bytes in (int(r) for r in args.rows.split(",")):
            row = max(1, row_bytes // 4)
            n = (args.mib << 20) // (2 * row * 4)
            path = os.path.join(root, f"ds{row_bytes}")
            _write(path, n, row)
            _raw(path, args.batch, False, 0)  # warm the page cache
            for shuffle in (False, True):
                t_raw, b_raw = _best(args.repeats, _raw, path, args.batch, shuffle, 0)
                g_raw = b_raw / t_raw / 1e9
                g_hx = []
                for bound in (256 << 20, None):
                    t_hx, b_hx = _best(args.repeats, _loader, path, args.batch, shuffle, 0,
                                       args.prefetch, bound)
                    g_hx.append(b_hx / t_hx / 1e9)
                order = "shuffled" if shuffle else "sequential"
                print(f"{row_bytes:>7}B {order:>10} {g_raw:>7.2f} {g_hx[0]:>8.2f} "
                      f"{g_hx[0] / g_raw:>6.2f} {g_hx[1]:>10.2f} {g_hx[1] / g_raw:>6.2f}")
            shutil.rmtree(path)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
