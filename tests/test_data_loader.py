"""DataLoader: batching, zero-copy sequential batches, seeded shuffling, the prefetch
thread (errors, shutdown) and resuming mid-epoch."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import haelixe as hx
from haelixe.data import ArrayDataset, DataLoader, MemmapDataset, write_dataset


@pytest.fixture
def ds(tmp_path):
    x = np.arange(103 * 4, dtype=np.float32).reshape(103, 4)
    write_dataset(tmp_path / "ds", inputs=x, targets=np.arange(103))
    return MemmapDataset(tmp_path / "ds")


def _ids(loader):
    return [y.numpy().tolist() for _, y in loader]


def _loader_threads():
    return [t for t in threading.enumerate() if t.name == "haelixe-dataloader"]


def test_len_and_last_batch(ds):
    assert len(DataLoader(ds, 10)) == 11
    assert len(DataLoader(ds, 10, drop_last=True)) == 10
    sizes = [x.shape[0] for x, _ in DataLoader(ds, 10)]
    assert sizes == [10] * 10 + [3]
    assert [x.shape[0] for x, _ in DataLoader(ds, 10, drop_last=True)] == [10] * 10
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        DataLoader(ds, 0)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_sequential_batches_are_views_of_one_storage(ds, prefetch):
    batches = list(DataLoader(ds, 16, prefetch=prefetch))
    storages = {id(x.storage) for x, _ in batches}
    assert len(storages) == 1
    for x, _ in batches:
        assert np.shares_memory(x.numpy(), ds.arrays["inputs"])
    np.testing.assert_array_equal(np.concatenate([x.numpy() for x, _ in batches]),
                                  ds.arrays["inputs"])


def test_shuffle_is_seeded_per_epoch_and_batches_hold_the_epochs_order(ds):
    a, b = DataLoader(ds, 10, shuffle=True, seed=7), DataLoader(ds, 10, shuffle=True, seed=7)
    e0, e1 = _ids(a), _ids(a)
    assert e0 == _ids(b) and e1 == _ids(b)  # same seed, same sequence of epochs
    assert e0 != e1  # each epoch its own order
    assert _ids(DataLoader(ds, 10, shuffle=True, seed=8)) != e0
    for epoch in (e0, e1):
        flat = [i for batch in epoch for i in batch]
        assert sorted(flat) == list(range(103))  # every sample once
    assert [i for batch in e0 for i in batch] == a.order(0).tolist()
    assert [i for batch in e1 for i in batch] == a.order(1).tolist()
    assert any(batch != sorted(batch) for batch in e0)
    # gathered batches hold the right rows and are copies
    x, y = next(iter(DataLoader(ds, 10, shuffle=True, seed=7)))
    np.testing.assert_array_equal(x.numpy(), ds.arrays["inputs"][y.numpy()])
    assert not np.shares_memory(x.numpy(), ds.arrays["inputs"])


def test_prefetch_does_not_change_the_order(ds):
    orders = [_ids(DataLoader(ds, 9, shuffle=True, seed=3, prefetch=p)) for p in (0, 1, 4)]
    assert orders[0] == orders[1] == orders[2]


def test_seed_none_follows_manual_seed(ds):
    hx.manual_seed(11)
    a = _ids(DataLoader(ds, 10, shuffle=True))
    hx.manual_seed(11)
    assert _ids(DataLoader(ds, 10, shuffle=True)) == a


class _Exploding(ArrayDataset):
    def gather(self, indices):
        if 50 in indices:
            raise KeyError("sample 50 is unreadable")
        return super().gather(indices)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_errors_on_the_prefetch_thread_reach_the_consumer(prefetch):
    ds = _Exploding(np.zeros((100, 2), np.float32), np.arange(100))
    seen = []
    with pytest.raises(KeyError, match="sample 50 is unreadable"):
        for _, y in DataLoader(ds, 10, shuffle=True, seed=0, prefetch=prefetch):
            seen.append(y)
    assert len(seen) < 10
    time.sleep(0.05)
    assert not _loader_threads()


def test_abandoned_iterator_stops_its_thread(ds):
    before = len(_loader_threads())
    it = iter(DataLoader(ds, 1, shuffle=True, seed=0, prefetch=2))
    next(it)
    assert len(_loader_threads()) == before + 1
    del it  # the producer is blocked on a full queue; dropping the iterator stops it
    deadline = time.time() + 2
    while len(_loader_threads()) > before and time.time() < deadline:
        time.sleep(0.01)
    assert len(_loader_threads()) == before
    for _ in DataLoader(ds, 1, prefetch=2):
        break
    time.sleep(0.2)
    assert len(_loader_threads()) == before


def test_state_dict_resumes_mid_epoch(ds):
    full = DataLoader(ds, 10, shuffle=True, seed=5)
    expected = _ids(full) + _ids(full)  # epochs 0 and 1
    first = DataLoader(ds, 10, shuffle=True, seed=5)
    got = []
    for _, y in first:
        got.append(y.numpy().tolist())
    for _, y in first:  # into epoch 1, stopping after 4 batches
        got.append(y.numpy().tolist())
        if len(got) == 15:
            break
    state = first.state_dict()
    assert (state["epoch"], state["batch"]) == (1, 4)
    resumed = DataLoader(ds, 10, shuffle=True, seed=999)  # the saved seed wins
    resumed.load_state_dict(state)
    assert resumed.epoch == 1
    got += _ids(resumed)
    assert got == expected
    assert resumed.state_dict()["epoch"] == 2 and resumed.state_dict()["batch"] == 0
    with pytest.raises(ValueError, match="different loader"):
        DataLoader(ds, 7, shuffle=True).load_state_dict(state)


def test_set_epoch(ds):
    a = DataLoader(ds, 10, shuffle=True, seed=1)
    _ids(a)
    e1 = _ids(a)
    b = DataLoader(ds, 10, shuffle=True, seed=1)
    b.set_epoch(1)
    assert _ids(b) == e1


def test_in_memory_and_generic_datasets():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    ads = ArrayDataset(x, np.arange(10))
    batches = list(DataLoader(ads, 4))
    assert batches[0][0].storage is batches[1][0].storage
    np.testing.assert_array_equal(batches[2][0].numpy(), x[8:])

    class Plain:  # only __len__ and __getitem__
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return x[i], i

    xb, yb = next(iter(DataLoader(Plain(), 4, shuffle=True, seed=0)))
    np.testing.assert_array_equal(xb.numpy(), x[yb.numpy()])


def test_resident_memory_is_released_on_the_way(tmp_path):
    # A bound of one byte: every batch drops the pages before it; values stay right, also
    # for batches still held, whose pages come back from the page cache.
    x = np.arange(200_000, dtype=np.float32).reshape(50_000, 4)  # 800 KB
    write_dataset(tmp_path / "ds", inputs=x)
    ds = MemmapDataset(tmp_path / "ds", max_resident_bytes=1)
    held = [b for (b,) in DataLoader(ds, 2048)]
    assert ds.resident_bound <= 2 << 20  # the last batch's region only
    np.testing.assert_array_equal(np.concatenate([b.numpy() for b in held]), x)
    got = np.concatenate([b.numpy() for (b,) in DataLoader(ds, 999, shuffle=True, seed=0)])
    np.testing.assert_array_equal(np.sort(got[:, 0]), x[:, 0])
