"""nn.init.orthogonal_, eye_, dirac_ and sparse_ against PyTorch's: exact values where
they are fixed, the defining properties where they are drawn, and PyTorch's errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import haelixe as hx
from haelixe import nn

INIT = nn.init


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (6, 2, 3), (2, 3, 2, 2), (1, 7)])
@pytest.mark.parametrize("dtype", [hx.float32, hx.float64])
def test_orthogonal_is_orthogonal(shape, dtype):
    w = hx.empty(*shape, dtype=dtype, requires_grad=True)
    assert INIT.orthogonal_(w, gain=2.5) is w
    assert w.requires_grad and w.dtype is dtype and w.shape == shape
    m = w.detach().numpy().astype(np.float64).reshape(shape[0], -1) / 2.5
    small = min(m.shape)
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    tol = 1e-5 if dtype is hx.float32 else 1e-12
    np.testing.assert_allclose(gram, np.eye(small), atol=tol)
    # torch's values have the same property (the draw differs: another generator)
    t = torch.nn.init.orthogonal_(torch.empty(*shape, dtype=torch.float64), gain=2.5)
    tm = t.numpy().reshape(shape[0], -1) / 2.5
    tgram = tm.T @ tm if tm.shape[0] >= tm.shape[1] else tm @ tm.T
    np.testing.assert_allclose(tgram, np.eye(small), atol=1e-12)


def test_orthogonal_draws_from_the_generator():
    hx.manual_seed(3)
    a = INIT.orthogonal_(hx.empty(4, 3)).numpy()
    hx.manual_seed(3)
    b = INIT.orthogonal_(hx.empty(4, 3)).numpy()
    c = INIT.orthogonal_(hx.empty(4, 3)).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    g1, g2 = hx.Generator().manual_seed(5), hx.Generator().manual_seed(5)
    np.testing.assert_array_equal(INIT.orthogonal_(hx.empty(3, 3), generator=g1).numpy(),
                                  INIT.orthogonal_(hx.empty(3, 3), generator=g2).numpy())
    # Q of the generator's normal draw, each column's sign that of R's diagonal
    for rows, cols in [(5, 3), (3, 5)]:
        draw = hx.empty(rows, cols, dtype=hx.float64).normal_(
            generator=hx.Generator().manual_seed(9)).numpy()
        a = draw if rows >= cols else draw.T
        q, r = np.linalg.qr(a)
        q = q * np.sign(np.diag(r))
        want = q if rows >= cols else q.T
        got = INIT.orthogonal_(hx.empty(rows, cols, dtype=hx.float64),
                               generator=hx.Generator().manual_seed(9)).numpy()
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_orthogonal_of_an_empty_tensor_and_errors():
    assert INIT.orthogonal_(hx.empty(0, 3)).shape == (0, 3)
    torch.nn.init.orthogonal_(torch.empty(0, 3))
    for shape in [(3,), (1,)]:
        with pytest.raises(ValueError, match="2 or more dimensions"):
            INIT.orthogonal_(hx.empty(*shape))
        with pytest.raises(ValueError, match="2 or more dimensions"):
            torch.nn.init.orthogonal_(torch.empty(*shape))


@pytest.mark.parametrize("shape", [(3, 3), (2, 5), (5, 2), (0, 3)])
def test_eye_equals_torch(shape):
    w = hx.full(shape, 7.0, requires_grad=True)
    assert INIT.eye_(w) is w and w.requires_grad
    np.testing.assert_array_equal(w.detach().numpy(),
                                  torch.nn.init.eye_(torch.full(shape, 7.0)).numpy())


def test_eye_errors_as_torch():
    for shape in [(3,), (2, 2, 2)]:
        with pytest.raises(ValueError, match="only tensors with 2 dimensions"):
            INIT.eye_(hx.empty(*shape))
        with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
            torch.nn.init.eye_(torch.empty(*shape))


@pytest.mark.parametrize("shape,groups", [((4, 4, 3), 1), ((6, 3, 5), 1), ((2, 5, 3), 1),
                                          ((6, 2, 3, 3), 2), ((4, 3, 2, 4), 1),
                                          ((6, 1, 3, 3, 3), 3), ((4, 4, 2, 2, 1), 2),
                                          ((4, 4, 3), 4)])
def test_dirac_equals_torch(shape, groups):
    w = hx.full(shape, 5.0, dtype=hx.float64)
    assert INIT.dirac_(w, groups) is w
    t = torch.nn.init.dirac_(torch.full(shape, 5.0, dtype=torch.float64), groups)
    np.testing.assert_array_equal(w.numpy(), t.numpy())


def test_dirac_errors_as_torch():
    for shape in [(3, 3), (2, 2, 2, 2, 2, 2)]:
        with pytest.raises(ValueError, match="3, 4, or 5 dimensions"):
            INIT.dirac_(hx.empty(*shape))
        with pytest.raises(ValueError, match="3, 4, or 5 dimensions"):
            torch.nn.init.dirac_(torch.empty(*shape))
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        INIT.dirac_(hx.empty(5, 2, 3), groups=2)
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        torch.nn.init.dirac_(torch.empty(5, 2, 3), groups=2)


@pytest.mark.parametrize("shape,sparsity", [((10, 4), 0.3), ((7, 5), 0.5), ((5, 3), 0.0),
                                            ((6, 2), 1.0), ((9, 6), 0.1)])
def test_sparse_zero_count_per_column_as_torch(shape, sparsity):
    w = hx.empty(*shape, dtype=hx.float64)
    assert INIT.sparse_(w, sparsity, std=0.5) is w
    got = (w.numpy() == 0).sum(0)
    want = (torch.nn.init.sparse_(torch.empty(*shape), sparsity, std=0.5) == 0).sum(0)
    np.testing.assert_array_equal(got, want.numpy())
    np.testing.assert_array_equal(got, [math.ceil(sparsity * shape[0])] * shape[1])
    assert not np.signbit(w.numpy()[w.numpy() == 0]).any()  # +0, as an assignment writes


def test_sparse_draws_normal_values_from_the_generator():
    hx.manual_seed(11)
    a = INIT.sparse_(hx.empty(200, 50), 0.25, std=0.1).numpy()
    hx.manual_seed(11)
    np.testing.assert_array_equal(a, INIT.sparse_(hx.empty(200, 50), 0.25, std=0.1).numpy())
    kept = a[a != 0]
    assert kept.size == 150 * 50
    assert abs(kept.std() - 0.1) < 0.005 and abs(kept.mean()) < 0.005
    # which rows are zeroed differs between columns
    assert len({tuple(np.flatnonzero(a[:, j] == 0)) for j in range(50)}) > 40


def test_sparse_errors_as_torch():
    for shape in [(3,), (2, 2, 2)]:
        with pytest.raises(ValueError, match="only tensors with 2 dimensions"):
            INIT.sparse_(hx.empty(*shape), 0.5)
        with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
            torch.nn.init.sparse_(torch.empty(*shape), 0.5)


def test_signatures_match_torch():
    import inspect

    for name in ("orthogonal_", "eye_", "dirac_", "sparse_"):
        ours = inspect.signature(getattr(INIT, name))
        theirs = inspect.signature(getattr(torch.nn.init, name))
        assert list(ours.parameters) == list(theirs.parameters), name
        assert [p.default for p in ours.parameters.values()] == \
            [p.default for p in theirs.parameters.values()], name


@pytest.mark.gpu
def test_on_the_gpu(be):
    w = INIT.orthogonal_(hx.empty(4, 3, device="gpu"))
    assert w.device.type == "gpu"
    m = w.cpu().numpy()
    np.testing.assert_allclose(m.T @ m, np.eye(3), atol=1e-5)
    d = INIT.dirac_(hx.empty(2, 2, 3, device="gpu"))
    np.testing.assert_array_equal(d.cpu().numpy(), torch.nn.init.dirac_(
        torch.empty(2, 2, 3)).numpy())
    np.testing.assert_array_equal(INIT.eye_(hx.empty(2, 3, device="gpu")).cpu().numpy(),
                                  np.eye(2, 3))
    s = INIT.sparse_(hx.empty(6, 3, device="gpu"), 0.5)
    np.testing.assert_array_equal((s.cpu().numpy() == 0).sum(0), [3, 3, 3])
