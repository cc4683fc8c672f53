"""The lazy layers (nn.LazyLinear, LazyConv*, LazyConvTranspose*, LazyBatchNorm*,
LazyInstanceNorm*) with UninitializedParameter/Buffer, nn.BatchNorm3d/InstanceNorm3d,
and fractional max pooling (F.fractional_max_pool2d/3d, nn.FractionalMaxPool2d/3d),
each against PyTorch: signatures, reprs, state dicts, values and float64 gradients."""

from __future__ import annotations

import copy
import inspect
import pickle

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")
F, TF = hx.nn.functional, torch.nn.functional


def _params(sig):
    """(name, kind, default) of each parameter after self, annotations left out."""
    return [(p.name, p.kind, p.default) for p in list(sig.parameters.values())[1:]]


def _to_torch(ours, theirs):
    """Copy a Haelixe module's parameters and buffers into PyTorch's of the same shape."""
    with torch.no_grad():
        for (name, p), (tname, q) in zip(ours.state_dict().items(),
                                         theirs.state_dict().items()):
            assert name == tname
            q.copy_(torch.tensor(p.numpy()))


# -- the lazy layers ------------------------------------------------------------------------
#: name -> constructor arguments, and an input of the shape the first forward sees
LAZY = {
    "LazyLinear": ((3,), (2, 5)),
    "LazyConv1d": ((4, 3), (2, 2, 7)),
    "LazyConv2d": ((4, 3, 2, 1, 1, 2), (1, 6, 5, 6)),
    "LazyConv3d": ((2, (1, 2, 2)), (1, 3, 3, 4, 4)),
    "LazyConvTranspose1d": ((4, 3, 2), (2, 3, 5)),
    "LazyConvTranspose2d": ((4, 2, 1, 1, 0, 2), (1, 4, 3, 5)),
    "LazyConvTranspose3d": ((2, 2), (1, 2, 2, 3, 3)),
    "LazyBatchNorm1d": ((), (4, 3, 5)),
    "LazyBatchNorm2d": ((1e-3, 0.2), (3, 2, 4, 4)),
    "LazyBatchNorm3d": ((), (2, 3, 2, 3, 3)),
    "LazyInstanceNorm1d": ((), (2, 3, 6)),
    "LazyInstanceNorm2d": ((1e-5, 0.1, False), (2, 3, 4, 5)),
    "LazyInstanceNorm3d": ((), (2, 2, 3, 3, 3)),
}


@pytest.mark.parametrize("name", sorted(LAZY))
def test_each_lazy_layer_has_pytorchs_constructor(name):
    ours, theirs = getattr(hx.nn, name), getattr(torch.nn, name)
    assert _params(inspect.signature(ours.__init__)) == \
        _params(inspect.signature(theirs.__init__))
    args, _ = LAZY[name]
    assert repr(ours(*args)) == repr(theirs(*args))
    assert [n for n, _ in ours(*args).state_dict().items()] == \
        list(theirs(*args).state_dict())


@pytest.mark.parametrize("name", sorted(LAZY))
def test_each_lazy_layer_becomes_its_layer_and_computes_as_pytorchs(name):
    args, shape = LAZY[name]
    ours, theirs = getattr(hx.nn, name)(*args), getattr(torch.nn, name)(*args)
    before = {n: t for n, t in ours.state_dict(keep_vars=True).items()}
    assert all(hx.nn.is_lazy(t) for n, t in before.items() if n != "num_batches_tracked")
    a = np.random.default_rng(0).standard_normal(shape)
    x = hx.tensor(a, dtype=hx.float32)
    ours.double()  # (before the first forward: the placeholders take the dtype)
    y = ours(x.double())
    theirs.double()(torch.tensor(a))  # (a dry run: materialized as ours is)
    target = getattr(hx.nn, name[4:])
    assert type(ours) is target and type(theirs).__name__ == target.__name__
    assert repr(ours) == repr(theirs)
    assert ours._hooks is None  # (the initializing hook removed itself)
    after = ours.state_dict(keep_vars=True)
    for n, t in after.items():  # the same objects, now with memory
        assert t is before[n] and not hx.nn.is_lazy(t)
        assert t.shape == tuple(theirs.state_dict()[n].shape), n
        assert t.dtype is (hx.int64 if n == "num_batches_tracked" else hx.float64)
    assert ours.weight is None or type(ours.weight) is hx.nn.Parameter
    # the same computation as PyTorch's, from the same state: values and float64 gradients
    ours2, theirs2 = getattr(hx.nn, name)(*args).double(), \
        getattr(torch.nn, name)(*args).double()
    ours2(x.double())
    theirs2(torch.tensor(a))
    _to_torch(ours2, theirs2)
    xh = hx.tensor(a, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    yh, yt = ours2(xh), theirs2(xt)
    np.testing.assert_allclose(yh.detach().numpy(), yt.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    g = np.random.default_rng(1).standard_normal(yt.shape)
    yh.backward(hx.tensor(g))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(xh.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    for (n, p), (_, q) in zip(ours2.named_parameters(), theirs2.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=n)
    for n, b in ours2.named_buffers():
        np.testing.assert_allclose(b.numpy(), dict(theirs2.named_buffers())[n].numpy(),
                                   rtol=1e-10, err_msg=n)
    assert y.shape == tuple(yt.shape)


@pytest.mark.parametrize("name,fresh", [
    ("LazyLinear", lambda: hx.nn.Linear(5, 3)),
    ("LazyConv2d", lambda: hx.nn.Conv2d(6, 4, 3, 2, 1, 1, 2)),
    ("LazyConvTranspose1d", lambda: hx.nn.ConvTranspose1d(3, 4, 3, 2))])
def test_a_lazy_layer_initialises_as_the_layer_it_becomes(name, fresh):
    args, shape = LAZY[name]
    lazy = getattr(hx.nn, name)(*args)
    hx.manual_seed(7)
    lazy(hx.zeros(*shape))
    hx.manual_seed(7)
    plain = fresh()
    for (n, p), (_, q) in zip(lazy.named_parameters(), plain.named_parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(), err_msg=n)
    assert repr(lazy) == repr(plain)


def test_lazy_norms_start_from_ones_zeros_and_fresh_statistics():
    bn = hx.nn.LazyBatchNorm1d(momentum=None)
    a = np.random.default_rng(2).standard_normal((6, 4))
    bn(hx.tensor(a, dtype=hx.float32))
    tbn = torch.nn.BatchNorm1d(4, momentum=None)
    tbn(torch.tensor(a, dtype=torch.float32))
    np.testing.assert_array_equal(bn.weight.detach().numpy(), np.ones(4))
    np.testing.assert_array_equal(bn.bias.detach().numpy(), np.zeros(4))
    np.testing.assert_allclose(bn.running_mean.numpy(), tbn.running_mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), tbn.running_var.numpy(), rtol=1e-6)
    assert int(bn.num_batches_tracked) == 1
    plain = hx.nn.LazyInstanceNorm2d(affine=False, track_running_stats=False)
    assert plain.state_dict() == {} and not plain.has_uninitialized_params()
    plain(hx.ones(1, 2, 3, 3))  # (nothing to infer: it becomes the layer at once)
    assert type(plain) is hx.nn.InstanceNorm2d and plain.num_features == 0
    nobias = hx.nn.LazyBatchNorm2d(bias=False)
    nobias(hx.ones(2, 3, 2, 2))
    assert nobias.bias is None and nobias.weight.shape == (3,)
    assert repr(nobias) == repr(torch.nn.BatchNorm2d(3, bias=False))


def test_uninitialized_parameters_and_buffers_say_what_to_do():
    p = hx.nn.UninitializedParameter()
    b = hx.nn.UninitializedBuffer(dtype=hx.float64)
    assert repr(p) == "<UninitializedParameter>" and repr(b) == "<UninitializedBuffer>"
    assert isinstance(p, hx.nn.Parameter) and p.requires_grad and p.dtype is hx.float32
    assert not isinstance(b, hx.nn.Parameter) and not b.requires_grad
    assert hx.nn.is_lazy(p) and hx.nn.is_lazy(b) and not hx.nn.is_lazy(hx.ones(1))
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized "
                                           "parameter or buffer"):
        p.shape  # noqa: B018
    with pytest.raises((RuntimeError, ValueError), match="uninitialized parameter"):
        p + 1
    with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter"):
        b.numpy()
    with pytest.raises(RuntimeError, match="Can't share memory"):
        p.share_memory_()
    p.materialize((2, 3))
    b.materialize(4)
    assert type(p) is hx.nn.Parameter and p.shape == (2, 3) and p.requires_grad
    assert type(b) is hx.Tensor and b.shape == (4,) and b.dtype is hx.float64
    m = hx.nn.LazyLinear(2)
    with pytest.raises(RuntimeError, match="Can't access the shape"):
        m.weight.shape  # noqa: B018
    twin = copy.deepcopy(m)
    assert twin.weight is not m.weight and hx.nn.is_lazy(twin.weight)
    twin(hx.ones(1, 7))
    assert type(twin) is hx.nn.Linear and hx.nn.is_lazy(m.weight)
    pickled = pickle.loads(pickle.dumps(hx.nn.LazyLinear(2).double()))
    assert hx.nn.is_lazy(pickled.weight) and pickled.weight.dtype is hx.float64
    pickled(hx.ones(1, 3, dtype=hx.float64))
    assert type(pickled) is hx.nn.Linear and pickled.weight.shape == (2, 3)


def test_a_lazy_layer_loads_an_initialized_state_and_keeps_it():
    source = hx.nn.Linear(5, 3)
    lazy, tlazy = hx.nn.LazyLinear(3), torch.nn.LazyLinear(3)
    assert lazy.load_state_dict(source.state_dict()) == ([], [])
    tlazy.load_state_dict({k: torch.tensor(v.numpy()) for k, v in
                           source.state_dict().items()})
    assert type(lazy) is hx.nn.LazyLinear and lazy.weight.shape == (3, 5)
    assert not lazy.has_uninitialized_params()
    lazy(hx.ones(2, 5))
    tlazy(torch.ones(2, 5))
    assert type(lazy) is hx.nn.Linear and repr(lazy) == repr(tlazy)  # (in_features=5)
    np.testing.assert_array_equal(lazy.weight.detach().numpy(),
                                  source.weight.detach().numpy())
    with pytest.raises(RuntimeError, match="in_features inferred from input: 4 is not "
                                           "equal to in_features from self.weight: 5"):
        loaded = hx.nn.LazyLinear(3)
        loaded.load_state_dict(source.state_dict())
        loaded(hx.ones(2, 4))
    # PyTorch's convolutions and norms keep the 0 they were made with
    conv, tconv = hx.nn.LazyConv1d(2, 3), torch.nn.LazyConv1d(2, 3)
    state = hx.nn.Conv1d(4, 2, 3).state_dict()
    conv.load_state_dict(state)
    tconv.load_state_dict({k: torch.tensor(v.numpy()) for k, v in state.items()})
    conv(hx.ones(1, 4, 6))
    tconv(torch.ones(1, 4, 6))
    assert repr(conv) == repr(tconv) == "Conv1d(0, 2, kernel_size=(3,), stride=(1,))"
    # a placeholder into an initialized layer: PyTorch's error; into a lazy one: nothing
    with pytest.raises(RuntimeError, match="Can't access the shape"):
        hx.nn.Linear(5, 3).load_state_dict(hx.nn.LazyLinear(3).state_dict())
    other = hx.nn.LazyLinear(3)
    other.load_state_dict(hx.nn.LazyLinear(3).state_dict())
    assert other.has_uninitialized_params()
    # nested: a lazy layer inside a Sequential gets its shapes under its prefix
    net = hx.nn.Sequential(hx.nn.LazyConv1d(2, 3), hx.nn.ReLU(), hx.nn.LazyLinear(4))
    full = hx.nn.Sequential(hx.nn.Conv1d(3, 2, 3), hx.nn.ReLU(), hx.nn.Linear(5, 4))
    net.load_state_dict(full.state_dict())
    assert net[0].weight.shape == (2, 3, 3) and net[2].weight.shape == (4, 5)
    np.testing.assert_array_equal(net(hx.ones(1, 3, 7)).detach().numpy(),
                                  full(hx.ones(1, 3, 7)).detach().numpy())


def test_a_lazy_layer_refuses_what_pytorchs_refuses():
    with pytest.raises(RuntimeError, match="Expected 2D \\(unbatched\\) or 3D \\(batched\\) "
                                           "input to LazyConv1d"):
        hx.nn.LazyConv1d(2, 3)(hx.ones(1, 1, 2, 5))
    with pytest.raises(ValueError, match="must be divisible by groups"):
        hx.nn.LazyConv2d(4, 3, groups=2)(hx.ones(1, 3, 5, 5))
    m = hx.nn.LazyLinear(2)
    m(hx.ones(3, 4))
    with pytest.raises(RuntimeError):  # (now a Linear of 4 features)
        m(hx.ones(3, 5))
    # unbatched: a convolution reads dim 0
    c = hx.nn.LazyConv1d(2, 3)
    assert c(hx.ones(5, 7)).shape == (2, 5) and c.in_channels == 5
    # PyTorch's optimizers take the placeholders; Haelixe's pack parameters when built
    with pytest.raises(ValueError, match="uninitialized parameter .* run one forward"):
        hx.optim.SGD(hx.nn.LazyLinear(2).parameters(), lr=0.1)
    lazy = hx.nn.LazyLinear(2)
    lazy(hx.ones(1, 3))
    opt = hx.optim.SGD(lazy.parameters(), lr=0.5)
    lazy(hx.ones(1, 3)).sum().backward()
    before = lazy.bias.detach().numpy().copy()
    opt.step()
    np.testing.assert_allclose(lazy.bias.detach().numpy(), before - 0.5)


def test_batch_norm3d_and_instance_norm3d_match_pytorch():
    a = np.random.default_rng(3).standard_normal((2, 3, 2, 3, 4))
    for ours, theirs in ((hx.nn.BatchNorm3d(3, momentum=0.3),
                          torch.nn.BatchNorm3d(3, momentum=0.3)),
                         (hx.nn.InstanceNorm3d(3, affine=True, track_running_stats=True),
                          torch.nn.InstanceNorm3d(3, affine=True, track_running_stats=True))):
        ours.double()
        theirs.double()
        assert repr(ours) == repr(theirs)
        xh, xt = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        yh, yt = ours(xh), theirs(xt)
        np.testing.assert_allclose(yh.detach().numpy(), yt.detach().numpy(), atol=1e-10)
        yh.pow(3).sum().backward()
        yt.pow(3).sum().backward()
        np.testing.assert_allclose(xh.grad.numpy(), xt.grad.numpy(), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(),
                                   rtol=1e-8)
        np.testing.assert_allclose(ours.running_var.numpy(), theirs.running_var.numpy(),
                                   rtol=1e-10)
        ours.eval()
        theirs.eval()
        np.testing.assert_allclose(ours(xh).detach().numpy(), theirs(xt).detach().numpy(),
                                   atol=1e-10)
    with pytest.raises(ValueError, match="expected 5D input"):
        hx.nn.BatchNorm3d(3)(hx.ones(2, 3, 4, 4))
    assert hx.nn.InstanceNorm3d(3)(hx.randn(3, 2, 3, 4)).shape == (3, 2, 3, 4)


@pytest.mark.gpu
def test_a_lazy_layer_moved_to_the_gpu_materializes_there(be):
    m = hx.nn.LazyLinear(3).to("gpu")
    hx.manual_seed(0)
    y = m(hx.ones(2, 4, device="gpu"))
    assert m.weight.device.type == "gpu" and y.device.type == "gpu"
    hx.manual_seed(0)
    ref = hx.nn.Linear(4, 3)
    np.testing.assert_allclose(y.cpu().detach().numpy(),
                               ref(hx.ones(2, 4)).detach().numpy(), rtol=1e-5)


# -- fractional max pooling -------------------------------------------------------------------
def _case(rng, d):
    nb, c = (int(v) for v in rng.integers(1, 3, 2))
    spatial = tuple(int(v) for v in rng.integers(3, 10 if d == 2 else 7, d))
    kernel = tuple(int(rng.integers(1, min(4, n - 1) + 1)) for n in spatial)
    # (the largest output each dim takes: PyTorch's 3-D kernel keeps one cell spare)
    out = tuple(int(rng.integers(1, n - k + 2 - (d == 3))) for n, k in zip(spatial, kernel))
    return (nb, c) + spatial, kernel, out


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_fractional_max_pool_takes_pytorchs_windows_for_given_samples(d, dtype):
    rng = np.random.default_rng(d * 10 + len(dtype))
    ours, theirs = getattr(F, f"fractional_max_pool{d}d"), getattr(TF, f"fractional_max_pool{d}d")
    tdt = getattr(torch, dtype)
    for trial in range(25):
        shape, kernel, out = _case(rng, d)
        a = rng.standard_normal(shape)
        if trial % 4 == 0:
            a = np.round(a)  # (ties: the first of equal cells, as PyTorch's)
        t = torch.tensor(a).to(tdt)
        u = torch.rand(shape[0], shape[1], d, generator=torch.Generator().manual_seed(trial),
                       dtype=torch.float64).to(tdt)
        h = hx.tensor(t.double().numpy()).to(dtype)
        hu = hx.tensor(u.double().numpy()).to(dtype)
        ty, ti = theirs(t, kernel, out, return_indices=True, _random_samples=u)
        hy, hi = ours(h, kernel, out, return_indices=True, _random_samples=hu)
        assert hy.dtype.name == dtype and hi.dtype is hx.int64
        np.testing.assert_array_equal(hi.numpy(), ti.numpy(), err_msg=f"{shape} {kernel} {out}")
        np.testing.assert_array_equal(hy.float().numpy(), ty.float().numpy())
        assert np.array_equal(ours(h, kernel, out, _random_samples=hu).float().numpy(),
                              ty.float().numpy())


def test_fractional_max_pool_by_ratio_unbatched_and_strided_inputs():
    a = np.random.default_rng(4).standard_normal((3, 2, 11, 9))
    u = torch.rand(3, 2, 2, dtype=torch.float64)
    for ratio in ((0.5, 0.7), [0.9, 0.5]):
        want = TF.fractional_max_pool2d(torch.tensor(a), 2, output_ratio=ratio,
                                        _random_samples=u)
        got = F.fractional_max_pool2d(hx.tensor(a), 2, output_ratio=ratio,
                                      _random_samples=hx.tensor(u.numpy()))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # unbatched: (C, H, W) with samples (1, C, 2); a strided view of the input
    view = hx.tensor(a).transpose(2, 3)[0]
    tview = torch.tensor(a).transpose(2, 3)[0]
    want = TF.fractional_max_pool2d(tview, (3, 2), (4, 5), return_indices=True,
                                    _random_samples=u[:1])
    got = F.fractional_max_pool2d(view, (3, 2), (4, 5), return_indices=True,
                                  _random_samples=hx.tensor(u.numpy())[:1])
    assert got[0].shape == (2, 4, 5)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    # NaN: PyTorch's kernel keeps the last NaN of a window
    nan = np.arange(32.0).reshape(2, 1, 4, 4)
    nan[0, 0, 0, 1] = nan[0, 0, 1, 0] = nan[1, 0, 3, 3] = np.nan
    un = torch.tensor([[[0.3, 0.6]], [[0.9, 0.1]]], dtype=torch.float64)
    want = TF.fractional_max_pool2d(torch.tensor(nan), 2, 2, return_indices=True,
                                    _random_samples=un)
    got = F.fractional_max_pool2d(hx.tensor(nan), 2, 2, return_indices=True,
                                  _random_samples=hx.tensor(un.numpy()))
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    assert got[1].numpy()[0, 0, 0, 0] == 4
    # an empty batch, an empty output
    assert F.fractional_max_pool2d(hx.ones(0, 2, 5, 5), 2, 3).shape == (0, 2, 3, 3)
    assert F.fractional_max_pool3d(hx.ones(1, 1, 4, 4, 4), 2, (0, 2, 2)).shape == \
        (1, 1, 0, 2, 2)


@pytest.mark.parametrize("d", [2, 3])
def test_fractional_max_pool_gradient_goes_to_the_max_cells_as_pytorchs(d):
    rng = np.random.default_rng(5 + d)
    shape = (2, 2) + ((7, 8) if d == 2 else (5, 6, 5))
    kernel, out = ((3, 2), (4, 6)) if d == 2 else ((2, 3, 2), (3, 2, 3))
    a = rng.standard_normal(shape)
    u = torch.rand(2, 2, d, dtype=torch.float64, generator=torch.Generator().manual_seed(d))
    xt = torch.tensor(a, requires_grad=True)
    xh = hx.tensor(a, requires_grad=True)
    yt = getattr(TF, f"fractional_max_pool{d}d")(xt, kernel, out, _random_samples=u)
    yh = getattr(F, f"fractional_max_pool{d}d")(xh, kernel, out,
                                                _random_samples=hx.tensor(u.numpy()))
    g = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(g))
    yh.backward(hx.tensor(g))
    np.testing.assert_allclose(xh.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    assert (xh.grad.numpy() != 0).sum() > 0
    # (overlapping windows: a cell two windows picked gets both gradients)
    xh2 = hx.tensor(a, requires_grad=True)
    hu = hx.tensor(u.numpy())
    assert hx.autograd.gradcheck(
        lambda x: getattr(F, f"fractional_max_pool{d}d")(x, kernel, out, _random_samples=hu),
        (xh2,))


def test_fractional_max_pool_without_samples_draws_them_from_the_generator():
    x = hx.randn(2, 3, 9, 9)
    hx.manual_seed(3)
    y1, i1 = F.fractional_max_pool2d(x, 2, (4, 5), return_indices=True)
    hx.manual_seed(3)
    y2 = F.fractional_max_pool2d(x, 2, (4, 5))
    np.testing.assert_array_equal(y1.numpy(), y2.numpy())
    flat = x.reshape(2, 3, -1).numpy()
    np.testing.assert_array_equal(np.take_along_axis(flat, i1.reshape(2, 3, -1).numpy(), 2),
                                  y1.reshape(2, 3, -1).numpy())
    draws = {tuple(F.fractional_max_pool2d(x, 2, (4, 5), return_indices=True)[1]
                   .reshape(-1).tolist()) for _ in range(8)}
    assert len(draws) > 1  # (fresh samples on each call)


def test_fractional_max_pool_refuses_what_pytorchs_refuses():
    x = hx.ones(2, 3, 7, 9)
    with pytest.raises(ValueError, match="requires specifying either an output_size or an "
                                         "output_ratio"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(RuntimeError, match="pool height 2 too large relative to input "
                                           "height 7"):
        F.fractional_max_pool2d(x, 2, 7)
    assert F.fractional_max_pool2d(x, 2, (6, 8)).shape == (2, 3, 6, 8)  # (the largest)
    with pytest.raises(RuntimeError, match="pool time 1 too large relative to input time 5"):
        F.fractional_max_pool3d(hx.ones(1, 1, 5, 5, 5), 1, 5)
    for samples, what in ((hx.rand(2, 3, 3), r"\(N, C, 2\)"), (hx.rand(1, 3, 2), "batch size 2"),
                          (hx.rand(2, 3, 2, dtype=hx.float64), "dtype float64")):
        with pytest.raises(RuntimeError, match=what):
            F.fractional_max_pool2d(x, 2, 3, _random_samples=samples)
        with pytest.raises(RuntimeError):
            TF.fractional_max_pool2d(torch.ones(2, 3, 7, 9), 2, 3,
                                     _random_samples=torch.tensor(samples.numpy()))
    with pytest.raises(TypeError, match="not defined for int64"):
        F.fractional_max_pool2d(hx.ones(1, 1, 5, 5, dtype=hx.int64), 2, 3)
    with pytest.raises(RuntimeError, match="expected a 3-D \\(unbatched\\) or 4-D"):
        F.fractional_max_pool2d(hx.ones(5, 5), 2, 3)


@pytest.mark.parametrize("d", [2, 3])
def test_fractional_max_pool_layers_are_pytorchs(d):
    name = f"FractionalMaxPool{d}d"
    ours, theirs = getattr(hx.nn, name), getattr(torch.nn, name)
    assert _params(inspect.signature(ours.__init__)) == \
        _params(inspect.signature(theirs.__init__))
    layer, tlayer = ours(2, output_ratio=0.5), theirs(2, output_ratio=0.5)
    assert repr(layer) == repr(tlayer) == f"{name}()"
    for attr in ("kernel_size", "output_size", "output_ratio", "return_indices"):
        assert getattr(layer, attr) == getattr(tlayer, attr), attr
    assert list(layer.state_dict()) == list(tlayer.state_dict()) == []
    shape = (2, 3) + (8,) * d
    u = torch.rand(2, 3, d, dtype=torch.float64)
    fixed = ours(3, output_size=3, return_indices=True, _random_samples=hx.tensor(u.numpy()))
    tfixed = theirs(3, output_size=3, return_indices=True, _random_samples=u)
    assert list(fixed.state_dict()) == list(tfixed.state_dict()) == ["_random_samples"]
    a = np.random.default_rng(d).standard_normal(shape)
    got, want = fixed(hx.tensor(a)), tfixed(torch.tensor(a))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert layer(hx.tensor(a)).shape == tuple(tlayer(torch.tensor(a)).shape)
    for kwargs, message in (({}, "requires specifying either an output size, or a pooling "
                                 "ratio"),
                            ({"output_size": 2, "output_ratio": 0.5}, "only one of"),
                            ({"output_ratio": 1.5}, "between 0 and 1")):
        with pytest.raises(ValueError, match=message):
            ours(2, **kwargs)
        with pytest.raises(ValueError, match=message):
            theirs(2, **kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [2, 3])
def test_fractional_max_pool_on_the_gpu_equals_the_cpu(be, d):
    a = np.random.default_rng(9).standard_normal((1, 2) + (6,) * d).astype(np.float32)
    u = np.random.default_rng(10).random((1, 2, d)).astype(np.float32)
    pool = getattr(F, f"fractional_max_pool{d}d")
    results = []
    for device in ("cpu", "gpu"):
        x = hx.tensor(a, device=device, requires_grad=True)
        y, i = pool(x, 2, 3, return_indices=True,
                    _random_samples=hx.tensor(u, device=device))
        (y * y).sum().backward()
        results.append((y.detach().cpu().numpy(), i.cpu().numpy(), x.grad.cpu().numpy()))
    for c, g in zip(*results):
        np.testing.assert_allclose(g, c, rtol=1e-6)


def test_lazy_layers_keep_their_options_through_the_first_forward():
    a = np.random.default_rng(11).standard_normal((2, 3, 9))
    cases = [(hx.nn.LazyLinear(4, bias=False), torch.nn.LazyLinear(4, bias=False)),
             (hx.nn.LazyConv1d(2, 3, padding="same", padding_mode="reflect", bias=False),
              torch.nn.LazyConv1d(2, 3, padding="same", padding_mode="reflect", bias=False)),
             (hx.nn.LazyConvTranspose1d(2, 3, 2, 1, 1, dilation=2),
              torch.nn.LazyConvTranspose1d(2, 3, 2, 1, 1, dilation=2))]
    for ours, theirs in cases:
        ours.double()
        theirs.double()
        ours(hx.tensor(a))
        theirs(torch.tensor(a))
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        _to_torch(ours, theirs)
        np.testing.assert_allclose(ours(hx.tensor(a)).detach().numpy(),
                                   theirs(torch.tensor(a)).detach().numpy(), rtol=1e-10)
