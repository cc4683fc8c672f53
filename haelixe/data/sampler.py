"""Samplers (PyTorch's torch.utils.data names and semantics): which dataset indices a
DataLoader reads, in which order, and how they are grouped into batches."""

from __future__ import annotations

import numbers

import numpy as np

from ..random import generator as random_generator


def numpy_generator(generator, op: str) -> np.random.Generator:
    """The numpy Generator behind ``generator``: None is Haelixe's default (seeded by
    hx.manual_seed), an hx.Generator gives its own, a numpy Generator is itself."""
    try:
        return random_generator(generator)
    except TypeError:
        raise TypeError(f"{op}: generator must be an hx.Generator (torch.Generator) or a "
                        f"numpy Generator, got {type(generator).__name__}") from None


def _positive_int(value, what: str, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{op}: {what} should be a positive integer value, but got "
                         f"{what}={value!r}")
    return int(value)


def _bool(value, what: str, op: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{op}: {what} should be a boolean value, but got "
                        f"{what}={value!r}")
    return value


class Sampler:
    """Base class: iterating a sampler gives dataset indices (or, for a batch sampler,
    lists of them). Subclasses define ``__iter__`` and, where known, ``__len__``."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """Random indices into ``data_source``: without replacement, a permutation (and, for
    ``num_samples`` beyond the length, further permutations, the last one cut short);
    with it, ``num_samples`` independent uniform draws. With a ``generator`` each pass
    continues that generator's stream (a new order per epoch, the same sequence for the
    same seed); without one each pass draws its seed from Haelixe's generator."""

    def __init__(self, data_source, replacement: bool = False, num_samples=None,
                 generator=None):
        self.data_source = data_source
        self.replacement = _bool(replacement, "replacement", "RandomSampler")
        self._num_samples = num_samples
        self.generator = generator
        numpy_generator(generator, "RandomSampler")  # refuse a bad generator here
        _positive_int(self.num_samples, "num_samples", "RandomSampler")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def _stream(self) -> np.random.Generator:
        if self.generator is not None:
            return numpy_generator(self.generator, "RandomSampler")
        return np.random.default_rng(random_generator().integers(2**63))

    def __iter__(self):
        n, total, rng = len(self.data_source), self.num_samples, self._stream()
        if self.replacement:
            for start in range(0, total, 32):  # draws in chunks, as PyTorch does
                yield from rng.integers(0, n, size=min(32, total - start)).tolist()
            return
        for _ in range(total // n):
            yield from rng.permutation(n).tolist()
        if total % n:
            yield from rng.permutation(n)[:total % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order, a new one each pass."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator
        numpy_generator(generator, "SubsetRandomSampler")

    def __iter__(self):
        rng = numpy_generator(self.generator, "SubsetRandomSampler")
        for i in rng.permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices in [0, len(weights)), index i drawn with probability
    proportional to ``weights[i]``; with ``replacement=False`` no index twice."""

    def __init__(self, weights, num_samples: int, replacement: bool = True,
                 generator=None):
        op = "WeightedRandomSampler"
        self.num_samples = _positive_int(num_samples, "num_samples", op)
        self.replacement = _bool(replacement, "replacement", op)
        w = np.asarray(weights.numpy() if hasattr(weights, "numpy") else weights,
                       dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"{op}: weights should be a 1-D sequence, but got weights of "
                             f"shape {w.shape}")
        if w.size == 0 or not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
            raise RuntimeError(f"{op}: weights must be finite, non-negative and not all "
                               f"zero (got {w.size} weights summing to {w.sum()})")
        if not replacement and np.count_nonzero(w) < num_samples:
            raise RuntimeError(f"{op}: cannot draw {num_samples} samples without "
                               f"replacement from {np.count_nonzero(w)} non-zero weights; "
                               f"lower num_samples or pass replacement=True")
        self.weights = w
        self.generator = generator
        numpy_generator(generator, op)

    def __iter__(self):
        rng = numpy_generator(self.generator, "WeightedRandomSampler")
        p = self.weights / self.weights.sum()
        yield from rng.choice(len(p), size=self.num_samples, replace=self.replacement,
                              p=p).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``, in its order; the
    last, shorter list is dropped when ``drop_last``."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        self.sampler = sampler
        self.batch_size = _positive_int(batch_size, "batch_size", "BatchSampler")
        self.drop_last = _bool(drop_last, "drop_last", "BatchSampler")

    def __iter__(self):
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n, b = len(self.sampler), self.batch_size
        return n // b if self.drop_last else -(-n // b)


__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]
