"""DataLoader: a dataset's samples in batches of Haelixe tensors, read ahead on a
background thread, in an order that a seed fixes and a checkpoint can resume."""

from __future__ import annotations

import queue
import threading
from collections import deque

import numpy as np

from ..random import generator as _default_generator
from .dataset import default_collate


class DataLoader:
    """Iterate ``dataset`` in batches of ``batch_size`` samples: for the datasets below
    a tuple of tensors (one per field: ``for inputs, targets in loader``), for others
    what ``collate_fn`` makes of the samples.

    - Unshuffled, a batch is consecutive samples, and for an ArrayDataset,
      MemmapDataset or TensorDataset a zero-copy view of the data (of the file's
      mapping itself).
    - ``shuffle=True`` visits every sample once per epoch in a random order; each batch
      gathers its samples by index into fresh tensors. For a dataset that gathers
      whole batches the indices within a batch are sorted, so the reads sweep the file
      forwards (fewer page faults and disk seeks); which samples share a batch is
      random, their order inside it is ascending.
    - The order of epoch ``e`` depends only on (``seed``, ``e``): each pass over the
      loader is the next epoch, with a new order. ``seed=None`` draws a seed from
      Haelixe's generator, so ``hx.manual_seed`` fixes it too.
    - ``prefetch`` batches are prepared ahead. Gathered batches are built on a
      background thread (a bounded queue); an exception there is raised in the caller
      by the next ``next()``, and an abandoned iterator stops its thread. Views need
      no work, so for them the loader only asks the kernel to start reading the next
      ``prefetch`` batches from disk (MADV_WILLNEED), without a thread. 0 prefetches
      nothing.
    - A MemmapDataset bounds its own resident pages (its ``max_resident_bytes``), so
      iterating a file larger than RAM keeps the process's memory flat.
    - ``state_dict()`` / ``load_state_dict()`` record and restore the position (epoch
      and batch) so an interrupted run continues with exactly the batches it would have
      seen.

    Any map-style dataset (``__len__`` and ``__getitem__``) works, as in PyTorch: its
    samples are read one by one and ``collate_fn`` (default: ``default_collate``, which
    stacks tensors, arrays and numbers field by field) makes the batch. A dataset with
    whole-batch reads (``slice``/``gather``: ArrayDataset, MemmapDataset,
    TensorDataset) takes the fast path above when no ``collate_fn`` is given.
    ``generator`` (a numpy Generator) draws the seed when ``seed`` is not given.
    """

    def __init__(self, dataset, batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, seed: int | None = None, prefetch: int = 2, *,
                 collate_fn=None, generator=None, num_workers: int = 0):
        if batch_size is None:
            raise ValueError("DataLoader: batch_size=None (no batching) is not supported; "
                             "use batch_size=1, or iterate over the dataset itself")
        if int(batch_size) < 1:
            raise ValueError(f"DataLoader: batch_size must be >= 1, got {batch_size}")
        if int(prefetch) < 0:
            raise ValueError(f"DataLoader: prefetch must be >= 0, got {prefetch}")
        if num_workers:
            raise ValueError(f"DataLoader: num_workers={num_workers} worker processes are "
                             f"not supported; batches are prepared ahead on one background "
                             f"thread (prefetch={prefetch})")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DataLoader: collate_fn must be callable, got "
                            f"{type(collate_fn).__name__}")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.collate_fn = collate_fn
        if seed is None:
            seed = (generator if generator is not None else _default_generator()).integers(
                2**63)
        self.seed = int(seed)
        self.prefetch = int(prefetch)
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

    @property
    def _whole_batches(self) -> bool:
        """True when the dataset reads a batch at once (gather) and no collate_fn asks
        for the samples one by one."""
        return self.collate_fn is None and hasattr(self.dataset, "gather")

    def _jobs(self, epoch: int, start: int):
        """What each batch of ``epoch`` from batch ``start`` reads, lazily."""
        n, b = len(self.dataset), self.batch_size
        perm = self.order(epoch)
        sort = self._whole_batches  # sorted reads sweep a mapped file forwards
        for k in range(start, len(self)):
            lo, hi = k * b, min((k + 1) * b, n)
            # a slice is read as a view, an index array gathered
            if perm is None:
                yield slice(lo, hi)
            else:
                yield np.sort(perm[lo:hi]) if sort else perm[lo:hi]

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

    def _make(self, job):
        """The batch a job describes (runs on the prefetch thread): one gather, or the
        samples read one by one and collated."""
        ds = self.dataset
        if isinstance(job, slice):
            job = np.arange(job.start, job.stop)
        if self._whole_batches:
            return ds.gather(job)
        samples = [ds[int(i)] for i in job]
        return (self.collate_fn or default_collate)(samples)

    def __repr__(self) -> str:
        collate = "" if self.collate_fn is None else f", collate_fn={self.collate_fn!r}"
        return (f"DataLoader({self.dataset!r}, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, drop_last={self.drop_last}, seed={self.seed}, "
                f"prefetch={self.prefetch}{collate})")


_END = object()


class _Failure:
    """An exception raised on the prefetch thread, carried to the consumer."""

    def __init__(self, exc: BaseException):
        self.exc = exc


def _produce(batches, out: queue.Queue, stop: threading.Event) -> None:
    """The prefetch thread: make each batch and queue it, until done or stopped. It
    holds no reference to the iterator, so dropping the iterator stops it."""

    def put(item) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    try:
        for batch in batches:
            if stop.is_set() or not put(batch):
                return
        put(_END)
    except BaseException as e:  # noqa: BLE001 (re-raised in the consumer)
        put(_Failure(e))


class _BatchIterator:
    """One pass over a DataLoader: an epoch, from a given batch."""

    def __init__(self, loader: DataLoader, epoch: int, start: int):
        self._loader, self._epoch, self._index = loader, epoch, start
        self._done = False
        self._thread = None
        ds = loader.dataset
        jobs = loader._jobs(epoch, start)
        self._views = (not loader.shuffle and loader.collate_fn is None
                       and hasattr(ds, "slice"))
        if self._views:
            # consecutive samples as views: nothing to prepare but the disk reads
            self._slices, self._ahead = jobs, deque()
            self._advise = getattr(ds, "prefetch", None)
        elif loader.prefetch > 0:
            self._queue = queue.Queue(maxsize=loader.prefetch)
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=_produce, name="haelixe-dataloader", daemon=True,
                args=((loader._make(job) for job in jobs), self._queue, self._stop))
            self._thread.start()
        else:
            self._batches = (loader._make(job) for job in jobs)

    def __iter__(self) -> _BatchIterator:
        return self

    def __len__(self) -> int:
        return len(self._loader) - self._index

    def _next_view(self):
        # keep the next `prefetch` batches on their way from the disk
        while len(self._ahead) <= self._loader.prefetch:
            job = next(self._slices, None)
            if job is None:
                break
            if self._advise is not None:
                self._advise(job.start, job.stop)
            self._ahead.append(job)
        if not self._ahead:
            return _END
        job = self._ahead.popleft()
        return self._loader.dataset.slice(job.start, job.stop)

    def _next_item(self):
        if self._views:
            return self._next_view()
        if self._thread is None:
            return next(self._batches, _END)
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
        try:
            item = self._next_item()
        except BaseException:
            self.close()
            raise
        if item is _END:
            self._loader._cursor = (self._epoch + 1, 0)
            self.close()
            raise StopIteration
        if isinstance(item, _Failure):
            self.close()
            raise item.exc
        self._index += 1
        self._loader._cursor = (self._epoch, self._index)
        return item

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
