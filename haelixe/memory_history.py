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
covers the tensors then.

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


class _History:
    """What one allocator did while history was recorded: its live blocks with their
    lines, and every allocation and free in order (``trace``)."""

    def __init__(self, alloc, max_entries: int):
        self.alloc = alloc
        # (no lock on the hot paths: each step of them is one dict or deque operation,
        # atomic under the GIL, and the snapshot copies them with one C call each)
        # address -> (entry, a weak reference to its Block or numpy array): the entries
        # hold only numbers, strings and frames as ids, so once the garbage collector has
        # seen them it stops looking at them (and at the trace holding them)
        self.live: dict = {}
        self.saved: dict = {}  # key of a live block -> ([weak refs to the nodes that
        # saved it], [their names])
        # the entry itself for an allocation (see _KEY...), and ("free", entry, t,
        # allocated, category, op) for a free: the entries live as long as the trace
        # names them, and an allocation adds no object but its entry
        self.trace = collections.deque(maxlen=max_entries)
        self.keys = itertools.count(1)
        self.t0 = _clock()
        self.start_allocated = alloc.stats()["allocated_bytes"]

    def add(self, address, owner, size, requested, tag, allocated_bytes,
            start: int = 2) -> None:
        """Note a new block (``start``: as :func:`_user_frames`'s, from the caller)."""
        entry = (next(self.keys), address, size, requested, tag, _user_frames(start),
                 _clock() - self.t0, allocated_bytes)
        self.live[address] = (entry, owner)
        self.trace.append(entry)

    def remove(self, address, tag, allocated_bytes):
        """Note the free of the block at ``address``; returns its entry (None for a block
        from before recording: its bytes were in start_allocated)."""
        held = self.live.pop(address, None)
        entry = None if held is None else held[0]
        if entry is not None:
            saved = self.saved.pop(entry[_KEY], None)
            category = (tag if tag in _ROLE_TAGS else "activation" if saved else
                        "temporary")
            self.trace.append((_FREE, entry, _clock() - self.t0, allocated_bytes,
                               category, saved[1][0] if saved else None))
        return entry

    def allocated(self, block, allocated_bytes) -> None:  # the allocator's on_allocate
        self.add(id(block.handle), weakref.ref(block), block.size, block.requested, None,
                 allocated_bytes)

    def freed(self, handle, tag, allocated_bytes) -> None:  # the allocator's on_free
        self.remove(id(handle), tag, allocated_bytes)


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
    the CPU allocator (``Allocator.adopt``), for as long as numpy's memory lives; its
    address is the id of the array owning the memory, and its entry in the history's
    ``live`` says it is counted."""

    def __init__(self, alloc, history):
        self.alloc = alloc
        self.history = history
        self.live = history.live
        self.refs: dict = {}  # id(weak ref to a counted array) -> the array's address
        self.counts = alloc.adopt()
        self._died = self._on_death()

    def _on_death(self):
        """The weak references' callback (numpy's memory goes): one function, its state
        bound in (it runs for every CPU tensor freed while recorded)."""
        refs, live, remove = self.refs, self.live, self.history.remove
        counts, alloc = self.counts, self.alloc

        def died(ref) -> None:
            key = refs.pop(id(ref), None)
            held = live.get(key)
            if held is not None and held[1] is ref:
                n, tag = held[0][_SIZE], held[0][_TAG]
                with counts.lock:  # (the allocator's counters, see AdoptedCounts)
                    delta = counts.delta = counts.delta - n
                    counts.frees += 1
                    counts.by_tag[tag] -= n
                    allocated = counts.base + delta
                if counts.eager:
                    alloc.emit_adopted("free", n, tag)
                remove(key, tag, allocated)

        return died

    def address_of(self, a, adopt: bool = True):
        """The address of ndarray ``a``'s memory if it is counted (counting it now if
        ``adopt``), else None (also for a GPU tensor's block: this is the observer's
        ``buffer_made`` while the CPU is recorded)."""
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
        live = self.live
        held = live.get(key)
        if held is not None and held[1]() is a:
            return key
        if not adopt:
            return None
        n = a.nbytes
        if not n:
            return None
        tag = _tag_state.__dict__.get("tag", DEFAULT_TAG)  # (memory.current_tag, inlined)
        ref = _weakref(a, self._died)
        self.refs[id(ref)] = key
        # (History.add, inlined: it runs for every CPU tensor made)
        # (two threads making tensors at once may append their events in the other
        # order than their totals: each total is still one the allocator reached)
        # (the walk for its line starts above this method and its caller, both
        # Haelixe's: the observer or the walk of a node's fields)
        counts = self.counts
        with counts.lock:  # (the allocator's counters, see AdoptedCounts)
            delta = counts.delta = counts.delta + n
            if delta > counts.high:
                counts.high = delta
            counts.allocs += 1
            counts.by_tag[tag] += n
            allocated = counts.base + delta
        if counts.eager:
            self.alloc.emit_adopted("alloc", n, tag)
        history = self.history
        entry = (next(history.keys), key, n, n, tag, _user_frames(3), _clock() - history.t0,
                 allocated)
        live[key] = (entry, ref)
        history.trace.append(entry)
        return key

    def release(self) -> None:
        """Stop counting every buffer (history stops); the allocator's own blocks in
        ``live`` count as they did."""
        refs = dict(self.refs)
        self.refs.clear()  # (a buffer going from now on finds no address: not counted)
        counts = self.counts
        for entry, owner in list(self.live.values()):
            if id(owner) in refs:
                n, tag = entry[_SIZE], entry[_TAG]
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
            self.buffer_made = self.cpu.address_of  # (one call less for each tensor)
        alloc.on_allocate, alloc.on_free = history.allocated, history.freed
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
        CPU is, its tracker's ``address_of`` stands in for this)."""

    def node_recorded(self, node) -> None:
        cpu = self.cpu
        out: list = []
        plain, skip = _PLAIN, _NOT_SAVED
        for name, v in node.__dict__.items():  # its saved tensors and raw arrays
            if v.__class__ not in plain and name not in skip:  # (most fields: one lookup)
                _addresses_of(v, cpu, True, out)
        if out:  # (each block it keeps: which nodes keep it, and their names)
            ref, name = weakref.ref(node), node.name
            for device, address in out:
                history = self.histories.get(device)
                held = None if history is None else history.live.get(address)
                if held is not None:
                    key = held[0][_KEY]
                    saved = history.saved.get(key)
                    if saved is None:  # (the first node to keep it: two fresh lists)
                        history.saved[key] = ([ref], [name])
                    else:
                        saved[0].append(ref)
                        if name not in saved[1]:
                            saved[1].append(name)


_NONE, _TENSOR, _ARRAY, _GPU_ARRAY, _SEQUENCE = range(5)
# a node's fields that record sets and that hold no memory of their own: its edges (other
# nodes), its output's shape, its saved tensors' versions (their tuples' numbers are not
# walked one by one for every node)
_NOT_SAVED = frozenset(("next", "out_shape", "_versions"))
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


def _addresses_of(value, cpu, adopt, out: list) -> list:
    """(device, address) of the memory of a Tensor, raw array or a tuple/list of them:
    a Block's handle, or a counted CPU buffer (counting a raw array now if ``adopt``;
    a tensor made before recording is not counted now)."""
    kind = _KINDS.get(value.__class__)
    if kind is None:
        kind = _kind(value.__class__)
    if kind == _NONE:
        return out
    if kind == _SEQUENCE:
        plain = _PLAIN
        for v in value:
            if v.__class__ not in plain:  # (not for the ints of a shape)
                _addresses_of(v, cpu, adopt, out)
        return out
    if kind == _TENSOR:
        value, adopt = value._storage.data, False
    elif kind == _GPU_ARRAY:
        value = getattr(value.storage, "data", None)
    if value.__class__ is Block:
        out.append((value.allocator.device_name, id(value.handle)))
    elif cpu is not None and value.__class__ is np.ndarray:
        address = cpu.address_of(value, adopt)
        if address is not None:
            out.append(("cpu", address))
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
    """Addresses of the memory holding a parameter, and a parameter's gradient (read
    from the live tensors: a parameter outside an optimizer's flat buffer has no role
    tag)."""
    params, grads = [], []
    for o in gc.get_objects():
        cls = type(o)  # (not o.__class__: a dead weak proxy raises on that)
        if cls is Tensor or issubclass(cls, Tensor):
            if o._is_param:
                _addresses_of(o, cpu, False, params)
                if o.grad is not None:
                    _addresses_of(o.grad, cpu, False, grads)
    return {a for _, a in params}, {a for _, a in grads}


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
    for entry, owner in list(history.live.values()):  # (each copied by one C call)
        owner = owner()
        if owner is not None:
            live_blocks.append((entry, owner.tag if entry[_TAG] is None else entry[_TAG]))
    trace = list(history.trace)
    saved = dict(history.saved)
    params, grads = _roles(cpu)
    lines: dict = {}  # (code, offset) -> its frame dict, read once per snapshot
    categories = {}
    blocks = []
    for entry, tag in sorted(live_blocks, key=lambda e: e[0][_KEY]):
        key = entry[_KEY]
        nodes = [n for n in (r() for r in saved.get(key, ((),))[0])
                 if n is not None and n.__dict__.get("saved") is not None]
        address = entry[_ADDRESS]
        category = (tag if tag in _ROLE_TAGS else "parameter" if address in params
                    else "gradient" if address in grads
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
                names = saved.get(key, (None, None))[1]
                category, op = categories.get(key, "temporary"), names[0] if names else None
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
