"""GPU backend vs numpy: context, allocator, transfers, bf16 packing, elementwise, copy,
cast, reductions, matmul and batched submission, on contiguous and strided views."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from haelixe.dtype import from_numpy as hx_dtype
from haelixe.ops.elementwise import ACTIVATIONS
from haelixe.ops.registry import OPS

pytestmark = pytest.mark.gpu
BF16 = np.dtype(ml_dtypes.bfloat16)


def gpu_view(be, base: np.ndarray, view: np.ndarray):
    """The GPU twin of ``view``, a numpy view of the C-contiguous ``base``: same shape,
    strides and offset over an uploaded copy of ``base``."""
    g = be.from_numpy(base)
    isz = base.itemsize
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // isz
    return g.view(view.shape, tuple(s // isz for s in view.strides), offset)


def layouts(shape, rng, dtype=np.float32, positive=False):
    """(name, base, view) of every kind of layout, each view of the given shape."""
    def arr(s):
        a = rng.standard_normal(s).astype(np.float32)
        if positive:
            a = np.abs(a) + 0.1
        return a.astype(dtype)

    s = tuple(shape)
    out = [("contiguous", *(lambda b: (b, b))(arr(s)))]
    b = arr(s[::-1])
    out.append(("transposed", b, b.T))
    b = arr((s[0] + 1,) + s[1:-1] + (2 * s[-1] + 1,))
    out.append(("sliced_step", b, b[1:, ..., ::2][..., :s[-1]]))
    b = arr((1,) + s[1:])
    out.append(("broadcast", b, np.broadcast_to(b, s)))
    b = arr(s)
    out.append(("flipped", b, b[::-1, ..., ::-1]))
    for _, _, v in out:
        assert v.shape == s
    return out


def run(be, name, *args):
    """The registry's kernel of op ``name`` on raw GPU arrays, as the ops layer calls it:
    inputs converted to the op's compute dtype, numbers as scalars of that dtype (where's
    condition stays bool)."""
    decl = OPS[name]
    arrays = [a for a in args if not np.isscalar(a)]
    ref = arrays[0] if np.isscalar(args[decl.dtype_from]) else args[decl.dtype_from]
    cd = decl.compute_dtype(hx_dtype(ref.dtype))
    keep = {0} if name == "where" else set()
    raws = [cd.np.type(a) if np.isscalar(a) else
            a if i in keep or a.dtype == cd.np else be.cast(a, cd.np)
            for i, a in enumerate(args)]
    return be.map(decl.kernel, raws, decl.out_dtype(cd).np)


def close(got, want, rtol=1e-5, atol=1e-5, msg=""):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=atol, err_msg=msg)


# -- context, allocator, transfers -----------------------------------------------------
def test_context_info(be):
    info = be.info
    for key in ("device", "vendor", "backend", "adapter_type", "software", "features",
                "limits"):
        assert key in info
    from haelixe.device import Device

    assert Device.gpu().info is info
    if "llvmpipe" in info["device"].lower() or "lavapipe" in info["device"].lower():
        assert info["software"] is True


@pytest.mark.parametrize("direct", [True, False])
def test_a_dispatch_the_device_refuses_raises_and_recording_goes_on(be, direct,
                                                                     monkeypatch):
    # Dispatches are encoded straight through wgpu-native's C functions (dispatch.py's
    # _Encoder), which report nothing themselves: the encoder keeps the error and the
    # flush raises it. Both ways must raise; the refused batch does not run, and work
    # recorded after it does.
    import wgpu

    from haelixe.backends.wgpu import dispatch
    from haelixe.backends.wgpu.shaders import kernel

    if not direct:
        monkeypatch.setattr(dispatch._ENCODE, "_calls", None)
    x = be.full((8,), 1.0, np.float32)
    spec = kernel("fill.wgsl", "fill_words", [("out", "u32", "write")])
    limit = be.dispatcher.device.limits["max-compute-workgroups-per-dimension"]
    be.synchronize()
    with pytest.raises(wgpu.GPUValidationError, match="dispatch group size"):
        be.dispatcher.dispatch(spec, [x.buffer], [8, 0, 0], (limit + 1, 1, 1))
        be.synchronize()
    y = be.full((8,), 3.0, np.float32)
    np.testing.assert_array_equal(be.to_numpy(be.add(x, y)), np.full(8, 4.0, np.float32))


def test_allocator_is_registered_and_recycles(be):
    from haelixe import memory

    alloc = memory.get_allocator("gpu")
    assert alloc is be.allocator
    x = be.empty((1000,), np.float32)
    handle = x.storage.data.handle
    assert x.storage.data.size >= 4000
    del x
    y = be.empty((1000,), np.float32)
    assert y.storage.data.handle is handle  # served from the bin's free list


def test_roundtrip_dtypes(be):
    rng = np.random.default_rng(0)
    for a in (rng.standard_normal((3, 5)).astype(np.float32),
              rng.integers(-9, 9, (7,)).astype(np.int32),
              rng.random((2, 3)) > 0.5,
              rng.standard_normal((3, 3)).astype(BF16),
              np.zeros((0, 4), np.float32),
              np.float32(2.5)):
        back = be.to_numpy(be.from_numpy(a))
        assert back.dtype == a.dtype and back.shape == a.shape
        np.testing.assert_array_equal(back, a)


def test_float64_is_refused_and_int64_kept(be):
    with pytest.raises(TypeError, match="float64.*float32"):
        be.from_numpy(np.zeros(3))
    got = be.from_numpy(np.array([-3, 0, 2**31 - 1], np.int64))
    assert got.dtype == np.int64
    back = be.to_numpy(got)
    assert back.dtype == np.int64
    np.testing.assert_array_equal(back, [-3, 0, 2**31 - 1])
    assert be.empty((2,), np.int64).dtype == np.int64
    assert be.cast(be.from_numpy(np.ones(2, np.float32)), np.int64).dtype == np.int64
    # (values past int32: tests/test_gpu_dtypes.py, with and without shader-int64)


def test_to_numpy_of_views(be):
    rng = np.random.default_rng(1)
    for name, base, view in layouts((4, 6), rng):
        np.testing.assert_array_equal(be.to_numpy(gpu_view(be, base, view)), view, name)
    b = rng.standard_normal(9).astype(BF16)  # odd offsets inside packed words
    np.testing.assert_array_equal(be.to_numpy(gpu_view(be, b, b[3:8])), b[3:8])


def test_full(be):
    for dt, v in ((np.float32, 1.5), (np.int32, -7), (np.bool_, True), (BF16, 3.140625)):
        np.testing.assert_array_equal(be.to_numpy(be.full((3, 5), v, dt)),
                                      np.full((3, 5), v, dt))


# -- bfloat16 ----------------------------------------------------------------------------
def test_bf16_pack_is_bit_exact(be):
    rng = np.random.default_rng(2)
    bits = np.concatenate([
        rng.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32),
        # ties (low half exactly 0x8000) with even and odd kept halves, both signs
        np.array([0x3F808000, 0x3F818000, 0xBF808000, 0xBF818000, 0x00008000, 0x00018000],
                 np.uint32),
        # rounding into infinity, infinities, NaNs (quiet, signalling, negative), zeros,
        # subnormals
        np.array([0x7F7FFFFF, 0x7F7F8000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
                  0xFFFFFFFF, 0x7FBFFFFF, 0x00000000, 0x80000000, 0x00000001, 0x007FFFFF,
                  0x80400000], np.uint32),
    ])
    f = bits.view(np.float32)
    with np.errstate(invalid="ignore"):
        want = f.astype(BF16).view(np.uint16)
    got = be.to_numpy(be.cast(be.from_numpy(f), BF16)).view(np.uint16)
    np.testing.assert_array_equal(got, want)
    # unpack is exact: every bf16 bit pattern widens to its float32
    all16 = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(BF16)
    got = be.to_numpy(be.cast(be.from_numpy(all16), np.float32)).view(np.uint32)
    np.testing.assert_array_equal(got, all16.astype(np.float32).view(np.uint32))


def test_bf16_elementwise_and_strided_store(be):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 7)).astype(BF16)
    b = rng.standard_normal((5, 7)).astype(BF16)
    got = be.to_numpy(run(be, "mul", be.from_numpy(a), be.from_numpy(b)))
    want = (a.astype(np.float32) * b.astype(np.float32)).astype(BF16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    # writing every other element of a packed buffer leaves the neighbours intact
    dst = np.zeros(11, BF16)
    g = be.from_numpy(dst)
    src = rng.standard_normal(6).astype(BF16)
    be.copy_into(g.view((6,), (2,), 0), be.from_numpy(src))
    dst[::2] = src
    np.testing.assert_array_equal(be.to_numpy(g), dst)


# -- elementwise -------------------------------------------------------------------------
UNARY_REF = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
    "silu": lambda x: x / (1 + np.exp(-x)), "sin": np.sin, "cos": np.cos, "sign": np.sign,
}


@pytest.mark.parametrize("op", sorted(UNARY_REF))
def test_unary_on_every_layout(be, op):
    rng = np.random.default_rng(4)
    positive = op in ("log", "sqrt", "rsqrt")
    for name, base, view in layouts((3, 5, 4), rng, positive=positive):
        got = be.to_numpy(run(be, op, gpu_view(be, base, view)))
        assert got.shape == view.shape
        close(got, UNARY_REF[op](view.astype(np.float64)), rtol=2e-6, atol=2e-6, msg=name)


def test_unary_int_and_extremes(be):
    x = np.array([-3, 0, 5], np.int32)
    for op in ("neg", "abs", "sign", "relu"):
        got = be.to_numpy(run(be, op, be.from_numpy(x)))
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, UNARY_REF[op](x))
    big = np.array([-100.0, -20.0, 20.0, 100.0], np.float32)
    close(be.to_numpy(run(be, "tanh", be.from_numpy(big))), np.tanh(big))
    close(be.to_numpy(run(be, "sigmoid", be.from_numpy(big))), 1 / (1 + np.exp(-big.astype(float))))


def test_gelu_exact_and_tanh(be):
    import math

    x = np.linspace(-6, 6, 101).astype(np.float32)
    erf = np.vectorize(math.erf)
    want = 0.5 * x * (1 + erf(x / math.sqrt(2)))
    close(be.to_numpy(run(be, "gelu_erf", be.from_numpy(x))), want, atol=1e-6)
    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x.astype(float) ** 3)
    close(be.to_numpy(run(be, "gelu_tanh", be.from_numpy(x))), 0.5 * x * (1 + np.tanh(inner)),
          atol=1e-6)


def test_erf_and_gelu_backward_kernels(be):
    import math

    x = np.linspace(-5, 5, 41).astype(np.float32)
    close(be.to_numpy(run(be, "erf", be.from_numpy(x))), [math.erf(v) for v in x], atol=2e-7)
    for approx in ("none", "tanh"):
        eps = 1e-3
        xd = x.astype(np.float64)
        want = (_gelu64(xd + eps, approx) - _gelu64(xd - eps, approx)) / (2 * eps)
        act = ACTIVATIONS["gelu_tanh" if approx == "tanh" else "gelu"]
        ones = be.from_numpy(np.ones_like(x))
        close(be.to_numpy(be.map(act.backward, [ones, be.from_numpy(x)], np.float32)), want,
              atol=1e-5)


def _gelu64(x, approx):
    import math

    if approx == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


BINARY_REF = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "pow": np.power, "maximum": np.maximum, "minimum": np.minimum}


@pytest.mark.parametrize("op", sorted(BINARY_REF))
def test_binary_broadcasting_on_every_layout(be, op):
    rng = np.random.default_rng(5)
    la = layouts((4, 6), rng, positive=op == "pow")
    lb = layouts((4, 6), rng, positive=True)
    for (na, ba, va), (nb, bb, vb) in zip(la, lb[1:] + lb[:1]):
        got = be.to_numpy(run(be, op, gpu_view(be, ba, va), gpu_view(be, bb, vb)))
        close(got, BINARY_REF[op](va.astype(float), vb.astype(float)), rtol=1e-5,
              msg=f"{na} with {nb}")
    # rank-changing broadcast: (4, 1, 3) with (5, 3)
    a = rng.standard_normal((4, 1, 3)).astype(np.float32)
    b = np.abs(rng.standard_normal((5, 3))).astype(np.float32) + 0.5
    got = be.to_numpy(run(be, op, be.from_numpy(a if op != "pow" else np.abs(a)),
                                      be.from_numpy(b)))
    close(got, BINARY_REF[op](a if op != "pow" else np.abs(a), b), rtol=1e-5)


def test_binary_int_bool_and_nan(be):
    a = np.array([[1, -2, 3]], np.int32)
    b = np.array([[2], [5]], np.int32)
    for op in ("add", "sub", "mul", "maximum", "minimum"):
        got = be.to_numpy(run(be, op, be.from_numpy(a), be.from_numpy(b)))
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, BINARY_REF[op](a, b))
    np.testing.assert_array_equal(be.to_numpy(run(be, "pow", be.from_numpy(a), be.from_numpy(b))),
                                  a.astype(np.int64) ** b)
    close(be.to_numpy(run(be, "div", be.from_numpy(a), be.from_numpy(b))), a / b)
    x = np.array([np.nan, 1.0, -2.0], np.float32)
    y = np.array([0.0, np.nan, 3.0], np.float32)
    got = be.to_numpy(run(be, "maximum", be.from_numpy(x), be.from_numpy(y)))
    np.testing.assert_array_equal(np.isnan(got), [True, True, False])
    close(be.to_numpy(run(be, "pow", be.from_numpy(np.array([-2.0, -2.0], np.float32)),
                             be.from_numpy(np.array([3.0, 2.0], np.float32)))), [-8, 4])


def test_compare_where_clamp(be):
    rng = np.random.default_rng(6)
    a = rng.integers(-3, 3, (4, 5)).astype(np.float32)
    b = rng.integers(-3, 3, (5,)).astype(np.float32)
    ga, gb = be.from_numpy(a), be.from_numpy(b)
    for op, ref in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                    ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)):
        got = be.to_numpy(run(be, op, ga, gb))
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, ref(a, b))
    cond = run(be, "gt", ga, gb)
    np.testing.assert_array_equal(be.to_numpy(run(be, "where", cond, ga, gb)),
                                  np.where(a > b, a, b))
    np.testing.assert_array_equal(be.to_numpy(run(be, "clamp3", ga, -1, 1.5)), np.clip(a, -1, 1.5))
    np.testing.assert_array_equal(be.to_numpy(run(be, "clamp_max", ga, 0)), np.minimum(a, 0))
    i = a.astype(np.int32)
    np.testing.assert_array_equal(be.to_numpy(run(be, "clamp_min", be.from_numpy(i), 0)),
                                  np.maximum(i, 0))


# -- layout ------------------------------------------------------------------------------
def test_copy_and_copy_into_every_layout(be):
    rng = np.random.default_rng(7)
    for name, base, view in layouts((3, 4, 5), rng):
        g = be.copy(gpu_view(be, base, view))
        assert g.is_contiguous()
        np.testing.assert_array_equal(be.to_numpy(g), view, name)
    # strided destination, broadcast source
    dst = rng.standard_normal((6, 8)).astype(np.float32)
    gd = be.from_numpy(dst)
    src = rng.standard_normal((1, 4)).astype(np.float32)
    be.copy_into(gd.view((3, 4), (-16, 2), 5 * 8 + 1), be.from_numpy(src))
    dst[::-2, 1::2] = src
    np.testing.assert_array_equal(be.to_numpy(gd), dst)
    # overlapping source and destination in one storage (as numpy: read, then write)
    x = np.arange(10, dtype=np.float32)
    gx = be.from_numpy(x)
    be.copy_into(gx.view((9,), (1,), 1), gx.view((9,), (1,), 0))
    x[1:] = x[:-1].copy()
    np.testing.assert_array_equal(be.to_numpy(gx), x)


def test_cast_between_all_dtypes(be):
    x = np.array([-2.7, -0.0, 0.0, 0.4, 1.0, 3.9, 300.5], np.float32)
    kinds = (np.float32, np.int32, np.bool_, BF16)
    for src in kinds:
        xs = x.astype(src)
        for dst in kinds:
            got = be.to_numpy(be.cast(be.from_numpy(xs), dst))
            assert got.dtype == np.dtype(dst)
            np.testing.assert_array_equal(got, xs.astype(dst), f"{src} -> {dst}")


# -- reductions --------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_reductions_on_every_layout(be, op):
    rng = np.random.default_rng(8)
    for name, base, view in layouts((3, 4, 37), rng):
        g = gpu_view(be, base, view)
        for axes in ((0,), (2,), (0, 2), (0, 1, 2)):
            for keep in (False, True):
                got = be.to_numpy(getattr(be, op)(g, axes, keep))
                want = getattr(np, op)(view.astype(np.float64), axis=axes, keepdims=keep)
                assert got.shape == want.shape
                close(got, want, atol=1e-5, msg=f"{name} {axes} {keep}")


def test_reduction_long_rows_ints_bools_and_nan(be):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3000)).astype(np.float32)
    close(be.to_numpy(be.sum(be.from_numpy(x), (1,), False)), x.astype(float).sum(1),
          atol=1e-4)
    i = rng.integers(-50, 50, (5, 6)).astype(np.int32)
    gi = be.from_numpy(i)
    np.testing.assert_array_equal(be.to_numpy(be.sum(gi, (0,), False)), i.sum(0))
    np.testing.assert_array_equal(be.to_numpy(be.max(gi, (1,), True)), i.max(1, keepdims=True))
    b = i > 0
    np.testing.assert_array_equal(be.to_numpy(be.max(be.from_numpy(b), (1,), False)),
                                  b.max(1))
    n = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 0.5]], np.float32)
    got = be.to_numpy(be.max(be.from_numpy(n), (1,), False))
    assert np.isnan(got[0]) and got[1] == 2.0


def test_few_long_rows_are_split_over_many_workgroups(be):
    from haelixe.backends.wgpu.reduce import PARALLEL_GROUPS, chunking

    # one row of 200K elements: pieces enough to keep a large GPU busy
    assert chunking(200_000, 256, 1)[0] >= 8
    assert chunking(4096 * 4096, 256, 1)[0] >= PARALLEL_GROUPS // 2
    assert chunking(1000, 256, 1) == (1, 1000)  # short rows stay whole
    rng = np.random.default_rng(12)
    x = rng.standard_normal((3, 70_001)).astype(np.float32)
    view = x[:, ::-1]
    g = gpu_view(be, x, view)
    close(be.to_numpy(be.sum(g, None, False)), view.astype(float).sum(), rtol=1e-5)
    close(be.to_numpy(be.sum(g, (1,), True)), view.astype(float).sum(1, keepdims=True),
          rtol=1e-5)
    assert be.to_numpy(be.max(g, (1,), False)).tolist() == view.max(1).tolist()
    assert be.to_numpy(be.min(g, None, False)) == view.min()
    i = rng.integers(-1000, 1000, 150_000).astype(np.int32)
    assert be.to_numpy(be.sum(be.from_numpy(i), None, False)) == i.sum()
    # argmax: the first of two equal maxima in different pieces, late in the row
    y = rng.standard_normal(150_000).astype(np.float32)
    y[90_000] = y[140_000] = 10.0
    assert be.to_numpy(be.argmax(be.from_numpy(y), 0, False)) == 90_000


def test_argmax(be):
    rng = np.random.default_rng(10)
    for name, base, view in layouts((4, 33), rng):
        g = gpu_view(be, base, view)
        for axis in (0, 1):
            got = be.to_numpy(be.argmax(g, axis, False))
            np.testing.assert_array_equal(got, np.argmax(view, axis), f"{name} {axis}")
    ties = np.array([[1, 3, 3, 0], [2, 2, 2, 2]], np.float32)
    np.testing.assert_array_equal(be.to_numpy(be.argmax(be.from_numpy(ties), 1, True)),
                                  [[1], [0]])
    n = np.array([1, np.nan, 5, np.nan], np.float32)
    assert be.to_numpy(be.argmax(be.from_numpy(n), 0, False)) == 1


# -- matmul ------------------------------------------------------------------------------
@pytest.mark.parametrize("shapes", [((5, 7), (7, 3)), ((70, 33), (33, 65)),
                                    ((2, 1, 9, 17), (3, 17, 66)), ((17,), (17, 5)),
                                    ((4, 17), (17,)),
                                    # several 128 x 128 tiles with ragged edges, k % 8 != 0
                                    ((130, 9), (9, 257)), ((3, 129, 20), (20, 131))])
def test_matmul_shapes(be, shapes):
    rng = np.random.default_rng(11)
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    got = be.to_numpy(be.matmul(be.from_numpy(a), be.from_numpy(b)))
    want = np.matmul(a.astype(float), b.astype(float))
    assert got.shape == want.shape
    close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [6, 8])  # scalar and vec4 stores
def test_matmul_epilogue_reads_row_and_elem_operands(be, n):
    """{r}: the row operand at the output's row (broadcast over a batch dim), {e}: the
    elem operand at its position (a transposed view, copied to rows), {m} / {n}."""
    from haelixe.backends.wgpu import matmul as mm

    rng = np.random.default_rng(13)
    a = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    b = rng.standard_normal((7, n)).astype(np.float32)
    row = rng.standard_normal((3, 5)).astype(np.float32)
    elem = rng.standard_normal((2, 3, n, 5)).astype(np.float32)
    ge = be.from_numpy(elem)
    elem_view = ge.view((2, 3, 5, n), ge.strides[:2] + ge.strides[:1:-1], ge.offset)
    got = be.to_numpy(mm.matmul(be, be.from_numpy(a), be.from_numpy(b),
                                activation="{x} * {e} - {r} + f32({m}) + 10.0 * f32({n})",
                                row_operand=be.from_numpy(row), elem_operand=elem_view))
    m_idx, n_idx = np.meshgrid(np.arange(5), np.arange(n), indexing="ij")
    want = ((a.astype(float) @ b) * elem.transpose(0, 1, 3, 2) - row[..., None]
            + m_idx + 10.0 * n_idx)
    close(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="row_operand of shape"):
        mm.matmul(be, be.from_numpy(a), be.from_numpy(b), activation="{x}",
                  row_operand=be.from_numpy(row[:, :4]))


def test_matmul_strided_operands_without_copies(be):
    rng = np.random.default_rng(12)
    for (na, ba, va), (nb, bb, vb) in zip(layouts((4, 19, 23), rng),
                                          layouts((4, 23, 9), rng)[::-1]):
        ga, gb = gpu_view(be, ba, va), gpu_view(be, bb, vb)
        before = be.stats()["dispatches"]
        got = be.to_numpy(be.matmul(ga, gb))
        assert be.stats()["dispatches"] - before == 1  # read through strides, no copy
        close(got, np.matmul(va.astype(float), vb.astype(float)), rtol=1e-4, atol=1e-4,
              msg=f"{na} @ {nb}")


def test_matmul_bf16(be):
    rng = np.random.default_rng(13)
    a = rng.standard_normal((9, 40)).astype(BF16)
    b = rng.standard_normal((40, 11)).astype(BF16)
    got = be.to_numpy(be.matmul(be.from_numpy(a), be.from_numpy(b)))
    assert got.dtype == BF16
    want = a.astype(np.float32) @ b.astype(np.float32)
    close(got.astype(np.float32), want, rtol=1e-2, atol=1e-2)


# -- batching ----------------------------------------------------------------------------
def test_dispatches_are_batched_into_few_submits(be):
    be.flush()
    be.reset_stats()
    x = be.from_numpy(np.ones((64,), np.float32))
    y = x
    for _ in range(200):
        y = run(be, "add", y, x)
    s = be.stats()
    # one submit per max_pending dispatches: the GPU starts while the host records more
    batches = -(-200 // be.dispatcher.max_pending)
    assert s["dispatches"] == 200 and s["submits"] <= batches
    np.testing.assert_array_equal(be.to_numpy(y), np.full(64, 201, np.float32))
    s = be.stats()
    assert s["submits"] <= batches + 1 and s["downloads"] == 1


def test_long_products_are_submitted_at_once_until_enough_is_queued(be, monkeypatch):
    from haelixe.backends.wgpu import dispatch, matmul

    # (thresholds scaled down: a 16 x 16 x 16 product counts as long work)
    monkeypatch.setattr(dispatch, "LONG_WORK_FLOPS", 2 * 16 ** 3)
    monkeypatch.setattr(dispatch, "AHEAD_FLOPS", 3 * 2 * 16 ** 3)
    a = be.from_numpy(np.eye(16, dtype=np.float32))
    small = be.from_numpy(np.ones((8, 8), np.float32))
    be.to_numpy(a)  # (a read-back: the GPU has nothing ahead of it)
    be.reset_stats()
    matmul.matmul(be, small, small)  # short: batched as before
    assert be.stats()["submits"] == 0 and be.stats()["pending"] == 1
    c = a
    for _ in range(5):
        c = matmul.matmul(be, c, a)
    s = be.stats()
    # the first three go at once (the short one with the first); then enough is queued
    assert s["submits"] == 3 and s["pending"] == 2
    np.testing.assert_array_equal(be.to_numpy(c), np.eye(16, dtype=np.float32))
    be.reset_stats()
    matmul.matmul(be, c, a)  # after a read-back: at once again
    assert be.stats()["submits"] == 1 and be.stats()["pending"] == 0


def test_bind_groups_are_reused_and_dropped_with_their_buffers(be):
    x = be.from_numpy(np.arange(300, dtype=np.float32))

    def step():
        y = run(be, "mul", run(be, "add", x, x), x)
        return be.to_numpy(y)

    for _ in range(2):  # (the two temporaries swap buffers from one step to the next)
        step()
    be.reset_stats()
    for _ in range(3):  # the same buffers come back from the allocator's bins
        np.testing.assert_array_equal(step(), 2 * np.arange(300) ** 2)
    assert be.stats()["bind_groups"] == 0
    cached = be.stats()["bind_groups_cached"]
    be.allocator.empty_cache()  # destroys the free buffers: their groups go with them
    assert be.stats()["bind_groups_cached"] < cached
    be.reset_stats()
    np.testing.assert_array_equal(step(), 2 * np.arange(300) ** 2)
    assert be.stats()["bind_groups"] > 0  # made again over the fresh buffers


def test_a_training_step_makes_no_bind_groups_once_warm(be):
    """The GPU allocator hands a repeated step the same buffers (stable reuse), so a
    Transformer block's training step creates no bind group after the first steps."""
    import haelixe as hx
    from haelixe import nn
    from haelixe.nn import functional as F
    from haelixe.optim import AdamW

    hx.manual_seed(0)
    model = nn.Sequential(nn.TransformerBlock(16, 2), nn.TransformerBlock(16, 2)).to("gpu")
    opt = AdamW(model.parameters(), lr=1e-3)
    x, y = (hx.randn(2, 8, 16).to("gpu") for _ in range(2))

    def step():
        opt.zero_grad(set_to_none=False)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):
        step()
    be.reset_stats()
    for _ in range(2):
        step()
    assert be.stats()["dispatches"] > 50 and be.stats()["bind_groups"] == 0


def test_map_into_updates_views_in_place(be):
    rng = np.random.default_rng(12)
    for dt in (np.float32, np.int32, BF16):
        base = (rng.standard_normal((6, 8)) * 4).astype(np.float32).astype(dt)
        other = (rng.standard_normal((8,)) * 3 + 5).astype(np.float32).astype(dt)
        for op, ref in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                        ("div", np.divide)):
            g = be.from_numpy(base)
            dst = g.view((3, 8), (16, 1), 8)  # every other row, from row 1
            want = base.copy()
            want[1::2] = ref(base[1::2].astype(np.float32), other.astype(np.float32)
                             ).astype(dt)
            be.map_into(OPS[op].kernel, dst, [be.from_numpy(other)])
            close(be.to_numpy(g).astype(np.float32), want.astype(np.float32), rtol=1e-2,
                  msg=f"{op} {np.dtype(dt).name}")
    g = be.from_numpy(np.arange(6, dtype=np.float32))
    be.map_into(OPS["mul"].kernel, g, [np.float32(2.0)])  # a host scalar
    be.map_into(OPS["add"].kernel, g.view((3,), (1,), 0), [g.view((3,), (1,), 3)])  # same buffer
    np.testing.assert_array_equal(be.to_numpy(g), [6, 10, 14, 6, 8, 10])


@pytest.mark.parametrize("dt", [BF16, np.float16], ids=["bf16", "f16"])
def test_map_into_16bit_in_one_dispatch_exact(be, dt):
    """A 16-bit target updated in place in one dispatch (read and written through
    atomics, or a word per invocation where the view is contiguous from an even
    element): equal bit for bit to the float32 result rounded, on views from even and
    odd elements, of odd length, strided; the elements around each view untouched."""
    rng = np.random.default_rng(21)
    base = rng.standard_normal(41).astype(dt)
    other = rng.standard_normal(41).astype(dt)
    for offset, n, stride in ((0, 40, 1), (2, 17, 1), (1, 20, 1), (3, 12, 3), (0, 41, 1)):
        g = be.from_numpy(base)
        x = be.from_numpy(other[:n])
        want = base.copy()
        sl = slice(offset, offset + stride * n, stride)
        want[sl] = (base[sl].astype(np.float32) + other[:n].astype(np.float32)).astype(dt)
        be.reset_stats()
        be.map_into(OPS["add"].kernel, g.view((n,), (stride,), offset), [x])
        assert be.stats()["dispatches"] == 1, (offset, n, stride)
        got = be.to_numpy(g)
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16),
                                      err_msg=f"offset {offset}, {n} elements, stride {stride}")
