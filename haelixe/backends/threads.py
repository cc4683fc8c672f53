"""How many threads a CPU kernel runs on.

``set_num_threads(n)`` caps every CPU kernel at n threads, as PyTorch's does;
``get_num_threads()`` reads the cap (by default the cores this process may run on).
Under the cap, each BLAS call (matmul and the fused kernels built on it) chooses its
own count when it starts:

- a call too small to split (fewer than ``MIN_WORK_PER_THREAD`` multiply-adds per
  thread) runs on one thread: waking and joining threads costs more than it saves;
- a larger one takes the cores no other process is using, measured from the CPU time of
  the cores this process may run on (``/proc/stat``) minus this process's own, sampled
  twice a second. On a busy
  machine BLAS threads that share cores with other work wait on each other at every
  barrier, and a 2-thread product can run 10x slower than the same product on one
  thread; measuring the neighbours keeps a busy machine at one-thread speed instead.

BLAS runs on one thread between calls, so numpy code outside Haelixe sees the same.
threadpoolctl finds numpy's BLAS library and sets its thread count.
"""

from __future__ import annotations

import os
import time

MIN_WORK_PER_THREAD = 1 << 18  # multiply-adds (about 10 us of float32 GEMM on one core)
SAMPLE_SECONDS = 0.5


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class _Policy:
    def __init__(self):
        self.cap = _usable_cores()
        self.blas = None  # threadpoolctl controllers of numpy's BLAS, found on first use
        self.current = None  # the thread count BLAS was last set to
        self.free = None  # cores not used by other processes, as last measured
        self.next_sample = 0.0
        self.last = None  # (machine busy, machine total, own CPU) at the last sample

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
            self.blas = self._controllers()
        if n != self.current:
            for c in self.blas:
                c.set_num_threads(n)
            self.current = n

    # -- how busy the machine is -------------------------------------------------------
    def free_cores(self) -> int:
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
    many as the work splits into, the cap and the idle cores allow."""
    if work < 2 * MIN_WORK_PER_THREAD or _POLICY.cap == 1:
        return 1
    return max(1, min(_POLICY.cap, work // MIN_WORK_PER_THREAD, _POLICY.free_cores()))


def blas(fn, *args, work: int):
    """``fn(*args)`` (a BLAS call) on the threads ``threads_for(work)`` chooses; BLAS is
    back on one thread after it."""
    n = threads_for(work)
    policy = _POLICY
    if n == 1:
        if policy.current != 1:
            policy.set_blas(1)
        return fn(*args)
    policy.set_blas(n)
    try:
        return fn(*args)
    finally:
        policy.set_blas(1)
