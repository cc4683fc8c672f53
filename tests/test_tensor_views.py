"""Tensors as layouts over one Storage: views share it, writes through a view reach the
base, numpy interop shares memory, and the public attributes tell the truth."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx


def base_tensor():
    return hx.from_numpy(np.arange(24, dtype=np.float32).reshape(2, 3, 4))


# Every view of the engine core, applied to a (2, 3, 4) base, with the numpy equivalent.
VIEWS = {
    "view": (lambda t: t.view(6, 4), lambda a: a.reshape(6, 4)),
    "view_minus_one": (lambda t: t.view(-1), lambda a: a.reshape(-1)),
    "reshape_viewable": (lambda t: t.reshape(4, 6), lambda a: a.reshape(4, 6)),
    "transpose": (lambda t: t.transpose(0, 2), lambda a: a.transpose(2, 1, 0)),
    "T": (lambda t: t.T, lambda a: a.T),
    "mT": (lambda t: t.mT, lambda a: np.swapaxes(a, -1, -2)),
    "permute": (lambda t: t.permute(1, 2, 0), lambda a: a.transpose(1, 2, 0)),
    "int_index": (lambda t: t[1], lambda a: a[1]),
    "neg_int_index": (lambda t: t[-1, -2], lambda a: a[-1, -2]),
    "slice_step": (lambda t: t[:, ::2, 1::2], lambda a: a[:, ::2, 1::2]),
    "slice_negative_step": (lambda t: t[::-1, 2:0:-1, ::-3], lambda a: a[::-1, 2:0:-1, ::-3]),
    "none_ellipsis": (lambda t: t[None, ..., None, 1], lambda a: a[None, ..., None, 1]),
    "expand": (lambda t: t[:, :1].expand(2, 5, 4), lambda a: np.broadcast_to(a[:, :1], (2, 5, 4))),
    "broadcast_to": (lambda t: t[0, 0].broadcast_to((3, 4)),
                     lambda a: np.broadcast_to(a[0, 0], (3, 4))),
    "unsqueeze": (lambda t: t.unsqueeze(1), lambda a: a[:, None]),
    "squeeze": (lambda t: t[:, :1].squeeze(1), lambda a: a[:, 0]),
    "squeeze_all": (lambda t: t[:1, 1:2].squeeze(), lambda a: a[0, 1]),
    "flip": (lambda t: t.flip(0, 2), lambda a: a[::-1, :, ::-1]),
    "narrow": (lambda t: t.narrow(2, 1, 2), lambda a: a[:, :, 1:3]),
    "split": (lambda t: t.split(2, dim=2)[1], lambda a: a[:, :, 2:4]),
    "split_sections": (lambda t: t.split([1, 2], dim=1)[1], lambda a: a[:, 1:3]),
    "chunk": (lambda t: t.chunk(3, dim=1)[2], lambda a: a[:, 2:3]),
    "as_strided": (lambda t: t.as_strided((3, 3), (4, 1), 1),
                   lambda a: np.lib.stride_tricks.as_strided(a.reshape(-1)[1:], (3, 3),
                                                             (16, 4))),
    "select": (lambda t: t.select(2, 3), lambda a: a[:, :, 3]),
    "unbind": (lambda t: t.unbind(1)[2], lambda a: a[:, 2]),
    "flatten": (lambda t: t.flatten(1), lambda a: a.reshape(2, 12)),
    "unflatten": (lambda t: t.unflatten(2, (2, 2)), lambda a: a.reshape(2, 3, 2, 2)),
    "detach": (lambda t: t.detach(), lambda a: a),
    "contiguous_of_contiguous": (lambda t: t.contiguous(), lambda a: a),
    "view_of_transposed": (lambda t: t.transpose(0, 1).view(3, 2, 2, 2),
                           lambda a: a.transpose(1, 0, 2).reshape(3, 2, 2, 2)),
    "chain": (lambda t: t.flip(1)[:, ::2].transpose(0, 2).unsqueeze(0)[0, 1:],
              lambda a: a[:, ::-1][:, ::2].transpose(2, 1, 0)[1:]),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_shares_storage_and_values(name):
    make_view, reference = VIEWS[name]
    base = base_tensor()
    v = make_view(base)
    assert v.storage is base.storage
    np.testing.assert_array_equal(v.numpy(), reference(base.numpy().copy()))
    # numpy() of the view reads the same buffer: no bytes moved
    if v.numel():
        assert np.shares_memory(v.numpy(), base.numpy())


@pytest.mark.parametrize("name", [n for n in VIEWS if n not in ("expand", "broadcast_to")])
def test_write_through_view_reaches_base(name):
    make_view, reference = VIEWS[name]
    base = base_tensor()
    v = make_view(base)
    before = base.storage.version
    v.mul_(-1.0)
    expected = base_tensor().numpy().copy()
    reference(expected)[...] *= -1  # the same cells, negated in numpy
    np.testing.assert_array_equal(base.numpy(), expected)
    assert base.storage.version > before


def test_setitem_writes_into_base():
    base = base_tensor()
    base[1, ::-2, 0] = hx.tensor([100.0, 200.0])
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a[1, ::-2, 0] = [100.0, 200.0]
    np.testing.assert_array_equal(base.numpy(), a)
    base[0, [0, 2]] = 7.0
    a[0, [0, 2]] = 7.0
    np.testing.assert_array_equal(base.numpy(), a)


@pytest.mark.parametrize("dtype, value", [("float32", 2.7), ("float64", -1e300),
                                          ("float32", 3), ("int64", 27), ("uint8", 255),
                                          ("int8", True), ("float16", 1.1),
                                          ("bfloat16", 1.1),
                                          ("float32", 2 ** 40 + 1), ("int32", 2.9)])
def test_setitem_of_a_number_writes_what_pytorch_writes(dtype, value):
    torch = pytest.importorskip("torch")
    x = hx.zeros(3, 4, dtype=dtype)
    t = torch.zeros(3, 4, dtype=getattr(torch, dtype))
    version = x._storage.version
    t[:, 1] = value
    x[:, 1] = value
    assert x._storage.version == version + 1
    np.testing.assert_array_equal(x.float().numpy() if dtype == "bfloat16" else x.numpy(),
                                  t.float().numpy() if dtype == "bfloat16" else t.numpy())
    leaf = hx.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf[0] = 1.0


def test_in_place_on_expanded_view_is_refused_without_corrupting():
    base = hx.zeros(3)
    for write in (lambda v: v.copy_(hx.ones(2, 3)), lambda v: v.add_(hx.ones(2, 3)),
                  lambda v: v.mul_(2.0), lambda v: v.clamp_(0, 1)):
        with pytest.raises(RuntimeError, match="sharing memory"):
            write(base.expand(2, 3))
    assert base.tolist() == [0.0, 0.0, 0.0]


def test_setitem_of_a_number_through_basic_indexing_writes_the_view_or_refuses():
    """x[:, 0] = v (makemore's blank token) into a contiguous tensor, as PyTorch; into
    an expanded one (elements shared) and into a read-only array, refused untouched."""
    torch = pytest.importorskip("torch")
    a = np.arange(24).reshape(4, 6)
    x, t = hx.tensor(a), torch.tensor(a)
    for key in ((slice(None), 0), (1,), (slice(1, 3), slice(None, None, 2)), (Ellipsis, -1)):
        version = x._storage.version
        x[key] = 27
        t[key] = 27
        assert x._storage.version == version + 1
        np.testing.assert_array_equal(x.numpy(), t.numpy())
    base = hx.zeros(3)
    with pytest.raises(RuntimeError, match="sharing memory"):
        base.expand(2, 3)[:, 0] = 1.0
    with pytest.raises(RuntimeError, match="sharing memory"):
        base.expand(2, 3)[0:2] = 1.0
    assert base.tolist() == [0.0, 0.0, 0.0]
    frozen = np.zeros((2, 3))
    frozen.flags.writeable = False
    with pytest.raises(RuntimeError, match="read-only numpy array"):
        hx.from_numpy(frozen)[:, 0] = 1.0
    assert not frozen.any()


def test_reshape_copies_only_when_no_view_exists():
    base = base_tensor()
    same = base.reshape(3, 8)
    assert same.storage is base.storage
    t = base.transpose(1, 2)
    copied = t.reshape(-1)
    assert copied.storage is not base.storage
    np.testing.assert_array_equal(copied.numpy(), t.numpy().reshape(-1))


def test_contiguous_copies_only_when_needed():
    base = base_tensor()
    assert base.contiguous() is base
    t = base.transpose(0, 1)
    c = t.contiguous()
    assert c.storage is not base.storage and c.is_contiguous()
    np.testing.assert_array_equal(c.numpy(), t.numpy())
    assert c.strides == (8, 4, 1)


def test_integer_array_indexing_copies():
    base = base_tensor()
    picked = base[:, [2, 0, 2]]
    assert picked.storage is not base.storage
    np.testing.assert_array_equal(picked.numpy(), base.numpy()[:, [2, 0, 2]])


def test_layout_attributes():
    base = base_tensor()
    assert base.shape == (2, 3, 4) and isinstance(base.shape, tuple)
    assert base.strides == (12, 4, 1) and base.offset == 0
    assert base.ndim == 3 and base.numel() == 24 and base.is_contiguous()
    v = base[1, :, 1::2]
    assert (v.shape, v.strides, v.offset) == ((3, 2), (4, 2), 13)
    f = base.flip(2)
    assert f.strides == (12, 4, -1) and f.offset == 3 and not f.is_contiguous()
    e = base[:, :1].expand(2, 3, 4)
    assert e.strides == (12, 0, 1)
    assert base.T.strides == (1, 4, 12)
    assert base.dtype is hx.float32 and base.device == hx.Device.cpu() and base.device == "cpu"
    assert base.storage.nbytes == 24 * 4 and base.storage.device is hx.Device.cpu()
    assert base.storage.dtype is hx.float32


def test_from_numpy_shares_memory_both_ways():
    a = np.zeros((3, 4), np.float32)
    t = hx.from_numpy(a)
    a[1, 2] = 5.0
    assert t[1, 2].item() == 5.0
    t[0, 0] = 3.0
    assert a[0, 0] == 3.0
    assert np.shares_memory(t.numpy(), a)


def test_from_numpy_keeps_strides_of_a_strided_array():
    a = np.arange(40, dtype=np.float64).reshape(5, 8)
    s = a[1:, ::-3].T
    t = hx.from_numpy(s)
    np.testing.assert_array_equal(t.numpy(), s)
    assert t.strides == tuple(x // 8 for x in s.strides)
    a[2, 7] = -1.0
    assert t.numpy()[0, 1] == -1.0


@pytest.mark.parametrize("make_array", [
    lambda: np.asfortranarray(np.arange(12.0).reshape(3, 4)),
    lambda: np.asfortranarray(np.arange(12.0).reshape(3, 4))[:, 1:3],
    lambda: np.arange(24.0).reshape(2, 3, 4).transpose(1, 0, 2)[:, :, ::-1],
    lambda: np.broadcast_to(np.arange(3.0), (2, 3)),
    lambda: np.arange(8, dtype=np.float32).view(np.int32)[::2],  # bytes reinterpreted
    lambda: np.arange(10, dtype=np.float64)[::-3],
])
def test_from_numpy_shares_memory_for_any_layout(make_array):
    a = make_array()
    t = hx.from_numpy(a)
    np.testing.assert_array_equal(t.numpy(), a)
    assert np.shares_memory(t.numpy(), a)


def test_numpy_shares_memory_on_cpu():
    t = hx.zeros(2, 3)
    n = t.numpy()
    n[1, 1] = 9.0
    assert t[1, 1].item() == 9.0
    v = t.T
    assert np.shares_memory(v.numpy(), n)


def test_numpy_of_tensor_requiring_grad_is_refused():
    t = hx.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        t.numpy()


# -- dtypes and creation -----------------------------------------------------------------

@pytest.mark.parametrize("a, b, expected", [
    (hx.bfloat16, hx.float32, hx.float32),
    (hx.float16, hx.bfloat16, hx.float32),
    (hx.int64, hx.float16, hx.float16),
    (hx.int32, hx.int64, hx.int64),
    (hx.bool, hx.int32, hx.int32),
    (hx.float32, hx.float64, hx.float64),
])
def test_promotion_table(a, b, expected):
    assert hx.promote_types(a, b) is expected
    assert hx.promote_types(b, a) is expected
    x = hx.ones(2, dtype=a) + hx.ones(2, dtype=b)
    assert x.dtype is expected


def test_scalar_promotion_keeps_width():
    assert (hx.ones(2, dtype=hx.bfloat16) * 2.0).dtype is hx.bfloat16
    assert (hx.ones(2, dtype=hx.float16) + 1).dtype is hx.float16
    assert (hx.arange(3) + 1.5).dtype is hx.float32
    assert (hx.arange(3) * 2).dtype is hx.int64
    assert (hx.arange(3, dtype=hx.int32) / 2).dtype is hx.float32
    assert (hx.arange(3) / hx.arange(1, 4)).dtype is hx.float32
    assert (hx.ones(2) * np.float64(2.0)).dtype is hx.float32
    assert (hx.ones(2) * np.int64(2)).dtype is hx.float32
    assert (2.0 ** hx.arange(3)).dtype is hx.float32


def test_dtype_aliases_and_names():
    assert hx.float is hx.float32 and hx.double is hx.float64 and hx.long is hx.int64
    assert hx.BF16 is hx.bfloat16 and hx.F32 is hx.float32 and hx.I64 is hx.int64
    assert hx.BOOL is hx.bool and hx.F16 is hx.float16 and hx.I32 is hx.int32
    assert hx.zeros(2, dtype="bf16").dtype is hx.bfloat16
    assert hx.tensor([1, 2]).dtype is hx.int64
    assert hx.tensor([1.0]).dtype is hx.float32
    assert hx.tensor([True]).dtype is hx.bool
    assert hx.from_numpy(np.zeros(2)).dtype is hx.float64


def test_to_dtype_and_to_device():
    t = hx.arange(4)
    f = t.to(hx.float32)
    assert f.dtype is hx.float32 and f.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert t.to("cpu") is t and t.to(hx.int64) is t
    b = hx.tensor([1.0, 1.00390625, 3.0]).to(hx.bfloat16)
    assert b.dtype is hx.bfloat16 and b.tolist() == [1.0, 1.0, 3.0]  # rounds to nearest even


def test_creation_functions():
    assert hx.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert hx.ones((2,)).tolist() == [1.0, 1.0]
    assert hx.full((2,), 7).dtype is hx.int64
    assert hx.full((2,), 0.5).tolist() == [0.5, 0.5]
    assert hx.empty(3, 2).shape == (3, 2)
    assert hx.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert hx.arange(1, 2, 0.5).tolist() == [1.0, 1.5]
    hx.manual_seed(3)
    a = hx.rand(3)
    r = hx.randn(2, 2)
    hx.manual_seed(3)
    assert hx.rand(3).tolist() == a.tolist() and hx.randn(2, 2).tolist() == r.tolist()
    assert 0.0 <= a.numpy().min() and a.numpy().max() < 1.0
    t = hx.tensor([[1.0, 2.0]], dtype=hx.float64, requires_grad=True)
    assert t.requires_grad and t.dtype is hx.float64 and t.is_leaf


def test_tensor_copies_its_data():
    a = np.zeros(3, np.float32)
    t = hx.tensor(a)
    a[0] = 1.0
    assert t[0].item() == 0.0


def test_item_tolist_repr():
    t = hx.tensor([[1.5, 2.0], [3.0, 4.0]])
    assert t[0, 0].item() == 1.5 and isinstance(t[0, 0].item(), float)
    assert hx.tensor(3).item() == 3 and isinstance(hx.tensor(3).item(), int)
    assert t.T.tolist() == [[1.5, 3.0], [2.0, 4.0]]
    r = repr(t)
    assert r.startswith("tensor(") and "1.5" in r
    assert "dtype=hx.bfloat16" in repr(t.bfloat16())
    assert "requires_grad=True" in repr(hx.ones(2, requires_grad=True))
    with pytest.raises(ValueError, match="cannot be converted to a Python scalar"):
        t.item()


def test_devices():
    assert hx.Device.cpu() is hx.Device("cpu")
    assert hx.Device.gpu() == "gpu" and hx.Device.cpu() != hx.Device.gpu()
    with pytest.raises(ValueError, match="unknown device"):
        hx.Device("tpu")


def test_to_device_round_trip_keeps_values_and_gradients():
    try:
        hx.zeros(1, device="gpu")
    except Exception as exc:  # no adapter on this machine
        pytest.skip(f"no GPU adapter: {exc}")
    x = hx.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4)).requires_grad_()
    g = x.T.to("gpu")
    assert g.device == "gpu" and g.shape == (4, 3)
    assert g.cpu().tolist() == x.detach().T.tolist()
    (g * g).sum().backward()
    assert x.grad.device == "cpu"
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy())


def test_copied_and_pickled_tensors_get_their_devices_one_backend():
    """A tensor holds its backend: a deep copy or an unpickled tensor must get the
    device's registered backend back, not a second instance of it."""
    import copy
    import pickle

    t = base_tensor().requires_grad_()
    for c in (copy.deepcopy(t), pickle.loads(pickle.dumps(t.detach()))):
        assert c._be is t._be
        assert c._storage is not t._storage
        np.testing.assert_array_equal((c * 2).detach().numpy(), t.detach().numpy() * 2)


def test_an_ops_output_has_every_field_the_constructor_sets():
    """Tensor._wrap sets a fresh contiguous output's fields itself (every op's output
    comes that way): each slot of Tensor and Storage must be set there as _init and
    Storage() set it, so that a field added to them cannot be forgotten on this path."""
    from haelixe.storage import Storage
    from haelixe.tensor import Tensor

    fast = Tensor._wrap(np.arange(6, dtype=np.float32))
    slow = Tensor._wrap(np.arange(12, dtype=np.float32)[::2])  # (strided: _init's path)
    for obj, other, cls in ((fast, slow, Tensor), (fast._storage, slow._storage, Storage)):
        for name in cls.__slots__:
            if name == "__weakref__":
                continue
            assert hasattr(obj, name), f"{cls.__name__}.{name} not set by _wrap"
            if name not in ("_data", "data", "_layout", "nbytes", "_storage"):
                assert getattr(obj, name) == getattr(other, name), name


def test_an_element_picked_by_ints_is_a_view_that_writes_through():
    x = hx.zeros(2, 3)
    v = x[0, 1]
    assert v.shape == () and v.offset == 1
    v.add_(1.0)
    x[1][2].fill_(5.0)
    np.testing.assert_array_equal(x.numpy(), [[0, 1, 0], [0, 0, 5]])
