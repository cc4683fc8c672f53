"""Datasets whose samples lie along axis 0 of a few equally long arrays ("fields"), and
the on-disk layout that maps them into memory instead of reading them.

On disk a dataset is a directory of standard .npy files plus a small manifest:

    sine_train/
      manifest.json   {"format": "haelixe-dataset", "version": 1, "length": 100000,
                       "fields": [{"name": "inputs",  "dtype": "float32", "shape": [32, 1]},
                                  {"name": "targets", "dtype": "float32", "shape": [32, 1]}],
                       "meta": {...anything JSON...}}
      inputs.npy      (100000, 32, 1) float32
      targets.npy     (100000, 32, 1) float32

Each .npy stays readable by plain ``numpy.load``. The manifest fixes the field order (the
order the DataLoader yields them in), records each field's dtype (.npy cannot name
bfloat16: numpy writes it as raw 2-byte void) and is checked against every file's header.
A directory without a manifest but with ``inputs.npy`` (and ``targets.npy``) also opens.
"""

from __future__ import annotations

import json
import mmap
import os

import numpy as np

from .. import dtype as dt
from ..atomic import AtomicDirectory
from ..creation import from_numpy
from .npy import NpyFormatError, NpyStreamWriter, map_array, read_header

MANIFEST = "manifest.json"
FORMAT = "haelixe-dataset"
VERSION = 1


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
        return tuple(self.tensors[n][start:stop] for n in self.fields)

    def gather(self, indices, guard: ResidentGuard | None = None) -> tuple:
        """The samples at ``indices`` of every field, copied into fresh tensors (in the
        order given). ``guard`` matters only for memory-mapped data."""
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

    def release(self, start: int = 0, stop: int | None = None) -> None:
        """Let go of the resident memory behind samples ``start:stop``."""

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
    """

    mapped = True

    def __init__(self, path, writable: bool = False):
        self.path = os.path.abspath(os.fspath(path))
        specs, self._manifest_length, self.meta = _read_layout(self.path)
        arrays, self._maps, self._headers = [], {}, {}
        for name, (file, dtype, tail) in specs.items():
            header = read_header(file)
            _check_field(header, name, dtype, tail, self._manifest_length)
            flat, mm = map_array(header, writable)
            if dtype is not None and flat.dtype != dtype.np:  # bfloat16 stored as V2
                flat = flat.view(dtype.np)
            arrays.append(flat.reshape(header.shape))
            self._maps[name], self._headers[name] = mm, header
        super().__init__(*arrays, names=tuple(specs))

    def _advise(self, advice, start: int, stop: int | None) -> None:
        stop = self.length if stop is None else min(stop, self.length)
        if start >= stop:
            return
        page = mmap.PAGESIZE
        for name, mm in self._maps.items():
            row = self.arrays[name][:1].nbytes
            off = self._headers[name].offset
            lo = (off + start * row) // page * page
            hi = min(-(-(off + stop * row) // page) * page, len(mm))
            if hi > lo:
                mm.madvise(advice, lo, hi - lo)

    def gather(self, indices, guard: ResidentGuard | None = None) -> tuple:
        """The samples at ``indices`` of every field, copied into fresh tensors (in the
        order given).

        With a ``guard`` the copy goes in pieces, and whenever this process's mapped
        file pages have grown past the guard's bound the mapping's pages are dropped:
        one touch of a random sample can map a whole large page-cache folio (up to
        2 MiB), so a single unchecked batch could map far more than its own size.
        """
        idx = np.asarray(indices)
        if guard is None:
            return super().gather(idx)
        piece = guard.samples_per_check
        outs = []
        for name in self.fields:
            src = self.arrays[name]
            out = np.empty((len(idx),) + src.shape[1:], src.dtype)
            for lo in range(0, len(idx), piece):
                np.take(src, idx[lo:lo + piece], axis=0, out=out[lo:lo + piece])
                if guard.over():
                    self.release()  # the copies made so far do not depend on the mapping
                    guard.reset()
            outs.append(from_numpy(out))
        return tuple(outs)

    def prefetch(self, start: int, stop: int) -> None:
        """Ask the kernel to read samples ``start:stop`` ahead (MADV_WILLNEED): the disk
        reads overlap the work on earlier batches, and nothing is copied."""
        if hasattr(mmap, "MADV_WILLNEED"):
            self._advise(mmap.MADV_WILLNEED, start, stop)

    def release(self, start: int = 0, stop: int | None = None) -> None:
        """Drop this process's resident pages of samples ``start:stop`` (MADV_DONTNEED).

        Safe at any time, even for batches still in use: the mapping is shared and
        file-backed, so a later touch reads the page back from the page cache or disk.
        The DataLoader calls this to keep resident memory bounded.
        """
        if hasattr(mmap, "MADV_DONTNEED"):
            self._advise(mmap.MADV_DONTNEED, start, stop)

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f"; {self.path})"


class ResidentGuard:
    """Watches this process's file-backed resident memory (the ``shared`` column of
    /proc/self/statm: mapped file and shmem pages) for growth past ``limit`` bytes
    since the last :meth:`reset`. The DataLoader uses one to decide when to call
    ``MemmapDataset.release``."""

    LARGEST_FAULT = 2 << 20  # the most one page fault maps (a PMD-sized folio)

    def __init__(self, limit: int):
        self.limit = int(limit)
        # how many random samples may be touched between checks and stay within limit/2
        self.samples_per_check = max(1, self.limit // (2 * self.LARGEST_FAULT))
        self.base = self.resident()

    @staticmethod
    def resident() -> int:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[2]) * mmap.PAGESIZE

    @classmethod
    def create(cls, limit: int) -> ResidentGuard | None:
        """A guard, or None where there is no procfs (the kernel's reclaim then bounds
        the mapping's memory, under pressure only)."""
        try:
            return cls(limit)
        except (OSError, ValueError, IndexError):
            return None

    def over(self) -> bool:
        return self.resident() - self.base > self.limit

    def reset(self) -> None:
        self.base = self.resident()


def _read_layout(path: str):
    """{field: (file, DType or None, shape tail or None)}, the length the manifest
    states (or None) and its meta dict."""
    if os.path.isfile(path):
        return {"inputs": (path, None, None)}, None, {}
    if not os.path.isdir(path):
        raise FileNotFoundError(f"MemmapDataset: no dataset at {path}; write one with "
                                f"hx.data.DatasetWriter or hx.data.write_dataset")
    mpath = os.path.join(path, MANIFEST)
    if not os.path.exists(mpath):
        names = [n for n in ("inputs", "targets")
                 if os.path.exists(os.path.join(path, n + ".npy"))]
        if "inputs" not in names:
            raise FileNotFoundError(f"MemmapDataset: {path} has neither {MANIFEST} nor "
                                    f"inputs.npy; write it with hx.data.DatasetWriter")
        return {n: (os.path.join(path, n + ".npy"), None, None) for n in names}, None, {}
    try:
        with open(mpath, encoding="utf8") as f:
            m = json.load(f)
        if m.get("format") != FORMAT:
            raise ValueError(f"format is {m.get('format')!r}, not {FORMAT!r}")
        if m.get("version") != VERSION:
            raise ValueError(f"version {m.get('version')!r}; this Haelixe reads {VERSION}")
        length = int(m["length"])
        specs = {}
        for fld in m["fields"]:
            name = str(fld["name"])
            specs[name] = (os.path.join(path, name + ".npy"), dt.from_name(fld["dtype"]),
                           tuple(int(n) for n in fld["shape"]))
        if not specs:
            raise ValueError("no fields")
    except (ValueError, KeyError, TypeError) as e:
        raise NpyFormatError(f"MemmapDataset: {mpath} is damaged ({type(e).__name__}: "
                             f"{e}); write the dataset again") from None
    return specs, length, m.get("meta", {})


def _check_field(header, name, dtype, tail, length) -> None:
    """The .npy header must agree with the manifest and hold a Haelixe dtype in C order."""
    p = header.path
    if header.fortran_order and len(header.shape) > 1:
        raise NpyFormatError(f"MemmapDataset: {p} is stored in Fortran (column-major) "
                             f"order, so a sample's values are not contiguous; save it "
                             f"with np.save(path, np.ascontiguousarray(a))")
    if not header.shape:
        raise NpyFormatError(f"MemmapDataset: {p} holds a 0-d array; samples lie along "
                             f"axis 0, so it needs at least one dimension")
    if dtype is None:
        if header.dtype.kind == "V" and header.dtype.itemsize == 2:
            raise NpyFormatError(
                f"MemmapDataset: {p} holds raw 2-byte values (|V2): numpy writes bfloat16 "
                f"so, losing its name; add a {MANIFEST} naming the dtype (write the "
                f"dataset with hx.data.DatasetWriter)")
        try:
            dt.from_numpy(header.dtype)
        except TypeError:
            hint = (f"it is big-endian; store it as {header.dtype.newbyteorder('<')}"
                    if header.dtype.byteorder == ">" else
                    f"convert it with .astype() to one of {[d.name for d in dt.ALL]}")
            raise NpyFormatError(f"MemmapDataset: {p} has dtype {header.dtype}, which "
                                 f"Haelixe has no type for; {hint}") from None
        return
    ok_bf16 = dtype is dt.bfloat16 and header.dtype.kind == "V" and header.dtype.itemsize == 2
    if header.dtype != dtype.np and not ok_bf16:
        raise NpyFormatError(f"MemmapDataset: {p} holds {header.dtype} but {MANIFEST} says "
                             f"field {name!r} is {dtype.name}; the file was replaced or "
                             f"written with the wrong dtype, write the dataset again")
    if header.shape[1:] != tail:
        raise NpyFormatError(f"MemmapDataset: {p} has samples of shape {header.shape[1:]} "
                             f"but {MANIFEST} says {tail} for field {name!r}")
    if header.shape[0] != length:
        raise NpyFormatError(f"MemmapDataset: {p} has {header.shape[0]} samples but "
                             f"{MANIFEST} says {length}; the file was replaced or cut, "
                             f"write the dataset again")


class DatasetWriter:
    """Build a dataset directory chunk by chunk (see the module docstring).

        fields = {"inputs": ((32, 1), "float32"), "targets": ((32, 1), "float32")}
        with hx.data.DatasetWriter("sine_train", fields, meta={"task": "sine"}) as w:
            for x, y in chunks:
                w.append(x, y)

    Memory use is one chunk. Everything is written into a hidden temporary directory
    beside ``path`` (each file fsynced) and renamed to ``path`` only at close, so an
    interrupted run never leaves a partial dataset; ``overwrite`` replaces an existing
    one.
    """

    def __init__(self, path, fields: dict, meta: dict | None = None,
                 overwrite: bool = False):
        if not fields:
            raise ValueError("DatasetWriter: give at least one field, e.g. "
                             "{'inputs': ((32, 1), 'float32')}")
        self.path = os.fspath(path)
        self.meta = dict(meta or {})
        json.dumps(self.meta)  # fail now, not at close, if meta is not JSON
        self.dtypes = {n: dt.as_dtype(d) for n, (_, d) in fields.items()}
        self._dir = AtomicDirectory(self.path, overwrite)
        self._writers = {}
        try:
            for n, (tail, _) in fields.items():
                self._writers[n] = NpyStreamWriter(
                    os.path.join(self._dir.temp_path, n + ".npy"), tail, self.dtypes[n].np)
        except BaseException:
            self.abort()
            raise
        self.closed = False

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
        for n, c in named.items():
            self._writers[n].append(c)

    def close(self) -> None:
        """Finish every file, write the manifest and move the directory into place."""
        if self.closed:
            return
        self.closed = True
        try:
            for w in self._writers.values():
                w.close()
            manifest = {"format": FORMAT, "version": VERSION, "length": self.length,
                        "fields": [{"name": n, "dtype": self.dtypes[n].name,
                                    "shape": list(w.shape_tail)}
                                   for n, w in self._writers.items()],
                        "meta": self.meta}
            with open(os.path.join(self._dir.temp_path, MANIFEST), "w", encoding="utf8") as f:
                json.dump(manifest, f, indent=1)
            self._dir.commit()
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Drop everything written; ``path`` is left as it was."""
        self.closed = True
        for w in self._writers.values():
            if not w.closed:
                w.abort()
        self._dir.discard()

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_dataset(path, meta: dict | None = None, overwrite: bool = False,
                  **arrays) -> None:
    """Write in-memory arrays as a dataset directory: ``write_dataset(p, inputs=x,
    targets=y)``. For data larger than memory use :class:`DatasetWriter`."""
    arrays = {n: (a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray)
                  else np.asarray(a)) for n, a in arrays.items()}
    fields = {n: (a.shape[1:], a.dtype) for n, a in arrays.items()}
    with DatasetWriter(path, fields, meta, overwrite) as w:
        w.append(**arrays)

