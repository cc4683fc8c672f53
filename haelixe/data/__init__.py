"""Data: the sine-denoising task, datasets (in memory, memory-mapped, over tensors,
PyTorch's Dataset classes), the samplers and the DataLoader with its worker processes."""

from .sine import SineTask, baselines, heldout_set, random_batch, seed_batch

_LAZY = ("memmap", "loader", "dataset", "sampler", "workers", "npy", "sine_file")
_MISSING = {
    "DistributedSampler": "RandomSampler or SubsetRandomSampler over this process's "
                          "share of the indices; there is no distributed training",
    "StackDataset": "TensorDataset, or a Dataset whose __getitem__ returns a tuple",
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
