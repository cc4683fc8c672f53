"""DataLoader worker processes: each one reads and collates whole batches of the dataset
and sends them back; the parent hands out batches round-robin and yields the results in
the order of the batches (PyTorch's scheme), whichever worker finishes first.

Batches cross the process boundary as numpy arrays (a Haelixe tensor is rebuilt around
each), so what a worker returns is always a CPU batch."""

from __future__ import annotations

import collections
import multiprocessing
import os
import queue
import random
import sys
import time
import traceback
from dataclasses import dataclass

from ..random import manual_seed
from ..tensor import Tensor

#: how often a waiting side looks at whether the other side is still alive (seconds)
_POLL = 0.1


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: its ``id`` (0..num_workers-1),
    ``num_workers``, its ``seed`` and its own copy of the ``dataset``."""

    id: int
    num_workers: int
    seed: int
    dataset: object


_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """Inside a DataLoader worker process, that worker's WorkerInfo; None in the main
    process (so an IterableDataset can split its stream by ``info.id``)."""
    return _info


# -- batches across the pipe ---------------------------------------------------------
class _Shipped:
    """A tensor in transit: its array and whether it asked for gradients."""

    __slots__ = ("array", "requires_grad")

    def __init__(self, t: Tensor):
        self.array = t.detach().numpy()
        self.requires_grad = t.requires_grad


def _map(obj, leaf):
    """``obj`` with ``leaf`` applied to everything that is not a container."""
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map(x, leaf) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(x, leaf) for x in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _map(v, leaf)) for k, v in obj.items())
    return leaf(obj)


def _ship(obj):
    return _map(obj, lambda x: _Shipped(x) if isinstance(x, Tensor) else x)


def _rebuilt(x):
    if not isinstance(x, _Shipped):
        return x
    from ..creation import from_numpy

    t = from_numpy(x.array)
    return t.requires_grad_() if x.requires_grad else t


def unship(obj):
    """A batch as the worker made it, its tensors rebuilt in this process."""
    return _map(obj, _rebuilt)


class WorkerError:
    """An exception raised in a worker, with the worker's traceback as text."""

    def __init__(self, worker_id: int, where: str):
        exc_type, exc, _ = sys.exc_info()
        self.exc_type = exc_type
        self.message = (f"Caught {exc_type.__name__} in DataLoader worker process "
                        f"{worker_id} {where}.\nOriginal "
                        + "".join(traceback.format_exception(exc_type, exc,
                                                             exc.__traceback__)))

    def reraise(self):
        try:
            err = self.exc_type(self.message)
        except Exception:  # noqa: BLE001 (a type that wants other arguments)
            err = RuntimeError(self.message)
        if isinstance(err, KeyError):  # KeyError shows its argument's repr
            err = RuntimeError(self.message)
        raise err


class Exhausted:
    """An IterableDataset worker has no more samples."""

    def __init__(self, worker_id: int):
        self.worker_id = worker_id


# -- the worker process --------------------------------------------------------------
def _worker_loop(fetcher, index_queue, result_queue, worker_id: int, num_workers: int,
                 seed: int, init_fn, parent: int) -> None:
    global _info
    manual_seed(seed)
    random.seed(seed)
    _info = WorkerInfo(worker_id, num_workers, seed, fetcher.dataset)
    failed = None
    if init_fn is not None:
        try:
            init_fn(worker_id)
        except Exception:  # noqa: BLE001 (sent to the parent)
            failed = WorkerError(worker_id, "in worker_init_fn")
    stream, stream_epoch = None, None
    try:
        while True:
            try:
                task = index_queue.get(timeout=_POLL)
            except queue.Empty:
                if os.getppid() != parent:  # the parent died: nobody to serve
                    return
                continue
            if task is None:
                return
            epoch, task_id, job = task
            if failed is not None:
                result_queue.put((epoch, task_id, failed))
                continue
            try:
                if fetcher.iterable:
                    if stream_epoch != epoch:
                        stream, stream_epoch = fetcher.stream(), epoch
                    batch = fetcher.next_batch(stream)
                    out = Exhausted(worker_id) if batch is None else _ship(batch)
                else:
                    out = _ship(fetcher.fetch(job))
            except Exception:  # noqa: BLE001 (sent to the parent)
                out = WorkerError(worker_id, "while fetching a batch")
            result_queue.put((epoch, task_id, out))
    except KeyboardInterrupt:
        return
    finally:
        # at shutdown nobody reads what is still queued: do not wait to flush it
        result_queue.cancel_join_thread()


def _context(spec):
    if spec is None:
        methods = multiprocessing.get_all_start_methods()
        return multiprocessing.get_context("fork" if "fork" in methods else None)
    if isinstance(spec, str):
        return multiprocessing.get_context(spec)
    return spec


class WorkerPool:
    """``num_workers`` processes serving one loader's fetcher."""

    def __init__(self, fetcher, num_workers: int, base_seed: int, init_fn, context):
        ctx = _context(context)
        self.num_workers = num_workers
        self.results = ctx.Queue()
        self.queues, self.procs = [], []
        for w in range(num_workers):
            q = ctx.Queue()
            p = ctx.Process(target=_worker_loop, name=f"haelixe-dataloader-worker-{w}",
                            args=(fetcher, q, self.results, w, num_workers,
                                  base_seed + w, init_fn, os.getpid()),
                            daemon=True)
            p.start()
            self.queues.append(q)
            self.procs.append(p)
        self.closed = False

    def get(self, timeout: float):
        """The next (epoch, task id, result) from any worker; RuntimeError when a worker
        died or nothing came for ``timeout`` seconds (0: wait for ever)."""
        start = time.monotonic()
        while True:
            try:
                return self.results.get(timeout=_POLL)
            except queue.Empty:
                dead = [p for p in self.procs if not p.is_alive()]
                if dead:
                    codes = ", ".join(f"pid {p.pid} exit code {p.exitcode}" for p in dead)
                    self.shutdown()
                    raise RuntimeError(f"DataLoader worker ({codes}) exited unexpectedly; "
                                       f"a worker killed by a signal (negative code) may "
                                       f"have run out of memory") from None
                if timeout and time.monotonic() - start > timeout:
                    self.shutdown()
                    raise RuntimeError(f"DataLoader timed out after {timeout} seconds "
                                       f"waiting for a batch from its workers") from None

    def shutdown(self) -> None:
        if self.closed:
            return
        self.closed = True
        for q, p in zip(self.queues, self.procs):
            if p.is_alive():
                try:
                    q.put(None)
                except (OSError, ValueError):
                    pass
        deadline = time.monotonic() + 2.0
        for p in self.procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.terminate()
                p.join(timeout=1.0)
        for q in self.queues + [self.results]:
            q.cancel_join_thread()
            q.close()


class WorkerIterator:
    """One pass over a loader's batches through a WorkerPool: at most ``ahead`` batches
    are out at once, and they come back in the order of the jobs."""

    _epochs = iter(range(1, 2**62))  # tags a pass, so a persistent pool drops stale work

    def __init__(self, pool: WorkerPool, jobs, ahead: int, timeout: float,
                 iterable: bool, owns_pool: bool):
        self.pool, self.jobs, self.timeout = pool, jobs, timeout
        self.iterable, self.owns_pool = iterable, owns_pool
        self.tag = next(WorkerIterator._epochs)
        self.active = collections.deque(range(pool.num_workers))  # round-robin order
        self.sent = self.next_out = 0
        self.waiting = {}  # task id -> result that came early
        self.worker_of = {}
        self.done = False
        for _ in range(ahead):
            if not self._send():
                break

    def _send(self) -> bool:
        if not self.active:
            return False
        job = None
        if not self.iterable:
            job = next(self.jobs, None)
            if job is None:
                return False
        w = self.active[0]
        self.active.rotate(-1)
        self.pool.queues[w].put((self.tag, self.sent, job))
        self.worker_of[self.sent] = w
        self.sent += 1
        return True

    def __iter__(self):
        return self

    def __next__(self):
        while not self.done:
            if self.next_out >= self.sent:
                self.close()
                break
            while self.next_out not in self.waiting:
                tag, task_id, out = self.pool.get(self.timeout)
                if tag == self.tag:
                    self.waiting[task_id] = out
            out = self.waiting.pop(self.next_out)
            self.next_out += 1
            if isinstance(out, WorkerError):
                self.close(force=True)
                out.reraise()
            if isinstance(out, Exhausted):
                if out.worker_id in self.active:
                    self.active.remove(out.worker_id)
                self._send()  # keep the other workers busy
                continue
            self._send()
            return unship(out)
        raise StopIteration

    def close(self, force: bool = False) -> None:
        self.done = True
        if self.owns_pool or force:
            self.pool.shutdown()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter teardown)
            pass
