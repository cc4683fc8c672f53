"""hx.linalg's LU family, solve_triangular, the _ex forms, cond, tensorinv, tensorsolve,
vander and householder_product against torch.linalg: values (LU's pivots exactly),
float32 and float64, strided layouts, batched and 0-size batches; float64 gradients
against PyTorch's on the same inputs; info tensors and check_errors; errors naming the
op; the GPU on tiny sizes."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from layouts import LAYOUTS

import haelixe as hx
from haelixe.linalg import LinAlgError

torch = pytest.importorskip("torch")
TL = torch.linalg
INF = math.inf
SINGULAR = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])


def general(shape, seed=0, shift=0.0):
    a = np.random.default_rng(seed).standard_normal(shape)
    if shift and shape[-1] == shape[-2]:
        a = a + shift * np.eye(shape[-1])
    return a


def as_hx(a, dtype="float64", layout="contiguous"):
    return LAYOUTS[layout](np.asarray(a, dtype=dtype))[0]


def as_torch(a, dtype="float64"):
    return torch.tensor(np.asarray(a), dtype=getattr(torch, dtype))


def close(got, want, dtype="float64", what=""):
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {got.shape} vs " \
        f"{tuple(want.shape)}"
    assert got.dtype.name == str(want.dtype).replace("torch.", ""), \
        f"{what}: dtype {got.dtype.name}, PyTorch {want.dtype}"
    tol = {"float32": 2e-4, "float64": 1e-10}.get(dtype, 0)
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(),
                               rtol=tol, atol=tol, err_msg=what)


def _tri(m, a, b, **kw):
    return m.linalg.solve_triangular(a, b, **kw)


def _lu_solve(m, a, b, **kw):
    return m.linalg.lu_solve(*m.linalg.lu_factor(a), b, **kw)


# name -> (f(m, *tensors), input sets: (shape, diagonal shift) per input)
CASES = {
    **{f"solve_triangular_{'u' if up else 'l'}{'_right' if not left else ''}"
       f"{'_unit' if unit else ''}":
       (lambda m, a, b, up=up, left=left, unit=unit: _tri(m, a, b, upper=up, left=left,
                                                          unitriangular=unit),
        [[((3, 3), 3), ((3, 2) if left else (2, 3), 0)],
         [((2, 1, 4, 4), 3), ((3, 4, 1) if left else (3, 1, 4), 0)],
         [((0, 3, 3), 3), ((0, 3, 2) if left else (0, 2, 3), 0)],
         [((3, 3), 3), ((3, 0) if left else (0, 3), 0)]])
       for up in (True, False) for left in (True, False) for unit in (False, True)},
    "lu_factor": (lambda m, a: m.linalg.lu_factor(a).LU,
                  [[((4, 4), 0)], [((3, 5), 0)], [((5, 3), 0)], [((2, 3, 3), 0)],
                   [((0, 3, 3), 0)], [((2, 0, 0), 0)], [((1, 1), 0)]]),
    "lu_factor_ex": (lambda m, a: m.linalg.lu_factor_ex(a).LU, [[((2, 4, 4), 0)]]),
    **{f"lu_{part}": (lambda m, a, part=part: getattr(m.linalg.lu(a), part),
                      [[((4, 4), 0)], [((3, 5), 0)], [((5, 3), 0)], [((2, 3, 3), 0)],
                       [((0, 3, 2), 0)], [((1, 1), 0)]])
       for part in ("P", "L", "U")},
    "lu_L_and_U": (lambda m, a: (lambda p, lo, up: lo.sum(-1) * 2.0 + up.sum(-2).sum(-1,
                                                                                  True))(
        *m.linalg.lu(a)), [[((4, 4), 0)], [((3, 5), 0)], [((5, 3), 0)], [((2, 2, 3), 0)]]),
    **{f"lu_solve{'_right' if not left else ''}{'_adjoint' if adj else ''}":
       (lambda m, a, b, left=left, adj=adj: _lu_solve(m, a, b, left=left, adjoint=adj),
        [[((3, 3), 0), ((3, 2) if left else (2, 3), 0)],
         [((2, 4, 4), 0), ((3, 1, 4, 2) if left else (3, 1, 2, 4), 0)],
         [((0, 3, 3), 0), ((0, 3, 1) if left else (0, 1, 3), 0)]])
       for left in (True, False) for adj in (False, True)},
    "solve_ex": (lambda m, a, b: m.linalg.solve_ex(a, b).result,
                 [[((3, 3), 2), ((3,), 0)], [((2, 3, 3), 2), ((2, 3, 2), 0)],
                  [((0, 3, 3), 2), ((0, 3), 0)]]),
    "solve_ex_right": (lambda m, a, b: m.linalg.solve_ex(a, b, left=False).result,
                       [[((3, 3), 2), ((2, 3), 0)]]),
    "inv_ex": (lambda m, a: m.linalg.inv_ex(a).inverse,
               [[((3, 3), 2)], [((2, 4, 4), 2)], [((0, 2, 2), 2)]]),
    **{f"cond_{p}": (lambda m, a, p=p: m.linalg.cond(a, p),
                     [[((3, 3), 2)], [((2, 4, 4), 2)], [((0, 2, 2), 2)], [((0, 0), 0)]])
       for p in (None, 2, -2, "fro", "nuc", INF, -INF, 1, -1)},
    "cond_rectangular": (lambda m, a: m.linalg.cond(a), [[((4, 2), 0)], [((2, 3, 5), 0)],
                                                         [((3, 0), 0)]]),
    "tensorinv": (lambda m, a: m.linalg.tensorinv(a.reshape(2, 3, 6) + 0.0, ind=2),
                  [[((6, 6), 3)]]),
    "tensorinv_1": (lambda m, a: m.linalg.tensorinv(a.reshape(4, 2, 2), ind=1),
                    [[((4, 4), 3)]]),
    "tensorsolve": (lambda m, a, b: m.linalg.tensorsolve(a.reshape(2, 3, 6), b.reshape(2, 3)),
                    [[((6, 6), 3), ((6,), 0)]]),
    "tensorsolve_dims": (lambda m, a, b: m.linalg.tensorsolve(a.reshape(3, 2, 3, 2),
                                                              b.reshape(2, 3), dims=(0,)),
                         [[((6, 6), 3), ((6,), 0)]]),
    "householder_product": (lambda m, a, tau: m.linalg.householder_product(a, tau),
                            [[((5, 3), 0), ((2,), 0)], [((4, 4), 0), ((4,), 0)],
                             [((2, 4, 3), 0), ((2, 3), 0)], [((0, 3, 2), 0), ((0, 2), 0)]]),
    "vander": (lambda m, x: m.linalg.vander(x), [[((4,), 0)], [((2, 3), 0)], [((0, 3), 0)]]),
    "vander_n": (lambda m, x: m.linalg.vander(x, N=5), [[((2, 3), 0)], [((0,), 0)]]),
}


def _inputs(spec, seed=0):
    return [general(shape, seed + i, shift) for i, (shape, shift) in enumerate(spec)]


PARAMS = [(name, i) for name, (_, sets) in CASES.items() for i in range(len(sets))]
IDS = [f"{n}-{i}" for n, i in PARAMS]


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "flipped"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,which", PARAMS, ids=IDS)
def test_values_match_pytorch(name, which, dtype, layout):
    f, sets = CASES[name]
    arrays = _inputs(sets[which])
    want = f(torch, *(as_torch(a, dtype) for a in arrays))
    got = f(hx, *(as_hx(a, dtype, layout) for a in arrays))
    close(got, want, dtype, f"{name} {[a.shape for a in arrays]} {layout}")


@pytest.mark.parametrize("name,which", PARAMS, ids=IDS)
def test_float64_gradients_match_pytorch(name, which):
    f, sets = CASES[name]
    arrays = _inputs(sets[which], seed=20)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    hs = [hx.tensor(a, requires_grad=True) for a in arrays]
    want, got = f(torch, *ts), f(hx, *hs)
    if not want.numel():  # (nothing to differentiate)
        return
    if name[5:] in ("fro", "nuc", "inf", "-inf", "1", "-1") and ts[0].numel():
        # (PyTorch's own cond backward fails here, writing into its inverse in place:
        # its gradient is that of the formula it computes)
        p = {"inf": INF, "-inf": -INF}.get(name[5:], name[5:])
        p = int(p) if p in ("1", "-1") else p
        want = TL.matrix_norm(ts[0], p) * TL.matrix_norm(TL.inv(ts[0]), p)
    if name == "lu_P" or not want.requires_grad:  # (a permutation: no gradient in either)
        assert not got.requires_grad
        return
    gy = np.random.default_rng(1).standard_normal(tuple(want.shape))
    want.backward(torch.tensor(gy))
    got.backward(hx.tensor(gy))
    for i, (h, t) in enumerate(zip(hs, ts)):
        if t.grad is None:
            assert h.grad is None or not h.grad.numpy().any(), f"{name} input {i}"
            continue
        assert h.grad is not None and h.grad.shape == tuple(t.grad.shape), f"{name} input {i}"
        np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10,
                                   err_msg=f"{name} gradient of input {i}")


def test_gradients_pass_gradcheck_and_have_second_derivatives():
    from haelixe.autograd import gradcheck

    a = hx.tensor(general((3, 3), 1, 3.0), requires_grad=True)
    b = hx.tensor(general((3, 2), 2), requires_grad=True)
    assert gradcheck(lambda x, y: hx.linalg.solve_triangular(x, y, upper=False), [a, b])
    assert gradcheck(lambda x: hx.linalg.lu(x).U, [a])
    assert gradcheck(lambda x, y: hx.linalg.lu_solve(*hx.linalg.lu_factor(x), y,
                                                     adjoint=True), [a, b])
    # create_graph: the backward is recorded too (a second derivative against PyTorch's)
    t = torch.tensor(general((3, 3), 1, 3.0), requires_grad=True)
    w = np.random.default_rng(3).standard_normal((3, 3))
    for f in (lambda m, x: m.linalg.lu(x).L.sin().sum() + m.linalg.lu(x).U.square().sum(),
              lambda m, x: m.linalg.solve_triangular(x, x.sin(), upper=True).square().sum()):
        (gt,) = torch.autograd.grad(f(torch, t), t, create_graph=True)
        (ht,) = torch.autograd.grad((gt * torch.tensor(w)).sum(), t)
        (gh,) = hx.autograd.grad(f(hx, a), a, create_graph=True)
        (hh,) = hx.autograd.grad((gh * hx.tensor(w)).sum(), a)
        np.testing.assert_allclose(hh.numpy(), ht.numpy(), rtol=1e-7, atol=1e-9)


# -- LU's pivots, results and info --------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 5), (3, 6), (6, 3), (4, 3, 3), (2, 2, 7, 7)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lu_pivots_are_pytorchs_exactly(shape, dtype):
    a = general(shape, 11)
    ours, theirs = hx.linalg.lu_factor(as_hx(a, dtype)), TL.lu_factor(as_torch(a, dtype))
    assert ours._fields == ("LU", "pivots") and ours.pivots.dtype is hx.int32
    np.testing.assert_array_equal(ours.pivots.numpy(), theirs.pivots.numpy())
    close(ours.LU, theirs.LU, dtype)
    p, lo, up = hx.linalg.lu(as_hx(a, dtype))
    np.testing.assert_allclose((p @ lo @ up).numpy(), a, atol=1e-5 if dtype == "float32"
                               else 1e-12)
    ex = hx.linalg.lu_factor_ex(as_hx(a, dtype))
    assert ex._fields == ("LU", "pivots", "info") and ex.info.dtype is hx.int32
    assert ex.info.shape == shape[:-2] and not ex.info.numpy().any()


def test_a_tie_picks_the_first_largest_pivot_as_lapack():
    a = np.array([[1.0, 2.0, 0.0], [-1.0, 0.0, 3.0], [1.0, 5.0, 1.0]])
    close(hx.linalg.lu_factor(hx.tensor(a)).pivots, TL.lu_factor(torch.tensor(a)).pivots, "int32")
    close(hx.linalg.lu(hx.tensor(a)).P, TL.lu(torch.tensor(a)).P)


def test_a_singular_lu_reports_or_raises_as_pytorch():
    batch = np.stack([np.eye(3), SINGULAR])
    ours, theirs = hx.linalg.lu_factor_ex(hx.tensor(batch)), TL.lu_factor_ex(torch.tensor(batch))
    close(ours.LU, theirs.LU)
    close(ours.info, theirs.info, "int32")
    np.testing.assert_array_equal(ours.info.numpy(), [0, 3])
    for f in (lambda: hx.linalg.lu_factor(hx.tensor(batch)),
              lambda: hx.linalg.lu_factor_ex(hx.tensor(batch), check_errors=True)):
        with pytest.raises(LinAlgError, match=r"linalg.lu_factor(_ex)?: \(Batch element 1\): "
                                              r"U\[3,3\] is zero"):
            f()
    with pytest.raises(LinAlgError, match=r"^linalg.lu_factor: U\[2,2\] is zero"):
        hx.linalg.lu_factor(hx.ones(2, 3))
    p, lo, up = hx.linalg.lu(hx.tensor(SINGULAR))  # (no error: U has its zero)
    close(up, TL.lu(torch.tensor(SINGULAR)).U)


def test_ex_forms_report_info_and_raise_with_check_errors():
    batch = np.stack([general((3, 3), 1, 3.0), SINGULAR])
    x, t = hx.tensor(batch), torch.tensor(batch)
    rhs = np.ones(3)
    for ours, theirs, fields in (
            (hx.linalg.solve_ex(x, hx.tensor(rhs)), TL.solve_ex(t, torch.tensor(rhs)),
             ("result", "info")),
            (hx.linalg.solve_ex(x, hx.ones(2, 2, 3, dtype=hx.float64), left=False),
             TL.solve_ex(t, torch.ones(2, 2, 3, dtype=torch.float64), left=False),
             ("result", "info")),
            (hx.linalg.inv_ex(x), TL.inv_ex(t), ("inverse", "info"))):
        assert ours._fields == fields
        for f in fields:
            getattr(theirs, f)  # (PyTorch's structseq has each field)
        close(ours.info, theirs.info, "int32")
        np.testing.assert_array_equal(ours.info.numpy(), [0, 3])
        close(ours[0][0], theirs[0][0])  # (the regular matrix's value)
        # (the singular one's: LAPACK's inf / NaN, which the LU written over numpy repeats)
        np.testing.assert_array_equal(ours[0][1].numpy(), theirs[0][1].numpy())
        assert not np.isfinite(ours[0][1].numpy()).all()
    # left=False: the info of A's own LU, as PyTorch. Every multiplier of this matrix's
    # LU is a power of two, so its zero pivots are exact in any rounding order (SINGULAR.T's
    # third row leaves a pivot that MKL's fused multiply-adds make 1e-16, others 0)
    exact = np.array([[1.0, 2.0, 1.0], [2.0, 4.0, 0.0], [4.0, 8.0, 1.0]])
    for m in (exact, exact.T):
        got = hx.linalg.solve_ex(hx.tensor(m), hx.ones(2, 3, dtype=hx.float64), left=False)
        want = TL.solve_ex(torch.tensor(m), torch.ones(2, 3, dtype=torch.float64), left=False)
        close(got.info, want.info, "int32")
    with pytest.raises(LinAlgError, match=r"^linalg.solve_ex: \(Batch element 1\): The solver "
                                          r"failed because the input matrix is singular"):
        hx.linalg.solve_ex(x, hx.tensor(rhs), check_errors=True)
    with pytest.raises(LinAlgError, match=r"^linalg.inv_ex: \(Batch element 1\): The diagonal "
                                          r"element 3 is zero"):
        hx.linalg.inv_ex(x, check_errors=True)
    ok = hx.linalg.inv_ex(x[0], check_errors=True)
    assert ok.info.shape == () and ok.info.item() == 0


@pytest.mark.parametrize("a", [[[4.0, 2, 1], [2, 1, 0], [1, 0, 5]],
                               [[4.0, 2, 1], [2, -1, 0], [1, 0, 5]], SINGULAR.tolist(),
                               [[-1.0, 0], [0, 1]], [[1.0, 0], [0, -1]],
                               [[4.0, 1, 0], [1, 3, 1], [0, 1, 2]]])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_ex_leaves_what_lapack_leaves(a, upper):
    a = np.array(a)
    ours, theirs = hx.linalg.cholesky_ex(hx.tensor(a), upper=upper), \
        TL.cholesky_ex(torch.tensor(a), upper=upper)
    assert ours._fields == ("L", "info")
    close(ours.L, theirs.L)
    close(ours.info, theirs.info, "int32")


def test_cholesky_ex_batches_gradients_and_check_errors():
    spd = general((2, 3, 3), 4)
    spd = spd @ spd.swapaxes(-1, -2) + 3 * np.eye(3)
    x, t = hx.tensor(spd, requires_grad=True), torch.tensor(spd, requires_grad=True)
    ours, theirs = hx.linalg.cholesky_ex(x), TL.cholesky_ex(t)
    close(ours.L, theirs.L)
    close(ours.info, theirs.info, "int32")
    ours.L.sin().sum().backward()
    theirs.L.sin().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10)
    bad = np.stack([np.eye(2), [[1.0, 2.0], [2.0, 1.0]]])
    with pytest.raises(LinAlgError, match=r"^linalg.cholesky_ex: \(Batch element 1\): The "
                                          r"factorization could not be completed.*order 2"):
        hx.linalg.cholesky_ex(hx.tensor(bad), check_errors=True)
    np.testing.assert_array_equal(hx.linalg.cholesky_ex(hx.tensor(bad)).info.numpy(), [0, 2])


def test_solve_triangular_reads_one_triangle_and_a_zero_diagonal_gives_inf():
    a = general((3, 3), 5, 3.0)
    noisy = a + np.tril(np.full((3, 3), 100.0), -1)
    b = general((3, 2), 6)
    close(hx.linalg.solve_triangular(hx.tensor(noisy), hx.tensor(b), upper=True),
          TL.solve_triangular(torch.tensor(np.triu(a)), torch.tensor(b), upper=True))
    unit = np.triu(a, 1) + np.eye(3)
    close(hx.linalg.solve_triangular(hx.tensor(noisy * 7), hx.tensor(b), upper=False,
                                     unitriangular=True),
          TL.solve_triangular(torch.tensor(np.tril(noisy * 7, -1) + np.eye(3)),
                              torch.tensor(b), upper=False))
    assert np.allclose(np.triu(unit) @ hx.linalg.solve_triangular(
        hx.tensor(unit * 1.0), hx.tensor(b), upper=True, unitriangular=True).numpy(), b)
    z = np.array([[1.0, 2.0], [0.0, 0.0]])
    close(hx.linalg.solve_triangular(hx.tensor(z), hx.ones(2, 2, dtype=hx.float64), upper=True),
          TL.solve_triangular(torch.tensor(z), torch.ones(2, 2, dtype=torch.float64), upper=True))
    # (mixed float dtypes promote, as PyTorch's)
    close(hx.linalg.solve_triangular(hx.tensor(a), hx.tensor(b, dtype=hx.float32), upper=True),
          TL.solve_triangular(torch.tensor(a), torch.tensor(b, dtype=torch.float32), upper=True))


def test_cond_of_a_singular_matrix_is_inf_where_pytorch_masks_it():
    batch = np.stack([general((3, 3), 1, 3.0), SINGULAR])
    for p in ("fro", INF, -INF, 1, -1):
        got = hx.linalg.cond(hx.tensor(batch), p)
        close(got, TL.cond(torch.tensor(batch), p), what=str(p))
        assert got.numpy()[1] == INF
    assert hx.linalg.cond(hx.tensor(SINGULAR), "nuc").item() == INF  # (see the docs)
    x = hx.tensor(batch, requires_grad=True)
    hx.linalg.cond(x, 1)[0].backward()  # (the singular one's inf does not reach the other)
    assert np.isfinite(x.grad.numpy()).all() and not x.grad.numpy()[1].any()


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "float32"])
def test_vander_keeps_pytorchs_dtypes(dtype):
    a = np.array([[0, 2, 3], [1, 4, 5]])
    close(hx.linalg.vander(hx.tensor(a, dtype=getattr(hx, dtype)), N=4),
          TL.vander(torch.tensor(a, dtype=getattr(torch, dtype)), N=4), dtype)


# -- errors -----------------------------------------------------------------------------------
def _lu(m):
    return m.linalg.lu_factor(m.eye(3) + 1.0)


ERRORS = [
    ("solve_triangular's vector B", lambda m: m.linalg.solve_triangular(
        m.eye(2), m.ones(2), upper=True), RuntimeError, "B must have at least 2 dimensions"),
    ("solve_triangular's shapes", lambda m: m.linalg.solve_triangular(
        m.eye(2), m.ones(3, 2), upper=True), RuntimeError,
     r"Incompatible shapes of A and B for the equation AX = B \(2x2 and 3x2\)"),
    ("solve_triangular right", lambda m: m.linalg.solve_triangular(
        m.eye(2), m.ones(2, 3), upper=True, left=False), RuntimeError, "equation XA = B"),
    ("solve_triangular non-square", lambda m: m.linalg.solve_triangular(
        m.ones(2, 3), m.ones(2, 2), upper=True), RuntimeError, "square matrices"),
    ("solve_triangular's batch", lambda m: m.linalg.solve_triangular(
        m.ones(2, 2, 2), m.ones(3, 2, 2), upper=True), RuntimeError, "batch dims"),
    ("solve_triangular of ints", lambda m: m.linalg.solve_triangular(
        m.ones(2, 2, dtype=m.int64), m.ones(2, 2, dtype=m.int64), upper=True), TypeError,
     "floating point"),
    ("solve_triangular of float16", lambda m: m.linalg.solve_triangular(
        m.eye(2, dtype=m.float16), m.eye(2, dtype=m.float16), upper=True), TypeError,
     "float16"),
    ("solve_triangular without upper", lambda m: m.linalg.solve_triangular(m.eye(2), m.eye(2)),
     TypeError, "upper"),
    ("lu_factor without pivoting", lambda m: m.linalg.lu_factor(m.eye(2), pivot=False),
     RuntimeError, "linalg.lu_factor: LU without pivoting is not implemented on the CPU"),
    ("lu without pivoting", lambda m: m.linalg.lu(m.eye(2), pivot=False),
     RuntimeError, "LU without pivoting is not implemented"),
    ("lu_factor_ex without pivoting", lambda m: m.linalg.lu_factor_ex(m.eye(2), pivot=False),
     RuntimeError, "LU without pivoting is not implemented"),
    ("lu_factor of a vector", lambda m: m.linalg.lu_factor(m.ones(3)), RuntimeError,
     "at least 2 dimensions"),
    ("lu of ints", lambda m: m.linalg.lu(m.ones(2, 2, dtype=m.int32)), TypeError,
     "floating point"),
    ("lu_solve's vector B", lambda m: m.linalg.lu_solve(*_lu(m), m.ones(3)), RuntimeError,
     "B must have at least 2 dimensions"),
    ("lu_solve's dtypes", lambda m: m.linalg.lu_solve(*_lu(m), m.ones(3, 1, dtype=m.float64)),
     TypeError, "Expected LU and B to have the same dtype"),
    ("lu_solve's int64 pivots", lambda m: m.linalg.lu_solve(_lu(m)[0], _lu(m)[1].long(),
                                                            m.ones(3, 1)),
     TypeError, "pivots should be a Tensor of scalar type torch.int32"),
    ("lu_solve's shapes", lambda m: m.linalg.lu_solve(*_lu(m), m.ones(4, 1)), RuntimeError,
     r"equation AX = B \(3x3 and 4x1\)"),
    ("lu_solve right", lambda m: m.linalg.lu_solve(*_lu(m), m.ones(3, 4), left=False),
     RuntimeError, "equation XA = B"),
    ("lu_solve's few pivots", lambda m: m.linalg.lu_solve(_lu(m)[0], _lu(m)[1][:2],
                                                          m.ones(3, 1)),
     RuntimeError, "Number of pivots per batch"),
    ("lu_solve's pivot batch", lambda m: m.linalg.lu_solve(_lu(m)[0], _lu(m)[1].expand(2, 3),
                                                           m.ones(3, 1)),
     RuntimeError, r"Expected LU.shape\[:-1\] and pivots.shape to be the same"),
    ("lu_solve non-square", lambda m: m.linalg.lu_solve(m.ones(3, 4), _lu(m)[1],
                                                        m.ones(3, 1)),
     RuntimeError, "square matrices"),
    ("lu_solve's large pivots", lambda m: m.linalg.lu_solve(_lu(m)[0], _lu(m)[1] + 5,
                                                            m.ones(3, 1)),
     RuntimeError, "smaller or equal to LU.size"),
    ("lu_solve's small pivots", lambda m: m.linalg.lu_solve(_lu(m)[0], _lu(m)[1] - 5,
                                                            m.ones(3, 1)),
     RuntimeError, "greater or equal to 1"),
    ("solve_ex of ints", lambda m: m.linalg.solve_ex(m.ones(2, 2, dtype=m.int32),
                                                     m.ones(2, dtype=m.int32)),
     TypeError, "floating point"),
    ("solve_ex's shapes", lambda m: m.linalg.solve_ex(m.eye(3), m.ones(4, 2)), RuntimeError,
     r"linalg.solve_ex: Incompatible shapes"),
    ("inv_ex non-square", lambda m: m.linalg.inv_ex(m.ones(2, 3)), RuntimeError,
     "linalg.inv_ex: A must be batches of square matrices"),
    ("cholesky_ex of a vector", lambda m: m.linalg.cholesky_ex(m.ones(2)), RuntimeError,
     "at least 2 dimensions"),
    ("cond's order", lambda m: m.linalg.cond(m.eye(2), 3), RuntimeError,
     "linalg.cond got an invalid norm type: 3"),
    ("cond of a vector", lambda m: m.linalg.cond(m.ones(3)), RuntimeError,
     "at least 2 dimensions"),
    ("cond's fro of a non-square", lambda m: m.linalg.cond(m.ones(2, 3), "fro"), RuntimeError,
     r"linalg.cond\(ord=fro\): A must be batches of square matrices"),
    ("cond of ints", lambda m: m.linalg.cond(m.eye(2, dtype=m.int32)), TypeError,
     "floating point"),
    ("cond of float16", lambda m: m.linalg.cond(m.eye(2, dtype=m.float16), 1), TypeError,
     "float16"),
    ("tensorinv's shape", lambda m: m.linalg.tensorinv(m.ones(4, 6, 8, 2)), RuntimeError,
     r"prod\(self.shape\[ind:\]\) == prod\(self.shape\[:ind\]\), but got 16 != 24"),
    ("tensorinv's ind 0", lambda m: m.linalg.tensorinv(m.ones(4, 4), ind=0), RuntimeError,
     "strictly positive integer for 'ind', but got 0"),
    ("tensorinv's float ind", lambda m: m.linalg.tensorinv(m.ones(4, 4), ind=1.5), TypeError,
     "'ind' must be int"),
    ("tensorinv of a singular", lambda m: m.linalg.tensorinv(m.zeros(2, 2, 2, 2)),
     RuntimeError, "^linalg.tensorinv: The diagonal element 1 is zero"),
    ("tensorsolve's shape", lambda m: m.linalg.tensorsolve(m.ones(2, 3, 6), m.ones(2, 4)),
     RuntimeError, r"prod\(self.shape\[other.ndim:\]\) == prod\(self.shape\[:other.ndim\]\), "
     r"but got 6 != 8"),
    ("tensorsolve of a singular", lambda m: m.linalg.tensorsolve(m.zeros(2, 3, 6),
                                                                 m.ones(2, 3)),
     RuntimeError, "^linalg.tensorsolve: .*singular"),
    ("tensorsolve's dtypes", lambda m: m.linalg.tensorsolve(m.ones(2, 3, 6),
                                                            m.ones(2, 3, dtype=m.float64)),
     TypeError, "same dtype"),
    ("householder_product of a vector", lambda m: m.linalg.householder_product(
        m.ones(4), m.ones(2)), RuntimeError, "input must have at least 2 dimensions"),
    ("householder_product wide", lambda m: m.linalg.householder_product(
        m.ones(3, 4), m.ones(2)), RuntimeError, r"input.shape\[-2\] must be greater"),
    ("householder_product's tau", lambda m: m.linalg.householder_product(
        m.ones(4, 3), m.ones(4)), RuntimeError, r"input.shape\[-1\] must be greater"),
    ("householder_product's tau dims", lambda m: m.linalg.householder_product(
        m.ones(4, 3), m.ones(2, 2)), RuntimeError, "one dimension less than input"),
    ("householder_product's batch", lambda m: m.linalg.householder_product(
        m.ones(2, 4, 3), m.ones(3, 2)), RuntimeError, "batch dimensions of tau"),
    ("householder_product's dtypes", lambda m: m.linalg.householder_product(
        m.ones(4, 3), m.ones(2, dtype=m.float64)), TypeError, "does not match input dtype"),
    ("vander's N", lambda m: m.linalg.vander(m.ones(2), N=1), RuntimeError,
     "N must be greater than 1"),
    ("vander of one", lambda m: m.linalg.vander(m.ones(2, 1)), RuntimeError,
     "N must be greater than 1"),
    ("vander of a 0-d", lambda m: m.linalg.vander(m.tensor(2.0)), RuntimeError, "vander"),
    ("vander of bools", lambda m: m.linalg.vander(m.ones(2, dtype=m.bool)), RuntimeError,
     "integer tensors, but got bool"),
]


@pytest.mark.parametrize("what,call,kind,pattern", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_op_as_pytorchs_do(what, call, kind, pattern):
    with pytest.raises(Exception):  # noqa: B017,PT011 (PyTorch raises here too)
        call(torch)
    with pytest.raises(kind, match=pattern) as info:
        call(hx)
    assert info.type.__module__.startswith("haelixe") or info.type is TypeError


# -- the GPU ----------------------------------------------------------------------------------
GPU_CASES = [n for n in CASES if not n.endswith(("_right", "_unit"))]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_CASES)
def test_gpu_equals_cpu(be, name):
    f, sets = CASES[name]
    arrays = _inputs(sets[0], seed=30)
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


@pytest.mark.gpu
def test_gpu_lu_results_and_info_stay_on_the_gpu(be):
    x = hx.tensor(np.stack([np.eye(3), SINGULAR]), dtype=hx.float32, device="gpu")
    lu, pivots, info = hx.linalg.lu_factor_ex(x)
    assert {t.device.type for t in (lu, pivots, info)} == {"gpu"}
    np.testing.assert_array_equal(info.cpu().numpy(), [0, 3])
    assert pivots.dtype is hx.int32
    assert hx.linalg.cholesky_ex(x).info.device.type == "gpu"


# -- torch.triangular_solve --------------------------------------------------------------------
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_triangular_solve_is_solve_triangular_in_torchs_older_order(upper, transpose, unit):
    a, b = general((3, 3), 1, 3.0), general((2, 3, 2), 2)
    ha, hb = hx.tensor(a, requires_grad=True), hx.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    kw = {"upper": upper, "transpose": transpose, "unitriangular": unit}
    with pytest.warns(UserWarning, match="deprecated"):
        ours = hx.triangular_solve(hb, ha, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.triangular_solve(tb, ta, **kw)
    assert ours._fields == ("solution", "cloned_coefficient")
    close(ours.solution, theirs.solution)
    close(ours.cloned_coefficient, theirs.cloned_coefficient)
    ours.solution.sin().sum().backward()
    theirs.solution.sin().sum().backward()
    for h, t in ((ha, ta), (hb, tb)):
        np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10)
    with pytest.warns(UserWarning):
        method = hb.detach().triangular_solve(ha.detach(), **kw).solution
    close(method, theirs.solution)
    with pytest.raises(RuntimeError, match="Expected b to have at least 2 dimensions"), \
            pytest.warns(UserWarning):
        hx.triangular_solve(hx.ones(3, dtype=hx.float64), ha)
    with pytest.raises(TypeError, match="same dtype"), pytest.warns(UserWarning):
        hx.triangular_solve(hx.ones(3, 1), ha)
