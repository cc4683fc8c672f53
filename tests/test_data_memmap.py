"""Memory-mapped datasets: the .npy stream writer, the dataset directory, zero-copy
batches, and clear errors for damaged files."""

from __future__ import annotations

import json
import os

import ml_dtypes
import numpy as np
import pytest

import haelixe as hx
from haelixe.data import DatasetWriter, MemmapDataset, write_dataset, write_npy_stream
from haelixe.data.npy import NpyFormatError, read_header


def _xy(n=100):
    x = np.arange(n * 6, dtype=np.float32).reshape(n, 3, 2)
    y = np.arange(n, dtype=np.int64)
    return x, y


def _no_temps(directory) -> bool:
    return not [f for f in os.listdir(directory) if f.endswith((".tmp", ".old"))]


# -- the stream writer -------------------------------------------------------------------
def test_stream_writer_builds_a_standard_npy_chunk_by_chunk(tmp_path):
    p = tmp_path / "x.npy"
    chunks = [np.full((k, 4, 2), k, np.float32) for k in (3, 1, 7, 0, 5)]
    with write_npy_stream(p, (4, 2), "float32") as w:
        for c in chunks:
            w.append(c)
            assert not p.exists()  # published only at close
    assert w.count == 16
    np.testing.assert_array_equal(np.load(p), np.concatenate(chunks))
    h = read_header(p)
    assert h.offset % 64 == 0 and h.shape == (16, 4, 2)
    assert _no_temps(tmp_path)


def test_stream_writer_count_of_any_width_fits_the_reserved_header(tmp_path):
    p = tmp_path / "wide.npy"
    with write_npy_stream(p, (), "int64") as w:
        w.append(np.arange(12345))
    np.testing.assert_array_equal(np.load(p), np.arange(12345))


def test_stream_writer_failure_leaves_nothing_and_keeps_the_old_file(tmp_path):
    p = tmp_path / "x.npy"
    np.save(p, np.zeros(3))
    before = p.read_bytes()
    with pytest.raises(RuntimeError, match="boom"):
        with write_npy_stream(p, (2,), "float32") as w:
            w.append(np.ones((4, 2)))
            raise RuntimeError("boom")
    assert p.read_bytes() == before
    assert _no_temps(tmp_path)


def test_stream_writer_rejects_wrong_chunks(tmp_path):
    with write_npy_stream(tmp_path / "x.npy", (3,), "float32") as w:
        with pytest.raises(ValueError, match=r"chunk of shape \(2, 4\).*give \(k, 3\)"):
            w.append(np.zeros((2, 4)))
        with pytest.raises(TypeError, match=r"complex128.*astype\('float32'\)"):
            w.append(np.zeros((2, 3), complex))
        w.append(np.zeros((2, 3), np.int32))  # a same-kind-safe cast is fine
    assert np.load(tmp_path / "x.npy").dtype == np.float32


# -- the dataset directory ---------------------------------------------------------------
def test_batches_are_zero_copy_views_of_the_mapping(tmp_path):
    x, y = _xy()
    write_dataset(tmp_path / "ds", inputs=x, targets=y, meta={"note": "test"})
    ds = MemmapDataset(tmp_path / "ds")
    assert len(ds) == 100 and ds.fields == ("inputs", "targets") and ds.meta == {"note": "test"}
    a, b = ds.slice(0, 10), ds.slice(40, 50)
    for k, name in enumerate(ds.fields):
        assert a[k].storage is b[k].storage  # one Storage per field, backed by the file
        assert np.shares_memory(a[k].numpy(), ds.arrays[name])
        assert np.shares_memory(b[k].numpy(), ds.arrays[name])
    assert b[0].offset == 40 * 6 and b[0].shape == (10, 3, 2)
    np.testing.assert_array_equal(b[0].numpy(), x[40:50])
    np.testing.assert_array_equal(b[1].numpy(), y[40:50])
    # the mapping is the file: numpy.load of each .npy agrees
    np.testing.assert_array_equal(np.load(tmp_path / "ds" / "inputs.npy"), x)
    # read-only unless opened writable
    assert not a[0].numpy().flags.writeable
    assert ds[7][1].item() == 7


def test_gather_copies_in_the_given_order(tmp_path):
    x, y = _xy()
    write_dataset(tmp_path / "ds", inputs=x, targets=y)
    ds = MemmapDataset(tmp_path / "ds")
    idx = np.array([5, 99, 0, 42])
    gx, gy = ds.gather(idx)
    np.testing.assert_array_equal(gx.numpy(), x[idx])
    np.testing.assert_array_equal(gy.numpy(), y[idx])
    assert not np.shares_memory(gx.numpy(), ds.arrays["inputs"])


def test_bounded_dataset_reads_gathers_past_the_mapping(tmp_path):
    x = np.random.default_rng(0).standard_normal((500, 3)).astype(ml_dtypes.bfloat16)
    y = np.arange(500)
    write_dataset(tmp_path / "ds", inputs=x, targets=y)
    ds = MemmapDataset(tmp_path / "ds", max_resident_bytes=1024)
    assert ds.bounded and not MemmapDataset(tmp_path / "ds").bounded
    idx = np.array([7, 8, 9, 10, 499, 0, 1, -1, 250, 250, 3])  # runs, repeats, negative
    gx, gy = ds.gather(idx)
    assert gx.dtype is hx.bfloat16
    np.testing.assert_array_equal(gx.numpy().view(np.uint16), x[idx].view(np.uint16))
    np.testing.assert_array_equal(gy.numpy(), y[idx])
    assert ds.gather(np.array([], np.int64))[1].shape == (0,)
    with pytest.raises(IndexError, match="index out of range for 500 samples"):
        ds.gather([3, 500])
    # views are counted: past the bound the mapping is dropped before the next batch
    ds.slice(0, 10)
    assert 0 < ds.resident_bound <= 2 * (2 << 20)
    ds.release()
    assert ds.resident_bound == 0
    np.testing.assert_array_equal(ds.slice(5, 9)[1].numpy(), y[5:9])
    ds.close()


def test_writer_appends_by_position_or_name_and_publishes_atomically(tmp_path):
    fields = {"inputs": ((2,), "float32"), "targets": ((), hx.int64)}
    path = tmp_path / "ds"
    with DatasetWriter(path, fields) as w:
        w.append(np.zeros((3, 2)), np.arange(3))
        w.append(targets=np.arange(3, 5), inputs=np.ones((2, 2)))
        assert not path.exists()
        with pytest.raises(ValueError, match="different sample counts"):
            w.append(np.zeros((2, 2)), np.arange(3))
    ds = MemmapDataset(path)
    assert len(ds) == 5
    np.testing.assert_array_equal(ds.arrays["targets"], np.arange(5))
    with pytest.raises(FileExistsError, match="overwrite=True"):
        DatasetWriter(path, fields)
    with pytest.raises(RuntimeError):
        with DatasetWriter(path, fields, overwrite=True) as w:
            w.append(np.zeros((1, 2)), np.arange(1))
            raise RuntimeError("interrupted")
    assert len(MemmapDataset(path)) == 5  # the old dataset is intact
    write_dataset(path, overwrite=True, inputs=np.zeros((2, 2), np.float32),
                  targets=np.arange(2))
    assert len(MemmapDataset(path)) == 2
    assert _no_temps(tmp_path)


def test_bfloat16_field_round_trips_through_the_manifest(tmp_path):
    x = np.random.default_rng(0).standard_normal((20, 4)).astype(ml_dtypes.bfloat16)
    write_dataset(tmp_path / "bf", inputs=x)
    ds = MemmapDataset(tmp_path / "bf")
    (b,) = ds.slice(2, 6)
    assert b.dtype is hx.bfloat16
    np.testing.assert_array_equal(b.numpy().view(np.uint16), x[2:6].view(np.uint16))


def test_plain_npy_files_open_without_a_manifest(tmp_path):
    x, y = _xy(10)
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "inputs.npy", x)
    np.save(tmp_path / "d" / "targets.npy", y)
    ds = MemmapDataset(tmp_path / "d")
    assert ds.fields == ("inputs", "targets") and len(ds) == 10
    single = MemmapDataset(tmp_path / "d" / "inputs.npy")
    assert single.fields == ("inputs",)


def test_writable_mapping_writes_through_to_the_file(tmp_path):
    write_dataset(tmp_path / "ds", inputs=np.zeros((4, 2), np.float32))
    ds = MemmapDataset(tmp_path / "ds", writable=True)
    ds.slice(1, 2)[0].fill_(3.0)
    del ds
    np.testing.assert_array_equal(np.load(tmp_path / "ds" / "inputs.npy")[1], [3.0, 3.0])


# -- damaged files -----------------------------------------------------------------------
@pytest.fixture
def ds_path(tmp_path):
    x, y = _xy()
    write_dataset(tmp_path / "ds", inputs=x, targets=y)
    return tmp_path / "ds"


def test_truncated_data_is_named(ds_path):
    p = ds_path / "inputs.npy"
    data = p.read_bytes()
    p.write_bytes(data[:-100])
    with pytest.raises(NpyFormatError, match=r"inputs.npy: truncated: the header says shape "
                                              r"\(100, 3, 2\) of float32 \(2400 bytes.*2300"):
        MemmapDataset(ds_path)


def test_truncated_header_is_named(ds_path):
    p = ds_path / "targets.npy"
    p.write_bytes(p.read_bytes()[:40])
    with pytest.raises(NpyFormatError, match="truncated inside the .npy header"):
        MemmapDataset(ds_path)


def test_not_npy_and_damaged_header_and_trailing_bytes(ds_path):
    p = ds_path / "inputs.npy"
    good = p.read_bytes()
    p.write_bytes(b"PK\x03\x04" + good[4:])
    with pytest.raises(NpyFormatError, match="not a .npy file"):
        MemmapDataset(ds_path)
    p.write_bytes(good[:10] + b"{'descr': <<garbage" + good[29:])
    with pytest.raises(NpyFormatError, match="damaged .npy header.*corrupted"):
        MemmapDataset(ds_path)
    p.write_bytes(good + b"\0" * 7)
    with pytest.raises(NpyFormatError, match="7 unexpected bytes after the data"):
        MemmapDataset(ds_path)


def test_wrong_dtype_against_the_manifest(ds_path):
    np.save(ds_path / "targets.npy", np.arange(100, dtype=np.int32))
    with pytest.raises(NpyFormatError, match=r"targets.npy holds int32 but manifest.json says "
                                              r"field 'targets' is int64"):
        MemmapDataset(ds_path)


def test_dtype_haelixe_cannot_hold(tmp_path):
    (tmp_path / "d").mkdir()
    np.save(tmp_path / "d" / "inputs.npy", np.zeros((4, 2), np.uint16))
    with pytest.raises(NpyFormatError, match="dtype uint16, which Haelixe has no type for"):
        MemmapDataset(tmp_path / "d")
    np.save(tmp_path / "d" / "inputs.npy", np.zeros((4, 2), ">f4"))
    with pytest.raises(NpyFormatError, match="big-endian; store it as float32"):
        MemmapDataset(tmp_path / "d")
    np.save(tmp_path / "d" / "inputs.npy", np.zeros((4, 2), ml_dtypes.bfloat16))
    with pytest.raises(NpyFormatError, match=r"raw 2-byte values.*bfloat16"):
        MemmapDataset(tmp_path / "d")


def test_length_shape_and_order_mismatches(ds_path):
    np.save(ds_path / "targets.npy", np.arange(90, dtype=np.int64))
    with pytest.raises(NpyFormatError, match="has 90 samples but manifest.json says 100"):
        MemmapDataset(ds_path)
    np.save(ds_path / "targets.npy", np.zeros((100, 2), np.int64))
    with pytest.raises(NpyFormatError, match=r"samples of shape \(2,\) but manifest.json "
                                              r"says \(\)"):
        MemmapDataset(ds_path)
    np.save(ds_path / "inputs.npy", np.asfortranarray(np.zeros((100, 3, 2), np.float32)))
    with pytest.raises(NpyFormatError, match="Fortran"):
        MemmapDataset(ds_path)


def test_corrupted_manifest(ds_path):
    (ds_path / "manifest.json").write_text('{"format": "haelixe-dataset", "vers')
    with pytest.raises(NpyFormatError, match="manifest.json is damaged"):
        MemmapDataset(ds_path)
    m = {"format": "haelixe-dataset", "version": 1, "length": 100,
         "fields": [{"name": "inputs", "dtype": "float7", "shape": [3, 2]}]}
    (ds_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(NpyFormatError, match="unknown dtype name 'float7'"):
        MemmapDataset(ds_path)


def test_missing_dataset(tmp_path):
    with pytest.raises(FileNotFoundError, match="no dataset at"):
        MemmapDataset(tmp_path / "nope")
