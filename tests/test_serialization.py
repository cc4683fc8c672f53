"""hx.save / hx.load: safetensors checkpoints of state dicts, atomic writes, clear errors,
PyTorch interop, and a bit-identical resume in a fresh process."""

from __future__ import annotations

import json
import os
import stat
import struct
import subprocess
import sys
import textwrap

import filedamage
import numpy as np
import pytest
import safetensors
import safetensors.numpy

import haelixe as hx
from haelixe import serialization
from haelixe.nn import Linear
from haelixe.optim import AdamW
from haelixe.serialization import CheckpointError

DIGEST = filedamage.DIGEST

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bits(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1).view(np.uint8)


def _checkpoint():
    hx.manual_seed(0)
    model = Linear(3, 2)
    opt = AdamW(model.parameters(), lr=1e-2, betas=(0.8, 0.9))
    opt.zero_grad()
    model(hx.randn(4, 3)).sum().backward()
    opt.step()
    return {"model": model.state_dict(), "optim": opt.state_dict(),
            "bf16": hx.randn(3, 5).bfloat16(), "scalar": hx.tensor(2.5),
            "mask": hx.tensor([True, False]), "empty": hx.zeros(0, 4),
            "strided": hx.arange(12).reshape(3, 4).T,
            "extra": {"epoch": 3, "names": ["a", "b"], 1: None, "dtype": hx.bfloat16}}


def _assert_same(a, b):
    if isinstance(a, hx.Tensor):
        assert isinstance(b, hx.Tensor) and a.dtype is b.dtype and a.shape == b.shape
        assert np.array_equal(_bits(np.ascontiguousarray(a.detach().numpy())),
                              _bits(b.numpy()))
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    else:
        assert a == b and type(a) is type(b)


def test_round_trip_nested_state_dicts_bf16_and_metadata(tmp_path):
    ck = _checkpoint()
    hx.save(ck, tmp_path / "c.safetensors")
    back = hx.load(tmp_path / "c.safetensors")
    _assert_same(ck, back)
    assert back["optim"]["param_groups"][0]["betas"] == (0.8, 0.9)
    assert float(back["optim"]["state"][0]["step"]) == 1  # (PyTorch's int-keyed layout)
    assert back["bf16"].dtype is hx.bfloat16
    assert back["model"]["weight"].numpy().flags.writeable


def test_loads_into_model_and_optimizer(tmp_path):
    ck = _checkpoint()
    hx.save({"model": ck["model"], "optim": ck["optim"]}, tmp_path / "c.safetensors")
    back = hx.load(tmp_path / "c.safetensors")
    hx.manual_seed(1)
    model = Linear(3, 2)
    opt = AdamW(model.parameters(), lr=0.5)
    model.load_state_dict(back["model"])
    opt.load_state_dict(back["optim"])
    np.testing.assert_array_equal(model.weight.detach().numpy(), ck["model"]["weight"].numpy())
    assert opt.step_count == 1 and opt.lr == 1e-2


def test_the_file_is_plain_safetensors(tmp_path):
    hx.save(_checkpoint(), tmp_path / "c.safetensors")
    with safetensors.safe_open(tmp_path / "c.safetensors", framework="np") as f:
        keys = set(f.keys())
        meta = f.metadata()
    assert {"model.weight", "model.bias", "optim.state.0.exp_avg", "bf16"} <= keys
    assert meta["format"] == "haelixe"
    assert json.loads(meta["haelixe.tree"])["optim"]["param_groups"][0]["lr"] == 1e-2


def test_pytorch_reads_identical_values(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    ck = _checkpoint()
    hx.save(ck, tmp_path / "c.safetensors")
    t = load_file(str(tmp_path / "c.safetensors"))
    assert t["bf16"].dtype == torch.bfloat16 and t["mask"].dtype == torch.bool
    pairs = {"model.weight": ck["model"]["weight"], "optim.state.1.exp_avg_sq":
             ck["optim"]["state"][1]["exp_avg_sq"], "bf16": ck["bf16"],
             "scalar": ck["scalar"], "mask": ck["mask"], "empty": ck["empty"],
             "strided": ck["strided"]}
    for name, ours in pairs.items():
        theirs = t[name]
        assert tuple(theirs.shape) == ours.shape
        raw = theirs.view(torch.int16) if theirs.dtype == torch.bfloat16 else theirs
        mine = ours.numpy().view(np.int16) if ours.dtype is hx.bfloat16 else ours.numpy()
        np.testing.assert_array_equal(raw.numpy(), mine)


def test_reads_a_file_written_elsewhere_as_a_flat_dict(tmp_path):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    safetensors.numpy.save_file({"w": a, "b": np.ones(2, np.int64)}, tmp_path / "f.st")
    back = hx.load(tmp_path / "f.st")
    assert set(back) == {"w", "b"}
    np.testing.assert_array_equal(back["w"].numpy(), a)


@pytest.mark.parametrize("failure", [OSError("No space left on device"), KeyboardInterrupt])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch, failure):
    path = tmp_path / "c.safetensors"
    hx.save({"w": hx.ones(3)}, path)
    before = path.read_bytes()
    real_write = serialization._write

    def write_half_then_fail(specs, filename, metadata):
        real_write(specs, filename, metadata)
        with open(filename, "r+b") as f:
            f.truncate(os.path.getsize(filename) // 2)
        raise failure

    monkeypatch.setattr(serialization, "_write", write_half_then_fail)
    with pytest.raises(type(failure) if isinstance(failure, BaseException) else failure):
        hx.save({"w": hx.zeros(1000)}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["c.safetensors"]
    _assert_same({"w": hx.ones(3)}, hx.load(path))


def test_save_rejects_what_it_cannot_store(tmp_path):
    with pytest.raises(TypeError, match="expected a dict"):
        hx.save(hx.ones(2), tmp_path / "x")
    with pytest.raises(TypeError, match="cannot store object at a.b"):
        hx.save({"a": {"b": object()}}, tmp_path / "x")
    with pytest.raises(ValueError, match="both be stored as 'a.b'"):
        hx.save({"a.b": hx.ones(1), "a": {"b": hx.ones(1)}}, tmp_path / "x")
    with pytest.raises(TypeError, match="tensor 'u'.*complex64 has no Haelixe equivalent"):
        hx.save({"u": np.zeros(2, np.complex64)}, tmp_path / "x")
    assert not os.listdir(tmp_path)


# -- damaged files -----------------------------------------------------------------------
@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "c.safetensors"
    hx.save({"w": hx.arange(16).float(), "b": hx.ones(4).bfloat16()}, path)
    return path


def _header_len(data: bytes) -> int:
    return struct.unpack("<Q", data[:8])[0]


def test_truncated_files(saved):
    data = saved.read_bytes()
    saved.write_bytes(data[:-5])
    with pytest.raises(CheckpointError, match=r"is truncated: its tensors need 72 bytes "
                                              r"after the header but the file holds 67"):
        hx.load(saved)
    saved.write_bytes(data[:60])
    with pytest.raises(CheckpointError, match="is truncated: its header alone needs"):
        hx.load(saved)
    saved.write_bytes(data[:3])
    with pytest.raises(CheckpointError, match="3 bytes, too short for a safetensors file"):
        hx.load(saved)


def test_corrupted_data_fails_its_checksum(saved):
    data = bytearray(saved.read_bytes())
    data[8 + _header_len(data) + 9] ^= 0x40  # one bit inside tensor data
    saved.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"tensor '(w|b)' is corrupted \(CRC-32"):
        hx.load(saved)


def test_corrupted_header(saved):
    data = bytearray(saved.read_bytes())
    data[8:20] = b"\xff" * 12
    saved.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupted header"):
        hx.load(saved)
    saved.write_bytes(b"\x00\x00\x00\x00\x00\x00\xf0\x7f" + bytes(data[8:]))
    with pytest.raises(CheckpointError, match="plausible safetensors header length"):
        hx.load(saved)


def test_wrong_dtype_in_the_header(saved):
    data = saved.read_bytes()
    n = _header_len(data)
    header = data[8:8 + n].replace(b'"dtype":"F32"', b'"dtype":"I32"')
    assert header != data[8:8 + n]
    saved.write_bytes(data[:8] + header + data[8 + n:])
    with pytest.raises(CheckpointError, match=r"tensor 'w' is stored as int32 \[16\] but was "
                                              r"saved as float32 \[16\]"):
        hx.load(saved)


def test_dtype_haelixe_has_no_type_for(tmp_path):
    # (a float8 tensor, as safetensors writes one: its 8-byte header length, the header)
    header = json.dumps({"img": {"dtype": "F8_E5M2", "shape": [4], "data_offsets": [0, 4]}})
    header = header.encode().ljust(-(-len(header) // 8) * 8)
    (tmp_path / "u.st").write_bytes(struct.pack("<Q", len(header)) + header + bytes(4))
    with pytest.raises(CheckpointError, match="'img' has dtype F8_E5M2, which Haelixe has "
                                              "no type for"):
        hx.load(tmp_path / "u.st")


# -- resume ------------------------------------------------------------------------------
RESUME = textwrap.dedent("""
    import sys
    import haelixe as hx
    from haelixe.data import DataLoader, MemmapDataset
    from haelixe.denoise import Denoiser
    from haelixe.nn import functional as F
    from haelixe.optim import AdamW

    data, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    resume_from = sys.argv[4] if len(sys.argv) > 4 else None
    hx.manual_seed(123 if resume_from else 0)  # a resumed run must not depend on it
    model = Denoiser(dim=16, heads=2)
    opt = AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    loader = DataLoader(MemmapDataset(data), 8, shuffle=True, drop_last=True, seed=5)
    if resume_from:
        ck = hx.load(resume_from)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        loader.load_state_dict(ck["data"])
    done = 0
    while done < steps:
        for x, y in loader:
            opt.zero_grad()
            F.mse_loss(model(x), y).backward()
            opt.step()
            done += 1
            if done == steps:
                break  # mid-epoch: the loader's position records it
    hx.save({"model": model.state_dict(), "optim": opt.state_dict(),
             "data": loader.state_dict()}, out)
""")


def test_resume_in_a_fresh_process_is_bit_identical(tmp_path):
    from haelixe.data import write_sine_dataset

    write_sine_dataset(tmp_path / "sine", n=40, seed=0)  # 5 batches of 8 per epoch
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")

    def run(*args):
        r = subprocess.run([sys.executable, "-c", RESUME, str(tmp_path / "sine"),
                            *map(str, args)], capture_output=True, text=True, env=env,
                           timeout=120)
        assert r.returncode == 0, r.stderr

    n, m = 7, 6  # stop inside epoch 1, finish inside epoch 2
    run(n + m, tmp_path / "full.st")
    run(n, tmp_path / "half.st")
    run(m, tmp_path / "resumed.st", tmp_path / "half.st")
    full, resumed = hx.load(tmp_path / "full.st"), hx.load(tmp_path / "resumed.st")
    half = hx.load(tmp_path / "half.st")
    steps_of = [float(ck["optim"]["state"][0]["step"]) for ck in (full, resumed)]
    assert steps_of == [n + m, n + m]
    assert full["data"] == resumed["data"]
    for part in ("model", "optim"):
        state_f = full[part] if part == "model" else _flat_state(full[part]["state"])
        state_r = resumed[part] if part == "model" else _flat_state(resumed[part]["state"])
        assert state_f.keys() == state_r.keys()
        for k in state_f:
            assert np.array_equal(_bits(state_f[k].numpy()), _bits(state_r[k].numpy())), k
    # and training did move the weights after the half-way checkpoint
    assert not np.array_equal(half["model"]["head.weight"].numpy(),
                              full["model"]["head.weight"].numpy())


def _flat_state(state: dict) -> dict:
    """An optimizer's per-parameter state as one dict of tensors, (index, name) keyed."""
    return {(i, n): t for i, entry in state.items() for n, t in entry.items()}


# -- issue 14: integrity, memory, errors, permissions ------------------------------------
def _with_step(tmp_path):
    path = tmp_path / "c.safetensors"
    hx.save({"model": {"w": hx.arange(6).float(), "b": hx.ones(2)}, "step": 1000}, path)
    return path, path.read_bytes()


def _one_byte(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) == 1 and len(old) == len(new)
    return data.replace(old, new)


def test_item09_header_flip_is_detected(tmp_path):
    path, data = _with_step(tmp_path)
    ref = hx.load(path)
    # the three that used to load different data: the format marker, a step count, a name
    for old, new in [(b'"format":"haelixe"', b'"format":"haelixf"'),
                     (b'\\"step\\": 1000', b'\\"step\\": 9000'),
                     (b'"model.w":{', b'"model.x":{')]:
        path.write_bytes(_one_byte(data, old, new))
        with pytest.raises(CheckpointError, match="checksum|metadata|tensor"):
            hx.load(path)
    # and three bits of every byte: never other data, always CheckpointError here
    path.write_bytes(data)
    for i in range(len(data)):
        for mask in (0x01, 0x20, 0x80):
            filedamage.write_byte(path, i, data[i] ^ mask)
            with pytest.raises(CheckpointError):
                hx.load(path)
        filedamage.write_byte(path, i, data[i])
    assert filedamage.same(ref, hx.load(path))


def test_item09_metadata_as_a_tensor_name_is_refused_before_writing(tmp_path):
    path = tmp_path / "c.safetensors"
    hx.save({"w": hx.ones(3)}, path)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="cannot be stored under the name '__metadata__'"):
        hx.save({"__metadata__": hx.zeros(2)}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["c.safetensors"]
    hx.save({"__metadata__": {"x": hx.zeros(2)}}, path)  # a nested name is fine
    assert filedamage.same(hx.load(path), {"__metadata__": {"x": hx.zeros(2)}})


def test_item09_the_file_stays_standard_safetensors(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file

    path, _ = _with_step(tmp_path)
    with safetensors.safe_open(path, framework="np") as f:
        meta = f.metadata()
    assert meta["haelixe.version"] == serialization.VERSION and len(meta[DIGEST]) == 64
    t = load_file(str(path))
    assert torch.equal(t["model.w"], torch.arange(6).float())


def test_item09_version_1_files_still_load_but_cannot_pose_as_them(tmp_path):
    path, data = _with_step(tmp_path)
    header, rest = filedamage.split_checkpoint(data)
    meta = header[filedamage.META]
    del meta[DIGEST]
    meta["haelixe.version"] = "1"
    path.write_bytes(filedamage.compose_checkpoint(header, rest))
    assert hx.load(path)["step"] == 1000  # as the previous release wrote them
    # a version-2 file whose version byte was hit keeps its digest key: refused
    path.write_bytes(_one_byte(data, b'"haelixe.version":"2"', b'"haelixe.version":"1"'))
    with pytest.raises(CheckpointError, match="damaged Haelixe metadata"):
        hx.load(path)


def test_item13_load_peaks_near_the_file_size(tmp_path):
    import tracemalloc

    rng = np.random.default_rng(0)
    path = tmp_path / "big.safetensors"
    hx.save({"layers": [{"w": rng.standard_normal((512, 1024), dtype=np.float32)}
                        for _ in range(12)], "step": 3}, path)  # 24 MiB
    size = os.path.getsize(path)
    tracemalloc.start()
    try:
        back = hx.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert back["layers"][11]["w"].shape == (512, 1024)
    assert size <= peak < 1.2 * size, f"load peaked at {peak / size:.2f}x the file size"


_CRAFTED = {  # header edits a crafted (re-signed) file may carry
    "header is a list": lambda h: [h],
    "metadata not strings": lambda h: {**h, "__metadata__": {**h["__metadata__"], "x": 1}},
    "entry is a list": lambda h: {**h, "model.w": [1, 2]},
    "shape holds a bool": lambda h: {**h, "model.w": {**h["model.w"], "shape": [True] * 1}},
    "offsets are strings": lambda h: {**h, "model.w": {**h["model.w"],
                                                       "data_offsets": ["0", "24"]}},
    "offsets overlap": lambda h: {**h, "model.w": {**h["model.w"], "data_offsets":
                                                   [0, 24]}},
    "huge shape": lambda h: {**h, "model.w": {**h["model.w"], "shape": [2**62, 2**62]}},
    "deep entry": lambda h: {**h, "model.w": json.loads("[" * 900 + "]" * 900)},
    "tree of a bad marker": lambda h: filedamage.with_tree(h, {"__dict__": 5}),
    "tree of a pair of 3": lambda h: filedamage.with_tree(h, {"__dict__": [[1, 2, 3]]}),
    "tree of an unknown dtype": lambda h: filedamage.with_tree(h, {"__dtype__": [1]}),
    "tree of a missing tensor": lambda h: filedamage.with_tree(h, {"__tensor__": "nope"}),
    "tree too deep": lambda h: filedamage.with_tree(h, json.loads("[" * 900 + "]" * 900)),
    "tree not a dict": lambda h: filedamage.with_tree(h, [1, 2]),
}


@pytest.mark.parametrize("edit", list(_CRAFTED))
def test_item14_damaged_checkpoint_raises_only_checkpoint_error(tmp_path, edit):
    path, data = _with_step(tmp_path)
    header, rest = filedamage.split_checkpoint(data)
    crafted = _CRAFTED[edit](header)
    path.write_bytes(filedamage.compose_checkpoint(crafted, rest, resign=True))
    with pytest.raises(CheckpointError) as err:
        hx.load(path)
    assert str(err.value).startswith(f"load: {path}") and len(str(err.value)) < 600


@pytest.mark.parametrize("text", [
    '{"a":1,"a":2}', '{"x":NaN}', "[" * 100000, '{"__metadata__":{"format":"haelixe"}}',
    "\udcff", '{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}',
])
def test_item14_raw_header_damage_raises_only_checkpoint_error(tmp_path, text):
    path = tmp_path / "c.safetensors"
    path.write_bytes(filedamage.compose_checkpoint(text, b""))
    with pytest.raises(CheckpointError):
        hx.load(path)


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def test_item16_save_follows_the_umask_and_keeps_a_replaced_files_mode(tmp_path, umask_027,
                                                                       monkeypatch):
    path = tmp_path / "c.safetensors"
    hx.save({"w": hx.ones(2)}, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640  # 0o666 & ~0o027
    os.chmod(path, 0o604)
    hx.save({"w": hx.zeros(2)}, path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o604
    # still atomic: a failure part-way leaves the old file and no temporary
    def fail(*args):
        raise OSError("No space left on device")

    monkeypatch.setattr(serialization, "_write", fail)
    with pytest.raises(OSError):
        hx.save({"w": hx.ones(5)}, path)
    assert os.listdir(tmp_path) == ["c.safetensors"] and hx.load(path)["w"].shape == (2,)


def test_item09_save_refuses_what_load_would_refuse_before_writing(tmp_path):
    deep = hx.ones(1)
    for _ in range(99):
        deep = [deep]
    path = tmp_path / "c.safetensors"
    hx.save({"deep": deep}, path)  # 100 levels: kept, and read back
    back = hx.load(path)["deep"]
    for _ in range(99):
        back = back[0]
    assert back.shape == (1,)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="nests deeper than 100 levels"):
        hx.save({"deep": [deep]}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["c.safetensors"]
