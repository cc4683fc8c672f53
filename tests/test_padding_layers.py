"""F.pad in every mode, over one, two and three dims of inputs of each rank PyTorch
takes, and its fifteen layers (nn.ZeroPad1d ... nn.CircularPad3d, made from F.pad's
declaration): values and float64 gradients against PyTorch, crops (negative sizes),
empty batches, strided inputs, dtypes, PyTorch's errors, the layers' constructors,
attributes, repr and state, and the GPU against the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import gradcheck

torch = pytest.importorskip("torch")
F, TF = hx.nn.functional, torch.nn.functional

MODES = ("constant", "reflect", "replicate", "circular")
#: (input shape, pad) that PyTorch pads in every mode: the last 1, 2 or 3 dims of inputs
#: with one or two dims more, crops among them
SHAPES = [
    ((3, 5), (2, 1)), ((2, 3, 5), (0, 4)), ((2, 3, 5), (-2, 3)), ((1, 4), (3, -1)),
    ((2, 4, 5), (1, 2, 3, 0)), ((2, 3, 4, 5), (-1, 2, 2, -2)), ((1, 1, 4, 5), (4, 4, 3, 3)),
    ((2, 3, 4, 5), (1, 1, 1, 1, 1, 1)), ((1, 2, 3, 4, 5), (2, 0, -1, 2, 1, 2)),
    ((2, 2, 3, 3, 4), (3, 3, 2, 2, 2, 2)), ((2, 3, 4, 5), (0, 0, 0, 0, 0, 0)),
    ((0, 3, 5), (1, 2)), ((0, 2, 3, 4), (1, 1, 2, 2)),
]


def _values(shape, seed=0):
    g = np.random.default_rng(seed)
    return g.permutation(max(int(np.prod(shape)), 1))[:int(np.prod(shape))].reshape(
        shape) * 0.25 - 2.0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,pad", SHAPES, ids=[f"{s}{p}" for s, p in SHAPES])
def test_pad_matches_pytorch_values_and_float64_gradients(shape, pad, mode):
    a = _values(shape)
    x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    got, want = F.pad(x, pad, mode=mode), TF.pad(t, pad, mode=mode)
    assert got.shape == tuple(want.shape) and got.dtype is hx.float64
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    gy = np.random.default_rng(1).standard_normal(tuple(want.shape))
    got.backward(hx.tensor(gy))
    want.backward(torch.tensor(gy))
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_pad_passes_gradcheck_and_gradgradcheck(mode):
    x = hx.tensor(_values((2, 3, 4)), requires_grad=True)
    for pad in ((2, 1), (1, -1, 2, 1)):
        assert gradcheck(lambda v, pad=pad: F.pad(v, pad, mode=mode), (x,))
        assert hx.autograd.gradgradcheck(lambda v, pad=pad: F.pad(v, pad, mode=mode), (x,))


@pytest.mark.parametrize("mode", MODES)
def test_pad_reads_strided_inputs(mode):
    a = _values((4, 5, 6))
    views = {"transposed": lambda v: v.transpose(1, 2), "flipped": lambda v: v.flip(2),
             "stepped": lambda v: v[::2], "expanded": lambda v: v[:1].expand(3, 5, 6)}
    for name, view in views.items():
        got = F.pad(view(hx.tensor(a)), (2, 1, -1, 3), mode=mode)
        want = TF.pad(view(torch.tensor(a)), (2, 1, -1, 3), mode=mode)
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)


def test_constant_pad_takes_any_rank_and_value_with_pytorchs_dtypes():
    for shape, pad in [((), ()), ((5,), (2, -1)), ((2, 3), (1, 1, -1, 2)),
                       ((1, 2, 1, 2, 3), (1, 0, 0, 1, 2, 2, 1, 1)), ((4,), (-2, -2))]:
        a = _values(shape)
        for value in (None, -1.5, 0.0):
            got = F.pad(hx.tensor(a), pad, value=value)
            want = TF.pad(torch.tensor(a), pad, value=value)
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f"{shape}{pad}")
    for dtype, value in (("int32", 7), ("int64", 1.7), ("uint8", 3), ("bool", 1.0),
                         ("float16", 2.5), ("bfloat16", -3.0)):
        a = np.arange(6).reshape(2, 3) % 2
        got = F.pad(hx.tensor(a, dtype=dtype), (1, 2), value=value)
        want = TF.pad(torch.tensor(a).to(getattr(torch, dtype)), (1, 2), value=value)
        assert got.dtype.name == str(want.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_the_other_modes_keep_integer_dtypes_and_take_bool(mode):
    a = np.arange(12).reshape(1, 3, 4)
    for dtype in ("int32", "int64", "uint8", "int8", "float16", "bfloat16"):
        got = F.pad(hx.tensor(a, dtype=dtype), (2, 1), mode=mode)
        want = TF.pad(torch.tensor(a).to(getattr(torch, dtype)), (2, 1), mode=mode)
        assert got.dtype.name == dtype
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    # (PyTorch's reflect and replicate kernels lack bool; padding moves values only)
    b = a % 3 == 0
    got = F.pad(hx.tensor(b), (2, 1), mode=mode)
    want = TF.pad(torch.tensor(b).to(torch.uint8), (2, 1), mode=mode).bool()
    assert got.dtype is hx.bool
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_pad_gives_a_new_tensor_as_pytorch():
    x = hx.tensor(_values((2, 4)))
    for pad, mode in (((0, 0), "constant"), ((), "constant"), ((-1, -1), "constant"),
                      ((0, 0), "reflect"), ((-1, 0), "circular")):
        y = F.pad(x, pad, mode=mode)
        assert y.storage is not x.storage, (pad, mode)
        y.fill_(9.0)
        assert x.numpy().max() < 9.0


#: calls PyTorch refuses: each must be refused here with an error of PyTorch's class
REFUSED = [
    ((4,), (1, 1), "reflect", None), ((1, 1, 2, 4), (1, 1), "replicate", None),
    ((2, 4), (1, 1, 1, 1), "circular", None), ((1, 1, 1, 2, 4), (1, 1, 1, 1), "reflect", None),
    ((1, 1, 1, 1, 2, 4), (1,) * 6, "replicate", None),
    ((1, 1, 1, 2, 4), (1,) * 8, "circular", None),
    ((2, 4), (), "reflect", None), ((1, 4), (4, 0), "reflect", None),
    ((1, 4), (5, -3), "reflect", None), ((1, 4), (-2, -2), "reflect", None),
    ((1, 4), (-2, -2), "replicate", None), ((1, 1, 4, 4), (-2, -2, -2, -2), "reflect", None),
    ((1, 1, 4, 4), (-4, 0, -4, 0), "replicate", None),
    ((1, 1, 3, 4, 4), (-4, 0, -4, 0, -3, 0), "reflect", None),
    ((1, 1, 4, 4), (-3, -2, 1, 1), "replicate", None),
    ((2, 0, 4), (1, 1), "reflect", None), ((0, 4), (1, 1), "replicate", None),
    ((2, 0), (0, 0), "reflect", None), ((1, 0, 3, 4), (1, 1, 1, 1), "replicate", None),
    ((1, 4), (5, -3), "circular", None), ((3, 0), (1, 1), "circular", None),
    ((1, 4), (-3, -2), "circular", None), ((1, 4), (-2, 3), "circular", None),
    ((1, 4), (1, 1), "reflect", 1.0), ((1, 4), (1, 1), "circular", -2.0),
    ((4,), (-3, -2), "constant", None), ((4,), (1, 1, 1, 1), "constant", None),
    ((4,), (1,), "constant", None), ((2, 3, 3), (1, 1), "typo", None),
    ((2,), (1, 1, 1), "typo", None),
]


@pytest.mark.parametrize("shape,pad,mode,value", REFUSED,
                         ids=[f"{s}{p}{m}{v}" for s, p, m, v in REFUSED])
def test_pad_refuses_what_pytorch_refuses(shape, pad, mode, value):
    a = np.zeros(shape)
    with pytest.raises(Exception) as theirs:
        TF.pad(torch.tensor(a), pad, mode=mode, value=value)
    with pytest.raises(type(theirs.value)) as ours:
        F.pad(hx.tensor(a), pad, mode=mode, value=value)
    assert str(ours.value).startswith("pad: ")


def test_pad_names_what_it_refuses_and_the_fix():
    x = hx.zeros(1, 4)
    with pytest.raises(NotImplementedError, match=r"pad: mode 'reflect' pads the last 1, "
                       r"2 or 3 dims .* got 4 sizes for an input of shape \(1, 4\)"):
        F.pad(x, (1, 1, 1, 1), mode="reflect")
    with pytest.raises(ValueError, match=r"reflect padding \(4, 0\) of dim 1 must be less "
                       r"than its size 4 .* or use mode='replicate'"):
        F.pad(x, (4, 0), mode="reflect")
    with pytest.raises(ValueError, match=r"circular padding \(5, 0\) of dim 1 wraps around "
                       r"it more than once"):
        F.pad(x, (5, 0), mode="circular")
    with pytest.raises(ValueError, match=r"reflect padding needs every dim of the input "
                       r"non-empty"):
        F.pad(hx.zeros(2, 0, 3), (1, 1), mode="reflect")
    with pytest.raises(ValueError, match=r"value= applies to mode='constant' only"):
        F.pad(x, (1, 1), mode="replicate", value=2.0)
    with pytest.raises(NotImplementedError, match=r"pad: mode must be one of"):
        F.pad(x, (1, 1), mode="wrap")
    with pytest.raises(TypeError, match=r"^pad: pad must be a tuple of ints .*, got int$"):
        F.pad(x, 1)
    with pytest.raises(TypeError, match=r"an element of type float"):
        F.pad(x, (1.5, 1))
    with pytest.raises(TypeError, match=r"an element of type bool"):
        F.pad(x, (True, 1))
    assert F.pad(x, [np.int64(1), hx.tensor(2)]).shape == (1, 7)  # (as PyTorch's)


def test_circular_padding_refuses_to_wrap_what_cropping_emptied():
    # PyTorch gives uninitialized memory here (it wraps the 0 elements left after the
    # crop); Haelixe refuses
    with pytest.raises(ValueError, match=r"wraps around its 0 elements left after cropping"):
        F.pad(hx.zeros(1, 4), (-4, 1), mode="circular")


# -- the layers ---------------------------------------------------------------------------
LAYERS = [f"{kind}Pad{d}d" for kind in ("Zero", "Constant", "Reflection", "Replication",
                                        "Circular") for d in (1, 2, 3)]


def _args(name, padding):
    return (padding, 0.5) if name.startswith("Constant") else (padding,)


def _input_shape(name, batched):
    d = int(name[-2])
    return (2,) * batched + (3,) + (4, 5, 6)[3 - d:]


@pytest.mark.parametrize("name", LAYERS)
def test_each_padding_layer_is_pytorchs(name):
    ours, theirs = getattr(hx.nn, name), getattr(torch.nn, name)
    assert ours.__module__ == "haelixe.nn.fused_layers"
    d = int(name[-2])
    sizes = (1, 2, 0, 3, 2, 1)[:2 * d]
    for padding in (2, sizes, list(sizes)):
        layer, reference = ours(*_args(name, padding)), theirs(*_args(name, padding))
        assert repr(layer) == repr(reference)
        assert layer.padding == reference.padding
        assert getattr(layer, "value", None) == getattr(reference, "value", None)
        assert not layer.state_dict() and not list(layer.parameters())
        assert not list(layer.buffers())
        for batched in (False, True):
            a = _values(_input_shape(name, batched), seed=batched)
            x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
            got, want = layer(x), reference(t)
            np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
            gy = np.random.default_rng(2).standard_normal(tuple(want.shape))
            got.backward(hx.tensor(gy))
            want.backward(torch.tensor(gy))
            np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12,
                                       atol=1e-12)


@pytest.mark.parametrize("name", LAYERS)
def test_each_padding_layer_binds_pytorchs_keywords_and_refuses_others(name):
    layer = getattr(hx.nn, name)(padding=1, **({"value": 2.0} if "Constant" in name else {}))
    assert layer.padding == (1,) * (2 * int(name[-2]))
    with pytest.raises(TypeError, match=rf"^{name}\(\): .*signature: {name}\(padding"):
        getattr(hx.nn, name)(1, 2.0, 3)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_the_circular_layers_check_the_input_rank_as_pytorchs(d):
    name = f"CircularPad{d}d"
    for ndim in (d, d + 3):
        a = np.zeros((2,) * ndim)
        with pytest.raises(ValueError) as theirs:
            getattr(torch.nn, name)(1)(torch.tensor(a))
        with pytest.raises(ValueError) as ours:
            getattr(hx.nn, name)(1)(hx.tensor(a))
        assert str(ours.value) == f"{name}: {theirs.value}"


def test_the_zero_and_constant_layers_pad_inputs_of_any_larger_rank():
    a = _values((2, 1, 2, 3, 4))
    for ours, theirs in ((hx.nn.ZeroPad1d(1), torch.nn.ZeroPad1d(1)),
                         (hx.nn.ConstantPad2d((1, 0, 2, 1), -4.0),
                          torch.nn.ConstantPad2d((1, 0, 2, 1), -4.0)),
                         (hx.nn.ZeroPad2d((1, 2)), torch.nn.ZeroPad2d((1, 2)))):
        np.testing.assert_array_equal(ours(hx.tensor(a)).numpy(), theirs(torch.tensor(a)).numpy())
    with pytest.raises(RuntimeError):
        hx.nn.ZeroPad2d(1)(hx.zeros(3))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_pad_on_the_gpu_equals_the_cpu(be, mode):
    a = _values((2, 3, 4, 5)).astype(np.float32)
    for pad in ((2, 1), (1, -1, 2, 1), (1, 2, 0, 1, 2, 1)):
        shape = a.shape if len(pad) > 2 else a.shape[1:]
        b = a.reshape(-1)[:int(np.prod(shape))].reshape(shape)
        xc, xg = hx.tensor(b, requires_grad=True), hx.tensor(b, device="gpu", requires_grad=True)
        yc, yg = F.pad(xc, pad, mode=mode), F.pad(xg, pad, mode=mode)
        assert yg.device.type == "gpu"
        np.testing.assert_array_equal(yg.detach().cpu().numpy(), yc.detach().numpy())
        gy = np.random.default_rng(3).standard_normal(yc.shape).astype(np.float32)
        yc.backward(hx.tensor(gy))
        yg.backward(hx.tensor(gy, device="gpu"))
        np.testing.assert_allclose(xg.grad.cpu().numpy(), xc.grad.numpy(), rtol=1e-6,
                                   atol=1e-6)


@pytest.mark.gpu
def test_a_padding_layer_runs_on_the_gpu(be):
    a = _values((2, 3, 4, 5)).astype(np.float32)
    for name in ("ReflectionPad2d", "CircularPad3d", "ConstantPad2d"):
        layer = getattr(hx.nn, name)(*_args(name, 1))
        got = layer(hx.tensor(a, device="gpu"))
        np.testing.assert_array_equal(got.cpu().numpy(), layer(hx.tensor(a)).numpy())


def test_a_model_of_the_added_layers_saves_and_loads_whole():
    import io

    from haelixe import pickled

    hx.manual_seed(4)
    model = hx.nn.Sequential(hx.nn.ReflectionPad2d((1, 0, 2, 1)), hx.nn.PReLU(3),
                             hx.nn.GLU(-1), hx.nn.ConstantPad1d(1, -2.0),
                             hx.nn.Threshold(0.1, 5.0))
    bag = hx.nn.EmbeddingBag(6, 4, mode="max", padding_idx=2)
    buf = io.BytesIO()
    pickled.save({"model": model, "bag": bag, "loss": hx.nn.GaussianNLLLoss(full=True)}, buf)
    back = pickled.load(io.BytesIO(buf.getvalue()), weights_only=False)
    a = hx.tensor(_values((2, 4, 3, 3)).astype(np.float32))[:, :3]
    np.testing.assert_array_equal(back["model"](a).detach().numpy(), model(a).detach().numpy())
    assert [repr(m) for m in back["model"]] == [repr(m) for m in model]
    idx = hx.tensor([[0, 2, 5], [1, 1, 3]])
    np.testing.assert_array_equal(back["bag"](idx).detach().numpy(), bag(idx).detach().numpy())
    assert back["loss"].full is True
