"""Positional reads straight into a buffer that already exists (a tensor's own memory),
so a file is never held twice: once as bytes and once as the array made from them.

A read at a position the file no longer reaches (it was truncated) raises EOFError
naming how far the file went; callers turn it into their own error.
"""

from __future__ import annotations

import os


def _preadv(fd: int, view: memoryview, pos: int) -> int:
    if hasattr(os, "preadv"):
        return os.preadv(fd, [view], pos)  # straight into the buffer, no copy
    data = os.pread(fd, len(view), pos)
    view[:len(data)] = data
    return len(data)


def read_exact(fd: int, buffer, pos: int) -> None:
    """Fill ``buffer`` (anything with the writable buffer protocol, e.g. a uint8 view of
    an array) from ``fd`` starting at byte ``pos``, whatever the kernel's chunking."""
    view = memoryview(buffer).cast("B")
    while len(view):
        got = _preadv(fd, view, pos)
        if got == 0:
            raise EOFError(f"the file ends at byte {pos}, {len(view)} bytes short")
        view, pos = view[got:], pos + got
