"""File fuzzing: damaged checkpoints (hx.load) and damaged dataset directories
(MemmapDataset). Every outcome must be the original data or the package's own error
(CheckpointError, NpyFormatError), never another exception, a crash, or other data.

- every byte of a small checkpoint and of a small dataset (manifest, .npy headers and
  data) replaced by a few other values; every truncation of every file, and bytes added;
- files cut short while a dataset has them mapped, at every boundary that matters, read
  in every way a batch is read (in a subprocess: a miss would be a SIGBUS);
- generated header edits (hypothesis, fixed seed): JSON fields changed, types swapped,
  keys added and removed, offsets overlapping or out of range, huge lengths, deep
  nesting; for the .npy header dict and the manifest likewise.

A file written by Haelixe carries checksums over everything that decides what loads
(the checkpoint's header digest and CRC-32 per tensor; the manifest's digest, against
which each .npy header is checked). The .npy format has no checksum of its data, as
numpy's has none: a damaged data byte is read as it is, so for those bytes the check is
that the dataset reads exactly the file's bytes, and nothing else changed.

Edits that re-sign a checksum play someone crafting a file: those may load other data,
and the check is that they never raise anything but the package's error, and never reach
a file outside the dataset's directory.

HAELIXE_FUZZ_EXAMPLES sets the number of generated examples per generated test (200 by
default, a budget of a few seconds each on two cores); at 2000 or more the byte passes
also try every value of every byte. Run with -s to see the case counts.
"""

from __future__ import annotations

import collections
import json
import os
import struct
import textwrap
from pathlib import Path

import filedamage
import numpy as np
import pytest
from filedamage import bits, compose_checkpoint, resign_manifest, rewrite, same, write_byte
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import haelixe as hx
from haelixe.data import MemmapDataset, write_dataset
from haelixe.data.npy import NpyFormatError, read_header
from haelixe.serialization import CheckpointError

pytestmark = pytest.mark.filterwarnings("error")  # a damaged file warns about nothing

EXAMPLES = int(os.environ.get("HAELIXE_FUZZ_EXAMPLES", "200"))
EVERY_VALUE = EXAMPLES >= 2000
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])
COUNTS: collections.Counter = collections.Counter()


@pytest.fixture(scope="module", autouse=True)
def case_counts():
    yield
    print("\nfile fuzz cases:", json.dumps(dict(sorted(COUNTS.items())), indent=1),
          f"total {sum(COUNTS.values())}")


def _other_values(data: bytes, i: int, rng: np.random.Generator):
    """The values byte ``i`` is replaced by: every other value in a large run, else three
    bit flips (low, case/space, high) and one seeded random byte."""
    if EVERY_VALUE:
        return [v for v in range(256) if v != data[i]]
    values = {data[i] ^ 0x01, data[i] ^ 0x20, data[i] ^ 0x80, int(rng.integers(256))}
    return sorted(values - {data[i]})


def _count(case: str, outcome: str) -> None:
    COUNTS[f"{case}: {outcome}"] += 1


# -- checkpoints -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A small checkpoint with every dtype, a 0-d and an empty tensor, and the nesting
    save() encodes (int keys, tuples, dtypes, None, a step count)."""
    rng = np.random.default_rng(0)
    obj = {"model": {"w": hx.from_numpy(rng.standard_normal((3, 4)).astype(np.float32)),
                     "b": hx.ones(4).bfloat16(), "h": hx.ones(2).half(),
                     "d": hx.tensor([0.5, -2.0], dtype=hx.float64)},
           "optim": {"state": {0: {"m": hx.zeros(3, dtype=hx.int32)}},
                     "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999)}]},
           "mask": hx.tensor([True, False, True]), "ids": hx.arange(3),
           "scalar": hx.tensor(2.5), "empty": hx.zeros(0, 2), "step": 1000,
           "dtype": hx.bfloat16, "note": None}
    path = tmp_path_factory.mktemp("ckpt") / "c.safetensors"
    hx.save(obj, path)
    return path, path.read_bytes(), hx.load(path)


def _load_outcome(path, ref, case: str, crafted: bool = False, plain=None) -> str:
    """Load the file at ``path``: 'original', 'error' (CheckpointError), 'plain' (equal
    to ``plain``, the file read as one without Haelixe metadata, when given), or for a
    crafted file 'loaded'; anything else fails the test, naming the case."""
    try:
        back = hx.load(path)
    except CheckpointError:
        return "error"
    except Exception as e:  # noqa: BLE001 (any other class is the failure under test)
        raise AssertionError(f"{case}: {type(e).__name__}: {e}") from e
    if same(ref, back):
        return "original"
    if plain is not None and same(plain, back):
        return "plain"
    assert crafted, f"{case}: loaded different data without an error"
    return "loaded"


def _plain(raw: bytes, tmp_path):
    """The checkpoint read as a plain safetensors file (its metadata removed): what
    hx.load must give for an edit that removes every Haelixe marker at once, since it
    cannot tell such a file from one another tool wrote."""
    header, rest = filedamage.split_checkpoint(raw)
    del header[filedamage.META]
    rewrite(tmp_path / "plain", compose_checkpoint(header, rest))
    return hx.load(tmp_path / "plain")


def _has_marker(header) -> bool:
    meta = header.get(filedamage.META) if isinstance(header, dict) else None
    return isinstance(meta, dict) and (meta.get("format") == "haelixe" or any(
        k.startswith("haelixe") for k in meta))


def test_checkpoint_every_byte_damaged(checkpoint, tmp_path):
    _, data, ref = checkpoint
    path = tmp_path / "c"
    path.write_bytes(data)
    rng = np.random.default_rng(14)
    for i in range(len(data)):
        for value in _other_values(data, i, rng):
            write_byte(path, i, value)
            case = f"byte {i} {data[i]:#04x}->{value:#04x}"
            _count("checkpoint byte", _load_outcome(path, ref, case))
        write_byte(path, i, data[i])


def test_checkpoint_every_truncation_and_extension(checkpoint, tmp_path):
    _, data, ref = checkpoint
    path = tmp_path / "c"
    cases = [data[:n] for n in range(len(data))]
    cases += [data + extra for extra in (b"\0", b" " * 7, b"\0" * 8, b"\xff" * 4096, data)]
    for blob in cases:
        rewrite(path, blob)
        assert _load_outcome(path, ref, f"{len(blob)} bytes") == "error"
        _count("checkpoint truncation or extension", "error")


_HUGE = [-1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, 10**30]
_SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.sampled_from(_HUGE)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10)
            | st.sampled_from(["F32", "BF16", "U8", "haelixe", "1", "2", "", "__tensor__"]))
_KEYS = st.text(max_size=8) | st.sampled_from(
    ["dtype", "shape", "data_offsets", "__tensor__", "__dict__", "__tuple__", "__dtype__",
     "format", "haelixe.version", "w", "model.w"])
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(_KEYS, inner, max_size=4), max_leaves=10)
_DEEP = "\0deep\0"  # a value replaced by deep nesting once the JSON is text


def _paths(node, prefix=()):
    yield prefix
    items = node.items() if isinstance(node, dict) else \
        enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield from _paths(v, prefix + (k,))


def _edit(root, draw, values=_JSON):
    """``root`` with one drawn edit at one drawn place: a value replaced (by any JSON
    value, a huge count, or deep nesting), a key or item removed, or a key added."""
    paths = list(_paths(root))
    path = draw(st.sampled_from(paths))
    kind = draw(st.sampled_from(["replace", "replace", "deep", "remove", "add"]))
    if not path:
        return root if kind == "remove" else draw(values) if kind != "deep" else _DEEP
    parent = root
    for k in path[:-1]:
        parent = parent[k]
    key = path[-1]
    if kind == "remove":
        del parent[key]
    elif kind == "add" and isinstance(parent, dict):
        parent[draw(_KEYS)] = draw(values)
    elif kind == "add":
        parent.insert(key, draw(values))
    else:
        parent[key] = _DEEP if kind == "deep" else draw(values)
    return root


def _text(obj, depth: int) -> str:
    text = json.dumps(obj, separators=(",", ":"))
    return text.replace(json.dumps(_DEEP), "[" * depth + "]" * depth)


@FUZZ
@given(data=st.data())
def test_checkpoint_header_edits(checkpoint, tmp_path, data):
    _, raw, ref = checkpoint
    header, rest = filedamage.split_checkpoint(raw)
    edited = _edit(header, data.draw)
    crafted = data.draw(st.booleans())
    if crafted:  # re-sign (the digest of a deep value covers the placeholder: refused)
        filedamage.resign_checkpoint(edited)
    depth = data.draw(st.sampled_from([2, 64, 1000, 100_000]))
    rewrite(tmp_path / "c", compose_checkpoint(_text(edited, depth), rest))
    plain = None if _has_marker(edited) else _plain(raw, tmp_path)
    outcome = _load_outcome(tmp_path / "c", ref, f"header edit {edited!r:.300}", crafted,
                            plain)
    _count(f"checkpoint header edit{' re-signed' if crafted else ''}", outcome)


_MARKER_VALUES = _JSON | st.builds(lambda k, v: {k: v}, st.sampled_from(
    ["__tensor__", "__dict__", "__tuple__", "__dtype__", "__other__"]), _JSON)


@FUZZ
@given(data=st.data())
def test_checkpoint_tree_edits_re_signed(checkpoint, tmp_path, data):
    """The tree of saved values, edited and re-signed: reaches _decode's own checks."""
    _, raw, ref = checkpoint
    header, rest = filedamage.split_checkpoint(raw)
    tree = _edit(filedamage.tree_of(header), data.draw, _MARKER_VALUES)
    depth = data.draw(st.sampled_from([2, 150, 1000, 100_000]))
    meta = dict(header[filedamage.META], **{"haelixe.tree": _text(tree, depth)})
    edited = dict(header, **{filedamage.META: meta})
    rewrite(tmp_path / "c", compose_checkpoint(edited, rest, resign=True))
    outcome = _load_outcome(tmp_path / "c", ref, f"tree edit {tree!r:.300}", crafted=True)
    _count("checkpoint tree edit re-signed", outcome)


# -- datasets --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A small dataset: float32, int64 and bfloat16 fields and some meta."""
    import ml_dtypes

    rng = np.random.default_rng(1)
    path = tmp_path_factory.mktemp("data") / "ds"
    write_dataset(path, meta={"task": "fuzz", "seed": 7, "note": [1, 2.5, None]},
                  inputs=rng.standard_normal((12, 3, 2)).astype(np.float32),
                  targets=np.arange(12), noise=np.ones((12, 2), ml_dtypes.bfloat16))
    ds = MemmapDataset(path)
    files = {n: ds._headers[n].path for n in ds.fields}
    files["manifest"] = str(path / "manifest.json")
    ref = {"fields": ds.fields, "length": len(ds), "meta": ds.meta,
           "headers": dict(ds._headers), "dtypes": {n: t.dtype for n, t in ds.tensors.items()},
           "bits": {n: bits(a) for n, a in ds.arrays.items()}}
    originals = {n: Path(f).read_bytes() for n, f in files.items()}
    return path, files, originals, ref


def _open_outcome(path, ref, case: str, crafted: bool = False, expect=None) -> str:
    """Open the dataset and read every sample by view and by gather: 'original' (the
    original fields, dtypes, shapes, meta and values, or ``expect``'s values), 'error'
    (NpyFormatError), or for a crafted manifest 'loaded'; anything else fails the
    test, naming the case."""
    try:
        ds = MemmapDataset(path)
        views = ds.slice(0, len(ds))
        gathered = ds.gather(np.arange(len(ds)))
    except NpyFormatError:
        return "error"
    except Exception as e:  # noqa: BLE001 (any other class is the failure under test)
        raise AssertionError(f"{case}: {type(e).__name__}: {e}") from e
    for h in ds._headers.values():  # crafted or not, never a file outside the directory
        assert os.path.dirname(h.path) == str(path), f"{case}: opened {h.path}"
    expect = expect or ref["bits"]
    original = (ds.fields == ref["fields"] and len(ds) == ref["length"]
                and ds.meta == ref["meta"])
    for n, v, g in zip(ds.fields, views, gathered):
        original = (original and v.dtype is g.dtype is ref["dtypes"][n]
                    and v.shape == g.shape == ref["headers"][n].shape
                    and bits(v.numpy()) == bits(g.numpy()) == expect[n])
    if original:
        return "original"
    assert crafted, f"{case}: opened with different data or layout, no error"
    return "loaded"


def _as_read(ref, name: str, i: int, value: int) -> dict:
    """The values expected after data byte ``i`` of field ``name``'s file became
    ``value``: that byte changed, nothing else."""
    raw = bytearray(ref["bits"][name])
    raw[i - ref["headers"][name].offset] = value
    return dict(ref["bits"], **{name: bytes(raw)})


def test_dataset_every_byte_damaged(dataset):
    path, files, originals, ref = dataset
    rng = np.random.default_rng(14)
    try:
        for name, data in originals.items():
            start = ref["headers"][name].offset if name in ref["headers"] else len(data)
            for i in range(len(data)):
                # a data byte has no checksum: one value shows it is read as it is
                values = [data[i] ^ 0xFF] if i >= start else _other_values(data, i, rng)
                for value in values:
                    write_byte(files[name], i, value)
                    expect = _as_read(ref, name, i, value) if i >= start else None
                    outcome = _open_outcome(path, ref, f"{name} byte {i} -> {value}",
                                            expect=expect)
                    _count(f"dataset {'data' if i >= start else 'header'} byte", outcome)
                write_byte(files[name], i, data[i])
    finally:
        for name, data in originals.items():
            rewrite(files[name], data)


def test_dataset_every_truncation_and_extension(dataset):
    path, files, originals, ref = dataset
    try:
        for name, data in originals.items():
            for blob in [data[:n] for n in range(len(data))] + [data + b"\0", data + data]:
                rewrite(files[name], blob)
                outcome = _open_outcome(path, ref, f"{name} of {len(blob)} bytes")
                assert outcome == "error", f"{name} of {len(blob)} bytes: {outcome}"
                _count("dataset truncation or extension", outcome)
            rewrite(files[name], data)
    finally:
        for name, data in originals.items():
            rewrite(files[name], data)


CUT_WHILE_OPEN = textwrap.dedent("""
    import json, os, shutil, sys
    import numpy as np
    from haelixe.data import DataLoader, MemmapDataset, write_dataset
    from haelixe.data.npy import NpyFormatError, read_header

    root = sys.argv[1]
    master = os.path.join(root, "master")
    write_dataset(master, inputs=np.ones((2048, 256), np.float32), targets=np.arange(2048))
    h = read_header(os.path.join(master, "inputs.npy"))
    row, page = 1024, 4096
    cuts = sorted({0, 6, 9, h.offset - 1, h.offset, h.offset + 1, h.offset + row,
                   page, page + 1, h.file_size // 2, h.file_size - page,
                   h.file_size - row, h.file_size - 1})
    reads = {
        "slice": lambda ds: ds.slice(0, len(ds))[0].numpy().sum(),
        "last item": lambda ds: ds[len(ds) - 1][0].numpy().sum(),
        "gather": lambda ds: ds.gather(np.arange(0, len(ds), 7))[0].numpy().sum(),
        "prefetch": lambda ds: ds.prefetch(0, len(ds)),
        "loader": lambda ds: [b[0].numpy().sum() for b in DataLoader(ds, 256)],
        "shuffled loader": lambda ds: [b[0].numpy().sum() for b in
                                       DataLoader(ds, 256, shuffle=True, seed=0)],
    }
    counts = {}
    for bound in (None, 1 << 16):
        for cut in cuts:
            for name, read in reads.items():
                path = os.path.join(root, "ds")
                shutil.rmtree(path, ignore_errors=True)
                shutil.copytree(master, path)
                ds = MemmapDataset(path, max_resident_bytes=bound)
                os.truncate(os.path.join(path, "inputs.npy"), cut)
                try:
                    read(ds)
                    outcome = f"no error: {name} bound {bound} cut {cut}"
                except NpyFormatError as e:
                    ok = "inputs.npy" in str(e) and f"now {cut} bytes" in str(e)
                    outcome = "error" if ok else f"unclear: {e}"
                counts[outcome] = counts.get(outcome, 0) + 1
    print(json.dumps(counts))
""")


def test_dataset_files_cut_while_mapped(tmp_path):
    counts = filedamage.run_in_subprocess(CUT_WHILE_OPEN, tmp_path, timeout=300)
    assert set(counts) == {"error"}, counts
    COUNTS["dataset cut while mapped: error"] += counts["error"]


_DESCRS = st.sampled_from(["<f4", ">f4", "<f8", "<i8", "<i4", "|b1", "|V2", "<u2", "O",
                           "<U3", "|S4", "<c8", "", "f4", "float32"]) | st.text(max_size=6)
_SHAPES = st.one_of(
    st.tuples(st.sampled_from([12, 0, 11, 13, -12, 2**63, 10**30]),
              st.sampled_from([3, 2, 6, 0])).map(lambda t: t + (2,)),
    st.lists(st.integers(-3, 40), max_size=4).map(tuple), _SCALARS, st.lists(_SCALARS))


@FUZZ
@given(data=st.data())
def test_npy_header_edits(dataset, data):
    """The .npy header dict with drawn descr, fortran_order and shape (any type), keys
    added or removed, deep nesting, or plain garbage."""
    path, files, originals, ref = dataset
    name = data.draw(st.sampled_from(["inputs", "targets", "noise"]))
    h = ref["headers"][name]
    fields = {"descr": data.draw(_DESCRS), "fortran_order": data.draw(
        st.sampled_from([False, True, 0, 1, None, "False"])), "shape": data.draw(_SHAPES)}
    for key in data.draw(st.lists(st.sampled_from(["descr", "fortran_order", "shape"]),
                                  max_size=1)):
        del fields[key]
    if data.draw(st.booleans()):
        fields[data.draw(st.text(max_size=5))] = data.draw(_SCALARS)
    text = data.draw(st.sampled_from([repr(fields), repr(fields), "(" * 1000 + ")" * 1000,
                                      repr(fields)[:-3], "{'descr': <f4}"]))
    body = (text + " " * data.draw(st.integers(0, 70)) + "\n").encode("latin1", "replace")
    version, fmt = (1, "<H") if len(body) < 65536 else (2, "<I")
    blob = b"\x93NUMPY" + bytes([version, 0]) + struct.pack(fmt, len(body)) + body
    try:
        rewrite(files[name], blob + originals[name][h.offset:])
        outcome = _open_outcome(path, ref, f"{name} header {text[:200]!r}")
        _count("npy header edit", outcome)
        bare = _bare_outcome(files[name])
        _count("bare npy header edit", bare)
    finally:
        rewrite(files[name], originals[name])


def _bare_outcome(file) -> str:
    """A lone .npy opened as a dataset: NpyFormatError, or exactly what numpy reads (no
    manifest to check it against, so numpy's reading is the reference)."""
    try:
        header = read_header(file)
        ds = MemmapDataset(file)
    except NpyFormatError:
        return "error"
    ours = ds.arrays["inputs"]
    theirs = np.load(file, mmap_mode="r", allow_pickle=False)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape == header.shape
    assert bits(ours) == bits(np.ascontiguousarray(theirs))
    return "as numpy reads it"


def test_bare_npy_every_byte_damaged(dataset, tmp_path):
    _, files, originals, ref = dataset
    data = originals["inputs"]
    file = tmp_path / "inputs.npy"
    file.write_bytes(data)
    rng = np.random.default_rng(14)
    for i in range(ref["headers"]["inputs"].offset):
        for value in _other_values(data, i, rng):
            write_byte(file, i, value)
            _count("bare npy header byte", _bare_outcome(file))
        write_byte(file, i, data[i])


@FUZZ
@given(data=st.data())
def test_manifest_edits(dataset, data):
    """The manifest edited anywhere, re-signed or not; names that reach outside the
    directory are refused even when re-signed."""
    path, files, originals, ref = dataset
    manifest = _edit(json.loads(originals["manifest"]), data.draw)
    if data.draw(st.booleans()) and isinstance(manifest, dict) and "fields" in manifest:
        fields = manifest["fields"]
        if isinstance(fields, list) and fields and isinstance(fields[0], dict):
            fields[0]["name"] = data.draw(st.sampled_from(
                ["../ds/inputs", "/etc/passwd", "sub/inputs", "..", "inputs\0"]))
    crafted = data.draw(st.booleans())
    if crafted:
        manifest = resign_manifest(manifest)
    text = _text(manifest, data.draw(st.sampled_from([2, 1000, 100_000])))
    try:
        rewrite(files["manifest"], text.encode("utf8", "surrogatepass"))
        outcome = _open_outcome(path, ref, f"manifest {text[:300]!r}", crafted)
        _count(f"manifest edit{' re-signed' if crafted else ''}", outcome)
    finally:
        rewrite(files["manifest"], originals["manifest"])
