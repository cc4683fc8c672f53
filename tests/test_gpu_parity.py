"""GPU equals CPU through the public tensor API, forward and backward.

Every case builds the same computation from the same values on "cpu" and on "gpu",
backpropagates the same upstream gradient and compares the outputs and the gradients of
every input (or parameter) within float32 tolerance. Inputs reach the kernels through
views (transposed, sliced with a step, broadcast, flipped) so strided reads and the
backward of each view are exercised too. Sizes are small and ragged (not multiples of the
tiles) so the file runs in well under a minute on a software adapter.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn
from haelixe.nn import functional as F

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def gpu(be):
    """Every test here needs an adapter (conftest's ``be`` skips without one)."""
    return be


# -- the harness -------------------------------------------------------------------------
def _leaf(a, device):
    a = np.asarray(a)
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    return hx.tensor(a, device=device, requires_grad=a.dtype.kind == "f")


def _as_tuple(out):
    if isinstance(out, hx.Tensor):
        return (out,)
    return tuple(out)


def _numpy(t):
    a = t.detach().numpy()
    return a.astype(np.float32) if a.dtype.kind == "V" or a.dtype.name == "bfloat16" else a


def run(fn, arrays, device, seed=1):
    """Outputs and input gradients of ``fn`` on ``device`` as numpy arrays."""
    leaves = [_leaf(a, device) for a in arrays]
    outs = _as_tuple(fn(*leaves))
    rng = np.random.default_rng(seed)
    roots, grads = [], []
    for o in outs:
        if o.requires_grad:
            roots.append(o)
            g = rng.standard_normal(o.shape).astype(np.float32)
            grads.append(hx.tensor(g, device=device).to(o.dtype))
    if roots:
        hx.autograd.backward(roots, grads)
    got_grads = [None if t.grad is None else _numpy(t.grad) for t in leaves]
    return [_numpy(o) for o in outs], got_grads


def compare(cpu, gpu, rtol, atol, what):
    for i, (c, g) in enumerate(zip(cpu, gpu)):
        if c is None or g is None:
            assert c is None and g is None, f"{what} {i}: gradient on one device only"
            continue
        assert c.shape == g.shape, f"{what} {i}: shape cpu {c.shape} != gpu {g.shape}"
        if c.dtype.kind in "biu":
            np.testing.assert_array_equal(g.astype(np.int64), c.astype(np.int64),
                                          err_msg=f"{what} {i}")
        else:
            np.testing.assert_allclose(g.astype(np.float64), c.astype(np.float64),
                                       rtol=rtol, atol=atol, err_msg=f"{what} {i}")


def parity(fn, *arrays, rtol=1e-4, atol=1e-5, grad_atol=None):
    """Run ``fn`` on both devices from ``arrays`` and compare outputs and gradients."""
    cpu_out, cpu_grads = run(fn, arrays, "cpu")
    gpu_out, gpu_grads = run(fn, arrays, "gpu")
    compare(cpu_out, gpu_out, rtol, atol, "output")
    compare(cpu_grads, gpu_grads, rtol, atol if grad_atol is None else grad_atol,
            "gradient of input")


def randn(*shape, seed=0, positive=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return np.abs(a) + 0.2 if positive else a


# Views that reach a logical shape S from a leaf of another layout, so kernels read
# strides other than C order and each view's backward runs on the device.
def _transposed(s):
    rev = tuple(range(len(s) - 1, -1, -1))
    return s[::-1], lambda t: t.permute(rev)


def _sliced(s):
    big = (2 * s[0],) + s[1:-1] + (s[-1] + 3,)
    return big, lambda t: t[::2, ..., 1:s[-1] + 1]


def _broadcast(s):
    return (1,) + s[1:], lambda t: t.expand(s)


def _flipped(s):
    return s, lambda t: t.flip(tuple(range(len(s))))


LAYOUTS = {"contiguous": lambda s: (s, lambda t: t), "transposed": _transposed,
           "sliced": _sliced, "broadcast": _broadcast, "flipped": _flipped}


# -- elementwise -------------------------------------------------------------------------
UNARY = {
    "neg": lambda x: -x, "abs": lambda x: x.abs(), "exp": lambda x: x.exp(),
    "log": lambda x: x.abs().log(), "sqrt": lambda x: x.abs().sqrt(),
    "rsqrt": lambda x: (x.abs() + 0.5).rsqrt(), "tanh": lambda x: x.tanh(),
    "sigmoid": lambda x: x.sigmoid(), "relu": lambda x: x.relu(), "silu": lambda x: x.silu(),
    "sin": lambda x: x.sin(), "cos": lambda x: x.cos(), "gelu": lambda x: x.gelu(),
    "gelu_tanh": lambda x: x.gelu("tanh"), "square": lambda x: x.square(),
    "reciprocal": lambda x: (x.abs() + 0.5).reciprocal(), "sign": lambda x: x.sign() * x,
    "pow_scalars": lambda x: x ** 3 + x.abs() ** 0.5 + (x.abs() + 0.5) ** -1.5 + x ** 0,
    "rpow": lambda x: 2.0 ** x, "scalar_arith": lambda x: (3.0 - x) / 4.0 + 1.0 / (x.abs() + 1),
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_ops_on_every_layout(op):
    f = UNARY[op]
    s = (3, 4, 5)
    for name, make in LAYOUTS.items():
        leaf_shape, view = make(s)
        parity(lambda x, view=view: f(view(x)), randn(*leaf_shape, seed=len(name)))


def test_gelu_backward_stays_on_the_gpu():
    be = hx.Device.gpu().backend
    x = hx.tensor(randn(3, 50), device="gpu", requires_grad=True)
    g = hx.tensor(randn(3, 50, seed=1), device="gpu")
    for approximate in ("none", "tanh"):
        x.grad = None
        y = x.T.gelu(approximate)
        be.flush()
        be.reset_stats()
        y.backward(g.T)
        s = be.stats()
        assert s["downloads"] == 0 and s["uploads"] == 0, s
        assert s["dispatches"] <= 2, s  # the fused kernel and the copy into x.grad


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_second_derivative(approximate):
    def f(x):
        (g,) = hx.autograd.grad(x.gelu(approximate).sum(), [x], create_graph=True)
        return g * x

    parity(f, randn(4, 9, seed=2) * 2, atol=1e-4)  # (cancellation near gelu'' = 0)


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b.abs() + 0.5), "pow": lambda a, b: (a.abs() + 0.1) ** b,
    "maximum": lambda a, b: a.maximum(b), "minimum": lambda a, b: hx.minimum(a, b),
}


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_ops_broadcast_on_every_layout(op):
    f = BINARY[op]
    s = (4, 3, 5)
    for make in LAYOUTS.values():
        leaf_shape, view = make(s)
        # b broadcasts against a from (3, 1) and from a leading dim
        parity(lambda a, b, view=view: f(view(a), b), randn(*leaf_shape, seed=2),
               randn(3, 1, seed=3))
        parity(lambda a, b, view=view: f(b, view(a)), randn(*leaf_shape, seed=4),
               randn(5, seed=5))


def test_maximum_minimum_ties_split_the_gradient():
    a = np.array([1.0, 2.0, 3.0, -1.0], np.float32)
    b = np.array([1.0, 0.0, 3.0, 2.0], np.float32)
    parity(lambda x, y: x.maximum(y) + x.minimum(y) * 2, a, b)


def test_comparisons_logical_ops_and_where():
    a, b = randn(4, 5, seed=1), randn(5, seed=2)
    a[0, :] = b  # ties

    def f(x, y):
        outs = [x == y, x != y, x < y, x <= y, x > y, x >= y, x > 0.5, x <= 0]
        outs += [(x > 0) & (y > 0), (x > 0) | (y > 0), ~(x > 0)]
        return tuple(outs) + (hx.where(x > y, x, y * 2), hx.where(x > 0, x, 0.0))

    parity(f, a, b)


def test_masked_fill_and_clamp():
    x = randn(4, 6, seed=3)
    parity(lambda t: t.masked_fill(t.T.T > 0.3, -1.5) * 2, x)
    parity(lambda t: t.masked_fill(hx.tensor([True, False, True, False, False, True],
                                             device=t.device), 0.0), x)
    parity(lambda t: (t.clamp(-0.5, 0.7), t.clamp(min=0.1), t.clamp(max=-0.2),
                      t.T.clamp(-1, 1)), x)
    ints = np.arange(-5, 7, dtype=np.int32).reshape(3, 4)
    parity(lambda t: (t.clamp(-2, 3), t.clamp(-1.5, 2.5), t * 2 + 1, -t),
           ints)


def test_integer_and_bool_arithmetic():
    a = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    b = np.array([1, -2, 3, 2], np.int32)
    parity(lambda x, y: (x + y, x - y, x * y, x / y, x ** 2, x.abs(), x.maximum(y),
                         (x > 0).sum(), (x > y).sum(1), x.sum(0), x.max(), x.argmax(1)),
           a, b)


# -- reductions and softmax ----------------------------------------------------------------
REDUCTIONS = {
    "sum": lambda x, d, k: x.sum(d, keepdim=k), "mean": lambda x, d, k: x.mean(d, keepdim=k),
    "var": lambda x, d, k: x.var(d, keepdim=k), "std": lambda x, d, k: x.std(d, keepdim=k),
    "amax": lambda x, d, k: x.amax(d, keepdim=k), "amin": lambda x, d, k: x.amin(d, keepdim=k),
}


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
def test_reductions_over_dims(op):
    f = REDUCTIONS[op]
    x = randn(4, 70, 5, seed=6)  # a reduced length past one workgroup's 64
    for layout in ("contiguous", "transposed", "flipped"):
        leaf_shape, view = LAYOUTS[layout](x.shape)
        xs = x if layout == "contiguous" else randn(*leaf_shape, seed=7)
        for dims in (None, 0, 1, -1, (0, 2), (1, 2)):
            for keep in (False, True):
                if dims is None and keep:
                    continue
                parity(lambda t, v=view, d=dims, k=keep: f(v(t), d, k), xs, rtol=2e-4,
                       atol=2e-5)


def test_max_min_with_dim_give_values_and_indices():
    x = randn(5, 7, seed=8)
    x[1, 3] = x[1, 5] = 9.0  # a tie: the first index wins, the gradient goes there
    for kind in ("max", "min"):
        for dim in (0, 1):
            parity(lambda t, k=kind, d=dim: tuple(getattr(t, k)(d))
                   + tuple(getattr(t.T, k)(d, True)), x)
    parity(lambda t: (t.max(), t.min(), t.argmax(), t.argmax(1, keepdim=True)), x)


def test_softmax_and_log_softmax_over_each_dim():
    x = randn(3, 33, 6, seed=9)
    x[0, 0, :] = -np.inf  # a row that is all masked except nothing: softmax gives nan
    x[0, 0, 2] = 1.0      # ... now one survivor
    for dim in (0, 1, 2, -1):
        parity(lambda t, d=dim: (t.softmax(d), t.log_softmax(d).clamp(min=-1e4)), x)
        parity(lambda t, d=dim: (t.mT.softmax(d), t.flip(1).log_softmax(d)), randn(3, 6, 33))


# -- matmul ------------------------------------------------------------------------------
MATMULS = [
    ((5, 7), (7, 3), lambda a, b: a @ b),
    ((70, 33), (33, 130), lambda a, b: a @ b),
    ((2, 3, 9, 17), (17, 11), lambda a, b: a @ b),               # batched, broadcast b
    ((3, 1, 9, 17), (4, 17, 11), lambda a, b: a @ b),            # batch broadcast both ways
    ((17, 9), (11, 17), lambda a, b: a.mT @ b.mT),               # both transposed views
    ((2, 13, 10), (2, 13, 6), lambda a, b: a.transpose(1, 2) @ b),
    ((12, 20), (20,), lambda a, b: a[::2] @ b),                  # matrix @ vector, sliced
    ((20,), (20, 7), lambda a, b: a @ b.flip(0)),                # vector @ matrix, flipped
    ((20,), (20,), lambda a, b: a @ b),                          # dot
    ((6, 8), (8, 5), lambda a, b: hx.matmul(a.expand(3, 6, 8), b)),  # expanded (stride 0)
]


@pytest.mark.parametrize("case", range(len(MATMULS)))
def test_matmul(case):
    sa, sb, f = MATMULS[case]
    parity(f, randn(*sa, seed=case), randn(*sb, seed=case + 50), rtol=2e-4, atol=5e-5)


# -- views, joins and indexing -------------------------------------------------------------
VIEWS = {
    "transpose": lambda x: x.transpose(0, 2) * 2,
    "permute": lambda x: x.permute(2, 0, 1).exp(),
    "slice_step": lambda x: x[1::2, :, ::-2] * x[1::2, :, ::-2],
    "flip": lambda x: x.flip(0, 2).sin(),
    "expand": lambda x: x[:, :1].expand(4, 6, 5).cos(),
    "reshape": lambda x: x.reshape(6, 20).T.reshape(4, 30).tanh(),
    "reshape_copy": lambda x: x.transpose(0, 1).reshape(-1).sigmoid(),
    "narrow": lambda x: x.narrow(1, 2, 3).narrow(2, 1, 3) + 1,
    "squeeze": lambda x: x[:, :1].squeeze(1).unsqueeze(0).exp(),
    "split_chunk": lambda x: x.split(2, 1)[1] * x.chunk(3, 1)[2],
    "cat": lambda x: hx.cat([x, x.flip(1) * 2, x[:, :1]], 1).exp(),
    "stack": lambda x: hx.stack([x[0], x[1].T.T, x[2]], 1).sin(),
    "select_unbind": lambda x: x.select(1, 2) * x.unbind(1)[3],
    "as_strided": lambda x: x.contiguous().as_strided((3, 4), (5, 2), 1).exp(),
    "int_index": lambda x: x[[0, 2, 2, 3]].exp(),
    "int_index_2d": lambda x: x[[0, 3, 0], :, [1, 1, 4]] * 3,
    "tensor_index": lambda x: x[hx.tensor([[1, 0], [3, 1]], device=x.device)].sin(),
    "mixed_index": lambda x: x[1:, [2, 0, 2]].exp(),
    "bool_mask": lambda x: x[x > 0.2].exp(),
    "bool_rows": lambda x: x[hx.tensor([True, False, True, True], device=x.device)] * 2,
    "setitem_no_grad": lambda x: _setitem(x),
}


def _setitem(x):
    y = x.detach().clone()
    y[1:3, ::2] = 0.5
    y[0] = y[3] * 2
    return y * x


@pytest.mark.parametrize("op", sorted(VIEWS))
def test_views_joins_and_indexing(op):
    parity(VIEWS[op], randn(4, 6, 5, seed=11))


def test_gather_and_cross_entropy_targets():
    x = randn(4, 7, seed=12)
    idx = np.array([[0, 6, 6], [1, 1, 2], [5, 4, 3], [0, 0, 0]], np.int64)
    parity(lambda t, i: t.gather(1, i).exp(), x, idx)
    parity(lambda t, i: t.T.gather(0, i.T), x, idx)
    parity(lambda t: t.gather(0, hx.tensor([[3, 2, 1, 0, 0, 1, 2]], device=t.device)), x)


# -- dtypes --------------------------------------------------------------------------------
def test_casts_and_bfloat16_storage():
    x = randn(5, 9, seed=13)
    parity(lambda t: t.to(hx.bfloat16).to(hx.float32) * 3, x)
    parity(lambda t: (t.bfloat16() * t.bfloat16()).sum(1), x, rtol=2e-2, atol=2e-2)
    parity(lambda t: (t.bfloat16() @ t.bfloat16().T).float(), x, rtol=2e-2, atol=5e-2)
    parity(lambda t: (t.bfloat16()[::2, 1::3] + 1).exp().float(), x, rtol=2e-2, atol=2e-2)
    parity(lambda t: (t.bfloat16().softmax(-1), t.bfloat16().T.max(1)[0]), x, rtol=2e-2,
           atol=1e-2)
    parity(lambda t: (t.int(), t.long(), (t * 3).int().float(), t.bool(), (t > 0).float()), x)


def _inplace_chain(x):
    y = x.detach() * 1
    y.add_(1.5)
    y.mul_(x.detach())
    y.sub_(0.25)
    y.div_(2)
    y.clamp_(-0.3, 0.8)
    z = y.clone()
    z[::2].fill_(0.0)
    z.T[1].copy_(hx.tensor(np.arange(4, dtype=np.float32)))  # a CPU source into a GPU view
    return z * x


EDGES = {
    "empty": (lambda x: (x[:0] * 2).sum(0), (3, 4)),
    "zero_d": (lambda x: (x.sum() * x[1]).exp() * x, (3,)),
    "empty_reduction": (lambda x: x[:, :0].sum(1) + x[:, 0], (3, 4)),
    "long_rows": (lambda x: (x.sum(1), x.softmax(1), x.amax(1), x.var(1)), (3, 1000)),
    "in_place": (_inplace_chain, (4, 5)),
    "where_scalars": (lambda x: hx.where(x > 0, 1.0, -1.0) * x, (4, 5)),
    "int_float_compare": (lambda x: ((x * 3).int() > 0.5, (x * 3).int() == 1), (4, 5)),
    "sum_dtype": (lambda x: (x > 0).sum(dtype=hx.float32) + x.sum(), (4, 5)),
    "repeated_index_grad": (lambda x: x[[1, 1, -1, 2]].sum(0), (4, 3)),
    "norm_and_matmul_k0": (lambda x: (x.norm(), x[:, :0] @ x[:0, :]), (3, 3)),
}


@pytest.mark.parametrize("case", sorted(EDGES))
def test_edge_cases(case):
    f, shape = EDGES[case]
    parity(f, randn(*shape, seed=23))


def test_autocast_bfloat16_block():
    def f(x):
        with hx.autocast(dtype=hx.bfloat16):
            return F.mse_loss(block(x).float(), x)

    results = []
    for device in ("cpu", "gpu"):
        hx.manual_seed(0)
        block = nn.TransformerBlock(16, 2).to(device)
        results.append(run(f, [randn(2, 9, 16, seed=24)], device))
    compare(results[0][0], results[1][0], 2e-2, 2e-2, "output")
    compare(results[0][1], results[1][1], 5e-2, 5e-3, "gradient of input")


# -- layers --------------------------------------------------------------------------------
def module_parity(make, *arrays, rtol=1e-4, atol=1e-5, forward=None):
    """A module built from one seed on each device: outputs, input and parameter
    gradients must agree."""
    results = {}
    for device in ("cpu", "gpu"):
        hx.manual_seed(0)
        m = make().to(device)
        fwd = forward or (lambda mod, *xs: mod(*xs))
        out, grads = run(functools.partial(fwd, m), arrays, device)
        params = {n: _numpy(p.grad) for n, p in m.named_parameters() if p.grad is not None}
        results[device] = (out, grads, params)
    (co, cg, cp), (go, gg, gp) = results["cpu"], results["gpu"]
    compare(co, go, rtol, atol, "output")
    compare(cg, gg, rtol, atol, "gradient of input")
    assert cp.keys() == gp.keys() and cp, "parameters with gradients differ"
    for name in cp:
        compare([cp[name]], [gp[name]], rtol, atol, f"gradient of {name}")


@pytest.mark.parametrize("activation", [None, "gelu", "gelu_tanh"])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(activation, bias):
    module_parity(lambda: nn.Linear(19, 13, bias=bias, activation=activation),
                  randn(2, 7, 19, seed=14), atol=3e-5)


def test_linear_on_strided_input_and_functional_weight_views():
    def f(x, w, b):
        return F.linear(x.transpose(0, 1), w[:, ::2], b, activation="gelu")

    parity(f, randn(9, 3, 22, seed=15), randn(6, 44, seed=16), randn(6, seed=17), atol=3e-5)


@pytest.mark.parametrize("norm", ["rms", "layer"])
def test_norms(norm):
    make = (lambda: nn.RMSNorm(37)) if norm == "rms" else (lambda: nn.LayerNorm(37))
    x = randn(3, 5, 37, seed=18) * 2 + 0.5
    module_parity(make, x, atol=3e-5)
    # functional forms on strided inputs, without weight
    fn = F.rms_norm if norm == "rms" else F.layer_norm
    parity(lambda t: fn(t.transpose(0, 2), (37,)), randn(37, 5, 3, seed=19), atol=3e-5)


def test_rope():
    for seq, d in ((11, 16), (70, 32)):
        rope = nn.RoPE(d)
        parity(lambda t, r=rope: r(t.transpose(1, 2)), randn(2, seq, 3, d, seed=seq),
               atol=2e-5)
        parity(lambda t, r=rope: r(t, offset=5) * r(t.flip(2)), randn(3, seq, d, seed=d))


@pytest.mark.parametrize("head_dim", [16, 32, 64])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_kernel(head_dim, causal):
    """scaled_dot_product_attention on strided q/k/v, query and key lengths that are not
    multiples of the kernel's blocks (and differ, for the non-causal case)."""
    sq, sk = (37, 37) if causal else (21, 45)

    def f(q, k, v):
        return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                              v.transpose(1, 2), causal=causal)

    parity(f, randn(2, sq, 3, head_dim, seed=1), randn(2, sk, 3, head_dim, seed=2),
           randn(2, sk, 3, head_dim, seed=3), atol=3e-5)


@pytest.mark.parametrize("sq,sk,d", [(300, 300, 16), (3, 7, 8), (1, 5, 6), (9, 9, 128)])
def test_attention_shapes(sq, sk, d):
    """Past 256 rows (the 128-row variant), more keys than queries with the causal mask
    aligned to the top left, a single query, odd and maximal head dims."""
    def f(q, k, v):
        return (F.scaled_dot_product_attention(q, k, v, causal=True),
                F.scaled_dot_product_attention(q, k, v.flip(1), scale=0.3))

    parity(f, randn(2, sq, d, seed=1), randn(2, sk, d, seed=2), randn(2, sk, d, seed=3),
           atol=3e-5)


@pytest.mark.parametrize("head_dim,causal", [(16, True), (32, False), (64, True)])
def test_multi_head_attention(head_dim, causal):
    heads = 2
    module_parity(lambda: nn.MultiHeadAttention(heads * head_dim, heads, causal=causal),
                  randn(2, 19, heads * head_dim, seed=head_dim), atol=5e-5)


def test_transformer_block():
    module_parity(lambda: nn.TransformerBlock(32, 4, causal=True),
                  randn(2, 23, 32, seed=20), rtol=2e-4, atol=5e-5)


def test_losses():
    x, y = randn(6, 5, seed=21), randn(6, 5, seed=22)
    for reduction in ("mean", "sum", "none"):
        parity(lambda a, b, r=reduction: F.mse_loss(a, b, r) * 3.0, x, y)
        parity(lambda a, b, r=reduction: F.l1_loss(a.T, b.T, r), x, y)
    targets = np.array([0, 4, 2, 2, 1, 3], np.int64)
    for reduction in ("mean", "sum", "none"):
        parity(lambda a, t, r=reduction: F.cross_entropy(a, t, reduction=r), x * 3, targets)


def test_embedding_and_dropout_off():
    module_parity(lambda: nn.Embedding(11, 6), np.array([[1, 3, 3], [10, 0, 1]], np.int64),
                  forward=lambda m, i: F.dropout(m(i), 0.5, training=False).tanh())


# -- optimizers, module.to and training ------------------------------------------------------
def _train_steps(device, make_opt, steps=3, dtype=None):
    hx.manual_seed(0)
    model = nn.Sequential(nn.Linear(7, 12, activation="gelu"), nn.RMSNorm(12),
                          nn.Linear(12, 3)).to(device)
    if dtype is not None:
        model.to(dtype)
    opt = make_opt(model.parameters())
    rng = np.random.default_rng(3)
    for _ in range(steps):
        x = hx.tensor(rng.standard_normal((5, 7)).astype(np.float32), device=device)
        y = hx.tensor(rng.standard_normal((5, 3)).astype(np.float32), device=device)
        opt.zero_grad()
        out = model(x.to(model[0].weight.dtype)).float()
        F.mse_loss(out, y).backward()
        opt.step()
    return {n: _numpy(p) for n, p in model.named_parameters()}, opt


OPTIMIZERS = {
    "adamw": lambda ps: hx.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "sgd": lambda ps: hx.optim.SGD(ps, lr=0.1),
    "sgd_momentum": lambda ps: hx.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd_nesterov": lambda ps: hx.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_steps_on_gpu_parameters(name):
    cpu, _ = _train_steps("cpu", OPTIMIZERS[name])
    gpu, opt = _train_steps("gpu", OPTIMIZERS[name])
    for n in cpu:
        np.testing.assert_allclose(gpu[n], cpu[n], rtol=1e-4, atol=1e-5, err_msg=n)
    for fgs in opt.flat_groups:  # the flat buffers (and their state) live on the GPU
        for fg in fgs:
            assert fg.data.device.type == "gpu" and fg.grad.device.type == "gpu"


def test_adamw_bf16_master_weights_on_gpu():
    def make(ps):
        return hx.optim.AdamW(ps, lr=1e-2, master_weights=True)

    cpu, _ = _train_steps("cpu", make, dtype=hx.bfloat16)
    gpu, _ = _train_steps("gpu", make, dtype=hx.bfloat16)
    for n in cpu:
        np.testing.assert_allclose(gpu[n], cpu[n], rtol=2e-2, atol=2e-2, err_msg=n)


def test_clip_grad_norm_and_state_dict_round_trip_on_gpu():
    for device in ("cpu", "gpu"):
        hx.manual_seed(0)
        m = nn.Linear(4, 3).to(device)
        x = hx.tensor(np.ones((2, 4), np.float32) * 5, device=device)
        m(x).sum().backward()
        norm = hx.optim.clip_grad_norm_(m.parameters(), 1.0)
        g = _numpy(m.weight.grad)
        if device == "cpu":
            ref_norm, ref_g = norm, g
    assert math.isclose(norm, ref_norm, rel_tol=1e-5)
    np.testing.assert_allclose(g, ref_g, rtol=1e-5)


def test_module_to_gpu_and_back_keeps_parameters():
    hx.manual_seed(0)
    m = nn.TransformerBlock(16, 2)
    before = {n: _numpy(p) for n, p in m.named_parameters()}
    ids = {n: id(p) for n, p in m.named_parameters()}
    m.to("gpu")
    for n, p in m.named_parameters():
        assert p.device.type == "gpu" and id(p) == ids[n] and p.requires_grad
        np.testing.assert_array_equal(_numpy(p), before[n])
    m.to("cpu")
    assert all(p.device.type == "cpu" for p in m.parameters())


def test_denoiser_trains_on_gpu():
    from haelixe.denoise import train

    losses = []
    result = train(epochs=2, steps_per_epoch=6, device="gpu", batch_size=4,
                   on_step=lambda step, loss, lr, model: losses.append(loss))
    assert result["device"] == "gpu" and len(losses) == 12
    assert all(math.isfinite(v) for v in losses)
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
    assert all(p.device.type == "gpu" for p in result["model"].parameters())
