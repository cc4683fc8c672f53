"""matmul's first-order backward (the backend's kernels on raw arrays, a batch folded
into one product for a shared matrix) against PyTorch and against the composed form
that create_graph runs, over strided, broadcast and 0-size operands."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")

CASES = {  # name: (a's shape, b's shape, how a is viewed)
    "batch_times_matrix": ((4, 5, 7), (7, 3), lambda t: t),
    "strided_batch_times_matrix": ((4, 10, 8), (7, 3), lambda t: t[:, ::2, 1:]),
    "two_batch_dims": ((2, 3, 5, 7), (7, 3), lambda t: t),
    "transposed_matrix": ((3, 5, 7), (3, 7), lambda t: t),
    "matrix_times_batch": ((5, 7), (4, 7, 3), lambda t: t),
    "broadcast_batches": ((2, 1, 5, 7), (3, 7, 3), lambda t: t),
    "empty_batch": ((0, 5, 7), (7, 3), lambda t: t),
    "empty_rows": ((4, 0, 7), (7, 3), lambda t: t),
    "empty_inner": ((4, 5, 0), (0, 3), lambda t: t),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_equal_pytorch(name):
    sa, sb, view = CASES[name]
    rng = np.random.default_rng(len(name))
    x, w = rng.standard_normal(sa), rng.standard_normal(sb)
    a, b = hx.tensor(x).requires_grad_(), hx.tensor(w).requires_grad_()
    ta = torch.tensor(x, dtype=torch.float32).requires_grad_()
    tb = torch.tensor(w, dtype=torch.float32).requires_grad_()
    if name == "transposed_matrix":  # b read through its transpose
        y, ty = view(a) @ b.mT, view(ta) @ tb.mT
    else:
        y, ty = view(a) @ b, view(ta) @ tb
    g = rng.standard_normal(tuple(ty.shape))
    y.backward(hx.tensor(g))
    ty.backward(torch.tensor(g, dtype=torch.float32))
    for ours, theirs in ((a, ta), (b, tb)):
        assert ours.grad.shape == tuple(theirs.grad.shape)
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5,
                                   atol=1e-5)


def test_first_order_equals_create_graph_form():
    rng = np.random.default_rng(0)
    a = hx.tensor(rng.standard_normal((3, 6, 4)), dtype=hx.float64).requires_grad_()
    b = hx.tensor(rng.standard_normal((4, 5)), dtype=hx.float64).requires_grad_()
    w = hx.tensor(rng.standard_normal((3, 6, 5)), dtype=hx.float64)
    first = hx.autograd.grad(((a @ b) * w).sum(), [a, b])
    composed = hx.autograd.grad(((a @ b) * w).sum(), [a, b], create_graph=True)
    for f, c in zip(first, composed):
        np.testing.assert_allclose(f.numpy(), c.detach().numpy(), rtol=1e-13, atol=1e-13)
