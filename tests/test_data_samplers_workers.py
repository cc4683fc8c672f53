"""torch.utils.data's samplers, Dataset classes, default_collate and the DataLoader's
sampler/batch_sampler/worker behaviour, checked against PyTorch's own."""

from __future__ import annotations

import collections
import multiprocessing
import os
import time

import numpy as np
import pytest

import haelixe as hx
from haelixe.utils import data as hd

torch = pytest.importorskip("torch")
td = torch.utils.data



def _np(x):
    if isinstance(x, (list, tuple)):
        return [_np(v) for v in x]
    if isinstance(x, dict):
        return {k: _np(v) for k, v in x.items()}
    if hasattr(x, "detach"):
        return x.detach().numpy()
    return x


def _same(a, b):
    """A Haelixe batch equals a PyTorch one: structure, values and dtype names."""
    if isinstance(b, torch.Tensor):
        assert isinstance(a, hx.Tensor), (type(a), type(b))
        assert a.dtype.name == str(b.dtype).removeprefix("torch."), (a.dtype, b.dtype)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    elif isinstance(b, dict):
        assert type(a) is type(b) and a.keys() == b.keys()
        for k in b:
            _same(a[k], b[k])
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), (type(a), type(b))
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a == b


Point = collections.namedtuple("Point", "x y")


class Records:
    """Samples of every kind default_collate knows."""

    def __len__(self):
        return 11

    def __getitem__(self, i):
        return {"array": np.full((2, 3), i, np.float32), "int": i, "float": i / 4,
                "bool": i % 2 == 0, "name": f"s{i}", "np_int": np.int32(i),
                "pair": (i, np.arange(2, dtype=np.int32) + i), "point": Point(i, -i)}


# -- samplers --------------------------------------------------------------------------------
def test_sequential_and_batch_sampler_give_pytorchs_lists():
    data = list(range(10))
    assert list(hd.SequentialSampler(data)) == list(td.SequentialSampler(data))
    for drop in (False, True):
        for size in (1, 3, 10, 12):
            mine = hd.BatchSampler(hd.SequentialSampler(data), size, drop)
            ref = td.BatchSampler(td.SequentialSampler(data), size, drop)
            assert list(mine) == list(ref) and len(mine) == len(ref)


def test_random_sampler_permutes_draws_and_follows_its_generator():
    data = range(7)
    one = list(hd.RandomSampler(data, generator=np.random.default_rng(3)))
    assert sorted(one) == list(range(7))
    assert one == list(hd.RandomSampler(data, generator=np.random.default_rng(3)))
    sampler = hd.RandomSampler(data, generator=np.random.default_rng(3))
    assert list(sampler) != list(sampler)  # each pass continues the stream
    longer = list(hd.RandomSampler(data, num_samples=17, generator=np.random.default_rng(0)))
    assert len(longer) == 17 and sorted(longer[:14]) == sorted(list(range(7)) * 2)
    assert len(set(longer[14:])) == 3  # the last pass cut short, still without repeats
    drawn = list(hd.RandomSampler(data, replacement=True, num_samples=100))
    assert len(drawn) == 100 and set(drawn) <= set(range(7)) and len(set(drawn)) > 1
    assert len(hd.RandomSampler(data, replacement=True, num_samples=5)) == \
        len(td.RandomSampler(data, replacement=True, num_samples=5)) == 5
    hx.manual_seed(5)
    a = list(hd.RandomSampler(data))
    hx.manual_seed(5)
    assert list(hd.RandomSampler(data)) == a


@pytest.mark.parametrize("kwargs, error", [
    ({"num_samples": 0}, ValueError), ({"num_samples": 2.5}, ValueError),
    ({"replacement": 1}, TypeError)])
def test_random_sampler_refuses_what_pytorch_refuses(kwargs, error):
    with pytest.raises(error):
        td.RandomSampler(range(4), **kwargs)
    with pytest.raises(error, match="RandomSampler"):
        hd.RandomSampler(range(4), **kwargs)


def test_weighted_and_subset_random_samplers():
    w = [0.0, 1.0, 3.0, 0.0]
    draws = list(hd.WeightedRandomSampler(w, 4000, generator=np.random.default_rng(1)))
    counts = np.bincount(draws, minlength=4)
    assert counts[0] == counts[3] == 0 and 2.6 < counts[2] / counts[1] < 3.4
    assert sorted(hd.WeightedRandomSampler(w, 2, replacement=False)) == [1, 2]
    assert len(hd.WeightedRandomSampler(hx.tensor([1.0, 2.0]), 9)) == 9
    with pytest.raises(RuntimeError, match="without replacement"):
        hd.WeightedRandomSampler(w, 3, replacement=False)
    with pytest.raises(ValueError, match="1-D"):
        hd.WeightedRandomSampler([[1.0, 2.0]], 2)
    with pytest.raises(ValueError, match="num_samples"):
        hd.WeightedRandomSampler(w, 0)
    picks = [10, 20, 30, 40]
    got = list(hd.SubsetRandomSampler(picks))
    assert sorted(got) == picks and len(hd.SubsetRandomSampler(picks)) == 4


def test_random_split_and_concat_dataset_match_pytorch_sizes():
    mine = hd.random_split(range(10), [0.5, 0.3, 0.2], generator=np.random.default_rng(0))
    ref = td.random_split(range(10), [0.5, 0.3, 0.2])
    assert [len(p) for p in mine] == [len(p) for p in ref]
    both = hd.ConcatDataset([list(range(3)), list(range(10, 15))])
    ref = td.ConcatDataset([list(range(3)), list(range(10, 15))])
    assert len(both) == len(ref) and [both[i] for i in range(-8, 8)] == \
        [ref[i] for i in range(-8, 8)]
    assert both.cumulative_sizes == ref.cumulative_sizes
    with pytest.raises(IndexError):
        both[8]


class Squares(hd.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i * i


def test_dataset_base_class_and_addition():
    ds = Squares(3) + Squares(2)
    assert isinstance(ds, hd.ConcatDataset) and [ds[i] for i in range(5)] == [0, 1, 4, 0, 1]
    with pytest.raises(NotImplementedError):
        hd.Dataset()[0]


# -- default_collate and the loader's order ---------------------------------------------------
def test_default_collate_matches_pytorch_on_every_kind_of_sample():
    samples = [Records()[i] for i in range(3)]
    _same(hd.default_collate(samples), td.default_collate(samples))


def test_loader_batches_follow_a_sampler_and_a_batch_sampler_as_pytorch():
    order = [7, 2, 9, 0, 4, 4, 10, 1]
    for kw in ({"sampler": order, "batch_size": 3},
               {"sampler": order, "batch_size": 3, "drop_last": True},
               {"batch_sampler": [[3, 1], [10], [0, 5, 2]]},
               {"batch_size": None, "sampler": order[:3]}):
        mine = list(hd.DataLoader(Records(), **kw))
        ref = list(td.DataLoader(Records(), **kw))
        assert len(mine) == len(ref)
        for a, b in zip(mine, ref):
            _same(a, b)


def test_shuffled_tensor_batches_hold_the_samplers_order():
    x = hx.arange(20.0).reshape(10, 2)
    ds = hd.TensorDataset(x, hx.arange(10))
    loader = hd.DataLoader(ds, batch_size=4, shuffle=True, seed=3)
    ys = [y.tolist() for _, y in loader]
    assert [i for b in ys for i in b] == loader.order(0).tolist()
    sampler = hd.RandomSampler(ds, generator=np.random.default_rng(2))
    expected = list(hd.RandomSampler(ds, generator=np.random.default_rng(2)))
    got = [i for _, y in hd.DataLoader(ds, 3, sampler=sampler) for i in y.tolist()]
    assert got == expected


@pytest.mark.parametrize("kwargs", [
    {"shuffle": True, "sampler": [0, 1]},
    {"batch_sampler": [[0]], "batch_size": 2},
    {"batch_sampler": [[0]], "drop_last": True},
    {"batch_size": None, "drop_last": True},
    {"num_workers": -1},
    {"prefetch_factor": 2},
    {"persistent_workers": True},
    {"timeout": -1}])
def test_loader_refuses_the_argument_mixes_pytorch_refuses(kwargs):
    with pytest.raises(ValueError):
        td.DataLoader(list(range(4)), **kwargs)
    with pytest.raises(ValueError, match="DataLoader"):
        hd.DataLoader(list(range(4)), **kwargs)


class _Stream:
    """0..n-1, split between workers by get_worker_info (worker w: the w-th share)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = self.get_worker_info()
        if info is None:
            return iter(range(self.n))
        per = -(-self.n // info.num_workers)
        return iter(range(info.id * per, min(self.n, (info.id + 1) * per)))


class Stream(_Stream, hd.IterableDataset):
    get_worker_info = staticmethod(hd.get_worker_info)


class TorchStream(_Stream, td.IterableDataset):
    get_worker_info = staticmethod(td.get_worker_info)


def test_iterable_dataset_batches_interleave_workers_as_pytorch():
    for workers in (0, 2):
        kw = {"batch_size": 2, "num_workers": workers}
        mine = [b.tolist() for b in hd.DataLoader(Stream(9), **kw)]
        ref = [b.tolist() for b in td.DataLoader(TorchStream(9), **kw)]
        assert mine == ref, workers
    with pytest.raises(ValueError, match="IterableDataset"):
        hd.DataLoader(Stream(4), shuffle=True)


# -- worker processes -----------------------------------------------------------------------
class WhoReads(hd.Dataset):
    def __len__(self):
        return 13

    def __getitem__(self, i):
        info = hd.get_worker_info()
        return {"i": i, "worker": -1 if info is None else info.id,
                "seed": -1 if info is None else info.seed,
                "draw": float(hx.rand(1).item()),
                "init": os.environ.get("HAELIXE_TEST_INIT", "")}


def _mark_init(worker_id):
    os.environ["HAELIXE_TEST_INIT"] = f"w{worker_id}"


def test_workers_give_the_batches_in_order_and_say_who_they_are():
    seq = list(hd.DataLoader(WhoReads(), batch_size=3, shuffle=True, seed=4))
    par = list(hd.DataLoader(WhoReads(), batch_size=3, shuffle=True, seed=4,
                             num_workers=2, worker_init_fn=_mark_init))
    assert [b["i"].tolist() for b in par] == [b["i"].tolist() for b in seq]
    # round-robin, as PyTorch hands out batches
    assert [b["worker"].tolist()[0] for b in par] == [k % 2 for k in range(len(par))]
    assert [b["init"][0] for b in par] == [f"w{k % 2}" for k in range(len(par))]
    seeds = {b["worker"].tolist()[0]: b["seed"].tolist()[0] for b in par}
    assert seeds[1] == seeds[0] + 1  # base seed + worker id
    assert hd.get_worker_info() is None
    assert not multiprocessing.active_children()  # the pass ended: workers are gone


def test_worker_seeds_follow_the_loaders_generator():
    def draws(seed):
        loader = hd.DataLoader(WhoReads(), batch_size=4, num_workers=2,
                               generator=np.random.default_rng(seed))
        return [b["draw"].tolist() for b in loader]

    assert draws(1) == draws(1) != draws(2)


def test_mapped_dataset_through_workers_is_read_in_the_samplers_order(tmp_path):
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    hx.data.write_dataset(tmp_path / "ds", inputs=x, targets=np.arange(20))
    ds = hx.data.MemmapDataset(tmp_path / "ds")
    loader = hd.DataLoader(ds, batch_size=6, shuffle=True, seed=1, num_workers=2)
    batches = list(loader)
    assert [i for _, y in batches for i in y.tolist()] == loader.order(0).tolist()
    for xb, yb in batches:
        np.testing.assert_array_equal(xb.numpy(), x[yb.numpy()])


class Failing(hd.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise ValueError(f"sample {i} is broken")
        return i


def test_an_error_in_a_worker_is_raised_with_its_traceback():
    loader = hd.DataLoader(Failing(), batch_size=2, num_workers=2)
    got = []
    with pytest.raises(ValueError) as err:
        for b in loader:
            got.append(b.tolist())
    assert got == [[0, 1], [2, 3]]
    text = str(err.value)
    assert "Caught ValueError in DataLoader worker process 0" in text
    assert "Original Traceback" in text and "__getitem__" in text and "sample 5" in text
    deadline = time.monotonic() + 5
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not multiprocessing.active_children()


class Dies(hd.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            os._exit(3)
        return i


class Slow(hd.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(1.5 if i == 2 else 0)
        return i


def test_a_dead_worker_and_a_timeout_raise_runtime_errors():
    with pytest.raises(RuntimeError, match=r"exit code 3\) exited unexpectedly"):
        list(hd.DataLoader(Dies(), batch_size=1, num_workers=1))
    with pytest.raises(RuntimeError, match="timed out after 0.3 seconds"):
        list(hd.DataLoader(Slow(), batch_size=1, num_workers=1, timeout=0.3))
    assert not multiprocessing.active_children()


class Pid(hd.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return os.getpid()


def test_workers_stop_when_a_pass_is_abandoned_and_persist_on_request():
    it = iter(hd.DataLoader(Pid(), batch_size=1, num_workers=2))
    next(it)
    assert len(multiprocessing.active_children()) == 2
    del it
    assert not multiprocessing.active_children()
    loader = hd.DataLoader(Pid(), batch_size=1, num_workers=2, persistent_workers=True)
    first = {int(b) for b in loader}
    assert {int(b) for b in loader} == first and len(first) == 2
    assert os.getpid() not in first
    del loader
    assert not multiprocessing.active_children()
