"""``hx.memory_snapshot()``: the live blocks of a device, each with its category and the
user's source line that allocated it, and the step's timeline of allocations and frees
with its peak (as PyTorch's ``torch.cuda.memory._snapshot()`` and its ``device_traces``).

Recording happens only while ``hx.record_memory_history()`` is on. It sets the
allocator's ``on_allocate`` and ``on_free`` hooks, and registers one memory observer in
:data:`haelixe.storage.OBSERVERS`, which ``Tensor._wrap`` tells of each fresh tensor and
the autograd's ``record`` of each graph node; with history off the hooks are ``None``
and the list is empty (one falsy check per tensor and per node).

On the GPU every tensor's memory is an allocator block. CPU tensors own numpy memory, so
while history is recorded on the CPU each fresh tensor's buffer (and each raw array a
graph node keeps for its backward, such as attention's probabilities) is counted by the
CPU allocator (``Allocator.adopt``) until numpy's memory goes, so ``memory_stats("cpu")``
covers the tensors then. A CPU buffer's free is noted (with its time) at the next
allocation, the next read of the counters or the next snapshot after numpy's memory
went, in the order the frees came.

Each block keeps its user's innermost two frames as (code object, instruction
offset), found by a walk up the stack that looks at each code object's file once; file
names and lines are read from them when a snapshot is taken.

Categories. A block's category is its allocation tag where that names a role
(``parameter``, ``gradient``, ``optimizer_state``: the optimizers' flat buffers); else
``parameter`` or ``gradient`` where it is a parameter's memory or its ``.grad``; else
``activation`` where a graph node saved it for backward (``op`` names the node); else
``temporary``.
"""

from __future__ import annotations

import collections
import gc
import itertools
import json
import os
import sys
import threading
import time
import weakref

import numpy as np

from .atomic import AtomicFile
from .memory import DEFAULT_TAG, Block, get_allocator
from .memory import _tls as _tag_state
from .storage import observe
from .tensor import Tensor

__all__ = ["memory_snapshot", "record_memory_history", "save_memory_snapshot",
           "load_memory_snapshot"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_ROLE_TAGS = ("parameter", "gradient", "optimizer_state")
_clock = time.perf_counter_ns
_ndarray = np.ndarray
_weakref = weakref.ref


_getframe = sys._getframe
# the file names met so far of Haelixe's code, and of the user's: a frame is placed by one
# set lookup of its code's file name (a string, whose hash is kept), with no call per frame
_OURS: set = set()
_USERS: set = set()


def _user_frames(start: int = 2) -> tuple:
    """The user's innermost two frames outside haelixe (the line, and its caller), as
    one flat tuple (code object, instruction offset, code object, instruction offset):
    file names and lines are read from them when a snapshot is taken
    (:func:`_frame_dicts`), so an allocation pays only the walk up to its user's frames,
    and makes one tuple of code objects (which the garbage collector does not track) and
    numbers, which it stops looking at once it has seen it. The walk starts ``start``
    frames up from here (a caller that knows the frames below are Haelixe's skips
    them)."""
    f = _getframe(start)
    ours, users = _OURS, _USERS
    inner = lasti = None
    while f is not None:
        code = f.f_code
        filename = code.co_filename
        if filename not in ours:  # (most frames are: one lookup each)
            if filename not in users:
                if filename.startswith(_PACKAGE):
                    ours.add(filename)
                    continue
                users.add(filename)
            if inner is not None:
                return (inner, lasti, code, f.f_lasti)
            inner, lasti = code, f.f_lasti
        f = f.f_back
    return () if inner is None else (inner, lasti)


def _line_of(code, lasti: int) -> int | None:
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line
    return None


def _frame_dicts(frames, cache: dict) -> list:
    """Flat (code object, offset, ...) frames as PyTorch's dicts: ``filename``, ``line``,
    ``name``."""
    out = []
    for code, lasti in zip(frames[::2], frames[1::2]):
        frame = (id(code), lasti)  # (a code object's hash is computed on every call)
        d = cache.get(frame)
        if d is None:
            d = cache[frame] = {"filename": code.co_filename, "line": _line_of(code, lasti),
                                "name": code.co_name}
        out.append(dict(d))
    return out


# An entry: one block (on the CPU: one numpy buffer) allocated while history was
# recorded, as a plain tuple of these fields (the garbage collector stops tracking a plain
# tuple of numbers, strings and untracked tuples once it has seen it, but never a tuple
# subclass: a trace of named tuples would be looked at by every collection):
_KEY, _ADDRESS, _SIZE, _REQUESTED, _TAG, _FRAMES, _TIME_NS, _ALLOCATED = range(8)
# (_TAG: the CPU's; a Block's is read from it, as it may be retagged. _FRAMES: see
# _user_frames. _ALLOCATED: the allocator's bytes after it: the entry is its trace's event)
_FREE = "free"  # the first field of a free's event in the trace
_BATCH = 2048  # CPU events waiting at most to be counted (see _CpuTracker._holder)


class _Held(weakref.ref):
    """A live block as the history holds it: a weak reference to its owner (a Block, or
    the numpy array owning a CPU buffer, whose death is the block's free), carrying the
    block's ``entry`` and, once a graph node keeps it for backward, ``saved``: [a weak
    reference to a node that keeps it, its name, the next one, its name, ...]. Everything
    about a live block is one object, found by one lookup of its address."""

    __slots__ = ("entry", "saved")


class _History:
    """What one allocator did while history was recorded: its live blocks with their
    lines, and every allocation and free in order (``trace``)."""

    def __init__(self, alloc, max_entries: int):
        self.alloc = alloc
        # (no lock on the hot paths: each step of them is one dict or deque operation,
        # atomic under the GIL, and the snapshot copies them with one C call each)
        self.live: dict = {}  # address -> its _Held
        # the entry itself for an allocation (see _KEY...), and ("free", entry, t,
        # allocated, category, op) for a free: the entries live as long as the trace
        # names them, and an allocation adds no object but its entry
        self.trace = collections.deque(maxlen=max_entries)
        self.keys = itertools.count(1)
        self.t0 = _clock()
        self.start_allocated = alloc.stats()["allocated_bytes"]

    def freed_event(self, held, t_ns, allocated_bytes, tag) -> tuple:
        """The trace's event for the free of ``held``'s block."""
        saved = held.saved
        category = tag if tag in _ROLE_TAGS else "activation" if saved else "temporary"
        return (_FREE, held.entry, t_ns, allocated_bytes, category,
                saved[1] if saved else None)

    def hooks(self) -> tuple:
        """The allocator's ``on_allocate(block, allocated_bytes)`` and ``on_free(handle,
        tag, allocated_bytes)`` for this history: one function each, with its state bound
        in (each runs for every block of a step)."""
        live, trace, keys, t0 = self.live, self.trace, self.keys, self.t0
        freed_event = self.freed_event

        def allocated(block, allocated_bytes) -> None:
            address = id(block.handle)
            held = _Held(block)
            # (the walk starts at the allocator's caller: this hook and the allocator's
            # allocate are Haelixe's)
            held.entry = entry = (next(keys), address, block.size, block.requested, None,
                                  _user_frames(3), _clock() - t0, allocated_bytes)
            held.saved = None
            live[address] = held
            trace.append(entry)

        def freed(handle, tag, allocated_bytes) -> None:
            # (a block from before recording has no entry: its bytes were in
            # start_allocated)
            held = live.pop(id(handle), None)
            if held is not None:
                trace.append(freed_event(held, _clock() - t0, allocated_bytes, tag))

        return allocated, freed


# -- CPU tensors: counted by the CPU allocator while recorded ---------------------------

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
    """Counts the buffer of each CPU tensor made (and each raw array a node saves) in
    the CPU allocator (``Allocator.adopt``), for as long as numpy's memory lives: its
    address is the id of the array owning the memory, and its ``_Held`` (whose callback
    is the free) in the history's ``live`` says it is counted."""

    def __init__(self, alloc, history):
        self.alloc = alloc
        self.history = history
        self.counts = alloc.adopt()
        self.held, self.drain = self._holder()
        self.counts.drain = self.drain
        self.address_of = self.held  # (the observer's buffer_made; its result unused)

    def _holder(self):
        """``held(a, adopt=True)``: the _Held of ndarray ``a``'s memory if it is counted
        (counting it now if ``adopt``), else None (also for a GPU tensor's block); and
        ``drain()``, which counts what came since it last ran.

        A buffer counted pays at once only for what cannot wait: its line (the walk up
        the stack), its time, its _Held, and one tuple in ``events``; as numpy's memory
        goes, the weak reference's callback puts the _Held itself there (the deque's C
        append: no Python call). So ``events`` holds every allocation and free in the
        order they came, and ``drain`` counts them in that order, in one pass under the
        counters' lock: each event's total, the trace, the peak. It runs before the
        allocator's counters are read or changed, before a snapshot, once ``events``
        holds ``_BATCH`` of them, and at every buffer while a subscriber (a MemoryView
        of the CPU) wants each event as it comes. A free's time is the next
        allocation's (or the drain's, where none came after it): when anything next ran
        after the memory went. One function each, with its state bound in."""
        history, counts, alloc = self.history, self.counts, self.alloc
        live, trace, keys, t0 = history.live, history.trace, history.keys, history.t0
        lock, by_tag, freed_event = counts.lock, counts.by_tag, history.freed_event
        events = collections.deque()
        came, pop = events.append, events.popleft

        def drain() -> None:
            if not events:
                return
            emitted = []
            with lock:  # (the allocator's counters, see AdoptedCounts)
                batch = []
                while events:
                    try:
                        batch.append(pop())
                    except IndexError:  # (another thread took the last)
                        break
                # each free's time: the next allocation's (or now, where none came)
                times, t = [], _clock()
                for item in reversed(batch):
                    if item.__class__ is tuple:
                        t = item[5]
                    times.append(t)
                times.reverse()
                delta, high, base = counts.delta, counts.high, counts.base
                allocs = frees = 0
                for item, t in zip(batch, times):
                    if item.__class__ is tuple:  # an allocation: (its _Held, key, ...)
                        held, key, n, tag, frames, _ = item
                        delta += n
                        if delta > high:
                            high = delta
                        allocs += 1
                        by_tag[tag] += n
                        held.entry = entry = (next(keys), key, n, n, tag, frames, t - t0,
                                              base + delta)
                        trace.append(entry)
                        kind = "alloc"
                    else:  # a free: the buffer's _Held, its weak reference now dead
                        entry = item.entry
                        key, n, tag = entry[_ADDRESS], entry[_SIZE], entry[_TAG]
                        if live.get(key) is item:  # (not a later buffer at its address)
                            del live[key]
                        delta -= n
                        frees += 1
                        by_tag[tag] -= n
                        trace.append(freed_event(item, t - t0, base + delta, tag))
                        kind = "free"
                    if counts.eager:
                        emitted.append((kind, n, tag))
                counts.delta, counts.high = delta, high
                counts.allocs += allocs
                counts.frees += frees
            for event in emitted:  # (outside the lock: a subscriber may read the counters)
                alloc.emit_adopted(*event)

        def held_of(a, adopt: bool = True):
            if a.__class__ is not _ndarray:
                return None
            base = a.base
            if base is not None:
                # (a view of an array owning its memory, the usual case, needs no walk)
                if base.__class__ is _ndarray and base.base is None:
                    a = base
                else:
                    a = _root(a)
                    if a is None:
                        return None
            key = id(a)
            held = live.get(key)
            if held is not None and held() is a:
                return held
            if not adopt:
                return None
            n = a.nbytes
            if not n:
                return None
            held = _Held(a, came)
            held.entry = held.saved = None  # (its entry: made when it is counted)
            live[key] = held
            # (the walk for its line starts above this function, its caller and that
            # one's, all Haelixe's: Tensor._wrap and what called it, or the walk of a
            # node's fields; the tag is memory.current_tag's, inlined: the calling
            # thread's own)
            came((held, key, n, _tag_state.__dict__.get("tag", DEFAULT_TAG),
                  _user_frames(4), _clock()))
            if counts.eager or len(events) > _BATCH:
                drain()
            return held

        return held_of, drain

    def release(self) -> None:
        """Stop counting every buffer (history stops): each counted one leaves ``live``
        (so its death counts nothing); the allocator's own blocks there count as they
        did."""
        self.drain()
        self.counts.drain = None
        counts, live = self.counts, self.history.live
        for key, held in list(live.items()):
            # (a counted numpy buffer; one another thread made since the drain was not)
            if held.__callback__ is not None and held.entry is not None:
                del live[key]
                n, tag = held.entry[_SIZE], held.entry[_TAG]
                with counts.lock:
                    counts.delta -= n
                    counts.frees += 1
                    counts.by_tag[tag] -= n
                if counts.eager:
                    self.alloc.emit_adopted("free", n, tag)
        self.alloc.end_adoption()


class _Recording:
    """The memory observer (see :data:`haelixe.storage.OBSERVERS`) while any device
    records: it counts each fresh CPU tensor's buffer and notes the blocks each graph
    node saves; and the allocators' ``on_allocate`` / ``on_free`` of each device
    recorded."""

    def __init__(self):
        self.histories: dict = {}  # device name -> _History
        self.cpu: _CpuTracker | None = None

    def start(self, alloc, max_entries) -> None:
        name = alloc.device_name
        if name in self.histories:
            return
        history = self.histories[name] = _History(alloc, max_entries)
        if name == "cpu":
            self.cpu = _CpuTracker(alloc, history)
            self.buffer_made = self.cpu.held  # (one call less for each tensor)
        alloc.on_allocate, alloc.on_free = history.hooks()
        observe(self)

    def stop(self, alloc) -> None:
        history = self.histories.pop(alloc.device_name, None)
        if history is None:
            return
        alloc.on_allocate = alloc.on_free = None
        if alloc.device_name == "cpu" and self.cpu is not None:
            self.cpu.release()
            self.cpu = None
            del self.buffer_made  # (back to the class's: nothing to count)
        if not self.histories:
            observe(self, False)

    def buffer_made(self, data) -> None:
        """No CPU recorded: on the GPU the allocator's hook sees each block (while the
        CPU is, its tracker's ``held`` stands in for this)."""

    def node_recorded(self, node) -> None:
        out: list = []
        plain, skip = _PLAIN, _NOT_SAVED
        for name, v in node.__dict__.items():  # its saved tensors and raw arrays
            if v.__class__ not in plain and name not in skip:  # (most fields: one lookup)
                _holders(v, self, True, out)
        if out:  # (each block it keeps: which nodes keep it, and their names)
            pair = (weakref.ref(node), node.name)
            for held in out:
                if held.saved is None:  # (the first node to keep it)
                    held.saved = list(pair)
                else:
                    held.saved += pair


_NONE, _TENSOR, _ARRAY, _GPU_ARRAY, _SEQUENCE = range(5)
# a node's fields that hold no memory of their own: its edges (other nodes), its output's
# shape, its saved tensors' versions, and a view's layouts (its input's shape and layout,
# its dims or part, its storage's history: numbers and a weak reference), so their tuples
# are not walked number by number for every node
_NOT_SAVED = frozenset(("next", "out_shape", "_versions", "in_shape", "in_layout", "dims",
                        "part", "history", "bias_shape"))
_KINDS: dict = {}  # class -> what memory a value of it may hold (decided once per class)
_PLAIN: set = set()  # the classes of those that hold none (_NONE), found by one lookup


def _kind(cls) -> int:
    kind = _KINDS.get(cls)
    if kind is None:
        kind = _KINDS[cls] = (
            _SEQUENCE if cls is tuple or cls is list else
            _TENSOR if issubclass(cls, Tensor) else _ARRAY if issubclass(cls, np.ndarray)
            else _GPU_ARRAY if "storage" in getattr(cls, "__slots__", ()) else _NONE)
        if kind == _NONE:
            _PLAIN.add(cls)
    return kind


def _holders(value, recording, adopt, out: list) -> list:
    """The _Held of each recorded block holding the memory of a Tensor, raw array or a
    tuple/list of them (counting a raw CPU array now if ``adopt``; a tensor made before
    recording has none)."""
    kind = _KINDS.get(value.__class__)
    if kind is None:
        kind = _kind(value.__class__)
    if kind == _NONE:
        return out
    if kind == _SEQUENCE:
        plain, kinds = _PLAIN, _KINDS
        for v in value:
            cls = v.__class__
            if cls in plain:  # (the ints of a shape)
                continue
            if kinds.get(cls) == _TENSOR:  # (a node's saved tensors: the usual case)
                _holder_of(v._storage.data, recording, False, out)
            else:
                _holders(v, recording, adopt, out)
        return out
    if kind == _TENSOR:
        value, adopt = value._storage.data, False
    elif kind == _GPU_ARRAY:
        value = getattr(value.storage, "data", None)
    return _holder_of(value, recording, adopt, out)


def _holder_of(data, recording, adopt, out: list) -> list:
    """The _Held of the recorded block holding ``data`` (a Block, or a CPU array),
    appended to ``out``."""
    held = None
    if data.__class__ is Block:
        history = recording.histories.get(data.allocator.device_name)
        if history is not None:
            held = history.live.get(id(data.handle))
    elif recording.cpu is not None:
        held = recording.cpu.held(data, adopt)
    if held is not None:
        out.append(held)
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


def _roles() -> tuple[set, set]:
    """Keys of the recorded blocks holding a parameter, and a parameter's gradient (read
    from the live tensors: a parameter outside an optimizer's flat buffer has no role
    tag)."""
    params, grads = [], []
    for o in gc.get_objects():
        cls = type(o)  # (not o.__class__: a dead weak proxy raises on that)
        if cls is Tensor or issubclass(cls, Tensor):
            if o._is_param:
                _holders(o, _RECORDING, False, params)
                if o.grad is not None:
                    _holders(o.grad, _RECORDING, False, grads)
    return ({h.entry[_KEY] for h in params if h.entry is not None},
            {h.entry[_KEY] for h in grads if h.entry is not None})


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
    if cpu is not None:
        cpu.drain()
    if history is None:
        raise RuntimeError(
            f"memory_snapshot: no memory history is recorded on {alloc.device_name!r}; "
            f"call hx.record_memory_history(device={alloc.device_name!r}) before the "
            f"allocations to be listed")
    live_blocks = []
    saved = {}  # key of a live block -> its _Held's saved (weak refs to nodes, names)
    for held in list(history.live.values()):  # (copied by one C call)
        owner = held()
        # (a buffer another thread made since the drain is not counted yet: not listed)
        if owner is not None and held.entry is not None:
            entry = held.entry
            live_blocks.append((entry, owner.tag if entry[_TAG] is None else entry[_TAG]))
            if held.saved is not None:
                saved[entry[_KEY]] = held.saved
    trace = list(history.trace)
    params, grads = _roles()
    lines: dict = {}  # (code, offset) -> its frame dict, read once per snapshot
    categories = {}
    blocks = []
    for entry, tag in sorted(live_blocks, key=lambda e: e[0][_KEY]):
        key = entry[_KEY]
        nodes = [n for n in (r() for r in saved.get(key, ())[::2])
                 if n is not None and n.__dict__.get("saved") is not None]
        address = entry[_ADDRESS]
        category = (tag if tag in _ROLE_TAGS else "parameter" if key in params
                    else "gradient" if key in grads
                    else "activation" if nodes else "temporary")
        categories[key] = category
        blocks.append({"address": address, "size": entry[_SIZE],
                       "requested_size": entry[_REQUESTED], "category": category,
                       "op": nodes[0].name if nodes else None,
                       "saved_by": [n.name for n in nodes],
                       "state": "active_allocated", "time_ns": entry[_TIME_NS],
                       "frames": _frame_dicts(entry[_FRAMES], lines), "key": key})
    return {"device": alloc.device_name, "blocks": blocks,
            **_timeline(history, trace, saved, categories, lines), "stats": stats}


def _timeline(history, trace, saved, categories, lines) -> dict:
    """The trace with each block named once, and the peak with what held it."""
    index: dict = {}
    timeline_blocks = []
    events = []
    peak_at, peak = -1, history.start_allocated
    last_free = {item[1][_KEY]: item for item in trace if item[0] is _FREE}
    for item in trace:
        if item[0] is not _FREE:
            action, entry, t, allocated = "alloc", item, item[_TIME_NS], item[_ALLOCATED]
        else:
            action, entry, t, allocated = item[:4]
        key = entry[_KEY]
        if key not in index:
            index[key] = len(timeline_blocks)
            freed = last_free.get(key)
            if freed is not None:
                category, op = freed[4], freed[5]
            else:
                by = saved.get(key)  # (weak ref, name, ...: the first node's name)
                category, op = categories.get(key, "temporary"), by[1] if by else None
            timeline_blocks.append({"size": entry[_SIZE], "category": category, "op": op,
                                    "frames": _frame_dicts(entry[_FRAMES][:2], lines),
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
