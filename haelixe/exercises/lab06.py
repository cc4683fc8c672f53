"""Lab 06 · Out-of-core data: the exercises, their checkers, and the lab's memory gauge.

The zero-copy batch is checked on a small dataset file the checker writes itself (values
against ``MemmapDataset.slice``, sharing against the mapping); page counts against a
byte-by-byte count; the atomic write against simulated failures in a scratch directory.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

from ..tensor import Tensor
from .core import Lab, first_hint
from .values import as_array, as_int, describe

LAB = Lab(6, "Out-of-core data")


def resident_mib() -> float:
    """This process's resident memory in MiB, measured portably: psutil where installed;
    otherwise the peak from ``resource.getrusage`` (Unix; it only grows, so growth read
    from it is an upper bound)."""
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except ImportError:
        pass
    try:
        import resource
        import sys
    except ImportError:
        raise RuntimeError("resident_mib: no way to read resident memory here; install "
                           "psutil (pip install psutil)") from None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes vs KiB


# -- 6.1 a zero-copy batch ----------------------------------------------------------------

def _small_dataset(workdir):
    from ..data import MemmapDataset, write_sine_dataset

    path = os.path.join(workdir, "sine")
    write_sine_dataset(path, 2048, seed=0)
    return MemmapDataset(path)


def engine_zero_copy_batch(t, start, stop):
    """Samples start:stop of ``t`` by the engine's slicing (a view)."""
    return t[start:stop]


@LAB.exercise("6.1", "A zero-copy batch", section="2. Batches are views of the mapping",
              fallback=lambda: engine_zero_copy_batch)
def zero_copy(answer, fb):
    workdir = tempfile.mkdtemp(prefix="haelixe-check-")
    try:
        ds = _small_dataset(workdir)
        t = ds.tensors["inputs"]
        for start, stop in ((0, 16), (100, 116), (2000, 2048), (5, 6)):
            want = ds.slice(start, stop)[0]
            call = f"zero_copy_batch(t, {start}, {stop})"
            raw = fb.call(answer, t, start, stop, shown=call)
            if not isinstance(raw, Tensor):
                fb.fail(f"{call} should return a Haelixe Tensor (a view of t), got "
                        f"{describe(raw, 60)}", hint="t.as_strided(shape, strides, offset) "
                        "returns a Tensor over t's storage")
            got, complaint = as_array(raw, want.shape, call)
            if complaint:
                hint = (f"samples start:stop are {stop - start} samples: the first dim is "
                        f"stop - start; the others are t's") if raw.ndim == t.ndim else \
                    "keep t's dims: only the first one changes"
                fb.fail(complaint, hint=hint)
            if not np.array_equal(got, want.numpy()):
                offset = raw.offset - t.offset
                hint = (f"your batch starts {offset} elements into the storage: sample "
                        f"`start` begins start · strides[0] = {start * t.strides[0]} "
                        f"elements in (offsets count elements, not samples)"
                        if raw.storage is t.storage else
                        "batch[i] must be sample start + i of t")
                fb.fail(f"{call}: the values differ from samples {start}:{stop}",
                        expected=want, got=raw, hint=hint)
            if raw.storage is not t.storage:
                fb.fail(f"{call} has the right values, but in a storage of its own: it was "
                        f"copied ({raw.numel() * raw.element_size()} bytes read)",
                        hint="a batch of consecutive samples is a view: t's shape with "
                             "stop - start first, t's strides, offset t.offset + start · "
                             "strides[0]")
        shared = np.shares_memory(raw.numpy(), ds.arrays["inputs"])
        return (f"every batch is a view of the mapped file (numpy agrees the bytes are "
                f"shared: {shared})")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# -- 6.2 the pages a batch touches --------------------------------------------------------

# (start, stop, sample_bytes, header_bytes, page): the early cases tell the typical
# mistakes apart (a straddled boundary first, then a header that shifts one)
_PAGE_CASES = [(0, 16, 128, 128, 4096), (30, 34, 128, 128, 4096), (0, 32, 128, 128, 4096),
               (31, 32, 128, 128, 4096), (1000, 1016, 128, 128, 4096),
               (0, 1024, 128, 128, 4096), (7, 90, 96, 64, 4096), (3, 400, 128, 128, 16384)]


def _pages_by_bytes(start, stop, row, header, page) -> int:
    first, end = header + start * row, header + stop * row  # the batch's bytes: [first, end)
    return int(np.unique(np.arange(first, end) // page).size)


def reference_pages_touched(start, stop, sample_bytes, header_bytes, page=4096):
    """Pages holding bytes header + start·sample_bytes ... header + stop·sample_bytes - 1."""
    first, last = header_bytes + start * sample_bytes, header_bytes + stop * sample_bytes - 1
    return last // page - first // page + 1


@LAB.exercise("6.2", "The pages a batch touches", section="3. Iterating under a memory bound",
              fallback=lambda: reference_pages_touched)
def pages(answer, fb):
    for start, stop, row, header, page in _PAGE_CASES:
        want = _pages_by_bytes(start, stop, row, header, page)
        call = f"pages_touched({start}, {stop}, {row}, {header}, {page})"
        raw = fb.call(answer, start, stop, row, header, page, shown=call)
        got, complaint = as_int(raw, call)
        if complaint:
            fb.fail(complaint, expected=want, got=raw, hint="return a count of pages")
        if got == want:
            continue
        nbytes = (stop - start) * row
        hint = first_hint(
            (got == _pages_by_bytes(start, stop, row, 0, page),
             "the file starts with the .npy header: sample 0 begins header_bytes into the "
             "file, and every page boundary is counted from the file's start"),
            (got == -(-nbytes // page),
             "that is how many pages the bytes would fill if they started on a page "
             "boundary; a batch that straddles a boundary touches both pages: count from "
             "the page of its first byte to the page of its last byte"),
            otherwise="first byte: header + start · sample_bytes; last byte: header + "
                      "stop · sample_bytes - 1; count the pages from the one holding the "
                      "first to the one holding the last")
        fb.fail(f"{call}: a batch of {nbytes} bytes", expected=want, got=got, hint=hint)
    return "every page count matches a byte-by-byte count, headers and boundaries included"


# -- 6.3 an atomic write ------------------------------------------------------------------

class SimulatedCrash(Exception):
    """Raised by the checker's chunks mid-way, standing in for a crash or a full disk."""


def _failing_chunks():
    yield b"half"
    yield b"-written"
    raise SimulatedCrash("the write failed half-way (simulated)")


def _leftovers(directory, keep) -> list[str]:
    return sorted(set(os.listdir(directory)) - set(keep))


@LAB.exercise("6.3", "An atomic write", section="4. Training from the file, and a checkpoint")
def atomic(answer, fb):
    workdir = tempfile.mkdtemp(prefix="haelixe-check-")
    try:
        path = os.path.join(workdir, "model.bin")
        fb.call(answer, path, [b"new ", b"content"], shown="atomic_write(path, chunks)")
        if not os.path.exists(path) or open(path, "rb").read() != b"new content":
            found = open(path, "rb").read() if os.path.exists(path) else "no file"
            fb.fail("atomic_write(path, [b'new ', b'content']) should leave exactly "
                    "b'new content' at path", expected=b"new content", got=found)
        for before in (b"old, complete content", None):
            if before is None:
                os.remove(path)
            else:
                with open(path, "wb") as f:
                    f.write(before)
            try:
                fb.call(answer, path, _failing_chunks(), passthrough=(SimulatedCrash,),
                        shown="atomic_write(path, chunks that fail half-way)")
            except SimulatedCrash:
                pass  # letting the failure through is right; so is reporting it otherwise
            now = open(path, "rb").read() if os.path.exists(path) else None
            if now != before:
                where = "over an existing file" if before else "to a new path"
                fb.fail(f"a write that failed half-way {where} left {now!r} at path",
                        expected=before if before else "no file", got=now,
                        hint="write everything to a temporary file in the same directory, "
                             "flush and fsync it, then os.replace(tmp, path): the rename is "
                             "atomic, so path only ever holds a complete file")
            extra = _leftovers(workdir, ["model.bin"])
            if extra:
                fb.fail(f"a failed write left {extra} behind in the directory",
                        hint="when writing fails, remove the temporary file "
                             "(try/except: os.remove(tmp); raise)")
        return ("complete writes land whole; a failed write leaves the old file (or none) "
                "and no temporary behind")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
