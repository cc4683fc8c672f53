"""Everyday math ops against PyTorch: the BLAS-style products (addmm ... renorm), the
elementwise entries (fmax, fmin, logaddexp2, nextafter, frac, deg2rad, rad2deg, sgn),
the writes into copies (take, put, index_put, masked_scatter, the view scatters), the
small shape ops, the older linear-algebra names, the signal windows and the Tensor
in-place forms: values, dtypes, edge shapes, strided inputs, errors and float64
gradients (test_op_registry.py adds every dtype and layout, and the GPU)."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(7)


def arr(*shape):
    return RNG.standard_normal(shape)


def both(a, dtype="float64"):
    return hx.tensor(a, dtype=dtype), torch.tensor(np.asarray(a), dtype=getattr(torch, dtype))


def same(got, want, tol=1e-12):
    assert got.dtype.name == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    g = got.detach().cpu().numpy().astype(np.float64)
    w = want.detach().double().numpy() if want.is_floating_point() else want.numpy()
    w = w.astype(np.float64)
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)


def grads_match(fh, ft, *arrays, tol=1e-10):
    """fh and ft on float64 leaves of ``arrays``: outputs and every input's gradient."""
    hs = [hx.tensor(a, dtype="float64", requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out_h, out_t = fh(*hs), ft(*ts)
    same(out_h, out_t, tol)
    gy = RNG.standard_normal(tuple(out_t.shape))
    out_t.backward(torch.tensor(gy))
    out_h.backward(hx.tensor(gy))
    for h, t in zip(hs, ts):
        want = t.grad if t.grad is not None else torch.zeros_like(t)
        assert h.grad is not None, "no gradient reached an input PyTorch's reaches"
        np.testing.assert_allclose(h.grad.numpy(), want.numpy(force=True), rtol=tol, atol=tol)


# -- BLAS-style products -------------------------------------------------------------------
PRODUCTS = {
    "addmm": ((4,), (3, 5), (5, 4)),
    "addmv": ((3,), (3, 5), (5,)),
    "addr": ((3, 1), (3,), (4,)),
    "baddbmm": ((1, 3, 4), (2, 3, 5), (2, 5, 4)),
    "addbmm": ((3, 4), (2, 3, 5), (2, 5, 4)),
}


@pytest.mark.parametrize("name", sorted(PRODUCTS))
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 3)])
def test_products_match_pytorch_with_broadcast_input_and_gradients(name, beta, alpha):
    arrays = [arr(*s) for s in PRODUCTS[name]]
    grads_match(lambda *xs: getattr(hx, name)(*xs, beta=beta, alpha=alpha),
                lambda *xs: getattr(torch, name)(*xs, beta=beta, alpha=alpha), *arrays)


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_products_method_and_in_place_forms(name):
    shapes = PRODUCTS[name]
    full = {"addmm": (3, 4), "addmv": (3,), "addr": (3, 4), "baddbmm": (2, 3, 4),
            "addbmm": (3, 4)}[name]
    a, *rest = [arr(*s) for s in shapes]
    a = arr(*full)
    (h, t), *others = [both(v) for v in (a, *rest)]
    hs, ts = [o[0] for o in others], [o[1] for o in others]
    same(getattr(h, name)(*hs, alpha=2), getattr(t, name)(*ts, alpha=2))
    out = getattr(h, name + "_")(*hs, beta=0.5)
    assert out is h
    same(h, getattr(t, name + "_")(*ts, beta=0.5))


def test_beta_zero_ignores_nan_in_input_but_passes_zero_gradient():
    a = np.full((2, 2), np.nan)
    (h, t), (m, tm) = both(a), both(arr(2, 2))
    same(hx.addmm(h, m, m, beta=0), torch.addmm(t, tm, tm, beta=0))
    assert not np.isnan(hx.addmm(h, m, m, beta=0).numpy()).any()
    x = hx.ones(2, 2, dtype="float64", requires_grad=True)
    hx.addmm(x, m, m, beta=0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 2)))


def test_products_on_strided_and_empty_operands():
    m1, m2 = arr(5, 3), arr(4, 5)
    (h1, t1), (h2, t2), (hi, ti) = both(m1), both(m2), both(arr(3, 4))
    same(hx.addmm(hi, h1.mT, h2.mT, alpha=2), torch.addmm(ti, t1.mT, t2.mT, alpha=2))
    (hv, tv) = both(arr(6))
    same(hx.mv(h1.mT, hv[:5]), torch.mv(t1.mT, tv[:5]))
    same(hx.dot(hv[::2], hv[1::2]), torch.dot(tv[::2], tv[1::2]))
    # (an empty inner dim: the product is zero, beta * input remains)
    (he, te), (hf, tf) = both(np.zeros((3, 0))), both(np.zeros((0, 4)))
    same(hx.addmm(hi, he, hf, beta=2), torch.addmm(ti, te, tf, beta=2))
    (hz, tz) = both(np.zeros((0, 4)))
    same(hx.addmm(hz, hx.zeros(0, 2, dtype="float64"), hx.zeros(2, 4, dtype="float64")),
         torch.addmm(tz, torch.zeros(0, 2, dtype=torch.float64),
                     torch.zeros(2, 4, dtype=torch.float64)))


def test_integer_products_truncate_beta_and_alpha_as_pytorch():
    a = np.array([[1, 2], [3, 4]])
    h, t = both(a, "int32")
    same(hx.addmm(h, h, h, beta=1.5, alpha=0.5), torch.addmm(t, t, t, beta=1.5, alpha=0.5))
    same(hx.addmm(h, h, h, beta=3, alpha=2), torch.addmm(t, t, t, beta=3, alpha=2))
    same(hx.addbmm(h, h[None], h[None]), torch.addbmm(t, t[None], t[None]))
    same(hx.dot(h[0], h[1]), torch.dot(t[0], t[1]))
    same(hx.addcmul(h, h, h, value=2), torch.addcmul(t, t, t, value=2))


def test_addr_of_bools_is_or_and_and_as_pytorch():
    v = np.array([True, False, True])
    (hv, tv) = both(v, "bool")
    (hm, tm) = both(np.eye(3, dtype=bool), "bool")
    for beta, alpha in ((1, 1), (0, 1), (1, 0), (True, False)):
        same(hx.addr(hm, hv, hv.flip(0), beta=beta, alpha=alpha),
             torch.addr(tm, tv, tv.flip(0), beta=beta, alpha=alpha))


@pytest.mark.parametrize("op,call", [
    ("addmm", lambda m: m.addmm(m.ones(2, 2), m.ones(2, 2, dtype=m.float64), m.ones(2, 2))),
    ("addmm", lambda m: m.addmm(m.ones(2, 2), m.ones(2, 3), m.ones(2, 3))),
    ("addmm", lambda m: m.addmm(m.ones(3, 3), m.ones(2, 2), m.ones(2, 2))),
    ("addmv", lambda m: m.addmv(m.ones(2), m.ones(2, 2), m.ones(3))),
    ("baddbmm", lambda m: m.baddbmm(m.ones(2, 2), m.ones(2, 2, 2), m.ones(3, 2, 2))),
    ("dot", lambda m: m.dot(m.ones(2), m.ones(3))),
    ("dot", lambda m: m.dot(m.ones(2), m.ones(2, dtype=m.float64))),
    ("mv", lambda m: m.mv(m.ones(2), m.ones(2))),
    ("inner", lambda m: m.inner(m.ones(2, 3), m.ones(2))),
    ("addcdiv", lambda m: m.addcdiv(m.ones(2), m.ones(2, dtype=m.int64),
                                    m.ones(2, dtype=m.int64))),
    ("addcmul", lambda m: m.addcmul(m.ones(2, dtype=m.bool), m.ones(2, dtype=m.bool),
                                    m.ones(2, dtype=m.bool))),
    ("dist", lambda m: m.dist(m.ones(2, dtype=m.int64), m.ones(2, dtype=m.int64))),
    ("renorm", lambda m: m.renorm(m.ones(2, 2), 0, 0, 1.0)),
    ("renorm", lambda m: m.renorm(m.ones(2, 2, dtype=m.int64), 2, 0, 1.0)),
])
def test_products_refuse_what_pytorch_refuses(op, call):
    with pytest.raises((RuntimeError, TypeError)):
        call(torch)
    with pytest.raises((RuntimeError, TypeError)) as info:
        call(hx)
    assert str(info.value).startswith(op), info.value  # (named for the op, not numpy's)


def test_keyword_only_coefficients():
    for name in ("addmm", "addmv", "addr", "baddbmm", "addbmm"):
        params = inspect.signature(getattr(hx, name)).parameters
        assert params["beta"].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert params["alpha"].kind is inspect.Parameter.KEYWORD_ONLY, name
    for name in ("addcmul", "addcdiv"):
        assert inspect.signature(getattr(hx, name)).parameters["value"].kind is \
            inspect.Parameter.KEYWORD_ONLY
    with pytest.raises(TypeError):
        hx.addmm(hx.ones(2, 2), hx.ones(2, 2), hx.ones(2, 2), 2)


@pytest.mark.parametrize("name,shapes,kwargs", [
    ("addcmul", ((3, 1), (1, 4), (4,)), {"value": -0.5}),
    ("addcdiv", ((3, 4), (3, 1), (4,)), {"value": 2}),
    ("dot", ((5,), (5,)), {}),
    ("vdot", ((5,), (5,)), {}),
    ("mv", ((3, 5), (5,)), {}),
    ("inner", ((2, 3, 4), (5, 4)), {}),
    ("inner", ((), (2, 3)), {}),
    ("ger", ((3,), (4,)), {}),
    ("dist", ((3, 4), (4,)), {}),
    ("dist", ((3, 4), (3, 4)), {"p": 1}),
    ("dist", ((3, 4), (3, 4)), {"p": 3.5}),
    ("dist", ((3, 4), (1, 4)), {"p": float("inf")}),
    ("renorm", ((3, 4),), {"p": 2, "dim": 0, "maxnorm": 1.0}),
    ("renorm", ((3, 4, 2),), {"p": 1, "dim": -1, "maxnorm": 2.0}),
    ("renorm", ((3, 4),), {"p": 3, "dim": 1, "maxnorm": 50.0}),
])
def test_other_products_values_and_gradients(name, shapes, kwargs):
    arrays = [arr(*s) if s else np.array(1.5) for s in shapes]
    if name == "addcdiv":
        arrays[2] = np.abs(arrays[2]) + 0.5
    grads_match(lambda *xs: getattr(hx, name)(*xs, **kwargs),
                lambda *xs: getattr(torch, name)(*xs, **kwargs), *arrays)


def test_addcmul_and_addcdiv_promote_and_work_in_place():
    (h, t) = both(arr(2, 3), "float32")
    (hi, ti) = both(np.array([[1, 2, 3]]), "int64")
    same(hx.addcmul(h, hi, hi, value=0.5), torch.addcmul(t, ti, ti, value=0.5), 1e-6)
    same(hx.addcdiv(hi, h, hi), torch.addcdiv(ti, t, ti), 1e-6)
    x, y = both(arr(2, 3))
    x.addcdiv_(x * 2, x * x + 1, value=3)
    y.addcdiv_(y * 2, y * y + 1, value=3)
    same(x, y)


def test_in_place_product_records_its_operands_gradients():
    m = hx.tensor(arr(3, 4), requires_grad=True)
    tm = torch.tensor(m.detach().numpy(), requires_grad=True)
    base = hx.zeros(3, 3, dtype="float64")
    tbase = torch.zeros(3, 3, dtype=torch.float64)
    base.addmm_(m, m.mT, alpha=2)
    tbase.addmm_(tm, tm.mT, alpha=2)
    same(base, tbase)
    base.sum().backward()
    tbase.sum().backward()
    np.testing.assert_allclose(m.grad.numpy(), tm.grad.numpy(), rtol=1e-12)
    leaf = hx.ones(3, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.addmm_(hx.ones(3, 3), hx.ones(3, 3))


def test_chain_matmul_warns_and_multiplies():
    mats = [arr(2, 3), arr(3, 4), arr(4, 2)]
    with pytest.warns(UserWarning, match="deprecated"):
        got = hx.chain_matmul(*[hx.tensor(a) for a in mats])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.chain_matmul(*[torch.tensor(a) for a in mats])
        one = torch.chain_matmul(torch.tensor(mats[0]))
        hone = hx.chain_matmul(hx.tensor(mats[0]))
    same(got, want)
    same(hone, one)


# -- elementwise entries -------------------------------------------------------------------
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0]


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_take_the_number_beside_nan(name):
    a = np.array([x for x in SPECIALS for _ in SPECIALS])
    b = np.array([y for _ in SPECIALS for y in SPECIALS])
    (ha, ta), (hb, tb) = both(a, "float32"), both(b, "float32")
    same(getattr(hx, name)(ha, hb), getattr(torch, name)(ta, tb))
    (hi, ti) = both(np.array([1, 5, -3]), "int32")
    same(getattr(hx, name)(hi, hi.flip(0)), getattr(torch, name)(ti, ti.flip(0)))
    same(getattr(hx, name)(hi, 2), getattr(torch, name)(ti, torch.tensor(2)))
    assert not hasattr(torch.Tensor, name + "_") and not hasattr(hx.Tensor, name + "_")


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_gradients_send_ties_to_input(name):
    a = np.array([1.0, 2.0, np.nan, 3.0, np.nan, 0.5])
    b = np.array([1.0, 1.0, 2.0, np.nan, np.nan, 0.7])
    grads_match(getattr(hx, name), getattr(torch, name), a, b[None].repeat(2, 0))


def test_logaddexp2_values_and_gradients():
    a = np.array([0.0, 1.0, -np.inf, np.inf, 1000.0, -3.0, 5.0])
    b = np.array([0.0, 3.0, -np.inf, 1.0, 1000.0, 40.0, -np.inf])
    (ha, ta), (hb, tb) = both(a), both(b)
    same(hx.logaddexp2(ha, hb), torch.logaddexp2(ta, tb))
    grads_match(hx.logaddexp2, torch.logaddexp2, arr(3, 4), arr(4))
    with pytest.raises(TypeError):
        hx.logaddexp2(hx.ones(2, dtype="int32"), hx.ones(2, dtype="int32"))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_nextafter_steps_one_ulp_in_the_inputs_dtype(dtype):
    a = np.array([1.0, 1.0, 0.0, 0.0, -2.5, np.inf, np.nan, 3.0, 65504.0])
    b = np.array([2.0, 0.0, 1.0, -1.0, -3.0, 0.0, 1.0, 3.0, np.inf])
    (ha, ta), (hb, tb) = both(a, dtype), both(b, dtype)
    got, want = hx.nextafter(ha, hb), torch.nextafter(ta, tb)
    assert got.dtype.name == dtype
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    grads_match(hx.nextafter, torch.nextafter, arr(3), arr(3))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool", "uint8"])
@pytest.mark.parametrize("name", ["frac", "deg2rad", "rad2deg", "sgn"])
def test_unary_entries_match_pytorch_dtypes(name, dtype):
    a = np.array([-2.75, -1.0, -0.25, 0.0, 0.5, 3.0, 7.5])
    if dtype == "bool":
        a = a > 0
    elif not dtype.startswith("float"):
        a = np.abs(a).astype(int) if dtype == "uint8" else a.astype(int)
    h, t = both(a, dtype)
    try:
        want = getattr(torch, name)(t)
    except RuntimeError:
        with pytest.raises((TypeError, RuntimeError)):
            getattr(hx, name)(h)
        return
    same(getattr(hx, name)(h), want, 1e-6)
    same(getattr(h, name)(), getattr(t, name)(), 1e-6)


@pytest.mark.parametrize("name", ["frac", "deg2rad", "rad2deg", "sgn"])
def test_unary_entries_gradients_and_in_place(name):
    grads_match(getattr(hx, name), getattr(torch, name), arr(3, 4) * 3)
    h, t = both(arr(2, 3) * 3)
    getattr(h, name + "_")()
    getattr(t, name + "_")()
    same(h, t)
    z = both(np.array(2.5))
    same(getattr(hx, name)(z[0]), getattr(torch, name)(z[1]))


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_incomplete_gamma_matches_pytorch(name):
    a = np.concatenate([np.abs(arr(200)) * 4 + 1e-3, [0.5, 60.0, 700.0, 3.0, 0.01, 1.0]])
    x = np.concatenate([np.abs(arr(200)) * 6, [1e-6, 55.0, 720.0, 40.0, 30.0, 1.0]])
    (ha, ta), (hx_, tx) = both(a), both(x)
    same(getattr(hx, name)(ha, hx_), getattr(torch, name)(ta, tx), 1e-9)
    edges_a = np.array([0.0, 0.0, 1.0, -1.0, 2.0, np.inf, np.inf, 2.0, np.nan, 1.0])
    edges_x = np.array([0.0, 1.0, 0.0, 1.0, -1.0, 1.0, np.inf, np.inf, 1.0, np.nan])
    (ea, tea), (ex, tex) = both(edges_a), both(edges_x)
    same(getattr(hx, name)(ea, ex), getattr(torch, name)(tea, tex))
    for dtype in ("float32", "float16", "bfloat16"):
        (la, lta), (lx, ltx) = both(a[:20], dtype), both(x[:20], dtype)
        same(getattr(hx, name)(la, lx), getattr(torch, name)(lta, ltx),
             {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1e-2}[dtype])
    with pytest.raises(TypeError):
        getattr(hx, name)(hx.ones(2, dtype="int32"), hx.ones(2, dtype="int32"))


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_incomplete_gamma_gradient_is_in_other_alone(name):
    a = np.abs(arr(3, 4)) + 0.3
    grads_match(lambda x: getattr(hx, name)(hx.tensor(a), x),
                lambda x: getattr(torch, name)(torch.tensor(a), x), np.abs(arr(3, 4)) + 0.1)
    shape = hx.tensor(a, requires_grad=True)
    with pytest.raises(NotImplementedError, match="not implemented"):
        getattr(hx, name)(shape, hx.ones(3, 4, dtype="float64")).sum().backward()
    special = {"igamma": hx.special.gammainc, "igammac": hx.special.gammaincc}[name]
    assert special is getattr(hx, name)
    h, t = both(a)
    getattr(h, name + "_")(h * 2)
    getattr(t, name + "_")(t * 2)
    same(h, t)


# -- writes into copies ----------------------------------------------------------------------
def test_take_reads_the_flat_input_with_negative_indices():
    x = arr(3, 4)
    h, t = both(x)
    idx = [[0, -1, 5], [11, -12, 3]]
    same(hx.take(h, hx.tensor(idx)), torch.take(t, torch.tensor(idx)))
    same(h.mT.take(hx.tensor(idx)), t.mT.take(torch.tensor(idx)))  # (row-major of the view)
    same(hx.take(h, hx.tensor(2)), torch.take(t, torch.tensor(2)))
    same(hx.take(h, hx.zeros(0, dtype="int64")), torch.take(t, torch.zeros(0, dtype=torch.long)))
    grads_match(lambda v: hx.take(v, hx.tensor(idx + [[0, 0, 0]])),
                lambda v: torch.take(v, torch.tensor(idx + [[0, 0, 0]])), x)
    with pytest.raises(IndexError, match="out of range"):
        hx.take(h, hx.tensor([12]))


@pytest.mark.parametrize("accumulate", [False, True])
def test_put_writes_or_adds_at_flat_positions(accumulate):
    x, src = arr(2, 3), arr(4)
    idx = [1, -1, 4, 1] if accumulate else [1, -1, 4, 0]
    grads_match(lambda a, s: hx.put(a, hx.tensor(idx), s, accumulate),
                lambda a, s: torch.put(a, torch.tensor(idx), s, accumulate), x, src)
    h, t = both(x)
    (hs, ts) = both(src)
    assert h.put_(hx.tensor(idx), hs, accumulate=accumulate) is h
    t.put_(torch.tensor(idx), ts, accumulate=accumulate)
    same(h, t)
    with pytest.raises(TypeError, match="dtype"):
        hx.put(hx.zeros(3), hx.tensor([0]), hx.tensor([1]))
    with pytest.raises(IndexError):
        hx.put(hx.zeros(3), hx.tensor([0, 1]), hx.zeros(3))


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_with_tuples_of_index_tensors(accumulate):
    x = arr(3, 4, 2)
    cases = [
        ((hx.tensor([0, 2, 1]), hx.tensor([3, 0, 1])), (torch.tensor([0, 2, 1]),
                                                      torch.tensor([3, 0, 1])), (3, 2)),
        ((hx.tensor([[0], [2]]), hx.tensor([1, 3])), (torch.tensor([[0], [2]]),
                                                    torch.tensor([1, 3])), (1, 2)),
        ((hx.tensor([True, False, True]),), (torch.tensor([True, False, True]),), (4, 2)),
        ((hx.tensor([-1]),), (torch.tensor([-1]),), ()),
    ]
    for hidx, tidx, vshape in cases:
        v = arr(*vshape) if vshape else np.array(0.75)
        grads_match(lambda a, s, i=hidx: hx.index_put(a, i, s, accumulate),
                    lambda a, s, i=tidx: torch.index_put(a, i, s, accumulate), x, v)
    if accumulate:  # (repeated positions add up)
        grads_match(lambda a, s: a.index_put((hx.tensor([0, 0, 2]),), s, accumulate=True),
                    lambda a, s: a.index_put((torch.tensor([0, 0, 2]),), s, accumulate=True),
                    x, arr(3, 4, 2))
    h, t = both(x)
    hx.index_put_(h, (hx.tensor([1]),), hx.tensor(2.0, dtype="float64"), accumulate)
    torch.index_put_(t, (torch.tensor([1]),), torch.tensor(2.0, dtype=torch.float64),
                     accumulate)
    same(h, t)


def test_index_put_errors_name_the_op():
    x = hx.zeros(2, 3)
    with pytest.raises(TypeError, match="index_put.*dtype"):
        x.index_put((hx.tensor([0]),), hx.tensor([1, 2, 3]))
    with pytest.raises(IndexError, match="out of bounds"):
        x.index_put((hx.tensor([2]),), hx.tensor(1.0))
    with pytest.raises(TypeError, match="tuple"):
        x.index_put(hx.tensor([0]), hx.tensor(1.0))
    with pytest.raises(IndexError, match="too many"):
        x.index_put((hx.tensor([0]),) * 3, hx.tensor(1.0))


def test_masked_scatter_fills_in_order_and_broadcasts():
    x, src = arr(2, 3), arr(8)
    mask = [True, False, True]
    grads_match(lambda a, s: hx.masked_scatter(a, hx.tensor(mask), s),
                lambda a, s: torch.masked_scatter(a, torch.tensor(mask), s), x, src)
    grads_match(lambda a, s: hx.masked_scatter(a, hx.tensor([[True], [False]]), s),
                lambda a, s: torch.masked_scatter(a, torch.tensor([[True], [False]]), s),
                arr(3), src)
    h, t = both(x)
    (hs, ts) = both(src)
    h.masked_scatter_(hx.tensor(mask), hs)
    t.masked_scatter_(torch.tensor(mask), ts)
    same(h, t)
    with pytest.raises(RuntimeError, match="fewer"):
        hx.masked_scatter(hx.zeros(3), hx.tensor([True, True, False]), hx.zeros(1))
    with pytest.raises(TypeError, match="boolean"):
        hx.masked_scatter(hx.zeros(3), hx.tensor([1, 0, 1]), hx.zeros(3))


@pytest.mark.parametrize("name,src_shape,args", [
    ("slice_scatter", (3, 2), (1, 1, None, 2)),
    ("slice_scatter", (1, 5), (0, -1, None, 1)),
    ("slice_scatter", (3, 0), (1, 5, 9, 1)),
    ("select_scatter", (5,), (0, -1)),
    ("select_scatter", (3,), (1, 2)),
    ("diagonal_scatter", (3,), (0,)),
    ("diagonal_scatter", (3,), (-1, 1, 0)),
    ("diagonal_scatter", (2,), (3,)),
])
def test_view_scatters_match_pytorch(name, src_shape, args):
    grads_match(lambda a, s: getattr(hx, name)(a, s, *args),
                lambda a, s: getattr(torch, name)(a, s, *args), arr(3, 5), arr(*src_shape))


def test_view_scatters_cast_src_and_check_its_shape():
    h, t = both(np.zeros((3, 4)), "float32")
    same(hx.slice_scatter(h, hx.ones(3, 2, dtype="float64"), 1, 0, 2),
         torch.slice_scatter(t, torch.ones(3, 2, dtype=torch.float64), 1, 0, 2))
    same(hx.select_scatter(h.bool(), hx.ones(4, dtype="int64"), 0, 1),
         torch.select_scatter(t.bool(), torch.ones(4, dtype=torch.int64), 0, 1))
    with pytest.raises(RuntimeError, match="shape"):
        hx.slice_scatter(h, hx.ones(3, 1), 1, 0, 2)
    with pytest.raises(IndexError):
        hx.select_scatter(h, hx.ones(4), 0, 3)
    same(hx.slice_scatter(h.mT, hx.ones(2, 3), 0, 1, 3),
         torch.slice_scatter(t.mT, torch.ones(2, 3), 0, 1, 3))


# -- shape ops ---------------------------------------------------------------------------------
def test_flips_and_diagflat():
    x = arr(3, 4, 2)
    grads_match(hx.fliplr, torch.fliplr, x)
    grads_match(lambda v: v.flipud(), lambda v: v.flipud(), x)
    with pytest.raises(RuntimeError, match=">= 2-d"):
        hx.fliplr(hx.ones(3))
    with pytest.raises(RuntimeError, match=">= 1-d"):
        hx.flipud(hx.tensor(1.0))
    for offset in (0, 2, -1):
        grads_match(lambda v, k=offset: hx.diagflat(v, k),
                    lambda v, k=offset: torch.diagflat(v, k), arr(2, 2))
    same(hx.diagflat(hx.tensor(3.0)), torch.diagflat(torch.tensor(3.0)))


def test_split_with_sizes():
    x = arr(4, 6)
    h, t = both(x)
    for got, want in zip(hx.split_with_sizes(h, [2, 0, 4], 1), t.split_with_sizes([2, 0, 4], 1)):
        same(got, want)
    assert isinstance(h.split_with_sizes([1, 3]), list)
    with pytest.raises(RuntimeError, match="sum exactly to 4"):
        h.split_with_sizes([2, 1])


def test_sum_to_size():
    x = arr(2, 3, 4)
    for size in ((1, 3, 1), (4,), (3, 4), (2, 3, 4), ((1, 4),)):
        grads_match(lambda v, s=size: v.sum_to_size(*s), lambda v, s=size: v.sum_to_size(*s), x)
    h, t = both(np.arange(6).reshape(2, 3), "int32")
    same(h.sum_to_size(1, 3), t.sum_to_size(1, 3))
    with pytest.raises(RuntimeError, match="not expandable"):
        hx.ones(2, 3).sum_to_size(4, 3)


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_unique_consecutive(dim):
    a = np.array([[1, 1, 2], [1, 1, 2], [3, 1, 2], [3, 1, 2], [1, 1, 2]])
    h, t = both(a, "int64")
    for inverse in (False, True):
        for counts in (False, True):
            got = hx.unique_consecutive(h, inverse, counts, dim)
            want = torch.unique_consecutive(t, return_inverse=inverse, return_counts=counts,
                                            dim=dim)
            if not (inverse or counts):
                got, want = (got,), (want,)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                same(g, w)
    n = np.array([np.nan, np.nan, 1.0, 1.0])
    same(hx.unique_consecutive(both(n)[0]), torch.unique_consecutive(both(n)[1]))
    for shape in ((0,), (0, 3)):
        got = hx.unique_consecutive(hx.zeros(*shape), return_counts=True)
        want = torch.unique_consecutive(torch.zeros(*shape), return_counts=True)
        same(got[0], want[0])
        same(got[1], want[1])


# -- linear algebra's older names -------------------------------------------------------------
def _spd(n, batch=()):
    a = RNG.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_and_inverse_with_batches(upper):
    a = _spd(3, (2,))
    factor = np.linalg.cholesky(a)
    if upper:
        factor = np.swapaxes(factor, -1, -2)
    b = arr(3, 2)  # (broadcast over the factor's batch)
    grads_match(lambda rhs, f: hx.cholesky_solve(rhs, f, upper),
                lambda rhs, f: torch.cholesky_solve(rhs, f, upper), b, factor)
    grads_match(lambda f: hx.cholesky_inverse(f, upper=upper),
                lambda f: torch.cholesky_inverse(f, upper=upper), factor[0])
    grads_match(lambda f: f.cholesky_inverse(upper), lambda f: f.cholesky_inverse(upper), factor)
    with pytest.raises(RuntimeError, match="sizes"):
        hx.cholesky_solve(hx.ones(2, 1), hx.eye(3))


def test_deprecated_norms_trapz_and_removed_matrix_rank():
    x = arr(2, 3, 4)
    h, t = both(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [(hx.frobenius_norm(h, (1, 2)), torch.frobenius_norm(t, (1, 2))),
                 (hx.frobenius_norm(h, 0, True), torch.frobenius_norm(t, 0, True)),
                 (hx.nuclear_norm(h[0]), torch.nuclear_norm(t[0])),
                 (hx.nuclear_norm(h[0], True), torch.nuclear_norm(t[0], True)),
                 (hx.nuclear_norm(h, (0, 2)), torch.nuclear_norm(t, (0, 2))),
                 (hx.nuclear_norm(h, (1, 2), keepdim=True),
                  torch.nuclear_norm(t, (1, 2), keepdim=True))]
    for got, want in cases:
        same(got, want, 1e-10)
    with pytest.warns(UserWarning, match="deprecated"):
        hx.frobenius_norm(h, (0, 1))
    same(hx.trapz(h), torch.trapz(t))
    same(hx.trapz(h, dx=0.5, dim=0), torch.trapz(t, dx=0.5, dim=0))
    same(hx.trapz(h, h.cumsum(-1)), torch.trapz(t, t.cumsum(-1)))
    with pytest.raises(RuntimeError, match="removed"):
        torch.matrix_rank(t[0])
    with pytest.raises(RuntimeError, match="linalg.matrix_rank"):
        hx.matrix_rank(h[0])


def _same_histograms(got, want):
    tol = 1e-6 if got.hist.dtype is hx.float32 else 1e-12  # (float32 edges: one ulp)
    same(got.hist, want.hist, tol)
    assert len(got.bin_edges) == len(want.bin_edges)
    for g, w in zip(got.bin_edges, want.bin_edges):
        same(g, w, tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_histogramdd_matches_pytorch(dtype):
    x = arr(30, 2)
    x[0] = [np.nan, 0.0]  # (not counted)
    h, t = both(x, dtype)
    hw, tw = both(RNG.random(30), dtype)
    edges = [np.array([-1.0, 0.0, 2.0]), np.array([-3.0, 0.5, 1.0, 3.0])]
    cases = [((h[1:], [3, 4]), (t[1:], [3, 4]), {}),
             ((h, 3), (t, 3), {"range": [0.0, 1.0, -1.0, 1.0], "density": True}),
             ((h, [2, 5]), (t, [2, 5]), {"range": [-1.0, 1.0, -2.0, 2.0], "weight": None}),
             ((h, [hx.tensor(e, dtype=dtype) for e in edges]),
              (t, [torch.tensor(e, dtype=getattr(torch, dtype)) for e in edges]), {})]
    for hargs, targs, kw in cases:
        _same_histograms(hx.histogramdd(*hargs, **kw), torch.histogramdd(*targs, **kw))
    _same_histograms(hx.histogramdd(h[1:], [2, 5], weight=hw[1:]),
                     torch.histogramdd(t[1:], [2, 5], weight=tw[1:]))
    x3 = arr(2, 5, 3)
    h3, t3 = both(x3, dtype)
    _same_histograms(hx.histogramdd(h3.mT.mT, 2), torch.histogramdd(t3, 2))
    _same_histograms(hx.histogramdd(h3[:, :0], 2), torch.histogramdd(t3[:, :0], 2))
    with pytest.raises(RuntimeError, match="at least 2"):
        hx.histogramdd(h[:, 0], 3)
    with pytest.raises(RuntimeError, match="expected 2"):
        hx.histogramdd(h, [2, 2, 2])


# -- signal windows ------------------------------------------------------------------------------
WINDOWS = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window"]


@pytest.mark.parametrize("name", WINDOWS)
@pytest.mark.parametrize("length", [0, 1, 2, 5, 16])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_pytorch(name, length, periodic):
    same(getattr(hx, name)(length, periodic, dtype=hx.float64),
         getattr(torch, name)(length, periodic, dtype=torch.float64), 1e-12)
    same(getattr(hx, name)(length, periodic=periodic),
         getattr(torch, name)(length, periodic=periodic), 1e-6)


def test_window_options():
    same(hx.hamming_window(7, False, 0.5, 0.4), torch.hamming_window(7, False, 0.5, 0.4),
         1e-6)
    same(hx.kaiser_window(9, False, 3.0), torch.kaiser_window(9, False, 3.0), 1e-6)
    # (rounded once from float64: within one bfloat16 step of PyTorch's, which computes
    # in bfloat16)
    same(hx.hann_window(4, dtype=hx.bfloat16), torch.hann_window(4, dtype=torch.bfloat16),
         8e-3)
    w = hx.blackman_window(5, requires_grad=True)
    assert w.requires_grad and w.is_leaf
    with pytest.raises(TypeError, match="floating point"):
        hx.hann_window(3, dtype=hx.int64)
    with pytest.raises(RuntimeError, match="non-negative"):
        hx.bartlett_window(-1)


@pytest.mark.parametrize("name", WINDOWS)
def test_window_signatures_are_pytorchs(name):
    doc = getattr(torch, name).__doc__.strip().split("\n", 1)[0]
    want = doc[len(name):doc.rindex(") ->") + 1]
    if name == "hamming_window":  # (its docstring's line is the overload without options)
        want = ("(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, "
                "layout=None, device=None, pin_memory=False, requires_grad=False)")
    got = str(inspect.signature(getattr(hx, name)))
    assert got == want.replace("layout=torch.strided", "layout=None")


# -- Tensor in-place forms ----------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda t: t.unsqueeze_(1), lambda t: t.unsqueeze_(-1), lambda t: t[:1].squeeze_(),
    lambda t: t[:, :1].squeeze_(1), lambda t: t.t_(), lambda t: t.transpose_(0, 1),
    lambda t: t[None].squeeze_((0,)),
])
def test_view_ops_in_place_change_the_tensors_own_layout(call):
    x = arr(3, 4)
    h, t = both(x)
    hv, tv = call(h), call(t)
    assert tuple(hv.shape) == tuple(tv.shape) and tuple(hv.stride()) == tuple(tv.stride())
    same(hv, tv)
    # (recorded as the view it is: gradients flow back through it)
    grads_match(lambda v: call(v * 2) * 3, lambda v: call(v * 2) * 3, x)


def test_view_ops_in_place_refuse_a_leaf_that_requires_grad():
    leaf = hx.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.unsqueeze_(0)
    with hx.no_grad():
        leaf.unsqueeze_(0)
    assert leaf.shape == (1, 2, 3)
    with pytest.raises(RuntimeError):
        hx.ones(2, 3, 4).t_()
    y = hx.ones(2, 3)
    v = y.view(3, 2)
    v.unsqueeze_(0)
    assert y.shape == (2, 3) and v.shape == (1, 3, 2)
    v.fill_(5.0)  # (still a view of y's memory)
    assert y.numpy().tolist() == [[5.0] * 3] * 2


@pytest.mark.parametrize("name,args", [("cumsum_", (1,)), ("cumprod_", (0,)),
                                       ("tril_", ()), ("tril_", (-1,)), ("triu_", (1,))])
def test_scans_and_triangles_in_place(name, args):
    x = arr(3, 4)
    h, t = both(x)
    assert getattr(h, name)(*args) is h
    getattr(t, name)(*args)
    same(h, t)
    hi, ti = both(np.arange(12).reshape(3, 4) % 5 - 2, "int32")
    getattr(hi, name)(*args)
    getattr(ti, name)(*args)
    same(hi, ti)
    grads_match(lambda v: getattr(v * 1, name)(*args), lambda v: getattr(v * 1, name)(*args),
                x)


def test_cumsum_in_place_refuses_another_dtype():
    with pytest.raises(RuntimeError, match="dtype"):
        hx.tensor([1, 2], dtype="int32").cumsum_(0, dtype=hx.float32)
    h = hx.tensor([1.0, 2.0])
    h.cumsum_(0, dtype=hx.float32)
    assert h.tolist() == [1.0, 3.0]


@pytest.mark.parametrize("name", ["eq_", "ne_", "lt_", "le_", "gt_", "ge_", "logical_and_",
                                  "logical_or_", "logical_xor_"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_comparisons_in_place_write_in_the_tensors_dtype(name, dtype):
    a = np.array([[0, 1, 2], [2, -1, 0]])
    b = np.array([0, 2, 2])
    if dtype == "bool":
        a, b = a > 0, b > 0
    h, t = both(a, dtype)
    (hb, tb) = both(b, dtype)
    try:
        getattr(t, name)(tb)
    except RuntimeError:
        with pytest.raises((RuntimeError, TypeError)):
            getattr(h, name)(hb)
        return
    assert getattr(h, name)(hb) is h
    same(h, t)
    if name.startswith("logical"):
        return  # (PyTorch's logical ops take a tensor alone; Haelixe's take numbers too)
    h2, t2 = both(a, dtype)
    getattr(h2, name)(1)
    getattr(t2, name)(1)
    same(h2, t2)


def test_logical_not_in_place():
    for dtype in ("float32", "int64", "bool"):
        h, t = both(np.array([0, 1, 3]) if dtype != "bool" else np.array([True, False]), dtype)
        h.logical_not_()
        t.logical_not_()
        same(h, t)


# -- the GPU, where the ops compose from ops it has ---------------------------------------------
@pytest.mark.gpu
def test_compositions_on_the_gpu_equal_the_cpu(be):
    x = arr(3, 4).astype(np.float32)
    calls = [
        lambda m: hx.addmm(m[0, :3], m, m.mT, beta=0.5, alpha=2),
        lambda m: hx.addcdiv(m, m.flip(0), m * m + 1, value=2),
        lambda m: hx.renorm(m, 2, 0, 1.0),
        lambda m: hx.fmax(m, m.flip(1)) + hx.logaddexp2(m, m.flip(0)) + hx.frac(m * 3),
        lambda m: hx.nextafter(m, m.flip(0)) - m,
        lambda m: hx.igamma(m.abs() + 0.5, m.flip(0).abs() * 3)
        + hx.igammac(m.abs() * 4 + 0.5, m.flip(1).abs() + 0.25),
        lambda m: hx.index_put(m, (hx.tensor([0, 2], device=m.device),), m[1],
                               accumulate=True),
        lambda m: hx.diagonal_scatter(m, m[0, :3], 1) + hx.take(m, hx.tensor(
            [[1, -1]] * 4, device=m.device)).sum(),
        lambda m: hx.masked_scatter(m, m > 0, m.flip(0)),
    ]
    for call in calls:
        cpu = call(hx.tensor(x))
        gpu = call(hx.tensor(x, device="gpu"))
        assert gpu.device.type == "gpu"
        np.testing.assert_allclose(gpu.cpu().numpy(), cpu.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,wrap", [((5, 3), True), ((5, 3), False), ((3, 5), True),
                                        ((3, 3, 3), False), ((1, 1), False), ((0, 0), False)])
def test_fill_diagonal_in_place(shape, wrap):
    x = arr(*shape)
    h, t = both(x)
    assert h.fill_diagonal_(2.5, wrap=wrap) is h
    same(h, t.fill_diagonal_(2.5, wrap=wrap))
    hi, ti = both(np.zeros(shape), "int32")
    same(hi.fill_diagonal_(2.7, wrap), ti.fill_diagonal_(2.7, wrap))
    grads_match(lambda v: (v * 2).fill_diagonal_(0.5, wrap=wrap),
                lambda v: (v * 2).fill_diagonal_(0.5, wrap=wrap), x)


def test_fill_diagonal_refuses_what_pytorch_refuses():
    with pytest.raises(RuntimeError, match="equal length"):
        hx.zeros(2, 3, 3).fill_diagonal_(1.0)
    with pytest.raises(RuntimeError, match="larger than 1"):
        hx.zeros(3).fill_diagonal_(1.0)
    with pytest.raises(RuntimeError, match="leaf"):
        hx.zeros(2, 2, requires_grad=True).fill_diagonal_(1.0)


def test_as_strided_in_place_takes_the_new_layout():
    h, t = both(np.arange(12.0).reshape(3, 4))
    h, t = h * 1, t * 1
    h.as_strided_((2, 2), (1, 4), 1)
    t.as_strided_((2, 2), (1, 4), 1)
    same(h, t)
    assert tuple(h.stride()) == tuple(t.stride()) == (1, 4)
    grads_match(lambda v: (v * 3).as_strided_((2, 3), (1, 2)) * 2,
                lambda v: (v * 3).as_strided_((2, 3), (1, 2)) * 2, arr(2, 3))
