"""Data: the sine-denoising task, memory-mapped datasets and the DataLoader."""

from .sine import SineTask, baselines, heldout_set, random_batch, seed_batch


def __getattr__(name):
    import importlib

    for mod in ("memmap", "loader", "npy", "sine_file"):
        m = importlib.import_module(f".{mod}", __name__)
        if hasattr(m, name):
            return getattr(m, name)
    raise AttributeError(f"module 'haelixe.data' has no attribute {name!r}")
