"""PyTorch's top-level names programs reach for, against torch 2.13: finfo and iinfo (as
masked_fill's fill value too), the small predicates, the settings (warn-always, the
deterministic debug mode, flushing denormals, init_num_threads, the autocast dtype),
empty_permuted, nonzero_static, frombuffer, the binomial sampler, nn.DataParallel and
nn.NLLLoss2d."""

from __future__ import annotations

import array
import warnings

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd.mode import STATE

torch = pytest.importorskip("torch")

FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"]


def _raises_both(call_hx, call_torch, error, match=None):
    with pytest.raises(error):
        call_torch()
    with pytest.raises(error, match=match):
        call_hx()


# -- finfo and iinfo -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FLOATS)
def test_finfo_is_pytorchs_for_every_float_dtype(name):
    got, want = hx.finfo(getattr(hx, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution",
                  "dtype"):
        g, w = getattr(got, field), getattr(want, field)
        assert type(g) is type(w) and g == w, f"{name}.{field}: {g!r}, PyTorch {w!r}"
    assert repr(got) == repr(want) and str(got) == str(want)
    assert got == hx.finfo(getattr(hx, name)) and got != hx.finfo(hx.float64 if
                                                                   name != "float64" else
                                                                   hx.float32)


def test_finfo_without_a_dtype_is_the_default_dtypes():
    assert hx.finfo() == hx.finfo(hx.float32) and hx.finfo().eps == torch.finfo().eps
    hx.set_default_dtype(hx.float64)
    try:
        assert hx.finfo().dtype == "float64" and hx.finfo().bits == 64
    finally:
        hx.set_default_dtype(hx.float32)
    assert hx.finfo(type=hx.float16).max == torch.finfo(type=torch.float16).max == 65504.0


@pytest.mark.parametrize("name", INTS)
def test_iinfo_is_pytorchs_for_every_integer_dtype(name):
    got, want = hx.iinfo(getattr(hx, name)), torch.iinfo(getattr(torch, name))
    for field in ("bits", "min", "max", "dtype"):
        g, w = getattr(got, field), getattr(want, field)
        assert type(g) is type(w) and g == w, f"{name}.{field}: {g!r}, PyTorch {w!r}"
    assert repr(got) == repr(want)


@pytest.mark.parametrize("call_hx,call_torch,match", [
    (lambda: hx.finfo(hx.int32), lambda: torch.finfo(torch.int32), "iinfo"),
    (lambda: hx.finfo(hx.bool), lambda: torch.finfo(torch.bool), "iinfo"),
    (lambda: hx.finfo("float32"), lambda: torch.finfo("float32"), "not str"),
    (lambda: hx.iinfo(hx.bool), lambda: torch.iinfo(torch.bool), "bool is not supported"),
    (lambda: hx.iinfo(hx.float32), lambda: torch.iinfo(torch.float32), "finfo"),
    (lambda: hx.iinfo(), lambda: torch.iinfo(), None),
    (lambda: hash(hx.finfo()), lambda: hash(torch.finfo()), "unhashable"),
])
def test_finfo_and_iinfo_refuse_as_pytorch(call_hx, call_torch, match):
    _raises_both(call_hx, call_torch, TypeError, match)


@pytest.mark.parametrize("name", FLOATS)
def test_finfo_min_fills_masked_positions_as_pytorch(name):
    a = np.random.default_rng(0).standard_normal((3, 5))
    x, t = hx.tensor(a, dtype=name), torch.tensor(a, dtype=getattr(torch, name))
    got = x.masked_fill(x > 0, hx.finfo(x.dtype).min)
    want = t.masked_fill(t > 0, torch.finfo(t.dtype).min)
    np.testing.assert_array_equal(got.double().numpy(), want.double().numpy())
    assert got.double().numpy().min() == torch.finfo(t.dtype).min
    # (the attention idiom: masked scores, then a softmax that gives them nothing)
    w = x.float().masked_fill(x > 0, hx.finfo(hx.float32).min).softmax(-1)
    v = t.float().masked_fill(t > 0, torch.finfo(torch.float32).min).softmax(-1)
    np.testing.assert_allclose(w.numpy(), v.numpy(), rtol=1e-6, atol=1e-7)


def test_a_fill_value_beyond_the_dtype_is_refused_as_pytorch():
    x, t = hx.zeros(2, 3), torch.zeros(2, 3)
    _raises_both(lambda: x.half().masked_fill(x > -1, hx.finfo(hx.float32).min),
                 lambda: t.half().masked_fill(t > -1, torch.finfo(torch.float32).min),
                 RuntimeError, "masked_fill: value .* cannot be converted to float16")
    _raises_both(lambda: x.masked_fill(x > -1, hx.finfo(hx.float64).min),
                 lambda: t.masked_fill(t > -1, torch.finfo(torch.float64).min),
                 RuntimeError, "masked_fill")
    _raises_both(lambda: x.int().masked_fill(x > -1, hx.iinfo(hx.int64).min),
                 lambda: t.int().masked_fill(t > -1, torch.iinfo(torch.int64).min),
                 RuntimeError, "masked_fill")
    got = x.int().masked_fill(x > -1, hx.iinfo(hx.int32).min)
    assert got.numpy().tolist() == [[-2147483648] * 3] * 2
    inf = x.half().masked_fill(x > -1, float("-inf"))  # (infinities are no overflow)
    assert (inf.float().numpy() == -np.inf).all()


@pytest.mark.gpu
def test_finfo_min_fills_masked_positions_on_the_gpu(be):
    a = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    cpu, gpu = hx.tensor(a), hx.tensor(a, device="gpu")
    lowest = hx.finfo(hx.float32).min
    got = gpu.masked_fill(gpu > 0, lowest)
    assert got.device.type == "gpu"
    np.testing.assert_array_equal(got.cpu().numpy(), cpu.masked_fill(cpu > 0, lowest).numpy())
    assert got.cpu().numpy().min() == np.finfo(np.float32).min
    np.testing.assert_allclose(got.softmax(-1).cpu().numpy(),
                               cpu.masked_fill(cpu > 0, lowest).softmax(-1).numpy(),
                               rtol=1e-5, atol=1e-6)


# -- predicates ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", FLOATS + INTS[:5] + ["bool"])
def test_is_signed_get_device_is_inference_and_isreal_as_pytorch(name):
    h = hx.zeros(2, 3, dtype=getattr(hx, name))
    t = torch.zeros(2, 3, dtype=getattr(torch, name))
    assert hx.is_signed(h) is torch.is_signed(t) is h.is_signed()
    assert hx.get_device(h) == torch.get_device(t) == h.get_device() == -1
    assert hx.is_inference(h) is torch.is_inference(t) is h.is_inference() is False
    for shape in ((2, 3), (), (0, 4)):
        got = hx.isreal(hx.zeros(shape, dtype=getattr(hx, name)))
        want = torch.isreal(torch.zeros(shape, dtype=getattr(torch, name)))
        assert got.dtype is hx.bool and got.shape == tuple(want.shape)
        assert got.numpy().tolist() == want.numpy().tolist()
    assert h.isreal().numpy().all()


@pytest.mark.parametrize("name", ["is_signed", "get_device", "is_inference", "isreal"])
def test_the_predicates_refuse_non_tensors_as_pytorch(name):
    _raises_both(lambda: getattr(hx, name)(3), lambda: getattr(torch, name)(3), TypeError,
                 f"{name}.*must be a Tensor, not int")


@pytest.mark.gpu
def test_get_device_of_the_gpu_is_its_index_and_isreal_stays_there(be):
    x = hx.ones(2, 3, device="gpu")
    assert hx.get_device(x) == x.get_device() == 0  # (the one GPU: "cuda:0")
    real = hx.isreal(x)
    assert real.device.type == "gpu" and real.cpu().numpy().all()


# -- settings --------------------------------------------------------------------------------------
def test_warn_always_is_kept_and_checked_as_pytorch():
    assert hx.is_warn_always_enabled() is torch.is_warn_always_enabled() is False
    try:
        hx.set_warn_always(True)
        assert hx.is_warn_always_enabled() is True
    finally:
        hx.set_warn_always(False)
    assert hx.is_warn_always_enabled() is False
    for bad in (1, "yes", None):
        _raises_both(lambda b=bad: hx.set_warn_always(b), lambda b=bad: torch.set_warn_always(b),
                     RuntimeError, "set_warn_always expects a bool")


def test_the_deterministic_debug_mode_is_use_deterministic_algorithms_as_pytorch():
    def state(lib):
        return (lib.get_deterministic_debug_mode(), lib.are_deterministic_algorithms_enabled(),
                lib.is_deterministic_algorithms_warn_only_enabled())

    try:
        for mode in (1, "error", "default", "warn", 2, 0, True, False):
            hx.set_deterministic_debug_mode(mode)
            torch.set_deterministic_debug_mode(mode)
            assert state(hx) == state(torch), mode
        for on, warn_only in ((True, True), (True, False), (False, True)):
            hx.use_deterministic_algorithms(on, warn_only=warn_only)
            torch.use_deterministic_algorithms(on, warn_only=warn_only)
            assert state(hx) == state(torch), (on, warn_only)
        for bad, error in ((3, RuntimeError), (-1, RuntimeError), ("foo", RuntimeError),
                           (1.0, TypeError), (None, TypeError)):
            _raises_both(lambda b=bad: hx.set_deterministic_debug_mode(b),
                         lambda b=bad: torch.set_deterministic_debug_mode(b), error,
                         "set_deterministic_debug_mode")
    finally:
        hx.use_deterministic_algorithms(False)
        torch.use_deterministic_algorithms(False)
    assert hx.get_deterministic_debug_mode() == 0


def test_set_flush_denormal_says_it_cannot_and_denormals_stay():
    assert hx.set_flush_denormal(True) is False and hx.set_flush_denormal(False) is False
    tiny = hx.tensor([1e-40, 5e-324 * 2], dtype=hx.float64) * 1
    assert (tiny.numpy() > 0).all()
    assert (hx.tensor([1e-40]).numpy() > 0).all()  # (a float32 denormal)
    for bad in (1, "x"):
        _raises_both(lambda b=bad: hx.set_flush_denormal(b),
                     lambda b=bad: torch.set_flush_denormal(b), RuntimeError, "expects a bool")


def test_init_num_threads_takes_nothing_and_changes_nothing():
    before = hx.get_num_threads()
    assert hx.init_num_threads() is None and torch.init_num_threads() is None
    assert hx.get_num_threads() == before
    _raises_both(lambda: hx.init_num_threads(2), lambda: torch.init_num_threads(2), TypeError)


# -- the autocast dtype ----------------------------------------------------------------------------
@pytest.fixture
def autocast_state():
    saved = STATE.autocast, STATE.autocast_dtype
    yield
    STATE.autocast, STATE.autocast_dtype = saved


def test_the_autocast_dtype_starts_at_bfloat16_and_follows_autocast(autocast_state):
    assert hx.get_autocast_dtype("cpu") is hx.bfloat16
    assert str(torch.get_autocast_dtype("cpu")) == "torch.bfloat16"
    # (one dtype for every device: PyTorch's CUDA starts at float16)
    assert hx.get_autocast_dtype("cuda") is hx.get_autocast_dtype("gpu") is hx.bfloat16
    with hx.autocast(dtype=hx.float16):
        assert hx.get_autocast_dtype("cpu") is hx.float16
        with hx.autocast(enabled=False):
            assert hx.get_autocast_dtype("cpu") is hx.bfloat16
            assert not hx.is_autocast_enabled()
        assert hx.get_autocast_dtype("cpu") is hx.float16
    assert hx.get_autocast_dtype("cpu") is hx.bfloat16
    with torch.autocast("cpu", dtype=torch.float16):
        assert torch.get_autocast_dtype("cpu") == torch.float16


def test_set_autocast_dtype_is_the_dtype_autocast_computes_in(autocast_state):
    a, b = hx.randn(3, 4), hx.randn(4, 2)
    hx.set_autocast_dtype("cpu", hx.float16)
    assert hx.get_autocast_dtype("cuda") is hx.float16
    assert (a @ b).dtype is hx.float32  # (not enabled: nothing is cast)
    hx.set_autocast_enabled("cpu", True)
    assert (a @ b).dtype is hx.float16
    with hx.autocast(dtype=hx.bfloat16):  # (a region's own dtype, then back)
        assert (a @ b).dtype is hx.bfloat16
        hx.set_autocast_dtype("cpu", hx.float16)  # (inside a region: it takes effect there)
        assert (a @ b).dtype is hx.float16
    assert (a @ b).dtype is hx.float16 and hx.get_autocast_dtype("cpu") is hx.float16
    hx.set_autocast_enabled("cpu", False)
    assert (a @ b).dtype is hx.float32
    with pytest.raises(ValueError, match="bfloat16 or float16, got hx.float32"):
        hx.set_autocast_dtype("cpu", hx.float32)
    _raises_both(lambda: hx.get_autocast_dtype("foo"), lambda: torch.get_autocast_dtype("foo"),
                 RuntimeError, "unknown device type 'foo'")


DEPRECATED = [("get_autocast_cpu_dtype", ()), ("get_autocast_gpu_dtype", ()),
              ("is_autocast_cpu_enabled", ()), ("set_autocast_cpu_enabled", (False,)),
              ("set_autocast_cpu_dtype", ("bfloat16",)),
              ("set_autocast_gpu_dtype", ("float16",))]


@pytest.mark.parametrize("name,args", DEPRECATED, ids=[n for n, _ in DEPRECATED])
def test_the_deprecated_autocast_forms_warn_as_pytorch(name, args, autocast_state):
    def call(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = getattr(lib, name)(*(getattr(lib, a) if isinstance(a, str) else a
                                       for a in args))
        assert [w.category for w in caught] == [DeprecationWarning], (lib.__name__, caught)
        assert name in str(caught[0].message)
        return out

    got, want = call(hx), call(torch)
    if name == "get_autocast_gpu_dtype":  # (one dtype for every device here)
        assert got is hx.get_autocast_dtype("cuda") is hx.bfloat16
    elif name.startswith("get"):
        assert got.name == str(want).removeprefix("torch.")
    else:
        assert got == want
    if name == "set_autocast_gpu_dtype":
        assert hx.get_autocast_dtype("cpu") is hx.float16


def test_is_autocast_cpu_enabled_follows_autocast(autocast_state):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert hx.is_autocast_cpu_enabled() is False
        with hx.autocast():
            assert hx.is_autocast_cpu_enabled() is True
        hx.set_autocast_cpu_enabled(True)
        assert hx.is_autocast_enabled("cpu") and hx.get_autocast_cpu_dtype() is hx.bfloat16
        hx.set_autocast_cpu_enabled(False)
        assert not hx.is_autocast_enabled()


# -- empty_permuted, nonzero_static, frombuffer ---------------------------------------------------
@pytest.mark.parametrize("size,order", [((2, 3, 4), (0, 2, 1)), ((2, 3, 4), (2, 0, 1)),
                                        ((2, 3), (1, 0)), ((5,), (0,)), ((), ()),
                                        ((2, 0, 3), (1, 2, 0))])
def test_empty_permuted_lays_dims_out_in_the_order_given(size, order):
    got = hx.empty_permuted(size, order, dtype=hx.float64)
    want = torch.empty_permuted(size, order, dtype=torch.float64)
    assert got.shape == tuple(want.shape) and got.stride() == want.stride()
    assert got.dtype is hx.float64
    leaf = hx.empty_permuted(list(size), list(order), requires_grad=True)
    assert leaf.requires_grad and leaf.is_leaf and leaf.grad_fn is None


@pytest.mark.parametrize("size,order", [((2, 3, 4), (0, 2, 2)), ((2, 3, 4), (0, 1)),
                                        ((2, 3, 4), (0, 1, 3))])
def test_empty_permuted_refuses_a_layout_that_is_no_permutation(size, order):
    _raises_both(lambda: hx.empty_permuted(size, order), lambda: torch.empty_permuted(size, order),
                 RuntimeError, "empty_permuted")
    with pytest.raises(RuntimeError, match="no negative dims"):
        hx.empty_permuted((2, 3), (1, -1))


@pytest.mark.gpu
def test_empty_permuted_on_the_gpu(be):
    t = hx.empty_permuted((2, 3, 4), (2, 0, 1), device="gpu")
    assert t.device.type == "gpu" and t.stride() == (3, 1, 6)


@pytest.mark.parametrize("values,size,fill", [([[1, 0], [0, 3]], 4, -1), ([[1, 0], [0, 3]], 1, -1),
                                              ([[1, 0], [0, 3]], 3, 7), (5.0, 2, -1),
                                              (0.0, 2, -1), ([1, 0], 0, -1), ([], 2, 9),
                                              ([[True, False, True]], 2, 0)])
def test_nonzero_static_pads_or_cuts_nonzeros_rows(values, size, fill):
    got = hx.nonzero_static(hx.tensor(values), size=size, fill_value=fill)
    want = torch.nonzero_static(torch.tensor(values), size=size, fill_value=fill)
    assert got.dtype is hx.int64 and got.shape == tuple(want.shape)
    assert got.numpy().tolist() == want.numpy().tolist()
    assert hx.tensor(values).nonzero_static(size=size).shape == tuple(want.shape)


def test_nonzero_static_refuses_as_pytorch():
    x, t = hx.tensor([1, 0]), torch.tensor([1, 0])
    _raises_both(lambda: hx.nonzero_static(x, size=-1), lambda: torch.nonzero_static(t, size=-1),
                 RuntimeError, "'size' must be a non-negative integer")
    _raises_both(lambda: hx.nonzero_static(x, 2), lambda: torch.nonzero_static(t, 2), TypeError)


@pytest.mark.gpu
def test_nonzero_static_on_the_gpu(be):
    x = hx.tensor([[0.0, 2.0], [3.0, 0.0]], device="gpu")
    got = hx.nonzero_static(x, size=3)
    assert got.device.type == "gpu" and got.cpu().numpy().tolist() == [[0, 1], [1, 0], [-1, -1]]


def _values_of(lib, buffer, dtype, **kw):
    return lib.frombuffer(buffer, dtype=getattr(lib, dtype), **kw).tolist()


@pytest.mark.parametrize("dtype,kw", [("float32", {}), ("int16", {}), ("float64", {}),
                                      ("float32", {"count": 2, "offset": 4}),
                                      ("uint8", {"count": -2}), ("uint8", {"offset": 15}),
                                      ("int16", {"offset": 1, "count": 3}), ("bfloat16", {}),
                                      ("bool", {"offset": 12})])
def test_frombuffer_reads_a_buffer_as_pytorch(dtype, kw):
    data = array.array("f", [1.0, 2.0, 3.0, 0.0])
    got = _values_of(hx, data, dtype, **kw)
    want = _values_of(torch, array.array("f", [1.0, 2.0, 3.0, 0.0]), dtype, **kw)
    np.testing.assert_array_equal(np.array(got, dtype=np.float64),
                                  np.array(want, dtype=np.float64))


def test_frombuffer_shares_the_buffers_memory():
    data = bytearray(b"\x01\x02\x03\x04")
    t = hx.frombuffer(data, dtype=hx.uint8, offset=1)
    assert t.shape == (3,) and t.dtype is hx.uint8 and t.device.type == "cpu"
    t[0] = 9
    data[3] = 7
    assert bytes(data) == b"\x01\x09\x03\x07" and t.tolist() == [9, 3, 7]
    floats = array.array("d", [0.5, 1.5])
    hx.frombuffer(floats, dtype=hx.float64).mul_(2)
    assert floats.tolist() == [1.0, 3.0]
    numpy_ints = np.arange(4, dtype=np.int32)
    hx.frombuffer(numpy_ints, dtype=hx.int32)[1:] += 10
    assert numpy_ints.tolist() == [0, 11, 12, 13]
    leaf = hx.frombuffer(bytearray(8), dtype=hx.float32, requires_grad=True)
    assert leaf.requires_grad and leaf.is_leaf


def test_frombuffer_of_read_only_bytes_warns_and_refuses_writes():
    with pytest.warns(UserWarning, match="not writable"):
        t = hx.frombuffer(b"abcd", dtype=hx.uint8)
    assert t.tolist() == [97, 98, 99, 100]
    with pytest.raises(RuntimeError):
        t.add_(1)
    assert (t + 1).tolist() == [98, 99, 100, 101]


@pytest.mark.parametrize("buffer,kw,error,match", [
    (bytearray(b"abc"), {"dtype": "int16"}, ValueError, "multiple of element size"),
    (bytearray(b"abc"), {"dtype": "uint8", "count": 5}, ValueError, "must not be greater"),
    (bytearray(b"abc"), {"dtype": "uint8", "offset": 3}, ValueError, "offset"),
    (bytearray(b"abc"), {"dtype": "uint8", "offset": -1}, ValueError, "offset"),
    (bytearray(b""), {"dtype": "uint8"}, ValueError, "must not be 0"),
    (bytearray(b"abcd"), {"dtype": "uint8", "count": 0}, ValueError, "must not be 0"),
    ([1, 2], {"dtype": "uint8"}, ValueError, "buffer protocol"),
    (np.arange(4, dtype=np.int32)[::2], {"dtype": "int32"}, RuntimeError, "contiguous"),
    (bytearray(b"abcd"), {"dtype": "int32", "requires_grad": True}, RuntimeError, None),
])
def test_frombuffer_refuses_as_pytorch(buffer, kw, error, match):
    def call(lib):
        return lib.frombuffer(buffer, **{k: getattr(lib, v) if k == "dtype" else v
                                         for k, v in kw.items()})
    _raises_both(lambda: call(hx), lambda: call(torch), error, match)
    _raises_both(lambda: hx.frombuffer(bytearray(4), hx.float32),
                 lambda: torch.frombuffer(bytearray(4), torch.float32), TypeError)


# -- binomial --------------------------------------------------------------------------------------
def test_binomial_draws_have_the_distributions_mean_and_variance():
    n, p = hx.full((40000,), 30.0, dtype=hx.float64), hx.full((40000,), 0.2, dtype=hx.float64)
    hx.manual_seed(0)
    x = hx.binomial(n, p).numpy()
    assert x.dtype == np.float64 and (x == np.round(x)).all() and 0 <= x.min() and x.max() <= 30
    assert abs(x.mean() - 6.0) < 0.05 and abs(x.var() - 4.8) < 0.15
    counts = hx.tensor([[5.0], [100.0]])  # (broadcast against three probabilities)
    draws = hx.binomial(counts.expand(2, 3).contiguous(), hx.tensor([0.0, 1.0, 0.5]).expand(2, 3))
    assert draws.shape == (2, 3) and draws.dtype is hx.float32
    assert draws.numpy()[:, 0].tolist() == [0, 0] and draws.numpy()[:, 1].tolist() == [5, 100]


def test_binomial_follows_its_generator():
    count, prob = hx.full((50,), 20.0), hx.full((50,), 0.4)
    g1, g2 = hx.Generator().manual_seed(3), hx.Generator().manual_seed(3)
    a, b = hx.binomial(count, prob, generator=g1), hx.binomial(count, prob, g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(hx.binomial(count, prob, generator=g1).numpy(), a.numpy())
    hx.manual_seed(5)
    c = hx.binomial(count, prob)
    hx.manual_seed(5)
    np.testing.assert_array_equal(hx.binomial(count, prob).numpy(), c.numpy())


def test_binomial_edge_values_as_pytorch():
    count = hx.tensor([10.0, -10.0, float("inf"), 10.0, 10.0, 10.0, 0.0])
    prob = hx.tensor([1.5, 0.5, 0.1, -0.1, float("nan"), 1.0, 0.5])
    got = hx.binomial(count, prob).numpy()
    want = torch.binomial(torch.tensor(count.numpy()), torch.tensor(prob.numpy())).numpy()
    # (no randomness left in these; an infinite count gives inf here, and inf or NaN,
    # draw by draw, in PyTorch)
    keep = [0, 1, 3, 4, 5, 6]
    np.testing.assert_array_equal(got[keep], want[keep])
    assert got[2] == np.inf and (want[2] == np.inf or np.isnan(want[2]))
    assert hx.binomial(hx.tensor(5.0), hx.tensor(0.5)).shape == ()
    assert hx.binomial(hx.ones(0), hx.ones(0)).shape == (0,)
    leaf = hx.tensor([10.0], requires_grad=True)
    assert not hx.binomial(leaf, hx.tensor([0.5])).requires_grad  # (a sample: no graph)


@pytest.mark.parametrize("count,prob,error", [
    ("[10, 20]", "[0.5, 0.1]", ValueError),
    ("[10.0, 20.0]", "lib.tensor([0.5, 0.1], dtype=lib.float64)", RuntimeError),
    ("[10.0, 20.0]", "0.5", TypeError),
    ("[10.0, 20.0]", "[0.5, 0.1, 0.2]", RuntimeError),
    ("lib.tensor([10.0]).half()", "lib.tensor([0.5]).half()", NotImplementedError),
])
def test_binomial_refuses_as_pytorch(count, prob, error):
    def call(lib):
        def value(text):
            made = eval(text, {"lib": lib})
            return lib.tensor(made) if isinstance(made, list) else made
        return lib.binomial(value(count), value(prob))
    _raises_both(lambda: call(hx), lambda: call(torch), error, "binomial")


@pytest.mark.gpu
def test_binomial_on_the_gpu(be):
    g = hx.Generator().manual_seed(1)
    cpu = hx.binomial(hx.full((8,), 12.0), hx.full((8,), 0.5), generator=g)
    g.manual_seed(1)
    gpu = hx.binomial(hx.full((8,), 12.0, device="gpu"), hx.full((8,), 0.5, device="gpu"),
                      generator=g)
    assert gpu.device.type == "gpu"
    np.testing.assert_array_equal(gpu.cpu().numpy(), cpu.numpy())


# -- nn.DataParallel and nn.NLLLoss2d --------------------------------------------------------------
def test_data_parallel_runs_its_module_and_prefixes_its_state():
    inner, tinner = hx.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    wrapped, twrapped = hx.nn.DataParallel(inner), torch.nn.DataParallel(tinner)
    assert wrapped.module is inner and wrapped.device_ids == twrapped.device_ids == []
    assert list(wrapped.state_dict()) == list(twrapped.state_dict()) == \
        ["module.weight", "module.bias"]
    assert repr(wrapped) == repr(twrapped)
    assert [n for n, _ in wrapped.named_parameters()] == ["module.weight", "module.bias"]
    x = hx.randn(4, 3)
    np.testing.assert_array_equal(wrapped(x).detach().numpy(), inner(x).detach().numpy())
    np.testing.assert_array_equal(wrapped(input=x).detach().numpy(),
                                  inner(x).detach().numpy())
    wrapped(x).sum().backward()
    assert inner.weight.grad is not None
    other = hx.nn.DataParallel(hx.nn.Linear(3, 2), device_ids=[0], output_device=0, dim=1)
    other.load_state_dict(wrapped.state_dict())
    np.testing.assert_array_equal(other.module.weight.detach().numpy(),
                                  inner.weight.detach().numpy())
    import haelixe.nn.parallel
    assert haelixe.nn.parallel.DataParallel is hx.nn.DataParallel


def test_nll_loss_2d_is_nll_loss_with_pytorchs_deprecation():
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        torch.nn.NLLLoss2d()
    with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated"):
        loss = hx.nn.NLLLoss2d(ignore_index=1, reduction="sum")
    assert isinstance(loss, hx.nn.NLLLoss) and loss.reduction == "sum"
    r = np.random.default_rng(2)
    logp = np.log(r.dirichlet(np.ones(3), (2, 4, 5))).transpose(0, 3, 1, 2).copy()
    target = r.integers(0, 3, (2, 4, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        want = torch.nn.NLLLoss2d(ignore_index=1, reduction="sum")(torch.tensor(logp),
                                                                  torch.tensor(target))
    got = loss(hx.tensor(logp), hx.tensor(target))
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
    assert loss.state_dict().keys() == torch.nn.NLLLoss().state_dict().keys()
