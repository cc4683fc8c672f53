"""How many threads a CPU kernel runs on.

``set_num_threads(n)`` caps every CPU kernel at n threads, as PyTorch's does;
``get_num_threads()`` reads the cap (by default the cores this process may run on).
Under the cap, each BLAS call (matmul and the fused kernels built on it) chooses its
own count when it starts:

- a call too small to split (fewer than ``MIN_WORK_PER_THREAD`` multiply-adds per
  thread) runs on one thread: waking and joining threads costs more than it saves;
- a larger one takes the cores no other process is using, measured from the CPU time of
  the cores this process may run on (``/proc/stat``) minus this process's own, sampled
  twice a second (the ``idle_cores`` piece of tuning.py; off, every usable core). On a busy
  machine BLAS threads that share cores with other work wait on each other at every
  barrier, and a 2-thread product can run 10x slower than the same product on one
  thread; measuring the neighbours keeps a busy machine at one-thread speed instead.

BLAS runs on one thread between calls, so numpy code outside Haelixe sees the same.
threadpoolctl finds numpy's BLAS library and sets its thread count.

A batch of small independent pieces (the products of a batched matmul, the heads of an
attention) gives BLAS too little to split, however large the batch: ``over_batch`` cuts
the batch instead and runs the parts on a small pool of Python threads (the kernels
release the GIL), BLAS on one thread inside each, under the same cap and idle-core
count. Handing a part to a sleeping thread costs tens of microseconds, so a part is cut
only from ``MIN_WORK_PER_PART``.
"""

from __future__ import annotations

import math
import os
import threading
import time

import numpy as np

from . import tuning

MIN_WORK_PER_THREAD = 1 << 18  # multiply-adds (about 10 us of float32 GEMM on one core)
# a part of the pool's (below): about 150 us of work. Handing a part to a sleeping
# thread and taking the result back costs about 60 us on a virtual machine's idle core.
MIN_WORK_PER_PART = 1 << 22
# OpenBLAS's threads spin, holding their cores, for 2**28 cycles (about 0.1 s) after each
# call they helped with: a pool thread on one of those cores runs at half speed or less
BLAS_SPIN_SECONDS = 0.15
SAMPLE_SECONDS = 0.5
_MEASURE_IDLE = tuning.on("idle_cores")


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class _Policy:
    def __init__(self):
        self.cap = _usable_cores()
        self.blas = None  # the thread-count setters of numpy's BLAS, found on first use
        self.current = None  # the thread count BLAS was last set to
        self.free = None  # cores not used by other processes, as last measured
        self.next_sample = 0.0
        self.last = None  # (machine busy, machine total, own CPU) at the last sample
        self.blas_spins_until = 0.0  # BLAS's threads hold the cores until then

    # -- BLAS ------------------------------------------------------------------------
    def _controllers(self):
        from threadpoolctl import ThreadpoolController

        libs = ThreadpoolController().select(user_api="blas").lib_controllers
        # numpy's own BLAS (another library in the process, e.g. a benchmark's PyTorch,
        # keeps its settings); every BLAS where none can be told apart
        own = [c for c in libs if "numpy" in c.filepath]
        return own or libs

    def set_blas(self, n: int) -> None:
        if self.blas is None:
            self.blas = [_setter(c) for c in self._controllers()]
        if n != self.current:
            for set_threads in self.blas:
                set_threads(n)
            self.current = n

    # -- how busy the machine is -------------------------------------------------------
    def free_cores(self) -> int:
        if not _MEASURE_IDLE:
            return self.cap
        now = time.monotonic()
        if now >= self.next_sample:
            first = self.free is None
            if first:  # until a measurement exists: the load average's guess
                self.free = self._guess()
            # (the first interval is short, so a measurement replaces the guess soon)
            self.next_sample = now + (SAMPLE_SECONDS / 5 if first else SAMPLE_SECONDS)
            self._sample()
        return self.free

    def _guess(self) -> int:
        """Idle cores from the 1-minute load average (this process adds little to it
        yet: it is asked on the first large call)."""
        try:
            load = os.getloadavg()[0]
        except (OSError, AttributeError):
            return 1
        n = len(_allowed_cpus() or ()) or (os.cpu_count() or 1)
        return max(1, min(self.cap, round(n - load)))

    def _sample(self) -> None:
        cpus = _allowed_cpus()
        try:
            with open("/proc/stat", "rb") as f:
                lines = f.read().split(b"\n")
        except OSError:  # no /proc: trust the cap
            self.free = self.cap
            return
        busy = total = 0
        for line in lines:  # "cpuN user nice system idle iowait irq softirq steal ..."
            if line[:3] == b"cpu" and line[3:4].isdigit():
                fields = line.split()
                if cpus is None or int(fields[0][3:]) in cpus:
                    ticks = [int(v) for v in fields[1:9]]
                    total += sum(ticks)
                    busy += sum(ticks) - ticks[3] - ticks[4]  # all but idle and iowait
        t = os.times()
        own = (t.user + t.system) * os.sysconf("SC_CLK_TCK")
        last, self.last = self.last, (busy, total, own)
        if last is None or total <= last[1]:
            return
        n = len(cpus) if cpus is not None else (os.cpu_count() or 1)
        wall = (total - last[1]) / n  # ticks of one core in the interval
        others = max(0.0, (busy - last[0]) - (own - last[2])) / wall
        self.free = max(1, min(self.cap, round(n - others)))


def _setter(controller):
    """The function that sets ``controller``'s BLAS thread count: OpenBLAS's own
    (pthreads build), looked up once, where threadpoolctl looks the symbol up and checks
    which Python thread controls BLAS on every call (0.5 against 0.1 us, twice per large
    product); the controller's set_num_threads otherwise."""
    fn = None
    if getattr(controller, "internal_api", None) == "openblas" \
            and getattr(controller, "threading_layer", None) == "pthreads":
        try:
            fn = controller._get_symbol("openblas_set_num_threads")
        except Exception:  # (another threadpoolctl: its public method does the same)
            fn = None
    return fn or controller.set_num_threads


def _allowed_cpus():
    """The CPUs this process may run on (the only ones whose load matters)."""
    try:
        return os.sched_getaffinity(0)
    except AttributeError:
        return None


_POLICY = _Policy()


def set_num_threads(n: int) -> None:
    """Cap the threads CPU kernels use (PyTorch's torch.set_num_threads)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected an int >= 1, got {n!r}")
    _POLICY.cap = n


def get_num_threads() -> int:
    """The cap on the threads CPU kernels use (by default, the usable cores)."""
    return _POLICY.cap


def threads_for(work: int) -> int:
    """Threads for a call of ``work`` multiply-adds: one below the split size, else as
    many as the work splits into, the cap and the idle cores allow (one while the pool's
    parts run: they already hold the cores)."""
    if work < 2 * MIN_WORK_PER_THREAD or _POLICY.cap == 1 or _POOL.lock.locked():
        return 1
    return max(1, min(_POLICY.cap, work // MIN_WORK_PER_THREAD, _POLICY.free_cores()))


def blas(fn, *args, work: int):
    """``fn(*args)`` (a BLAS call) on the threads ``threads_for(work)`` chooses; BLAS is
    back on one thread after it."""
    policy = _POLICY
    n = 1 if work < 2 * MIN_WORK_PER_THREAD else threads_for(work)  # (small: no call)
    if n == 1:
        if policy.current != 1:
            policy.set_blas(1)
        return fn(*args)
    policy.set_blas(n)
    try:
        return fn(*args)
    finally:
        policy.set_blas(1)
        policy.blas_spins_until = time.monotonic() + BLAS_SPIN_SECONDS


# -- the pool: a batch cut into parts, one part per thread -------------------------------
class _Worker:
    """A thread that runs one part at a time: ``go`` is released to start it, ``done``
    when the part has run (its result or error left in ``result`` / ``error``)."""

    def __init__(self):
        self.go = threading.Lock()
        self.go.acquire()
        self.done = threading.Lock()
        self.done.acquire()
        self.job = self.result = self.error = None
        threading.Thread(target=self._loop, name="haelixe-cpu", daemon=True).start()

    def _loop(self):
        while True:
            self.go.acquire()
            fn, args = self.job
            self.job = None
            try:
                self.result = fn(*args)
            except BaseException as e:  # handed to the caller, which raises it
                self.error = e
            self.done.release()


class _Pool:
    def __init__(self):
        self.lock = threading.Lock()  # held while parts run; a nested call runs alone
        self.workers: list[_Worker] = []

    def run(self, fn, parts: list) -> list | None:
        """[fn(*p) for p in parts], the first part on this thread and each other on a
        worker; None (nothing run) when the pool is already running parts."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            while len(self.workers) < len(parts) - 1:
                self.workers.append(_Worker())
            if _POLICY.current != 1:
                _POLICY.set_blas(1)
            busy = self.workers[:len(parts) - 1]
            for w, args in zip(busy, parts[1:]):
                w.job, w.result, w.error = (fn, args), None, None
                w.go.release()
            error = None
            try:
                first = fn(*parts[0])
            except BaseException as e:
                first, error = None, e
            for w in busy:  # every part has finished before anything returns
                error = error or _wait(w.done) or w.error
            if error is not None:
                raise error
            return [first] + [w.result for w in busy]
        finally:
            self.lock.release()


def _wait(lock):
    """Acquire ``lock`` even through an interrupt, which is returned (the caller raises
    it once every part is over: a part still running would write into arrays the caller
    no longer expects to change)."""
    interrupted = None
    while True:
        try:
            lock.acquire()
            return interrupted
        except BaseException as e:
            interrupted = e


_POOL = _Pool()


def _after_fork() -> None:
    """A forked child has none of the parent's threads: it starts a pool of its own."""
    global _POOL
    _POOL = _Pool()
    _POLICY.current = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def parts_for(work: int, items: int) -> int:
    """Parts to cut ``items`` independent pieces of ``work`` multiply-adds in all into:
    one below ``MIN_WORK_PER_PART`` a part or while BLAS's threads still spin (a model
    whose large products run on them, as most do, gains nothing from the pool: it runs
    faster whole), else as many as the cap, the idle cores and the items allow."""
    if items < 2 or work < 2 * MIN_WORK_PER_PART or _POLICY.cap == 1 or \
            _POOL.lock.locked() or time.monotonic() < _POLICY.blas_spins_until:
        return 1
    return max(1, min(_POLICY.cap, items, work // MIN_WORK_PER_PART, _POLICY.free_cores()))


def over_batch(fn, args: tuple, tails: tuple, parts: int):
    """[fn(*part args)] over ``parts`` slices of the batch, or None where it is not cut.

    ``args`` are fn's arguments; ``tails[i]`` is the number of trailing dims of array
    argument i that are not batch dims (None for an argument passed whole). The batch
    dims of the arrays broadcast together, as numpy's; they are cut along the longest,
    an array whose dim there is 1 (or absent) going whole to every part. fn must treat
    each batch entry apart from the others, so the parts' results, put side by side,
    are the whole call's. Returns (axis, results), axis counted in the batch dims."""
    lead = _broadcast_or_none(*(a.shape[:a.ndim - t] for a, t in zip(args, tails)
                                if t is not None))
    if not lead:  # no batch, or mismatched ones (the unsplit call raises its own error)
        return None
    axis = max(range(len(lead)), key=lambda i: (lead[i], -i))
    n = min(parts, lead[axis])
    if n < 2:
        return None
    cuts = [lead[axis] * i // n for i in range(n + 1)]
    jobs = [tuple(_cut(a, t, len(lead), axis, lo, hi)
                  for a, t in zip(args, tails)) for lo, hi in zip(cuts, cuts[1:])]
    results = _POOL.run(fn, jobs)
    return None if results is None else (axis, results)


def _cut(a, tail, ndim_lead, axis, lo, hi):
    if tail is None:
        return a
    d = axis - (ndim_lead - (a.ndim - tail))  # the batch dim in a's own dims
    if d < 0 or a.shape[d] == 1:
        return a
    return a[(slice(None),) * d + (slice(lo, hi),)]


def matmul(a, b):
    """np.matmul(a, b) on the threads the policy gives it. A product large enough to
    split runs on BLAS's threads; a batch of products too small for that is cut across
    the pool's threads, each writing its slices of one output. Each product is the same
    one-thread BLAS call either way, so the result does not depend on the threads."""
    if a.ndim < 2 or b.ndim < 2:
        return blas(np.matmul, a, b, work=0)
    each = a.shape[-2] * a.shape[-1] * b.shape[-1]
    if a.ndim == 2 and b.ndim == 2:
        if each < 2 * MIN_WORK_PER_THREAD and _POLICY.current == 1:
            return np.matmul(a, b)  # (blas's own small case, without its call)
        return blas(np.matmul, a, b, work=each)
    # (the cheap bound first: most batches are too small to cut)
    if each * math.prod(a.shape[:-2]) * math.prod(b.shape[:-2]) >= 2 * MIN_WORK_PER_PART \
            and a.dtype is b.dtype and a.dtype in _SPLIT_DTYPES and a.shape[-1] == b.shape[-2]:
        lead = _broadcast_or_none(a.shape[:-2], b.shape[:-2])
        items = math.prod(lead) if lead is not None else 0
        parts = parts_for(each * items, items)
        if parts > threads_for(each):
            out = np.empty(lead + (a.shape[-2], b.shape[-1]), a.dtype)
            if over_batch(_matmul_into, (a, b, out), (2, 2, 2), parts) is not None:
                return out
    return blas(np.matmul, a, b, work=each)


_SPLIT_DTYPES = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


def _matmul_into(a, b, out):
    np.matmul(a, b, out=out)


def _broadcast_or_none(*shapes):
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        return None
