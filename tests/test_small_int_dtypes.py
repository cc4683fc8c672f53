"""uint8, int8, int16 and PyTorch's limited uint16, uint32, uint64, against PyTorch:
promotion (torch.promote_types and torch.result_type exactly), wrap-around arithmetic,
conversions, the range checks of tensor() and fill, reductions, indexing, checkpoints and
printing; on the GPU (the software adapter here), the widened storage that converts and
moves exactly and refuses the rest."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import haelixe as hx
from haelixe import dtype as hdt

NAMES = [d.name for d in hdt.ALL]
SMALL = ["uint8", "int8", "int16"]
LIMITED = ["uint16", "uint32", "uint64"]
VALUES = {"uint8": [250, 3, 0, 128, 7, 200], "int8": [-128, 5, 127, -3, 0, 100],
          "int16": [30000, -3, -32768, 7, 1, 250]}


def _pair(name, values):
    return hx.tensor(values, dtype=getattr(hx, name)), \
        torch.tensor(values, dtype=getattr(torch, name))


def _same(h, t):
    assert h.dtype.name == str(t.dtype).removeprefix("torch."), (h.dtype, t.dtype)
    assert h.shape == tuple(t.shape)
    assert h.tolist() == t.tolist()


def test_promote_types_is_pytorchs_for_every_pair():
    for a in NAMES:
        for b in NAMES:
            try:
                want = str(torch.promote_types(getattr(torch, a), getattr(torch, b)))
            except RuntimeError:
                with pytest.raises(RuntimeError, match="promotion for uint16, uint32, uint64"):
                    hx.promote_types(getattr(hx, a), getattr(hx, b))
                continue
            assert "torch." + hx.promote_types(getattr(hx, a), getattr(hx, b)).name == want, \
                (a, b)


@pytest.mark.parametrize("case", [
    ("uint8", [1], 1), ("uint8", [1], 2.5), ("uint8", [1], True), ("int8", [1], 1),
    ("uint8", [1], ("int8", 5)), ("int8", [1], ("uint8", 5)), ("uint8", [1], ("int8", [5])),
    ("int16", [1], ("uint8", [5])), ("bool", [True], ("uint8", 5)), ("uint8", [1], ("int64", 9)),
    ("uint8", [1], ("float64", 1.0)), ("int16", [1], ("float16", [1.0])),
    ("uint16", [1], 1), ("uint16", [1], ("int8", 1)), ("int8", [1], ("uint16", 1)),
    ("uint32", [1], 2.5), ("uint64", [1], ("uint64", [1])),
])
def test_result_type_is_pytorchs(case):
    name, values, other = case
    h, t = _pair(name, values)
    ho, to = (_pair(other[0], other[1]) if isinstance(other, tuple) else (other, other))
    assert "torch." + hx.result_type(h, ho).name == str(torch.result_type(t, to))
    _same(h * ho, t * to)


@pytest.mark.parametrize("name", ["uint16", "uint32", "uint64"])
@pytest.mark.parametrize("other", ["bool", "uint8", "int8", "int32", "int64"])
def test_limited_dtypes_promote_only_with_themselves_and_floats(name, other):
    h = hx.tensor([1, 2], dtype=getattr(hx, name))
    with pytest.raises(RuntimeError, match=f"attempted to promote {name} and {other}"):
        h * hx.tensor([1, 1], dtype=getattr(hx, other))
    _same(h * hx.tensor([0.5, 2.0]), torch.tensor([1, 2], dtype=getattr(torch, name)) *
          torch.tensor([0.5, 2.0]))


_OPS = {
    "add": lambda m, x, y: x + y, "add_int": lambda m, x, y: x + 300,
    "add_neg": lambda m, x, y: x + (-1), "add_huge": lambda m, x, y: x + 2 ** 40,
    "sub": lambda m, x, y: x - y, "mul": lambda m, x, y: x * y, "neg": lambda m, x, y: -x,
    "floordiv": lambda m, x, y: x // 3, "rem": lambda m, x, y: x % 7,
    "div": lambda m, x, y: x / 3, "pow": lambda m, x, y: x ** 2, "abs": lambda m, x, y: x.abs(),
    "and": lambda m, x, y: x & y, "xor": lambda m, x, y: x ^ y, "not": lambda m, x, y: ~x,
    "shl": lambda m, x, y: x << 3, "shr": lambda m, x, y: x >> 1,
    "lt": lambda m, x, y: x < y, "eq_wrapped": lambda m, x, y: x == -253,
    "max": lambda m, x, y: x.max(), "argmax": lambda m, x, y: x.argmax(),
    "sum": lambda m, x, y: x.sum(), "sum_dtype": lambda m, x, y: x.sum(dtype=x.dtype),
    "prod": lambda m, x, y: x.prod(), "cumsum": lambda m, x, y: x.cumsum(0),
    "any": lambda m, x, y: x.any(), "all": lambda m, x, y: x.all(),
    "sort_desc": lambda m, x, y: x.sort(descending=True, stable=True).indices,
    "topk": lambda m, x, y: x.topk(2).values, "mm": lambda m, x, y: x.view(2, 3) @ y.view(3, 2),
    "mixed_uint8": lambda m, x, y: x + y.to(m.uint8),
    "mixed_int8": lambda m, x, y: x + y.to(m.int8),
    "iadd": lambda m, x, y: x.clone().add_(1000), "where": lambda m, x, y: m.where(x > y, x, -1),
    "float": lambda m, x, y: x.float(), "byte": lambda m, x, y: x.byte(),
    "char": lambda m, x, y: x.char(), "short": lambda m, x, y: x.short(),
}


@pytest.mark.parametrize("name", SMALL)
def test_ops_wrap_as_pytorchs(name):
    x, tx = _pair(name, VALUES[name])
    y, ty = _pair(name, VALUES[name][::-1])
    for op, f in _OPS.items():
        got, want = f(hx, x, y), f(torch, tx, ty)
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), op
        assert got.tolist() == want.tolist(), op


@pytest.mark.parametrize("values, name", [
    ([-1], "uint8"), ([-255], "uint8"), ([-256], "uint8"), ([256], "uint8"), ([-129], "int8"),
    ([1.5], "uint8"), ([-1.5], "uint8"), ([255.5], "uint8"), ([float("nan")], "int32"),
    ([-1], "uint16"), ([2 ** 64 - 1], "uint64"), ([-1], "uint64"), ([2 ** 63 + 5, 3], "uint64"),
    ([True, False], "int8"), ([[1, 2], [3, 4]], "int16"), ([], "uint8"),
])
def test_tensor_checks_python_numbers_as_pytorch(values, name):
    try:
        want = torch.tensor(values, dtype=getattr(torch, name))
    except (RuntimeError, OverflowError):
        with pytest.raises(RuntimeError, match=f"cannot be converted to {name}"):
            hx.tensor(values, dtype=getattr(hx, name))
        return
    _same(hx.tensor(values, dtype=getattr(hx, name)), want)


def test_fill_and_full_wrap_negative_ints_into_unsigned_as_pytorch():
    for m in (hx, torch):
        assert m.full((2,), -1, dtype=m.uint8).tolist() == [255, 255]
        assert m.zeros(2, dtype=m.uint8).fill_(-1).tolist() == [255, 255]
    with pytest.raises(RuntimeError, match="300 cannot be converted to uint8"):
        hx.full((2,), 300, dtype=hx.uint8)


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "uint16", "uint32", "uint64"])
def test_conversions_both_ways(name):
    src, want = _pair("int64", [300, -200, 70000, 5])
    _same(src.to(getattr(hx, name)), want.to(getattr(torch, name)))
    f, tf = _pair("float32", [1.7, 100.5, 0.0])
    _same(f.to(getattr(hx, name)), tf.to(getattr(torch, name)))
    back, tback = _pair(name, [0, 7, 100])
    for other in ("float32", "float16", "bfloat16", "int64", "int8", "bool"):
        _same(back.to(getattr(hx, other)), tback.to(getattr(torch, other)))


def test_methods_names_and_legacy_types():
    x = hx.tensor([1.9, -2.5, 300.0])
    assert x.byte().dtype is hx.uint8 and x.char().dtype is hx.int8
    assert x.short().dtype is hx.int16 and hx.short is hx.int16
    assert hx.uint8.is_signed is False and hx.int8.is_signed and hx.uint8.itemsize == 1
    assert isinstance(hx.ByteTensor([1, 2]), hx.ByteTensor)
    assert hx.CharTensor([1, -2]).dtype is hx.int8 and hx.ShortTensor(2).dtype is hx.int16
    assert x.byte().type() == "torch.ByteTensor"
    assert hx.tensor([1], dtype=hx.uint16).type() == "torch.UInt16Tensor"
    assert not hasattr(torch, "UInt16Tensor") and "UInt16Tensor" not in dir(hx)
    assert hx.can_cast(hx.int8, hx.uint8) and not hx.can_cast(hx.float32, hx.uint8)
    assert repr(hx.tensor([1, 255], dtype=hx.uint8)) == "tensor([  1, 255], dtype=hx.uint8)"
    assert repr(hx.tensor(-3, dtype=hx.int16)) == "tensor(-3, dtype=hx.int16)"


def test_limited_dtypes_compute_where_pytorch_does():
    for name in LIMITED:
        x, t = _pair(name, [2 ** 15 + 3, 3, 0])
        for f in (lambda m, a: a * a, lambda m, a: a == a, lambda m, a: a & a,
                  lambda m, a: a.sum(), lambda m, a: a.float() / 2, lambda m, a: a / 2,
                  lambda m, a: m.cat([a, a]), lambda m, a: a.sort().values,
                  lambda m, a: a[m.tensor([2, 0])], lambda m, a: a.cumsum(0)):
            _same(f(hx, x), f(torch, t))


def test_a_uint8_index_is_a_mask_and_int16_is_refused():
    x, t = _pair("int64", [1, 2, 3])
    with pytest.warns(UserWarning, match="uint8 is deprecated"):
        got = x[hx.tensor([1, 0, 1], dtype=hx.uint8)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(got, t[torch.tensor([1, 0, 1], dtype=torch.uint8)])
    with pytest.raises(IndexError, match="int64, int32, uint8 or bool.*got int16"):
        x[hx.tensor([1, 0], dtype=hx.int16)]


def test_interpolate_nearest_of_a_uint8_image_and_bilinear_refused():
    img = np.random.default_rng(0).integers(0, 256, (1, 3, 5, 7), dtype=np.uint8)
    for mode in ("nearest", "nearest-exact"):
        _same(hx.nn.functional.interpolate(hx.tensor(img), size=(8, 4), mode=mode),
              torch.nn.functional.interpolate(torch.tensor(img), size=(8, 4), mode=mode))
    with pytest.raises(TypeError, match="'bilinear' is not defined for uint8.*float"):
        hx.nn.functional.interpolate(hx.tensor(img), size=(8, 4), mode="bilinear")


def test_descending_sort_of_every_integers_least_value():
    for name, v in (("int8", [-128, 2, 127, 2]), ("int32", [-2 ** 31, 2, 2 ** 31 - 1, 2]),
                    ("int64", [-2 ** 63, 2, 2 ** 63 - 1, 2]), ("uint8", [0, 255, 3, 3])):
        h, t = _pair(name, v)
        got, want = h.sort(descending=True, stable=True), t.sort(descending=True, stable=True)
        _same(got.values, want.values)
        _same(got.indices, want.indices)


def test_checkpoints_round_trip_and_read_pytorchs_safetensors(tmp_path):
    ts = {n: hx.tensor(v, dtype=getattr(hx, n)) for n, v in (
        ("uint8", [0, 255]), ("int8", [-128, 127]), ("int16", [-32768, 32767]),
        ("uint16", [65535, 1]), ("uint32", [2 ** 32 - 1, 1]), ("uint64", [2 ** 64 - 1, 1]))}
    hx.save(ts, tmp_path / "a.safetensors")
    back = hx.load(tmp_path / "a.safetensors")
    for k, v in load_file(tmp_path / "a.safetensors").items():  # PyTorch reads them
        _same(ts[k], v)
        assert back[k].dtype is ts[k].dtype and back[k].tolist() == ts[k].tolist()
    save_file({k: torch.tensor(v.tolist(), dtype=getattr(torch, k)) for k, v in ts.items()},
              tmp_path / "t.safetensors")
    for k, v in hx.load(tmp_path / "t.safetensors").items():  # and Haelixe PyTorch's
        assert v.dtype is ts[k].dtype and v.tolist() == ts[k].tolist()


# -- the GPU: widened storage, exact conversions, everything else refused ----------------
@pytest.mark.gpu
@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "uint16"])
def test_gpu_moves_converts_and_wraps_exactly(be, name):
    v = {"uint8": [0, 255, 7, 128], "int8": [-128, 127, -1, 5], "int16": [-32768, 32767, -1, 9],
         "uint16": [0, 65535, 7, 40000]}[name]
    x, t = _pair(name, v)
    g = x.to("gpu")
    assert g.dtype is x.dtype and g.cpu().tolist() == v
    for other in ("float32", "int32", "int64", "bool"):
        _same(g.to(getattr(hx, other)).cpu(), t.to(getattr(torch, other)))
    _same(g.view(2, 2).t().contiguous().cpu(), t.view(2, 2).t().contiguous())
    _same(g.sum().cpu(), t.sum())  # (summed in int64, as PyTorch)
    wide, twide = _pair("int32", [300, -1, 70000, -129])
    _same(wide.to("gpu").to(x.dtype).cpu(), twide.to(t.dtype))
    f, tf = _pair("float32", [3.7, 100.5, 0.0, 1.0])
    _same(f.to("gpu").to(x.dtype).cpu(), tf.to(t.dtype))
    z = g.clone()
    z[0] = 9
    assert z.cpu().tolist() == [9, *v[1:]]
    assert hx.full((2,), 5, dtype=x.dtype, device="gpu").cpu().tolist() == [5, 5]
    with pytest.raises(TypeError, match=f"{name} on the GPU: only conversions.*x.int\\(\\)"):
        g + 1
    with pytest.raises(TypeError, match=f"{name} on the GPU"):
        g.max()


@pytest.mark.gpu
def test_gpu_uint8_image_to_float(be):
    img = hx.tensor(np.arange(48, dtype=np.uint8).reshape(3, 4, 4) * 5)
    got = img.to("gpu").float().div(255).cpu()
    assert np.array_equal(got.numpy(), (img.float() / 255).numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["uint32", "uint64"])
def test_gpu_refuses_uint32_and_uint64(be, name):
    with pytest.raises(TypeError, match=f"dtype {name} is not available on the GPU.*int64"):
        hx.tensor([1], dtype=getattr(hx, name)).to("gpu")
