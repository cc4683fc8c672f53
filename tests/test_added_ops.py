"""log2, atan and hardsigmoid (elementwise declarations), logcumsumexp, cummax and
std_mean: each against PyTorch forward, on 0-d, 0-size and strided inputs, with float64
gradients checked by finite differences, and on the GPU against the CPU.

(The op registry's differential suite, tests/test_op_registry.py, also runs each of them
over every dtype and layout: these are the cases it does not reach.)"""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import gradcheck

torch = pytest.importorskip("torch")

#: name -> (haelixe call, PyTorch call), on one tensor
OPS = {
    "log2": (lambda x: x.abs().add(0.5).log2(), lambda x: x.abs().add(0.5).log2()),
    "atan": (lambda x: hx.atan(x), lambda x: torch.atan(x)),
    "hardsigmoid": (lambda x: hx.nn.functional.hardsigmoid(x * 4.0),
                    lambda x: torch.nn.functional.hardsigmoid(x * 4.0)),
    "logcumsumexp": (lambda x: hx.logcumsumexp(x, -1), lambda x: torch.logcumsumexp(x, -1)),
    "cummax": (lambda x: hx.cummax(x, -1).values, lambda x: torch.cummax(x, -1).values),
    "std_mean": (lambda x: _spread(x, *hx.std_mean(x, -1, keepdim=True)),
                 lambda x: _spread(x, *torch.std_mean(x, -1, keepdim=True))),
    # (each in its input's shape: the gradient tests feed one of that shape)
    "outer": (lambda x: hx.outer(x[:, 0], x[0]), lambda x: torch.outer(x[:, 0], x[0])),
    "diff": (lambda x: x.diff(append=x[:, :1] * 2.0), lambda x: x.diff(append=x[:, :1] * 2.0)),
}
def _spread(x, std, mean):
    return x * std + mean  # (both results, in the input's shape)


VIEWS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.transpose(0, 1),
    "flipped": lambda t: t.flip(1),
    "expanded": lambda t: t[:1].expand(3, t.shape[1]),
}


def _values(shape, seed=0):
    # distinct values: cummax's indices are unambiguous and gradcheck sees no ties
    g = np.random.default_rng(seed)
    return g.permutation(np.prod(shape, dtype=int)).reshape(shape) * 0.37 - 1.9


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("name", sorted(OPS))
def test_added_op_matches_pytorch_on_views(name, view):
    fh, ft = OPS[name]
    a = _values((4, 5))
    got = fh(VIEWS[view](hx.tensor(a)))
    want = ft(VIEWS[view](torch.tensor(a)))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    assert got.dtype is hx.float64 and got.shape == tuple(want.shape)


@pytest.mark.parametrize("name", sorted(OPS))
def test_added_op_float64_gradient_passes_gradcheck(name):
    fh, _ = OPS[name]
    x = hx.tensor(_values((3, 4), 1)).requires_grad_()
    assert gradcheck(fh, (x,))


@pytest.mark.parametrize("name", sorted(OPS))
def test_added_op_float64_gradient_matches_pytorch_on_a_transposed_view(name):
    fh, ft = OPS[name]
    a = _values((4, 3), 2)
    h = hx.tensor(a).requires_grad_()
    t = torch.tensor(a).requires_grad_()
    gy = np.random.default_rng(3).standard_normal((3, 4))
    fh(h.transpose(0, 1)).backward(hx.tensor(gy))
    ft(t.transpose(0, 1)).backward(torch.tensor(gy))
    np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(), (0,), (2, 0), (0, 3)])
def test_scans_and_std_mean_on_0d_and_empty_inputs(shape):
    a = np.full(shape, 0.5) if shape == () else np.zeros(shape)
    x, t = hx.tensor(a), torch.tensor(a)
    dim = 0 if shape == () else -1
    for got, want in ((hx.logcumsumexp(x, dim), torch.logcumsumexp(t, dim)),
                      (hx.cummax(x, dim).values, torch.cummax(t, dim).values),
                      (hx.cummax(x, dim).indices, torch.cummax(t, dim).indices)):
        assert got.shape == tuple(want.shape) and got.dtype.name == str(want.dtype)[6:]
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    if 0 not in shape and shape:
        np.testing.assert_allclose(hx.std_mean(x)[1].numpy(), torch.std_mean(t)[1].numpy())


def test_logcumsumexp_keeps_terms_far_below_the_later_maximum():
    a = np.array([-1000.0, 0.0, -2000.0, 5.0, -np.inf])
    np.testing.assert_allclose(hx.logcumsumexp(hx.tensor(a), 0).numpy(),
                               torch.logcumsumexp(torch.tensor(a), 0).numpy())
    x = hx.tensor([-1000.0, 0.0, 3.0]).requires_grad_()
    hx.logcumsumexp(x, 0).sum().backward()
    t = torch.tensor([-1000.0, 0.0, 3.0], dtype=torch.float64).requires_grad_()
    torch.logcumsumexp(t, 0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.float().numpy(), rtol=1e-6)


def test_cummax_indices_take_the_latest_tie_and_nans_stay_the_maximum():
    a = np.array([[1.0, 3.0, 3.0, 2.0, np.nan, 7.0, np.nan]])
    got, want = hx.cummax(hx.tensor(a), 1), torch.cummax(torch.tensor(a), 1)
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
    ints = np.array([[2, 1, 2, 5, 5]], dtype=np.int32)
    got = hx.cummax(hx.tensor(ints), 1)
    want = torch.cummax(torch.tensor(ints), 1)
    assert got.values.dtype is hx.int32 and got.indices.dtype is hx.int64
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())


def test_added_ops_refuse_bad_input_by_name():
    with pytest.raises(TypeError, match="logcumsumexp: not defined for int64"):
        hx.logcumsumexp(hx.tensor([1, 2]), 0)
    with pytest.raises(TypeError, match="hardsigmoid"):
        hx.nn.functional.hardsigmoid(hx.tensor([1, 2]))
    with pytest.raises(IndexError, match="cummax"):
        hx.cummax(hx.tensor([1.0, 2.0]), 1)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(OPS))
def test_added_op_on_the_gpu_equals_the_cpu(be, name):
    fh, _ = OPS[name]
    a = _values((4, 5)).astype(np.float32)
    cpu = hx.tensor(a).requires_grad_()
    gpu = hx.tensor(a, device="gpu").requires_grad_()
    out_cpu, out_gpu = fh(cpu), fh(gpu)
    assert out_gpu.device.type == "gpu"
    np.testing.assert_allclose(out_gpu.detach().cpu().numpy(), out_cpu.detach().numpy(), rtol=2e-5,
                               atol=2e-5)
    out_cpu.sum().backward()
    out_gpu.sum().backward()
    np.testing.assert_allclose(gpu.grad.cpu().numpy(), cpu.grad.numpy(), rtol=2e-5,
                               atol=2e-5)


@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3), (3, 1)])
def test_diff_count_nonzero_and_outer_on_empty_and_edge_inputs(shape):
    """diff past the dim's length leaves it empty, n=0 returns the input, booleans
    differ as !=; count_nonzero over every dim, one and a tuple; outer of empty vectors:
    each as PyTorch gives it."""
    a = np.random.default_rng(0).standard_normal(shape)
    x, t = hx.tensor(a), torch.tensor(a)
    pairs = [(hx.diff(x, 3), torch.diff(t, 3)), (hx.diff(x, 0), torch.diff(t, 0)),
             (hx.diff(x > 0), torch.diff(t > 0)),
             (hx.count_nonzero(x > 0), torch.count_nonzero(t > 0)),
             (hx.count_nonzero(x > 0, -1), torch.count_nonzero(t > 0, -1)),
             (hx.count_nonzero(x > 0, tuple(range(x.ndim))),
              torch.count_nonzero(t > 0, tuple(range(t.ndim)))),
             (hx.outer(x.flatten(), x.flatten()[:2]), torch.outer(t.flatten(), t.flatten()[:2]))]
    for got, want in pairs:
        assert got.shape == tuple(want.shape) and got.dtype.name == str(want.dtype)[6:]
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_diff_and_outer_refuse_what_pytorch_refuses_naming_themselves():
    with pytest.raises(RuntimeError, match="outer: expected two 1-D tensors"):
        hx.outer(hx.zeros(2, 2), hx.zeros(2))
    with pytest.raises(RuntimeError, match="diff: expected a tensor of at least 1 dim"):
        hx.diff(hx.tensor(1.0))
    with pytest.raises(ValueError, match="diff: n must be a non-negative int"):
        hx.diff(hx.zeros(3), -1)
