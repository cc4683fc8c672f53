"""Careful reading of files that may be damaged or crafted: positional reads straight
into a buffer that already exists (a tensor's own memory, so a file is never held twice),
strict JSON, and a canonical digest of a JSON header.

A read at a position the file no longer reaches (it was truncated) raises EOFError
naming how far the file went; callers turn it and the JSON errors into their own.
"""

from __future__ import annotations

import hashlib
import json
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


def _unique_keys(pairs: list) -> dict:
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} appears twice")
        out[k] = v
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")


def strict_json(raw, constants: bool = False):
    """Parse ``raw`` (UTF-8 bytes or str) as JSON, refusing a key repeated in one object
    and, unless ``constants``, NaN and Infinity. Every failure (bad bytes, bad syntax,
    nesting too deep for the parser) is a ValueError."""
    try:
        text = bytes(raw).decode("utf8") if not isinstance(raw, str) else raw
        return json.loads(text, object_pairs_hook=_unique_keys,
                          **({} if constants else {"parse_constant": _no_constant}))
    except RecursionError:
        raise ValueError("nested too deeply") from None


def json_digest(obj) -> str:
    """SHA-256 (hex) of ``obj``'s canonical JSON (sorted keys, no spaces, ASCII)."""
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()
