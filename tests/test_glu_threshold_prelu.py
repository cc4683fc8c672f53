"""F.glu / nn.GLU, F.threshold / F.threshold_ / hx.threshold / nn.Threshold and
F.prelu / hx.prelu / Tensor.prelu / nn.PReLU against PyTorch: values, float64 gradients
(and gradcheck), 0-d, 0-size and strided inputs, dtypes, errors, the layers' repr,
state_dict and keywords, and the GPU against the CPU."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
F, TF = hx.nn.functional, torch.nn.functional


def _values(shape, seed=0):
    # distinct values away from 0 (no ties, no kinks under gradcheck's steps)
    g = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return (g.permutation(n) - n / 2 + 0.37).reshape(shape) * 0.31


def _refused_alike(ours, theirs) -> bool:
    """Haelixe's error is of PyTorch's class, or, where PyTorch's CPU kernel lacks the
    dtype (NotImplementedError: "... not implemented for 'Long'"), the TypeError
    Haelixe raises for a dtype an op does not take."""
    if isinstance(ours, type(theirs)):
        return True
    return isinstance(theirs, NotImplementedError) and "not implemented for" in \
        str(theirs) and isinstance(ours, TypeError)


def _check(fh, ft, arrays, rtol=1e-12):
    """fh and ft on the arrays: values, dtype, and float64 gradients of every input."""
    arrays = [np.asarray(a, np.float64) for a in arrays]
    xs = [hx.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    got, want = fh(*xs), ft(*ts)
    assert got.shape == tuple(want.shape) and got.dtype is hx.float64
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol,
                               atol=1e-14)
    gy = np.random.default_rng(7).standard_normal(tuple(want.shape))
    got.backward(hx.tensor(gy))
    want.backward(torch.tensor(gy))
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=1e-14)


# -- glu ------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,dim", [((4,), -1), ((3, 6), -1), ((4, 3), 0),
                                       ((2, 4, 3), 1), ((2, 3, 2), -1), ((0, 4), 1),
                                       ((3, 0), 1), ((2, 2, 2, 2), 2)])
def test_glu_matches_pytorch(shape, dim):
    _check(lambda x: F.glu(x, dim), lambda t: TF.glu(t, dim), [_values(shape)])
    _check(lambda x: hx.nn.GLU(dim)(x), lambda t: torch.nn.GLU(dim)(t), [_values(shape, 1)])


def test_glu_reads_strided_inputs_and_passes_gradcheck():
    a = _values((6, 4))
    views = (lambda v: v.T, lambda v: v.flip(0), lambda v: v[::2],
             lambda v: v[:1].expand(4, 4))
    for view in views:
        got, want = F.glu(view(hx.tensor(a))), TF.glu(view(torch.tensor(a)))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    x = hx.tensor(_values((2, 4)), requires_grad=True)
    assert gradcheck(lambda v: F.glu(v, 1), (x,))
    assert gradgradcheck(lambda v: F.glu(v, 1), (x,))


def test_glu_keeps_16_bit_floats_and_refuses_what_pytorch_refuses():
    a = _values((2, 4))
    for dtype in ("float16", "bfloat16", "float32"):
        got = F.glu(hx.tensor(a, dtype=dtype))
        want = TF.glu(torch.tensor(a).to(getattr(torch, dtype)))
        assert got.dtype.name == dtype
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-2)
    cases = [(lambda m: m.tensor(1.0), -1), (lambda m: m.ones(3, 5), -1),
             (lambda m: m.ones(3, 4), 2), (lambda m: m.ones(2, 2).long(), -1)]
    for make, dim in cases:
        with pytest.raises(Exception) as theirs:
            TF.glu(make(torch), dim)
        with pytest.raises(Exception) as ours:
            F.glu(make(hx), dim)
        assert _refused_alike(ours.value, theirs.value), (ours.value, theirs.value)
    with pytest.raises(RuntimeError, match=r"^glu: dim 1 of the input \(3, 5\) has size 5, "
                                           r"which does not split in halves"):
        F.glu(hx.ones(3, 5), 1)
    with pytest.raises(RuntimeError, match="glu: a 0-d input has no dim to split"):
        F.glu(hx.tensor(2.0))
    with pytest.raises(TypeError, match="glu: not defined for int64 tensors"):
        F.glu(hx.ones(2, 2).long())


def test_the_glu_layer_is_pytorchs():
    for args in ((), (0,)):
        ours, theirs = hx.nn.GLU(*args), torch.nn.GLU(*args)
        assert repr(ours) == repr(theirs) and ours.dim == theirs.dim
        assert not ours.state_dict() and not list(ours.parameters())
    assert hx.nn.GLU(dim=1).dim == 1
    assert type(hx.nn.GLU()).__module__ == "haelixe.nn.fused_layers"


# -- threshold ------------------------------------------------------------------------------
def test_threshold_matches_pytorch_with_its_edge_at_the_threshold():
    a = np.array([[-1.0, 0.5, 0.5000001, 2.0, np.nan, -np.inf, np.inf]])
    for threshold, value in ((0.5, 3.0), (-1.0, -7.25), (0.0, 0.0)):
        x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        got, want = F.threshold(x, threshold, value), TF.threshold(t, threshold, value)
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        got.sum().backward()
        want.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())  # (NaN passes on)
    _check(lambda x: hx.threshold(x, 0.1, -2.0), lambda t: torch.threshold(t, 0.1, -2.0),
           [_values((3, 4))])
    _check(lambda x: hx.nn.Threshold(0.1, 20.0)(x), lambda t: torch.nn.Threshold(0.1, 20.0)(t),
           [_values((2, 3, 4))])


def test_threshold_on_other_dtypes_0d_and_empty_as_pytorch():
    for dtype in ("int32", "int64", "uint8", "int8", "float16", "bfloat16", "float32"):
        a = np.arange(-2, 6).reshape(2, 4) % 7
        got = hx.threshold(hx.tensor(a, dtype=dtype), 2.5, 4)
        want = torch.threshold(torch.tensor(a).to(getattr(torch, dtype)), 2.5, 4)
        assert got.dtype.name == str(want.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    for a in (np.array(0.3), np.zeros((0, 3))):
        np.testing.assert_array_equal(hx.threshold(hx.tensor(a), 0.5, 2.0).numpy(),
                                      torch.threshold(torch.tensor(a), 0.5, 2.0).numpy())
    with pytest.raises(NotImplementedError):
        torch.threshold(torch.tensor([True]), 0.5, 1)
    with pytest.raises(TypeError, match="not supported on bool tensors"):
        hx.threshold(hx.tensor([True]), 0.5, 1)
    with pytest.raises(RuntimeError, match="value 300 cannot be converted to uint8"):
        hx.threshold(hx.tensor([1, 2], dtype="uint8"), 1, 300)


def test_threshold_in_place_forms_write_into_the_input():
    a = _values((3, 4))
    for fn in (lambda v: hx.threshold_(v, 0.2, -1.0), lambda v: F.threshold_(v, 0.2, -1.0),
               lambda v: F.threshold(v, 0.2, -1.0, inplace=True),
               lambda v: F.threshold(v, threshold=0.2, value=-1.0, inplace=True),
               lambda v: hx.nn.Threshold(0.2, -1.0, True)(v)):
        x = hx.tensor(a)
        assert fn(x) is x
        np.testing.assert_array_equal(x.numpy(),
                                      torch.threshold(torch.tensor(a), 0.2, -1.0).numpy())
    # recorded in a graph as PyTorch records an in-place op on a non-leaf
    x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, u = x * 2.0, t * 2.0
    F.threshold_(y, 0.3, 5.0)
    TF.threshold_(u, 0.3, 5.0)
    y.sum().backward()
    u.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


def test_threshold_has_pytorchs_signatures_and_no_tensor_method():
    assert str(inspect.signature(hx.threshold)) == "(input, threshold, value)"
    assert str(inspect.signature(F.threshold)) == "(input, threshold, value, inplace=False)"
    assert str(inspect.signature(hx.threshold_)) == "(input, threshold, value)"
    assert F.threshold_ is hx.threshold_
    assert not hasattr(hx.Tensor, "threshold") and not hasattr(torch.Tensor, "threshold")
    with pytest.raises(TypeError, match=r"threshold\(\) missing required argument 'value'"):
        hx.threshold(hx.ones(2), 0.5)
    with pytest.raises(TypeError, match=r"Threshold\(\) missing required argument"):
        hx.nn.Threshold(0.5)


def test_the_threshold_layer_is_pytorchs():
    for args in ((0.1, 20), (0.1, 20.0, True), (-1.5, 0.0, False)):
        ours, theirs = hx.nn.Threshold(*args), torch.nn.Threshold(*args)
        assert repr(ours) == repr(theirs)
        assert (ours.threshold, ours.value, ours.inplace) == \
            (theirs.threshold, theirs.value, theirs.inplace)
        assert not ours.state_dict()
    layer = hx.nn.Threshold(threshold=0.5, value=-1.0, inplace=True)
    assert (layer.threshold, layer.value, layer.inplace) == (0.5, -1.0, True)


# -- prelu ------------------------------------------------------------------------------
PRELU = [((2, 3, 4), (3,)), ((2, 3, 4), (1,)), ((2, 3, 4), ()), ((5, 3), (3,)),
         ((4,), (1,)), ((4,), ()), ((), ()), ((), (1,)), ((2, 3, 2, 2), (3,)),
         ((1, 2, 2, 1, 2), (2,)), ((0, 3), (3,)), ((2, 0), (1,))]


@pytest.mark.parametrize("shape,weight", PRELU, ids=[f"{s}{w}" for s, w in PRELU])
def test_prelu_matches_pytorch_with_its_channel_layout(shape, weight):
    arrays = [_values(shape), np.random.default_rng(3).uniform(-0.5, 0.9, weight)]
    _check(lambda x, w: F.prelu(x, w), lambda x, w: TF.prelu(x, w), arrays)
    _check(lambda x, w: hx.prelu(x, w), lambda x, w: torch.prelu(x, w), arrays)
    _check(lambda x, w: x.prelu(w), lambda x, w: x.prelu(w), arrays)


def test_prelu_reads_strided_inputs_and_passes_gradcheck():
    a, w = _values((8, 3)), np.array([0.2, -0.4, 1.5])
    views = (lambda v: v[:3].T, lambda v: v.flip(0), lambda v: v[::2],
             lambda v: v[:1].expand(4, 3), lambda v: v.reshape(3, 8).T)
    for view in views:
        got = hx.prelu(view(hx.tensor(a)), hx.tensor(w).flip(0))
        want = torch.prelu(view(torch.tensor(a)), torch.tensor(w).flip(0))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    x = hx.tensor(_values((2, 3, 2)), requires_grad=True)
    v = hx.tensor(w, requires_grad=True)
    assert gradcheck(hx.prelu, (x, v))
    assert gradgradcheck(hx.prelu, (x, v))


def test_prelu_keeps_16_bit_floats_and_refuses_what_pytorch_refuses():
    a = _values((2, 3))
    for dtype in ("float16", "bfloat16"):
        got = hx.prelu(hx.tensor(a, dtype=dtype), hx.tensor([0.25] * 3, dtype=dtype))
        want = torch.prelu(torch.tensor(a).to(getattr(torch, dtype)),
                           torch.tensor([0.25] * 3).to(getattr(torch, dtype)))
        assert got.dtype.name == dtype
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-2)
    cases = [  # (input, weight) of each library
        lambda m: (m.ones(2, 3).long(), m.ones(1).long()),
        lambda m: (m.ones(2, 3), m.ones(1, dtype=m.float64)),
        lambda m: (m.ones(2, 3, 4), m.ones(4)), lambda m: (m.ones(4), m.ones(4)),
        lambda m: (m.tensor(2.0), m.ones(2)), lambda m: (m.ones(2, 3), m.ones(1, 3)),
        lambda m: (m.ones(2, 3), m.ones(3, 1)), lambda m: (m.ones(2, 3), m.ones(2)),
    ]
    for make in cases:
        with pytest.raises(Exception) as theirs:
            torch.prelu(*make(torch))
        with pytest.raises(Exception) as ours:
            hx.prelu(*make(hx))
        assert _refused_alike(ours.value, theirs.value), (ours.value, theirs.value)
        assert str(ours.value).startswith("prelu: ")
    with pytest.raises(RuntimeError, match=r"prelu: a weight of 4 slopes for an input of "
                                           r"shape \(2, 3, 4\) with 3 channels \(dim 1\)"):
        hx.prelu(hx.ones(2, 3, 4), hx.ones(4))
    with pytest.raises(TypeError, match=r"prelu: input \(float32\) and weight \(float64\) "
                                        r"must have one dtype"):
        hx.prelu(hx.ones(2), hx.ones(1, dtype=hx.float64))


@pytest.mark.parametrize("args", [(), (3,), (1, 0.1), (3, -2.0)])
def test_the_prelu_layer_is_pytorchs(args):
    ours, theirs = hx.nn.PReLU(*args), torch.nn.PReLU(*args)
    assert type(ours).__module__ == "haelixe.nn.fused_layers"
    assert repr(ours) == repr(theirs)
    assert (ours.num_parameters, ours.init) == (theirs.num_parameters, theirs.init)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    assert [n for n, _ in ours.named_parameters()] == ["weight"]
    assert isinstance(ours.weight, hx.nn.Parameter) and ours.weight.requires_grad
    assert ours.weight.dtype is hx.float32
    np.testing.assert_array_equal(ours.weight.detach().numpy(), theirs.weight.detach().numpy())
    a = _values((2, 3, 4)).astype(np.float32)
    x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    got, want = ours(x), theirs(t)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    got.square().sum().backward()
    want.square().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-5)


def test_the_prelu_layer_takes_dtype_device_and_its_state_dict_loads_pytorchs():
    layer = hx.nn.PReLU(3, init=1, dtype=hx.float64)
    assert layer.weight.dtype is hx.float64
    assert layer.weight.detach().numpy().tolist() == [1.0] * 3
    theirs = torch.nn.PReLU(3)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor([0.5, -0.25, 2.0]))
    ours = hx.nn.PReLU(3)
    ours.load_state_dict({"weight": theirs.weight.detach().numpy()})
    a = _values((2, 3)).astype(np.float32)
    np.testing.assert_allclose(ours(hx.tensor(a)).detach().numpy(),
                               theirs(torch.tensor(a)).detach().numpy(), rtol=1e-6)
    assert hx.nn.PReLU(num_parameters=2, init=0.5).weight.detach().numpy().tolist() == \
        [0.5, 0.5]


# -- the GPU ------------------------------------------------------------------------------
@pytest.mark.gpu
def test_glu_threshold_and_prelu_on_the_gpu_equal_the_cpu(be):
    a = _values((2, 4, 3)).astype(np.float32)
    w = np.array([0.1, -0.3, 0.7, 2.0], np.float32)
    calls = [lambda x, v: F.glu(x, 1), lambda x, v: F.threshold(x, 0.2, -3.0),
             lambda x, v: hx.prelu(x, v), lambda x, v: hx.nn.GLU()(x[..., :2])]
    for call in calls:
        out = []
        for device in ("cpu", "gpu"):
            x = hx.tensor(a, device=device, requires_grad=True)
            v = hx.tensor(w, device=device, requires_grad=True)
            y = call(x, v)
            y.square().sum().backward()
            out.append((y.detach().cpu().numpy(), x.grad.cpu().numpy(),
                        None if v.grad is None else v.grad.cpu().numpy()))
        (yc, gc, vc), (yg, gg, vg) = out
        assert yg.shape == yc.shape
        np.testing.assert_allclose(yg, yc, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gg, gc, rtol=1e-5, atol=1e-6)
        if vc is not None:
            np.testing.assert_allclose(vg, vc, rtol=1e-5, atol=1e-5)
