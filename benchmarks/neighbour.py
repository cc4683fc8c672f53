"""A CPU-bound neighbour for benchmarks' --busy runs: one process spinning on one core
for as long as the ``with`` block lasts (another user's job on a shared machine)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time


@contextlib.contextmanager
def busy_neighbour(enabled: bool = True):
    if not enabled:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.5)  # let it reach full speed before anything is timed
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def load_note() -> str:
    """The machine's load averages (1, 5, 15 min), for the record of a run."""
    try:
        one, five, fifteen = os.getloadavg()
        return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"
    except (OSError, AttributeError):
        return "load average unknown"


def median_range(values) -> str:
    v = sorted(values)
    n = len(v)
    med = v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    return f"{med:8.1f}  [{v[0]:.1f} .. {v[-1]:.1f}]"


def median(values) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
