"""searchsorted, bucketize, bincount, histc and isin against PyTorch: values and dtypes over
every dtype, N-D sequences, sorters, scalars, NaNs, unsorted sequences (PyTorch's bisection),
views, empty inputs, PyTorch's error for each bad argument (its exception class), and the
GPU (computed on the host, returned on the input's device) against the CPU.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")
# (PyTorch's note that it copies a non-contiguous sequence: the views are the point here)
pytestmark = pytest.mark.filterwarnings("ignore:torch.searchsorted.*non-contiguous")

DTYPES = ["float32", "float64", "bfloat16", "float16", "int32", "int64", "bool", "uint8",
          "int8", "int16"]
NAN = math.nan


def _tensors(a, dtype=None):
    """(Haelixe tensor, PyTorch tensor) of the same values."""
    t = torch.tensor(a) if dtype is None else torch.tensor(a).to(getattr(torch, dtype))
    h = hx.tensor(t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy(),
                  dtype=getattr(hx, str(t.dtype)[6:]))
    return h, t


def _on(lib, value):
    """``value`` (a pair from _tensors, or anything else) for one library."""
    return value[0 if lib is hx else 1] if isinstance(value, tuple) else value


def same(op, *args, **kwargs):
    """hx.op and torch.op on the same arguments (pairs from _tensors): the same values,
    dtype and shape, or PyTorch's exception class raised by both."""
    try:
        want = getattr(torch, op)(*(_on(torch, a) for a in args),
                                  **{k: _on(torch, v) for k, v in kwargs.items()})
    except Exception as e:  # noqa: BLE001 (its class is what Haelixe must raise)
        with pytest.raises(type(e)):
            getattr(hx, op)(*(_on(hx, a) for a in args),
                            **{k: _on(hx, v) for k, v in kwargs.items()})
        return None
    got = getattr(hx, op)(*(_on(hx, a) for a in args), **{k: _on(hx, v) for k, v in kwargs.items()})
    assert got.dtype.name == str(want.dtype)[6:], f"{op}: {got.dtype} against {want.dtype}"
    assert got.shape == tuple(want.shape), f"{op}: {got.shape} against {tuple(want.shape)}"
    assert not got.requires_grad
    w = want.float().numpy() if want.dtype == torch.bfloat16 else want.numpy()
    np.testing.assert_array_equal(got.float().numpy() if got.dtype is hx.bfloat16
                                  else got.numpy(), w, err_msg=op)
    return got


# -- searchsorted and bucketize ------------------------------------------------------------------
SEQUENCE = [0, 1, 1, 2, 3, 3, 3, 4]
VALUES = [[-1, 0, 1, 5], [3, 2, 4, 1]]


@pytest.mark.parametrize("dtype", DTYPES)
def test_searchsorted_on_every_dtype(dtype):
    for right in (False, True):
        for out_int32 in (False, True):
            same("searchsorted", _tensors(SEQUENCE, dtype), _tensors(VALUES, dtype),
                 right=right, out_int32=out_int32)
    same("bucketize", _tensors(VALUES, dtype), _tensors(SEQUENCE, dtype), right=True)


def test_searchsorted_sides_scalars_and_shapes():
    seq = _tensors([1.0, 2.0, 2.0, 3.0, 5.0])
    values = _tensors([[0.0, 2.0, 2.5, 9.0], [NAN, 5.0, 1.0, -1.0]])
    for kwargs in ({}, {"right": True}, {"side": "right"}, {"side": "left"},
                   {"side": "right", "right": True}, {"side": "right", "right": False}):
        assert same("searchsorted", seq, values, **kwargs) is not None
    for value in (2.5, 2, -1, 9.0, True):
        assert same("searchsorted", seq, value).shape == ()
    assert same("searchsorted", seq, _tensors(2.0)).shape == ()
    for dtype in ("int64", "uint8"):  # (a number in the sequence's dtype: 300 wraps to 44)
        for value in (2.5, -1, 300):
            same("searchsorted", _tensors([1, 2, 3, 44, 255], dtype), value, right=True)
    nd = _tensors([[1.0, 3.0, 3.0], [2.0, 4.0, 6.0]])
    same("searchsorted", nd, _tensors([[2.0, 3.0, 5.0, 0.0], [0.0, 4.0, 3.0, 7.0]]))
    same("searchsorted", nd, _tensors([[3.0], [4.0]]), right=True)
    same("searchsorted", _tensors(np.arange(24.0).reshape(2, 3, 4)),
         _tensors(np.linspace(-1, 25, 12).reshape(2, 3, 2)))
    for s, v in (((0,), (3,)), ((5,), (0, 2)), ((2, 0), (2, 3)), ((2, 3), (2, 0)),
                 ((0, 3), (0, 2))):
        same("searchsorted", _tensors(np.zeros(s)), _tensors(np.ones(v)))


def test_searchsorted_mixed_dtypes_promote_as_pytorch():
    for seq_dtype, value_dtype in (("float16", "float32"), ("int32", "float64"),
                                   ("uint8", "int8"), ("bool", "int64"), ("int16", "bfloat16")):
        same("searchsorted", _tensors([0, 1, 2, 3, 100], seq_dtype),
             _tensors([-1.0, 0.5, 2.0, 2.0001, 99.5], value_dtype))


def test_searchsorted_nans_and_unsorted_sequences_follow_pytorchs_bisection():
    for seq in ([1.0, 2.0, NAN], [1.0, 2.0, NAN, NAN], [NAN, 1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0,
                                                                         0.0, 7.0]):
        for right in (False, True):
            same("searchsorted", _tensors(seq), _tensors([NAN, -1.0, 0.5, 1.5, 2.5, 3.0, 8.0]),
                 right=right)
    r = np.random.default_rng(0)
    for n in (1, 2, 7, 16, 33):  # (any sequence: the result is the bisection's, not a sort's)
        seq = r.integers(0, 6, n).astype(np.float64)
        same("searchsorted", _tensors(seq), _tensors(r.integers(-1, 7, 20).astype(np.float64)))
        same("searchsorted", _tensors(np.sort(seq)), _tensors(np.arange(-1.0, 7.0, 0.5)),
             side="right")


def test_searchsorted_with_a_sorter():
    seq = _tensors([3.0, 1.0, 2.0, 2.0, 9.0])
    sorter = _tensors([1, 2, 3, 0, 4])
    for right in (False, True):
        same("searchsorted", seq, _tensors([2.5, 0.0, 2.0, 10.0]), sorter=sorter, right=right)
    nd = _tensors([[3.0, 1.0, 2.0], [0.0, 9.0, 4.0]])
    same("searchsorted", nd, _tensors([[2.5, 0.0], [5.0, 0.0]]),
         sorter=_tensors([[1, 2, 0], [0, 2, 1]]))
    for bad in ([1, 2, 3, 0], [1, 2, 3, 0, 7], [1, 2, 3, 0, -1], [1.0, 2.0, 3.0, 0.0, 4.0]):
        same("searchsorted", seq, _tensors([1.0]), sorter=_tensors(bad))
    same("searchsorted", seq, _tensors([1.0]), sorter=_tensors([1, 2, 3, 0, 4], "int32"))


def test_searchsorted_on_views():
    h, t = _tensors(np.arange(24.0).reshape(4, 6) * 0.5)  # (rows and columns sorted)
    vh, vt = _tensors(np.linspace(-1.0, 13.0, 12).reshape(2, 6))
    same("searchsorted", (h.T, t.T), (vh.T, vt.T))
    same("searchsorted", (h[::2, 1:], t[::2, 1:]), (vh[:, 1:], vt[:, 1:]), right=True)
    same("searchsorted", (h[1, ::2], t[1, ::2]), (vh.T.flip(0), vt.T.flip(0)))
    same("bucketize", (vh.T, vt.T), (h[2, ::2], t[2, ::2]))


def test_searchsorted_and_bucketize_refuse_what_pytorch_refuses():
    seq, values = _tensors([1.0, 2.0, 3.0]), _tensors([1.5])
    same("searchsorted", seq, values, side="middle")
    same("searchsorted", seq, values, side="left", right=True)
    same("searchsorted", _tensors(1.0), values)
    same("searchsorted", _tensors([[1.0, 2.0]]), 1.5)
    same("searchsorted", _tensors([[1.0, 2.0], [3.0, 4.0]]), _tensors([[2.0, 3.0]]))
    same("searchsorted", _tensors([[1.0, 2.0], [3.0, 4.0]]), _tensors([2.0, 3.0]))
    same("searchsorted", _tensors([True, False]), _tensors([True]))
    same("searchsorted", seq, [1.0, 2.0])
    same("searchsorted", [1.0, 2.0], values)
    same("bucketize", values, _tensors([[1.0, 3.0]]))
    same("bucketize", values, _tensors(1.0))
    same("bucketize", _tensors([True]), _tensors([False, True]))
    for value in (4, 4.5):
        assert same("bucketize", value, _tensors([1, 3, 5, 7, 9])).shape == ()
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        hx.searchsorted(seq[0], values[0], side="left", right=True)


# -- bincount ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_bincount_on_every_dtype(dtype):
    x = _tensors([0, 1, 1, 3, 0, 4], dtype)
    same("bincount", x)
    same("bincount", x, minlength=8)
    same("bincount", x, _tensors([0.5, 1.0, 2.0, 3.0, 0.25, 1.5], dtype))  # (as weights too)


def test_bincount_weights_lengths_and_empty_inputs():
    x = _tensors([0, 2, 2, 7, 3])
    same("bincount", x, minlength=3)
    same("bincount", x, minlength=0)
    for w in ([0.5, 1.0, 2.0, 3.0, 4.0], [1, 2, 3, 4, 5]):
        for dtype in ("float32", "float64", "int64", "float16", "bfloat16", "bool", "uint8"):
            same("bincount", x, _tensors(w, dtype), minlength=10)
    empty = _tensors(np.zeros(0, np.int64))
    same("bincount", empty)
    same("bincount", empty, minlength=3)
    same("bincount", empty, _tensors(np.zeros(0, np.float32)), minlength=2)
    same("bincount", input=x, weights=None, minlength=1)
    r = np.random.default_rng(1)
    values, weights = r.integers(0, 40, 1000), r.standard_normal(1000)
    got = hx.bincount(hx.tensor(values), hx.tensor(weights, dtype=hx.float32))
    want = torch.bincount(torch.tensor(values), torch.tensor(weights, dtype=torch.float32))
    assert got.dtype is hx.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(hx.tensor(values).bincount(minlength=50).numpy(),
                                  torch.tensor(values).bincount(minlength=50).numpy())


def test_bincount_refuses_what_pytorch_refuses():
    x = _tensors([0, 1, 1])
    same("bincount", _tensors([0, -1]))
    same("bincount", _tensors([0, -2], "int8"))
    same("bincount", _tensors([[0, 1]]))
    same("bincount", _tensors(2))
    same("bincount", _tensors([0.0, 1.0]))
    same("bincount", _tensors([True, False]))
    same("bincount", x, minlength=-1)
    same("bincount", x, minlength=2.0)
    same("bincount", x, _tensors([1.0, 2.0]))
    same("bincount", x, _tensors(np.ones((3, 1))))
    same("bincount", x, [1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="non-negative integral"):
        hx.bincount(hx.tensor([0, -1]))


# -- histc ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_histc_on_every_dtype(dtype):
    x = _tensors([1.0, 2.0, 1.0, 4.0, 2.5, 0.0], dtype)
    same("histc", x, bins=4)
    same("histc", x, bins=5, min=0.5, max=3)


def test_histc_puts_each_element_in_pytorchs_bin():
    r = np.random.default_rng(2)
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        for bins in (1, 3, 10, 97, 1000):
            for lo, hi in ((0.0, 1.0), (-2.5, 7.0), (0.1, 0.7), (0.0, 0.0)):
                # (on the bin edges too, where a rounding decides the bin; fewer than
                # 256 in a bin, see the next test)
                edges = np.linspace(lo, hi, bins + 1) if lo < hi else []
                data = np.concatenate([r.uniform(lo - 0.5, hi + 0.5, 200), edges, [lo, hi]])
                same("histc", _tensors(data, dtype), bins=bins, min=lo, max=hi)
    same("histc", _tensors([1.0, 2.0, 1.0, 4.0, 2.5, NAN]), bins=4, min=0, max=4)
    same("histc", _tensors([-1.0, 0.0, 3.0, 4.0]), bins=3, min=0, max=3)
    same("histc", _tensors([2.0, 2.0]), bins=4)
    same("histc", _tensors(1.0), bins=3)
    same("histc", _tensors(np.zeros(0)), bins=3)
    same("histc", _tensors(np.zeros(0)), bins=3, min=1, max=2)
    same("histc", _tensors([1.0, 5.0]), bins=4, min=2, max=2)
    same("histc", _tensors([[1.0, 2.0], [3.0, 4.0]]), bins=3)
    h, t = _tensors(np.arange(12.0).reshape(3, 4))
    same("histc", (h.T[::2], t.T[::2]), bins=5)
    np.testing.assert_array_equal(h.histc(3, 0, 3).numpy(), t.histc(3, 0, 3).numpy())
    same("histc", (h, t), bins=3, min=(hx.tensor(0.0), torch.tensor(0.0)), max=3)


def test_histc_counts_16_bit_inputs_exactly():
    # PyTorch's CPU kernel adds the counts of a 16-bit input in that dtype, so a bin stops
    # growing at 256 per thread (bfloat16) or 2048 (float16): a difference on purpose, as
    # the count is then the thread split's, not the data's
    for dtype in (hx.bfloat16, hx.float16):
        counts = hx.histc(hx.ones(5000, dtype=dtype), bins=2, min=0, max=2)
        exact = hx.tensor(5000.0).to(dtype).item()  # (rounded once: 4992 in bfloat16)
        assert counts.dtype is dtype and counts.float().numpy().tolist() == [0.0, exact]
        assert torch.histc(torch.ones(5000, dtype=getattr(torch, dtype.name)), bins=2, min=0,
                           max=2)[1].item() < exact


def test_histc_refuses_what_pytorch_refuses():
    y = _tensors([1.0, 2.0, NAN])
    same("histc", y, bins=4)
    same("histc", _tensors([1.0, math.inf]), bins=4)
    same("histc", y, bins=0)
    same("histc", y, bins=3.0)
    same("histc", y, bins=3, min=3, max=1)
    same("histc", y, bins=3, min=0, max=math.inf)
    same("histc", y, bins=3, min=NAN, max=1)
    same("histc", _tensors([1, 2]), bins=3)
    with pytest.raises(RuntimeError, match=r"range of \[nan, nan\] is not finite"):
        hx.histc(y[0], bins=4)


# -- isin ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_isin_on_every_dtype(dtype):
    e, t = _tensors([[1, 2], [3, 4]], dtype), _tensors([2, 3, 9], dtype)
    for invert in (False, True):
        same("isin", e, t, invert=invert)
        same("isin", e, t, assume_unique=True, invert=invert)
    same("isin", e, 2)


def test_isin_numbers_nans_zeros_and_mixed_dtypes():
    e = _tensors([[1, 2], [3, 4]])
    for test in (2, 2.0, 2.5, 300):
        for invert in (False, True):
            same("isin", e, test, invert=invert)
    for element in (2, 2.0, 2.5):
        assert same("isin", element, _tensors([2, 3])).shape == ()
    same("isin", _tensors([255], "uint8"), _tensors([-1], "int8"))
    same("isin", _tensors([255], "uint8"), 255)
    same("isin", _tensors([1], "uint8"), 257)  # (a number in the tensor's dtype: it wraps)
    same("isin", _tensors([1, 2]), _tensors([1.0, 2.5]))
    same("isin", _tensors([1.0, 2.0]), _tensors(2.0))
    same("isin", _tensors([1, 2]), _tensors(2.5, "float64"))
    same("isin", _tensors([NAN, 1.0, -0.0, 0.0]), _tensors([NAN, 1.0, 0.0]))
    same("isin", _tensors([NAN]), NAN)
    same("isin", _tensors(1.5, "float16"), _tensors([1.5, 3.0]))
    same("isin", _tensors(np.zeros((0, 2))), _tensors([1.0]))
    same("isin", _tensors([[1, 2]]), _tensors(np.zeros(0, np.int64)))
    same("isin", _tensors(2), _tensors([[2]]))
    same("isin", elements=e, test_elements=e)
    r = np.random.default_rng(3)
    a, b = r.integers(0, 50, (30, 20)), r.integers(0, 50, 200)
    same("isin", _tensors(a), _tensors(b))
    same("isin", _tensors(a.T), _tensors(b[::3]), invert=True)


def test_isin_refuses_what_pytorch_refuses():
    e = _tensors([[1, 2], [3, 4]])
    same("isin", 2, 3)
    same("isin", e, [2, 3])
    same("isin", _tensors([True, False]), _tensors([True]))
    same("isin", _tensors([1, 0]), _tensors([True]))
    same("isin", _tensors([True, False]), True)
    same("isin", True, _tensors([1, 0]))


# -- on the GPU: computed on the host, returned on the input's device -----------------------------
@pytest.mark.gpu
def test_each_returns_on_the_gpu_with_the_cpus_values(be):
    r = np.random.default_rng(4)
    seq = np.sort(r.standard_normal(9)).astype(np.float32)
    x = r.standard_normal((3, 5)).astype(np.float32)
    ints = r.integers(0, 6, 11)
    calls = [
        lambda d: hx.searchsorted(hx.tensor(seq, device=d), hx.tensor(x, device=d)),
        lambda d: hx.searchsorted(hx.tensor(seq, device=d), 0.25, right=True, out_int32=True),
        lambda d: hx.bucketize(hx.tensor(x, device=d), hx.tensor(seq, device=d)),
        lambda d: hx.bincount(hx.tensor(ints, device=d), minlength=8),
        lambda d: hx.tensor(ints, device=d).bincount(hx.tensor(x.reshape(-1)[:11], device=d)),
        lambda d: hx.histc(hx.tensor(x, device=d), bins=6),
        lambda d: hx.tensor(x, device=d).T.histc(4, -1, 1),
        lambda d: hx.isin(hx.tensor(ints, device=d), hx.tensor(ints[:4], device=d)),
        lambda d: hx.isin(hx.tensor(ints, device=d), 3, invert=True),
    ]
    for i, call in enumerate(calls):
        cpu, gpu = call("cpu"), call("gpu")
        assert gpu.device.type == "gpu" and gpu.dtype is cpu.dtype and gpu.shape == cpu.shape, i
        np.testing.assert_array_equal(gpu.cpu().numpy(), cpu.numpy(), err_msg=str(i))
    with pytest.raises(RuntimeError, match="one device"):
        hx.searchsorted(hx.tensor(seq, device="gpu"), hx.tensor(x))
