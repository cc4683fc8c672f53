"""softmax / log_softmax backward: the backend's one-kernel first-order gradient against
PyTorch over dims, dtypes and strided inputs and gradients, and against the same
gradient composed from ops (create_graph runs that form)."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")

DTYPES = {"float32": (hx.float32, torch.float32, 1e-6), "float64": (hx.float64, torch.float64,
                                                                       1e-12),
          "bfloat16": (hx.bfloat16, torch.bfloat16, 1e-2)}


def _pair(x, dtype):
    hd, td, _ = DTYPES[dtype]
    a = hx.tensor(x).to(hd).requires_grad_()
    t = torch.tensor(x).to(td).requires_grad_()
    return a, t


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gradient_equals_pytorch(log, dtype, dim):
    rng = np.random.default_rng(dim + 1 + 3 * log)
    x = rng.standard_normal((5, 7, 33)) * 3.0
    g = rng.standard_normal((5, 7, 33))
    a, t = _pair(x, dtype)
    name = "log_softmax" if log else "softmax"
    ya, yt = getattr(a, name)(dim), getattr(t, name)(dim)
    ya.backward(hx.tensor(g).to(a.dtype))
    yt.backward(torch.tensor(g).to(t.dtype))
    tol = DTYPES[dtype][2]
    want = yt.detach().float().numpy()
    np.testing.assert_allclose(ya.detach().float().numpy(),
                               want, rtol=tol, atol=tol)
    np.testing.assert_allclose(a.grad.float().numpy(), t.grad.float().numpy(),
                               rtol=max(tol, 1e-5), atol=max(tol, 1e-5) * 4)


@pytest.mark.parametrize("log", [False, True])
def test_strided_input_and_gradient(log):
    """A transposed input and a gradient that is a flipped, stepped view: read through
    their strides (the kernel wants rows, so they are made contiguous first)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((9, 6))
    g_base = rng.standard_normal((12, 9))
    a = hx.tensor(x, dtype=hx.float64).requires_grad_()
    t = torch.tensor(x, dtype=torch.float64).requires_grad_()
    name = "log_softmax" if log else "softmax"
    ya, yt = getattr(a.T, name)(0), getattr(t.T, name)(0)
    ga = hx.tensor(g_base, dtype=hx.float64)[::2].flip(1)
    gt = torch.tensor(g_base, dtype=torch.float64)[::2].flip(1)
    assert not ga.is_contiguous()
    ya.backward(ga)
    yt.backward(gt)
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("log", [False, True])
def test_first_order_kernel_equals_composed_ops(log):
    """The one-kernel first-order gradient and the gradient written with ops (what
    create_graph differentiates) agree, and the second derivative exists."""
    rng = np.random.default_rng(2)
    x = hx.tensor(rng.standard_normal((4, 11)), dtype=hx.float64).requires_grad_()
    w = hx.tensor(rng.standard_normal((4, 11)), dtype=hx.float64)
    f = (lambda v: (v.log_softmax(1) * w).sum()) if log else (
        lambda v: (v.softmax(1) * w).sum())
    (g1,) = hx.autograd.grad(f(x), [x])
    (g2,) = hx.autograd.grad(f(x), [x], create_graph=True)
    np.testing.assert_allclose(g1.numpy(), g2.detach().numpy(), rtol=1e-13, atol=1e-14)
    (h,) = hx.autograd.grad((g2 * w).sum(), [x])
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    wt = torch.tensor(w.numpy())
    ft = (lambda v: (v.log_softmax(1) * wt).sum()) if log else (
        lambda v: (v.softmax(1) * wt).sum())
    (gt,) = torch.autograd.grad(ft(xt), [xt], create_graph=True)
    (ht,) = torch.autograd.grad((gt * wt).sum(), [xt])
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-10, atol=1e-12)


def test_masked_row_gives_nan_as_pytorch():
    x = np.array([[0.5, -1.0, 2.0], [-np.inf, -np.inf, -np.inf]])
    a = hx.tensor(x).requires_grad_()
    t = torch.tensor(x, dtype=torch.float32).requires_grad_()
    a.softmax(1).sum().backward()
    t.softmax(1).sum().backward()
    np.testing.assert_array_equal(np.isnan(a.grad.numpy()), np.isnan(t.grad.numpy()))
    np.testing.assert_allclose(a.grad.numpy()[0], t.grad.numpy()[0], atol=1e-7)
