"""TensorDataset, Subset, random_split, default_collate and the DataLoader over any
map-style dataset, against torch.utils.data where PyTorch defines the behaviour."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import haelixe as hx
from haelixe.data import DataLoader, Subset, TensorDataset, default_collate, random_split

torch = pytest.importorskip("torch")
tdata = torch.utils.data


def _xy(n=10):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    return x, np.arange(n, dtype=np.int64)


def test_tensor_dataset_items_and_errors():
    x, y = _xy()
    ds = TensorDataset(hx.tensor(x), hx.tensor(y))
    tds = tdata.TensorDataset(torch.tensor(x), torch.tensor(y))
    assert len(ds) == len(tds) == 10
    for i in (0, 7, -1):
        for a, b in zip(ds[i], tds[i]):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match="size mismatch"):
        TensorDataset(hx.zeros(3), hx.zeros(4))
    with pytest.raises(TypeError, match="not a tensor"):
        TensorDataset(x)


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_dataloader_over_a_tensor_dataset(request, device):
    if device == "gpu":
        request.getfixturevalue("be")
    x, y = _xy(11)
    xt = hx.tensor(x, device=device)
    ds = TensorDataset(xt, hx.tensor(y.astype(np.int32), device=device))
    batches = list(DataLoader(ds, batch_size=4))
    assert [b[0].shape for b in batches] == [(4, 3), (4, 3), (3, 3)]
    assert all(b[0].storage is xt.storage for b in batches)  # views, no copies
    seen = []
    for xb, yb in DataLoader(ds, batch_size=4, shuffle=True, seed=2, drop_last=True):
        assert xb.device.type == device
        np.testing.assert_array_equal(xb.numpy(), x[yb.numpy()])
        seen += yb.numpy().tolist()
    assert len(seen) == 8 and len(set(seen)) == 8


class Records:
    """A map-style dataset of dict samples (any __len__ and __getitem__ will do)."""

    def __len__(self):
        return 9

    def __getitem__(self, i):
        return {"x": np.full(2, i, np.float32), "label": i % 3, "name": f"s{i}"}


def test_dataloader_over_any_map_style_dataset():
    batches = list(DataLoader(Records(), batch_size=4))
    assert len(batches) == 3
    b = batches[0]
    np.testing.assert_array_equal(b["x"].numpy(), [[0, 0], [1, 1], [2, 2], [3, 3]])
    assert b["label"].dtype is hx.int64 and b["label"].tolist() == [0, 1, 2, 0]
    assert b["name"] == ["s0", "s1", "s2", "s3"]
    # a collate_fn of one's own gets the list of samples
    sizes = list(DataLoader(Records(), batch_size=4, collate_fn=len))
    assert sizes == [4, 4, 1]
    # shuffled: every sample once, in the permutation's order (not sorted)
    names = [n for b in DataLoader(Records(), 3, shuffle=True, seed=1) for n in b["name"]]
    assert sorted(names) == sorted(f"s{i}" for i in range(9))
    assert len(list(DataLoader(Records()))) == 9  # batch_size defaults to 1


def test_dataloader_generator_and_unsupported_arguments():
    x, y = _xy(20)
    ds = TensorDataset(hx.tensor(x), hx.tensor(y))

    def order(**kw):
        return [yb.tolist() for _, yb in DataLoader(ds, 5, shuffle=True, **kw)]

    a = order(generator=np.random.default_rng(4))
    assert a == order(generator=np.random.default_rng(4))
    assert a != order(generator=np.random.default_rng(5))
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        DataLoader(ds, 4, num_workers=-1)
    with pytest.raises(ValueError, match="batch_size=None"):
        DataLoader(ds, None, drop_last=True)
    with pytest.raises(TypeError, match="collate_fn must be callable"):
        DataLoader(ds, 4, collate_fn="stack")


def test_dataloader_with_collate_fn_resumes_mid_epoch():
    def ids(loader, limit=None):
        out = []
        for b in loader:
            out.append(b["label"].tolist())
            if limit and len(out) == limit:
                break
        return out

    full = ids(DataLoader(Records(), 2, shuffle=True, seed=3))
    first = DataLoader(Records(), 2, shuffle=True, seed=3)
    got = ids(first, limit=2)
    resumed = DataLoader(Records(), 2, shuffle=True, seed=0)
    resumed.load_state_dict(first.state_dict())
    assert got + ids(resumed) == full


Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize("batch", [
    [1.5, 2.5, 3.0],
    [1, 2, 3],
    [True, False],
    [np.float32(1.5), np.float32(2.0)],
    [np.arange(3, dtype=np.int32), np.arange(3, 6, dtype=np.int32)],
    [(1.0, 2), (3.0, 4)],
    [[np.ones(2, np.float32), 1], [np.zeros(2, np.float32), 0]],
    [{"a": 1.0, "b": (2, 3)}, {"a": 4.0, "b": (5, 6)}],
    [Point(1.0, 2), Point(3.0, 4)],
    ["a", "b"],
])
def test_default_collate_equals_pytorchs(batch):
    assert plain(default_collate(batch)) == plain(tdata.default_collate(batch))


def plain(batch):
    """A batch as Python values, tensors of either library as (dtype name, values)."""
    if isinstance(batch, (hx.Tensor, torch.Tensor)):
        return (str(batch.dtype).split(".")[-1], batch.numpy().tolist())
    if isinstance(batch, dict):
        return (type(batch), {k: plain(v) for k, v in batch.items()})
    if isinstance(batch, (list, tuple)):
        return (type(batch), [plain(v) for v in batch])
    return batch


def test_default_collate_of_tensors_and_errors():
    out = default_collate([hx.ones(2), hx.zeros(2)])
    np.testing.assert_array_equal(out.numpy(), [[1, 1], [0, 0]])
    with pytest.raises(ValueError, match="different shapes"):
        default_collate([hx.ones(2), hx.ones(3)])
    with pytest.raises(ValueError, match="same number of fields"):
        default_collate([(1, 2), (3,)])
    with pytest.raises(TypeError, match="cannot batch samples of type object"):
        default_collate([object()])


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.7], [0.5, 0.25, 0.25], [0.33, 0.33, 0.34],
                                     [1.0], [10, 0]])
def test_random_split_lengths_equal_pytorchs(lengths):
    x, y = _xy(10)
    ds = TensorDataset(hx.tensor(x), hx.tensor(y))
    ours = random_split(ds, lengths, generator=np.random.default_rng(0))
    theirs = tdata.random_split(range(10), lengths)
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    picked = sorted(i for s in ours for i in s.indices)
    assert picked == list(range(10))  # disjoint, covering
    for s in ours:
        for k in range(len(s)):
            assert s[k][1].item() == s.indices[k]


def test_random_split_is_seeded_and_checks_its_input():
    hx.manual_seed(5)
    a = [s.indices for s in random_split(range(12), [4, 8])]
    hx.manual_seed(5)
    assert a == [s.indices for s in random_split(range(12), [4, 8])]
    with pytest.raises(ValueError, match="sum to 11"):
        random_split(range(12), [4, 7])
    with pytest.raises(ValueError, match="non-negative integers"):
        random_split(range(12), [-1, 13])


def test_dataloader_over_a_subset_gathers_through_it():
    x, y = _xy(10)
    train, _ = random_split(TensorDataset(hx.tensor(x), hx.tensor(y)), [6, 4],
                            generator=np.random.default_rng(1))
    assert isinstance(train, Subset) and hasattr(train, "gather")
    assert not hasattr(Subset(Records(), [1, 2]), "gather")
    got = [yb.tolist() for _, yb in DataLoader(train, 4)]
    assert got == [train.indices[:4], train.indices[4:]]
    rows = [xb for xb, _ in DataLoader(train, 6, shuffle=True, seed=0)][0]
    assert sorted(rows.numpy()[:, 0].tolist()) == sorted(x[train.indices][:, 0].tolist())
