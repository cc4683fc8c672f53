"""Forward values and gradients equal PyTorch's on the same non-contiguous inputs, for
composite expressions that together use every op of the engine core."""

from __future__ import annotations

import numpy as np
import pytest
from layouts import LAYOUTS, rng

import haelixe as hx

torch = pytest.importorskip("torch")


class HX:
    """The few spellings that differ between the two libraries."""

    cat, stack, where = staticmethod(hx.cat), staticmethod(hx.stack), staticmethod(hx.where)

    @staticmethod
    def gelu(x, approximate="none"):
        return x.gelu(approximate=approximate)

    @staticmethod
    def silu(x):
        return x.silu()

    @staticmethod
    def index(data):
        return hx.tensor(data)

    @staticmethod
    def rev(x):
        return x[::-1]  # a negative-step slice (PyTorch has none: it flips instead)


class TORCH:
    cat, stack, where = staticmethod(torch.cat), staticmethod(torch.stack), \
        staticmethod(torch.where)

    @staticmethod
    def gelu(x, approximate="none"):
        return torch.nn.functional.gelu(x, approximate=approximate)

    @staticmethod
    def silu(x):
        return torch.nn.functional.silu(x)

    @staticmethod
    def index(data):
        return torch.tensor(data)

    @staticmethod
    def rev(x):
        return x.flip(0)


# name: (expression over (ns, *inputs), input shapes)
EXPRESSIONS = {
    "elementwise_mix": (
        lambda ns, x, y: ((x * y - y / (abs(x) + 1.0)) ** 2 + (-x).exp() * 0.1
                          + (x - 2.0 * y).tanh() + ns.where(x > y, x, y) + x.maximum(y)
                          + 3.0 / (y * y + 1.0) - x.minimum(y)).sum(),
        [(3, 4), (3, 4)]),
    "activations": (
        lambda ns, x: (x.sigmoid() * x.relu() + ns.gelu(x) + ns.gelu(x, "tanh") + ns.silu(x)
                       + x.clamp(-0.5, 0.5) + x.clamp(min=0.0) + x.sin() * x.cos()).sum(),
        [(4, 5)]),
    "logs_and_roots": (
        lambda ns, x: ((x * x + 1.0).log() + (x * x + 0.5).sqrt() + (x * x + 0.5).rsqrt()
                       + (x * x + 1.0) ** 1.5 + 2.0 ** x + (x * x + 1.0) ** x).mean(),
        [(3, 4)]),
    "broadcasting": (
        lambda ns, x, y, z: ((x + y) * z - x / (z * z + 1.0)).sum(),
        [(2, 3, 1), (3, 4), (4,)]),
    "reductions": (
        lambda ns, x: (x.sum(0) * x.mean(1, keepdim=True).sum() + x.var(1).sum()
                       + x.var(0, correction=0).sum() + x.std(1).sum() + x.amax(1).sum()
                       + x.amin(0).sum() + x.max(1).values.sum() + x.min(0)[0].sum()
                       + x.max() + x.sum((0, 1))).sum(),
        [(4, 5)]),
    "softmax_family": (
        lambda ns, x, w: ((x.softmax(-1) * w).sum() + (x.log_softmax(0) * w).sum()
                          + (x.softmax(0) * x.log_softmax(1)).sum()),
        [(4, 5), (4, 5)]),
    "matmul_family": (
        lambda ns, a, b, v: ((a @ b).tanh().sum() + (a.mT @ a).sum() + (b.T @ v).sum()
                             + (v @ b).sum() + (v @ v) + (b.T @ a.T).mean()),
        [(3, 4), (4, 5), (4,)]),
    "batched_matmul": (
        lambda ns, a, b: ((a @ b.mT).softmax(-1) @ b).pow(2).sum(),
        [(2, 3, 4), (2, 5, 4)]),
    "views": (
        lambda ns, x: ((x.permute(2, 1, 0).reshape(-1)[::3] * 2.0).sum()
                       + (x.flip(0).permute(2, 0, 1).unsqueeze(1) ** 2).squeeze(1).sum(1).sum()
                       + x.transpose(0, 1).narrow(0, 1, 2).flatten().sum()
                       + x.unflatten(2, (2, 2)).expand(3, 3, 2, 2).mean()
                       + x[..., None, 1:].mT.sum()
                       + (ns.rev(x[1, :, 0]) @ ns.rev(x[:, 0, 1:3])).sum()),
        [(3, 3, 4)]),
    "split_chunk_unbind": (
        lambda ns, x: (x.split([1, 2], 1)[1].exp().sum() + x.chunk(2, 0)[1].sum()
                       * x.unbind(1)[0].sum() + x.select(0, 2).pow(3).sum()),
        [(3, 3)]),
    "joining": (
        lambda ns, x, y: (ns.cat([x, y * 2.0, x], 1).tanh().sum()
                          + ns.stack([x, y[:, :3]], 0).pow(2).sum()),
        [(3, 3), (3, 4)]),
    "selection": (
        lambda ns, x: (x.gather(1, ns.index([[0, 0, 2], [1, 3, 3], [2, 1, 0]])).exp().sum()
                       + x[ns.index([0, 2, 0])].sin().sum() + x[1:, [3, 3, 0]].sum()
                       + x.masked_fill(x > 0.3, -1.0).pow(2).sum() + x[x < 0].exp().sum()),
        [(3, 4)]),
    "dtype_round_trip": (
        lambda ns, x: (x.float().tanh().double() * x).sum(),
        [(3, 4)]),
    "in_place_on_non_leaf": (
        lambda ns, x, y: (x * 1.0).mul_(y).add_(y).sub_(0.25).clamp_(-0.8, 0.8).exp().sum(),
        [(3, 4), (3, 4)]),
}


def inputs_for(shapes, layout, seed):
    arrays = [rng(seed + i).standard_normal(s) for i, s in enumerate(shapes)]
    hx_in = [LAYOUTS[layout](a)[0].detach().requires_grad_() for a in arrays]
    # the same values and the same kind of layout on the PyTorch side
    th_in = []
    for a in arrays:
        rev = tuple(range(a.ndim - 1, -1, -1))
        t = torch.from_numpy(np.ascontiguousarray(a.transpose(rev))).permute(rev)
        th_in.append(t.detach().requires_grad_())
    return arrays, hx_in, th_in


@pytest.mark.parametrize("layout", ["transposed", "flipped", "sliced"])
@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_gradients_match_pytorch(name, layout):
    fn, shapes = EXPRESSIONS[name]
    arrays, hx_in, th_in = inputs_for(shapes, layout, seed=len(name))
    assert any(not t.is_contiguous() for t in hx_in)
    y_hx = fn(HX, *hx_in)
    y_th = fn(TORCH, *th_in)
    np.testing.assert_allclose(y_hx.item(), y_th.item(), rtol=1e-6, atol=1e-6)
    y_hx.backward()
    y_th.backward()
    for i, (a, b) in enumerate(zip(hx_in, th_in)):
        assert a.grad is not None and a.grad.shape == tuple(b.grad.shape), name
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-8,
                                   err_msg=f"{name}: gradient of input {i}")


def test_second_derivatives_match_pytorch():
    a = rng(1).standard_normal((3, 4))
    w = rng(2).standard_normal((4, 4))
    x_hx = hx.from_numpy(a.copy()).requires_grad_()
    x_th = torch.from_numpy(a.copy()).requires_grad_()

    def f(x, w):
        return ((x @ w).tanh().softmax(-1) * x.exp()).sum()

    (g_hx,) = hx.autograd.grad(f(x_hx, hx.from_numpy(w)), [x_hx], create_graph=True)
    (g_th,) = torch.autograd.grad(f(x_th, torch.from_numpy(w)), [x_th], create_graph=True)
    (h_hx,) = hx.autograd.grad((g_hx * g_hx).sum(), [x_hx])
    (h_th,) = torch.autograd.grad((g_th * g_th).sum(), [x_th])
    np.testing.assert_allclose(h_hx.numpy(), h_th.numpy(), rtol=1e-6, atol=1e-9)


def test_bfloat16_matches_pytorch_rounding():
    a = rng(3).standard_normal((4, 8)).astype(np.float32)
    x = hx.from_numpy(a).to(hx.bfloat16)
    t = torch.from_numpy(a).to(torch.bfloat16)
    np.testing.assert_array_equal(x.float().numpy(), t.float().numpy())
    np.testing.assert_array_equal((x * 2.0 + x).float().numpy(), (t * 2.0 + t).float().numpy())
    big = np.tile(a, (1, 512))  # long rows: where bfloat16 accumulation would go wrong
    x, t = hx.from_numpy(big).bfloat16(), torch.from_numpy(big).bfloat16()
    for f in (lambda v: v.sum(1), lambda v: v.mean(1), lambda v: v.softmax(1),
              lambda v: v.sum()):
        np.testing.assert_array_equal(f(x).float().numpy(), f(t).float().numpy())
    # var is composed of bfloat16 ops here (PyTorch runs one float32 kernel): ulps apart
    np.testing.assert_allclose(x.var(1).float().numpy(), t.var(1).float().numpy(), rtol=2e-2)
    np.testing.assert_allclose(x.log_softmax(1).float().numpy(),
                               t.log_softmax(1).float().numpy(), atol=0.07)  # 1 ulp


def test_a_float_cube_rounds_as_pytorchs_two_products():
    # PyTorch cubes by x * x * x, not libm's pow: a quarter of the results differ by an ulp
    a = rng(4).standard_normal(256).astype(np.float32)
    for x, t in ((hx.from_numpy(a), torch.from_numpy(a)),
                 (hx.from_numpy(a.astype(np.float64)), torch.from_numpy(a.astype(np.float64)))):
        np.testing.assert_array_equal((x ** 3).numpy(), (t ** 3).numpy())
        np.testing.assert_array_equal(hx.pow(x, 3.0).numpy(), torch.pow(t, 3.0).numpy())


EDGE_POINTS = {
    "relu_at_zero": lambda ns, x: x.relu(),
    "abs_at_zero": lambda ns, x: abs(x),
    "clamp_at_bounds": lambda ns, x: x.clamp(0.0, 1.0),
    "pow_zero": lambda ns, x: x ** 0,
    "pow_one": lambda ns, x: x ** 1,
    "max_all_ties": lambda ns, x: x.max(),
    "amax_ties": lambda ns, x: x.reshape(2, 3).amax(1),
    "max_dim_ties": lambda ns, x: x.reshape(2, 3).max(1).values,
    "maximum_ties": lambda ns, x: x.maximum(x.flip(0)),
    "where_at_zero": lambda ns, x: ns.where(x > 0, x * 2.0, x * 3.0),
    "sigmoid_tanh_at_zero": lambda ns, x: x.sigmoid() + x.tanh(),
}


@pytest.mark.parametrize("name", list(EDGE_POINTS))
def test_gradients_at_kinks_and_ties_match_pytorch(name):
    # zeros, bounds and repeated values: where one-sided derivatives disagree
    a = np.array([0.0, 1.0, 1.0, 0.0, -1.0, 1.0])
    x_hx = hx.from_numpy(a.copy()).requires_grad_()
    x_th = torch.from_numpy(a.copy()).requires_grad_()
    w = np.arange(1.0, 7.0)
    y_hx, y_th = EDGE_POINTS[name](HX, x_hx), EDGE_POINTS[name](TORCH, x_th)
    np.testing.assert_allclose(y_hx.detach().numpy(), y_th.detach().numpy())
    (y_hx * hx.from_numpy(w[:y_hx.numel()].reshape(y_hx.shape))).sum().backward()
    (y_th * torch.from_numpy(w[:y_th.numel()].reshape(y_th.shape))).sum().backward()
    np.testing.assert_allclose(x_hx.grad.numpy(), x_th.grad.numpy(), err_msg=name)
