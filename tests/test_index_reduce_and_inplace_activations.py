"""Tensor.index_reduce(_) and the in-place functional activations (F.relu_, F.elu_,
F.leaky_relu_, F.hardtanh_, F.rrelu_, F.threshold_, F.celu_, F.selu_ and torch.relu_,
celu_, selu_) against PyTorch: values, dtypes, errors, float64 gradients, in-place
records and the GPU against the CPU."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")
F, TF = hx.nn.functional, torch.nn.functional


@pytest.fixture(autouse=True)
def _quiet_beta_warning():
    with warnings.catch_warnings():  # (PyTorch's index_reduce warns it is in beta)
        warnings.filterwarnings("ignore", message="index_reduce")
        yield


def _data(rng, shape, zeros=0.25):
    a = rng.standard_normal(shape)
    a[rng.random(shape) < zeros] = 0.0  # (zeros: the product's gradient cases)
    return a


# -- index_reduce ---------------------------------------------------------------------------
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_reduce_values_and_float64_gradients_are_pytorchs(reduce, include_self, dim):
    rng = np.random.default_rng(abs(dim) * 7 + len(reduce) + include_self)
    shape = (4, 5, 3)
    d = dim % 3
    index = [0, 2, 2, shape[d] - 1, 2, 0]
    src_shape = list(shape)
    src_shape[d] = len(index)
    a, s = _data(rng, shape), _data(rng, tuple(src_shape))
    if reduce in ("amax", "amin"):  # (ties: the gradient shared evenly)
        a, s = np.round(a), np.round(s)
    xt, st = torch.tensor(a, requires_grad=True), torch.tensor(s, requires_grad=True)
    xh, sh = hx.tensor(a, requires_grad=True), hx.tensor(s, requires_grad=True)
    yt = xt.index_reduce(dim, torch.tensor(index), st, reduce, include_self=include_self)
    yh = xh.index_reduce(dim, hx.tensor(index), sh, reduce, include_self=include_self)
    np.testing.assert_allclose(yh.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    g = rng.standard_normal(shape)
    yt.backward(torch.tensor(g))
    yh.backward(hx.tensor(g))
    np.testing.assert_allclose(xh.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(sh.grad.numpy(), st.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_index_reduce_prod_gradient_through_one_and_two_zeros():
    a = np.array([[0.0, 2.0, 3.0], [1.5, 0.0, -1.0]])
    s = np.array([[0.0, 4.0], [2.0, 0.0], [5.0, 0.5]]).T.copy()  # (2, 3)
    for include_self in (True, False):
        xt, st = torch.tensor(a, requires_grad=True), torch.tensor(s, requires_grad=True)
        xh, sh = hx.tensor(a, requires_grad=True), hx.tensor(s, requires_grad=True)
        torch.index_reduce(xt, 0, torch.tensor([0, 0]), st, "prod",
                           include_self=include_self).sum().backward()
        hx.index_reduce(xh, 0, hx.tensor([0, 0]), sh, "prod",
                        include_self=include_self).sum().backward()
        np.testing.assert_array_equal(xh.grad.numpy(), xt.grad.numpy())
        np.testing.assert_array_equal(sh.grad.numpy(), st.grad.numpy())


def test_index_reduce_gradcheck():
    rng = np.random.default_rng(4)
    x = hx.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    s = hx.tensor(rng.standard_normal((3, 3)), requires_grad=True)
    idx = hx.tensor([1, 3, 1])
    for reduce in ("prod", "mean", "amax"):
        assert hx.autograd.gradcheck(
            lambda x, s, r=reduce: x.index_reduce(1, idx, s, r, include_self=False), (x, s))


def test_index_reduce_dtypes_views_and_scalar_forms_as_pytorch():
    ai = np.array([[-3, 5, -7], [2, -9, 4]])
    si = np.array([[1, -2], [6, -4]])
    for reduce in ("mean", "prod", "amin"):
        for include_self in (True, False):
            want = torch.tensor(ai).index_reduce(1, torch.tensor([0, 0], dtype=torch.int32),
                                                 torch.tensor(si), reduce,
                                                 include_self=include_self)
            got = hx.tensor(ai).index_reduce(1, hx.tensor([0, 0], dtype=hx.int32),
                                             hx.tensor(si), reduce, include_self=include_self)
            assert got.dtype is hx.int64
            np.testing.assert_array_equal(got.numpy(), want.numpy())  # (a mean rounds down)
    half = torch.ones(2, 3, dtype=torch.float16).index_reduce(
        0, torch.tensor([1]), torch.full((1, 3), 3.0, dtype=torch.float16), "mean")
    got = hx.ones(2, 3, dtype=hx.float16).index_reduce(
        0, hx.tensor([1]), hx.full((1, 3), 3.0, dtype=hx.float16), "mean")
    assert got.dtype is hx.float16
    np.testing.assert_array_equal(got.numpy(), half.numpy())
    # strided input and source
    rng = np.random.default_rng(5)
    a, s = rng.standard_normal((5, 4)), rng.standard_normal((3, 4))
    want = torch.tensor(a).T.index_reduce(1, torch.tensor([4, 0, 4]), torch.tensor(s).T.flip(0),
                                          "amax")
    got = hx.tensor(a).T.index_reduce(1, hx.tensor([4, 0, 4]), hx.tensor(s).T.flip(0), "amax")
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    # 0-d input with a 0-d or 1-element index and a 0-d source; empty index
    for index in (torch.tensor(0), torch.tensor([0])):
        want = torch.tensor(3.0).index_reduce(0, index, torch.tensor(2.0), "prod")
        got = hx.tensor(3.0).index_reduce(0, hx.tensor(index.numpy()), hx.tensor(2.0), "prod")
        assert got.shape == () and got.item() == want.item() == 6.0
    empty = hx.ones(2, 3).index_reduce(0, hx.tensor([], dtype=hx.int64), hx.ones(0, 3), "amax")
    np.testing.assert_array_equal(empty.numpy(), np.ones((2, 3)))


def test_index_reduce_in_place_records_as_pytorch():
    rng = np.random.default_rng(6)
    a, s = rng.standard_normal((3, 4)), rng.standard_normal((3, 2))
    lt, st = torch.tensor(a, requires_grad=True), torch.tensor(s, requires_grad=True)
    lh, sh = hx.tensor(a, requires_grad=True), hx.tensor(s, requires_grad=True)
    yt, yh = lt * 2, lh * 2
    assert yh.index_reduce_(1, hx.tensor([3, 3]), sh, "amin") is yh
    yt.index_reduce_(1, torch.tensor([3, 3]), st, "amin")
    np.testing.assert_allclose(yh.detach().numpy(), yt.detach().numpy())
    (yh * yh).sum().backward()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(lh.grad.numpy(), lt.grad.numpy())
    np.testing.assert_allclose(sh.grad.numpy(), st.grad.numpy())
    with pytest.raises(RuntimeError, match="leaf"):
        lh.index_reduce_(1, hx.tensor([0]), sh[:, :1], "prod")
    plain = hx.ones(3)
    version = plain._version
    plain.index_reduce_(0, hx.tensor([2]), hx.tensor([5.0]), "amax")
    assert plain._version > version and plain.tolist() == [1.0, 1.0, 5.0]


@pytest.mark.parametrize("call,kind", [
    (lambda m, x: x.index_reduce(1, m.tensor([0, 4]), m.ones(3, 2), "prod"), IndexError),
    (lambda m, x: x.index_reduce(1, m.tensor([-1, 0]), m.ones(3, 2), "prod"), IndexError),
    (lambda m, x: x.index_reduce(1, m.tensor([0, 0]), m.ones(3, 2), "sum"), RuntimeError),
    (lambda m, x: x.index_reduce(1, m.tensor([0, 0]), m.ones(3, 2, dtype=m.float64), "prod"),
     RuntimeError),
    (lambda m, x: x.index_reduce(1, m.tensor([0, 0, 1]), m.ones(3, 2), "prod"), RuntimeError),
    (lambda m, x: x.index_reduce(1, m.tensor([[0, 0]]), m.ones(3, 2), "prod"), IndexError),
    (lambda m, x: x.index_reduce(1, m.tensor([0.0, 0.0]), m.ones(3, 2), "prod"), RuntimeError),
    (lambda m, x: x.index_reduce(1, m.tensor([0, 0]), m.ones(2, 2), "prod"), RuntimeError),
    (lambda m, x: x.index_reduce(2, m.tensor([0, 0]), m.ones(3, 2), "prod"), IndexError),
    (lambda m, x: m.ones(3).bool().index_reduce(0, m.tensor([0]), m.ones(1).bool(), "amax"),
     NotImplementedError),
])
def test_index_reduce_refuses_what_pytorch_refuses(call, kind):
    with pytest.raises(kind):
        call(torch, torch.ones(3, 4))
    with pytest.raises(kind, match="index_reduce|out of range|Dimension|dim"):
        call(hx, hx.ones(3, 4))


@pytest.mark.gpu
def test_index_reduce_on_the_gpu_equals_the_cpu(be):
    rng = np.random.default_rng(7)
    a, s = rng.standard_normal((3, 5)).astype(np.float32), \
        rng.standard_normal((3, 4)).astype(np.float32)
    for reduce in ("prod", "mean", "amax", "amin"):
        out = []
        for device in ("cpu", "gpu"):
            x = hx.tensor(a, device=device, requires_grad=True)
            src = hx.tensor(s, device=device, requires_grad=True)
            y = x.index_reduce(1, hx.tensor([1, 3, 1, 0], device=device), src, reduce)
            y.sum().backward()
            out.append([t.detach().cpu().numpy() for t in (y, x.grad, src.grad)])
        for g, c in zip(*out):
            np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-6, err_msg=reduce)


# -- the in-place functional activations ------------------------------------------------------
#: F name -> PyTorch's signature text (its docstring's first line) and the arguments tried
INPLACE = {
    "relu_": ("(input)", ()),
    "elu_": ("(input, alpha=1.)", (0.7,)),
    "leaky_relu_": ("(input, negative_slope=0.01)", (0.2,)),
    "hardtanh_": ("(input, min_val=-1., max_val=1.)", (-0.5, 0.8)),
    "celu_": ("(input, alpha=1.)", (1.3,)),
    "selu_": ("(input)", ()),
    "threshold_": ("(input, threshold, value)", (0.1, -2.0)),
    "rrelu_": ("(input, lower=1./8, upper=1./3, training=False)", (0.1, 0.3)),
}


def _parse(text):
    return [(p.name, p.default) for p in
            inspect.signature(eval(f"lambda {text[1:-1]}: 0")).parameters.values()]  # noqa: S307


def test_the_inplace_activations_are_pytorchs():
    assert sorted(n for n in dir(TF) if n.endswith("_") and not n.startswith("_")) == \
        sorted(INPLACE)
    for name, (text, _) in INPLACE.items():
        first = getattr(TF, name).__doc__.strip().split("\n")[0]
        assert first.startswith(f"{name}{text}"), first
        ours = getattr(F, name)
        assert [(p.name, p.default) for p in inspect.signature(ours).parameters.values()] \
            == _parse(text), name
        assert ours.__doc__.startswith(f"{name}(")
    for name in ("relu_", "celu_", "selu_", "threshold_"):  # (torch's top level has these)
        assert getattr(hx, name) is getattr(F, name)


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_each_inplace_activation_writes_its_input_and_records_as_pytorch(name):
    rng = np.random.default_rng(len(name))
    a = rng.standard_normal((3, 4)) * 2
    _, args = INPLACE[name]
    leaf_t, leaf_h = torch.tensor(a, requires_grad=True), hx.tensor(a, requires_grad=True)
    yt, yh = leaf_t * 1.5, leaf_h * 1.5  # (a non-leaf: recorded in place)
    version = yh._version
    assert getattr(F, name)(yh, *args) is yh
    getattr(TF, name)(yt, *args)
    assert yh._version > version and yh.grad_fn is not None
    np.testing.assert_allclose(yh.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
    g = rng.standard_normal((3, 4))
    (yh * hx.tensor(g)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    # (PyTorch's celu_ gradient is off the exact exp(x / alpha) by up to 1e-7 relative;
    # the exact derivative, by finite differences, is checked below)
    close = 1e-7 if name == "celu_" else 1e-12
    np.testing.assert_allclose(leaf_h.grad.numpy(), leaf_t.grad.numpy(), rtol=close)
    assert hx.autograd.gradcheck(lambda x: getattr(F, name)(x * 1.5, *args),
                                 (hx.tensor(a + 0.01, requires_grad=True),))
    # a strided view, written through to its base (no graph recorded)
    base_t, base_h = torch.tensor(a), hx.tensor(a)
    getattr(TF, name)(base_t.T[1:], *args)
    getattr(F, name)(base_h.T[1:], *args)
    np.testing.assert_allclose(base_h.numpy(), base_t.numpy(), rtol=1e-12)
    # keywords bind as PyTorch's; a leaf that requires grad is refused
    if args:
        kwargs = dict(zip([p for p, _ in _parse(INPLACE[name][0])][1:], args))
        z = hx.tensor(a)
        getattr(F, name)(z, **kwargs)
        np.testing.assert_allclose(z.numpy(), getattr(TF, name)(torch.tensor(a), **kwargs),
                                   rtol=1e-12)
    with pytest.raises(RuntimeError, match="leaf"):
        getattr(F, name)(hx.tensor(a, requires_grad=True), *args)
    with pytest.raises(RuntimeError, match="leaf"):
        getattr(TF, name)(torch.tensor(a, requires_grad=True), *args)


def test_rrelu_in_place_while_training_scales_the_negatives_by_a_drawn_slope():
    x = hx.tensor(np.linspace(-3, 3, 200), requires_grad=True)
    y = x * 1.0
    F.rrelu_(y, 0.2, 0.4, training=True)
    y.sum().backward()
    slope = x.grad.numpy()
    neg = x.detach().numpy() < 0
    assert np.all(slope[~neg] == 1.0)
    assert np.all((slope[neg] >= 0.2) & (slope[neg] <= 0.4)) and np.unique(slope[neg]).size > 5
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy() * slope)


@pytest.mark.gpu
def test_inplace_activations_on_the_gpu_equal_the_cpu(be):
    a = np.random.default_rng(8).standard_normal((3, 5)).astype(np.float32)
    for name, (_, args) in INPLACE.items():
        if name == "rrelu_":
            continue  # (eval mode below: training draws)
        cpu, gpu = hx.tensor(a), hx.tensor(a, device="gpu")
        getattr(F, name)(cpu, *args)
        getattr(F, name)(gpu, *args)
        np.testing.assert_allclose(gpu.cpu().numpy(), cpu.numpy(), rtol=3e-6, atol=3e-6,
                                   err_msg=name)
    cpu, gpu = hx.tensor(a), hx.tensor(a, device="gpu")
    F.rrelu_(cpu)
    F.rrelu_(gpu)
    np.testing.assert_allclose(gpu.cpu().numpy(), cpu.numpy(), rtol=1e-6)
