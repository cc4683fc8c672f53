"""Data: the sine-denoising task, datasets (in memory, memory-mapped, over tensors) and
the DataLoader."""

from .sine import SineTask, baselines, heldout_set, random_batch, seed_batch

_LAZY = ("memmap", "loader", "dataset", "npy", "sine_file")
_MISSING = {
    "IterableDataset": "a map-style dataset (__len__ and __getitem__) with DataLoader",
    "Dataset": "any class with __len__ and __getitem__ (no base class is needed)",
    "RandomSampler": "DataLoader(shuffle=True, seed=...)",
    "SequentialSampler": "DataLoader(shuffle=False)",
    "ConcatDataset": "ArrayDataset over concatenated arrays, or TensorDataset(hx.cat(...))",
    "get_worker_info": "DataLoader(prefetch=...), which prepares batches on one thread",
}


def __getattr__(name):
    import importlib

    for mod in _LAZY:
        m = importlib.import_module(f".{mod}", __name__)
        if hasattr(m, name):
            return getattr(m, name)
    from ..closest import missing_attribute

    names = dict(globals())
    for mod in _LAZY:
        m = importlib.import_module(f".{mod}", __name__)
        names.update({n: getattr(m, n) for n in getattr(m, "__all__", dir(m))
                      if not n.startswith("_")})
    raise missing_attribute(__name__, name, names, _MISSING)
