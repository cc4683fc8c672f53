"""How a DataLoader turns one batch's indices into a batch, in this process or in a
worker: a whole-batch read (gather) where the dataset has one, else the samples one by
one and the collate function."""

from __future__ import annotations

import numpy as np

from .dataset import default_collate, default_convert


class Fetcher:
    """The batch for a job (a slice or a list of indices; one index without automatic
    batching), or for an IterableDataset the next batch of its stream."""

    def __init__(self, dataset, collate_fn, auto_batch, batch_size, drop_last, iterable):
        self.dataset = dataset
        self.auto_batch = auto_batch
        self.collate = collate_fn or (default_collate if self.auto_batch else default_convert)
        self.whole_batches = (collate_fn is None and self.auto_batch and not iterable
                              and hasattr(dataset, "gather"))
        self.batch_size, self.drop_last, self.iterable = batch_size, drop_last, iterable

    def fetch(self, job):
        ds = self.dataset
        if not self.auto_batch:
            return self.collate(ds[job])
        if isinstance(job, slice):
            job = np.arange(job.start, job.stop)
        if self.whole_batches:
            return ds.gather(np.asarray(job, dtype=np.int64))
        return self.collate([ds[int(i) if isinstance(i, np.integer) else i] for i in job])

    def stream(self):
        return iter(self.dataset)

    def next_batch(self, stream):
        """The next batch of ``stream``, or None when it is done."""
        if not self.auto_batch:
            for sample in stream:
                return self.collate(sample)
            return None
        samples = []
        for sample in stream:
            samples.append(sample)
            if len(samples) == self.batch_size:
                break
        if not samples or (self.drop_last and len(samples) < self.batch_size):
            return None
        return self.collate(samples)
