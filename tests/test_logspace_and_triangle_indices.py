"""hx.logspace, hx.tril_indices and hx.triu_indices against PyTorch: values and dtypes
(PyTorch's integer logspace truncates its ends first), edge counts, errors, devices."""

from __future__ import annotations

import math

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")

DTYPES = ["float32", "float64", "bfloat16", "float16", "int64", "int32", "int16", "int8",
          "uint8"]


def _same(got, want, tol=0.0):
    assert got.shape == tuple(want.shape), (got.shape, want.shape)
    assert got.dtype.name == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
    g = got.cpu().float().numpy() if got.dtype.is_floating_point else got.cpu().numpy()
    w = want.float().numpy() if want.dtype.is_floating_point else want.numpy()
    np.testing.assert_allclose(g, w, rtol=tol, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("start,end,steps,base", [
    (0.5, 2.7, 4, 10.0), (-3, 3, 7, 10.0), (0, 10, 11, 2), (2.0, -1.5, 6, 3.0),
    (0, 1, 3, -2.0), (1.0, 1.0, 3, 10.0), (0.5, 2.7, 1, 10.0), (0, 2, 0, 10.0),
    (0.25, 1.75, 5, 0.5), (-1, 2, 9, math.e)])
def test_logspace_matches_pytorch(dtype, start, end, steps, base):
    if dtype.startswith(("int", "uint")) and (
            base < 0 or (dtype == "uint8" and start < 0) or
            max(base ** start, base ** end) > np.iinfo(dtype).max):
        pytest.skip("nan or a power beyond the integer dtype: C's undefined cast")
    try:
        want = torch.logspace(start, end, steps, base, dtype=getattr(torch, dtype))
    except RuntimeError:  # (an end outside the dtype's range: -1.5 as uint8)
        with pytest.raises(RuntimeError, match="logspace: value .* without overflow"):
            hx.logspace(start, end, steps, base, dtype=getattr(hx, dtype))
        return
    got = hx.logspace(start, end, steps, base, dtype=getattr(hx, dtype))
    tol = {"float32": 1e-6, "bfloat16": 0.0, "float16": 0.0, "float64": 1e-13}.get(dtype, 0.0)
    _same(got, want, tol)


def test_logspace_defaults_keywords_and_tensor_ends():
    _same(hx.logspace(0, 2, 3), torch.logspace(0, 2, 3))
    _same(hx.logspace(start=-1, end=1, steps=5, base=2.0),
          torch.logspace(start=-1, end=1, steps=5, base=2.0))
    _same(hx.logspace(hx.tensor(0.0), hx.tensor(2.0), 3),
          torch.logspace(torch.tensor(0.0), torch.tensor(2.0), 3))
    x = hx.logspace(0, 1, 4, requires_grad=True)
    assert x.requires_grad and x.grad_fn is None
    with pytest.raises(TypeError):  # (keyword-only, as PyTorch's)
        hx.logspace(0, 1, 4, 10.0, hx.float64)


@pytest.mark.parametrize("call,error,match", [
    (lambda m: m.logspace(0, 1, -1), RuntimeError, "steps must be non-negative"),
    (lambda m: m.logspace(0, 1, 3.0), TypeError, "steps must be an int"),
    (lambda m: m.logspace(0, 1, 3, dtype=m.bool), RuntimeError, "dtype bool"),
    (lambda m: m.logspace(0, 2, 3, dtype=m.int64, requires_grad=True), RuntimeError,
     "floating point"),
])
def test_logspace_refuses_what_pytorch_refuses(call, error, match):
    with pytest.raises((error, NotImplementedError)):
        call(torch)
    with pytest.raises(error, match=match):
        call(hx)


@pytest.mark.parametrize("name", ["tril_indices", "triu_indices"])
@pytest.mark.parametrize("row,col,offset", [(3, 3, 0), (3, 4, 1), (4, 3, -1), (3, 4, -2),
                                            (0, 3, 0), (3, 0, 0), (3, 3, 10), (3, 3, -10),
                                            (1, 5, 2), (5, 1, -3)])
def test_triangle_indices_match_pytorch(name, row, col, offset):
    _same(getattr(hx, name)(row, col, offset), getattr(torch, name)(row, col, offset))
    _same(getattr(hx, name)(row, col, offset=offset, dtype=hx.int32),
          getattr(torch, name)(row, col, offset=offset, dtype=torch.int32))


@pytest.mark.parametrize("name", ["tril_indices", "triu_indices"])
def test_triangle_indices_index_the_triangle_that_tril_and_triu_keep(name):
    r, c = getattr(hx, name)(4, 5, 1)
    x = hx.arange(20).reshape(4, 5)
    kept = (x.tril(1) if name == "tril_indices" else x.triu(1)).numpy()
    mask = np.zeros((4, 5), bool)
    mask[r.numpy(), c.numpy()] = True
    np.testing.assert_array_equal(np.where(mask, x.numpy(), 0), kept)


@pytest.mark.parametrize("name", ["tril_indices", "triu_indices"])
@pytest.mark.parametrize("call,error,match", [
    (lambda f, m: f(-1, 3), RuntimeError, "row must be non-negative"),
    (lambda f, m: f(3, -2), RuntimeError, "col must be non-negative"),
    (lambda f, m: f(3.0, 3), TypeError, "row must be an int"),
    (lambda f, m: f(3, 3, dtype=m.float32), NotImplementedError, "dtype must be int32 or"),
    (lambda f, m: f(3, 3, dtype=m.int16), NotImplementedError, "dtype must be int32 or"),
])
def test_triangle_indices_refuse_what_pytorch_refuses(name, call, error, match):
    with pytest.raises(error):
        call(getattr(torch, name), torch)
    with pytest.raises(error, match=f"{name}: {match}"):
        call(getattr(hx, name), hx)


@pytest.mark.gpu
def test_the_ranges_are_made_on_the_gpu(be):
    for got, want in ((hx.logspace(0, 3, 4, device="gpu"), hx.logspace(0, 3, 4)),
                      (hx.tril_indices(3, 4, device="gpu"), hx.tril_indices(3, 4)),
                      (hx.triu_indices(3, 4, -1, device="gpu"), hx.triu_indices(3, 4, -1))):
        assert got.device.type == "gpu" and got.dtype is want.dtype
        np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
