"""The .npy format, read through a memory mapping and written as a stream.

Reading validates the header against the file's size before mapping it, so a truncated
or damaged file fails with a message that says what is wrong instead of a bare numpy or
mmap error. Writing puts a fixed-width header first and rewrites it with the final
sample count at close, so a file larger than RAM is built chunk by chunk; the file is
written under a temporary name and renamed into place only once complete.
"""

from __future__ import annotations

import ast
import math
import mmap
import os
import struct
import warnings
from dataclasses import dataclass

import numpy as np
from numpy.lib import format as npformat

from ..atomic import AtomicFile, CommitOnSuccess, naming_the_path

MAGIC = b"\x93NUMPY"
_ALIGN = 64  # numpy aligns the data start to 64 bytes
_COUNT_WIDTH = 20  # digits reserved for the sample count (2**64 has 20)
_MAX_HEADER = 1 << 16  # numpy writes a few hundred bytes; reading more is damage


class NpyFormatError(ValueError):
    """A .npy file (or a dataset directory of them) is truncated, damaged, or holds
    something that cannot be mapped."""


@dataclass(frozen=True)
class NpyHeader:
    """Where a .npy file's array lives: ``offset`` bytes in, ``shape`` of ``dtype``."""

    path: str
    shape: tuple
    dtype: np.dtype
    fortran_order: bool
    offset: int
    file_size: int

    @property
    def data_nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def _damaged(path, text: str, why: str) -> NpyFormatError:
    return NpyFormatError(f"{path}: damaged .npy header {text.strip()[:120]!r} ({why}); "
                          f"the file is corrupted")


def _parse_header_text(path, text: str) -> tuple[tuple, bool, np.dtype]:
    """shape, fortran_order and dtype from the header's dict literal, checked as numpy
    checks them (exactly these three keys, a tuple of ints, a bool)."""
    try:
        with warnings.catch_warnings():  # (a stray backslash warns, naming no file)
            warnings.simplefilter("ignore")
            d = ast.literal_eval(text)
    except Exception as e:  # noqa: BLE001 (literal_eval raises many kinds)
        raise _damaged(path, text, f"{type(e).__name__}: {e}") from None
    if not isinstance(d, dict) or set(d) != {"descr", "fortran_order", "shape"}:
        raise _damaged(path, text, "expected a dict of 'descr', 'fortran_order', 'shape'")
    shape, fortran = d["shape"], d["fortran_order"]
    if not isinstance(shape, tuple) or not all(type(n) is int and n >= 0 for n in shape):
        raise _damaged(path, text, f"shape {shape!r} is not a tuple of counts")
    if not isinstance(fortran, bool):
        raise _damaged(path, text, f"fortran_order {fortran!r} is not a bool")
    try:
        dtype = npformat.descr_to_dtype(d["descr"])
    except Exception as e:  # noqa: BLE001 (descr_to_dtype raises many kinds)
        raise _damaged(path, text, f"descr: {type(e).__name__}: {e}") from None
    return shape, fortran, dtype


def read_header(path) -> NpyHeader:
    """Parse and check the header of the .npy file at ``path`` without reading its data.

    Raises NpyFormatError when the file is not .npy, its header is damaged, or its size
    disagrees with the header (truncated, or trailing bytes).
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        prefix = f.read(12)
        if len(prefix) < 10 or prefix[:6] != MAGIC:
            raise NpyFormatError(
                f"{path}: not a .npy file (starts with {prefix[:8]!r}, expected the magic "
                f"{MAGIC!r}); write it with numpy.save or hx.data.write_npy_stream")
        major = prefix[6] if prefix[7] == 0 else None  # numpy writes only x.0
        if major == 1:
            hlen, start = struct.unpack("<H", prefix[8:10])[0], 10
        elif major in (2, 3):
            if len(prefix) < 12:
                raise NpyFormatError(f"{path}: truncated inside the .npy header "
                                     f"({size} bytes)")
            hlen, start = struct.unpack("<I", prefix[8:12])[0], 12
        else:
            raise NpyFormatError(f"{path}: unsupported .npy format version {prefix[6]}."
                                 f"{prefix[7]} (numpy writes 1.0, 2.0 or 3.0)")
        if start + hlen > size:
            raise NpyFormatError(
                f"{path}: truncated inside the .npy header (the header claims {hlen} bytes, "
                f"the file has {size} in all); the file was cut short, write it again")
        if hlen > _MAX_HEADER:
            raise NpyFormatError(f"{path}: a .npy header of {hlen} bytes (this reader takes "
                                 f"up to {_MAX_HEADER}); the file is corrupted")
        f.seek(start)
        raw = f.read(hlen)
    text = raw.decode("utf8" if major == 3 else "latin1", errors="replace")
    shape, fortran, dtype = _parse_header_text(path, text)
    header = NpyHeader(path, shape, dtype, fortran, start + hlen, size)
    have = size - header.offset
    if have < header.data_nbytes:
        raise NpyFormatError(
            f"{path}: truncated: the header says shape {shape} of {dtype} "
            f"({header.data_nbytes} bytes of data) but the file holds only {have} bytes "
            f"after the header; it was cut short (an interrupted copy or write), write it "
            f"again")
    if have > header.data_nbytes:
        raise NpyFormatError(
            f"{path}: {have - header.data_nbytes} unexpected bytes after the data (shape "
            f"{shape} of {dtype} needs {header.data_nbytes}); the file is corrupted")
    return header


def truncation_error(header: NpyHeader, actual: int) -> NpyFormatError:
    """The error for a file found shorter than its header says, after it was opened."""
    return NpyFormatError(
        f"{header.path} is now {actual} bytes but its header needs {header.file_size}: it "
        f"was truncated or rewritten while open; open it again (write datasets with "
        f"hx.data.DatasetWriter, which replaces them whole)")


def map_array(header: NpyHeader, writable: bool = False) -> tuple[np.ndarray, mmap.mmap]:
    """The file's data as a flat 1-D array backed by a shared memory mapping of the file
    (nothing is read until touched), and the mapping itself (for madvise, and
    ``size()``, the file's current size). ``writable`` maps it read-write: writes reach
    the file."""
    if header.dtype.hasobject:
        raise NpyFormatError(f"{header.path}: holds Python objects ({header.dtype}), "
                             f"which cannot be memory-mapped")
    count = math.prod(header.shape)
    with open(header.path, "r+b" if writable else "rb") as f:
        # mmap keeps its own duplicate of the descriptor; the file may be closed now
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_WRITE if writable
                           else mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped: it was emptied since
            raise truncation_error(header, os.fstat(f.fileno()).st_size) from None
    if len(mm) < header.file_size:  # cut since its header was read: a touch would fault
        mm.close()
        raise truncation_error(header, len(mm))
    return np.ndarray((count,), header.dtype, buffer=mm, offset=header.offset), mm


def _header_bytes(shape: tuple, dtype: np.dtype, width: int | None = None) -> bytes:
    """A version 1.0/2.0 .npy header for ``shape``, padded with spaces to ``width`` bytes
    (or to numpy's 64-byte alignment)."""
    d = repr({"descr": npformat.dtype_to_descr(dtype), "fortran_order": False,
              "shape": tuple(shape)})
    for major, fmt in ((1, "<H"), (2, "<I")):
        pre = len(MAGIC) + 2 + struct.calcsize(fmt)
        total = width or -(-(pre + len(d) + 1) // _ALIGN) * _ALIGN
        hlen = total - pre
        if hlen < 2**(8 * struct.calcsize(fmt)) and hlen >= len(d) + 1:
            return MAGIC + bytes([major, 0]) + struct.pack(fmt, hlen) + \
                (d + " " * (hlen - len(d) - 1) + "\n").encode("latin1")
    raise NpyFormatError(f"write_npy_stream: cannot fit a header for shape {shape} "
                         f"of {dtype} in {width} bytes")


class NpyStreamWriter(CommitOnSuccess):
    """Append samples to a .npy file of shape (n, *shape_tail), n counted as you go.

        with hx.data.write_npy_stream("x.npy", (32, 1), "float32") as w:
            for chunk in chunks:          # each (k, 32, 1)
                w.append(chunk)

    Only one chunk is in memory at a time. The header is written first with room for
    any count and filled in at :meth:`close`; the file appears at ``path`` only then
    (temporary file, fsync, rename), so an interrupted write never leaves a partial file.
    """

    def __init__(self, path, shape_tail, dtype):
        self.path = os.fspath(path)
        self.shape_tail = tuple(int(n) for n in shape_tail)
        self.dtype = np.dtype(dtype)
        if self.dtype.hasobject:
            raise TypeError(f"write_npy_stream: dtype {self.dtype} holds Python objects; "
                            f"use a numeric dtype")
        self.count = 0
        # The widest count gives the longest header; every real count pads to it.
        self._width = len(_header_bytes((10**_COUNT_WIDTH - 1, *self.shape_tail),
                                        self.dtype))
        self.closed = True  # until the file is open: nothing to discard before that
        self._atomic = AtomicFile(self.path)
        try:
            self._file = open(self._atomic.temp_path, "wb")  # noqa: SIM115 (in commit)
        except BaseException:
            self._atomic.discard()
            raise
        self.closed = False
        self._file.write(b"\0" * self._width)

    def append(self, chunk) -> None:
        """Write ``chunk`` (shape (k, *shape_tail)) after the samples already written."""
        if self.closed:
            raise ValueError(f"write_npy_stream: {self.path} is already closed")
        a = chunk.numpy() if hasattr(chunk, "numpy") and not isinstance(chunk, np.ndarray) \
            else np.asarray(chunk)
        if a.ndim == 0 or a.shape[1:] != self.shape_tail:
            raise ValueError(f"write_npy_stream.append: chunk of shape {a.shape} for "
                             f"{self.path}, whose samples have shape {self.shape_tail}; "
                             f"give (k, {', '.join(map(str, self.shape_tail))})")
        if a.dtype != self.dtype:
            if not np.can_cast(a.dtype, self.dtype, "same_kind"):
                raise TypeError(f"write_npy_stream.append: chunk of dtype {a.dtype} for "
                                f"{self.path} of dtype {self.dtype}; convert it with "
                                f".astype({str(self.dtype)!r})")
            a = a.astype(self.dtype)
        # as bytes: bfloat16 has no buffer-protocol format code
        with naming_the_path(self.path):
            self._file.write(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
        self.count += a.shape[0]

    def commit(self) -> None:
        """Fill in the count, flush to disk and move the file into place."""
        if self.closed:
            return
        self.closed = True
        with naming_the_path(self.path):
            self._file.seek(0)
            self._file.write(_header_bytes((self.count, *self.shape_tail), self.dtype,
                                           self._width))
            self._file.close()
            self._atomic.commit()

    def discard(self) -> None:
        """Drop the partial file; ``path`` is left as it was."""
        self.closed = True
        try:
            self._file.close()
        except OSError:  # (the flush of what is dropped anyway: a full disk again)
            pass
        self._atomic.discard()

    # the file-like names: close() publishes (discarding on failure), abort() drops
    close = CommitOnSuccess.finish
    abort = discard

    def __del__(self):
        # Garbage-collected without close(): not complete, so never published.
        if getattr(self, "closed", True) is False:
            self.discard()


def write_npy_stream(path, shape_tail, dtype) -> NpyStreamWriter:
    """Open a streaming .npy writer; see :class:`NpyStreamWriter`."""
    return NpyStreamWriter(path, shape_tail, dtype)
