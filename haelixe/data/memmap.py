"""Datasets whose samples lie along axis 0 of a few equally long arrays ("fields"), and
the on-disk layout that maps them into memory instead of reading them.

On disk a dataset is a directory of standard .npy files plus a small manifest:

    sine_train/
      manifest.json   {"format": "haelixe-dataset", "version": 2, "length": 100000,
                       "fields": [{"name": "inputs",  "dtype": "float32", "shape": [32, 1]},
                                  {"name": "targets", "dtype": "float32", "shape": [32, 1]}],
                       "meta": {...anything JSON...}, "checksum": "..."}
      inputs.npy      (100000, 32, 1) float32
      targets.npy     (100000, 32, 1) float32

Each .npy stays readable by plain ``numpy.load``. The manifest fixes the field order (the
order the DataLoader yields them in), records each field's dtype (.npy cannot name
bfloat16: numpy writes it as raw 2-byte void) and is checked against every file's header
(see manifest.py). A directory without a manifest but with ``inputs.npy`` (and
``targets.npy``) also opens.

A file cut short while it is mapped would make the next touch of a page past its new end
a SIGBUS, which no Python code can catch. So every batch read (``ds[i]``, ``slice``,
``gather``, ``prefetch``) first checks each file's size against its header and raises
NpyFormatError if it shrank. A view handed out before the file was cut is beyond that
check: datasets are rewritten whole (DatasetWriter renames a new directory into place,
which leaves an open mapping intact), never in place.
"""

from __future__ import annotations

import json
import mmap
import os
import threading

import numpy as np

from .. import dtype as dt
from ..atomic import AtomicDirectory, CommitOnSuccess, naming_the_path
from ..creation import from_numpy
from ..fileio import read_exact
from .manifest import check_field, check_field_names, read_layout, write_manifest
from .npy import NpyFormatError, NpyStreamWriter, map_array, read_header, truncation_error


class ArrayDataset:
    """Samples along axis 0 of equally long arrays, one per field.

    ``ds[i]`` and ``ds.slice(a, b)`` are views (no copy) of one tensor per field, so
    every batch of a field shares that field's Storage; ``ds.gather(indices)`` copies the
    chosen samples into fresh tensors.
    """

    mapped = False  # True when the arrays are memory-mapped files

    def __init__(self, *arrays, names=None):
        if not arrays:
            raise ValueError("ArrayDataset needs at least one array")
        arrays = [a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray)
                  else np.asarray(a) for a in arrays]
        if names is None:
            names = ("inputs", "targets")[:len(arrays)] if len(arrays) <= 2 else \
                tuple(f"field{i}" for i in range(len(arrays)))
        if len(names) != len(arrays):
            raise ValueError(f"ArrayDataset: {len(arrays)} arrays but {len(names)} names")
        lengths = {n: (a.shape[0] if a.ndim else None) for n, a in zip(names, arrays)}
        if None in lengths.values() or len(set(lengths.values())) != 1:
            raise ValueError(f"ArrayDataset: every field needs the same number of samples "
                             f"along axis 0, got {lengths}")
        self.fields = tuple(names)
        self.arrays = dict(zip(self.fields, arrays))
        self.length = arrays[0].shape[0]
        # One tensor (so one Storage) per field; batches are slices of it.
        self.tensors = {n: from_numpy(a) for n, a in self.arrays.items()}

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i):
        """Sample ``i`` of every field, as views."""
        if not -self.length <= i < self.length:
            raise IndexError(f"{type(self).__name__}: index {i} out of range for "
                             f"{self.length} samples")
        return tuple(self.tensors[n][i] for n in self.fields)

    def slice(self, start: int, stop: int) -> tuple:
        """Samples ``start:stop`` of every field, as zero-copy views."""
        start, stop, _ = slice(start, stop).indices(self.length)
        stop = max(start, stop)
        out = []
        for n in self.fields:
            t = self.tensors[n]
            inner = t.strides[0]
            # a direct view: half the cost of t[start:stop], and the same Storage
            out.append(t._view((stop - start,) + t.shape[1:], t.strides,
                               t.offset + start * inner))
        return tuple(out)

    def gather(self, indices) -> tuple:
        """The samples at ``indices`` of every field, copied into fresh tensors (in the
        order given)."""
        idx = np.asarray(indices)
        return tuple(from_numpy(np.take(self.arrays[n], idx, axis=0)) for n in self.fields)

    @property
    def sample_nbytes(self) -> int:
        """Bytes of one sample over all fields."""
        return sum(a[:1].nbytes for a in self.arrays.values())

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    # Hooks the DataLoader calls; in-memory data has nothing to do.
    def prefetch(self, start: int, stop: int) -> None:
        """Start reading samples ``start:stop`` in the background."""

    def release(self) -> None:
        """Let go of the resident memory behind the data."""

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}: {a.shape[1:]} {a.dtype}" for n, a in self.arrays.items())
        return f"{type(self).__name__}({self.length} samples; {fields})"


class MemmapDataset(ArrayDataset):
    """A dataset directory (see the module docstring) mapped into memory, never read whole.

    Pages are read from disk when a batch touches them, so the data may be far larger
    than RAM. Batches of consecutive samples (``slice``, an unshuffled DataLoader) are
    views whose Storage is the mapping itself; they are read-only unless the dataset was
    opened with ``writable=True`` (then writes go to the file): ``clone()`` a batch to
    modify it. ``path`` may also be a single .npy file (one field, "inputs").

    ``max_resident_bytes`` bounds the memory the mapping's pages take in this process
    when the data is larger than it (None: no bound, the kernel reclaims such pages only
    under memory pressure):

    - views (``slice``, ``ds[i]``) are counted as they are handed out, and when they
      could map more than the bound the mapping's pages are dropped (:meth:`release`),
      to be read back from the page cache or disk if touched again;
    - ``gather`` reads the chosen samples with pread(2) instead of through the mapping:
      one touch of a random sample can map a whole 2 MiB page-cache folio, so random
      batches through the mapping would fill the bound after a few dozen samples.
    """

    mapped = True

    def __init__(self, path, writable: bool = False,
                 max_resident_bytes: int | None = 256 << 20):
        self.path = os.path.abspath(os.fspath(path))
        specs, self._manifest_length, self.meta = read_layout(self.path)
        arrays, self._maps, self._headers = [], {}, {}
        for name, (file, dtype, tail) in specs.items():
            header = read_header(file)
            check_field(header, name, dtype, tail, self._manifest_length)
            self._headers[name] = header
        lengths = {h.path: h.shape[0] for h in self._headers.values()}
        if len(set(lengths.values())) > 1:
            raise NpyFormatError(f"MemmapDataset: the fields' files hold different numbers "
                                 f"of samples {lengths}; each field needs one per sample")
        for name, (_, dtype, _) in specs.items():
            header = self._headers[name]
            flat, mm = map_array(header, writable)
            if dtype is not None and flat.dtype != dtype.np:  # bfloat16 stored as V2
                flat = flat.view(dtype.np)
            arrays.append(flat.reshape(header.shape))
            self._maps[name] = mm
        super().__init__(*arrays, names=tuple(specs))
        self.max_resident_bytes = max_resident_bytes
        self._rows = {n: a[:1].nbytes for n, a in self.arrays.items()}
        mapped = sum(len(mm) for mm in self._maps.values())
        # Smaller data than the bound can never pass it: no counting, no pread.
        self.bounded = max_resident_bytes is not None and mapped > max_resident_bytes
        self._touch = {n: _TouchedRegions(len(mm)) for n, mm in self._maps.items()}
        self._lock = threading.Lock()  # slice (caller) and gather (prefetch thread)
        self._fds = {}
        if self.bounded:
            for n in self.fields:
                self._fds[n] = os.open(self._headers[n].path, os.O_RDONLY)

    def _check_sizes(self) -> None:
        """Refuse to read through a mapping whose file was cut since it was mapped: a
        touch past the file's new end would kill the process with SIGBUS."""
        for name, mm in self._maps.items():
            header = self._headers[name]
            size = mm.size()  # an fstat of the mapping's own descriptor
            if size < header.file_size:
                raise truncation_error(header, size)

    # -- views, counted --------------------------------------------------------------
    def _charge(self, start: int, stop: int) -> None:
        """Count the 2 MiB regions samples ``start:stop`` span; drop the mapping first
        when the count would pass ``max_resident_bytes``."""
        if not self.bounded:
            return
        spans = {}
        for n, row in self._rows.items():
            off = self._headers[n].offset
            spans[n] = ((off + start * row) >> _REGION_SHIFT,
                        (off + max(stop * row - 1, start * row) >> _REGION_SHIFT) + 1)
        with self._lock:
            after = sum(t.bound(t.fresh(*spans[n])) for n, t in self._touch.items())
            if after > self.max_resident_bytes and any(t.count for t in self._touch.values()):
                self._release_locked()
            for n, t in self._touch.items():
                t.mark(*spans[n])

    def __getitem__(self, i):
        self._check_sizes()
        out = super().__getitem__(i)
        self._charge(i % self.length, i % self.length + 1)
        return out

    def slice(self, start: int, stop: int) -> tuple:
        self._check_sizes()
        out = super().slice(start, stop)
        self._charge(*slice(start, stop).indices(self.length)[:2])
        return out

    slice.__doc__ = ArrayDataset.slice.__doc__

    # -- gathers, read past the mapping when bounded ---------------------------------
    def gather(self, indices) -> tuple:
        """The samples at ``indices`` (1-D) of every field, copied into fresh tensors
        (in the order given); read with pread(2) when the dataset is ``bounded``. The
        rows are read in ascending order, so the reads sweep the file forwards, and
        placed where ``indices`` asks."""
        idx = np.asarray(indices).reshape(-1)
        self._check_sizes()
        ascending = len(idx) < 2 or bool((np.diff(idx) >= 0).all())
        order = None if ascending else np.argsort(idx, kind="stable")
        reads = idx if order is None else idx[order]
        outs = []
        for n in self.fields:
            a = self.arrays[n]
            if self.bounded:
                got = np.empty((len(idx),) + a.shape[1:], a.dtype)
                _pread_rows(self._fds[n], self._headers[n], self._rows[n], reads,
                            got.reshape(len(idx), self._rows[n] // a.itemsize)
                            .view(np.uint8), self.length)
            else:
                got = np.take(a, reads, axis=0)
            if order is not None:
                placed = np.empty_like(got)
                placed[order] = got
                got = placed
            outs.append(from_numpy(got))
        return tuple(outs)

    def prefetch(self, start: int, stop: int) -> None:
        """Ask the kernel to read samples ``start:stop`` ahead (MADV_WILLNEED): the disk
        reads overlap the work on earlier batches, and nothing is copied or mapped."""
        stop = min(stop, self.length)
        if start >= stop or not hasattr(mmap, "MADV_WILLNEED"):
            return
        self._check_sizes()
        page = mmap.PAGESIZE
        for n, mm in self._maps.items():
            off, row = self._headers[n].offset, self._rows[n]
            lo = (off + start * row) // page * page
            hi = min(off + stop * row, len(mm))
            if hi > lo:
                mm.madvise(mmap.MADV_WILLNEED, lo, hi - lo)

    def release(self) -> None:
        """Drop this process's resident pages of the mapping (MADV_DONTNEED).

        Safe at any time, even with batches still in use: the mapping is shared and
        file-backed, so a later touch reads the page back from the page cache or disk
        (a writable mapping's changes are in the page cache, not lost).
        """
        with self._lock:
            self._release_locked()

    def _release_locked(self) -> None:
        if hasattr(mmap, "MADV_DONTNEED"):
            for mm in self._maps.values():
                if len(mm):
                    mm.madvise(mmap.MADV_DONTNEED, 0, len(mm))
        for t in self._touch.values():
            t.clear()

    @property
    def resident_bound(self) -> int:
        """When ``bounded``: an upper bound on the bytes of the mapping resident in this
        process because of the views handed out since the last release."""
        return sum(t.bound() for t in self._touch.values())

    def close(self) -> None:
        """Close the descriptors used by gather (the mapping lives as long as any view)."""
        fds, self._fds, self.bounded = self._fds, {}, False
        for fd in fds.values():
            os.close(fd)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter teardown)
            pass

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f"; {self.path})"


def _pread_rows(fd: int, header, row: int, idx: np.ndarray, out: np.ndarray,
                length: int) -> None:
    """Read rows ``idx`` (row bytes each, after the header) into the rows of ``out``
    (uint8, one row per index), one system call per run of consecutive indices."""
    if len(idx) == 0 or row == 0:
        return
    if idx.min() < -length or idx.max() >= length:
        raise IndexError(f"MemmapDataset.gather: index out of range for {length} samples "
                         f"(got {idx.min()}..{idx.max()})")
    idx = np.where(idx < 0, idx + length, idx)
    cuts = np.flatnonzero(np.diff(idx) != 1) + 1
    starts, ends = np.r_[0, cuts].tolist(), np.r_[cuts, len(idx)].tolist()
    for s, e, first in zip(starts, ends, idx[starts].tolist()):
        try:
            read_exact(fd, out[s:e], header.offset + first * row)
        except EOFError:
            raise truncation_error(header, os.fstat(fd).st_size) from None


# A touch maps at most the naturally aligned 2 MiB around it: the largest page-cache folio
# one fault maps (the 64 KiB fault-around window lies inside it too). So the resident part
# of a mapping is at most 2 MiB times the number of 2 MiB regions touched.
_REGION_SHIFT = 21
_REGION = 1 << _REGION_SHIFT


class _TouchedRegions:
    """Which 2 MiB regions of one mapping were touched since the last release (a
    bytearray: slicing and counting it stay in C, a few hundred ns per batch)."""

    def __init__(self, size: int):
        self.size = size
        self.mask = bytearray((size >> _REGION_SHIFT) + 1)
        self.count = 0

    def fresh(self, lo: int, hi: int) -> int:
        """How many of regions ``lo:hi`` are not touched yet."""
        return self.mask.count(0, lo, hi)

    def mark(self, lo: int, hi: int) -> None:
        self.count += self.mask.count(0, lo, hi)
        self.mask[lo:hi] = b"\x01" * (hi - lo)

    def bound(self, extra: int = 0) -> int:
        return min((self.count + extra) << _REGION_SHIFT, self.size)

    def clear(self) -> None:
        if self.count:
            self.mask = bytearray(len(self.mask))
            self.count = 0


class DatasetWriter(CommitOnSuccess):
    """Build a dataset directory chunk by chunk (see the module docstring).

        fields = {"inputs": ((32, 1), "float32"), "targets": ((32, 1), "float32")}
        with hx.data.DatasetWriter("sine_train", fields, meta={"task": "sine"}) as w:
            for x, y in chunks:
                w.append(x, y)

    Memory use is one chunk. Everything is written into a hidden temporary directory
    beside ``path`` (each file fsynced) and renamed to ``path`` only at close, so an
    interrupted run never leaves a partial dataset; ``overwrite`` replaces an existing
    one. Field names are plain identifiers (they name the files).
    """

    def __init__(self, path, fields: dict, meta: dict | None = None,
                 overwrite: bool = False):
        if not fields:
            raise ValueError("DatasetWriter: give at least one field, e.g. "
                             "{'inputs': ((32, 1), 'float32')}")
        check_field_names(fields, "DatasetWriter")
        self.path = os.fspath(path)
        # as JSON gives it back (so its checksum is that of what is read); fails now,
        # not at close, if meta is not JSON
        self.meta = json.loads(json.dumps(dict(meta or {})))
        self.dtypes = {n: dt.as_dtype(d) for n, (_, d) in fields.items()}
        self._writers = {}
        self._dir = AtomicDirectory(self.path, overwrite)
        self.closed = False
        try:
            for n, (tail, _) in fields.items():
                self._writers[n] = NpyStreamWriter(
                    os.path.join(self._dir.temp_path, n + ".npy"), tail, self.dtypes[n].np)
        except BaseException:
            self.discard()
            raise

    @property
    def fields(self) -> tuple:
        return tuple(self._writers)

    @property
    def length(self) -> int:
        return next(iter(self._writers.values())).count

    def append(self, *chunks, **named) -> None:
        """Append one chunk per field, positionally (in field order) or by name; every
        chunk holds the same number of samples."""
        if chunks and named:
            raise TypeError("DatasetWriter.append: give chunks positionally or by name, "
                            "not both")
        if chunks:
            if len(chunks) != len(self._writers):
                raise TypeError(f"DatasetWriter.append: {len(chunks)} chunks for fields "
                                f"{self.fields}")
            named = dict(zip(self._writers, chunks))
        if set(named) != set(self._writers):
            raise TypeError(f"DatasetWriter.append: chunks for {sorted(named)}, the "
                            f"fields are {list(self.fields)}")
        counts = {n: len(c) for n, c in named.items()}
        if len(set(counts.values())) != 1:
            raise ValueError(f"DatasetWriter.append: fields got different sample counts "
                             f"{counts}")
        with naming_the_path(self.path):
            for n, c in named.items():
                self._writers[n].append(c)

    def commit(self) -> None:
        """Finish every file, write the manifest and move the directory into place."""
        if self.closed:
            return
        self.closed = True
        for w in self._writers.values():
            w.close()
        with naming_the_path(self.path):
            write_manifest(self._dir.temp_path, self.length,
                           [(n, self.dtypes[n], w.shape_tail)
                            for n, w in self._writers.items()], self.meta)
            self._dir.commit()

    def discard(self) -> None:
        """Drop everything written; ``path`` is left as it was."""
        self.closed = True
        for w in self._writers.values():
            w.discard()
        self._dir.discard()

    # the file-like names: close() publishes (discarding on failure), abort() drops
    close = CommitOnSuccess.finish
    abort = discard


def write_dataset(path, meta: dict | None = None, overwrite: bool = False,
                  **arrays) -> None:
    """Write in-memory arrays as a dataset directory: ``write_dataset(p, inputs=x,
    targets=y)``. For data larger than memory use :class:`DatasetWriter`."""
    arrays = {n: (a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray)
                  else np.asarray(a)) for n, a in arrays.items()}
    fields = {n: (a.shape[1:], a.dtype) for n, a in arrays.items()}
    with DatasetWriter(path, fields, meta, overwrite) as w:
        w.append(**arrays)

