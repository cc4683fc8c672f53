"""DataLoader: a dataset's samples in batches of Haelixe tensors, read ahead on a
background thread, in an order that a seed fixes and a checkpoint can resume."""

from __future__ import annotations

import queue
import threading

import numpy as np

from ..creation import from_numpy
from ..random import generator
from .memmap import ResidentGuard


class DataLoader:
    """Iterate ``dataset`` in batches of ``batch_size`` samples, each a tuple of tensors
    (one per field: ``for inputs, targets in loader``).

    - Unshuffled, a batch is consecutive samples, and for an ArrayDataset or
      MemmapDataset a zero-copy view of the data (of the file's mapping itself).
    - ``shuffle=True`` visits every sample once per epoch in a random order; each batch
      gathers its samples by index into fresh tensors. The indices within a batch are
      sorted, so the reads sweep the file forwards (fewer page faults and disk seeks);
      which samples share a batch is random, their order inside it is ascending.
    - The order of epoch ``e`` depends only on (``seed``, ``e``): each pass over the
      loader is the next epoch, with a new order. ``seed=None`` draws a seed from
      Haelixe's generator, so ``hx.manual_seed`` fixes it too.
    - ``prefetch`` batches are prepared ahead on a background thread (gathered, or for
      views asked from the disk with MADV_WILLNEED); 0 reads in the caller's thread.
      An exception there is raised in the caller by the next ``next()``; an abandoned
      iterator stops its thread.
    - ``max_resident_bytes`` bounds the memory a memory-mapped dataset's pages take in
      this process: when its file-backed resident size has grown past the bound the
      pages already consumed are dropped (they are re-read if touched again). None
      leaves it to the kernel, which reclaims them only under memory pressure.
    - ``state_dict()`` / ``load_state_dict()`` record and restore the position (epoch
      and batch) so an interrupted run continues with exactly the batches it would have
      seen.

    A dataset without ``slice``/``gather`` (any object with ``__len__`` and
    ``__getitem__``) is batched by stacking its items.
    """

    def __init__(self, dataset, batch_size: int, shuffle: bool = False,
                 drop_last: bool = False, seed: int | None = None, prefetch: int = 2, *,
                 max_resident_bytes: int | None = 256 << 20):
        if int(batch_size) < 1:
            raise ValueError(f"DataLoader: batch_size must be >= 1, got {batch_size}")
        if int(prefetch) < 0:
            raise ValueError(f"DataLoader: prefetch must be >= 0, got {prefetch}")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.seed = int(generator().integers(2**63)) if seed is None else int(seed)
        self.prefetch = int(prefetch)
        self.max_resident_bytes = max_resident_bytes
        self._next_epoch = 0  # the epoch a fresh iteration runs
        self._resume = None  # (epoch, batch) set by load_state_dict
        self._cursor = (0, 0)  # (epoch, batches consumed in it)

    def __len__(self) -> int:
        n, b = len(self.dataset), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    @property
    def epoch(self) -> int:
        """The epoch the next iteration runs (or resumes)."""
        return self._resume[0] if self._resume else self._next_epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration run epoch ``epoch`` from its first batch."""
        self._next_epoch, self._resume = int(epoch), None

    def order(self, epoch: int) -> np.ndarray | None:
        """The sample order of ``epoch`` (None when unshuffled: 0, 1, 2, ...)."""
        if not self.shuffle:
            return None
        n = len(self.dataset)
        # int32 where it fits: 4 bytes per sample for a dataset of any size on disk
        perm = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
        np.random.default_rng([self.seed, int(epoch)]).shuffle(perm)
        return perm

    def _jobs(self, epoch: int, start: int):
        """What each batch of ``epoch`` from batch ``start`` reads, lazily."""
        n, b = len(self.dataset), self.batch_size
        perm = self.order(epoch)
        for k in range(start, len(self)):
            lo, hi = k * b, min((k + 1) * b, n)
            # a slice is read as a view, an index array gathered
            yield slice(lo, hi) if perm is None else np.sort(perm[lo:hi])

    # -- iteration -------------------------------------------------------------------
    def __iter__(self) -> _BatchIterator:
        epoch, start = self._resume or (self._next_epoch, 0)
        self._resume = None
        self._next_epoch = epoch + 1
        self._cursor = (epoch, start)
        return _BatchIterator(self, epoch, start)

    # -- position --------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Where the next batch comes from: {"seed", "epoch", "batch", ...}. Saved with a
        checkpoint, it lets a fresh process continue the same sequence of batches."""
        epoch, batch = self._resume or self._cursor
        if batch >= len(self):
            epoch, batch = epoch + 1, 0
        return {"seed": self.seed, "epoch": epoch, "batch": batch,
                "batch_size": self.batch_size, "length": len(self.dataset),
                "shuffle": self.shuffle, "drop_last": self.drop_last}

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state`` (from :meth:`state_dict`): the next iteration starts
        at its epoch and batch, with its seed."""
        mine = {"batch_size": self.batch_size, "length": len(self.dataset),
                "shuffle": self.shuffle, "drop_last": self.drop_last}
        differ = {k: (state[k], v) for k, v in mine.items() if k in state and state[k] != v}
        if differ:
            raise ValueError(f"DataLoader.load_state_dict: the saved position belongs to a "
                             f"different loader (saved vs here: {differ}); build the "
                             f"loader with the same dataset and settings")
        epoch, batch = int(state["epoch"]), int(state["batch"])
        if not 0 <= batch <= len(self):
            raise ValueError(f"DataLoader.load_state_dict: batch {batch} is outside the "
                             f"{len(self)} batches of an epoch")
        self.seed = int(state["seed"])
        self._resume = self._cursor = (epoch, batch)
        self._next_epoch = epoch

    # -- the work behind one batch (runs on the prefetch thread) ----------------------
    def _work(self, job, guard):
        ds = self.dataset
        if isinstance(job, slice):
            if hasattr(ds, "prefetch"):
                ds.prefetch(job.start, job.stop)
            return job
        if not hasattr(ds, "gather"):
            return _stack_items(ds, job)
        return ds.gather(job) if guard is None else ds.gather(job, guard=guard)

    def _slice(self, job):
        ds = self.dataset
        if hasattr(ds, "slice"):
            return ds.slice(job.start, job.stop)
        return _stack_items(ds, range(job.start, job.stop))

    def __repr__(self) -> str:
        return (f"DataLoader({self.dataset!r}, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, drop_last={self.drop_last}, seed={self.seed}, "
                f"prefetch={self.prefetch})")


def _stack_items(dataset, indices):
    """Collate ``dataset[i]`` for i in ``indices``: items that are tuples give a tuple of
    stacked fields, single arrays one stacked tensor."""
    items = [dataset[int(i)] for i in indices]

    def stack(xs):
        return from_numpy(np.stack([np.asarray(x) for x in xs]))

    if isinstance(items[0], (tuple, list)):
        return tuple(stack(col) for col in zip(*items))
    return stack(items)


_END = object()


class _Failure:
    """An exception raised on the prefetch thread, carried to the consumer."""

    def __init__(self, exc: BaseException):
        self.exc = exc


def _produce(jobs, work, out: queue.Queue, stop: threading.Event) -> None:
    """The prefetch thread: do each job and queue its result, until done or stopped.
    It holds no reference to the iterator, so dropping the iterator stops it."""

    def put(item) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    try:
        for job in jobs:
            if stop.is_set() or not put(work(job)):
                return
        put(_END)
    except BaseException as e:  # noqa: BLE001 (re-raised in the consumer)
        put(_Failure(e))


class _BatchIterator:
    """One pass over a DataLoader: an epoch, from a given batch."""

    def __init__(self, loader: DataLoader, epoch: int, start: int):
        self._loader, self._epoch, self._index = loader, epoch, start
        self._done = False
        self._seq_guard = self._gather_guard = None
        guard = None
        if loader.max_resident_bytes is not None and getattr(loader.dataset, "mapped", False):
            guard = ResidentGuard.create(loader.max_resident_bytes)
        if loader.shuffle:
            self._gather_guard = guard
        else:
            self._seq_guard, self._released_to = guard, 0
        jobs = loader._jobs(epoch, start)
        gg = self._gather_guard

        def work(job):
            return loader._work(job, gg)

        self._thread = None
        if loader.prefetch > 0:
            self._queue = queue.Queue(maxsize=loader.prefetch)
            self._stop = threading.Event()
            self._thread = threading.Thread(target=_produce, name="haelixe-dataloader",
                                            args=(jobs, work, self._queue, self._stop),
                                            daemon=True)
            self._thread.start()
        else:
            self._jobs, self._work = jobs, work

    def __iter__(self) -> _BatchIterator:
        return self

    def __len__(self) -> int:
        return len(self._loader) - self._index

    def _next_item(self):
        if self._thread is None:
            try:
                job = next(self._jobs)
            except StopIteration:
                return _END
            return self._work(job)
        while True:
            try:
                return self._queue.get(timeout=0.1)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    raise RuntimeError("DataLoader: the prefetch thread ended without "
                                       "a result (was the interpreter shutting down?)") from None

    def __next__(self):
        if self._done:
            raise StopIteration
        item = self._next_item()
        if item is _END:
            self._done = True
            self._loader._cursor = (self._epoch + 1, 0)
            self.close()
            raise StopIteration
        if isinstance(item, _Failure):
            self._done = True
            self.close()
            raise item.exc
        if isinstance(item, slice):
            lo = item.start
            batch = self._loader._slice(item)
            g = self._seq_guard
            if g is not None and g.over():
                # Everything before this batch has been handed out; drop its pages.
                self._loader.dataset.release(self._released_to, lo)
                self._released_to = lo
                g.reset()
        else:
            batch = item
        self._index += 1
        self._loader._cursor = (self._epoch, self._index)
        return batch

    def close(self) -> None:
        """Stop the prefetch thread (an abandoned iterator does this when collected)."""
        self._done = True
        t = self._thread
        if t is None:
            return
        self._stop.set()
        while True:  # unblock a put() and drop prepared batches
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        if t is not threading.current_thread():
            t.join(timeout=5)
        self._thread = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter teardown)
            pass
