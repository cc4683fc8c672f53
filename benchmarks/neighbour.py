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
    """The machine's load averages (1, 5, 15 min) and the kernels numpy's BLAS runs, for
    the record of a run."""
    try:
        one, five, fifteen = os.getloadavg()
        load = f"load average {one:.2f} {five:.2f} {fifteen:.2f}"
    except (OSError, AttributeError):
        load = "load average unknown"
    return f"{load}; {blas_note()}"


def blas_note() -> str:
    """numpy's BLAS and the kernels it chose (OpenBLAS picks them by CPU when it loads,
    unless OPENBLAS_CORETYPE names others)."""
    try:
        import numpy  # noqa: F401 (loads the BLAS that threadpoolctl then finds)
        from threadpoolctl import threadpool_info
    except ImportError:
        return "numpy's BLAS unknown"
    for lib in threadpool_info():
        if lib.get("user_api") == "blas" and "numpy" in lib.get("filepath", ""):
            forced = os.environ.get("OPENBLAS_CORETYPE")
            return (f"numpy's BLAS {lib.get('internal_api')} {lib.get('version')}, "
                    f"{lib.get('architecture')} kernels"
                    + (f" (set by OPENBLAS_CORETYPE={forced})" if forced else ""))
    return "numpy's BLAS unknown"


def median_range(values) -> str:
    v = sorted(values)
    n = len(v)
    med = v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    return f"{med:8.1f}  [{v[0]:.1f} .. {v[-1]:.1f}]"


def median(values) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
