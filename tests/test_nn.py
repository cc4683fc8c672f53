"""nn layers: forward against plain numpy formulas, gradcheck in float64, Module API."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn
from haelixe.autograd import gradcheck
from haelixe.nn import functional as F


def f64(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def leaf(a):
    # a transposed layout, so every layer is checked on non-contiguous input
    t = hx.from_numpy(np.ascontiguousarray(np.swapaxes(a, -1, -2))).transpose(-1, -2)
    return t.detach().requires_grad_()


def as64(module):
    return module.to(hx.float64)


# -- forward against numpy -----------------------------------------------------------------

def test_linear_matches_numpy_over_leading_dims():
    lin = nn.Linear(5, 3)
    x = np.random.default_rng(1).standard_normal((2, 4, 5)).astype(np.float32)
    y = lin(hx.from_numpy(x))
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), x @ w.T + b, rtol=1e-5, atol=1e-6)


def test_linear_init_bound_is_pytorchs():
    lin = nn.Linear(100, 50)
    w = lin.weight.detach().numpy()
    assert np.abs(w).max() <= 1 / math.sqrt(100)
    assert np.abs(w).max() > 0.8 / math.sqrt(100)


def test_rmsnorm_matches_formula():
    x = f64(3, 8)
    norm = as64(nn.RMSNorm(8, eps=1e-6))
    with hx.no_grad():
        norm.weight.copy_(hx.from_numpy(np.linspace(0.5, 2, 8)))
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * np.linspace(0.5, 2, 8)
    np.testing.assert_allclose(norm(hx.from_numpy(x)).detach().numpy(), want, rtol=1e-10)


def test_layernorm_matches_formula():
    x = f64(3, 8)
    ln = as64(nn.LayerNorm(8))
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(ln(hx.from_numpy(x)).detach().numpy(),
                               (x - mu) / np.sqrt(var + 1e-5), rtol=1e-10)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_values(approximate):
    x = np.linspace(-5, 5, 101)
    got = nn.GELU(approximate)(hx.from_numpy(x)).detach().numpy()
    if approximate == "none":
        want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    else:
        want = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_gelu_float32_is_accurate():
    x = np.linspace(-6, 6, 2001).astype(np.float32)
    got = F.gelu(hx.from_numpy(x)).numpy().astype(np.float64)
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    np.testing.assert_allclose(got, want, atol=2e-6)


def test_rope_rotate_half_with_offset():
    hd, seq = 8, 5
    x = f64(2, seq, hd)
    rope = nn.RoPE(hd)
    got = rope(hx.from_numpy(x), offset=3).detach().numpy()
    inv = 10000.0 ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(3, 3 + seq)[:, None] * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)
    x1, x2 = x[..., :hd // 2], x[..., hd // 2:]
    want = np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    np.testing.assert_allclose(got, want, rtol=1e-6)  # tables are float64 here


def test_rope_preserves_norm_and_relative_position():
    hd = 16
    rope = nn.RoPE(hd)
    q, k = f64(1, 1, hd, seed=1), f64(1, 1, hd, seed=2)
    def score(pq, pk):
        rq = rope(hx.from_numpy(q), offset=pq).numpy()
        rk = rope(hx.from_numpy(k), offset=pk).numpy()
        return float((rq * rk).sum())
    assert score(3, 1) == pytest.approx(score(10, 8), rel=1e-5)


def naive_attention(q, k, v, causal):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.triu(np.ones(s.shape[-2:], bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return p @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [1, 7, 33, 600])  # 600 takes the blocked flash path
def test_attention_equals_naive_forward_and_backward(causal, seq):
    rng = np.random.default_rng(seq)
    q, k, v = (rng.standard_normal((2, 2, seq, 8)) for _ in range(3))
    qt, kt, vt = (hx.from_numpy(a).requires_grad_() for a in (q, k, v))
    out = F.scaled_dot_product_attention(qt, kt, vt, causal=causal)
    np.testing.assert_allclose(out.detach().numpy(), naive_attention(q, k, v, causal),
                               rtol=1e-9, atol=1e-10)
    g = rng.standard_normal(out.shape)
    out.backward(hx.from_numpy(g))
    # the naive formula's gradients through Haelixe's elementary ops
    qn, kn, vn = (hx.from_numpy(a).requires_grad_() for a in (q, k, v))
    s = qn @ kn.mT * (1 / math.sqrt(8))
    if causal:
        s = s.masked_fill(hx.from_numpy(np.triu(np.ones((seq, seq), bool), 1)), -math.inf)
    (s.softmax(-1) @ vn).backward(hx.from_numpy(g))
    for a, b in ((qt, qn), (kt, kn), (vt, vn)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-8, atol=1e-9)


def test_attention_fully_masked_rows_stay_finite():
    q = hx.randn(1, 1, 4, 8)
    out = F.scaled_dot_product_attention(q, q, q, causal=True)
    assert np.isfinite(out.numpy()).all()


# -- gradcheck for every layer -------------------------------------------------------------

def test_gradcheck_linear_and_fused_gelu():
    for act in (None, "gelu", "gelu_tanh"):
        lin = as64(nn.Linear(4, 3, activation=act))
        x = leaf(f64(2, 3, 4))
        w = lin.weight.detach().requires_grad_()
        b = lin.bias.detach().requires_grad_()
        assert gradcheck(lambda x, w, b, act=act: F.linear(x, w, b, act), (x, w, b),
                         name=f"linear {act}")


def test_gradcheck_norms():
    x = leaf(f64(3, 6))
    w = hx.from_numpy(np.linspace(0.5, 1.5, 6)).requires_grad_()
    b = hx.from_numpy(np.linspace(-1, 1, 6)).requires_grad_()
    assert gradcheck(lambda x, w: F.rms_norm(x, (6,), w), (x, w), name="rms_norm")
    assert gradcheck(lambda x, w, b: F.layer_norm(x, (6,), w, b), (x, w, b), name="layer_norm")


def test_gradcheck_activations_and_rope():
    x = leaf(f64(3, 4))
    for fn in (lambda x: F.gelu(x), lambda x: F.gelu(x, "tanh"), F.silu, F.relu):
        assert gradcheck(fn, (leaf(f64(3, 4) + 0.1),))
    rope = nn.RoPE(4)
    cos, sin = rope.tables(3, 2, hx.Device.cpu(), hx.float64)
    assert gradcheck(lambda x: F.apply_rope(x, cos, sin), (leaf(f64(2, 3, 4)),), name="rope")
    assert x.requires_grad


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_attention(causal):
    q, k, v = (leaf(f64(1, 2, 5, 4, seed=i)) for i in range(3))
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                     (q, k, v), name="attention")


def test_gradcheck_mha_block_and_losses():
    hx.manual_seed(0)
    block = as64(nn.TransformerBlock(8, 2))
    x = leaf(f64(1, 3, 8))
    assert gradcheck(block, (x,), name="TransformerBlock", atol=1e-6)
    t = hx.from_numpy(f64(1, 3, 8, seed=3))
    assert gradcheck(lambda x: F.mse_loss(x, t), (leaf(f64(1, 3, 8)),), name="mse")
    assert gradcheck(lambda x: F.l1_loss(x, t), (leaf(f64(1, 3, 8)),), name="l1")
    labels = hx.tensor([0, 2, 1])
    assert gradcheck(lambda x: F.cross_entropy(x, labels), (leaf(f64(3, 4)),), name="xent")


def test_embedding_gradient_accumulates_repeated_rows():
    emb = nn.Embedding(5, 3)
    idx = hx.tensor([[1, 1], [4, 1]])
    emb(idx).sum().backward()
    counts = np.array([0, 3, 0, 0, 1])[:, None] * np.ones((1, 3))
    np.testing.assert_array_equal(emb.weight.grad.numpy(), counts)


def test_dropout_train_and_eval():
    hx.manual_seed(0)
    d = nn.Dropout(0.5)
    x = hx.ones(1000)
    y = d(x).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.4 < (y == 0).mean() < 0.6
    d.eval()
    assert d(x) is x


# -- losses honour the incoming gradient ---------------------------------------------------

@pytest.mark.parametrize("loss_fn", ["mse_loss", "l1_loss"])
def test_loss_gradient_scales_with_incoming(loss_fn):
    x1 = hx.randn(4, 3, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    t = hx.randn(4, 3)
    getattr(F, loss_fn)(x1, t).backward()
    (10 * getattr(F, loss_fn)(x2, t)).backward()
    np.testing.assert_allclose(x2.grad.numpy(), 10 * x1.grad.numpy(), rtol=1e-5)


def test_cross_entropy_matches_numpy():
    logits = f64(4, 5)
    labels = np.array([0, 4, 2, 2])
    got = F.cross_entropy(hx.from_numpy(logits), hx.from_numpy(labels)).item()
    lse = np.log(np.exp(logits).sum(1))
    assert got == pytest.approx(float(np.mean(lse - logits[np.arange(4), labels])))


# -- Module API ----------------------------------------------------------------------------

def test_module_parameters_state_dict_roundtrip():
    hx.manual_seed(0)
    a = nn.TransformerBlock(16, 4)
    b = nn.TransformerBlock(16, 4)
    names = [n for n, _ in a.named_parameters()]
    assert names[0] == "norm1.weight" and "attn.qkv.weight" in names
    assert len(list(a.parameters())) == len(names) == 10
    b.load_state_dict(a.state_dict())
    x = hx.randn(2, 5, 16)
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())
    with pytest.raises(RuntimeError, match="Missing key"):
        b.load_state_dict({"norm1.weight": hx.ones(16)})


def test_module_repr_tree_and_train_eval():
    m = nn.Sequential(nn.Linear(2, 3), nn.GELU(), nn.Dropout(0.1))
    r = repr(m)
    assert "(0): Linear(in_features=2, out_features=3, bias=True)" in r
    assert "(2): Dropout(p=0.1, inplace=False)" in r  # PyTorch's repr
    m.eval()
    assert not m[2].training
    m.train()
    assert m[2].training


def test_module_to_keeps_parameter_identity_and_zero_grad():
    lin = nn.Linear(3, 2)
    w = lin.weight
    lin(hx.randn(4, 3)).sum().backward()
    assert w.grad is not None
    lin.zero_grad()
    assert w.grad is None
    lin.to(hx.float64)
    assert lin.weight is w and w.dtype is hx.float64


def test_transformer_block_is_prenorm_with_one_norm_per_branch():
    block = nn.TransformerBlock(8, 2)
    kinds = [type(m).__name__ for m in block.children()]
    assert kinds == ["RMSNorm", "MultiHeadAttention", "RMSNorm", "MLP"]
    x = hx.randn(1, 4, 8)
    with hx.no_grad():
        for p in block.attn.proj.parameters():
            p.zero_()
        for p in block.mlp.fc2.parameters():
            p.zero_()
    # with both branch outputs zeroed the block is the identity (residual path only)
    np.testing.assert_array_equal(block(x).detach().numpy(), x.numpy())


def test_linear_rejects_wrong_features():
    with pytest.raises(ValueError, match="has 4 features but the weight"):
        nn.Linear(3, 2)(hx.randn(2, 4))


def test_linear_names_bad_shapes_and_takes_pytorch_s_vector_weight():
    """A 0-d operand or a bias that does not fit the output features is refused naming
    linear and the shapes (numpy's broadcasting error used to surface); a 1-D weight is
    PyTorch's input @ weight, with its gradients."""
    torch = pytest.importorskip("torch")
    x = hx.randn(4, 3)
    with pytest.raises(ValueError, match=r"linear: the input needs at least 1 dim.*\(\) "
                                         r"and \(\)"):
        F.linear(hx.tensor(1.0), hx.tensor(1.0))
    for bias in ((3,), (2, 1), (0, 3)):
        with pytest.raises(ValueError, match=rf"linear: a bias of shape "
                                             rf"{re.escape(str(bias))} does not fit"):
            F.linear(x, hx.randn(2 if bias != (0, 3) else 0, 3), hx.randn(*bias))
    for bias in ((1,), ()):  # (broadcast over the output features, as PyTorch's)
        w, b = hx.randn(2, 3), hx.randn(*bias)
        np.testing.assert_allclose(F.linear(x, w, b).numpy(),
                                   x.numpy() @ w.numpy().T + b.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"a 1-D weight \(3,\) takes no bias"):
        F.linear(x, hx.randn(3), hx.randn(1))
    a = np.random.default_rng(0).standard_normal((2, 4, 3))
    v = np.random.default_rng(1).standard_normal(3)
    hx_x, hx_w = hx.tensor(a, requires_grad=True), hx.tensor(v, requires_grad=True)
    t_x, t_w = torch.tensor(a, requires_grad=True), torch.tensor(v, requires_grad=True)
    out, ref = F.linear(hx_x, hx_w), torch.nn.functional.linear(t_x, t_w)
    assert out.shape == tuple(ref.shape) == (2, 4)
    (out * out).sum().backward()
    (ref * ref).sum().backward()
    for ours, theirs in ((out, ref), (hx_x.grad, t_x.grad), (hx_w.grad, t_w.grad)):
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                                   rtol=1e-12)


def test_attention_of_empty_inputs_is_pytorch_s_and_0_d_inputs_are_named():
    """No queries or no batch: an empty output; no keys: zeros; head_dim 0: each row the
    mean of the values (PyTorch's answers, gradients included); a 0-d input is refused
    naming the op (it used to raise numpy's "zero-size array" or an IndexError)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    cases = [((0, 3), (0, 3), (0, 3)), ((2, 0, 3), (2, 5, 3), (2, 5, 4)),
             ((2, 4, 3), (2, 0, 3), (2, 0, 4)), ((2, 4, 0), (2, 5, 0), (2, 5, 3)),
             ((0, 2, 4, 3), (0, 2, 5, 3), (0, 2, 5, 3))]
    for shapes in cases:
        arrays = [rng.standard_normal(s) for s in shapes]
        ours = [hx.tensor(a, requires_grad=True) for a in arrays]
        theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
        out = F.scaled_dot_product_attention(*ours)
        ref = torch.nn.functional.scaled_dot_product_attention(*theirs)
        assert out.shape == tuple(ref.shape), shapes
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), atol=1e-12)
        if out.numel():
            (out * out).sum().backward()
            (ref * ref).sum().backward()
            for o, t in zip(ours, theirs):
                np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), atol=1e-12)
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention: query, key and "
                                         r"value need at least 2 dims"):
        F.scaled_dot_product_attention(*[hx.tensor(1.0)] * 3)


@pytest.mark.parametrize(("op", "shapes"), [
    ("layer_norm", [(0, 3)]), ("layer_norm", [(3, 0)]), ("layer_norm", [(2, 0, 4)]),
    ("rms_norm", [(0, 3)]), ("rms_norm", [(3, 0)]), ("rms_norm", [(2, 3, 0)]),
    ("linear", [(4, 0), (2, 0), (2,)]), ("linear", [(0, 3), (2, 3), (2,)]),
    ("linear", [(4, 3), (0, 3), (0,)]), ("linear", [(2, 0, 3), (5, 3), (5,)]),
])
def test_norms_and_linear_of_empty_inputs_are_pytorch_s(op, shapes):
    """Empty inputs, an empty feature dim included, go through the kernels (numpy's
    "cannot reshape array of size 0" and a division by zero surfaced before): PyTorch's
    output shapes and values, and gradients of the inputs' shapes."""
    torch = pytest.importorskip("torch")
    arrays = [np.random.default_rng(i).standard_normal(s) for i, s in enumerate(shapes)]
    ours = [hx.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    extra = () if op == "linear" else (shapes[0][-1:],)
    out = getattr(F, op)(*ours[:1], *extra, *ours[1:])
    ref = getattr(torch.nn.functional, op)(*theirs[:1], *extra, *theirs[1:])
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy())
    (out * out).sum().backward()
    (ref * ref).sum().backward()
    for o, t in zip(ours, theirs):
        assert o.grad.shape == tuple(t.grad.shape)
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy())


def test_unbind_and_std_name_themselves_in_their_errors():
    with pytest.raises(IndexError, match="unbind: a 0-d tensor has no dim to unbind"):
        hx.tensor(1.0).unbind()
    with pytest.raises(TypeError, match="std: input dtype int64 is not floating point"):
        hx.arange(4).std()
    with pytest.raises(TypeError, match="std: input dtype bool"):
        hx.std_mean(hx.arange(4) > 1)


def test_module_list_and_sequential_index_and_register():
    layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 3)])
    layers.append(nn.RMSNorm(3))
    assert len(layers) == 3 and isinstance(layers[1], nn.Linear)
    assert [n for n, _ in layers.named_parameters()][:2] == ["0.weight", "0.bias"]
    seq = nn.Sequential(*layers)
    assert seq(hx.randn(4, 2)).shape == (4, 3)
    assert len(list(seq.parameters())) == 5
