"""hx.linalg against torch.linalg: values over shapes (0-size batches and matrices, 1 x 1,
batched, broadcast) in float32 and float64 and on strided layouts; float64 gradients
(and second derivatives) against PyTorch's; errors; signatures against torch.linalg's;
the GPU against the CPU; `import torch.linalg` under the torch alias.

The factorizations' outputs are compared through products their signs cancel from (Q's
columns times R's diagonal, the eigenvectors' squares), where numpy's LAPACK and
PyTorch's MKL may pick other signs for the same factorization."""

from __future__ import annotations

import inspect
import math
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from layouts import LAYOUTS

import haelixe as hx
from haelixe.linalg import LinAlgError

torch = pytest.importorskip("torch")
TL = torch.linalg
INF = math.inf


# -- inputs ----------------------------------------------------------------------------------
def matrices(shape, seed=0, kind="general"):
    """float64 values of ``shape``: general (shifted towards the identity, so float32
    results stay accurate), spd (symmetric positive-definite) or sym (symmetric)."""
    r = np.random.default_rng(seed)
    a = r.standard_normal(shape)
    if kind == "plain" or len(shape) < 2 or shape[-1] != shape[-2]:
        return a
    n = shape[-1]
    if kind == "general":
        return a + 2.0 * np.eye(n)
    if kind == "spd":
        return a @ a.swapaxes(-1, -2) + n * np.eye(n)
    return a + a.swapaxes(-1, -2)


def as_hx(a, dtype="float64", layout="contiguous", device="cpu"):
    t, _ = LAYOUTS[layout](np.asarray(a, dtype=dtype))
    return t if device == "cpu" else t.to(device)


def as_torch(a, dtype="float64"):
    return torch.tensor(np.asarray(a), dtype=getattr(torch, dtype))


def tensor(m, a):
    """``a`` as a tensor of the module ``m`` (hx or torch), for constants in a case."""
    return m.tensor(np.asarray(a))


def weights(shape, seed=9):
    return np.random.default_rng(seed).standard_normal(shape)


def close(got, want, dtype="float64", what=""):
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {got.shape}, " \
        f"PyTorch {tuple(want.shape)}"
    assert got.dtype.name == str(want.dtype).replace("torch.", ""), \
        f"{what}: dtype {got.dtype.name}, PyTorch {want.dtype}"
    tol = {"float32": 2e-4, "float64": 1e-10}[dtype]
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(),
                               rtol=tol, atol=tol, err_msg=what)


# -- the cases: name -> (f(m, *tensors) for m = hx or torch, input sets) ----------------------
SQUARE = [[(3, 3)], [(1, 1)], [(0, 0)], [(2, 4, 4)], [(0, 3, 3)], [(2, 1, 2, 2)]]
RECT = [[(5, 3)], [(3, 5)], [(3, 3)], [(2, 4, 2)], [(0, 3)], [(3, 0)], [(2, 0, 2)]]
SOLVE = [[(3, 3), (3, 2)], [(3, 3), (3,)], [(2, 3, 3), (2, 3)], [(2, 1, 3, 3), (4, 3, 2)],
         [(0, 3, 3), (0, 3, 1)], [(3, 3), (3, 0)], [(1, 1), (1, 4)]]


def _q_times_diag(m, a, mode="reduced"):
    q, r = m.linalg.qr(a, mode=mode)
    return q[..., :r.shape[-2]] * r.diagonal(0, -2, -1).unsqueeze(-2)


def _r_signed(m, a):
    q, r = m.linalg.qr(a)
    return r * r.diagonal(0, -2, -1).sign().unsqueeze(-1)


def _weighted(m, t, seed):
    return t * m.tensor(weights(tuple(t.shape), seed), dtype=t.dtype, device=t.device)


def _eigh_vectors(m, a, uplo="L"):
    values, vectors = m.linalg.eigh(a, UPLO=uplo)
    return _weighted(m, vectors.square(), 3) * values.unsqueeze(-2)


def _svd_u(m, a, full):
    u, s, _ = m.linalg.svd(a, full_matrices=full)
    return _weighted(m, u[..., :s.shape[-1]].square(), 4) * s.unsqueeze(-2)


def _svd_vh(m, a, full):
    _, s, vh = m.linalg.svd(a, full_matrices=full)
    return _weighted(m, vh[..., :s.shape[-1], :].square(), 5) * s.unsqueeze(-1)


def _lstsq(m, a, b):
    return m.linalg.lstsq(a, b).solution


CASES = {
    "det": (lambda m, a: m.linalg.det(a), SQUARE),
    "slogdet": (lambda m, a: (lambda s, v: s * v)(*m.linalg.slogdet(a)), SQUARE),
    "inv": (lambda m, a: m.linalg.inv(a), SQUARE),
    "solve": (lambda m, a, b: m.linalg.solve(a, b), SOLVE),
    "solve_right": (lambda m, a, b: m.linalg.solve(a, b, left=False),
                    [[(3, 3), (2, 3)], [(2, 3, 3), (4, 3)], [(1, 3, 3), (2, 5, 3)]]),
    "cholesky": (lambda m, a: m.linalg.cholesky(a), [[s, "spd"] for (s,) in SQUARE]),
    "cholesky_upper": (lambda m, a: m.linalg.cholesky(a, upper=True),
                       [[(3, 3), "spd"], [(2, 4, 4), "spd"]]),
    "qr_q": (_q_times_diag, RECT),
    "qr_r": (_r_signed, RECT),
    "qr_complete_q": (lambda m, a: _q_times_diag(m, a, "complete"), [[(3, 5)], [(2, 3, 3)]]),
    "eigh_values": (lambda m, a: m.linalg.eigh(a).eigenvalues, [[s, "sym"] for (s,) in SQUARE]),
    "eigh_vectors": (_eigh_vectors, [[(4, 4), "sym"], [(2, 3, 3), "sym"], [(1, 1), "sym"]]),
    "eigh_upper": (lambda m, a: _eigh_vectors(m, a, "U"), [[(4, 4), "plain"]]),
    "eigvalsh": (lambda m, a: m.linalg.eigvalsh(a, "U"), [[(4, 4), "plain"], [(2, 3, 3), "sym"]]),
    "svd_s": (lambda m, a: m.linalg.svd(a).S, RECT),
    "svd_u": (lambda m, a: _svd_u(m, a, False), RECT[:4]),
    "svd_vh": (lambda m, a: _svd_vh(m, a, False), RECT[:4]),
    "svd_full_u": (lambda m, a: _svd_u(m, a, True), RECT[:4]),
    "svd_full_vh": (lambda m, a: _svd_vh(m, a, True), RECT[:4]),
    "svdvals": (lambda m, a: m.linalg.svdvals(a), RECT),
    "pinv": (lambda m, a: m.linalg.pinv(a), RECT),
    "pinv_hermitian": (lambda m, a: m.linalg.pinv(a, hermitian=True), [[(4, 4), "sym"]]),
    "lstsq": (_lstsq, [[(5, 3), (5, 2)], [(5, 3), (5,)], [(3, 5), (3, 2)], [(4, 4), (4, 1)],
                       [(2, 5, 3), (1, 5, 2)], [(0, 3), (0, 2)], [(3, 0), (3, 2)]]),
    "lstsq_residuals": (lambda m, a, b: m.linalg.lstsq(a, b, driver="gelsd").residuals,
                        [[(5, 3), (5, 2)], [(2, 6, 2), (2, 6)]]),
    "vector_norm": (lambda m, a: m.linalg.vector_norm(a), [[(3, 4)], [()], [(0, 2)]]),
    **{f"vector_norm_{o}": (lambda m, a, o=o: m.linalg.vector_norm(a, o, dim=(0, -1),
                                                                      keepdim=True),
                            [[(2, 3, 4)], [(4, 0, 3)]])
       for o in (1, 0.5, 3, -1.5)},
    **{f"vector_norm_{o}": (lambda m, a, o=o: m.linalg.vector_norm(a, o, dim=1),
                            [[(2, 3, 4)], [(4, 3)]]) for o in (INF, -INF, 0)},
    **{f"matrix_norm_{o}": (lambda m, a, o=o: m.linalg.matrix_norm(a, o), RECT[:4])
       for o in ("fro", "nuc", INF, -INF, 1, -1, 2, -2)},
    "matrix_norm_dims": (lambda m, a: m.linalg.matrix_norm(a, 1, dim=(2, 0), keepdim=True),
                         [[(3, 2, 4)]]),
    "norm": (lambda m, a: m.linalg.norm(a), [[(2, 3, 4)], [(3,)]]),
    "norm_matrix": (lambda m, a: m.linalg.norm(a, 2), [[(3, 4)]]),
    "norm_dims": (lambda m, a: m.linalg.norm(a, -1, dim=(1, 2)), [[(2, 3, 4)]]),
    "cross": (lambda m, a, b: m.linalg.cross(a, b), [[(3,), (3,)], [(2, 1, 3), (1, 5, 3)]]),
    "cross_dim": (lambda m, a, b: m.linalg.cross(a, b, dim=0), [[(3, 2), (3, 2)]]),
    "vecdot": (lambda m, a, b: m.linalg.vecdot(a, b), [[(3,), (3,)], [(2, 4), (3, 1, 4)]]),
    "vecdot_dim": (lambda m, a, b: m.linalg.vecdot(a, b, dim=0), [[(4, 2), (4, 2)]]),
    "matmul": (lambda m, a, b: m.linalg.matmul(a, b), [[(2, 3), (3,)], [(2, 2, 3), (3, 4)]]),
    "multi_dot": (lambda m, a, b, c: m.linalg.multi_dot([a, b, c]),
                  [[(2, 6), (6, 3), (3, 5)], [(6,), (6, 3), (3,)], [(1, 4), (4, 1), (1, 7)]]),
    "multi_dot_four": (lambda m, a, b, c, d: m.linalg.multi_dot((a, b, c, d)),
                       [[(5, 2), (2, 6), (6, 1), (1, 4)]]),
    "diagonal": (lambda m, a: m.linalg.diagonal(a, offset=1) * 1.0, [[(2, 3, 4)]]),
    **{f"matrix_power_{n}": (lambda m, a, n=n: m.linalg.matrix_power(a, n),
                             [[(3, 3)], [(2, 4, 4)], [(0, 2, 2)]]) for n in (-3, -1, 1, 2, 5)},
    "matrix_exp": (lambda m, a: m.linalg.matrix_exp(a), [[(3, 3)], [(2, 4, 4)], [(1, 1)],
                                                          [(0, 2, 2)]]),
    "matrix_exp_large": (lambda m, a: m.linalg.matrix_exp(a * 3.0), [[(4, 4), "plain"]]),
}


def _inputs(spec, seed=0):
    """The float64 arrays of one input set: shapes, each optionally followed by a kind."""
    out, kind = [], "general"
    for item in reversed(spec):
        if isinstance(item, str):
            kind = item
            continue
        out.append(matrices(item, seed + len(out), kind))
        kind = "general"
    return out[::-1]


PARAMS = [(name, i) for name, (_, sets) in CASES.items() for i in range(len(sets))]


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "flipped"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,which", PARAMS, ids=[f"{n}-{i}" for n, i in PARAMS])
def test_values_match_pytorch(name, which, dtype, layout):
    f, sets = CASES[name]
    arrays = _inputs(sets[which])
    want = f(torch, *(as_torch(a, dtype) for a in arrays))
    got = f(hx, *(as_hx(a, dtype, layout) for a in arrays))
    close(got, want, dtype, f"{name} {[a.shape for a in arrays]} {layout}")


@pytest.mark.parametrize("name,which", PARAMS, ids=[f"{n}-{i}" for n, i in PARAMS])
def test_float64_gradients_match_pytorch(name, which):
    f, sets = CASES[name]
    arrays = _inputs(sets[which], seed=20)
    if name == "vector_norm_0":
        pytest.skip("a count: PyTorch records a zero gradient, Haelixe none")
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    hs = [hx.tensor(a, requires_grad=True) for a in arrays]
    want, got = f(torch, *ts), f(hx, *hs)
    if not want.requires_grad:  # (a count: no gradient in either)
        assert not got.requires_grad
        return
    gy = weights(tuple(want.shape), 1)
    want.backward(torch.tensor(gy))
    got.backward(hx.tensor(gy))
    for i, (h, t) in enumerate(zip(hs, ts)):
        assert h.grad is not None and h.grad.shape == tuple(t.grad.shape), f"{name} input {i}"
        np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10,
                                   err_msg=f"{name} gradient of input {i}")


GPU_CASES = [(n, 0) for n in CASES]


@pytest.mark.gpu
@pytest.mark.parametrize("name,which", GPU_CASES, ids=[n for n, _ in GPU_CASES])
def test_gpu_equals_cpu(be, name, which):
    f, sets = CASES[name]
    arrays = _inputs(sets[which], seed=30)
    cs = [hx.tensor(a, dtype=hx.float32, requires_grad=True) for a in arrays]
    gs = [hx.tensor(a, dtype=hx.float32, device="gpu").requires_grad_() for a in arrays]
    cpu, gpu = f(hx, *cs), f(hx, *gs)
    assert gpu.device.type == "gpu" and gpu.dtype is cpu.dtype
    np.testing.assert_allclose(gpu.detach().cpu().numpy(), cpu.detach().numpy(), rtol=1e-4,
                               atol=1e-4, err_msg=name)
    if cpu.requires_grad:
        cpu.sum().backward()
        gpu.sum().backward()
        for c, g in zip(cs, gs):
            assert g.grad.device.type == "gpu"
            np.testing.assert_allclose(g.grad.cpu().numpy(), c.grad.numpy(), rtol=1e-3,
                                       atol=1e-3, err_msg=f"{name} gradient")


# -- second derivatives ----------------------------------------------------------------------
SECOND = {
    "inv": (lambda m, a: m.linalg.inv(a).sin().sum(), "general"),
    "det": (lambda m, a: m.linalg.det(a).square(), "general"),
    "slogdet": (lambda m, a: m.linalg.slogdet(a).logabsdet.exp(), "general"),
    "solve": (lambda m, a: m.linalg.solve(a, a.sum(-1)).square().sum(), "general"),
    "cholesky": (lambda m, a: m.linalg.cholesky(a).sin().sum(), "spd"),
    "eigh": (lambda m, a: (lambda v, q: (v * (q.square() * tensor(m, weights((3, 3)))
                                             ).sum(-2)).sum())(*m.linalg.eigh(a)), "sym"),
    "svd": (lambda m, a: (lambda u, s, vh: (s * (u.square() * tensor(m, weights((3, 3)))
                                                 ).sum(-2)).sum())(*m.linalg.svd(a)),
            "general"),
    "qr": (lambda m, a: _q_times_diag(m, a).sin().sum(), "general"),
    "pinv": (lambda m, a: m.linalg.pinv(a).sin().sum(), "general"),
    "matrix_exp": (lambda m, a: m.linalg.matrix_exp(a).sin().sum(), "general"),
}


@pytest.mark.parametrize("name", sorted(SECOND))
def test_second_derivatives_match_pytorch(name):
    f, kind = SECOND[name]
    a = matrices((3, 3), 5, kind) * 0.5
    t = torch.tensor(a, requires_grad=True)
    (gt,) = torch.autograd.grad(f(torch, t), t, create_graph=True)
    (ht,) = torch.autograd.grad((gt * torch.tensor(weights((3, 3), 2))).sum(), t)
    h = hx.tensor(a, requires_grad=True)
    (gh,) = hx.autograd.grad(f(hx, h), h, create_graph=True)
    np.testing.assert_allclose(gh.detach().numpy(), gt.detach().numpy(), rtol=1e-9,
                               atol=1e-11)
    (hh,) = hx.autograd.grad((gh * hx.tensor(weights((3, 3), 2))).sum(), h)
    np.testing.assert_allclose(hh.numpy(), ht.numpy(), rtol=1e-7, atol=1e-9,
                               err_msg=f"{name}: second derivative")


def test_gradcheck_through_the_decompositions():
    from haelixe.autograd import gradcheck

    sym = hx.tensor(matrices((3, 3), 1, "sym"), requires_grad=True)
    general = hx.tensor(matrices((4, 3), 2), requires_grad=True)
    spd = hx.tensor(matrices((3, 3), 3, "spd"), requires_grad=True)
    assert gradcheck(lambda a: hx.linalg.eigh(0.5 * (a + a.mT)).eigenvalues, [sym])
    assert gradcheck(lambda a: hx.linalg.svdvals(a), [general])
    assert gradcheck(lambda a: hx.linalg.pinv(a), [general])
    assert gradcheck(lambda a: _q_times_diag(hx, a), [general])
    assert gradcheck(lambda a: hx.linalg.cholesky(0.5 * (a + a.mT)), [spd])
    assert gradcheck(lambda a: hx.linalg.det(a[:3]), [general])


def test_det_gradient_of_a_singular_matrix_is_its_cofactor_matrix():
    # d det / dA is the cofactor matrix, which a rank n-1 matrix has nonzero; PyTorch
    # gives zeros for an exactly singular matrix (its LU path), Haelixe the cofactors
    a = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
    x = hx.tensor(a, requires_grad=True)
    hx.linalg.det(x).backward()
    assert hx.linalg.det(hx.tensor(a)).item() == 0.0
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0, 0], [0, 2, 0], [0, 0, 0]], atol=1e-15)
    b = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    y = hx.tensor(b, requires_grad=True)
    hx.linalg.det(y).backward()
    eps = 1e-6
    numeric = np.zeros_like(b)
    for i in range(3):
        for j in range(3):
            d = np.zeros_like(b)
            d[i, j] = eps
            numeric[i, j] = (np.linalg.det(b + d) - np.linalg.det(b - d)) / (2 * eps)
    np.testing.assert_allclose(y.grad.numpy(), numeric, atol=1e-8)
    assert np.abs(numeric).max() > 1  # (a test of something: the cofactors are not zero)


# -- factorizations' own properties ----------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 3, 2), (0, 2), (2, 0)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_modes_give_pytorchs_shapes_and_a_factorization(shape, mode):
    a = matrices(shape, 7, "plain")
    q, r = hx.linalg.qr(hx.tensor(a), mode=mode)
    tq, tr = TL.qr(torch.tensor(a), mode=mode)
    assert q.shape == tuple(tq.shape) and r.shape == tuple(tr.shape)
    rn = r.numpy()
    np.testing.assert_allclose(np.abs(rn), np.abs(tr.numpy()), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(np.tril(rn, -1), 0.0)  # (upper triangular)
    if mode != "r":
        qn = q.numpy()
        np.testing.assert_allclose(qn @ rn, a, atol=1e-12)
        eye = np.broadcast_to(np.eye(qn.shape[-1]), qn.shape[:-2] + (qn.shape[-1],) * 2)
        np.testing.assert_allclose(qn.swapaxes(-1, -2) @ qn, eye, atol=1e-12)


def test_qr_backward_refuses_what_pytorch_refuses():
    x = hx.tensor(matrices((4, 3), 1), requires_grad=True)
    with pytest.raises(RuntimeError, match="mode='r'"):
        hx.linalg.qr(x, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="mode='complete' and nrows > ncols"):
        hx.linalg.qr(x, mode="complete").R.sum().backward()
    wide = hx.tensor(matrices((3, 4), 1), requires_grad=True)
    hx.linalg.qr(wide, mode="complete").Q.sum().backward()  # (m <= n: as reduced)
    assert wide.grad is not None


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (0, 3), (3, 0), (2, 0, 3)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_shapes_and_reconstruction(shape, full):
    a = matrices(shape, 8, "plain")
    u, s, vh = (t.numpy() for t in hx.linalg.svd(hx.tensor(a), full_matrices=full))
    tu, ts, tvh = TL.svd(torch.tensor(a), full_matrices=full)
    assert (u.shape, s.shape, vh.shape) == (tuple(tu.shape), tuple(ts.shape),
                                            tuple(tvh.shape))
    k = s.shape[-1]
    np.testing.assert_allclose(s, ts.numpy(), rtol=1e-12)
    np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vh[..., :k, :], a, atol=1e-12)
    if 0 in shape and full:  # (the empty side's factor is the identity, as PyTorch's)
        np.testing.assert_array_equal(u if shape[-2] else vh, tu.numpy() if shape[-2] else
                                      tvh.numpy())


def test_eigh_reads_one_triangle_and_gives_ascending_values():
    a = matrices((4, 4), 2, "plain")
    lower = np.tril(a) + np.tril(a, -1).T
    upper = np.triu(a) + np.triu(a, 1).T
    for uplo, sym in (("L", lower), ("U", upper), ("l", lower)):
        values, vectors = hx.linalg.eigh(hx.tensor(a), UPLO=uplo)
        np.testing.assert_allclose(values.numpy(), np.linalg.eigvalsh(sym), rtol=1e-12)
        assert (np.diff(values.numpy()) > 0).all()
        v = vectors.numpy()
        np.testing.assert_allclose(v @ np.diag(values.numpy()) @ v.T, sym, atol=1e-12)


def test_cholesky_reads_one_triangle():
    a = matrices((3, 3), 4, "spd")
    noisy_upper, noisy_lower = a + np.triu(np.full((3, 3), 50.0), 1), \
        a + np.tril(np.full((3, 3), 50.0), -1)
    low = hx.linalg.cholesky(hx.tensor(noisy_upper)).numpy()
    up = hx.linalg.cholesky(hx.tensor(noisy_lower), upper=True).numpy()
    np.testing.assert_allclose(low @ low.T, a, atol=1e-12)
    np.testing.assert_allclose(up.T @ up, a, atol=1e-12)
    assert (np.triu(low, 1) == 0).all() and (np.tril(up, -1) == 0).all()


def test_named_tuples_have_pytorchs_fields():
    a = matrices((3, 3), 1, "spd")
    x, t = hx.tensor(a), torch.tensor(a)
    for name, args, fields in (("slogdet", (), ("sign", "logabsdet")),
                               ("eigh", (), ("eigenvalues", "eigenvectors")),
                               ("qr", (), ("Q", "R")), ("svd", (), ("U", "S", "Vh")),
                               ("lstsq", (a[:, :2],), ("solution", "residuals", "rank",
                                                       "singular_values"))):
        ours = getattr(hx.linalg, name)(x, *(hx.tensor(v) for v in args))
        theirs = getattr(TL, name)(t, *(torch.tensor(v) for v in args))
        assert ours._fields == fields and len(theirs) == len(fields)
        for f in fields:
            getattr(theirs, f)  # (PyTorch's structseq has each field)


# -- pinv, matrix_rank and lstsq's options ---------------------------------------------------
TOLERANCES = [{}, {"atol": 1.5}, {"rtol": 0.2}, {"atol": 0.0}, {"atol": 0.01, "rtol": 0.0},
              {"atol": 0.5, "rtol": 0.5}, {"atol": -1.0}]


@pytest.mark.parametrize("options", TOLERANCES, ids=[str(o) for o in TOLERANCES])
@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv_and_matrix_rank_tolerances_follow_pytorch(options, hermitian):
    # (a zero the defaults drop, whatever noise LAPACK leaves in its place, and values
    # away from each option's threshold)
    d = np.diag([3.0, 1.0, 0.0, -5e-2])
    q, _ = np.linalg.qr(matrices((4, 4), 3, "plain"))
    a = q @ d @ q.T if hermitian else q @ d
    x, t = hx.tensor(a), torch.tensor(a)
    close(hx.linalg.pinv(x, hermitian=hermitian, **options),
          TL.pinv(t, hermitian=hermitian, **options), what=str(options))
    close(hx.linalg.matrix_rank(x, hermitian=hermitian, **options),
          TL.matrix_rank(t, hermitian=hermitian, **options), what=str(options))


def test_tolerance_tensors_broadcast_against_the_batch():
    a = np.broadcast_to(np.diag([3.0, 1.0]), (3, 2, 2))
    for kw in ("atol", "rtol"):
        tol = np.array([0.5, 2.0, 4.0])
        got = hx.linalg.pinv(hx.tensor(a), **{kw: hx.tensor(tol)})
        close(got, TL.pinv(torch.tensor(a), **{kw: torch.tensor(tol)}))
        close(hx.linalg.matrix_rank(hx.tensor(a), **{kw: hx.tensor(tol)}),
              TL.matrix_rank(torch.tensor(a), **{kw: torch.tensor(tol)}))
    exact = hx.tensor(np.diag([3.0, 1.0]))  # (a value at the threshold counts as zero)
    close(hx.linalg.pinv(exact, atol=1.0), TL.pinv(torch.tensor(np.diag([3.0, 1.0])), atol=1.0))
    assert hx.linalg.matrix_rank(exact, atol=1.0).item() == 1
    with pytest.raises(RuntimeError, match="does not broadcast"):
        hx.linalg.pinv(hx.tensor(a), atol=hx.tensor([1.0, 2.0]))


@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("shapes,rank_deficient", [(((5, 3), (5, 2)), False),
                                                   (((5, 3), (5,)), False),
                                                   (((3, 3), (3, 2)), False),
                                                   (((2, 5, 3), (2, 5, 2)), True),
                                                   (((3, 0), (3, 2)), False)])
def test_lstsq_gives_pytorchs_four_results_per_driver(driver, shapes, rank_deficient):
    a, b = matrices(shapes[0], 1, "plain"), matrices(shapes[1], 2, "plain")
    if rank_deficient:
        a[0, :, 2] = a[0, :, 0] + a[0, :, 1]  # (the first matrix of the batch: rank 2)
    ours = hx.linalg.lstsq(hx.tensor(a), hx.tensor(b), driver=driver)
    theirs = TL.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
    for name in ("rank", "singular_values"):
        close(getattr(ours, name), getattr(theirs, name), what=name)
    if driver == "gels" and (rank_deficient or 0 in a.shape):
        # (gels assumes full rank: PyTorch's solution there is LAPACK's garbage, and its
        # residuals of a matrix with no columns are 0, not ||B||^2; Haelixe's are those
        # of the minimum-norm solution)
        assert ours.residuals.shape == tuple(theirs.residuals.shape)
        return
    close(ours.residuals, theirs.residuals, what="residuals")
    close(ours.solution, theirs.solution, what="solution")


def test_lstsq_rcond_drops_small_singular_values():
    a, b = np.diag([3.0, 1e-3]), np.ones((2, 1))
    for rcond in (None, 0.01):
        r = hx.linalg.lstsq(hx.tensor(a), hx.tensor(b), rcond=rcond, driver="gelsd")
        w = TL.lstsq(torch.tensor(a), torch.tensor(b), rcond=rcond, driver="gelsd")
        close(r.solution, w.solution)
        close(r.rank, w.rank)


# -- norms' edges ------------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda m, x: m.linalg.vector_norm(x, dtype=m.float64),
    lambda m, x: m.linalg.matrix_norm(x, 1, dtype=m.float64),
    lambda m, x: m.linalg.norm(x, dtype=m.float64),
    lambda m, x: m.linalg.vector_norm(x, 3, dim=[0, 1]),
    lambda m, x: m.linalg.vector_norm(x, dim=()),
    lambda m, x: m.linalg.vector_norm(x, m.tensor(3.0)),
    lambda m, x: m.linalg.vector_norm(x[0, 0], INF, dim=0),
    lambda m, x: m.linalg.vector_norm(x, keepdim=True),
    lambda m, x: m.linalg.matrix_norm(x, "nuc", dim=[1, 0], keepdim=True),
    lambda m, x: m.linalg.norm(x, 2, dim=1, keepdim=True),
    lambda m, x: m.linalg.norm(x, "fro"),
    lambda m, x: m.linalg.norm(x[0], INF),
    lambda m, x: m.linalg.matrix_norm(x[:0], 1),
    lambda m, x: m.linalg.matrix_norm(x[:0], INF),
    lambda m, x: m.linalg.matrix_norm(x[:, :0], -INF),
    lambda m, x: m.linalg.matrix_norm(x[:0], 2),
    lambda m, x: m.linalg.matrix_norm(x[:0], "nuc"),
    lambda m, x: m.linalg.vector_norm(x[:0], 0),
    lambda m, x: m.linalg.vector_norm(x[:0], INF, dim=1),
])
def test_norm_options_and_empty_inputs_match_pytorch(call):
    a = matrices((3, 4), 6, "plain").astype(np.float32)
    close(call(hx, hx.tensor(a)), call(torch, torch.tensor(a)), "float32")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_norms_take_16_bit_floats_as_pytorch(dtype):
    a = matrices((3, 4), 6, "plain")
    x, t = hx.tensor(a, dtype=getattr(hx, dtype)), torch.tensor(a, dtype=getattr(torch, dtype))
    for f in (lambda m, v: m.linalg.vector_norm(v), lambda m, v: m.linalg.vector_norm(v, 3),
              lambda m, v: m.linalg.matrix_norm(v, 1), lambda m, v: m.linalg.matrix_norm(v),
              lambda m, v: m.linalg.vecdot(v, v)):
        got, want = f(hx, x), f(torch, t)
        assert got.dtype.name == dtype
        np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-2)
    with pytest.raises(TypeError, match="singular values"):
        hx.linalg.matrix_norm(x, 2)


def test_an_inf_norm_tie_shares_its_gradient_as_pytorchs():
    a = np.array([[3.0, -3.0, 1.0], [2.0, 0.0, -2.0]])
    x, t = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    hx.linalg.vector_norm(x, INF, dim=1).sum().backward()
    TL.vector_norm(t, INF, dim=1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy())
    x.grad = None
    hx.linalg.vector_norm(x * 0.0).backward()  # (the 2-norm at zero: gradient 0, not NaN)
    assert (x.grad.numpy() == 0).all()


# -- the top-level forms and methods -----------------------------------------------------------
def test_top_level_forms_and_methods_match_pytorch():
    a, spd = matrices((2, 3, 3), 1), matrices((3, 3), 2, "spd")
    x, t = hx.tensor(a), torch.tensor(a)
    close(hx.det(x), torch.det(t))
    close(x.det(), t.det())
    close(x.inverse(), t.inverse())
    close(hx.inverse(x), torch.inverse(t))
    close(x.slogdet().logabsdet, t.slogdet().logabsdet)
    close(hx.logdet(x @ x.mT), torch.logdet(t @ t.mT))
    neg = np.diag([-1.0, 1.0, 1.0])
    close(hx.logdet(hx.tensor(np.stack([neg, np.eye(3), np.zeros((3, 3))]))),
          torch.logdet(torch.tensor(np.stack([neg, np.eye(3), np.zeros((3, 3))]))))
    close(x.matrix_power(3), t.matrix_power(3))
    close(hx.matrix_power(x, -2), torch.matrix_power(t, -2))
    close(x.matrix_exp(), t.matrix_exp())
    close(hx.pinverse(x[:, :2]), torch.pinverse(t[:, :2]))
    close(x[:, :2].pinverse(rcond=0.5), t[:, :2].pinverse(rcond=0.5))
    u, s, v = hx.svd(x[0, :2])
    tu, ts, tv = torch.svd(t[0, :2])
    close(s, ts)
    np.testing.assert_allclose((u.numpy() * s.numpy()) @ v.numpy().T, a[0, :2], atol=1e-12)
    assert v.shape == tuple(tv.shape) and hx.svd(x[0, :2], some=False).U.shape == (2, 2)
    empty_u, s2, empty_v = x[0, :2].svd(compute_uv=False)
    tu2, ts2, tv2 = t[0, :2].svd(compute_uv=False)
    close(s2, ts2)
    close(empty_u, tu2)
    close(empty_v, tv2)
    with pytest.warns(UserWarning, match="torch.cholesky is deprecated"):
        close(hx.cholesky(hx.tensor(spd), upper=True), _quiet(torch.cholesky,
                                                             torch.tensor(spd), upper=True))
    with pytest.warns(UserWarning, match="torch.qr is deprecated"):
        q, r = hx.tensor(a[0]).qr(some=False)
    np.testing.assert_allclose(q.numpy() @ r.numpy(), a[0], atol=1e-12)


def _quiet(f, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*args, **kwargs)


def test_matrix_power_keeps_integer_dtypes_and_copies_for_one():
    a = np.arange(9).reshape(3, 3) % 4
    x, t = hx.tensor(a), torch.tensor(a)
    close(hx.linalg.matrix_power(x, 3), TL.matrix_power(t, 3))
    close(hx.linalg.matrix_power(x, 0), TL.matrix_power(t, 0))
    y = hx.tensor(matrices((2, 2), 0))
    one = hx.linalg.matrix_power(y, 1)
    assert one is not y and (one.numpy() == y.numpy()).all()
    with pytest.raises(TypeError, match="Expected a floating point"):
        hx.linalg.matrix_power(x, -1)  # (the inverse of an integer matrix, as PyTorch)


# -- errors ------------------------------------------------------------------------------------
SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])


def test_a_singular_matrix_names_the_op_the_batch_element_and_the_pivot():
    with pytest.raises(LinAlgError, match=r"^linalg.inv: The diagonal element 3 is zero, "
                                          r"the inversion could not be completed"):
        hx.linalg.inv(hx.tensor(SINGULAR))
    batch = np.stack([np.eye(3), np.eye(3), SINGULAR])
    with pytest.raises(LinAlgError, match=r"linalg.inv: \(Batch element 2\): The diagonal "
                                          r"element 3 is zero.*pinv"):
        hx.inverse(hx.tensor(batch))
    with pytest.raises(LinAlgError, match=r"linalg.solve: \(Batch element 2\): .* solver "
                                          r"failed because the input matrix is singular"):
        hx.linalg.solve(hx.tensor(batch), hx.ones(3, 3, dtype=hx.float64))
    not_pd = np.stack([np.eye(2), [[1.0, 2.0], [2.0, 1.0]]])
    with pytest.raises(LinAlgError, match=r"linalg.cholesky: \(Batch element 1\): The "
                                          r"factorization could not be completed because "
                                          r"the input is not positive-definite \(the "
                                          r"leading minor of order 2"):
        hx.linalg.cholesky(hx.tensor(not_pd))
    with pytest.raises(LinAlgError, match="leading minor of order 1"):
        hx.linalg.cholesky(-hx.eye(3))
    # (PyTorch raises its LinAlgError, a RuntimeError, for each of these too)
    for f in (lambda: TL.inv(torch.tensor(batch)), lambda: TL.cholesky(torch.tensor(not_pd))):
        with pytest.raises(TL.LinAlgError):
            f()
    assert issubclass(LinAlgError, RuntimeError)
    assert hx.linalg.det(hx.tensor(SINGULAR)).item() == 0.0  # (no error: det is 0)


ERRORS = [
    ("det of a vector", lambda m: m.linalg.det(m.ones(3)), RuntimeError,
     "at least 2 dimensions"),
    ("det of a non-square", lambda m: m.linalg.det(m.ones(3, 2)), RuntimeError,
     "square matrices, but they are 3 by 2"),
    ("det of ints", lambda m: m.linalg.det(m.ones(2, 2, dtype=m.int64)), TypeError,
     "Expected a floating point"),
    ("inv of bools", lambda m: m.linalg.inv(m.ones(2, 2, dtype=m.bool)), TypeError,
     "Expected a floating point"),
    ("inv of bfloat16", lambda m: m.linalg.inv(m.ones(2, 2, dtype=m.bfloat16)), TypeError,
     "bfloat16 is not supported"),
    ("cholesky of float16", lambda m: m.linalg.cholesky(m.eye(2, dtype=m.float16)),
     TypeError, "float16 is not supported"),
    ("svd of ints", lambda m: m.linalg.svd(m.ones(2, 2, dtype=m.int32)), TypeError,
     "Expected a floating point"),
    ("solve with mixed dtypes", lambda m: m.linalg.solve(m.eye(3), m.ones(3, dtype=m.float64)),
     TypeError, "same dtype"),
    ("solve's shapes", lambda m: m.linalg.solve(m.eye(3), m.ones(4, 2)), RuntimeError,
     r"Incompatible shapes of A and B for the equation AX = B \(3x3 and 4x2\)"),
    ("solve's batch of vectors", lambda m: m.linalg.solve(m.eye(3), m.ones(2, 3)),
     RuntimeError, r"equation AX = B \(3x3 and 2x3\)"),
    ("solve right of a vector", lambda m: m.linalg.solve(m.eye(3), m.ones(3), left=False),
     RuntimeError, "equation XA = B"),
    ("solve's 0-d B", lambda m: m.linalg.solve(m.eye(3), m.tensor(1.0)), RuntimeError,
     "B must have at least"),
    ("solve's batch dims", lambda m: m.linalg.solve(m.ones(2, 3, 3), m.ones(4, 3, 1)),
     RuntimeError, "batch dims"),
    ("qr's mode", lambda m: m.linalg.qr(m.ones(3, 2), mode="full"), RuntimeError,
     "unrecognized mode 'full'"),
    ("eigh's UPLO", lambda m: m.linalg.eigh(m.eye(2), UPLO="X"), RuntimeError,
     "Expected UPLO argument to be 'L' or 'U', but got X"),
    ("svd's driver", lambda m: m.linalg.svd(m.eye(2), driver="gesdd"), RuntimeError,
     "driver"),
    ("pinv of a vector", lambda m: m.linalg.pinv(m.ones(3)), RuntimeError, "2 dimensions"),
    ("hermitian pinv of a non-square", lambda m: m.linalg.pinv(m.ones(2, 3), hermitian=True),
     RuntimeError, "square"),
    ("matrix_rank of ints", lambda m: m.linalg.matrix_rank(m.ones(2, 2, dtype=m.int64)),
     RuntimeError, "Expected a floating point"),
    ("lstsq's rows", lambda m: m.linalg.lstsq(m.ones(5, 3), m.ones(4, 2)), RuntimeError,
     "size\\(-2\\) should match"),
    ("lstsq's dims", lambda m: m.linalg.lstsq(m.ones(5, 3), m.ones(2, 2, 5, 2)),
     RuntimeError, "dim"),
    ("lstsq's dtypes", lambda m: m.linalg.lstsq(m.ones(5, 3), m.ones(5, 2, dtype=m.float64)),
     RuntimeError, "same dtype"),
    ("lstsq's driver", lambda m: m.linalg.lstsq(m.ones(5, 3), m.ones(5, 2), driver="x"),
     RuntimeError, r"should be one of \(gels, gelsy, gelsd, gelss\)"),
    ("vector_norm of ints", lambda m: m.linalg.vector_norm(m.ones(3, dtype=m.int64)),
     TypeError, "Expected a floating point"),
    ("vector_norm narrowing", lambda m: m.linalg.vector_norm(m.ones(3, dtype=m.float64),
                                                             dtype=m.float32),
     TypeError, "without narrowing"),
    ("vector_norm's int dtype", lambda m: m.linalg.vector_norm(m.ones(3), dtype=m.int64),
     TypeError, "dtype should be floating point"),
    ("vector_norm's inf of nothing", lambda m: m.linalg.vector_norm(m.ones(0), INF),
     RuntimeError, "inf norm"),
    ("vector_norm's -1 of nothing", lambda m: m.linalg.vector_norm(m.ones(0, 3), -1, dim=0),
     RuntimeError, "-1 norm"),
    ("vector_norm's string ord", lambda m: m.linalg.vector_norm(m.ones(3), "fro"), TypeError,
     "ord"),
    ("matrix_norm's order", lambda m: m.linalg.matrix_norm(m.ones(2, 2), 3), RuntimeError,
     "Order 3 not supported"),
    ("matrix_norm's dims", lambda m: m.linalg.matrix_norm(m.ones(2, 2), dim=(0, 0)),
     RuntimeError, r"dims must be different. Got \(0, 0\)"),
    ("matrix_norm's three dims", lambda m: m.linalg.matrix_norm(m.ones(2, 2, 2),
                                                                dim=(0, 1, 2)),
     RuntimeError, "dim must be a 2-tuple"),
    ("matrix_norm's int dim", lambda m: m.linalg.matrix_norm(m.ones(2, 2), dim=0), TypeError,
     "dim must be a 2-tuple of ints"),
    ("matrix_norm's min of nothing", lambda m: m.linalg.matrix_norm(m.ones(3, 0), -1),
     IndexError, "takes a minimum over a dim of size 0"),
    ("norm's ord of a 3-d tensor", lambda m: m.linalg.norm(m.ones(2, 2, 2), 2), RuntimeError,
     "must be 1D or 2D. Got 3D"),
    ("norm's three dims", lambda m: m.linalg.norm(m.ones(2, 2, 2), dim=(0, 1, 2)),
     RuntimeError, "must be of length 1 or 2"),
    ("cross's size", lambda m: m.linalg.cross(m.ones(4), m.ones(4)), RuntimeError,
     "dimension -1 must have length 3. Got 4 and 4"),
    ("cross's ranks", lambda m: m.linalg.cross(m.ones(3), m.ones(2, 3)), RuntimeError,
     "same number of dimensions"),
    ("cross's dtypes", lambda m: m.linalg.cross(m.ones(3, dtype=m.int64), m.ones(3)),
     RuntimeError, "one dtype"),
    ("vecdot's dtypes", lambda m: m.linalg.vecdot(m.ones(3), m.ones(3, dtype=m.float64)),
     TypeError, "same dtype"),
    ("vecdot of ints", lambda m: m.linalg.vecdot(m.ones(3, dtype=m.int64),
                                                  m.ones(3, dtype=m.int64)),
     TypeError, "Expected a floating point"),
    ("multi_dot of one", lambda m: m.linalg.multi_dot([m.ones(2, 2)]), RuntimeError,
     "expected at least 2 tensors but got 1"),
    ("multi_dot of a 3-d first", lambda m: m.linalg.multi_dot([m.ones(2, 2, 2), m.ones(2, 2)]),
     RuntimeError, "the first tensor must be 1D or 2D but got 3D"),
    ("multi_dot's middle vector", lambda m: m.linalg.multi_dot([m.ones(2, 3), m.ones(3),
                                                                m.ones(3, 2)]),
     RuntimeError, "tensor 1 must be 2D but got 1D"),
    ("multi_dot's shapes", lambda m: m.linalg.multi_dot([m.ones(2, 3), m.ones(4, 5)]),
     RuntimeError, r"tensors 0 and 1 with shapes \[2, 3\] and \[4, 5\] cannot be multiplied"),
    ("multi_dot's dtypes", lambda m: m.linalg.multi_dot([m.ones(2, 2),
                                                         m.ones(2, 2, dtype=m.float64)]),
     RuntimeError, "same dtype"),
    ("matrix_power's float n", lambda m: m.linalg.matrix_power(m.eye(2), 2.0), TypeError,
     "must be an int"),
    ("matrix_power of a non-square", lambda m: m.linalg.matrix_power(m.ones(3, 2), 2),
     RuntimeError, "square matrices"),
    ("matrix_exp of ints", lambda m: m.linalg.matrix_exp(m.ones(2, 2, dtype=m.int64)),
     TypeError, "Expected a floating point"),
    ("matrix_exp of a vector", lambda m: m.linalg.matrix_exp(m.ones(2)), RuntimeError,
     "at least 2 dimensions"),
]


@pytest.mark.parametrize("what,call,kind,pattern", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_op_as_pytorchs_do(what, call, kind, pattern):
    with pytest.raises(Exception):  # noqa: B017,PT011 (PyTorch raises here too)
        call(torch)
    with pytest.raises(kind, match=pattern) as info:
        call(hx)
    assert info.type.__module__.startswith("haelixe") or info.type in (TypeError,
                                                                       IndexError)


def test_a_float_error_message_names_the_dtype_and_the_fix():
    with pytest.raises(TypeError, match=r"^linalg.det: Expected a floating point tensor as "
                                        r"A, got int64 \(shape \(2, 2\)\); convert with "
                                        r"\.float\(\)"):
        hx.linalg.det(hx.ones(2, 2, dtype=hx.int64))
    # (RuntimeError too, as PyTorch raises: `except RuntimeError` still catches it)
    with pytest.raises(RuntimeError):
        hx.linalg.inv(hx.ones(2, 2, dtype=hx.bfloat16))


# -- signatures, names, the torch alias ---------------------------------------------------------
def _torch_linalg_signature(name):
    """torch.linalg.<name>'s signature, from its docstring's first line (the functions
    are builtins: inspect gives none)."""
    from test_op_surfaces import _parse

    # (linalg.matmul, torch.matmul's alias, has torch.matmul's docstring only)
    doc = getattr(TL, name).__doc__ or getattr(torch, name).__doc__
    first = doc.strip().split("\n", 1)[0]
    first = re.sub(r"\bbool (?=\w+=)", "", first)  # (lu_factor's "bool pivot=True")
    start = first.index(name + "(") + len(name)
    depth = 0
    for end, ch in enumerate(first[start:], start):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return _parse(first[start:end + 1])
    raise AssertionError(f"no signature in {first!r}")


FUNCTIONS = [n for n in hx.linalg.__all__ if n != "LinAlgError"]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_signatures_match_torch_linalg(name):
    from test_op_surfaces import comparable

    ours = inspect.signature(getattr(hx.linalg, name))
    theirs = _torch_linalg_signature(name)
    assert comparable(ours, False) == comparable(theirs, False), \
        f"hx.linalg.{name}{ours} differs from torch.linalg.{name}{theirs}"
    assert getattr(hx.linalg, name).__doc__.strip()


def test_every_torch_linalg_name_is_here_or_says_what_to_use():
    public = {n for n in dir(TL) if not n.startswith("_") and n != "common_notes"}
    here = {n for n in public if n in hx.linalg.__dict__}
    assert public - here == set(hx.linalg._MISSING)  # (each with what to use instead)
    with pytest.raises(AttributeError, match="hx.linalg has no eig; the closest is "
                                             "hx.linalg.eigh for a symmetric matrix"):
        hx.linalg.eig  # noqa: B018
    assert set(FUNCTIONS) <= set(public)


def test_import_torch_linalg_under_the_alias(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import torch
        import torch.linalg
        from torch.linalg import inv, LinAlgError
        import haelixe as hx
        a = torch.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
        torch.linalg.det(a).backward()
        try:
            inv(torch.ones(2, 2))
        except LinAlgError as e:
            caught = "singular" in str(e)
        print(torch.linalg is not hx.linalg, torch.linalg.solve is hx.linalg.solve,
              a.grad.tolist(), caught, torch.det(a).item())
        try:
            torch.linalg.ldl_factor(a)
        except AttributeError as e:
            print(e)
    """))
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-m", "haelixe.run", str(script)], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(root)}, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().split("\n")
    assert lines[0] == "True True [[3.0, -1.0], [-1.0, 2.0]] True 5.0"
    assert lines[1].startswith("torch.linalg.ldl_factor (import torch runs on Haelixe)")
    assert "hx.linalg.lu_factor" in lines[1]
