"""Sparse COO tensors (haelixe.sparse) against PyTorch's: construction, coalescing, the
product with a dense matrix either way round with its gradients (float64), conversions,
the ops that take one as its dense form, and the errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import haelixe as hx

warnings.filterwarnings("ignore", message="Sparse invariant checks")

IDX = [[0, 1, 1, 2, 0, 3], [2, 0, 2, 1, 2, 3]]  # (0, 2) twice
VALS = [1.0, 2.0, 3.0, 4.0, 5.0, -1.5]
RNG = np.random.default_rng(0)


def pair(size=(4, 5), dtype=np.float64, requires_grad=False):
    v = np.array(VALS, dtype=dtype)
    ours = hx.sparse_coo_tensor(IDX, hx.tensor(v), size, requires_grad=requires_grad)
    theirs = torch.sparse_coo_tensor(IDX, torch.tensor(v), size, requires_grad=requires_grad)
    return ours, theirs


def test_construction_dense_form_and_coalescing_match_pytorch():
    s, t = pair()
    assert s.is_sparse and not hx.ones(1).is_sparse and s.shape == (4, 5)
    assert s._nnz() == t._nnz() == 6 and s.dtype is hx.float64
    np.testing.assert_array_equal(s.to_dense().numpy(), t.to_dense().numpy())
    c, tc = s.coalesce(), t.coalesce()
    assert c.is_coalesced() and c.indices().tolist() == tc.indices().tolist()
    np.testing.assert_array_equal(c.values().numpy(), tc.values().numpy())
    inferred = hx.sparse_coo_tensor(IDX, VALS)
    assert inferred.shape == tuple(torch.sparse_coo_tensor(IDX, VALS).shape) == (4, 4)
    empty = hx.sparse_coo_tensor(hx.zeros(2, 0, dtype=hx.int64), hx.zeros(0), (2, 3))
    assert empty.to_dense().tolist() == [[0.0] * 3] * 2 and empty.sum().item() == 0.0
    with pytest.raises(RuntimeError, match="coalesce"):
        s.indices()


@pytest.mark.parametrize("shape", [(3, 4), (5,), (2, 3, 2)])
def test_to_sparse_keeps_the_nonzero_entries_in_pytorchs_order(shape):
    d = RNG.standard_normal(shape) * (RNG.random(shape) > 0.5)
    s, t = hx.tensor(d).to_sparse(), torch.tensor(d).to_sparse()
    assert s.is_coalesced() and s.indices().tolist() == t.indices().tolist()
    np.testing.assert_array_equal(s.values().numpy(), t.values().numpy())
    np.testing.assert_array_equal(s.to_dense().numpy(), d)


@pytest.mark.parametrize("form", ["spmm", "mm", "matmul", "at", "sparse.mm", "method"])
def test_the_product_and_its_gradients_match_pytorch(form):
    s, t = pair(requires_grad=True)
    d = RNG.standard_normal((5, 3))
    x, tx = hx.tensor(d, requires_grad=True), torch.tensor(d, requires_grad=True)
    call = {"spmm": lambda lib, a, b: lib.spmm(a, b), "mm": lambda lib, a, b: lib.mm(a, b),
            "matmul": lambda lib, a, b: lib.matmul(a, b), "at": lambda lib, a, b: a @ b,
            "sparse.mm": lambda lib, a, b: lib.sparse.mm(a, b),
            "method": lambda lib, a, b: a.mm(b)}[form]
    y, ty = call(hx, s, x), call(torch, t, tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    w = RNG.standard_normal(y.shape)
    (y * hx.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    # the values' gradient: PyTorch's (dense) gradient read at each entry's position
    dense_grad = tx.grad.new_tensor(t.grad.to_dense() if t.grad.is_sparse else t.grad)
    expected = dense_grad.numpy()[tuple(np.array(IDX))]
    np.testing.assert_allclose(s.grad._values().numpy(), expected, rtol=1e-12)


def test_dense_times_sparse_and_a_vector_match_pytorch():
    s, t = pair()
    d = RNG.standard_normal((2, 4))
    x, tx = hx.tensor(d, requires_grad=True), torch.tensor(d, requires_grad=True)
    y, ty = x @ s, tx @ t
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    v = RNG.standard_normal(5)
    np.testing.assert_allclose((s @ hx.tensor(v)).numpy(), (t @ torch.tensor(v)).numpy(),
                               rtol=1e-12)


def test_ops_with_dense_tensors_take_the_dense_form_and_numbers_keep_it_sparse():
    s, t = pair()
    eye, teye = hx.ones(4, 5), torch.ones(4, 5)
    # (PyTorch adds only dense + sparse; Haelixe takes either order, as for numbers)
    for ours, theirs in ((eye + s, teye + t), (s + eye, teye + t), (s - eye, -(teye - t)),
                         (eye - s, teye - t), (s * eye, (t * teye).to_dense())):
        assert isinstance(ours, hx.Tensor)
        np.testing.assert_array_equal(ours.numpy(), theirs.to_dense().numpy()
                                      if theirs.is_sparse else theirs.numpy())
    for ours, theirs in ((s * 2, t * 2), (2 * s, 2 * t), (-s, -t), (s / 4, t / 4),
                         (s + s, t + t)):
        assert ours.is_sparse
        np.testing.assert_array_equal(ours.to_dense().numpy(), theirs.to_dense().numpy())
    assert s.sum().item() == t.sum().item()
    np.testing.assert_array_equal(s.sum(1).numpy(), torch.sparse.sum(t, 1).to_dense().numpy())
    np.testing.assert_array_equal(s.t().to_dense().numpy(), t.t().to_dense().numpy())
    assert s.t().shape == (5, 4) and s.transpose(0, 1).shape == (5, 4)


def test_a_graph_convolutions_normalized_adjacency_matches_pytorch():
    edges = RNG.integers(0, 6, (2, 12))

    def normalized(lib):
        a = lib.sparse_coo_tensor(lib.tensor(edges), lib.ones(12), (6, 6))
        a = lib.eye(6) + a
        deg = lib.sqrt(1 / lib.sum(a, dim=1))
        d = lib.diag(deg).to_sparse()
        return (d @ a @ d).to_sparse()

    ours, theirs = normalized(hx), normalized(torch)
    np.testing.assert_allclose(ours.to_dense().numpy(), theirs.to_dense().numpy(),
                               rtol=1e-6)
    h = RNG.standard_normal((6, 3)).astype(np.float32)
    np.testing.assert_allclose(hx.spmm(ours, hx.tensor(h)).numpy(),
                               torch.spmm(theirs, torch.tensor(h)).numpy(), rtol=1e-5,
                               atol=1e-6)


def test_bad_input_is_refused_naming_the_fix():
    with pytest.raises(TypeError, match="indices must be integers"):
        hx.sparse_coo_tensor([[0.5]], [1.0])
    with pytest.raises(ValueError, match="one value per index"):
        hx.sparse_coo_tensor([[0, 1]], [1.0])
    with pytest.raises(RuntimeError, match="beyond size"):
        hx.sparse_coo_tensor([[0, 3]], [1.0, 2.0], (3,))
    with pytest.raises(RuntimeError, match=">= 0"):
        hx.sparse_coo_tensor([[-1]], [1.0], (3,))
    s, _ = pair()
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        hx.spmm(s, hx.ones(4, 2))
    with pytest.raises(AttributeError, match="to_dense"):
        s.softmax(0)
    with pytest.raises(RuntimeError, match="to_sparse\\(\\) with no arguments"):
        hx.ones(2, 2).to_sparse(layout="sparse_csr")


@pytest.mark.gpu
def test_the_product_runs_on_the_gpu(be):
    s, t = pair(dtype=np.float32)
    d = RNG.standard_normal((5, 3)).astype(np.float32)
    x = hx.tensor(d, device="gpu", requires_grad=True)
    g = s.to("gpu")
    assert g.device == "gpu" and g._indices().device == "gpu"
    y = hx.spmm(g, x)
    np.testing.assert_allclose(y.cpu().detach().numpy(),
                               torch.spmm(t, torch.tensor(d)).numpy(), rtol=1e-5, atol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), (t.t() @ torch.ones(4, 3)).numpy(),
                               rtol=1e-5)
