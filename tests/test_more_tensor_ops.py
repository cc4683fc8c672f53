"""The stacking helpers, tensordot, kron, cross, trace, diag_embed, logit, nan_to_num,
xlogy, hypot, heaviside and signbit against PyTorch: values and dtypes on 0-d, 0-size,
strided and broadcast inputs, float64 gradients by finite differences, in-place forms,
and the errors.

(tests/test_op_registry.py also runs each over every dtype and layout.)"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import gradcheck

torch = pytest.importorskip("torch")


def _same(got, want, tol=1e-12):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, tol)
        return
    assert got.shape == tuple(want.shape), (got.shape, tuple(want.shape))
    assert got.dtype.name == str(want.dtype)[6:], (got.dtype, want.dtype)
    g = got.float().numpy() if got.dtype.name in ("bfloat16", "float16") else got.numpy()
    w = want.float().numpy() if want.dtype in (torch.bfloat16, torch.float16) else \
        want.numpy()
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)


def _both(a, dtype="float64"):
    return hx.tensor(a, dtype=dtype), torch.tensor(np.asarray(a)).to(getattr(torch, dtype))


R = np.random.default_rng(0)
A, B = R.standard_normal((3, 4)), R.standard_normal(4)


# -- stacking ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["hstack", "vstack", "row_stack", "dstack", "column_stack"])
@pytest.mark.parametrize("shapes", [[(3, 4), (3, 4)], [(4,), (4,)], [(), ()], [(0,), (0,)],
                                    [(2, 0), (2, 0)], [(2, 3, 1), (2, 3, 2)]], ids=str)
def test_stacking_matches_pytorch(name, shapes):
    arrays = [R.standard_normal(s) for s in shapes]
    want = getattr(torch, name)
    try:
        w = want([torch.tensor(a) for a in arrays])
    except RuntimeError:
        with pytest.raises(Exception, match=name.split("_")[0] if name != "row_stack"
                           else "row_stack"):
            getattr(hx, name)([hx.tensor(a) for a in arrays])
        return
    _same(getattr(hx, name)([hx.tensor(a) for a in arrays]), w)


def test_stacking_promotes_and_takes_transposed_inputs():
    h, t = _both(A)
    hi, ti = _both(np.arange(12).reshape(4, 3), "int32")
    _same(hx.hstack([h.mT, hi]), torch.hstack([t.mT, ti]))
    _same(hx.column_stack([h.mT[:, 0], hi]), torch.column_stack([t.mT[:, 0], ti]))


@pytest.mark.parametrize("name", ["atleast_1d", "atleast_2d", "atleast_3d"])
def test_atleast_matches_pytorch_for_one_or_several_tensors(name):
    arrays = [np.float64(1.5), B, A, R.standard_normal((2, 1, 3, 2)), np.zeros((0,))]
    for a in arrays:
        h, t = _both(a)
        _same(getattr(hx, name)(h), getattr(torch, name)(t))
        _same(getattr(hx, name)(h.flip(0) if h.ndim else h),
              getattr(torch, name)(t.flip(0) if t.ndim else t))
    hs, ts = zip(*(_both(a) for a in arrays))
    _same(getattr(hx, name)(*hs), getattr(torch, name)(*ts))
    _same(getattr(hx, name)(list(hs)), getattr(torch, name)(list(ts)))


# -- products ----------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb,dims", [((2, 3, 4), (3, 4, 5), 2), ((2, 3), (3, 2), 1),
                                        ((2, 3), (4,), 0), ((2, 3, 4), (4, 2, 3), ([1, 2], [2, 0])),
                                        ((0, 3), (3, 2), 1), ((), (), 0)], ids=str)
def test_tensordot_matches_pytorch(sa, sb, dims):
    (ha, ta), (hb, tb) = _both(R.standard_normal(sa)), _both(R.standard_normal(sb))
    _same(hx.tensordot(ha, hb, dims), torch.tensordot(ta, tb, dims))


@pytest.mark.parametrize("sa,sb", [((2, 3), (3, 2)), ((3,), (2, 2)), ((), (2,)),
                                   ((2, 0), (3, 1)), ((2, 1, 2), (2, 3))], ids=str)
def test_kron_matches_pytorch(sa, sb):
    (ha, ta), (hb, tb) = _both(R.standard_normal(sa)), _both(R.standard_normal(sb))
    _same(hx.kron(ha, hb), torch.kron(ta, tb))
    hi, ti = _both(np.arange(4).reshape(2, 2), "int64")
    _same(hi.kron(hi), ti.kron(ti))


def test_cross_matches_pytorch_with_and_without_dim():
    (ha, ta), (hb, tb) = _both(R.standard_normal((4, 3))), _both(R.standard_normal((1, 3)))
    _same(hx.cross(ha, hb, dim=1), torch.cross(ta, tb, dim=1))
    _same(ha.mT.cross(hb.mT, -2), ta.mT.cross(tb.mT, -2))
    with pytest.warns(UserWarning, match="cross"):
        got = hx.cross(ha.mT.contiguous()[:, :3], hb.expand(3, 3).mT)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _same(got, torch.cross(ta.mT.contiguous()[:, :3], tb.expand(3, 3).mT))


def test_trace_and_diag_embed_match_pytorch():
    h, t = _both(A)
    _same(hx.trace(h), torch.trace(t))
    _same(h.mT.trace(), t.mT.trace())
    hi, ti = _both(np.arange(6).reshape(2, 3), "int32")
    _same(hi.trace(), ti.trace())
    for args in ((), (1,), (-2, 0, 2), (1, 2, 0), (0, 1, -1)):
        _same(hx.diag_embed(h, *args), torch.diag_embed(t, *args))
    _same(hx.diag_embed(h[:, :0]), torch.diag_embed(t[:, :0]))
    _same(hx.diag_embed(hi[0], -1), torch.diag_embed(ti[0], -1))


# -- elementwise compositions and entries ------------------------------------------------
P = np.array([[0.0, 0.1, 0.5], [0.9, 1.0, 0.25]])
SPECIAL = np.array([np.nan, np.inf, -np.inf, 1.0, -0.0, 3.0])


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64",
                                   "bool"])
def test_logit_and_nan_to_num_match_pytorch_on_each_dtype(dtype):
    tol = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 2e-6}.get(dtype, 1e-12)
    h, t = _both(P if dtype not in ("int64", "bool") else P > 0.3, dtype)
    _same(hx.logit(h), torch.logit(t), tol)
    _same(h.logit(0.2), t.logit(0.2), tol)
    h, t = _both(SPECIAL if dtype not in ("int64", "bool") else SPECIAL > 2, dtype)
    _same(hx.nan_to_num(h), torch.nan_to_num(t), tol)
    _same(h.nan_to_num(1.0, posinf=2.0, neginf=-3.0), t.nan_to_num(1.0, 2.0, -3.0), tol)


def test_logit_and_nan_to_num_in_place():
    h, t = _both(P)
    h.mT.logit_(0.2)
    t.mT.logit_(0.2)
    _same(h, t)
    h, t = _both(SPECIAL)
    assert h.nan_to_num_(5.0) is h
    _same(h, t.nan_to_num_(5.0))
    with pytest.raises(RuntimeError, match="logit_"):
        hx.tensor([1, 2]).logit_()


def test_binary_entries_match_pytorch_with_broadcasting_and_zeros():
    x = np.array([[0.0, 0.0, 1.5], [-2.0, 3.0, 0.0]])
    y = np.array([0.0, np.nan, 2.0])
    (hx_, tx), (hy, ty) = _both(x), _both(y)
    for name in ("xlogy", "hypot", "heaviside"):
        _same(getattr(hx, name)(hx_, hy), getattr(torch, name)(tx, ty))
        _same(getattr(hx, name)(hx_.mT[:, :1], hy[:2]), getattr(torch, name)(tx.mT[:, :1],
                                                                             ty[:2]))
    _same(hx.xlogy(hx_, 2.0), torch.xlogy(tx, 2.0))
    hi, ti = _both(np.array([0, 1, 2]), "int64")
    _same(hi.xlogy(hi), ti.xlogy(ti))
    _same(hx.signbit(hx.tensor(SPECIAL * -1)), torch.signbit(torch.tensor(SPECIAL * -1)))
    _same(hx.signbit(hi - 1), torch.signbit(ti - 1))
    _same(hx.heaviside(hi - 1, hi), torch.heaviside(ti - 1, ti))


@pytest.mark.parametrize("shape", [(), (0,), (2, 0)], ids=str)
def test_entries_on_0d_and_empty_inputs(shape):
    h, t = _both(np.full(shape, 0.5))
    for name in ("xlogy", "hypot", "heaviside"):
        _same(getattr(hx, name)(h, h), getattr(torch, name)(t, t))
    _same(hx.signbit(h), torch.signbit(t))
    _same(hx.logit(h), torch.logit(t))
    _same(hx.nan_to_num(h), torch.nan_to_num(t))


# -- gradients ---------------------------------------------------------------------------
def _x(shape, seed, low=-1.0, high=1.0):
    return hx.tensor(np.random.default_rng(seed).uniform(low, high, shape)).requires_grad_()


GRADS = {
    "hstack": (lambda a, b: hx.hstack([a, b.mT]), [(3, 2), (2, 3)]),
    "vstack": (lambda a, b: hx.vstack([a[0], b]), [(3, 2), (2, 2)]),
    "dstack": (lambda a, b: hx.dstack([a, b]), [(3, 2), (3, 2)]),
    "column_stack": (lambda a, b: hx.column_stack([a[:, 0], b]), [(3, 2), (3, 2)]),
    "atleast_3d": (lambda a, b: hx.atleast_3d(a)[0] * b, [(3,), (3, 1)]),
    "tensordot": (lambda a, b: hx.tensordot(a, b, ([0], [1])), [(3, 2), (2, 3)]),
    "kron": (lambda a, b: hx.kron(a, b), [(2, 2), (3, 1)]),
    "cross": (lambda a, b: hx.cross(a, b, dim=1), [(2, 3), (1, 3)]),
    "trace": (lambda a, b: hx.trace(a @ b), [(3, 2), (2, 3)]),
    "diag_embed": (lambda a, b: hx.diag_embed(a * b, -1, 0, 2), [(2, 3), (3,)]),
    "hypot": (lambda a, b: hx.hypot(a, b), [(2, 3), (3,)]),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_float64_gradients_pass_gradcheck(name):
    fn, shapes = GRADS[name]
    assert gradcheck(fn, tuple(_x(s, i) for i, s in enumerate(shapes)), name=name)


def test_logit_xlogy_and_nan_to_num_gradients_match_pytorch():
    p = np.array([0.1, 0.2, 0.5, 0.8, 0.95])
    cases = [(lambda x: hx.logit(x), lambda x: torch.logit(x)),
             (lambda x: x.logit(0.2), lambda x: x.logit(0.2)),
             (lambda x: hx.xlogy(x - 0.5, x), lambda x: torch.xlogy(x - 0.5, x)),
             (lambda x: hx.nan_to_num(x / (x - 0.5)), lambda x: torch.nan_to_num(x / (x - 0.5)))]
    for fh, ft in cases:
        h = hx.tensor(p).requires_grad_()
        t = torch.tensor(p).requires_grad_()
        fh(h).sum().backward()
        ft(t).sum().backward()
        np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-9)
    x = _x((2, 3), 7, 0.05, 0.95)
    assert gradcheck(lambda v: hx.logit(v), (x,))
    assert gradcheck(lambda v: hx.xlogy(v, v + 1.0), (x,))


def test_logit_in_place_on_a_non_leaf_records_its_gradient():
    h = hx.tensor(P[:, 1:]).requires_grad_()
    t = torch.tensor(P[:, 1:]).requires_grad_()
    (h * 0.5).logit_().sum().backward()
    (t * 0.5).logit_().sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-10)


# -- errors ------------------------------------------------------------------------------
def test_errors_name_the_op():
    a = hx.tensor(A)
    with pytest.raises(Exception, match="hstack: expected a non-empty"):
        hx.hstack([])
    with pytest.raises(Exception, match="tensordot: dim"):
        hx.tensordot(a, a, 1)
    with pytest.raises(Exception, match="tensordot: cannot contract 3"):
        hx.tensordot(a, a, 3)
    with pytest.raises(Exception, match="cross: no dimension of size 3"):
        hx.cross(a[:2, :2], a[:2, :2])
    with pytest.raises(Exception, match="cross: dim 1 of shape"):
        hx.cross(a, a, dim=1)
    with pytest.raises(Exception, match="trace: expected a 2-D"):
        hx.trace(a[0])
    with pytest.raises(TypeError, match="trace: not defined for bool"):
        hx.trace(a > 0)
    with pytest.raises(Exception, match="diag_embed: dim1 and dim2"):
        hx.diag_embed(a, 0, 1, 1)
    with pytest.raises(TypeError, match="hypot: not defined for int64"):
        hx.hypot(hx.tensor([1]), hx.tensor([2]))
    with pytest.raises(Exception, match="heaviside"):
        hx.heaviside(a, hx.tensor([1]))
