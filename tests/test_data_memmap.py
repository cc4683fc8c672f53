"""Memory-mapped datasets: the .npy stream writer, the dataset directory, zero-copy
batches, and clear errors for damaged files."""

from __future__ import annotations

import json
import os
import re
import stat
import struct
import textwrap

import ml_dtypes
import numpy as np
import pytest
from filedamage import resign_manifest, run_in_subprocess

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
    np.save(tmp_path / "d" / "inputs.npy", np.zeros((4, 2), np.complex64))
    with pytest.raises(NpyFormatError, match="dtype complex64, which Haelixe has no type for"):
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


# -- issue 14: truncation while mapped, damaged headers, field names, read-only batches --
TRUNCATE_WHILE_OPEN = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    from haelixe.data import DataLoader, MemmapDataset, write_dataset
    from haelixe.data.npy import NpyFormatError, map_array, read_header

    root = sys.argv[1]
    x = np.arange(4096 * 64, dtype=np.float32).reshape(4096, 64)  # 1 MiB
    outcomes = {}

    def attempt(name, fn):
        try:
            fn()
            outcomes[name] = "no error"
        except NpyFormatError as e:
            outcomes[name] = str(e)

    for bound in (None, 1 << 16):  # read through the mapping; read with pread
        path = os.path.join(root, f"ds{bound}")
        write_dataset(path, inputs=x, targets=np.arange(4096))
        ds = MemmapDataset(path, max_resident_bytes=bound)
        os.truncate(os.path.join(path, "inputs.npy"), 4096)
        attempt(f"slice {bound}", lambda: ds.slice(4000, 4096)[0].numpy().sum())
        attempt(f"item {bound}", lambda: ds[4095][0].numpy().sum())
        attempt(f"gather {bound}", lambda: ds.gather([1, 4090])[0].numpy().sum())
        attempt(f"prefetch {bound}", lambda: ds.prefetch(0, 4096))
        for shuffle in (False, True):
            attempt(f"loader {bound} {shuffle}", lambda: [b[0].numpy().sum() for b in
                    DataLoader(ds, 512, shuffle=shuffle, seed=0)])
    header = read_header(os.path.join(root, "dsNone", "targets.npy"))
    os.truncate(header.path, 0)
    attempt("map", lambda: map_array(header))
    print(json.dumps(outcomes))
""")


def test_item12_truncated_npy_no_sigbus(tmp_path):
    outcomes = run_in_subprocess(TRUNCATE_WHILE_OPEN, tmp_path)
    assert len(outcomes) == 13
    for case, message in outcomes.items():
        where = "targets.npy" if case == "map" else "inputs.npy"
        expected = "now 0 bytes but its header needs" if case == "map" else \
            "is now 4096 bytes but its header needs 1048704"
        assert where in message and expected in message and "truncated" in message, \
            (case, message)


@pytest.mark.parametrize("header", [
    "[1, 2]", "{'descr': '<f4', 'fortran_order': False}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (100.0, 3, 2)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (100, True, 2)}",
    "{'descr': '<f4', 'fortran_order': 'no', 'shape': (100, 3, 2)}",
    "{'descr': 'nonsense', 'fortran_order': False, 'shape': (100, 3, 2)}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 300 + ")" * 300 + "}",
    "{'descr': '<f4', 'fortran_order': False, 'shape': (" + "9" * 5000 + ",)}",
    "{'descr': [('a', '<f4', (3, 2))], 'fortran_order': False, 'shape': (100,)}",
])
def test_item14_damaged_npy_raises_only_npy_format_error(ds_path, header):
    p = ds_path / "inputs.npy"
    text = (header + " ").encode("latin1")
    p.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + b"\0" * 2400)
    with pytest.raises(NpyFormatError, match="inputs.npy"):
        MemmapDataset(ds_path)


@pytest.mark.parametrize("manifest", [
    "[]", '{"format": "haelixe-dataset", "version": 1, "length": 100, "fields": {}}',
    '{"format": "haelixe-dataset", "version": 1, "length": 100, "fields": ["inputs"]}',
    '{"format": "haelixe-dataset", "version": 1, "length": "100", "fields": []}',
    '{"format": "haelixe-dataset", "version": true, "length": 100, "fields": []}',
    '{"format": "haelixe-dataset", "format": "haelixe-dataset"}',
    "[" * 100000, b"\xff\xfe".decode("latin1"),
])
def test_item14_damaged_manifest_raises_only_npy_format_error(ds_path, manifest):
    (ds_path / "manifest.json").write_bytes(manifest.encode("latin1"))
    with pytest.raises(NpyFormatError, match="manifest.json is damaged"):
        MemmapDataset(ds_path)


def test_item14_a_manifest_field_without_its_file(ds_path):
    os.remove(ds_path / "targets.npy")
    with pytest.raises(NpyFormatError, match="lists field 'targets' but .*targets.npy does "
                                             "not exist"):
        MemmapDataset(ds_path)


@pytest.mark.parametrize("name", ["../x", "/tmp/abs", "a/b", "..", "", "x.npy", "1st",
                                  "a\\b", "ü"])
def test_item15_field_names_are_checked_before_writing(tmp_path, name):
    with pytest.raises(ValueError, match=f"field name {re.escape(repr(name))} is not a "
                                         f"plain name"):
        write_dataset(tmp_path / "ds", **{name: np.zeros((2, 3), np.float32)})
    with pytest.raises(ValueError, match="not a plain name"):
        DatasetWriter(tmp_path / "ds", {"inputs": ((3,), "float32"),
                                        name: ((3,), "float32")})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["../secret", "/abs/secret", "sub/secret"])
def test_item15_a_manifest_naming_a_path_is_refused(ds_path, name):
    np.save(ds_path.parent / "secret.npy", np.zeros((100, 3, 2), np.float32))
    m = json.loads((ds_path / "manifest.json").read_text())
    m["fields"][0]["name"] = name
    (ds_path / "manifest.json").write_text(json.dumps(resign_manifest(m)))
    with pytest.raises(NpyFormatError, match=f"field name {re.escape(repr(name))} is not "
                                             f"a plain name"):
        MemmapDataset(ds_path, writable=True)


def test_item15_manifests_are_checksummed_and_version_1_still_opens(ds_path):
    m = json.loads((ds_path / "manifest.json").read_text())
    assert m["version"] == 2 and len(m["checksum"]) == 64
    (ds_path / "manifest.json").write_text(json.dumps(dict(m, meta={"edited": True})))
    with pytest.raises(NpyFormatError, match="does not match its checksum"):
        MemmapDataset(ds_path)
    del m["checksum"]
    (ds_path / "manifest.json").write_text(json.dumps(dict(m, version=1)))
    assert len(MemmapDataset(ds_path)) == 100


def test_item16_datasets_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_dataset(tmp_path / "ds", inputs=np.zeros((2, 3), np.float32))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "ds").st_mode) == 0o750
    for f in os.listdir(tmp_path / "ds"):
        assert stat.S_IMODE(os.stat(tmp_path / "ds" / f).st_mode) == 0o640, f


_READ_ONLY_FIX = r"read-only view of a memory-mapped file.*clone\(\).*writable=True"


def test_item17_read_only_mapped_storage_names_the_fix(ds_path):
    (x, _) = MemmapDataset(ds_path).slice(0, 4)
    with pytest.raises(RuntimeError, match="fill_: this tensor is a " + _READ_ONLY_FIX):
        x.storage.check_writable("fill_")
    frozen = np.zeros(3)
    frozen.flags.writeable = False
    with pytest.raises(RuntimeError, match=r"read-only numpy array.*clone\(\)"):
        hx.from_numpy(frozen).storage.check_writable("add_")
    hx.zeros(3).storage.check_writable("add_")  # a writable one passes


def test_item17_in_place_on_a_read_only_mapped_batch_names_the_fix(ds_path):
    (x, _) = MemmapDataset(ds_path).slice(0, 4)
    for op in (lambda: x.fill_(1.0), lambda: x.add_(1.0), lambda: x.copy_(x + 1)):
        with pytest.raises(RuntimeError, match=_READ_ONLY_FIX):
            op()


def test_writers_publish_through_the_one_atomic_protocol(tmp_path, monkeypatch):
    from haelixe.atomic import CommitOnSuccess
    from haelixe.data import memmap

    assert issubclass(DatasetWriter, CommitOnSuccess)
    assert issubclass(memmap.NpyStreamWriter, CommitOnSuccess)

    def no_space(*args):
        raise OSError("No space left on device")

    monkeypatch.setattr(memmap, "write_manifest", no_space)
    w = DatasetWriter(tmp_path / "ds", {"inputs": ((2,), "float32")})
    w.append(np.zeros((3, 2)))
    with pytest.raises(OSError, match="No space"):
        w.close()  # the commit fails part-way: everything written is dropped
    assert os.listdir(tmp_path) == []
