"""The binning slab allocator: size classes, per-bin slab caches, stats and an event stream.

Written once for every device. A *driver* does the real allocation (a numpy ``uint8``
array on the CPU, a wgpu buffer on the GPU); the :class:`Allocator` decides when to call it.

Size classes. Every request is rounded up to a *bin size*: at least :data:`MIN_BLOCK`
bytes, and above that each power-of-two interval ``(2**k, 2**(k+1)]`` is split into
``divisions`` equal steps (PyTorch's ``roundup_power2_divisions``). For a request of
``n > MIN_BLOCK`` bytes the bin size ``r`` satisfies ``n <= r < n * (1 + 1/divisions)``,
so with the default of 4 divisions at most 25% of a slab is rounding waste.

Caching. Freed slabs stay in a free list per bin and are handed out again, so a training
loop that allocates the same pattern every step stops calling the driver after step one.

Private pools. A captured step (``hx.capture``) replays kernels that name fixed slabs, so
those slabs must not serve anyone else between replays: a :class:`PrivatePool` (CUDA
graphs' private memory pool) holds them until it is released.

Deterministic reclamation. A :class:`Block` goes back to its bin's free list exactly when
its last reference disappears (CPython's reference counting runs ``Block.__del__`` right
then), never earlier. Tensor views and tensors saved for backward hold a Storage, which
holds the Block, so a slab is never handed out twice while anything can still read it.

This module imports nothing else from haelixe when it loads, and nothing from wgpu;
:func:`get_allocator` starts a device's backend (through haelixe.device) on demand.
"""

from __future__ import annotations

import bisect
import collections
import sys as _sys
import threading
import warnings
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

__all__ = [
    "MIN_BLOCK", "TAGS", "DEFAULT_TAG", "round_size", "bin_of", "bin_size",
    "OutOfMemoryError", "MemoryEvent", "Block", "Allocator", "PrivatePool", "NumpyDriver",
    "tagged", "current_tag", "get_allocator", "register_allocator",
    "memory_stats", "empty_cache", "reset_peak_stats", "format_bytes",
]

MIN_BLOCK = 512
"""Smallest slab in bytes; every request of up to this many bytes shares bin 0."""
_MIN_LOG2 = MIN_BLOCK.bit_length() - 1
_MAX_DIVISIONS = 64  # keeps every bin size a multiple of 8 bytes (MIN_BLOCK / 64)

TAGS = ("parameter", "gradient", "optimizer_state", "activation", "temporary")
DEFAULT_TAG = "activation"
_TAG_SET = frozenset(TAGS)


# -- size classes ------------------------------------------------------------------------

def _check_nbytes(nbytes) -> int:
    if nbytes.__class__ is int and nbytes >= 0:  # (every allocation asks)
        return nbytes
    if not isinstance(nbytes, (int, np.integer)) or isinstance(nbytes, bool):
        raise TypeError(f"allocation size must be an integer, got {nbytes!r}")
    if nbytes < 0:
        raise ValueError(f"allocation size must be non-negative, got {nbytes}")
    return int(nbytes)


def _check_divisions(divisions) -> None:
    if (not isinstance(divisions, int) or not 1 <= divisions <= _MAX_DIVISIONS
            or divisions & (divisions - 1)):
        raise ValueError(f"divisions must be a power of two from 1 to {_MAX_DIVISIONS}, "
                         f"got {divisions!r}")


def _round(n: int, divisions: int) -> int:
    if n <= MIN_BLOCK:
        return MIN_BLOCK
    step = (1 << (n.bit_length() - 1)) // divisions  # the power of two at or below n, split
    return -(-n // step) * step


def _index(r: int, divisions: int) -> int:
    """Bin index of a bin size ``r`` (0 for MIN_BLOCK, then consecutive)."""
    if r == MIN_BLOCK:
        return 0
    p = 1 << ((r - 1).bit_length() - 1)  # largest power of two strictly below r
    return (p.bit_length() - 1 - _MIN_LOG2) * divisions + (r - p) // (p // divisions)


def round_size(nbytes: int, divisions: int = 4) -> int:
    """Bin size (bytes) that a request of ``nbytes`` is served from.

    Guarantees: ``round_size(n) >= n``; ``round_size(n) == MIN_BLOCK`` for
    ``n <= MIN_BLOCK``; otherwise ``round_size(n) - n < n / divisions`` (strictly; in fact
    below one step, ``2**floor(log2 n) / divisions``). Monotone in ``n``, idempotent, and
    every result is a multiple of 8.
    """
    n = _check_nbytes(nbytes)
    _check_divisions(divisions)
    return _round(n, divisions)


def bin_of(nbytes: int, divisions: int = 4) -> int:
    """Index of the bin serving ``nbytes``: 0 for ``MIN_BLOCK``, then one per bin size in
    increasing order, so ``bin_size(bin_of(n)) == round_size(n)``."""
    return _index(round_size(nbytes, divisions), divisions)


def bin_size(index: int, divisions: int = 4) -> int:
    """Size in bytes of bin ``index`` (the inverse of :func:`bin_of` on bin sizes)."""
    _check_divisions(divisions)
    if not isinstance(index, (int, np.integer)) or index < 0:
        raise ValueError(f"bin index must be a non-negative integer, got {index!r}")
    if index == 0:
        return MIN_BLOCK
    p = 1 << (_MIN_LOG2 + (index - 1) // divisions)
    return p + ((index - 1) % divisions + 1) * (p // divisions)


# -- tags --------------------------------------------------------------------------------

_tls = threading.local()  # per thread, so a prefetch thread never inherits "parameter"


def _check_tag(tag) -> str:
    if tag not in _TAG_SET:
        raise ValueError(f"unknown allocation tag {tag!r}; use one of {', '.join(TAGS)}")
    return tag


def current_tag() -> str:
    """The tag that allocations on this thread get when they do not name one."""
    return _tls.__dict__.get("tag", DEFAULT_TAG)  # (getattr's default costs an
    # AttributeError raised and caught: 20 times this, on every untagged allocation)


@contextmanager
def tagged(tag: str):
    """Make ``tag`` the default tag of allocations inside the ``with`` block (this thread).

    >>> with tagged("parameter"):
    ...     w = get_allocator("cpu").allocate(4096)
    """
    _check_tag(tag)
    prev = current_tag()
    _tls.tag = tag
    try:
        yield tag
    finally:
        _tls.tag = prev


# -- events, errors, blocks --------------------------------------------------------------

class OutOfMemoryError(RuntimeError):
    """An allocation would exceed the allocator's cap, or the driver ran out of memory."""


class MemoryEvent(NamedTuple):
    """One allocator event, for the memory widget.

    ``kind`` is "alloc" (a new driver slab), "reuse" (served from the cache), "free"
    (a block went back to its bin's free list), "release" (a cached slab was given back to
    the driver) or "retag". ``allocated_bytes`` and ``reserved_bytes`` are the totals
    right after the event.
    """

    seq: int
    kind: str
    size: int
    requested: int
    bin: int
    tag: str | None
    allocated_bytes: int
    reserved_bytes: int


_ADOPTED = -1  # the bin of memory another allocator gave (Allocator.adopt)


class AdoptedCounts:
    """What an adopter (memory history's CPU tracker) counted of memory another allocator
    gave (numpy's, for the CPU tensors made while history is recorded) since its
    allocator last folded the counts into its own (see :meth:`Allocator.adopt`). The
    adopter adds to them under ``lock`` with no call, for every block it counts or stops
    counting; the allocator folds them in as each of its critical sections begins and
    ends, so its counters are whole whenever anyone reads or changes them."""

    __slots__ = ("lock", "base", "delta", "high", "allocs", "frees", "by_tag", "eager",
                 "drain")

    def __init__(self, allocated: int, eager: bool):
        self.lock = threading.Lock()
        self.base = allocated  # the allocator's allocated bytes as last folded
        # (an event's total is base + delta, each read under the lock)
        self.delta = self.high = 0  # bytes counted less bytes gone since then; its most
        self.allocs = self.frees = 0
        self.by_tag = dict.fromkeys(TAGS, 0)  # bytes counted less bytes gone, by tag
        self.eager = eager  # subscribers want each event: Allocator.emit_adopted
        # the adopter's own: notes what it counted that went since (called before the
        # allocator's lock is taken, as a section begins: it may emit)
        self.drain = None


_new_event = tuple.__new__  # skips NamedTuple's Python-level __new__ on the hot path


class Block:
    """A slab handed out by an :class:`Allocator`.

    ``handle`` is the driver's object (a numpy uint8 array, a wgpu buffer), ``size`` the bin
    size in bytes, ``requested`` the bytes asked for, ``bin`` the bin index and ``tag`` what
    the memory holds. The slab returns to the free list when the last reference to this
    object goes away; keep a reference for as long as anything may read the memory.
    """

    __slots__ = ("handle", "size", "requested", "bin", "tag", "allocator", "__weakref__")

    def __init__(self, allocator, handle, size, requested, bin, tag):
        self.handle = handle
        self.size = size
        self.requested = requested
        self.bin = bin
        self.tag = tag
        self.allocator = allocator

    @property
    def buffer(self):
        """The driver handle (on the GPU, the wgpu buffer)."""
        return self.handle

    def retag(self, tag: str) -> None:
        """Change what this block is accounted as (emits a "retag" event)."""
        self.allocator._retag(self, tag)

    def __del__(self):
        try:
            alloc = self.allocator
        except AttributeError:  # __init__ never finished
            return
        try:
            alloc._reclaim(self.handle, self.size, self.requested, self.bin, self.tag)
        except Exception:
            # At interpreter shutdown module globals may already be None: stay silent then.
            try:
                finalizing = _sys.is_finalizing()
            except Exception:
                return
            if not finalizing:
                raise

    def __repr__(self) -> str:
        return (f"Block(size={self.size}, requested={self.requested}, bin={self.bin}, "
                f"tag={self.tag!r}, device={self.allocator.device_name!r})")


class PrivatePool:
    """Slabs kept for one captured step only, as CUDA graphs' private memory pool.

    While :meth:`routing` is active (on the thread that entered it), every block the
    allocator hands out comes from this pool's free slabs when it has one of the bin, and
    otherwise from the allocator as usual; either way the slab then belongs to the pool.
    :meth:`reserve` adds a slab made before (a buffer the step reads that outlives it);
    several pools may keep one slab (two captures reading the same parameters).
    A slab of the pool never goes back to the shared cache: when its last block dies it
    returns here, free for the pool alone, so a replay that names it finds it untouched.
    A reserved slab coming back that way is listed in :attr:`lost` (its owner died).
    :meth:`release` gives every slab back to the allocator; slabs still held by live
    blocks return to the shared cache when those die.
    """

    def __init__(self, allocator: Allocator):
        self.allocator = allocator
        self.thread = None
        self.released = False
        self.lost: list = []  # reserved slabs whose last block died
        self._free: dict[int, list] = {}  # bin -> free slabs of this pool
        self._slabs: dict[int, object] = {}  # id(handle) -> handle, every slab kept
        self._serial: dict[int, int] = {}  # id(handle) -> its latest allocation's number
        self._reserved: set = set()  # ids of slabs made before the pool took them
        self._count = 0

    @contextmanager
    def routing(self):
        """Make new allocations of this thread join the pool inside the ``with`` block."""
        self.thread = self.allocator._get_ident()
        self.allocator._set_routing(self)
        try:
            yield self
        finally:
            self.allocator._set_routing(None)
            self.thread = None

    @contextmanager
    def paused(self):
        """Inside a :meth:`routing` block: let allocations use the shared cache again
        for a while (work that is not part of what the pool serves)."""
        self.allocator._set_routing(None)
        try:
            yield
        finally:
            self.allocator._set_routing(self)

    def reserve(self, handle) -> None:
        """Keep ``handle`` (a slab allocated before) for this pool from now on."""
        if id(handle) not in self._slabs:
            self._slabs[id(handle)] = handle
            self._reserved.add(id(handle))
            self.allocator._reserve(self, handle)

    def serial(self, handle):
        """Which allocation made while routing holds ``handle`` now (0, 1, ...), or
        None for a slab the pool did not hand out."""
        return self._serial.get(id(handle))

    def held_ids(self) -> frozenset:
        """ids of the slabs handed out while routing that live blocks still hold."""
        free = {id(h) for handles in self._free.values() for h in handles}
        return frozenset(k for k in self._serial if k not in free)

    @property
    def free_bytes(self) -> int:
        return sum(bin_size(b, self.allocator.divisions) * len(h)
                   for b, h in self._free.items())

    def release(self) -> None:
        """Give every slab back to the allocator (idempotent)."""
        if not self.released:
            self.released = True
            self.allocator._release_pool(self)
            self._free.clear()
            self._slabs.clear()
            self._reserved.clear()

    # called by the allocator, under its lock
    def _take(self, b: int):
        free = self._free.get(b)
        return free.pop() if free else None

    def _adopt(self, handle) -> None:
        self._slabs[id(handle)] = handle
        self._serial[id(handle)] = self._count
        self._count += 1

    def _keep(self, handle, b: int) -> None:
        self._free.setdefault(b, []).append(handle)

    def _died(self, handle) -> None:
        if id(handle) in self._reserved:
            self.lost.append(handle)

    def __repr__(self) -> str:
        return (f"PrivatePool({self.allocator.device_name!r}, slabs={len(self._slabs)}, "
                f"free_bytes={self.free_bytes}, released={self.released})")


# -- drivers -----------------------------------------------------------------------------

class NumpyDriver:
    """Host memory: ``malloc`` returns a fresh ``np.empty(nbytes, np.uint8)``.

    A driver is any object with ``malloc(nbytes) -> handle`` and ``free(handle)``;
    ``malloc`` raises ``MemoryError`` when the device is out of memory (the allocator then
    empties its cache and retries once).
    """

    def malloc(self, nbytes: int):
        return np.empty(nbytes, np.uint8)

    def free(self, handle) -> None:
        pass  # dropping the last reference gives the memory back to numpy


_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def format_bytes(n: float) -> str:
    """A byte count in binary units, as the allocator counts: 1536 -> '1.5 KiB',
    4194304 -> '4 MiB', 300 -> '300 B'. Every size Haelixe prints or draws uses it."""
    n = float(n)
    for unit, scale in _UNITS:
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.0f} {unit}" if v >= 100 or v == int(v) else f"{v:.1f} {unit}"
    return f"{int(n)} B"


def _fmt(n: int) -> str:
    """Exact bytes and the size in the same binary units, for error messages."""
    for unit, scale in _UNITS:
        if n >= scale:
            return f"{n} bytes ({n / scale:.2f} {unit})"
    return f"{n} bytes"


# -- the allocator -----------------------------------------------------------------------

class Allocator:
    """Caching allocator for one device.

    ``Allocator(device_name, driver, *, cap_bytes=None, divisions=4, history=1024,
    reuse="recent")``: ``driver`` provides ``malloc``/``free`` (see :class:`NumpyDriver`);
    ``cap_bytes`` bounds the reserved bytes (in use + cached); ``divisions`` sets the size
    classes (see :func:`round_size`); ``history`` is how many recent events
    :meth:`events` keeps (0 keeps none); ``reuse`` picks the cached slab a request gets:
    "recent" the last one freed (warm in a CPU's caches), "stable" the same one whatever
    the order slabs were freed in, so a loop that repeats its requests gets the same
    slabs every time (a GPU step then binds the same buffers, and its bind groups are
    made once). Thread safe.
    """

    def __init__(self, device_name: str, driver, *, cap_bytes: int | None = None,
                 divisions: int = 4, history: int = 1024, reuse: str = "recent"):
        _check_divisions(divisions)
        if not (hasattr(driver, "malloc") and hasattr(driver, "free")):
            raise TypeError("driver must provide malloc(nbytes) -> handle and free(handle)")
        if reuse not in ("recent", "stable"):
            raise ValueError(f"reuse must be 'recent' or 'stable', got {reuse!r}")
        self._stable = reuse == "stable"
        self.device_name = str(device_name)
        self.driver = driver
        self.divisions = divisions
        self.cap_bytes = cap_bytes
        self._lock = threading.RLock()
        self._owner = None  # thread id inside a critical section (see _reclaim)
        self._get_ident = threading.get_ident  # bound here: usable at shutdown
        self._dead = collections.deque()  # blocks that died while their thread held the lock
        # bin -> cached handles: most recent last ("recent"), or by rising id ("stable":
        # the last is the greatest, the slab a repeated request gets again)
        self._free: dict[int, list] = {}
        self._bins: dict[int, list] = {}  # bin -> [in_use, cached, requested, allocated]
        self._bin_of: dict[int, tuple] = {}  # bytes asked -> (bin size, bin index)
        self._by_tag = dict.fromkeys(TAGS, 0)
        # while memory history is recorded: on_allocate(block, allocated_bytes) for each
        # new Block, on_free(handle, tag, allocated_bytes) for each freed one; else None
        self.on_allocate = self.on_free = None
        self._adopted = None  # the AdoptedCounts of an adopter counting memory, or None
        self._allocated = self._requested = self._reserved = 0
        self._active = self._cached = 0
        self._captured = self._captured_blocks = 0  # free slabs that pools keep for themselves
        self._pools_of: dict = {}  # id(handle) -> the PrivatePools keeping that slab
        self._routing = None  # the PrivatePool new allocations join (on its thread)
        self._peak_allocated = self._peak_reserved = 0
        self._hits = self._driver_allocs = self._driver_frees = 0
        self._num_allocs = self._num_frees = self._num_ooms = 0
        self._seq = 0
        self._history = collections.deque(maxlen=history) if history else None
        self._subscribers: dict[int, object] = {}
        self._callbacks: tuple = ()
        self._next_token = 0
        self._emitting = self._history is not None

    @property
    def cap_bytes(self) -> int | None:
        """Most bytes the allocator may reserve from the driver (None: no cap)."""
        return self._cap

    @cap_bytes.setter
    def cap_bytes(self, value) -> None:
        if value is not None:
            value = _check_nbytes(value)
        self._cap = value

    # critical sections: an RLock plus the owning thread, so that a Block dying on the
    # thread that is mid-update (a GC pass inside malloc, a subscriber dropping a tensor)
    # is queued and handled when that section ends, never on half-updated counters.
    def _enter(self):
        adopted = self._adopted
        if adopted is not None and adopted.drain is not None:
            adopted.drain()
        self._lock.acquire()
        prev = self._owner
        self._owner = self._get_ident()
        if self._adopted is not None:
            self._fold_adopted()
        return prev

    def _exit(self, prev) -> None:
        try:
            if prev is None:  # outermost section: apply frees deferred meanwhile
                dead = self._dead
                while dead:
                    self._put_back(*dead.popleft())
        finally:
            if self._adopted is not None:  # (its base: the totals this section left)
                self._fold_adopted()
            self._owner = prev
            self._lock.release()

    def _reclaim(self, handle, size, requested, b, tag) -> None:
        """Called by ``Block.__del__``."""
        if self._owner == self._get_ident():
            self._dead.append((handle, size, requested, b, tag))
            return
        prev = self._enter()
        try:
            self._put_back(handle, size, requested, b, tag)
        finally:
            self._exit(prev)

    # -- allocation ------------------------------------------------------------------
    def allocate(self, nbytes: int, tag: str | None = None) -> Block:
        """A block of at least ``nbytes`` bytes, from the cache when its bin has one.

        ``tag`` defaults to the innermost :func:`tagged` tag of this thread
        ("activation" outside any). Raises :class:`OutOfMemoryError` when the cap (or the
        driver) cannot provide the slab even after emptying the cache.
        """
        # (every allocation: a plain int size and the thread's tag without calls)
        n = nbytes if nbytes.__class__ is int and nbytes >= 0 else _check_nbytes(nbytes)
        sized = self._bin_of.get(n)
        if sized is None:  # (a step asks for the same few sizes again and again)
            if len(self._bin_of) > 4096:
                self._bin_of.clear()
            size = _round(n, self.divisions)
            sized = self._bin_of[n] = (size, _index(size, self.divisions))
        size, b = sized
        tag = _tls.__dict__.get("tag", DEFAULT_TAG) if tag is None else _check_tag(tag)
        prev = self._enter()
        try:
            pool = self._routing
            if pool is not None and pool.thread != self._get_ident():
                pool = None
            handle = pool._take(b) if pool is not None else None
            if handle is not None:
                st = self._bins[b]
                self._captured -= size
                self._captured_blocks -= 1
                self._hits += 1
                kind = "reuse"
            elif self._free.get(b):
                handle = self._free[b].pop()
                st = self._bins[b]
                st[1] -= 1
                self._cached -= 1
                self._hits += 1
                kind = "reuse"
            else:
                handle = self._driver_malloc(n, size, b)
                st = self._bins.get(b)
                if st is None:
                    st = self._bins[b] = [0, 0, 0, 0]
                kind = "alloc"
            if pool is not None:
                pool._adopt(handle)
                pools = self._pools_of.setdefault(id(handle), [])
                if pool not in pools:
                    pools.append(pool)
            st[0] += 1
            st[2] += n
            st[3] += size
            self._active += 1
            self._num_allocs += 1
            self._allocated += size
            self._requested += n
            self._by_tag[tag] += size
            if self._allocated > self._peak_allocated:
                self._peak_allocated = self._allocated
            if self._emitting:
                self._emit(kind, size, n, b, tag)
            block = Block(self, handle, size, n, b, tag)
            if self.on_allocate is not None:
                self.on_allocate(block, self._allocated)
            return block
        finally:
            self._exit(prev)

    def _driver_malloc(self, n: int, size: int, b: int):
        cap = self._cap
        if cap is not None and self._reserved + size > cap:
            self._release_cached()
            if self._reserved + size > cap:
                self._num_ooms += 1
                raise OutOfMemoryError(self._oom_message(n, size, b))
        try:
            handle = self.driver.malloc(size)
        except MemoryError as first:
            # The device itself is full: give the cache back and try once more.
            self._release_cached()
            try:
                handle = self.driver.malloc(size)
            except MemoryError as err:
                self._num_ooms += 1
                raise OutOfMemoryError(self._oom_message(n, size, b, driver_error=err)) \
                    from first
        self._driver_allocs += 1
        self._reserved += size
        if self._reserved > self._peak_reserved:
            self._peak_reserved = self._reserved
        return handle

    def _oom_message(self, n, size, b, driver_error=None) -> str:
        cap = self._cap
        if driver_error is not None:
            limit = f"the driver failed ({driver_error})"
        else:
            free = max(cap - self._reserved, 0)
            limit = f"the cap is {_fmt(cap)}, of which {_fmt(free)} is free"
        return (
            f"{self.device_name}: out of memory. Tried to allocate {_fmt(n)}, rounded to "
            f"{size} bytes (bin {b}); {limit}; reserved {_fmt(self._reserved)}, allocated "
            f"{_fmt(self._allocated)} in {self._active} live blocks; cached slabs were "
            f"already given back to the driver. To fix: use a smaller batch size, drop "
            f"references to tensors you no longer need (then call empty_cache()), or raise "
            f"the cap (allocator.cap_bytes).")

    def adopt(self) -> AdoptedCounts:
        """Start counting memory another allocator gives (numpy's, for each CPU tensor
        while memory history is recorded) as allocated and reserved, until
        :meth:`end_adoption`: its adopter adds each block it counts, and each that goes,
        to the returned :class:`AdoptedCounts` (under its lock, with no call: it runs for
        every CPU tensor made), which this allocator folds into its counters before it
        reads or changes them; no slab is made or cached, and no bin counts it. Its events
        go to subscribers (a MemoryView of the CPU) only, through :meth:`emit_adopted`,
        not to :meth:`events`' recent history: memory history keeps its own trace of
        these, and a step makes one per tensor."""
        prev = self._enter()
        try:
            if self._adopted is not None:
                raise RuntimeError(f"{self.device_name}: another adopter is counting "
                                   f"memory here (one at a time)")
            counts = self._adopted = AdoptedCounts(self._allocated, bool(self._callbacks))
            return counts
        finally:
            self._exit(prev)

    def end_adoption(self) -> None:
        """Stop counting adopted memory (the adopter took back what it counted)."""
        prev = self._enter()
        try:
            self._adopted = None
        finally:
            self._exit(prev)

    def emit_adopted(self, kind: str, nbytes: int, tag: str) -> None:
        """Tell subscribers of a block the adopter counted (``kind`` "alloc") or stopped
        counting ("free"), the counts folded first."""
        prev = self._enter()
        try:
            if self._callbacks:
                self._emit(kind, nbytes, nbytes, _ADOPTED, tag)
        finally:
            self._exit(prev)

    def _fold_adopted(self) -> None:
        """Fold what the adopter counted since the last fold into the counters (inside a
        critical section). Between two folds the allocator's own totals stand still (each
        change of them is inside a section), so the most the adopter reached on top of
        them is the peak of the sum."""
        counts = self._adopted
        with counts.lock:
            delta = counts.delta
            if delta or counts.allocs or counts.frees:
                high = counts.high
                if self._allocated + high > self._peak_allocated:
                    self._peak_allocated = self._allocated + high
                if self._reserved + high > self._peak_reserved:
                    self._peak_reserved = self._reserved + high
                self._allocated += delta
                self._requested += delta
                self._reserved += delta
                self._active += counts.allocs - counts.frees
                self._num_allocs += counts.allocs
                self._num_frees += counts.frees
                by_tag = self._by_tag
                for tag, n in counts.by_tag.items():
                    if n:
                        by_tag[tag] += n
                        counts.by_tag[tag] = 0
                counts.delta = counts.high = counts.allocs = counts.frees = 0
            counts.base = self._allocated

    def _put_back(self, handle, size, requested, b, tag) -> None:
        self._return_slab(handle, size, requested, b)
        self._active -= 1
        self._num_frees += 1
        self._allocated -= size
        self._requested -= requested
        self._by_tag[tag] -= size
        if self._emitting:
            self._emit("free", size, requested, b, tag)
        if self.on_free is not None:
            self.on_free(handle, tag, self._allocated)

    def _return_slab(self, handle, size, requested, b) -> None:
        st = self._bins[b]
        pools = self._pools_of.get(id(handle)) if self._pools_of else None
        if not pools:
            self._cache(b, handle)
            st[1] += 1
            self._cached += 1
        else:  # kept free for the pools that name it only
            pools[0]._keep(handle, b)
            for pool in pools:
                pool._died(handle)
            self._captured += size
            self._captured_blocks += 1
        st[0] -= 1
        st[2] -= requested
        st[3] -= size

    def _cache(self, b: int, handle) -> None:
        """Keep a free slab in its bin's list, in the order ``reuse`` hands slabs out."""
        free = self._free.setdefault(b, [])
        if self._stable:
            bisect.insort(free, handle, key=id)  # (a builtin key: no Python call)
        else:
            free.append(handle)

    def _release_cached(self) -> int:
        released = 0
        for b, handles in self._free.items():
            st = self._bins[b]
            size = bin_size(b, self.divisions)
            while handles:
                self.driver.free(handles.pop())
                st[1] -= 1
                self._cached -= 1
                self._reserved -= size
                self._driver_frees += 1
                released += size
                if self._emitting:
                    self._emit("release", size, 0, b, None)
        return released

    # -- private pools ---------------------------------------------------------------
    def private_pool(self) -> PrivatePool:
        """A new, empty :class:`PrivatePool` of this allocator."""
        return PrivatePool(self)

    def _set_routing(self, pool) -> None:
        with self._lock:
            if pool is not None and self._routing is not None:
                raise RuntimeError(f"{self.device_name}: a private pool is already taking "
                                   f"this allocator's new blocks (one capture at a time)")
            self._routing = pool

    def _reserve(self, pool, handle) -> None:
        with self._lock:
            pools = self._pools_of.setdefault(id(handle), [])
            if pool not in pools:
                pools.append(pool)

    def _release_pool(self, pool) -> None:
        prev = self._enter()
        try:
            if self._routing is pool:
                self._routing = None
            for key in pool._slabs:
                pools = self._pools_of.get(key)
                if pools is not None and pool in pools:
                    pools.remove(pool)
                    if not pools:
                        del self._pools_of[key]
            for b, handles in pool._free.items():
                size = bin_size(b, self.divisions)
                st = self._bins[b]
                for handle in handles:
                    others = self._pools_of.get(id(handle))
                    if others:  # another pool names it too: still kept
                        others[0]._keep(handle, b)
                        continue
                    self._cache(b, handle)
                    st[1] += 1
                    self._cached += 1
                    self._captured -= size
                    self._captured_blocks -= 1
        finally:
            self._exit(prev)

    def empty_cache(self) -> int:
        """Give every cached (unused) slab back to the driver; returns the bytes freed.
        Blocks still referenced are untouched."""
        prev = self._enter()
        try:
            return self._release_cached()
        finally:
            self._exit(prev)

    def _retag(self, block: Block, tag: str) -> None:
        _check_tag(tag)
        prev = self._enter()
        try:
            old = block.tag
            if old == tag:
                return
            self._by_tag[old] -= block.size
            self._by_tag[tag] += block.size
            block.tag = tag
            if self._emitting:
                self._emit("retag", block.size, block.requested, block.bin, tag)
        finally:
            self._exit(prev)

    # -- events ----------------------------------------------------------------------
    def _emit(self, kind, size, requested, b, tag) -> None:
        self._seq += 1
        ev = _new_event(MemoryEvent, (self._seq, kind, size, requested, b, tag,
                                      self._allocated, self._reserved))
        if self._history is not None:
            self._history.append(ev)
        for cb in self._callbacks:
            try:
                cb(ev)
            except Exception as e:  # a broken widget must not break allocation
                warnings.warn(f"memory event subscriber {cb!r} raised {e!r}",
                              RuntimeWarning, stacklevel=2)

    def subscribe(self, callback):
        """Call ``callback(event)`` on every :class:`MemoryEvent` from now on (on the
        thread that caused it, with the allocator locked: keep it short). Returns a
        function that unsubscribes."""
        if not callable(callback):
            raise TypeError(f"subscriber must be callable, got {callback!r}")
        with self._lock:
            token = self._next_token
            self._next_token += 1
            self._subscribers[token] = callback
            self._callbacks = tuple(self._subscribers.values())
            self._emitting = True
            if self._adopted is not None:
                self._adopted.eager = True

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers.pop(token, None)
                self._callbacks = tuple(self._subscribers.values())
                self._emitting = bool(self._callbacks) or self._history is not None
                if self._adopted is not None:
                    self._adopted.eager = bool(self._callbacks)

        return unsubscribe

    def events(self, last: int | None = None) -> list[MemoryEvent]:
        """The most recent events, oldest first (``last`` of them, or all kept)."""
        with self._lock:
            evs = list(self._history) if self._history is not None else []
        return evs if last is None else evs[-last:] if last > 0 else []

    # -- stats -----------------------------------------------------------------------
    def stats(self) -> dict:
        """Counters named like PyTorch's ``memory_stats`` where they fit (bytes unless
        named otherwise); ``bins`` maps bin size -> per-bin counts of bins in use or
        cached; ``by_tag`` maps tag -> allocated bytes; ``captured_bytes`` and
        ``captured_blocks`` count the free slabs private pools keep (reserved, not
        cached: no other tensor gets them)."""
        prev = self._enter()
        try:
            bins = {
                bin_size(b, self.divisions): {
                    "bin": b, "in_use": st[0], "cached": st[1],
                    "requested_bytes": st[2], "allocated_bytes": st[3],
                }
                for b, st in sorted(self._bins.items()) if st[0] or st[1]
            }
            return {
                "device": self.device_name,
                "allocated_bytes": self._allocated,
                "requested_bytes": self._requested,
                "reserved_bytes": self._reserved,
                "cached_bytes": self._reserved - self._allocated - self._captured,
                "captured_bytes": self._captured,
                "active_blocks": self._active,
                "cached_blocks": self._cached,
                "captured_blocks": self._captured_blocks,
                "peak_allocated_bytes": self._peak_allocated,
                "peak_reserved_bytes": self._peak_reserved,
                "cache_hits": self._hits,
                "cache_misses": self._driver_allocs,
                "driver_allocs": self._driver_allocs,
                "driver_frees": self._driver_frees,
                "num_allocs": self._num_allocs,
                "num_frees": self._num_frees,
                "num_ooms": self._num_ooms,
                "cap_bytes": self._cap,
                "divisions": self.divisions,
                "bins": bins,
                "by_tag": dict(self._by_tag),
            }
        finally:
            self._exit(prev)

    def reset_peak_stats(self) -> None:
        """Restart the peaks from the current allocated / reserved bytes."""
        prev = self._enter()
        try:
            self._peak_allocated = self._allocated
            self._peak_reserved = self._reserved
        finally:
            self._exit(prev)

    def __repr__(self) -> str:
        prev = self._enter()  # (what an adopter counted, folded in)
        try:
            return (f"Allocator({self.device_name!r}, allocated={self._allocated}, "
                    f"reserved={self._reserved}, cap={self._cap})")
        finally:
            self._exit(prev)


# -- per-device registry -----------------------------------------------------------------

_registry: dict[str, Allocator] = {}
_registry_lock = threading.Lock()
_ALIASES = {"wgpu": "gpu", "cuda": "gpu"}


def _device_type(device) -> str:
    t = "cpu" if device is None else getattr(device, "type", device)
    if not isinstance(t, str):
        raise TypeError(f"expected a device or a device name, got {device!r}")
    return _ALIASES.get(t, t)


def register_allocator(device_type, allocator: Allocator):
    """Install ``allocator`` for a device type ("gpu": done by the wgpu backend with its
    buffer driver). Returns the allocator it replaces, or None."""
    key = _device_type(device_type)
    with _registry_lock:
        prev = _registry.get(key)
        _registry[key] = allocator
    return prev


def _start_device(key: str) -> None:
    """Start the backend of a device Haelixe knows, which registers its allocator."""
    from .device import Device  # lazily: the device layer starts backends on demand

    try:
        dev = Device(key)
    except ValueError:
        return  # not a device Haelixe runs; only register_allocator can add one
    dev.backend  # noqa: B018 - starting the backend is the point


def get_allocator(device="cpu") -> Allocator:
    """The allocator of ``device`` ("cpu", "gpu" or a Device). The CPU one is created on
    first use with :class:`NumpyDriver`; the GPU one comes with the GPU backend, which
    this starts when it is not running yet (so a memory picture may open before the
    first GPU tensor)."""
    key = _device_type(device)
    alloc = _registry.get(key)
    if alloc is None:
        with _registry_lock:
            alloc = _registry.get(key)
            if alloc is None and key == "cpu":
                alloc = _registry["cpu"] = Allocator("cpu", NumpyDriver())
        if alloc is None:
            _start_device(key)
            alloc = _registry.get(key)
        if alloc is None:
            raise RuntimeError(
                f"no allocator registered for device {key!r}; the backend installs one when "
                f"it starts (for the GPU: after the first GPU tensor), or call "
                f"register_allocator({key!r}, Allocator({key!r}, driver))")
    return alloc


def memory_stats(device="cpu") -> dict:
    """``get_allocator(device).stats()``, and whether tensors of the device allocate
    through it (``tensors_use_allocator``). On the CPU they do not: each CPU tensor owns
    numpy memory (a Python-level pool on every op costs more than it saves), so the CPU
    counters cover memory taken with ``get_allocator("cpu").allocate(...)`` and, while
    ``hx.record_memory_history(device="cpu")`` runs, the tensors made meanwhile
    (``tensors_counted``)."""
    alloc = get_allocator(device)
    stats = alloc.stats()
    on_cpu = _device_type(device) == "cpu"
    stats["tensors_use_allocator"] = not on_cpu
    if on_cpu:
        counted = alloc.on_allocate is not None  # hx.record_memory_history adopts them
        stats["tensors_counted"] = counted
        stats["note"] = ("CPU tensors are allocated by numpy, not by this allocator; "
                         + ("while memory history is recorded on the CPU, each tensor "
                            "made since counts here until its memory goes" if counted else
                            "these counters cover only get_allocator('cpu').allocate(...) "
                            "(and, while hx.record_memory_history(device='cpu') runs, the "
                            "tensors made meanwhile)"))
    return stats


def empty_cache(device="cpu") -> int:
    """Give the cached slabs of ``device`` back to its driver; returns the bytes freed."""
    return get_allocator(device).empty_cache()


def reset_peak_stats(device="cpu") -> None:
    """Restart the peak counters of ``device`` from the current values."""
    get_allocator(device).reset_peak_stats()
