"""PyTorch's checkpoint archive both ways: what PyTorch saves loads in Haelixe and what
Haelixe saves loads in PyTorch (weights_only=True), with views of one storage still
sharing it, dtypes, Parameters and requires_grad as saved, and damaged files refused
with UnpicklingError."""

from __future__ import annotations

import collections
import io
import os
import pickle
import zipfile

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import haelixe as hx
from haelixe import pickled


def torch_bytes(obj, **kwargs) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf, **kwargs)
    return buf.getvalue()


def haelixe_bytes(obj) -> bytes:
    buf = io.BytesIO()
    pickled.save(obj, buf)
    return buf.getvalue()


def hx_load(data, **kwargs):
    return pickled.load(io.BytesIO(data), **kwargs)


def torch_tree():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    lin = torch.nn.Linear(3, 2)
    tree = {"state": lin.state_dict(), "base": base, "view": base[1:, ::2].t(),
            "half": torch.tensor([1.5, -2.0], dtype=torch.float16),
            "bf16": torch.tensor([3.0, 0.25], dtype=torch.bfloat16),
            "u16": torch.tensor([7, 65535], dtype=torch.uint16),
            "i64": torch.tensor([[-1, 2]]), "mask": torch.tensor([True, False]),
            "scalar": torch.tensor(2.5, dtype=torch.float64),
            "empty": torch.zeros(0, 3), "param": torch.nn.Parameter(torch.ones(2)),
            "frozen": torch.nn.Parameter(torch.ones(1), requires_grad=False),
            "leaf": torch.ones(3, requires_grad=True), "dtype": torch.bfloat16,
            "device": torch.device("cpu"), "size": torch.Size([2, 5]), "steps": [1, 2.5, "x"],
            "pair": (None, b"\x00\xff"), "od": collections.OrderedDict(b=1, a=2)}
    return tree


def test_what_pytorch_saves_loads_with_its_values_layouts_and_types():
    tree = torch_tree()
    back = hx_load(torch_bytes(tree))
    assert back.keys() == tree.keys()
    for k, v in tree.items():
        if isinstance(v, torch.Tensor):
            got = back[k]
            assert got.dtype.name == str(v.dtype).removeprefix("torch."), k
            assert got.shape == tuple(v.shape) and got.strides == v.stride(), k
            assert got.offset == v.storage_offset(), k
            assert got.requires_grad == v.requires_grad, k
            assert isinstance(got, hx.nn.Parameter) == isinstance(v, torch.nn.Parameter), k
            np.testing.assert_array_equal(got.detach().float().numpy(),
                                          v.detach().float().numpy())
    assert back["dtype"] is hx.bfloat16 and back["device"] == "cpu"
    assert back["size"] == (2, 5) and isinstance(back["size"], hx.Size)
    assert back["steps"] == [1, 2.5, "x"] and back["pair"] == (None, b"\x00\xff")
    assert list(back["od"]) == ["b", "a"] and isinstance(back["od"], collections.OrderedDict)
    assert back["state"]._metadata == tree["state"]._metadata  # (load_state_dict reads it)


def test_views_of_one_storage_come_back_sharing_it_in_both_directions():
    back = hx_load(torch_bytes(torch_tree()))
    assert back["view"]._storage is back["base"]._storage
    back["base"].add_(100)  # an in-place write shows through the view, as in PyTorch
    assert back["view"][0, 0].item() == 106.0

    x = hx.arange(12, dtype=hx.float32).reshape(3, 4)
    theirs = torch.load(io.BytesIO(haelixe_bytes({"x": x, "row": x[1], "cols": x[:, 1::2]})))
    assert theirs["row"].untyped_storage().data_ptr() == theirs["x"].untyped_storage().data_ptr()
    assert theirs["cols"].stride() == (4, 2) and theirs["cols"].storage_offset() == 1
    theirs["x"].add_(1)
    assert theirs["row"].tolist() == [5.0, 6.0, 7.0, 8.0]


def test_what_haelixe_saves_loads_in_pytorch_under_weights_only():
    hx.manual_seed(0)
    model = hx.nn.Sequential(hx.nn.Linear(3, 4), hx.nn.LayerNorm(4), hx.nn.Linear(4, 2))
    opt = hx.optim.AdamW(model.parameters(), lr=1e-2)
    model(hx.randn(5, 3)).sum().backward()
    opt.step()
    tree = {"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3,
            "dtype": hx.float16, "device": hx.Device.cpu(), "size": hx.Size([1, 2]),
            "u32": hx.tensor([1, 2**32 - 1], dtype=hx.uint32),
            "bf16": hx.tensor([0.5, -1.0], dtype=hx.bfloat16),
            "param": hx.nn.Parameter(hx.ones(2)), "leaf": hx.zeros(2, requires_grad=True),
            "flipped": hx.arange(4.0).flip(0), "empty": hx.zeros(2, 0)}
    theirs = torch.load(io.BytesIO(haelixe_bytes(tree)))  # (weights_only=True there)
    reference = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4),
                                    torch.nn.Linear(4, 2))
    reference.load_state_dict(theirs["model"])
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(reference(torch.from_numpy(x)).detach().numpy(),
                               model(hx.from_numpy(x)).detach().numpy(), rtol=1e-6, atol=1e-6)
    assert float(theirs["opt"]["state"][0]["step"]) == 1
    assert theirs["opt"]["param_groups"][0]["lr"] == 1e-2
    assert theirs["epoch"] == 3 and theirs["dtype"] is torch.float16
    assert theirs["device"] == torch.device("cpu") and theirs["size"] == torch.Size([1, 2])
    assert theirs["u32"].dtype is torch.uint32 and theirs["u32"].tolist() == [1, 2**32 - 1]
    assert theirs["bf16"].dtype is torch.bfloat16 and theirs["bf16"].tolist() == [0.5, -1.0]
    assert isinstance(theirs["param"], torch.nn.Parameter) and theirs["param"].requires_grad
    assert theirs["leaf"].requires_grad and not theirs["u32"].requires_grad
    assert theirs["flipped"].tolist() == [3.0, 2.0, 1.0, 0.0]
    assert tuple(theirs["empty"].shape) == (2, 0)


def test_a_pytorch_model_trained_there_runs_here_from_its_checkpoint(tmp_path):
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 3))
    path = tmp_path / "model.pt"
    torch.save(theirs.state_dict(), path)
    ours = hx.nn.Sequential(hx.nn.Embedding(10, 4), hx.nn.Linear(4, 3))
    result = ours.load_state_dict(pickled.load(path))
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    idx = [[1, 2, 9]]
    np.testing.assert_allclose(ours(hx.tensor(idx)).detach().numpy(),
                               theirs(torch.tensor(idx)).detach().numpy(), rtol=1e-6)
    with zipfile.ZipFile(path) as zf:  # PyTorch names the folder after the file
        assert "model/data.pkl" in zf.namelist()
    pickled.save(ours.state_dict(), tmp_path / "ours.pt")
    with zipfile.ZipFile(tmp_path / "ours.pt") as zf:
        names = zf.namelist()
        assert "ours/data.pkl" in names and "ours/byteorder" in names
        for info in zf.infolist():  # each record's data at a multiple of 64 bytes
            if "/data/" in info.filename:
                start = info.header_offset + 30 + len(info.filename) + len(info.extra)
                assert start % 64 == 0, info.filename
    assert not [p for p in os.listdir(tmp_path) if p not in ("model.pt", "ours.pt")]
    back = torch.load(tmp_path / "ours.pt", mmap=True)  # (mmap needs the alignment)
    assert torch.equal(back["1.weight"], theirs[1].weight.detach())


def test_numpy_arrays_pytorch_pickled_load_here_by_default():
    array = np.sin(np.arange(12.0).reshape(3, 4))
    data = torch_bytes({"a": array, "i": np.int32(5), "f": np.float64(0.5)})
    back = hx_load(data)
    np.testing.assert_array_equal(back["a"], array)
    assert back["i"] == 5 and back["i"].dtype == np.int32 and back["f"] == 0.5
    with pytest.raises(pickle.PicklingError, match="Python objects"):
        pickled.save({"bad": np.array([object()])}, io.BytesIO())


class _Runs:
    def __reduce__(self):
        return os.system, ("echo ran",)


def test_a_file_naming_code_is_refused_unless_weights_only_is_false():
    data = torch_bytes({"w": torch.ones(2), "x": _Runs()})
    with pytest.raises(pickle.UnpicklingError, match=r"posix\.system.*add_safe_globals"):
        hx_load(data)
    with pytest.raises(pickle.UnpicklingError, match="weights_only=False"):
        hx_load(data, weights_only=True)


def test_the_format_before_the_archive_and_its_argument_get_clear_errors():
    legacy = torch_bytes({"w": torch.ones(2)}, _use_new_zipfile_serialization=False)
    with pytest.raises(pickle.UnpicklingError, match="before its zip archive"):
        hx_load(legacy)
    with pytest.raises(ValueError, match="_use_new_zipfile_serialization"):
        pickled.save({}, io.BytesIO(), _use_new_zipfile_serialization=False)


def _rewrite(data: bytes, name_end: str, new: bytes) -> bytes:
    """The archive with the record ending in ``name_end`` replaced by ``new``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = new if info.filename.endswith(name_end) else src.read(info)
            dst.writestr(info.filename, body)
    return out.getvalue()


def test_damaged_archives_name_what_is_wrong():
    data = torch_bytes({"w": torch.arange(6.0).reshape(2, 3)})
    with pytest.raises(pickle.UnpicklingError, match="holds 8 bytes.*6 elements"):
        hx_load(_rewrite(data, "data/0", b"\x00" * 8))
    with pytest.raises(pickle.UnpicklingError, match="truncated or damaged"):
        hx_load(data[: len(data) // 2])
    big = torch.arange(6.0)
    view = torch.as_strided(big, (2, 3), (3, 1), 0)
    good = torch_bytes({"w": view})
    with zipfile.ZipFile(io.BytesIO(good)) as zf:
        stream = zf.read("archive/data.pkl")
    wide = stream.replace(b"K\x03K\x01\x86", b"K\x09K\x01\x86")
    assert wide != stream  # (the stride 3 became 9: past the storage's end)
    bad = _rewrite(good, "data.pkl", wide)
    with pytest.raises(pickle.UnpicklingError, match="does not fit storage 0 of 6"):
        hx_load(bad)
    no_pickle = io.BytesIO()
    with zipfile.ZipFile(no_pickle, "w") as zf:
        zf.writestr("x/data/0", b"")
    with pytest.raises(pickle.UnpicklingError, match="one data.pkl"):
        hx_load(no_pickle.getvalue())


_SAMPLE = torch_bytes({"w": torch.arange(6.0).reshape(2, 3), "n": [1, 2],
                       "p": torch.nn.Parameter(torch.ones(2))})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(_SAMPLE) - 1), st.integers(0, 255)),
                min_size=1, max_size=4))
def test_corrupted_archives_load_or_raise_an_unpickling_error(edits):
    data = bytearray(_SAMPLE)
    for at, value in edits:
        data[at] = value
    try:
        hx_load(bytes(data))
    except pickle.UnpicklingError:
        pass


@pytest.mark.gpu
def test_gpu_tensors_are_pytorchs_cuda_in_the_file(be):
    x = hx.arange(6.0, device="gpu").reshape(2, 3)
    data = haelixe_bytes({"x": x, "col": x[:, 1]})
    theirs = torch.load(io.BytesIO(data), map_location="cpu")
    assert theirs["col"].tolist() == [1.0, 4.0]
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert b"cuda:0" in zf.read("archive/data.pkl")
    back = hx_load(data)
    assert back["x"].device == "gpu" and back["col"]._storage is back["x"]._storage
    assert back["col"].cpu().tolist() == [1.0, 4.0]
    assert hx_load(data, map_location="cpu")["col"].device == "cpu"


def test_mmap_maps_each_storage_copy_on_write(tmp_path):
    path = tmp_path / "big.pt"
    torch.save({"w": torch.arange(1000.0).reshape(10, 100), "b": torch.ones(3)}, path)
    before = path.read_bytes()
    back = pickled.load(path, mmap=True)
    raw = back["w"]._storage.data
    while raw.base is not None and not isinstance(raw, np.memmap):
        raw = raw.base
    assert isinstance(raw, np.memmap)  # (the storage is the file's pages, not a copy)
    np.testing.assert_array_equal(back["w"].numpy(), np.arange(1000.0).reshape(10, 100))
    back["w"].add_(1)  # a write changes this tensor, not the file (as PyTorch's)
    assert back["w"][0, 0].item() == 1.0 and path.read_bytes() == before
    pickled.save({"x": hx.ones(2)}, tmp_path / "ours.pt")
    assert pickled.load(tmp_path / "ours.pt", mmap=True)["x"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="must be a file path"):
        pickled.load(io.BytesIO(before), mmap=True)
    (tmp_path / "plain").write_bytes(b"not an archive")
    with pytest.raises(ValueError, match="needs PyTorch's zip archive"):
        pickled.load(tmp_path / "plain", mmap=True)
