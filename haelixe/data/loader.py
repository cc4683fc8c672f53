"""DataLoader: a dataset's samples in batches of Haelixe tensors (PyTorch's signature),
read ahead on a background thread or by worker processes, in an order that a seed fixes
and a checkpoint can resume."""

from __future__ import annotations

import itertools
import numbers
import queue
import threading
from collections import deque

import numpy as np

from .dataset import IterableDataset
from .fetch import Fetcher
from .sampler import BatchSampler, Sampler, SequentialSampler, numpy_generator
from .workers import WorkerIterator, WorkerPool


class DataLoader:
    """Iterate ``dataset`` in batches of ``batch_size`` samples (PyTorch's signature and
    semantics): for the datasets below a tuple of tensors (one per field: ``for inputs,
    targets in loader``), for others what ``collate_fn`` (default: ``default_collate``,
    which stacks tensors, arrays and numbers field by field) makes of the samples.

    - Unshuffled, a batch is consecutive samples, and for an ArrayDataset,
      MemmapDataset or TensorDataset a zero-copy view of the data (of the file's
      mapping itself).
    - ``shuffle=True`` visits every sample once per epoch in a random order; a batch
      holds its samples in that order. A dataset with whole-batch reads (``gather``:
      ArrayDataset, MemmapDataset, TensorDataset) reads each batch at once (a mapped
      file in ascending order of its rows, so the reads sweep it forwards).
    - The order of epoch ``e`` depends only on (``seed``, ``e``): each pass over the
      loader is the next epoch, with a new order. ``seed=None`` draws a seed from
      ``generator`` (an hx.Generator or numpy Generator), by default Haelixe's, so
      ``hx.manual_seed`` fixes it too.
    - ``sampler`` (any iterable of indices, e.g. RandomSampler, WeightedRandomSampler)
      or ``batch_sampler`` (an iterable of index lists) choose the indices instead, as
      in PyTorch; an IterableDataset is read as its stream.
    - ``num_workers=N`` reads and collates batches in N worker processes, handed out
      round-robin, and yields them in the order of the batches; ``prefetch_factor``
      batches per worker are in flight. Each worker is seeded (``hx.manual_seed`` and
      ``random.seed``) with a base seed drawn per pass plus its id, then runs
      ``worker_init_fn(id)``; inside it ``get_worker_info()`` says which it is. An
      exception in a worker is raised here with the worker's traceback; a worker that
      dies, or ``timeout`` seconds without a batch, raise RuntimeError. Workers stop
      at the end of each pass (or when the iterator is dropped), unless
      ``persistent_workers=True`` keeps them for the loader's life. Batches come back
      as CPU tensors.
    - With ``num_workers=0``, ``prefetch`` batches are prepared ahead on a background
      thread (a bounded queue); an exception there is raised by the next ``next()``,
      and an abandoned iterator stops its thread. Views need no work, so for them the
      loader only asks the kernel to start reading the next ``prefetch`` batches from
      disk (MADV_WILLNEED), without a thread. 0 prefetches nothing.
    - A MemmapDataset bounds its own resident pages (its ``max_resident_bytes``), so
      iterating a file larger than RAM keeps the process's memory flat.
    - ``state_dict()`` / ``load_state_dict()`` record and restore the position (epoch
      and batch) so an interrupted run continues with exactly the batches it would have
      seen (with a ``sampler`` of one's own: the batches after as many of its next
      pass).
    - ``pin_memory`` has nothing to do on a CPU and is accepted as PyTorch accepts it
      without an accelerator; ``batch_size=None`` turns automatic batching off (each
      sample converted by ``default_convert``).
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler=None, batch_sampler=None, num_workers: int = 0, collate_fn=None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True,
                 seed: int | None = None, prefetch: int = 2):
        iterable = isinstance(dataset, IterableDataset)
        _check_arguments(iterable, batch_size, shuffle, sampler, batch_sampler,
                         num_workers, collate_fn, drop_last, timeout, prefetch_factor,
                         persistent_workers, prefetch, in_order)
        self.dataset = dataset
        self.batch_size = None if batch_sampler is not None or batch_size is None \
            else int(batch_size)
        self._auto_batch = batch_sampler is not None or batch_size is not None
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.collate_fn = collate_fn
        self.num_workers = int(num_workers)
        self.pin_memory, self.pin_memory_device = bool(pin_memory), pin_memory_device
        self.timeout = float(timeout)
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = (2 if prefetch_factor is None else int(prefetch_factor)) \
            if num_workers else None
        self.persistent_workers = bool(persistent_workers)
        self.generator = generator
        self._iterable = iterable
        self._own_sampler = sampler is None and batch_sampler is None and not iterable
        if iterable:
            self.sampler = None
        elif sampler is not None:
            self.sampler = sampler
        elif batch_sampler is not None:
            self.sampler = getattr(batch_sampler, "sampler", None)
        else:
            self.sampler = _EpochOrder(self) if self.shuffle else SequentialSampler(dataset)
        if batch_sampler is not None:
            self.batch_sampler = batch_sampler
        elif self._auto_batch and not iterable:
            self.batch_sampler = BatchSampler(self.sampler, self.batch_size, self.drop_last)
        else:
            self.batch_sampler = None
        if seed is None:
            seed = numpy_generator(generator, "DataLoader").integers(2**63)
        self.seed = int(seed)
        self.prefetch = int(prefetch)
        self._fetcher = Fetcher(dataset, collate_fn, self._auto_batch, self.batch_size,
                                self.drop_last, iterable)
        self._pool = None  # persistent workers
        self._next_epoch = 0  # the epoch a fresh iteration runs
        self._resume = None  # (epoch, batch) set by load_state_dict
        self._cursor = (0, 0)  # (epoch, batches consumed in it)

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)  # TypeError for a stream without a length, as PyTorch
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None and not self._own_sampler:
            return len(self.batch_sampler)
        n = len(self.sampler)
        if self.batch_size is None:
            return n
        b = self.batch_size
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
        if not (self.shuffle and self._own_sampler):
            return None
        n = len(self.dataset)
        # int32 where it fits: 4 bytes per sample for a dataset of any size on disk
        perm = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
        np.random.default_rng([self.seed, int(epoch)]).shuffle(perm)
        return perm

    def _jobs(self, epoch: int, start: int):
        """What each batch of ``epoch`` from batch ``start`` reads, lazily: a slice (read
        as a view), an index array or list (gathered), or one index (no batching)."""
        if not self._own_sampler:
            if self.batch_sampler is not None:
                yield from itertools.islice(iter(self.batch_sampler), start, None)
            else:
                yield from itertools.islice(iter(self.sampler), start, None)
            return
        n = len(self.dataset)
        perm = self.order(epoch)
        if self.batch_size is None:
            yield from (range(start, n) if perm is None else perm[start:].tolist())
            return
        b = self.batch_size
        for k in range(start, len(self)):
            lo, hi = k * b, min((k + 1) * b, n)
            yield slice(lo, hi) if perm is None else perm[lo:hi]

    # -- iteration -------------------------------------------------------------------
    def __iter__(self) -> _BatchIterator:
        epoch, start = self._resume or (self._next_epoch, 0)
        self._resume = None
        self._next_epoch = epoch + 1
        self._cursor = (epoch, start)
        return _BatchIterator(self, epoch, start)

    def _workers(self, epoch: int, start: int) -> WorkerIterator:
        pool = self._pool
        if pool is None or pool.closed:
            base_seed = int(numpy_generator(self.generator, "DataLoader").integers(2**62))
            pool = WorkerPool(self._fetcher, self.num_workers, base_seed,
                              self.worker_init_fn, self.multiprocessing_context)
            if self.persistent_workers:
                self._pool = pool
        jobs = None if self._iterable else self._jobs(epoch, start)
        it = WorkerIterator(pool, jobs, self.prefetch_factor * self.num_workers,
                            self.timeout, self._iterable,
                            owns_pool=not self.persistent_workers)
        if self._iterable:
            for _ in range(start):
                next(it, None)
        return it

    def _batches(self, epoch: int, start: int):
        """The batches of a pass made in this process, lazily."""
        if self._iterable:
            return itertools.islice(_stream_batches(self._fetcher), start, None)
        return (self._fetcher.fetch(job) for job in self._jobs(epoch, start))

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            try:
                pool.shutdown()
            except Exception:  # noqa: BLE001 (interpreter teardown)
                pass

    # -- position --------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Where the next batch comes from: {"seed", "epoch", "batch", ...}. Saved with a
        checkpoint, it lets a fresh process continue the same sequence of batches."""
        epoch, batch = self._resume or self._cursor
        try:
            if batch >= len(self):
                epoch, batch = epoch + 1, 0
        except TypeError:  # a stream without a length
            pass
        return {"seed": self.seed, "epoch": epoch, "batch": batch,
                "batch_size": self.batch_size, "length": _length(self.dataset),
                "shuffle": self.shuffle, "drop_last": self.drop_last}

    def load_state_dict(self, state: dict) -> None:
        """Continue from ``state`` (from :meth:`state_dict`): the next iteration starts
        at its epoch and batch, with its seed."""
        mine = {"batch_size": self.batch_size, "length": _length(self.dataset),
                "shuffle": self.shuffle, "drop_last": self.drop_last}
        differ = {k: (state[k], v) for k, v in mine.items() if k in state and state[k] != v}
        if differ:
            raise ValueError(f"DataLoader.load_state_dict: the saved position belongs to a "
                             f"different loader (saved vs here: {differ}); build the "
                             f"loader with the same dataset and settings")
        epoch, batch = int(state["epoch"]), int(state["batch"])
        if batch < 0 or (mine["length"] is not None and batch > len(self)):
            raise ValueError(f"DataLoader.load_state_dict: batch {batch} is outside the "
                             f"{len(self)} batches of an epoch")
        self.seed = int(state["seed"])
        self._resume = self._cursor = (epoch, batch)
        self._next_epoch = epoch

    def __repr__(self) -> str:
        collate = "" if self.collate_fn is None else f", collate_fn={self.collate_fn!r}"
        workers = f", num_workers={self.num_workers}" if self.num_workers else ""
        return (f"DataLoader({self.dataset!r}, batch_size={self.batch_size}, "
                f"shuffle={self.shuffle}, drop_last={self.drop_last}, seed={self.seed}, "
                f"prefetch={self.prefetch}{workers}{collate})")


def _stream_batches(fetcher):
    stream = fetcher.stream()
    while (batch := fetcher.next_batch(stream)) is not None:
        yield batch


def _length(dataset):
    try:
        return len(dataset)
    except TypeError:
        return None


class _EpochOrder(Sampler):
    """The sampler a shuffled DataLoader uses: the permutation of its current epoch."""

    def __init__(self, loader: DataLoader):
        self._loader = loader

    def __iter__(self):
        return iter(self._loader.order(self._loader.epoch).tolist())

    def __len__(self) -> int:
        return len(self._loader.dataset)


def _check_arguments(iterable, batch_size, shuffle, sampler, batch_sampler, num_workers,
                     collate_fn, drop_last, timeout, prefetch_factor, persistent_workers,
                     prefetch, in_order):
    """PyTorch's checks of a DataLoader's arguments, with its messages."""
    if iterable:
        for name, value in (("shuffle", shuffle), ("sampler", sampler),
                            ("batch_sampler", batch_sampler)):
            if value not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"{name} option, but got {name}={value!r}")
    if sampler is not None and shuffle:
        raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
    if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None
                                      or drop_last):
        raise ValueError("DataLoader: batch_sampler option is mutually exclusive with "
                         "batch_size, shuffle, sampler, and drop_last")
    if batch_size is None and drop_last:
        raise ValueError("DataLoader: batch_size=None option disables auto-batching and "
                         "is mutually exclusive with drop_last")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(
            batch_size, numbers.Integral) or batch_size < 1):
        raise ValueError(f"DataLoader: batch_size must be >= 1 (or None to turn batching "
                         f"off), got {batch_size!r}")
    if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) \
            or num_workers < 0:
        raise ValueError(f"DataLoader: num_workers option should be non-negative; use "
                         f"num_workers=0 to disable multiprocessing (got {num_workers!r})")
    if timeout < 0:
        raise ValueError(f"DataLoader: timeout option should be non-negative, got {timeout}")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError("DataLoader: prefetch_factor option could only be specified in "
                         "multiprocessing. let num_workers > 0 to enable multiprocessing, "
                         "otherwise set prefetch_factor to None.")
    if prefetch_factor is not None and prefetch_factor < 0:
        raise ValueError(f"DataLoader: prefetch_factor option should be non-negative, got "
                         f"{prefetch_factor}")
    if persistent_workers and num_workers == 0:
        raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
    if collate_fn is not None and not callable(collate_fn):
        raise TypeError(f"DataLoader: collate_fn must be callable, got "
                        f"{type(collate_fn).__name__}")
    if int(prefetch) < 0:
        raise ValueError(f"DataLoader: prefetch must be >= 0, got {prefetch}")
    if not in_order:
        raise ValueError("DataLoader: in_order=False (batches as workers finish them) is "
                         "not supported; batches always come in the sampler's order")


_END = object()


class _Failure:
    """An exception raised on the prefetch thread, carried to the consumer."""

    def __init__(self, exc: BaseException):
        self.exc = exc


def _produce(batches, out: queue.SimpleQueue, stop: threading.Event, bound: int) -> None:
    """The prefetch thread: make each batch and queue it (at most ``bound`` waiting),
    until done or stopped. It holds no reference to the iterator, so dropping the
    iterator stops it. The queue is the C SimpleQueue: an interrupt (KeyboardInterrupt)
    in the consumer's get cannot leave a lock of it held, which would block close()."""

    def put(item) -> bool:
        while out.qsize() >= bound:
            if stop.wait(0.002):
                return False
        if stop.is_set():
            return False
        out.put(item)
        return True

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
        self._thread = self._pool = None
        ds = loader.dataset
        self._views = (loader._own_sampler and not loader.shuffle and loader.num_workers == 0
                       and loader.collate_fn is None and loader._auto_batch
                       and hasattr(ds, "slice"))
        if self._views:
            # consecutive samples as views: nothing to prepare but the disk reads
            self._slices, self._ahead = loader._jobs(epoch, start), deque()
            self._advise = getattr(ds, "prefetch", None)
        elif loader.num_workers:
            self._pool = loader._workers(epoch, start)
        elif loader.prefetch > 0:
            self._queue = queue.SimpleQueue()
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=_produce, name="haelixe-dataloader", daemon=True,
                args=(loader._batches(epoch, start), self._queue, self._stop,
                      loader.prefetch))
            self._thread.start()
        else:
            self._batches = loader._batches(epoch, start)

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
        if self._pool is not None:
            return next(self._pool, _END)
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
        """Stop the prefetch thread or the workers (an abandoned iterator does this when
        collected)."""
        self._done = True
        if self._pool is not None:
            self._pool.close()
            self._pool = None
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
