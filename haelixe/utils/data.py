"""torch.utils.data's names, from haelixe.data: datasets, samplers, the DataLoader,
default_collate and get_worker_info."""

from ..data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    default_collate,
    default_convert,
    random_split,
)
from ..data.loader import DataLoader
from ..data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from ..data.workers import WorkerInfo, get_worker_info

__all__ = ["ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "Subset",
           "TensorDataset", "default_collate", "default_convert", "random_split",
           "DataLoader", "BatchSampler", "RandomSampler", "Sampler", "SequentialSampler",
           "SubsetRandomSampler", "WeightedRandomSampler", "WorkerInfo",
           "get_worker_info"]


def __getattr__(name):
    from .. import data

    return getattr(data, name)
