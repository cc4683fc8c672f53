"""``hx.memory_snapshot()``: the live blocks of a device, each with its category and the
user's source line that allocated it, and the step's timeline of allocations and frees
with its peak (as PyTorch's ``torch.cuda.memory._snapshot()`` and its ``device_traces``).

Recording costs a stack walk per allocation, so it happens only while
``hx.record_memory_history()`` is on: it sets the allocator's ``on_allocate`` and
``on_free`` hooks, which are ``None`` (one attribute check per allocation) otherwise.

On the GPU every tensor's memory is an allocator block. CPU tensors own numpy memory, so
while history is recorded on the CPU each fresh tensor's buffer (and each raw array a
graph node keeps for its backward, such as attention's probabilities) is *adopted* by
the CPU allocator: counted as allocated until numpy's memory goes, so
``memory_stats("cpu")`` covers the tensors then. The hooks that do it (``Tensor._wrap``
and the autograd's ``record``) are put in place by ``record_memory_history`` and taken
away when it stops: nothing is wrapped otherwise.

Categories. A block's category is its allocation tag where that names a role
(``parameter``, ``gradient``, ``optimizer_state``: the optimizers' flat buffers); else
``parameter`` or ``gradient`` where it is a parameter's memory or its ``.grad``; else
``activation`` where a graph node saved it for backward (``op`` names the node); else
``temporary``.
"""

from __future__ import annotations

import collections
import gc
import json
import os
import sys
import threading
import time
import types
import weakref
from functools import partial

import numpy as np

from .atomic import AtomicFile
from .autograd import function as _function
from .memory import Block, get_allocator
from .tensor import Tensor

__all__ = ["memory_snapshot", "record_memory_history", "save_memory_snapshot",
           "load_memory_snapshot"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_ROLE_TAGS = ("parameter", "gradient", "optimizer_state")
_clock = time.perf_counter_ns


def _user_frames(limit: int = 4) -> list:
    """The innermost frames outside haelixe (the user's code), innermost first, each as
    (code, instruction offset): the line is read from them when a snapshot is taken
    (:func:`_frame_dicts`), which costs less than reading it at every allocation."""
    f = sys._getframe(2)
    frames = []
    while f is not None and len(frames) < limit:
        code = f.f_code
        if not code.co_filename.startswith(_PACKAGE):
            frames.append((code, f.f_lasti))
        f = f.f_back
    return frames


def _line_of(code, lasti: int) -> int | None:
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line
    return None


def _frame_dicts(frames, cache: dict) -> list:
    """(code, offset) frames as PyTorch's dicts: ``filename``, ``line``, ``name``."""
    out = []
    for frame in frames:
        d = cache.get(frame)
        if d is None:
            code, lasti = frame
            d = cache[frame] = {"filename": code.co_filename, "line": _line_of(code, lasti),
                                "name": code.co_name}
        out.append(dict(d))
    return out


class _Entry:
    """One block allocated while history was recorded."""

    __slots__ = ("key", "block", "size", "requested", "frames", "time_ns", "saved_by",
                 "saved_names", "category")

    def __init__(self, key, block, frames, time_ns):
        self.key = key
        self.block = weakref.ref(block)
        self.size, self.requested = block.size, block.requested
        self.frames = frames
        self.time_ns = time_ns
        self.saved_by: list = []  # weak references to the nodes that saved it
        self.saved_names: list = []  # and their names (kept once the nodes are gone)
        self.category = None  # set when it is freed


class _History:
    """What one allocator did while history was recorded: its live blocks with their
    lines, and every allocation and free in order (``trace``)."""

    def __init__(self, alloc, max_entries: int):
        self.alloc = alloc
        self.lock = threading.Lock()
        self.live: dict = {}  # id(handle) -> _Entry
        self.entries: dict = {}  # key -> _Entry, for the trace's blocks
        self.trace = collections.deque(maxlen=max_entries)  # (action, key, t, allocated)
        self.keys = 0
        self.t0 = _clock()
        self.start_allocated = alloc.stats()["allocated_bytes"]

    def allocated(self, block, allocated_bytes) -> None:  # the allocator's on_allocate
        frames = _user_frames()
        t = _clock() - self.t0
        with self.lock:
            self.keys += 1
            entry = _Entry(self.keys, block, frames, t)
            self.live[id(block.handle)] = self.entries[entry.key] = entry
            self._append(("alloc", entry.key, t, allocated_bytes))

    def freed(self, handle, tag, allocated_bytes) -> None:  # the allocator's on_free
        t = _clock() - self.t0
        with self.lock:
            entry = self.live.pop(id(handle), None)
            if entry is None:
                return  # a block from before recording: its bytes were in start_allocated
            entry.category = (tag if tag in _ROLE_TAGS else
                              "activation" if entry.saved_by else "temporary")
            self._append(("free", entry.key, t, allocated_bytes))

    def _append(self, item) -> None:
        trace = self.trace
        if len(trace) == trace.maxlen and trace[0][0] == "free":
            self.entries.pop(trace[0][1], None)  # its allocation went before
        trace.append(item)

    def saved(self, block, node) -> None:
        """``node`` keeps ``block`` for its backward."""
        with self.lock:
            entry = self.live.get(id(block.handle))
            if entry is not None:
                entry.saved_by.append(weakref.ref(node))
                if node.name not in entry.saved_names:
                    entry.saved_names.append(node.name)


# -- CPU tensors: adopted by the CPU allocator while recorded ---------------------------

def _root(a):
    """The ndarray owning ``a``'s memory, or None where numpy does not own it (a file's
    memory map, a foreign buffer)."""
    base = a.base
    while base is not None:
        if not isinstance(base, np.ndarray):
            return None
        a, base = base, base.base
    return a


class _CpuTracker:
    """Adopts the buffer of each CPU tensor made (and each raw array a node saves) into
    the CPU allocator, for as long as numpy's memory lives."""

    def __init__(self, alloc):
        self.alloc = alloc
        self.lock = threading.RLock()
        self.blocks: dict = {}  # id(root array) -> (weak ref to it, its adopted Block)

    def block_of(self, a, adopt: bool = True):
        """The adopted block of ndarray ``a``'s memory (adopting it now if ``adopt``)."""
        root = _root(a)
        if root is None or root.nbytes == 0:
            return None
        key = id(root)
        held = self.blocks.get(key)
        if held is not None and held[0]() is root:
            return held[1]
        if not adopt:
            return None
        block = self.alloc.adopt(root.nbytes)
        with self.lock:
            self.blocks[key] = (weakref.ref(root, lambda _, k=key: self._died(k)), block)
        return block

    def _died(self, key) -> None:
        with self.lock:
            held = self.blocks.pop(key, None)
        del held  # its Block goes now, which gives the bytes back to the counters

    def release(self) -> None:
        with self.lock:
            held, self.blocks = self.blocks, {}
        held.clear()


class _Recording:
    """The hooks of every device recorded now: the allocators' and, while any device
    records, ``Tensor._wrap`` (the CPU) and the autograd's ``record`` (saved tensors)."""

    def __init__(self):
        self.histories: dict = {}  # device name -> _History
        self.cpu: _CpuTracker | None = None
        self.saved_hooks: list = []  # what puts each hook back

    def start(self, alloc, max_entries) -> None:
        name = alloc.device_name
        if name in self.histories:
            return
        history = self.histories[name] = _History(alloc, max_entries)
        if name == "cpu":
            self.cpu = _CpuTracker(alloc)
        if not self.saved_hooks:
            self._install()
        alloc.on_allocate, alloc.on_free = history.allocated, history.freed

    def stop(self, alloc) -> None:
        history = self.histories.pop(alloc.device_name, None)
        if history is None:
            return
        alloc.on_allocate = alloc.on_free = None
        if alloc.device_name == "cpu" and self.cpu is not None:
            self.cpu.release()
            self.cpu = None
        if not self.histories:
            self._uninstall()

    def _install(self) -> None:
        wrap = Tensor.__dict__["_wrap"].__func__
        record = _function.record
        recording = self

        def tracked_wrap(raw):
            t = wrap(raw)
            cpu = recording.cpu
            data = t._storage.data
            if cpu is not None and isinstance(data, np.ndarray):
                cpu.block_of(data)
            return t

        def tracked_record(ctx, out, inputs, state):
            out = record(ctx, out, inputs, state)
            recording.note_saved(ctx)
            return out

        self._swap(wrap, tracked_wrap)
        self._swap(record, tracked_record)
        before = Tensor.__dict__["_wrap"]
        Tensor._wrap = staticmethod(tracked_wrap)
        self.saved_hooks.append(lambda: setattr(Tensor, "_wrap", before))

    def _swap(self, fn, replacement) -> None:
        """Put ``replacement`` wherever Haelixe's modules hold ``fn``: their globals and
        the closures that bound it when they were made (the ops' direct paths), so the
        code that runs with history off is the code that was there."""
        for mod in list(sys.modules.values()):
            d = getattr(mod, "__dict__", None)
            if d is not None and getattr(mod, "__name__", "").startswith("haelixe") \
                    and d.get(fn.__name__) is fn:
                d[fn.__name__] = replacement
                self.saved_hooks.append(partial(d.__setitem__, fn.__name__, fn))
        own = {id(c) for c in replacement.__closure__ or ()}  # (its own call of fn)
        for ref in gc.get_referrers(fn):
            if isinstance(ref, types.CellType) and ref.cell_contents is fn \
                    and id(ref) not in own:
                ref.cell_contents = replacement
                # (partial, not a lambda: a lambda's cell would hold fn, and be swapped)
                self.saved_hooks.append(partial(setattr, ref, "cell_contents", fn))

    def _uninstall(self) -> None:
        for undo in reversed(self.saved_hooks):
            undo()
        self.saved_hooks = []

    def note_saved(self, node) -> None:
        for block in _blocks_kept_by(node, self.cpu, adopt=True):
            alloc = block.allocator
            history = self.histories.get(alloc.device_name)
            if history is not None:
                history.saved(block, node)


def _blocks_of(value, cpu, adopt, out: list) -> list:
    """The blocks holding the memory of a Tensor, raw array or a tuple/list of them."""
    cls = value.__class__
    if cls is tuple or cls is list:
        for v in value:
            _blocks_of(v, cpu, adopt, out)
        return out
    if isinstance(value, Tensor):  # (one made before recording is not adopted now)
        value, adopt = value._storage.data, False
    elif "storage" in getattr(cls, "__slots__", ()):  # a raw GPU array
        value = getattr(value.storage, "data", None)
    if isinstance(value, Block):
        out.append(value)
    elif isinstance(value, np.ndarray) and cpu is not None:
        block = cpu.block_of(value, adopt)
        if block is not None:
            out.append(block)
    return out


def _blocks_kept_by(node, cpu, adopt) -> list:
    """The blocks a graph node keeps for its backward: its saved tensors and the raw
    arrays among its fields."""
    out: list = []
    saved = node.__dict__.get("saved")
    if saved:
        _blocks_of(saved, cpu, adopt, out)
    for name, v in node.__dict__.items():
        if name != "saved" and name != "next":
            _blocks_of(v, cpu, adopt, out)
    return out


_RECORDING = _Recording()
_LOCK = threading.Lock()


def record_memory_history(enabled: bool = True, device="gpu", max_entries: int = 100_000,
                          ) -> None:
    """Start (or, with ``enabled=False``, stop) recording each new block of ``device``
    with its source line, and every allocation and free (the last ``max_entries``);
    :func:`memory_snapshot` reads them."""
    alloc = get_allocator(device)
    with _LOCK:
        if enabled:
            _RECORDING.start(alloc, int(max_entries))
        else:
            _RECORDING.stop(alloc)


def _roles(cpu) -> tuple[set, set]:
    """ids of the blocks holding a parameter, and a parameter's gradient (read from the
    live tensors: a parameter outside an optimizer's flat buffer has no role tag)."""
    params, grads = set(), set()
    for o in gc.get_objects():
        cls = type(o)  # (not o.__class__: a dead weak proxy raises on that)
        if cls is Tensor or issubclass(cls, Tensor):
            if o._is_param:
                params.update(map(id, _blocks_of(o, cpu, False, [])))
                if o.grad is not None:
                    grads.update(map(id, _blocks_of(o.grad, cpu, False, [])))
    return params, grads


def memory_snapshot(device="gpu") -> dict:
    """What ``device``'s allocator held and did while history was recorded.

    ``blocks``: the live blocks allocated since recording began, oldest first, each a
    dict (``address``, ``size``, ``requested_size``, ``state``, ``category``, ``op``:
    the first node that saved an activation, ``saved_by``: every one, ``time_ns``,
    ``frames``: the user's innermost frames, ``filename``/``line``/``name``).
    ``trace``: every allocation and free since (``action``, ``block``: its index in
    ``timeline_blocks``, ``time_ns``, ``allocated_bytes`` after it). ``peak``: the
    highest ``allocated_bytes`` reached and the blocks live then. ``stats``: the
    allocator's ``stats()``."""
    alloc = get_allocator(device)
    stats = alloc.stats()
    with _LOCK:
        history = _RECORDING.histories.get(alloc.device_name)
        cpu = _RECORDING.cpu
    if history is None:
        raise RuntimeError(
            f"memory_snapshot: no memory history is recorded on {alloc.device_name!r}; "
            f"call hx.record_memory_history(device={alloc.device_name!r}) before the "
            f"allocations to be listed")
    live_blocks = []
    with history.lock:
        for entry in history.live.values():
            block = entry.block()
            if block is not None:
                live_blocks.append((entry, block, block.tag))
        trace = list(history.trace)
        entries = dict(history.entries)
    params, grads = _roles(cpu)
    lines: dict = {}  # (code, offset) -> its frame dict, read once per snapshot
    categories = {}
    blocks = []
    for entry, block, tag in sorted(live_blocks, key=lambda e: e[0].key):
        nodes = [n for n in (r() for r in entry.saved_by)
                 if n is not None and n.__dict__.get("saved") is not None]
        category = (tag if tag in _ROLE_TAGS else "parameter" if id(block) in params
                    else "gradient" if id(block) in grads
                    else "activation" if nodes else "temporary")
        categories[entry.key] = category
        blocks.append({"address": id(block.handle), "size": entry.size,
                       "requested_size": entry.requested, "category": category,
                       "op": nodes[0].name if nodes else None,
                       "saved_by": [n.name for n in nodes],
                       "state": "active_allocated", "time_ns": entry.time_ns,
                       "frames": _frame_dicts(entry.frames, lines), "key": entry.key})
    return {"device": alloc.device_name, "blocks": blocks,
            **_timeline(history, trace, entries, categories, lines), "stats": stats}


def _timeline(history, trace, entries, categories, lines) -> dict:
    """The trace with each block named once, and the peak with what held it."""
    index: dict = {}
    timeline_blocks = []
    events = []
    peak_at, peak = -1, history.start_allocated
    for action, key, t, allocated in trace:
        entry = entries.get(key)
        if entry is None:
            continue
        if key not in index:
            index[key] = len(timeline_blocks)
            category = categories.get(key) or entry.category or "temporary"
            timeline_blocks.append({"size": entry.size, "category": category,
                                    "op": entry.saved_names[0] if entry.saved_names
                                    else None, "frames": _frame_dicts(entry.frames[:1], lines),
                                    "key": key})
        events.append({"action": action, "block": index[key], "time_ns": t,
                       "allocated_bytes": allocated})
        if allocated > peak:
            peak_at, peak = len(events) - 1, allocated
    held = set()
    for ev in events[:peak_at + 1]:
        (held.add if ev["action"] == "alloc" else held.discard)(ev["block"])
    by_category: dict = {}
    for b in held:
        c = timeline_blocks[b]["category"]
        by_category[c] = by_category.get(c, 0) + timeline_blocks[b]["size"]
    recorded = sum(by_category.values())
    return {"timeline_blocks": timeline_blocks, "trace": events,
            "start_allocated_bytes": history.start_allocated,
            "peak": {"allocated_bytes": peak, "event": peak_at,
                     "time_ns": events[peak_at]["time_ns"] if peak_at >= 0 else 0,
                     "blocks": sorted(held), "by_category": by_category,
                     "before_recording_bytes": peak - recorded}}


# -- the file format ----------------------------------------------------------------------

SNAPSHOT_FORMAT = "haelixe-memory-snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_KEYS = ("device", "blocks", "timeline_blocks", "trace", "peak", "stats")


def save_memory_snapshot(path, snapshot: dict | None = None, device="gpu") -> None:
    """Write ``snapshot`` (default: :func:`memory_snapshot` of ``device`` now) to
    ``path`` as JSON, atomically (a reader never sees half a file);
    :func:`load_memory_snapshot` and ``hx.viz.MemorySnapshotView(path)`` read it."""
    snap = memory_snapshot(device) if snapshot is None else snapshot
    missing = [k for k in _SNAPSHOT_KEYS if k not in snap]
    if missing:
        raise ValueError(f"save_memory_snapshot: not a memory snapshot (no "
                         f"{', '.join(missing)}); pass what hx.memory_snapshot() returned")
    body = {"format": SNAPSHOT_FORMAT, "version": SNAPSHOT_VERSION, **snap}
    with AtomicFile(path) as tmp, open(tmp.temp_path, "w", encoding="utf-8") as f:
        json.dump(body, f)


def load_memory_snapshot(path) -> dict:
    """The snapshot :func:`save_memory_snapshot` wrote to ``path``, as
    :func:`memory_snapshot` returned it."""
    try:
        with open(path, encoding="utf-8") as f:
            body = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"load_memory_snapshot: {os.fspath(path)!r} is not a memory "
                         f"snapshot file (not JSON: {err}); write one with "
                         f"hx.save_memory_snapshot(path)") from None
    if not isinstance(body, dict) or body.get("format") != SNAPSHOT_FORMAT:
        raise ValueError(f"load_memory_snapshot: {os.fspath(path)!r} is JSON but not a "
                         f"memory snapshot (no format {SNAPSHOT_FORMAT!r}); write one with "
                         f"hx.save_memory_snapshot(path)")
    if body.get("version") != SNAPSHOT_VERSION:
        raise ValueError(f"load_memory_snapshot: {os.fspath(path)!r} is version "
                         f"{body.get('version')!r} of the format; this Haelixe reads "
                         f"version {SNAPSHOT_VERSION}")
    missing = [k for k in _SNAPSHOT_KEYS if k not in body]
    if missing:
        raise ValueError(f"load_memory_snapshot: {os.fspath(path)!r} lacks "
                         f"{', '.join(missing)}: the file was cut short or edited")
    del body["format"], body["version"]
    stats = body["stats"]  # (JSON's object keys are strings: the bins are keyed by size)
    stats["bins"] = {int(k): v for k, v in stats.get("bins", {}).items()}
    return body
