"""Machine-specific CPU tuning, behind one switch: the ``HAELIXE_TUNING`` variable.

Each piece makes the CPU faster on some machines and changes nothing a user sees but
speed (``dot_sums`` also the last bits of some sums: BLAS adds them up in another,
as accurate, order). Which pieces are on is decided once, at import:

- ``HAELIXE_TUNING`` unset: the defaults (``DEFAULT``), the pieces measured to help;
- ``HAELIXE_TUNING=0`` (or ``none``): every piece off, the plain numpy/BLAS behaviour;
- ``HAELIXE_TUNING=all``: every piece on;
- ``HAELIXE_TUNING=malloc,idle_cores``: those pieces on, the others off.

The pieces:

``malloc``
    glibc's malloc keeps freed buffers in its heap from the start (``mallopt`` of its
    mmap and trim thresholds, to the limits glibc itself reaches later), instead of
    serving every buffer of 128 KiB or more with a fresh mmap until the process frees a
    large one. Linux with glibc only; a ``MALLOC_*`` variable in the environment wins.
``idle_cores``
    the thread policy (threads.py) measures the cores other processes leave idle from
    ``/proc/stat``, twice a second, and gives a large product no more BLAS threads than
    that; off, it takes every usable core (up to ``set_num_threads``), as numpy does.
``dot_sums``
    full and last-dim sums of short contiguous float32/64 buffers as BLAS products with
    a vector of ones, where numpy's reduction machinery costs more per call.

docs/cpu_tuning.md has the measurements behind the defaults.
"""

from __future__ import annotations

import ctypes
import os
import sys

PIECES = ("malloc", "idle_cores", "dot_sums")
DEFAULT = frozenset(PIECES)


def _parse(value: str | None) -> frozenset:
    if value is None or value.strip() == "":
        return DEFAULT
    value = value.strip().lower()
    if value in ("0", "none", "off"):
        return frozenset()
    if value in ("1", "all", "on"):
        return frozenset(PIECES)
    names = frozenset(v.strip() for v in value.split(",") if v.strip())
    unknown = sorted(names - set(PIECES))
    if unknown:
        raise ValueError(f"HAELIXE_TUNING={value!r}: unknown piece(s) {unknown}; expected "
                         f"0, all, or a comma-separated list of {', '.join(PIECES)}")
    return names


ON = _parse(os.environ.get("HAELIXE_TUNING"))


def on(piece: str) -> bool:
    """Whether ``piece`` (one of PIECES) is on in this process."""
    return piece in ON


def keep_freed_memory() -> None:
    """The ``malloc`` piece (see the module's docstring); called once by cpu.py."""
    if not sys.platform.startswith("linux") or any(k.startswith("MALLOC_") for k in os.environ):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):  # another C library: its own policy stands
        pass
