"""Random sampling (ops/sampling.py, rand_like and randn_like): each sampler's draws
against its distribution (Kolmogorov-Smirnov distances and frequencies, with bounds a
wrong distribution or parameter exceeds), its dtypes, shapes and devices, repeatability
under hx.manual_seed and generator=, PyTorch's argument errors, signatures and autograd
rules (zero gradients; in-place rules on leaves, views and version counters).

The values are Haelixe's own (numpy's PCG64), not PyTorch's: PyTorch is the oracle for
signatures, dtypes, errors and gradients, and each distribution's formula for the rest.
"""

from __future__ import annotations

import ast
import inspect
import math
import warnings

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")

N = 20000
#: the Kolmogorov-Smirnov distance a correct sampler of N draws stays below (the
#: 0.001 level is 1.95 / sqrt(N): 0.0138); one std off by 5% gives about 0.02
KS_BOUND = 1.95 / math.sqrt(N)
_erf = np.vectorize(math.erf)


def ks(samples, cdf) -> float:
    """The Kolmogorov-Smirnov distance between the samples and a distribution's cdf."""
    x = np.sort(np.asarray(samples, dtype=np.float64).ravel())
    f = cdf(x)
    n = len(x)
    return float(max((np.arange(1, n + 1) / n - f).max(), (f - np.arange(n) / n).max()))


def normal_cdf(mean, std):
    return lambda x: 0.5 * (1.0 + _erf((x - mean) / (std * math.sqrt(2.0))))


def values(t) -> np.ndarray:
    return t.detach().cpu().float().numpy().astype(np.float64)


def assert_frequencies(samples, pmf, support):
    """Each value's frequency within 5 standard errors of its probability."""
    s = np.asarray(samples).ravel()
    for k in support:
        p = pmf(k)
        freq = float((s == k).mean())
        assert abs(freq - p) <= 5.0 * math.sqrt(p * (1.0 - p) / s.size) + 1e-12, (k, freq, p)


def test_ks_rejects_a_wrong_distribution():
    # (the check is only as good as its bound: a std 5% off and a shifted mean fail it)
    z = np.random.default_rng(0).standard_normal(N)
    assert ks(z, normal_cdf(0.0, 1.0)) < KS_BOUND
    assert ks(z * 1.05, normal_cdf(0.0, 1.0)) > KS_BOUND
    assert ks(z + 0.05, normal_cdf(0.0, 1.0)) > KS_BOUND


# -- normal, its four forms ----------------------------------------------------------------
def test_normal_of_a_tensor_mean_and_a_tensor_std_broadcasts_them():
    hx.manual_seed(1)
    mean = hx.tensor([[-3.0], [5.0]], dtype=hx.float64)
    std = hx.full((1, N), 2.0)  # (float32: the mean's dtype wins, as PyTorch's)
    y = hx.normal(mean, std)
    assert y.shape == (2, N) and y.dtype is hx.float64
    assert ks(values(y[0]), normal_cdf(-3.0, 2.0)) < KS_BOUND
    assert ks(values(y[1]), normal_cdf(5.0, 2.0)) < KS_BOUND
    assert tuple(torch.normal(torch.zeros(2, 1, dtype=torch.float64),
                              torch.ones(1, 3)).shape) == (2, 3)


def test_normal_of_a_tensor_mean_and_a_number_std():
    hx.manual_seed(2)
    y = hx.normal(hx.full((N,), 1.5), 0.5)
    assert y.shape == (N,) and y.dtype is hx.float32
    assert ks(values(y), normal_cdf(1.5, 0.5)) < KS_BOUND
    assert hx.normal(mean=hx.zeros(4)).shape == (4,)  # (std=1)
    z = hx.normal(hx.tensor(2.0), 0.0)
    assert z.shape == () and z.item() == 2.0


def test_normal_of_a_number_mean_and_a_tensor_std_takes_the_stds_dtype():
    hx.manual_seed(3)
    y = hx.normal(2.0, hx.full((N,), 3.0, dtype=hx.float64))
    assert y.dtype is hx.float64
    assert ks(values(y), normal_cdf(2.0, 3.0)) < KS_BOUND


def test_normal_of_two_numbers_and_a_size():
    hx.manual_seed(4)
    y = hx.normal(-1.0, 0.25, (N,), dtype=hx.float64)
    assert y.dtype is hx.float64 and y.shape == (N,) and not y.requires_grad
    assert ks(values(y), normal_cdf(-1.0, 0.25)) < KS_BOUND
    leaf = hx.normal(0, 1, size=(2, 3), requires_grad=True)
    assert leaf.dtype is hx.float32 and leaf.requires_grad and leaf.is_leaf
    assert hx.normal(0.0, 1.0, 5).shape == (5,)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_normal_in_16_bit_floats(dtype):
    hx.manual_seed(5)
    y = hx.normal(hx.full((N,), 4.0, dtype=getattr(hx, dtype)), 2.0)
    assert y.dtype is getattr(hx, dtype)
    assert ks(values(y), normal_cdf(4.0, 2.0)) < 2 * KS_BOUND  # (rounded to 16 bits)


def test_normal_repeats_under_a_seed_and_its_own_generator():
    hx.manual_seed(11)
    a = hx.normal(hx.zeros(50), hx.ones(50)).numpy()
    hx.manual_seed(11)
    b = hx.normal(hx.zeros(50), hx.ones(50)).numpy()
    np.testing.assert_array_equal(a, b)
    state = hx.get_rng_state()
    g = hx.Generator().manual_seed(11)
    c = hx.normal(hx.zeros(50), hx.ones(50), generator=g).numpy()
    np.testing.assert_array_equal(a, c)  # (one seed, one stream: the same draws)
    assert (hx.get_rng_state().numpy() == state.numpy()).all()  # the default one untouched
    assert not (hx.normal(hx.zeros(50), 1.0, generator=g).numpy() == a).all()


def test_normal_gradients_are_pytorchs_zeros():
    m = hx.tensor([0.5, -1.0], requires_grad=True)
    s = hx.tensor([1.0, 2.0], requires_grad=True)
    y = hx.normal(m, s)
    assert y.requires_grad and not y.is_leaf
    (y * 3.0).sum().backward()
    tm = torch.tensor([0.5, -1.0], requires_grad=True)
    ts = torch.tensor([1.0, 2.0], requires_grad=True)
    (torch.normal(tm, ts) * 3.0).sum().backward()
    np.testing.assert_array_equal(m.grad.numpy(), tm.grad.numpy())
    np.testing.assert_array_equal(s.grad.numpy(), ts.grad.numpy())
    mean = hx.ones(3, requires_grad=True)
    hx.normal(mean, 2.0).sum().backward()
    assert mean.grad.tolist() == [0.0, 0.0, 0.0]
    std = hx.ones(3, requires_grad=True)
    hx.normal(0.0, std).sum().backward()
    assert std.grad.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("call,error,match", [
    (lambda: hx.normal(hx.zeros(2), -1.0), RuntimeError, "normal expects std >= 0.0"),
    (lambda: hx.normal(hx.zeros(2), math.nan), RuntimeError, "found std nan"),
    (lambda: hx.normal(0.0, hx.tensor([1.0, -1.0])), RuntimeError, "all elements of std"),
    (lambda: hx.normal(hx.zeros(2), hx.tensor([1.0, math.nan])), RuntimeError,
     "all elements of std"),
    (lambda: hx.normal(2.0, -3.0, (2,)), RuntimeError, "found std -3"),
    (lambda: hx.normal(hx.zeros(2, dtype=hx.int64), 1.0), TypeError, "int64"),
    (lambda: hx.normal(1.0, hx.ones(2, dtype=hx.int64)), TypeError, "std must be"),
    (lambda: hx.normal(0.0, 1.0), TypeError, "pass size="),
    (lambda: hx.normal(0.0, 1.0, (2,), dtype=hx.int64), TypeError, "int64"),
    (lambda: hx.normal(hx.zeros(2), 1.0, (2,)), TypeError, "size go with a number"),
    (lambda: hx.normal(hx.zeros(2), hx.ones(3)), RuntimeError, "normal"),
])
def test_normal_refuses_what_pytorch_refuses(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_normal_errors_are_pytorchs_too():
    for call in (lambda: torch.normal(torch.zeros(2), -1.0),
                 lambda: torch.normal(0.0, torch.tensor([1.0, -1.0])),
                 lambda: torch.normal(0.0, 1.0),
                 lambda: torch.normal(torch.zeros(2), 1.0, (2,)),
                 lambda: torch.normal(torch.zeros(2, dtype=torch.int64), 1.0)):
        with pytest.raises((RuntimeError, TypeError, NotImplementedError)):
            call()


# -- poisson -------------------------------------------------------------------------------
def test_poisson_counts_follow_their_rates():
    hx.manual_seed(6)
    rates = hx.tensor([[0.0], [0.5], [3.0], [40.0]]).expand(4, N)
    y = hx.poisson(rates)
    assert y.shape == (4, N) and y.dtype is hx.float32
    v = values(y)
    assert (v == np.round(v)).all() and (v >= 0).all()
    assert (v[0] == 0).all()
    for row, lam in zip(v[1:], (0.5, 3.0, 40.0)):
        assert abs(row.mean() - lam) < 5 * math.sqrt(lam / N), lam
        assert abs(row.var() - lam) < 0.05 * lam + 0.02, lam  # (a Poisson: variance = rate)
    assert_frequencies(v[2], lambda k: math.exp(-3.0) * 3.0 ** k / math.factorial(k),
                       range(10))


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_poisson_keeps_the_rates_dtype(dtype):
    y = hx.poisson(hx.full((3, 2), 2.0, dtype=getattr(hx, dtype)))
    assert y.dtype is getattr(hx, dtype) and y.shape == (3, 2)
    assert str(torch.poisson(torch.ones(1, dtype=getattr(torch, dtype))).dtype)[6:] == dtype
    assert hx.poisson(hx.tensor(3.0)).shape == ()
    assert hx.poisson(hx.zeros(0, 2)).shape == (0, 2)


def test_poisson_refuses_bad_rates_and_gives_zero_gradients():
    for rates in ([-1.0], [math.nan]):
        with pytest.raises(RuntimeError, match="invalid Poisson rate"):
            hx.poisson(hx.tensor(rates))
        with pytest.raises(RuntimeError, match="invalid Poisson rate"):
            torch.poisson(torch.tensor(rates))
    with pytest.raises(RuntimeError, match="too large"):
        hx.poisson(hx.tensor([math.inf]))
    with pytest.raises(TypeError, match="poisson: input"):
        hx.poisson(hx.tensor([1, 2]))
    x = hx.tensor([1.0, 5.0], requires_grad=True)
    t = torch.tensor([1.0, 5.0], requires_grad=True)
    hx.poisson(x).sum().backward()
    torch.poisson(t).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())
    g1, g2 = hx.Generator().manual_seed(3), hx.Generator().manual_seed(3)
    rates = hx.full((100,), 4.0)
    np.testing.assert_array_equal(hx.poisson(rates, g1).numpy(),
                                  hx.poisson(rates, generator=g2).numpy())


# -- bernoulli -----------------------------------------------------------------------------
def test_bernoulli_draws_ones_with_each_elements_probability():
    hx.manual_seed(7)
    probs = hx.tensor([[0.0], [0.2], [0.7], [1.0]]).expand(4, N)
    y = hx.bernoulli(probs)
    assert y.dtype is hx.float32 and y.shape == (4, N)
    v = values(y)
    assert set(np.unique(v)) <= {0.0, 1.0}
    assert (v[0] == 0).all() and (v[3] == 1).all()
    for row, p in zip(v[1:3], (0.2, 0.7)):
        assert abs(row.mean() - p) < 5 * math.sqrt(p * (1 - p) / N)
    assert probs.bernoulli().shape == (4, N)  # (the method form)


def test_bernoulli_with_p_takes_the_inputs_shape_and_any_dtype():
    hx.manual_seed(8)
    for dtype in (hx.float64, hx.int64, hx.bool, hx.uint8):
        y = hx.bernoulli(hx.zeros(N, dtype=dtype), 0.3)
        assert y.dtype is dtype and y.shape == (N,)
        assert abs(values(y).mean() - 0.3) < 5 * math.sqrt(0.21 / N)
    assert hx.zeros(3).bernoulli(p=1.0).tolist() == [1.0, 1.0, 1.0]
    assert str(torch.bernoulli(torch.zeros(2, dtype=torch.int64), 0.5).dtype) == "torch.int64"


def test_bernoulli_refuses_bad_probabilities_and_gives_zero_gradients():
    for probs in ([1.5], [-0.5], [math.nan]):
        with pytest.raises(RuntimeError, match=r"in \[0, 1\]"):
            hx.bernoulli(hx.tensor(probs))
        with pytest.raises(RuntimeError):
            torch.bernoulli(torch.tensor(probs))
    with pytest.raises(RuntimeError, match=r"expects p to be in \[0, 1\], but got p=1.5"):
        hx.bernoulli(hx.zeros(3), 1.5)
    with pytest.raises(TypeError, match="bernoulli: input"):
        hx.bernoulli(hx.tensor([0, 1]))
    with pytest.raises(TypeError, match="p must be a number"):
        hx.bernoulli(hx.zeros(3), hx.full((3,), 0.5))
    with pytest.raises(TypeError):
        torch.bernoulli(torch.zeros(3), torch.full((3,), 0.5))
    x = hx.tensor([0.5, 0.2], requires_grad=True)
    t = torch.tensor([0.5, 0.2], requires_grad=True)
    hx.bernoulli(x).sum().backward()
    torch.bernoulli(t).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


# -- randint_like, rand_like, randn_like ---------------------------------------------------
def test_randint_like_draws_uniform_integers_in_the_inputs_shape_and_dtype():
    hx.manual_seed(9)
    x = hx.zeros(N, 2)
    y = hx.randint_like(x, 5)
    assert y.shape == (N, 2) and y.dtype is hx.float32
    assert_frequencies(values(y), lambda k: 0.2, range(5))
    z = hx.randint_like(x, -3, 4, dtype=hx.int64)
    assert z.dtype is hx.int64
    assert_frequencies(z.numpy(), lambda k: 1 / 7, range(-3, 4))
    assert hx.randint_like(x, high=2).numpy().max() == 1
    assert hx.randint_like(x, low=2, high=3).numpy().min() == 2
    b = hx.randint_like(hx.zeros(N, dtype=hx.bool), 2)
    assert b.dtype is hx.bool and 0.45 < b.numpy().mean() < 0.55
    assert hx.randint_like(hx.zeros(3, dtype=hx.int32), hx.tensor(5)).dtype is hx.int32
    leaf = hx.randint_like(x, 3, requires_grad=True)
    assert leaf.requires_grad and leaf.is_leaf
    g1, g2 = hx.Generator().manual_seed(4), hx.Generator().manual_seed(4)
    np.testing.assert_array_equal(hx.randint_like(x, 9, generator=g1).numpy(),
                                  hx.randint_like(x, 9, generator=g2).numpy())


@pytest.mark.parametrize("call,pytorch,match", [
    (lambda: hx.randint_like(hx.zeros(3), 5, 3), lambda: torch.randint_like(torch.zeros(3), 5, 3),
     "expects 'from' to be less than 'to', but got from=5 >= to=3"),
    (lambda: hx.randint_like(hx.zeros(3), 0), lambda: torch.randint_like(torch.zeros(3), 0),
     "from=0 >= to=0"),
    (lambda: hx.randint_like(hx.zeros(3, dtype=hx.uint8), 300),
     lambda: torch.randint_like(torch.zeros(3, dtype=torch.uint8), 300),
     "to - 1 is out of bounds for uint8"),
    (lambda: hx.randint_like(hx.zeros(3, dtype=hx.bool), 3),
     lambda: torch.randint_like(torch.zeros(3, dtype=torch.bool), 3),
     "to - 1 is out of bounds for bool"),
    (lambda: hx.randint_like(hx.zeros(3, dtype=hx.int64), 5, requires_grad=True),
     lambda: torch.randint_like(torch.zeros(3, dtype=torch.int64), 5, requires_grad=True),
     "only floating-point tensors can require gradients"),
])
def test_randint_like_refuses_what_pytorch_refuses(call, pytorch, match):
    with pytest.raises(RuntimeError, match=match):
        call()
    with pytest.raises(RuntimeError):
        pytorch()


def test_rand_like_and_randn_like_draw_their_distributions_with_pytorchs_options():
    x = hx.zeros(N, dtype=hx.float64)
    hx.manual_seed(10)
    u = hx.rand_like(x)
    assert u.dtype is hx.float64 and u.shape == (N,)
    assert ks(u.numpy(), lambda v: np.clip(v, 0.0, 1.0)) < KS_BOUND
    z = hx.randn_like(x, dtype=hx.float32)
    assert z.dtype is hx.float32
    assert ks(values(z), normal_cdf(0.0, 1.0)) < KS_BOUND
    ints = hx.zeros(3, dtype=hx.int64)
    assert hx.rand_like(ints, dtype=hx.float16).dtype is hx.float16
    leaf = hx.randn_like(x, requires_grad=True, memory_format=None, layout=None)
    assert leaf.requires_grad and leaf.is_leaf
    for like in (hx.rand_like, hx.randn_like):
        g1, g2 = hx.Generator().manual_seed(2), hx.Generator().manual_seed(2)
        np.testing.assert_array_equal(like(x, generator=g1).numpy(),
                                      like(x, generator=g2).numpy())
        with pytest.raises(TypeError, match="draws floats, not int64"):
            like(ints)
        with pytest.raises(TypeError):  # (dtype is keyword-only, as PyTorch's)
            like(x, hx.float32)
        with pytest.raises(RuntimeError, match="layout"):
            like(x, layout="sparse_coo")
    with pytest.raises(NotImplementedError):
        torch.rand_like(torch.zeros(2, dtype=torch.int64))
    with pytest.raises(TypeError):
        torch.rand_like(torch.zeros(2), torch.float64)


def _docstring_signature(fn) -> str:
    """The parameters of a PyTorch docstring's first line, as text."""
    first = fn.__doc__.strip().split("\n", 1)[0]
    return first[first.index("(") + 1:first.rindex(")")].replace("\\*", "*")


def _ours(fn) -> str:
    """A function's parameters as text (no return annotation)."""
    sig = inspect.signature(fn)
    return str(sig.replace(return_annotation=inspect.Signature.empty))[1:-1]


@pytest.mark.parametrize("name", ["rand_like", "randn_like", "randint_like"])
def test_the_like_samplers_have_pytorchs_parameters(name):
    theirs = _docstring_signature(getattr(torch, name))
    # (Haelixe has no layout or memory_format objects: None stands for PyTorch's
    # torch.strided and torch.preserve_format, and high has a default for the one-bound
    # call)
    theirs = theirs.replace("layout=torch.strided", "layout=None").replace(
        "memory_format=torch.preserve_format", "memory_format=None").replace(
        "low=0, high,", "low=0, high=None,")
    assert _ours(getattr(hx, name)) == theirs


# -- random_ -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype,low,high", [
    ("int8", 0, 127), ("uint8", 0, 255), ("int16", 0, 32767), ("bool", 0, 1),
    ("float16", 0, 2 ** 11), ("bfloat16", 0, 2 ** 8)])
def test_random_without_bounds_covers_the_dtype(dtype, low, high):
    hx.manual_seed(12)
    x = hx.zeros(N * 4, dtype=getattr(hx, dtype)).random_()
    v = x.numpy().astype(np.float64) if dtype != "bfloat16" else values(x)
    assert v.min() == low and v.max() == high and (v == np.round(v)).all()
    t = torch.zeros(N * 4, dtype=getattr(torch, dtype)).random_()
    assert low <= t.min().item() and t.max().item() <= high  # (PyTorch's range is this)


def test_random_without_bounds_on_wide_dtypes():
    hx.manual_seed(13)
    f = hx.zeros(N).random_().numpy().astype(np.float64)
    assert f.min() >= 0 and f.max() <= 2 ** 24 and (f == np.round(f)).all()
    assert abs(f.mean() / 2 ** 23 - 1) < 0.02  # (uniform over [0, 2^24])
    i = hx.zeros(N, dtype=hx.int64).random_().numpy()
    assert i.min() >= 0 and i.max() > 2 ** 62
    d = hx.zeros(N, dtype=hx.float64).random_().numpy()
    assert d.max() > 2 ** 52 and d.max() <= 2 ** 53


def test_random_draws_its_bounds_in_every_call_form():
    hx.manual_seed(14)
    x = hx.zeros(N)
    assert x.random_(10) is x
    assert_frequencies(x.numpy(), lambda k: 0.1, range(10))
    y = hx.zeros(N, dtype=hx.int64).random_(-5, 0)
    assert_frequencies(y.numpy(), lambda k: 0.2, range(-5, 0))
    z = hx.zeros(N, dtype=hx.int8).random_(120, None)
    assert z.numpy().min() == 120 and z.numpy().max() == 127
    assert hx.zeros(N, dtype=hx.int64).random_(to=3).numpy().max() == 2
    w = hx.zeros(N, dtype=hx.int32).random_(**{"from": 7, "to": 9})
    assert set(np.unique(w.numpy())) == {7, 8}
    g1, g2 = hx.Generator().manual_seed(5), hx.Generator().manual_seed(5)
    np.testing.assert_array_equal(hx.zeros(50).random_(0, 99, generator=g1).numpy(),
                                  hx.zeros(50).random_(0, 99, generator=g2).numpy())


@pytest.mark.parametrize("dtype,args,error,match", [
    ("int64", (5, 3), RuntimeError, "expects 'from' to be less than 'to', but got from=5 >= to=3"),
    ("int64", (5, 5), RuntimeError, "from=5 >= to=5"),
    ("uint8", (0, 300), RuntimeError, "to - 1 is out of bounds for uint8"),
    ("uint8", (-1, 10), RuntimeError, "from is out of bounds for uint8"),
    ("uint8", (-5, None), RuntimeError, "from is out of bounds for uint8"),
    ("int8", (-129, 0), RuntimeError, "from is out of bounds for int8"),
    ("bool", (0, 3), RuntimeError, "to - 1 is out of bounds for bool"),
    ("float32", (1.5, 4), TypeError, "from must be an int"),
    ("float32", (1.5,), TypeError, "to must be an int"),
    ("int64", (0, 2 ** 63), RuntimeError, "does not fit in int64"),
    ("uint16", (), TypeError, "not implemented for uint16"),
])
def test_random_refuses_what_pytorch_refuses(dtype, args, error, match):
    with pytest.raises(error, match=match):
        hx.zeros(3, dtype=getattr(hx, dtype)).random_(*args)
    with pytest.raises((RuntimeError, TypeError, ValueError, NotImplementedError)):
        torch.zeros(3, dtype=getattr(torch, dtype)).random_(*args)


def test_random_warns_where_a_float_cannot_hold_every_integer():
    with pytest.warns(UserWarning, match=r"to - 1 is out of bounds \[-\(2\^24\), 2\^24\]"):
        hx.zeros(3).random_(2 ** 24 + 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hx.zeros(3).random_(2 ** 24 + 1)  # (2^24 itself is exact: no warning)
    with pytest.raises(RuntimeError, match="to - 1 is out of bounds for float16"):
        hx.zeros(3, dtype=hx.float16).random_(0, 100000)
    with pytest.raises(TypeError, match="from= needs to="):
        hx.zeros(3).random_(**{"from": 5})
    with pytest.raises(TypeError):
        torch.zeros(3).random_(**{"from": 5})


# -- the continuous in-place samplers ------------------------------------------------------
def _exp_cdf(lam):
    return lambda x: 1.0 - np.exp(-lam * np.maximum(x, 0.0))


CONTINUOUS = {  # name -> (call on x, the cdf of its draws)
    "uniform_": (lambda x: x.uniform_(2.0, 5.0), lambda v: np.clip((v - 2.0) / 3.0, 0, 1)),
    "normal_": (lambda x: x.normal_(-2.0, 0.5), normal_cdf(-2.0, 0.5)),
    "exponential_": (lambda x: x.exponential_(2.5), _exp_cdf(2.5)),
    "log_normal_": (lambda x: x.log_normal_(0.5, 0.75),
                    lambda v: normal_cdf(0.5, 0.75)(np.log(np.maximum(v, 1e-300)))),
    "cauchy_": (lambda x: x.cauchy_(1.0, 2.0), lambda v: 0.5 + np.arctan((v - 1.0) / 2.0) / np.pi),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_each_continuous_sampler_draws_its_distribution(name, dtype):
    draw, cdf = CONTINUOUS[name]
    hx.manual_seed(15)
    x = hx.zeros(N, dtype=getattr(hx, dtype))
    assert draw(x) is x and x.dtype is getattr(hx, dtype)
    assert ks(x.numpy(), cdf) < KS_BOUND
    other = {"exponential_": _exp_cdf(2.0), "normal_": normal_cdf(-2.0, 0.6),
             "uniform_": lambda v: np.clip((v - 2.0) / 3.3, 0, 1),
             "log_normal_": lambda v: normal_cdf(0.65, 0.75)(np.log(np.maximum(v, 1e-300))),
             "cauchy_": lambda v: 0.5 + np.arctan((v - 1.0) / 2.8) / np.pi}[name]
    assert ks(x.numpy(), other) > KS_BOUND  # (the bound tells the parameters apart)


def test_the_continuous_samplers_keep_their_ranges():
    hx.manual_seed(16)
    u = hx.zeros(N).uniform_(-1.0, 1.0).numpy()
    assert u.min() >= -1.0 and u.max() < 1.0
    assert (hx.zeros(N).exponential_().numpy() >= 0).all()
    assert (hx.zeros(N).log_normal_().numpy() > 0).all()
    assert (hx.zeros(10).normal_(3.0, 0.0).numpy() == 3.0).all()
    assert (hx.zeros(10).exponential_(math.inf).numpy() == 0.0).all()
    assert hx.zeros(3).uniform_(to=0.5).numpy().max() < 0.5
    w = hx.zeros(N).uniform_(**{"from": 4.0}, to=4.5).numpy()
    assert w.min() >= 4.0 and w.max() < 4.5


@pytest.mark.parametrize("call,error,match", [
    (lambda x, lib: x.uniform_(1.0, 0.0), RuntimeError,
     r"expects to return a \[from, to\) range, but found from=1 > to=0"),
    (lambda x, lib: x.uniform_(0.0, math.inf), RuntimeError, "to is out of bounds for float32"),
    (lambda x, lib: x.uniform_(-3e38, 3e38), RuntimeError, "to - from <="),
    (lambda x, lib: x.normal_(0.0, -1.0), RuntimeError,
     "normal expects std >= 0.0, but found std -1"),
    (lambda x, lib: x.exponential_(0.0), RuntimeError,
     "expects lambda > 0.0, but found lambda=0"),
    (lambda x, lib: x.exponential_(-1.0), RuntimeError, "found lambda=-1"),
    (lambda x, lib: x.log_normal_(1.0, 0.0), RuntimeError, "expects std > 0.0, but found std=0"),
    (lambda x, lib: x.cauchy_(0.0, -1.0), RuntimeError,
     "expects sigma > 0.0, but found sigma=-1"),
    (lambda x, lib: x.geometric_(0.0), RuntimeError, r"expects p to be in \(0, 1\), but got p=0"),
    (lambda x, lib: x.geometric_(1.0), RuntimeError, "but got p=1"),
    (lambda x, lib: x.bernoulli_(1.5), RuntimeError,
     r"expects p to be in \[0, 1\], but got p=1.5"),
    (lambda x, lib: x.bernoulli_(lib.tensor([0.0, 1.5, 1.0])), RuntimeError,
     "all elements of p"),
    (lambda x, lib: x.bernoulli_(lib.tensor([0.0, 1.0])), RuntimeError, "bernoulli_"),
    (lambda x, lib: x.bernoulli_(lib.tensor([0, 1, 1])), TypeError, "p must be floating-point"),
])
def test_the_in_place_samplers_refuse_pytorchs_bad_parameters(call, error, match):
    x = hx.zeros(3)
    before = x._version
    with pytest.raises(error, match=match):
        call(x, hx)
    assert x._version == before and x.tolist() == [0.0, 0.0, 0.0]  # (nothing written)
    with pytest.raises((RuntimeError, NotImplementedError)):
        call(torch.zeros(3), torch)


@pytest.mark.parametrize("name", ["uniform_", "normal_", "exponential_", "log_normal_",
                                  "cauchy_"])
def test_the_continuous_samplers_refuse_integer_tensors(name):
    with pytest.raises(TypeError, match=name):
        getattr(hx.zeros(3, dtype=hx.int64), name)()
    with pytest.raises((RuntimeError, NotImplementedError)):
        getattr(torch.zeros(3, dtype=torch.int64), name)()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_samplers_fill_16_bit_floats(dtype):
    hx.manual_seed(17)
    x = hx.zeros(N, dtype=getattr(hx, dtype))
    x.exponential_(2.0)
    assert x.dtype is getattr(hx, dtype)
    assert abs(values(x).mean() - 0.5) < 0.02
    x.cauchy_()
    assert abs(np.median(values(x))) < 0.05


# -- bernoulli_ and geometric_ (any dtype) -------------------------------------------------
def test_bernoulli_in_place_takes_a_number_or_a_broadcast_tensor():
    hx.manual_seed(18)
    x = hx.zeros(N, 3)
    assert x.bernoulli_(hx.tensor([0.0, 0.25, 1.0])) is x
    v = x.numpy()
    assert (v[:, 0] == 0).all() and (v[:, 2] == 1).all()
    assert abs(v[:, 1].mean() - 0.25) < 5 * math.sqrt(0.1875 / N)
    for dtype in (hx.int64, hx.bool, hx.uint8):
        y = hx.zeros(N, dtype=dtype).bernoulli_(0.6)
        assert y.dtype is dtype and abs(values(y).mean() - 0.6) < 5 * math.sqrt(0.24 / N)
    z = hx.zeros(N).bernoulli_()
    assert abs(z.numpy().mean() - 0.5) < 5 * math.sqrt(0.25 / N)


def test_geometric_counts_trials_to_the_first_success():
    hx.manual_seed(19)
    p = 0.3
    for dtype in (hx.float32, hx.int64, hx.int16):
        x = hx.zeros(N, dtype=dtype).geometric_(p)
        assert x.dtype is dtype and values(x).min() == 1
        assert_frequencies(values(x), lambda k: (1 - p) ** (k - 1) * p, range(1, 12))
        # (the mean, 1 / p, within 5 standard errors: tells p = 0.3 from 0.315)
        assert abs(values(x).mean() - 1 / p) < 5 * math.sqrt((1 - p) / p ** 2 / N)
    with pytest.raises(TypeError, match="geometric_: not implemented for bool"):
        hx.zeros(3, dtype=hx.bool).geometric_(0.5)
    with pytest.raises(NotImplementedError):
        torch.zeros(3, dtype=torch.bool).geometric_(0.5)


# -- autograd's in-place rules, layouts, seeds, signatures ---------------------------------
IN_PLACE = {
    "random_": lambda x: x.random_(0, 5), "uniform_": lambda x: x.uniform_(),
    "normal_": lambda x: x.normal_(), "bernoulli_": lambda x: x.bernoulli_(0.5),
    "exponential_": lambda x: x.exponential_(), "geometric_": lambda x: x.geometric_(0.5),
    "log_normal_": lambda x: x.log_normal_(), "cauchy_": lambda x: x.cauchy_(),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_an_in_place_sampler_follows_autograds_rules_as_pytorch(name):
    draw = IN_PLACE[name]
    leaf = hx.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        draw(leaf)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        draw(torch.zeros(3, requires_grad=True))
    with hx.no_grad():
        draw(leaf)  # (as an initialiser does)
    x = hx.ones(3, requires_grad=True)
    y = x * 2.0
    before = y._version
    assert draw(y) is y and y._version > before
    assert y.requires_grad and y.grad_fn is not None  # (its history kept, as PyTorch's)
    (y * 5.0).sum().backward()
    t = torch.ones(3, requires_grad=True)
    ty = t * 2.0
    draw(ty)
    assert ty.requires_grad
    (ty * 5.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())  # zeros
    plain = hx.zeros(3)
    v = plain._version
    draw(plain)
    assert plain._version == v + 1


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_an_in_place_sampler_writes_through_a_view_and_takes_edge_shapes(name):
    draw = IN_PLACE[name]
    base = hx.full((4, 6), -7.0)
    view = base.t()[1:, ::2]  # (a strided, non-contiguous view)
    hx.manual_seed(20)
    draw(view)
    hx.manual_seed(20)
    dense = draw(hx.full((5, 2), -7.0))
    np.testing.assert_array_equal(base.t()[1:, ::2].numpy(), dense.numpy())
    assert (base.t()[0].numpy() == -7.0).all()  # (the rest untouched)
    assert draw(hx.zeros(())).shape == () and draw(hx.zeros(0, 3)).shape == (0, 3)
    with pytest.raises(RuntimeError, match="sharing memory"):
        draw(hx.zeros(1, 3).expand(4, 3))


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_an_in_place_sampler_repeats_under_a_seed_and_a_generator(name):
    draw = IN_PLACE[name]
    hx.manual_seed(21)
    a = draw(hx.zeros(40)).numpy()
    hx.manual_seed(21)
    b = draw(hx.zeros(40)).numpy()
    np.testing.assert_array_equal(a, b)
    kwargs_draw = {
        "random_": lambda x, g: x.random_(0, 5, generator=g),
        "uniform_": lambda x, g: x.uniform_(generator=g),
        "normal_": lambda x, g: x.normal_(generator=g),
        "bernoulli_": lambda x, g: x.bernoulli_(0.5, generator=g),
        "exponential_": lambda x, g: x.exponential_(generator=g),
        "geometric_": lambda x, g: x.geometric_(0.5, generator=g),
        "log_normal_": lambda x, g: x.log_normal_(generator=g),
        "cauchy_": lambda x, g: x.cauchy_(generator=g)}[name]
    state = hx.get_rng_state().numpy()
    c = kwargs_draw(hx.zeros(40), hx.Generator().manual_seed(21)).numpy()
    np.testing.assert_array_equal(a, c)
    assert (hx.get_rng_state().numpy() == state).all()


def _parameters(text):
    """(name, kind, default) of each parameter in a signature's text, numbers as floats."""
    args = ast.parse(f"def f({text}): pass").body[0].args
    values = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
    out = [(a.arg, "positional", v) for a, v in zip(args.args, values)]
    out += [(a.arg, "keyword", v) for a, v in zip(args.kwonlyargs, args.kw_defaults)]
    return [(n, k, None if v is None else float(ast.literal_eval(v)) if isinstance(
        ast.literal_eval(v), (int, float)) else ast.literal_eval(v)) for n, k, v in out]


@pytest.mark.parametrize("name", ["bernoulli_", "exponential_", "geometric_", "log_normal_",
                                  "cauchy_", "normal_"])
def test_the_in_place_samplers_have_pytorchs_signatures(name):
    theirs = _parameters(_docstring_signature(getattr(torch.Tensor, name)))
    ours = _parameters(_ours(getattr(hx.Tensor, name)))[1:]  # (less self)
    assert ours == theirs and len(ours) >= 2


@pytest.mark.parametrize("name", ["random_", "uniform_"])
def test_random_and_uniform_write_pytorchs_signature_line(name):
    # (their parameter `from` is a Python keyword: it comes in through **kwargs, and the
    # docstring's first line is PyTorch's)
    assert hx.Tensor.__dict__[name].__doc__.split("\n", 1)[0] == \
        getattr(torch.Tensor, name).__doc__.strip().split("\n", 1)[0]


# -- the GPU: the same host draws, uploaded ------------------------------------------------
GPU_DRAWS = {
    **{name: draw for name, draw in IN_PLACE.items()},
    "normal": lambda x: hx.normal(x, 2.0),
    "normal_tensors": lambda x: hx.normal(x, x.abs()),
    "poisson": lambda x: hx.poisson(x.abs()),
    "bernoulli": lambda x: hx.bernoulli(x.abs().clamp(max=1.0)),
    "randint_like": lambda x: hx.randint_like(x, 3, 9),
    "rand_like": lambda x: hx.rand_like(x),
    "randn_like": lambda x: hx.randn_like(x),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GPU_DRAWS))
def test_a_sampler_on_the_gpu_gives_the_cpus_draws(be, name):
    draw = GPU_DRAWS[name]
    a = np.linspace(-0.9, 0.9, 12, dtype=np.float32).reshape(3, 4)
    hx.manual_seed(22)
    cpu = draw(hx.tensor(a))
    hx.manual_seed(22)
    gpu = draw(hx.tensor(a, device="gpu"))
    assert gpu.device.type == "gpu" and gpu.dtype is cpu.dtype and gpu.shape == cpu.shape
    np.testing.assert_array_equal(gpu.cpu().numpy(), cpu.numpy())


@pytest.mark.gpu
def test_an_in_place_sampler_on_a_gpu_tensor_with_history_keeps_it(be):
    x = hx.ones(3, device="gpu", requires_grad=True)
    y = x * 2.0
    y.exponential_()
    assert y.device.type == "gpu" and y.requires_grad
    y.sum().backward()
    assert x.grad.device.type == "gpu" and x.grad.cpu().tolist() == [0.0, 0.0, 0.0]
