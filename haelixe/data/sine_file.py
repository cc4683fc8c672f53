"""The ``random`` sine-denoising task written to a dataset directory and trained from it.

    hx.data.write_sine_dataset("sine_train", n=100_000, seed=0)
    python -m haelixe.denoise --data sine_train
"""

from __future__ import annotations

import numpy as np

from .loader import DataLoader
from .memmap import DatasetWriter, MemmapDataset
from .sine import SEQ_LEN, heldout_set, random_batch

TASK = "sine-random"


def write_sine_dataset(path, n: int, seed: int = 0, seq: int = SEQ_LEN,
                       noise_std: float = 0.3, chunk: int = 65536,
                       overwrite: bool = False) -> None:
    """Write ``n`` (noisy, clean) sequences of the ``random`` task as fields "inputs" and
    "targets", each (n, seq, 1) float32, generated ``chunk`` samples at a time (chunk k
    from its own generator seeded (seed, k), so the file depends only on the arguments
    and memory stays at one chunk)."""
    fields = {"inputs": ((seq, 1), "float32"), "targets": ((seq, 1), "float32")}
    meta = {"task": TASK, "seed": seed, "seq": seq, "noise_std": noise_std, "chunk": chunk}
    with DatasetWriter(path, fields, meta, overwrite) as w:
        for k, lo in enumerate(range(0, n, chunk)):
            rng = np.random.default_rng([seed, k])
            w.append(*random_batch(rng, min(chunk, n - lo), seq, noise_std))


class SineFileTask:
    """The sine task read from a dataset file, with SineTask's interface: ``batch()``
    gives the next (noisy, clean) pair of numpy arrays from a shuffled, seeded
    DataLoader (epoch after epoch, the last partial batch dropped); ``eval_set()`` is
    the random task's fixed held-out set."""

    variant = "file"

    def __init__(self, path, batch_size: int = 16, seed: int = 0, prefetch: int = 2):
        ds = MemmapDataset(path)
        if ds.fields[:2] != ("inputs", "targets"):
            raise ValueError(f"SineFileTask: {path} has fields {ds.fields}; expected "
                             f"('inputs', 'targets'), as write_sine_dataset writes")
        if len(ds) < batch_size:
            raise ValueError(f"SineFileTask: {path} holds {len(ds)} samples, fewer than "
                             f"one batch of {batch_size}")
        self.dataset = ds
        self.batch_size = batch_size
        self.loader = DataLoader(ds, batch_size, shuffle=True, drop_last=True, seed=seed,
                                 prefetch=prefetch)
        self._it = None

    def batch(self) -> tuple[np.ndarray, np.ndarray]:
        while True:
            if self._it is None:
                self._it = iter(self.loader)
            try:
                noisy, clean = next(self._it)[:2]
                return noisy.numpy(), clean.numpy()
            except StopIteration:
                self._it = None

    def eval_set(self) -> tuple[np.ndarray, np.ndarray]:
        return heldout_set()
