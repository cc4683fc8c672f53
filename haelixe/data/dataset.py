"""Datasets (PyTorch's torch.utils.data names): the Dataset and IterableDataset base
classes, TensorDataset, Subset, ConcatDataset, ChainDataset, random_split, and
default_collate, which turns a list of samples into a batch."""

from __future__ import annotations

import bisect
import collections.abc
import itertools
import math
import numbers

import numpy as np

from ..creation import from_numpy, tensor
from ..ops.indexing import stack
from ..tensor import Tensor
from .sampler import numpy_generator


class Dataset:
    """Base class of map-style datasets: a subclass defines ``__getitem__(index)`` and
    usually ``__len__``; ``a + b`` is their ConcatDataset."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """Base class of stream-style datasets: a subclass defines ``__iter__``. With
    DataLoader workers each worker iterates its own copy; split the stream with
    ``get_worker_info()`` to avoid duplicates, as in PyTorch."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class ConcatDataset(Dataset):
    """The samples of several map-style datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset; use "
                                "ChainDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        n = len(self)
        if index < 0:
            if -index > n:
                raise ValueError(f"ConcatDataset: absolute value of index {index} should "
                                 f"not exceed dataset length {n}")
            index += n
        if index >= n:
            raise IndexError(f"ConcatDataset: index {index} out of range for {n} samples")
        d = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[d - 1] if d else 0
        return self.datasets[d][index - start]


class ChainDataset(IterableDataset):
    """The streams of several IterableDatasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


class TensorDataset(Dataset):
    """Sample i is ``tuple(t[i] for t in tensors)``: tensors that share their first
    dim (inputs, targets, ...), on any device.

    Batches come whole: ``slice(a, b)`` is a view of every tensor and ``gather(idx)`` one
    indexing op per tensor, so the DataLoader never builds a batch sample by sample."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: argument {i} is a "
                                f"{type(t).__name__}, not a tensor; convert it with "
                                f"hx.tensor(...) or hx.from_numpy(...)")
            if t.ndim == 0:
                raise ValueError(f"TensorDataset: tensor {i} is 0-d; every tensor needs a "
                                 f"first (sample) dim")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) != 1:
            raise ValueError(f"TensorDataset: size mismatch between tensors: first dims "
                             f"{sizes}")
        self.tensors = tuple(tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def slice(self, start: int, stop: int) -> tuple:
        """Samples start:stop of every tensor, as views."""
        return tuple(t[start:stop] for t in self.tensors)

    def gather(self, indices) -> tuple:
        """The samples at ``indices`` of every tensor, in that order."""
        out = []
        for t in self.tensors:
            idx = tensor(np.asarray(indices, dtype=np.int64), device=t.device)
            out.append(t[idx])
        return tuple(out)

    def __repr__(self) -> str:
        shapes = ", ".join(str(t.shape) for t in self.tensors)
        return f"TensorDataset({shapes})"


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i):
        if isinstance(i, (list, tuple)):
            return self.dataset[[self.indices[j] for j in i]]
        return self.dataset[self.indices[i]]

    @property
    def gather(self):
        """The dataset's batch read at the subset's indices (absent when the dataset
        has none: hasattr(subset, "gather") follows the dataset)."""
        inner = getattr(self.dataset, "gather", None)
        if inner is None:
            raise AttributeError(f"{type(self.dataset).__name__} has no gather")
        picks = np.asarray(self.indices, dtype=np.int64)
        return lambda indices: inner(picks[np.asarray(indices, dtype=np.int64)])

    def __repr__(self) -> str:
        return f"Subset({self.dataset!r}, {len(self.indices)} samples)"


def random_split(dataset, lengths, generator=None) -> list:
    """Split ``dataset`` into non-overlapping Subsets of the given ``lengths`` (counts
    summing to len(dataset), or fractions summing to 1, the remainder spread one by one
    from the first subset, as PyTorch). ``generator`` is an hx.Generator or a numpy
    Generator; by default Haelixe's (seeded by hx.manual_seed)."""
    n = len(dataset)
    lengths = list(lengths)
    if not lengths:
        raise ValueError("random_split: lengths is empty")
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        for frac in lengths:
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split: fraction {frac} is not between 0 and 1")
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if any(not isinstance(k, numbers.Integral) or k < 0 for k in lengths):
        raise ValueError(f"random_split: lengths must be non-negative integers or "
                         f"fractions summing to 1, got {lengths}")
    if sum(lengths) != n:
        raise ValueError(f"random_split: the lengths sum to {sum(lengths)}, but the "
                         f"dataset has {n} samples")
    gen = numpy_generator(generator, "random_split")
    order = gen.permutation(n)
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, order[start:start + k]))
        start += k
    return out


def default_collate(batch):
    """Stack a list of samples into a batch, as PyTorch's default_collate: tensors and
    numpy arrays are stacked (a new first dim), Python floats become a float64 tensor,
    ints int64, bools bool; strings stay a list; dicts, tuples and lists are collated
    field by field (tuples and lists give lists, named tuples their own type)."""
    if not batch:
        raise ValueError("default_collate: empty batch")
    elem = batch[0]
    if isinstance(elem, Tensor):
        shapes = {t.shape for t in batch}
        if len(shapes) != 1:
            raise ValueError(f"default_collate: samples have different shapes {sorted(shapes)}"
                             f"; pad them to one shape, or pass a collate_fn")
        return stack(batch)
    if isinstance(elem, np.ndarray) and elem.dtype.kind not in "OUS":
        return from_numpy(np.stack(batch))
    if isinstance(elem, np.generic) and elem.dtype.kind not in "OUS":
        return from_numpy(np.array(batch))
    if isinstance(elem, bool):
        return tensor(batch, dtype="bool")
    if isinstance(elem, numbers.Integral):
        return tensor(batch, dtype="int64")
    if isinstance(elem, numbers.Real):
        return tensor(batch, dtype="float64")
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(out)
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a named tuple
        return type(elem)(*(default_collate(list(f)) for f in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(s) != size for s in batch):
            raise ValueError("default_collate: each sample in the batch must have the same "
                             "number of fields")
        return [default_collate(list(f)) for f in zip(*batch)]
    raise TypeError(f"default_collate: cannot batch samples of type {type(elem).__name__}; "
                    f"return tensors, arrays, numbers, dicts, tuples or lists from "
                    f"__getitem__, or pass a collate_fn")


def default_convert(data):
    """What a DataLoader without automatic batching (batch_size=None) gives for a
    sample: numpy arrays and scalars become tensors, containers are converted field by
    field, anything else is returned as it is."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and data.dtype.kind not in "OUS":
        return from_numpy(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        try:
            return type(data)({k: default_convert(v) for k, v in data.items()})
        except TypeError:
            return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


__all__ = ["Dataset", "IterableDataset", "ConcatDataset", "ChainDataset", "TensorDataset",
           "Subset", "random_split", "default_collate", "default_convert"]
