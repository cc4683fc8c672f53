"""``hx.memory_snapshot()``: the live blocks of an allocator, each with its category and
the user's source line that allocated it (as PyTorch's ``torch.cuda.memory._snapshot()``).

Source lines cost a stack walk per allocation, so they are recorded only while
``hx.record_memory_history()`` is on: it sets the allocator's ``on_allocate`` hook, which
is ``None`` (one attribute check per allocation) otherwise. A block's category is its
allocation tag (``haelixe.memory.TAGS``: parameter, gradient, optimizer_state,
activation, temporary), read when the snapshot is taken, so a block retagged later shows
its current role.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref

from .memory import get_allocator

__all__ = ["memory_snapshot", "record_memory_history"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


class _History:
    """The blocks one allocator handed out while history was recorded, with their lines."""

    def __init__(self):
        self.lock = threading.Lock()
        self.blocks: dict = {}  # id(block) -> (weak ref, frames, sequence number)
        self.seq = 0

    def __call__(self, block) -> None:
        frames = _user_frames()
        key = id(block)
        with self.lock:
            self.seq += 1
            self.blocks[key] = (weakref.ref(block, lambda _, k=key: self._drop(k)), frames,
                                self.seq)

    def _drop(self, key) -> None:
        with self.lock:
            self.blocks.pop(key, None)

    def live(self) -> list:
        with self.lock:
            entries = list(self.blocks.values())
        out = []
        for ref, frames, seq in entries:
            block = ref()
            if block is not None:
                out.append((seq, block, frames))
        return sorted(out, key=lambda e: e[0])


_HISTORIES: dict = {}  # device type -> its _History while recording


def _user_frames(limit: int = 4) -> list:
    """The innermost frames outside haelixe (the user's code), innermost first."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f = f.f_back
    frames = []
    while f is not None and len(frames) < limit:
        frames.append({"filename": f.f_code.co_filename, "line": f.f_lineno,
                       "name": f.f_code.co_name})
        f = f.f_back
    return frames


def record_memory_history(enabled: bool = True, device="gpu") -> None:
    """Start (or, with ``enabled=False``, stop) recording each new block's source line on
    ``device``'s allocator; :func:`memory_snapshot` lists the live ones."""
    alloc = get_allocator(device)
    key = alloc.device_name
    if enabled:
        if key not in _HISTORIES:
            _HISTORIES[key] = alloc.on_allocate = _History()
    else:
        _HISTORIES.pop(key, None)
        alloc.on_allocate = None


def memory_snapshot(device="gpu") -> dict:
    """The live blocks allocated while history was recorded, oldest first, each a dict
    (``address``, ``size``, ``requested_size``, ``category``, ``frames``: the user's
    innermost frames, ``filename``/``line``/``name``), with the allocator's stats."""
    alloc = get_allocator(device)
    history = _HISTORIES.get(alloc.device_name)
    if history is None:
        raise RuntimeError(
            f"memory_snapshot: no memory history is recorded on {alloc.device_name!r}; "
            f"call hx.record_memory_history(device={alloc.device_name!r}) before the "
            f"allocations to be listed")
    blocks = [{"address": id(block.handle), "size": block.size,
               "requested_size": block.requested, "category": block.tag,
               "state": "active_allocated", "frames": frames}
              for _, block, frames in history.live()]
    return {"device": alloc.device_name, "blocks": blocks, "stats": alloc.stats()}
