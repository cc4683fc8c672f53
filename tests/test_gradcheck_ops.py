"""gradcheck (float64 central differences) for every op and view of the engine core, on
non-contiguous leaves: transposed, step-sliced and flipped layouts."""

from __future__ import annotations

import numpy as np
import pytest
from layouts import DISTINCT_LAYOUTS, leaf, rng

import haelixe as hx
from haelixe.autograd import gradcheck


def normal(*shape):
    return ("normal", shape)


def positive(*shape):
    return ("positive", shape)


def away(*shape):
    """Values at least 0.2 away from 0 and from each other (relu, abs, max, clamp)."""
    return ("away", shape)


def values(spec, seed):
    kind, shape = spec
    g = rng(seed)
    if kind == "normal":
        return g.standard_normal(shape)
    if kind == "positive":
        return g.uniform(0.5, 2.0, shape)
    n = int(np.prod(shape))
    grid = (np.arange(n) - n / 2 + 0.5) * 0.4  # distinct, none within 0.2 of 0
    return g.permutation(grid).reshape(shape)


W = hx.from_numpy(rng(99).standard_normal((3, 4)))  # a fixed weight for scalar outputs

# name: (function of the leaves, input specs)
OPS = {
    # elementwise
    "neg": (lambda x: -x, [normal(3, 4)]),
    "abs": (lambda x: abs(x), [away(3, 4)]),
    "exp": (lambda x: x.exp(), [normal(3, 4)]),
    "log": (lambda x: x.log(), [positive(3, 4)]),
    "sqrt": (lambda x: x.sqrt(), [positive(3, 4)]),
    "rsqrt": (lambda x: x.rsqrt(), [positive(3, 4)]),
    "tanh": (lambda x: x.tanh(), [normal(3, 4)]),
    "sigmoid": (lambda x: x.sigmoid(), [normal(3, 4)]),
    "relu": (lambda x: x.relu(), [away(3, 4)]),
    "gelu": (lambda x: x.gelu(), [normal(3, 4)]),
    "gelu_tanh": (lambda x: x.gelu(approximate="tanh"), [normal(3, 4)]),
    "silu": (lambda x: x.silu(), [normal(3, 4)]),
    "sin": (lambda x: x.sin(), [normal(3, 4)]),
    "cos": (lambda x: x.cos(), [normal(3, 4)]),
    "clamp": (lambda x: x.clamp(-0.3, 0.5), [away(3, 4)]),
    "clamp_min": (lambda x: x.clamp(min=0.1), [away(3, 4)]),
    "scalar_arith": (lambda x: (2.0 - x * 3.0 + 1.5) / 4.0, [normal(3, 4)]),
    "rdiv": (lambda x: 2.0 / x, [positive(3, 4)]),
    "pow_cube": (lambda x: x ** 3, [normal(3, 4)]),
    "pow_square": (lambda x: x ** 2, [normal(3, 4)]),
    "pow_fraction": (lambda x: x ** -1.5, [positive(3, 4)]),
    "rpow": (lambda x: 2.0 ** x, [normal(3, 4)]),
    "add": (lambda x, y: x + y, [normal(3, 4), normal(3, 4)]),
    "sub": (lambda x, y: x - y, [normal(3, 4), normal(3, 4)]),
    "mul": (lambda x, y: x * y, [normal(3, 4), normal(3, 4)]),
    "div": (lambda x, y: x / y, [normal(3, 4), positive(3, 4)]),
    "pow": (lambda x, y: x ** y, [positive(3, 4), normal(3, 4)]),
    "add_broadcast": (lambda x, y: x + y, [normal(3, 1), normal(1, 4)]),
    "mul_broadcast": (lambda x, y: x * y, [normal(3, 4), normal(4)]),
    "div_broadcast": (lambda x, y: x / y, [normal(2, 3, 4), positive(3, 1)]),
    "maximum": (lambda x, y: x.maximum(y), [away(3, 4), normal(3, 4)]),
    "minimum": (lambda x, y: x.minimum(y), [away(3, 4), normal(3, 4)]),
    "where": (lambda x, y: hx.where(x > 0, x, y), [away(3, 4), normal(3, 1)]),
    "masked_fill": (lambda x: x.masked_fill(x > 0, 2.0), [away(3, 4)]),
    # reductions
    "sum": (lambda x: x.sum(), [normal(3, 4)]),
    "sum_dim": (lambda x: x.sum(0), [normal(3, 4)]),
    "sum_dims_keepdim": (lambda x: x.sum((0, 2), keepdim=True), [normal(2, 3, 4)]),
    "mean": (lambda x: x.mean(-1), [normal(3, 4)]),
    "mean_keepdim": (lambda x: x.mean(0, keepdim=True), [normal(3, 4)]),
    "var": (lambda x: x.var(1), [normal(3, 4)]),
    "var_all_biased": (lambda x: x.var(correction=0), [normal(3, 4)]),
    "std": (lambda x: x.std(0, keepdim=True), [normal(3, 4)]),
    "amax": (lambda x: x.amax(1), [away(3, 4)]),
    "amin_keepdim": (lambda x: x.amin(0, keepdim=True), [away(3, 4)]),
    "max_all": (lambda x: x.max(), [away(3, 4)]),
    "max_dim": (lambda x: x.max(1).values, [away(3, 4)]),
    "min_dim_keepdim": (lambda x: x.min(0, keepdim=True)[0], [away(3, 4)]),
    "softmax": (lambda x: x.softmax(-1), [normal(3, 4)]),
    "softmax_dim0": (lambda x: (x.softmax(0) * W).sum(), [normal(3, 4)]),
    "log_softmax": (lambda x: x.log_softmax(1), [normal(3, 4)]),
    "norm": (lambda x: x.norm(), [normal(3, 4)]),
    # matmul
    "matmul": (lambda x, y: x @ y, [normal(3, 4), normal(4, 2)]),
    "matmul_batched_broadcast": (lambda x, y: x @ y, [normal(2, 1, 3, 4), normal(3, 4, 2)]),
    "matmul_vec_mat": (lambda x, y: x @ y, [normal(4), normal(4, 3)]),
    "matmul_mat_vec": (lambda x, y: hx.matmul(x, y), [normal(3, 4), normal(4)]),
    "matmul_dot": (lambda x, y: x @ y, [normal(4), normal(4)]),
    "matmul_transposed_views": (lambda x, y: x.T @ y.mT, [normal(4, 3), normal(2, 4)]),
    # joining and selection
    "cat": (lambda x, y: hx.cat([x, y, x], 1), [normal(3, 4), normal(3, 2)]),
    "stack": (lambda x, y: hx.stack([x, y], -1), [normal(3, 4), normal(3, 4)]),
    "gather": (lambda x: x.gather(1, hx.tensor([[0, 3, 3], [1, 1, 0], [2, 0, 2]])),
               [normal(3, 4)]),
    "gather_smaller_index": (lambda x: x.gather(0, hx.tensor([[2, 0]])), [normal(3, 4)]),
    "index_int_array": (lambda x: x[[0, 2, 0]], [normal(3, 4)]),
    "index_mixed": (lambda x: x[1:, [3, 3, 0]], [normal(3, 4)]),
    "index_mask": (lambda x: x[x > 0], [away(3, 4)]),
    "to_float32_and_back": (lambda x: x.to(hx.float32).to(hx.float64) * 1.0, [normal(3, 4)]),
    "clone": (lambda x: x.clone() * 2.0, [normal(3, 4)]),
    "contiguous": (lambda x: x.contiguous(), [normal(3, 4)]),
    # views
    "view": (lambda x: x.contiguous().view(2, 6), [normal(3, 4)]),
    "reshape": (lambda x: x.reshape(4, 3), [normal(3, 4)]),
    "reshape_of_view": (lambda x: x.T.reshape(-1), [normal(3, 4)]),
    "transpose": (lambda x: x.transpose(0, 2), [normal(2, 3, 4)]),
    "T": (lambda x: x.T * W.T, [normal(3, 4)]),
    "mT": (lambda x: x.mT, [normal(2, 3, 4)]),
    "permute": (lambda x: x.permute(2, 0, 1), [normal(2, 3, 4)]),
    "getitem_basic": (lambda x: x[None, 1:, ::-2, ..., 1], [normal(3, 4, 2)]),
    "getitem_int": (lambda x: x[-1], [normal(3, 4)]),
    "expand": (lambda x: x.expand(2, 3, 4) * hx.from_numpy(rng(5).standard_normal((2, 3, 4))),
               [normal(3, 1)]),
    "broadcast_to": (lambda x: x.broadcast_to((3, 4)) * W, [normal(4)]),
    "unsqueeze": (lambda x: x.unsqueeze(1), [normal(3, 4)]),
    "squeeze": (lambda x: x.squeeze(1), [normal(3, 1, 4)]),
    "flip": (lambda x: x.flip(0, 1) * W, [normal(3, 4)]),
    "narrow": (lambda x: x.narrow(1, 1, 2), [normal(3, 4)]),
    "split": (lambda x: x.split([1, 3], 1)[1] * 2.0, [normal(3, 4)]),
    "chunk": (lambda x: x.chunk(2, 0)[0], [normal(3, 4)]),
    "as_strided": (lambda x: x.as_strided((2, 3), (1, 2), 0) * 1.0, [normal(3, 4)]),
    "as_strided_overlapping": (lambda x: x.as_strided((3, 3), (1, 1), 1) * W[:, :3],
                               [normal(3, 4)]),
    "flatten": (lambda x: x.flatten(), [normal(2, 3, 2)]),
    "unflatten": (lambda x: x.unflatten(1, (2, 2)), [normal(3, 4)]),
    "select_unbind": (lambda x: x.select(1, 2) + x.unbind(0)[1][:3], [normal(3, 4)]),
    # in-place ops on a non-leaf, recorded as their out-of-place form
    "in_place_chain": (lambda x, y: (x * 1.0).mul_(y).add_(y).clamp_(-1.0, 1.0).sub_(0.5),
                       [normal(3, 4), normal(3, 4)]),
}


@pytest.mark.parametrize("kind", DISTINCT_LAYOUTS)
@pytest.mark.parametrize("name", list(OPS))
def test_gradcheck(name, kind):
    fn, specs = OPS[name]
    inputs = [leaf(values(spec, seed), kind) for seed, spec in enumerate(specs)]
    for t in inputs:
        if 1 not in t.shape:
            assert not t.is_contiguous()
    extra = {}
    if name == "to_float32_and_back":
        extra = dict(eps=1e-3, atol=1e-3, rtol=1e-2)  # float32 resolution
    assert gradcheck(fn, inputs, name=name, **extra)


@pytest.mark.parametrize("name", [n for n in OPS if n != "to_float32_and_back"])
def test_gradgradcheck(name):
    """Second derivatives (create_graph=True through each op's backward)."""
    fn, specs = OPS[name]
    inputs = [leaf(values(spec, seed), "flipped") for seed, spec in enumerate(specs)]
    assert hx.autograd.gradgradcheck(fn, inputs, name=name)


def test_gradcheck_reports_a_wrong_derivative():
    class BadSquare(hx.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x._be.mul(x._data, x._data)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x  # should be 2 * g * x

    x = leaf(rng(0).standard_normal((2, 2)))
    with pytest.raises(hx.autograd.GradcheckError) as e:
        gradcheck(BadSquare.apply, [x], name="bad_square")
    msg = str(e.value)
    assert "bad_square" in msg and "input 0" in msg and "numerical" in msg
    assert not gradcheck(BadSquare.apply, [x], raise_exception=False)
