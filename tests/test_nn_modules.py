"""nn modules, nn.init and the Module API against PyTorch: activations and loss modules,
Embedding(padding_idx), LayerNorm's options, buffers (persistent or not), dtype and
device moves, a tied-weight model loading a PyTorch state dict strictly, the bounded
RoPE tables (issue 14, item 13), and errors that name the closest thing."""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest
from torch_ref import against_torch

import haelixe as hx
from haelixe import nn
from haelixe.nn import functional as F

torch = pytest.importorskip("torch")
tnn = torch.nn

DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


@pytest.fixture(params=DEVICES)
def device(request):
    if request.param == "gpu":
        request.getfixturevalue("be")
    return request.param


def randn(*shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def tol(device):
    return dict(rtol=1e-5, atol=1e-6) if device == "cpu" else dict(rtol=1e-4, atol=2e-5)


def copy_weights(ours, theirs):
    """PyTorch's parameters and buffers into ours, by state-dict key."""
    sd = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    ours.load_state_dict(sd)


# -- activation, shape and loss modules ----------------------------------------------------
MODULES = {
    "Sigmoid": (lambda m: m.Sigmoid(), (3, 4)),
    "Tanh": (lambda m: m.Tanh(), (3, 4)),
    "ReLU": (lambda m: m.ReLU(), (3, 4)),
    "GELU": (lambda m: m.GELU(), (3, 4)),
    "GELU tanh": (lambda m: m.GELU(approximate="tanh"), (3, 4)),
    "SiLU": (lambda m: m.SiLU(), (3, 4)),
    "Softplus": (lambda m: m.Softplus(beta=2.0, threshold=3.0), (3, 4)),
    "Identity": (lambda m: m.Identity(54, unused="arguments"), (3, 4)),
    "Flatten": (lambda m: m.Flatten(), (2, 3, 4)),
    "Flatten 0..1": (lambda m: m.Flatten(0, 1), (2, 3, 4)),
    "Softmax": (lambda m: m.Softmax(dim=1), (2, 3, 4)),
    "LogSoftmax": (lambda m: m.LogSoftmax(dim=-1), (2, 3, 4)),
    "Dropout eval": (lambda m: m.Dropout(0.5).eval(), (3, 4)),
    "Dropout p=0": (lambda m: m.Dropout(0.0), (3, 4)),
    "Sequential": (lambda m: m.Sequential(m.Flatten(), m.Tanh(), m.Identity()), (2, 3, 4)),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_equal_pytorch(device, name):
    make, shape = MODULES[name]
    ours, theirs = make(nn), make(tnn)
    assert repr(ours).split("(")[0] == repr(theirs).split("(")[0]
    against_torch(ours, theirs, randn(*shape, seed=1, scale=2.0), device=device, what=name,
                  **tol(device))


LOSSES = {
    "MSELoss": (lambda m, w: m.MSELoss(), "regression"),
    "L1Loss sum": (lambda m, w: m.L1Loss(reduction="sum"), "regression"),
    "SmoothL1Loss": (lambda m, w: m.SmoothL1Loss(beta=0.5), "regression"),
    "HuberLoss": (lambda m, w: m.HuberLoss(reduction="none", delta=0.5), "regression"),
    "CrossEntropyLoss": (lambda m, w: m.CrossEntropyLoss(weight=w, ignore_index=1,
                                                         label_smoothing=0.1), "classes"),
    "NLLLoss": (lambda m, w: m.NLLLoss(weight=w, reduction="sum"), "log-probabilities"),
    "BCEWithLogitsLoss": (lambda m, w: m.BCEWithLogitsLoss(pos_weight=w), "binary"),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_modules_equal_pytorch(device, name):
    make, kind = LOSSES[name]
    w = np.array([0.5, 1.0, 2.0, 1.5], np.float32)
    ours = make(nn, hx.tensor(w)).to(device)
    theirs = make(tnn, torch.tensor(w))
    x = randn(6, 4, seed=2, scale=2.0)
    if kind == "regression":
        y = randn(6, 4, seed=3)
    elif kind == "binary":
        y = np.random.default_rng(3).random((6, 4)).astype(np.float32)
    else:
        y = np.array([0, 1, 3, 2, 1, 0], np.int64)
        if kind == "log-probabilities":
            x = np.log(np.random.default_rng(4).dirichlet(np.ones(4), 6)).astype(np.float32)
    assert set(ours.state_dict()) == set(theirs.state_dict())  # weights are buffers
    against_torch(ours, theirs, x, y, device=device, what=name, **tol(device))


# -- Embedding and LayerNorm -----------------------------------------------------------------
def test_embedding_padding_idx(device):
    hx.manual_seed(0)
    emb = nn.Embedding(7, 3, padding_idx=2)
    assert not emb.weight.detach().numpy()[2].any()  # the padding row starts at zero
    temb = tnn.Embedding(7, 3, padding_idx=2)
    copy_weights(emb, temb)
    emb.to(device)
    idx = hx.tensor([[2, 0, 2], [6, 2, 1]], device=device)
    tidx = torch.tensor([[2, 0, 2], [6, 2, 1]])
    (emb(idx) * emb(idx)).sum().backward()
    (temb(tidx) * temb(tidx)).sum().backward()
    np.testing.assert_allclose(emb.weight.grad.numpy(), temb.weight.grad.numpy(), rtol=1e-5)
    assert not emb.weight.grad.numpy()[2].any()
    assert "padding_idx=2" in repr(emb)
    with pytest.raises(ValueError, match="padding_idx 9 is outside"):
        nn.Embedding(7, 3, padding_idx=9)
    assert nn.Embedding(7, 3, padding_idx=-1).padding_idx == 6


@pytest.mark.parametrize("shape", [5, (4, 5)])
@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, True)])
def test_layernorm_options(device, shape, affine, bias):
    ours = nn.LayerNorm(shape, eps=1e-3, elementwise_affine=affine, bias=bias)
    theirs = tnn.LayerNorm(shape, eps=1e-3, elementwise_affine=affine, bias=bias)
    assert set(ours.state_dict()) == set(theirs.state_dict())
    if affine:
        with torch.no_grad():
            theirs.weight.copy_(torch.linspace(0.5, 1.5, theirs.weight.numel()).reshape(
                theirs.weight.shape))
            if bias:
                theirs.bias.copy_(torch.linspace(-1, 1, theirs.bias.numel()).reshape(
                    theirs.bias.shape))
        copy_weights(ours, theirs)
    ours.to(device)
    x = randn(2, 3, 4, 5, seed=5, scale=3.0) + 2.0
    xo, xt = hx.tensor(x, device=device, requires_grad=True), torch.tensor(x,
                                                                           requires_grad=True)
    g = randn(2, 3, 4, 5, seed=6)
    ours(xo).backward(hx.tensor(g, device=device))
    theirs(xt).backward(torch.tensor(g))
    np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=5e-5)
    for n, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), dict(theirs.named_parameters())[n].grad,
                                   rtol=1e-4, atol=5e-5, err_msg=n)


# -- buffers, dtypes, devices -------------------------------------------------------------------
def with_buffers(lib):
    """The same module, with buffers of every kind, in either library."""
    mod, make = (nn, hx.tensor) if lib is hx else (tnn, torch.tensor)

    class WithBuffers(mod.Module):
        def __init__(self):
            super().__init__()
            self.lin = mod.Linear(3, 2)
            self.register_buffer("scale", make([1.0, 2.0]))
            self.register_buffer("steps", make([3, 4]))  # an integer buffer
            self.register_buffer("cache", make([0.5, 0.5, 0.5]), persistent=False)
            self.register_buffer("nothing", None)

    return WithBuffers()


def test_register_buffer_persistent_and_state_dict_keys():
    ours, theirs = with_buffers(hx), with_buffers(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert "cache" not in ours.state_dict()
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    ours.cache = hx.tensor([9.0, 9.0, 9.0])  # reassigned: still a (non-persistent) buffer
    assert "cache" in dict(ours.named_buffers()) and "cache" not in ours.state_dict()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    with pytest.raises(KeyError, match="already exists"):
        ours.register_buffer("lin", hx.zeros(1))
    with pytest.raises(TypeError, match="tensor or None"):
        ours.register_buffer("x", [1.0])
    with pytest.raises(KeyError, match="without '.'"):
        ours.register_buffer("a.b", hx.zeros(1))


@pytest.mark.parametrize("method,dtype", [("double", hx.float64), ("half", hx.float16),
                                          ("bfloat16", hx.bfloat16), ("float", hx.float32)])
def test_dtype_methods_cast_floating_tensors_only(method, dtype):
    m = with_buffers(hx)
    weight = m.lin.weight
    assert getattr(m, method)() is m
    assert m.lin.weight is weight and weight.dtype is dtype and m.lin.bias.dtype is dtype
    assert m.scale.dtype is dtype and m.cache.dtype is dtype
    assert m.steps.dtype is hx.int64  # integer buffers keep their dtype


def test_to_parses_devices_and_dtypes_with_the_package_parser():
    m = with_buffers(hx)
    m.to(dtype="float64")
    assert m.lin.weight.dtype is hx.float64
    m.to(hx.tensor([1.0]))  # a tensor's dtype and device
    assert m.lin.weight.dtype is hx.float32
    m.to("cpu", "bf16", non_blocking=True)
    assert m.scale.dtype is hx.bfloat16
    with pytest.raises(ValueError, match="neither a device"):
        m.to("float33")
    with pytest.raises(TypeError, match="only floating dtypes"):
        m.to(hx.int64)


def test_to_keeps_gradients_with_their_parameters():
    m = nn.Linear(3, 2)
    m(hx.ones(1, 3)).sum().backward()
    m.double()
    assert m.weight.grad.dtype is hx.float64 and m.weight.grad.shape == (2, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["wgpu", "gpu", "cuda"])
def test_to_gpu_moves_integer_buffers_too(be, name):
    m = with_buffers(hx)
    m.to(name)
    for n, t in list(m.named_parameters()) + list(m.named_buffers()):
        assert t.device.type == "gpu", n
    np.testing.assert_array_equal(m.steps.numpy(), [3, 4])
    m.cpu()
    assert all(t.device.type == "cpu" for _, t in m.named_buffers())


# -- a model with tied weights loads PyTorch's state dict strictly --------------------------
def tiny_lm(lib, vocab=11, dim=8):
    mod = nn if lib is hx else tnn

    class TinyLM(mod.Module):
        def __init__(self):
            super().__init__()
            self.tok = mod.Embedding(vocab, dim)
            self.norm = mod.LayerNorm(dim)
            self.mlp = mod.Sequential(mod.Linear(dim, 2 * dim), mod.GELU(),
                                      mod.Linear(2 * dim, dim))
            self.head = mod.Linear(dim, vocab, bias=False)
            self.head.weight = self.tok.weight  # tied: one parameter, two names
            self.register_buffer("positions", (hx if lib is hx else torch).arange(vocab))

        def forward(self, idx):
            h = self.tok(idx)
            h = h + self.mlp(self.norm(h))
            return self.head(self.norm(h))

    return TinyLM()


def test_tied_weights_load_a_pytorch_checkpoint_strictly():
    torch.manual_seed(0)
    theirs = tiny_lm(torch)
    saved = {k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()}
    assert "tok.weight" in saved and "head.weight" in saved  # both names, as PyTorch
    ours = tiny_lm(hx)
    assert list(ours.state_dict()) == list(saved)
    assert len(list(ours.parameters())) == len(list(theirs.parameters()))  # tied once
    result = ours.load_state_dict(saved, strict=True)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert ours.head.weight is ours.tok.weight
    idx = np.array([[1, 5, 7, 2], [0, 10, 3, 3]], np.int64)
    targets = np.array([[5, 7, 2, 0], [10, 3, 3, 1]], np.int64)
    out, tout = ours(hx.tensor(idx)), theirs(torch.tensor(idx))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    loss = F.cross_entropy(out.reshape(-1, 11), hx.tensor(targets.reshape(-1)))
    tloss = torch.nn.functional.cross_entropy(tout.reshape(-1, 11),
                                              torch.tensor(targets.reshape(-1)))
    loss.backward()
    tloss.backward()
    assert loss.item() == pytest.approx(tloss.item(), rel=1e-5)
    np.testing.assert_allclose(ours.tok.weight.grad.numpy(), theirs.tok.weight.grad.numpy(),
                               rtol=1e-4, atol=1e-6)
    # strict loading names what is wrong, and writes nothing
    before = ours.norm.weight.detach().numpy().copy()
    partial = dict(saved)
    partial["norm.weight"] = np.zeros(8, np.float32)
    del partial["head.weight"]
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "head.weight"'):
        ours.load_state_dict(partial)
    np.testing.assert_array_equal(ours.norm.weight.detach().numpy(), before)
    bad = dict(saved, **{"norm.bias": np.zeros(3, np.float32)})
    with pytest.raises(RuntimeError, match="size mismatch for norm.bias"):
        ours.load_state_dict(bad)
    np.testing.assert_array_equal(ours.norm.weight.detach().numpy(), before)


# -- nn.init ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 7), (6, 3, 2, 2), (4, 2, 3)])
def test_init_fans_and_gains_match_pytorch(shape):
    t = hx.empty(*shape)
    assert nn.init._calculate_fan_in_and_fan_out(t) == \
        tnn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    for name, param in (("linear", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                        ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None),
                        ("conv2d", None), ("leaky_relu", 0)):
        assert nn.init.calculate_gain(name, param) == tnn.init.calculate_gain(name, param)
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        nn.init.calculate_gain("swish")
    with pytest.raises(ValueError, match="at least 2 dims"):
        nn.init.xavier_uniform_(hx.empty(5))


INITS = {  # name -> (call, expected bound or None, expected std)
    "uniform_": (lambda t: nn.init.uniform_(t, -0.3, 0.7), (-0.3, 0.7), 1 / math.sqrt(12)),
    "normal_": (lambda t: nn.init.normal_(t, 0.5, 0.2), None, 0.2),
    "xavier_uniform_": (lambda t: nn.init.xavier_uniform_(t, gain=2.0),
                        2.0 * math.sqrt(6 / (200 + 100)), 2.0 * math.sqrt(2 / 300)),
    "xavier_normal_": (nn.init.xavier_normal_, None, math.sqrt(2 / 300)),
    "kaiming_uniform_": (lambda t: nn.init.kaiming_uniform_(t, a=math.sqrt(5)),
                         1 / math.sqrt(100), 1 / math.sqrt(300)),
    "kaiming_normal_ fan_out relu": (
        lambda t: nn.init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu"),
        None, math.sqrt(2) / math.sqrt(200)),
    "trunc_normal_": (lambda t: nn.init.trunc_normal_(t, 0.0, 1.0, -2.0, 2.0), (-2.0, 2.0),
                      math.sqrt(1 - 4 * math.exp(-2) / math.sqrt(2 * math.pi)
                                / math.erf(2 / math.sqrt(2)))),
}


@pytest.mark.parametrize("name", sorted(INITS))
def test_init_distributions(name):
    call, bound, std = INITS[name]
    w = nn.Parameter(hx.empty(200, 100))  # requires grad: init runs under no_grad
    hx.manual_seed(3)
    assert call(w) is w and w.grad_fn is None and w.requires_grad
    a = w.detach().numpy()
    assert a.std() == pytest.approx(std, rel=0.03)
    if isinstance(bound, tuple):
        assert bound[0] <= a.min() < bound[0] + 0.05 and bound[1] - 0.05 < a.max() <= bound[1]
    elif bound is not None:
        assert np.abs(a).max() <= bound and np.abs(a).max() > 0.95 * bound
    # the same seed draws the same values; a numpy generator draws its own
    hx.manual_seed(3)
    np.testing.assert_array_equal(call(hx.empty(200, 100)).numpy(), a)


def test_init_constants_and_generator():
    t = hx.empty(3, 4)
    assert not nn.init.zeros_(t).numpy().any()
    assert (nn.init.ones_(t).numpy() == 1).all()
    assert (nn.init.constant_(t, 0.25).numpy() == 0.25).all()
    a = nn.init.kaiming_uniform_(hx.empty(4, 5), generator=np.random.default_rng(7)).numpy()
    b = nn.init.kaiming_uniform_(hx.empty(4, 5), generator=np.random.default_rng(7)).numpy()
    np.testing.assert_array_equal(a, b)
    assert nn.init.kaiming_normal_(hx.empty(0, 3)).shape == (0, 3)


@pytest.mark.gpu
def test_init_on_gpu_tensors_draws_what_the_cpu_draws(be):
    for init in (nn.init.kaiming_uniform_, nn.init.xavier_normal_, nn.init.trunc_normal_):
        hx.manual_seed(1)
        w = init(nn.Parameter(hx.empty(64, 32, device="gpu")))
        hx.manual_seed(1)
        want = init(hx.empty(64, 32)).numpy()
        assert w.device.type == "gpu" and w.requires_grad
        np.testing.assert_array_equal(w.detach().numpy(), want)


# -- issue 14, item 13: RoPE's tables stay bounded ------------------------------------------
def test_item13_rope_tables_are_bounded_over_a_long_decode():
    rope = nn.RoPE(16)
    cpu, f32 = hx.Device("cpu"), hx.float32
    for offset in range(20_000):  # a decode loop: one new position per call
        cos, sin = rope.tables(1, offset, cpu, f32)
    assert len(rope._tables) == 1
    rows = rope._tables[("cpu", "float32")][0].shape[0]
    assert 20_000 <= rows <= 40_000  # at most twice the longest position
    want_cos, want_sin = F.rope_tables(1, 16, offset=19_999)
    np.testing.assert_array_equal(cos.numpy(), want_cos.numpy())
    np.testing.assert_array_equal(sin.numpy(), want_sin.numpy())
    # a forward at an offset equals the rotation built for that offset alone
    x = hx.tensor(randn(2, 3, 16, seed=9))
    c, s = F.rope_tables(3, 16, offset=123)
    np.testing.assert_array_equal(rope(x, offset=123).numpy(), F.apply_rope(x, c, s).numpy())
    with pytest.raises(ValueError, match="offset must be >= 0"):
        rope(x, offset=-1)


@pytest.mark.gpu
def test_item13_rope_table_views_on_gpu(be):
    rope = nn.RoPE(8)
    x = randn(2, 5, 8, seed=10)
    for offset in (0, 7, 300):
        got = rope(hx.tensor(x, device="gpu"), offset=offset).numpy()
        c, s = F.rope_tables(5, 8, offset=offset)
        np.testing.assert_allclose(got, F.apply_rope(hx.tensor(x), c, s).numpy(), rtol=1e-5,
                                   atol=1e-6)


# -- errors that name the closest thing ---------------------------------------------------------
@pytest.mark.parametrize("module,name,closest", [
    (nn, "LinearCrossEntropyLoss", "hx.nn.CrossEntropyLoss"),
    (nn, "CrossEntropyloss", "hx.nn.CrossEntropyLoss"),
    (nn, "KlDivLoss", "hx.nn.KLDivLoss"),
    (nn.init, "orthogonal", "orthogonal_"),
    (nn.init, "kaiming_uniform", "kaiming_uniform_"),
    (hx.optim, "SparseAdam", "Adam"),
    (hx.optim, "AdamW_", "hx.optim.AdamW"),
    (hx.optim.lr_scheduler, "OneCycleLr", "hx.optim.lr_scheduler.OneCycleLR"),
    (hx.data, "DistributedSampler", "RandomSampler"),
])
def test_missing_names_point_to_the_closest(module, name, closest):
    with pytest.raises(AttributeError) as err:
        getattr(module, name)
    assert f"has no {name}; the closest is" in str(err.value)
    assert closest in str(err.value)


def test_module_named_tuple_result():
    m = nn.Linear(2, 2)
    res = m.load_state_dict({"weight": np.zeros((2, 2), np.float32)}, strict=False)
    assert res == (["bias"], []) and isinstance(res, tuple)
    assert collections.Counter(res._fields) == collections.Counter(
        ["missing_keys", "unexpected_keys"])


def test_assigning_a_plain_tensor_to_a_parameter_name_is_refused():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="cannot assign Tensor as parameter 'weight'"):
        m.weight = hx.zeros(2, 2)
    assert isinstance(m.weight, nn.Parameter)
    m.bias = None  # None is allowed: the name stays a parameter slot, out of state_dict
    assert list(m.state_dict()) == ["weight"] and m(hx.ones(1, 2)).shape == (1, 2)


def test_deepcopy_of_a_module_copies_its_parameters_and_keeps_ties():
    import copy

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 4)
            self.head = nn.Linear(4, 5, bias=False)
            self.head.weight = self.emb.weight

    m = Tied()
    m.emb.weight.sum().backward()
    c = copy.deepcopy(m)
    assert isinstance(c.head.weight, nn.Parameter) and c.head.weight.requires_grad
    assert c.head.weight is c.emb.weight  # the tie survives, as in PyTorch
    assert c.emb.weight is not m.emb.weight
    assert c.emb.weight.storage is not m.emb.weight.storage
    assert c.emb.weight.grad is None  # PyTorch's Parameter copy leaves the gradient out
    np.testing.assert_array_equal(c.emb.weight.detach().numpy(), m.emb.weight.detach().numpy())
    with hx.no_grad():
        c.emb.weight.add_(1.0)
    assert not np.array_equal(c.emb.weight.detach().numpy(), m.emb.weight.detach().numpy())
