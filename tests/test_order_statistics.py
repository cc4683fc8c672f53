"""median, nanmedian, kthvalue, mode, quantile and nanquantile against PyTorch: values and
indices over float32, float64 and int64, on 0-d, 0-size, transposed and flipped inputs,
keepdim and negative dims; NaNs and ties; float64 gradients (gradcheck, and PyTorch's on
a transposed view); the errors, each naming its op; the GPU against the CPU.

Indices are compared with PyTorch's only where they are well defined: on inputs without
ties (among tied values PyTorch's CPU kernels return whichever element their unstable
selection leaves in place; Haelixe's take the stable order's), and, for mode, on slices
of at most 16 (PyTorch's sort is an insertion sort there, so its index is the last
occurrence, as Haelixe's always is) where no NaN ties with a number's count (PyTorch's
sort leaves NaNs unordered).
"""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

NAN = float("nan")

#: op -> (haelixe, PyTorch) calls of (input, dim, keepdim) giving (values, indices)
SELECTIONS = {
    "median": (lambda x, d, k: hx.median(x, d, k), lambda x, d, k: torch.median(x, d, k)),
    "nanmedian": (lambda x, d, k: x.nanmedian(d, keepdim=k),
                  lambda x, d, k: x.nanmedian(d, keepdim=k)),
    "kthvalue": (lambda x, d, k: hx.kthvalue(x, 2, d, k),
                 lambda x, d, k: torch.kthvalue(x, 2, d, k)),
    "mode": (lambda x, d, k: x.mode(d, k), lambda x, d, k: x.mode(d, k)),
}
SHAPES_DIMS = [((5,), 0), ((3, 4), 1), ((3, 4), -2), ((2, 3, 4), 1), ((2, 3, 4), -1)]


def _distinct(shape, dtype, seed=0):
    """Values without ties (indices are then unambiguous), negative ones among them."""
    n = int(np.prod(shape, dtype=int))
    a = np.random.default_rng(seed).permutation(n).reshape(shape) - n // 2
    return a.astype(np.int64) if dtype == "int64" else a * 0.37


def _both(a, dtype):
    return (hx.tensor(a, dtype=getattr(hx, dtype)),
            torch.tensor(np.asarray(a), dtype=getattr(torch, dtype)))


def _numpy(t):
    """A result (Haelixe's or PyTorch's) as numpy; float16 and bfloat16 widened, exactly."""
    t = t.detach().cpu()
    return (t.float() if str(t.dtype).split(".")[-1] in ("float16", "bfloat16") else t).numpy()


def _same(got, want, rtol=0.0):
    """The same shape, dtype and values (NaNs where PyTorch has them); exactly, unless
    ``rtol``."""
    assert tuple(got.shape) == tuple(want.shape), (got.shape, want.shape)
    assert got.dtype.name == str(want.dtype).replace("torch.", "")
    if rtol:
        np.testing.assert_allclose(_numpy(got), _numpy(want), rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(_numpy(got), _numpy(want))


def _same_pair(got, want):
    _same(got.values, want.values)
    _same(got.indices, want.indices)
    assert not got.indices.requires_grad


# -- the selections: values and indices ---------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_selection_matches_pytorch_over_shapes_dims_and_keepdim(name, dtype):
    fh, ft = SELECTIONS[name]
    for shape, dim in SHAPES_DIMS:
        x, t = _both(_distinct(shape, dtype), dtype)
        for keepdim in (False, True):
            got, want = fh(x, dim, keepdim), ft(t, dim, keepdim)
            assert type(got).__name__ in ("Median", "NanMedian", "KthValue", "Mode")
            assert got._fields == ("values", "indices")
            _same_pair(got, want)


@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_selection_matches_pytorch_on_transposed_and_flipped_inputs(name):
    fh, ft = SELECTIONS[name]
    x, t = _both(_distinct((4, 5), "float64", 1), "float64")
    for view in (lambda v: v.transpose(0, 1), lambda v: v.flip(1), lambda v: v.t()[1:, ::2]):
        for dim in (0, 1, -1):
            _same_pair(fh(view(x), dim, False), ft(view(t), dim, False))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "uint8", "int8", "int16", "int32"])
def test_selections_take_the_other_dtypes_pytorch_takes(dtype):
    a = np.random.default_rng(2).permutation(12).reshape(3, 4)  # (exact in every dtype)
    x, t = _both(a, dtype)
    for fh, ft in SELECTIONS.values():
        _same_pair(fh(x, 1, False), ft(t, 1, False))
    _same(hx.median(x), torch.median(t))
    _same(x.mode(0).values, t.mode(0).values)


def test_mode_is_the_least_of_the_most_frequent_at_its_last_occurrence():
    rows = [[5, 1, 5, 1, 1, 5], [3, 3, 1, 1, 2, 0], [2, 2, 2, 2, 2, 2], [0, 4, 4, 0, 7, 7]]
    for dtype in ("int64", "float32"):
        x, t = _both(np.array(rows), dtype)
        _same_pair(x.mode(), t.mode())
        _same_pair(x.mode(0, True), t.mode(0, True))
    x, t = _both(np.array([[True, False, True], [False, False, True]]), "bool")
    _same_pair(x.mode(1), t.mode(1))
    # (-0.0 equals 0.0: one run, the value the last occurrence's)
    _same_pair(hx.tensor([0.0, -0.0, -0.0]).mode(), torch.tensor([0.0, -0.0, -0.0]).mode())
    # slices of up to 16, with ties: PyTorch's index is the last occurrence there
    g = np.random.default_rng(3)
    for n in (1, 2, 7, 16):
        a = g.integers(0, 3, (6, n))
        _same_pair(hx.tensor(a).mode(1), torch.tensor(a).mode(1))
    a = g.integers(0, 4, (3, 300))  # (longer slices: the values)
    _same(hx.tensor(a).mode(1).values, torch.tensor(a).mode(1).values)


def test_ties_give_pytorchs_values():
    g = np.random.default_rng(4)
    a = g.integers(-3, 4, (5, 9))  # (many ties: PyTorch's indices are its selection's)
    x, t = _both(a, "int64")
    for dim in (0, 1):
        _same(x.median(dim).values, t.median(dim).values)
        _same(x.nanmedian(dim).values, t.nanmedian(dim).values)
        for k in (1, 3, a.shape[dim]):
            _same(x.kthvalue(k, dim).values, t.kthvalue(k, dim).values)
    _same(x.median(), t.median())
    even = hx.tensor([4.0, 1.0, 3.0, 2.0])
    assert even.median().item() == 2.0  # (the lower of the two middle values)


# -- full reductions, 0-d and 0-size ------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_median_of_every_element_is_a_0d_tensor(dtype):
    for shape in [(), (1,), (6,), (3, 4), (2, 3, 2)]:
        a = _distinct(shape, dtype, 5) if shape else np.array(3, dtype=dtype)
        x, t = _both(a, dtype)
        _same(hx.median(x), torch.median(t))
        if x.ndim:  # (and through a transposed view)
            x, t = x.transpose(0, -1), t.transpose(0, -1)
        _same(x.nanmedian(), t.nanmedian())


@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3)])
def test_median_of_an_empty_float_tensor_is_nan(shape):
    for dtype in ("float32", "float64"):
        x, t = _both(np.zeros(shape), dtype)
        _same(hx.median(x), torch.median(t))
        _same(hx.nanmedian(x), torch.nanmedian(t))


def test_0d_inputs_take_dim_0_and_minus_1():
    x, t = _both(np.array(2.5), "float64")
    for dim in (0, -1):
        for keepdim in (False, True):
            for name, (fh, ft) in SELECTIONS.items():
                if name == "kthvalue":
                    got, want = hx.kthvalue(x, 1, dim, keepdim), torch.kthvalue(t, 1, dim, keepdim)
                else:
                    got, want = fh(x, dim, keepdim), ft(t, dim, keepdim)
                _same_pair(got, want)
            _same(hx.quantile(x, 0.3, dim, keepdim), torch.quantile(t, 0.3, dim, keepdim))
    q = (hx.tensor([0.2, 0.9], dtype=hx.float64), torch.tensor([0.2, 0.9], dtype=torch.float64))
    _same(hx.quantile(x, q[0], 0, True), torch.quantile(t, q[1], 0, True))
    _same(hx.nanquantile(x, q[0], keepdim=True), torch.nanquantile(t, q[1], keepdim=True))


def test_an_empty_other_dim_gives_empty_results():
    x, t = _both(np.zeros((0, 3)), "float64")
    for fh, ft in SELECTIONS.values():
        for keepdim in (False, True):
            _same_pair(fh(x, -1, keepdim), ft(t, -1, keepdim))


# -- NaNs ---------------------------------------------------------------------------------------
def test_median_is_the_first_nan_and_nanmedian_leaves_nans_out():
    a = np.array([[1.0, NAN, 3.0, NAN, 2.0], [NAN, 4.0, 0.5, 9.0, 1.5],
                  [3.0, 2.0, 1.0, 5.0, 4.0], [7.0, NAN, NAN, NAN, 8.0]])
    x, t = _both(a, "float64")
    for dim in (1, -1):
        _same_pair(x.median(dim), t.median(dim))
        _same_pair(x.nanmedian(dim), t.nanmedian(dim))
    _same_pair(x.t().median(0, True), t.t().median(0, True))
    _same(x.median(), t.median())
    _same(x.nanmedian(), t.nanmedian())
    # an all-NaN slice: nan (PyTorch's index there is its selection's: values only)
    y, u = _both(np.array([[NAN, NAN, NAN], [1.0, NAN, 2.0]]), "float32")
    _same(y.nanmedian(1).values, u.nanmedian(1).values)
    _same(y[0].nanmedian(), u[0].nanmedian())


def test_kthvalue_counts_nans_as_the_largest_in_their_order():
    x, t = _both(np.array([3.0, NAN, 1.0, NAN, -2.0]), "float64")
    for k in range(1, 6):
        _same_pair(x.kthvalue(k), t.kthvalue(k))


def test_mode_counts_each_nan_once():
    # (where NaNs would tie with a number's count, PyTorch's sort leaves them unordered)
    for a in ([NAN, 1.0, 1.0, NAN, NAN], [2.0, 2.0, NAN], [NAN, 3.0, 3.0]):
        x, t = _both(np.array(a), "float64")
        _same_pair(x.mode(), t.mode())


def test_quantile_is_nan_where_a_slice_has_one_and_nanquantile_leaves_them_out():
    a = np.array([[1.0, NAN, 3.0, 0.5], [NAN, NAN, NAN, NAN], [4.0, 5.0, NAN, 2.0],
                  [1.0, 2.0, 3.0, 4.0]])
    x, t = _both(a, "float64")
    qs = (hx.tensor([0.0, 0.3, 0.5, 1.0], dtype=hx.float64),
          torch.tensor([0.0, 0.3, 0.5, 1.0], dtype=torch.float64))
    for how in ("linear", "lower", "higher", "midpoint", "nearest"):
        for op in ("quantile", "nanquantile"):
            _same(getattr(hx, op)(x, qs[0], 1, interpolation=how),
                  getattr(torch, op)(t, qs[1], 1, interpolation=how), 1e-12)
            _same(getattr(hx, op)(x, 0.4, interpolation=how),
                  getattr(torch, op)(t, 0.4, interpolation=how), 1e-12)


def test_quantile_of_infinities_is_pytorchs():
    # (PyTorch interpolates with its lerp, where -inf + 0 * inf and inf - inf are nan)
    inf = float("inf")
    x, t = _both(np.array([[1.0, inf], [-inf, inf], [inf, inf], [-inf, 0.0]]), "float64")
    q = [0.0, 0.5, 1.0]
    for how in ("linear", "midpoint", "lower"):
        _same(hx.quantile(x, hx.tensor(q, dtype=hx.float64), 1, interpolation=how),
              torch.quantile(t, torch.tensor(q, dtype=torch.float64), 1, interpolation=how))


# -- quantile -----------------------------------------------------------------------------------
INTERPOLATIONS = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("how", INTERPOLATIONS)
def test_quantile_matches_pytorch_over_q_dims_and_keepdim(how, dtype):
    a = np.random.default_rng(6).standard_normal((3, 4, 5))
    x, t = _both(a, dtype)
    tol = 2e-6 if dtype == "float32" else 1e-12
    q = [0.0, 0.1, 0.25, 1 / 3, 0.5, 0.9, 1.0]
    qs = [(0.37, 0.37), (1, 1),
          (hx.tensor(0.6, dtype=x.dtype), torch.tensor(0.6, dtype=t.dtype)),
          (hx.tensor(q, dtype=x.dtype), torch.tensor(q, dtype=t.dtype))]
    for qh, qt in qs:
        for dim in (None, 0, 1, -1):
            for keepdim in (False, True):
                for op in ("quantile", "nanquantile"):
                    got = getattr(hx, op)(x, qh, dim, keepdim, interpolation=how)
                    want = getattr(torch, op)(t, qt, dim, keepdim, interpolation=how)
                    _same(got, want, tol)
    _same(x.transpose(0, 2).quantile(0.7, 1, interpolation=how),
          t.transpose(0, 2).quantile(0.7, 1, interpolation=how), tol)


def test_nearest_rounds_half_ranks_to_even_as_pytorch():
    x, t = _both(np.arange(5.0), "float64")
    q = [0.125, 0.375, 0.625, 0.875]  # (ranks 0.5, 1.5, 2.5, 3.5)
    got = hx.quantile(x, hx.tensor(q, dtype=hx.float64), interpolation="nearest")
    _same(got, torch.quantile(t, torch.tensor(q, dtype=torch.float64),
                              interpolation="nearest"))
    assert got.tolist() == [0.0, 2.0, 2.0, 4.0]
    y, u = _both(np.random.default_rng(7).standard_normal(11), "float32")
    q = np.arange(0.05, 1.0, 0.1, dtype=np.float32)  # (float32 ranks near halves)
    _same(y.quantile(hx.tensor(q), interpolation="nearest"),
          u.quantile(torch.tensor(q), interpolation="nearest"))


def test_quantile_takes_an_empty_q():
    x, t = _both(np.arange(6.0).reshape(2, 3), "float32")
    _same(x.quantile(hx.tensor([], dtype=hx.float32), 1),
          t.quantile(torch.tensor([], dtype=torch.float32), 1))


# -- gradients ----------------------------------------------------------------------------------
#: name -> (haelixe, PyTorch) calls on one float64 tensor of shape (4, 5), giving a tensor
GRADIENTS = {
    "median": (lambda x: x.median(), lambda x: x.median()),
    "median_dim": (lambda x: x.median(1, keepdim=True).values,
                   lambda x: x.median(1, keepdim=True).values),
    "nanmedian_dim": (lambda x: hx.nanmedian(x, -2).values,
                      lambda x: torch.nanmedian(x, -2).values),
    "kthvalue": (lambda x: x.kthvalue(3, 0).values, lambda x: x.kthvalue(3, 0).values),
    "mode": (lambda x: x.mode().values, lambda x: x.mode().values),
    **{f"quantile_{how}": (lambda x, how=how: x.quantile(0.3, 1, interpolation=how),
                           lambda x, how=how: x.quantile(0.3, 1, interpolation=how))
       for how in INTERPOLATIONS},
    "quantile_all": (lambda x: x.quantile(0.55, keepdim=True),
                     lambda x: x.quantile(0.55, keepdim=True)),
    "nanquantile": (lambda x: x.nanquantile(0.45, 0), lambda x: x.nanquantile(0.45, 0)),
}


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_float64_gradient_passes_gradcheck(name):
    fh, _ = GRADIENTS[name]
    x = hx.tensor(_distinct((4, 5), "float64", 8)).requires_grad_()
    assert gradcheck(fh, (x,), name=name)


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_float64_gradient_matches_pytorch_on_a_transposed_view(name):
    fh, ft = GRADIENTS[name]
    a = _distinct((5, 4), "float64", 9)
    h, t = hx.tensor(a).requires_grad_(), torch.tensor(a).requires_grad_()
    want = ft(t.transpose(0, 1))
    got = fh(h.transpose(0, 1))
    gy = np.random.default_rng(10).standard_normal(tuple(want.shape))
    want.backward(torch.tensor(gy))
    got.backward(hx.tensor(gy))
    np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_median_of_every_element_shares_its_gradient_among_ties_as_pytorch():
    for a in ([2.0, 2.0, 1.0, 2.0, 3.0], [2.0, NAN, 1.0, NAN], [NAN, NAN], [5.0]):
        for op in ("median", "nanmedian"):
            h = hx.tensor(a, dtype=hx.float64).requires_grad_()
            t = torch.tensor(a, dtype=torch.float64).requires_grad_()
            getattr(h, op)().backward()
            getattr(t, op)().backward()
            np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_gradients_with_nans_match_pytorch():
    a = _distinct((4, 5), "float64", 11)
    a[a > 1.0] = NAN
    a[:, 0] = 0.25 * np.arange(4)  # (every column but one has a number left)
    for fh, ft in ((lambda x: x.median(1).values, lambda x: x.median(1).values),
                   (lambda x: x.nanmedian(1).values, lambda x: x.nanmedian(1).values),
                   (lambda x: x.quantile(0.4, 1), lambda x: x.quantile(0.4, 1)),
                   (lambda x: x.nanquantile(0.4, 0), lambda x: x.nanquantile(0.4, 0))):
        h, t = hx.tensor(a).requires_grad_(), torch.tensor(a).requires_grad_()
        fh(h).backward(hx.ones(*fh(h).shape, dtype=hx.float64))
        ft(t).backward(torch.ones(ft(t).shape, dtype=torch.float64))
        np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_linear_quantile_has_a_gradient_with_respect_to_q():
    a = _distinct((3, 6), "float64", 12)
    a[0, 2] = NAN
    q = [0.1, 0.45, 0.9]
    for op in ("quantile", "nanquantile"):
        x = hx.tensor(a)
        qh = hx.tensor(q, dtype=hx.float64).requires_grad_()
        qt = torch.tensor(q, dtype=torch.float64).requires_grad_()
        getattr(hx, op)(x, qh, 1).sum().backward()
        getattr(torch, op)(torch.tensor(a), qt, 1).sum().backward()
        np.testing.assert_allclose(qh.grad.numpy(), qt.grad.numpy(), rtol=1e-12)
    xq = hx.tensor(_distinct((3, 6), "float64", 13)).requires_grad_()
    qq = hx.tensor([0.23, 0.61], dtype=hx.float64).requires_grad_()  # (ranks off the kinks)
    assert gradcheck(lambda x, q: x.quantile(q, 1), (xq, qq), name="quantile")
    assert gradgradcheck(lambda x, q: x.quantile(q, 1) * x.sum(), (xq, qq), name="quantile")


# -- surfaces and errors ------------------------------------------------------------------------
def test_function_and_method_forms_bind_pytorchs_keywords():
    a = _distinct((3, 4), "float64", 14)
    x, t = _both(a, "float64")
    _same_pair(hx.kthvalue(input=x, k=2, dim=0, keepdim=True),
               torch.kthvalue(input=t, k=2, dim=0, keepdim=True))
    _same_pair(x.kthvalue(3), t.kthvalue(3))  # (dim: the last)
    _same_pair(hx.median(input=x, dim=1, keepdim=True), torch.median(input=t, dim=1,
                                                                     keepdim=True))
    _same_pair(hx.mode(x), torch.mode(t))
    _same(hx.quantile(input=x, q=0.2, dim=0, keepdim=True, interpolation="higher"),
          torch.quantile(input=t, q=0.2, dim=0, keepdim=True, interpolation="higher"))
    values, indices = x.median(0)  # (a named tuple unpacks)
    _same(values, t.median(0).values)
    with pytest.raises(TypeError):
        hx.quantile(x, 0.5, 0, False, "lower")  # (interpolation is keyword-only)


def test_the_ops_refuse_bad_input_naming_themselves():
    x = hx.tensor([[1.0, 2.0, 3.0, 4.0]])
    cases = [
        (TypeError, r"median: not defined for bool tensors", lambda: hx.median(x > 2)),
        (TypeError, r"kthvalue: not defined for bool", lambda: hx.kthvalue(x > 2, 1)),
        (TypeError, r"nanmedian: not defined for bool", lambda: (x > 2).nanmedian(0)),
        (TypeError, r"median: keepdim=True needs a dim", lambda: x.median(keepdim=True)),
        (TypeError, r"median: dim must be an int, got float", lambda: x.median(1.0)),
        (IndexError, r"median: dim 2 is out of range", lambda: x.median(2)),
        (RuntimeError, r"median: an empty int64 tensor has no median",
         lambda: hx.median(hx.tensor([], dtype=hx.int64))),
        (IndexError, r"median: dim 1 has size 0 \(input shape \(2, 0\)\)",
         lambda: hx.median(hx.zeros(2, 0), 1)),
        (IndexError, r"nanmedian: dim 1 has size 0", lambda: hx.nanmedian(hx.zeros(2, 0), 1)),
        (RuntimeError, r"kthvalue: k \(0\) must be between 1 and the size of dim -1 \(4\)",
         lambda: x.kthvalue(0)),
        (RuntimeError, r"kthvalue: k \(2\) must be between 1 and the size of dim 0 \(1\)",
         lambda: x.kthvalue(2, 0)),
        (RuntimeError, r"kthvalue: k \(2\) must be between 1", lambda: hx.tensor(1.0).kthvalue(2)),
        (TypeError, r"kthvalue: k must be an int, got float", lambda: x.kthvalue(1.0)),
        (TypeError, r"kthvalue: k must be an int, got bool", lambda: x.kthvalue(True)),
        (IndexError, r"kthvalue: dim -1 has size 0", lambda: hx.zeros(2, 0).kthvalue(1)),
        (IndexError, r"mode: dim -1 has size 0", lambda: hx.zeros(2, 0).mode()),
        (TypeError, r"mode: dim must be an int, got NoneType", lambda: x.mode(None)),
        (TypeError, r"quantile: input must be float32 or float64 \(as in PyTorch\), got int64; "
                    r"convert with \.float\(\)", lambda: hx.tensor([1, 2]).quantile(0.5)),
        (TypeError, r"nanquantile: input must be float32 or float64 .*got float16",
         lambda: x.half().nanquantile(0.5)),
        (RuntimeError, r"quantile: q must be in \[0, 1\], got 1.5", lambda: x.quantile(1.5)),
        (RuntimeError, r"quantile: q must be in \[0, 1\], got -0.1", lambda: x.quantile(-0.1)),
        (RuntimeError, r"nanquantile: q must be in \[0, 1\], got nan",
         lambda: x.nanquantile(hx.tensor([0.5, NAN]))),
        (RuntimeError, r"quantile: q must be a number or a 1-D tensor, got shape \(1, 1\)",
         lambda: x.quantile(hx.tensor([[0.5]]))),
        (TypeError, r"quantile: q is float64 and the input float32 .*q\.to\(input\.dtype\)",
         lambda: x.quantile(hx.tensor([0.5], dtype=hx.float64))),
        (TypeError, r"quantile: q must be a float or a 1-D tensor, got list",
         lambda: x.quantile([0.5])),
        (RuntimeError, r"quantile: interpolation must be one of linear, lower, higher, "
                       r"midpoint, nearest, got 'cubic'",
         lambda: x.quantile(0.5, interpolation="cubic")),
        (RuntimeError, r"quantile: input is empty \(shape \(2, 0\)\)",
         lambda: hx.zeros(2, 0).quantile(0.5, 0)),
        (IndexError, r"quantile: dim 2 is out of range", lambda: x.quantile(0.5, 2)),
        (TypeError, r"quantile: dim must be an int, got tuple", lambda: x.quantile(0.5, (0, 1))),
        # (a stride-0 view: the check runs before anything is sorted)
        (RuntimeError, r"quantile: a slice of 16777217 elements is more than 2\*\*24",
         lambda: hx.zeros(1).expand(2 ** 24 + 1).quantile(0.5)),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=f"^{message}"):
            call()


# -- the GPU ------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_the_ops_on_the_gpu_equal_the_cpu_and_stay_there(be):
    a = _distinct((4, 5), "float64", 15).astype(np.float32)
    a[1, 2] = NAN
    calls = [lambda x: x.median(), lambda x: x.median(1).values, lambda x: x.nanmedian(0).values,
             lambda x: x.kthvalue(2, 0, True).values, lambda x: x.mode(1).values,
             lambda x: x.quantile(hx.tensor([0.2, 0.8], device=x.device), 1),
             lambda x: x.nanquantile(0.3, interpolation="midpoint")]
    for call in calls:
        cpu = hx.tensor(a).requires_grad_()
        gpu = hx.tensor(a, device="gpu").requires_grad_()
        out_cpu, out_gpu = call(cpu), call(gpu)
        assert out_gpu.device.type == "gpu"
        np.testing.assert_allclose(out_gpu.detach().cpu().numpy(), out_cpu.detach().numpy(),
                                   rtol=1e-6)
        out_cpu.sum().backward()
        out_gpu.sum().backward()
        np.testing.assert_allclose(gpu.grad.cpu().numpy(), cpu.grad.numpy(), rtol=1e-6)
    gpu = hx.tensor(a, device="gpu")
    assert gpu.median(0).indices.device.type == "gpu"
    np.testing.assert_array_equal(gpu.mode(0).indices.cpu().numpy(),
                                  hx.tensor(a).mode(0).indices.numpy())
