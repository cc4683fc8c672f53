"""hx.special (torch.special under the alias): each name is Haelixe's op, with PyTorch's
values and gradients; a name torch.special has and Haelixe lacks says what to write."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import haelixe as hx

X = np.array([0.3, 0.5, 1.7, 3.0, 7.5])
UNIT = np.array([-0.9, -0.25, 0.0, 0.4, 0.95])
CASES = [  # (name, input, extra positional arguments)
    ("digamma", X, ()), ("psi", X, ()), ("gammaln", X, ()), ("erf", UNIT, ()),
    ("erfinv", UNIT, ()), ("exp2", UNIT, ()), ("expm1", UNIT, ()), ("log1p", X, ()),
    ("expit", UNIT, ()), ("logit", np.array([0.1, 0.5, 0.8]), ()),
    ("polygamma", X, ("n2",)), ("multigammaln", X + 2, (2,)), ("round", X, ()),
]


def _call(lib, name, x, extra):
    if extra == ("n2",):  # polygamma takes n first (n = 1: see below)
        return getattr(lib.special, name)(2, x)
    return getattr(lib.special, name)(x, *extra)


@pytest.mark.parametrize("name,values,extra", CASES)
def test_values_and_gradients_match_torch_special(name, values, extra):
    t = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    h = hx.tensor(values, dtype=hx.float64, requires_grad=True)
    want, got = _call(torch, name, t, extra), _call(hx, name, h, extra)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                               atol=1e-14, err_msg=name)
    if name != "round":
        want.sum().backward()
        got.sum().backward()
        np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-9, err_msg=name)


def test_trigamma_is_exact_where_torchs_series_stops_early():
    # (PyTorch's polygamma(1, x) is off by about 1e-10 relative; pi^2 / 2 and pi^2 / 6 are
    # trigamma at 1/2 and 1)
    got = hx.special.polygamma(1, hx.tensor([0.5, 1.0], dtype=hx.float64)).numpy()
    np.testing.assert_allclose(got, [np.pi ** 2 / 2, np.pi ** 2 / 6], rtol=1e-14)


def test_reductions_take_torch_specials_arguments():
    a = np.random.default_rng(0).standard_normal((3, 4))
    t, h = torch.tensor(a), hx.tensor(a)
    np.testing.assert_allclose(hx.special.logsumexp(h, 1, keepdim=True).numpy(),
                               torch.special.logsumexp(t, 1, keepdim=True).numpy(), rtol=1e-12)
    np.testing.assert_allclose(hx.special.softmax(h, 0).numpy(),
                               torch.special.softmax(t, 0).numpy(), rtol=1e-12)
    np.testing.assert_allclose(hx.special.log_softmax(h, 1).numpy(),
                               torch.special.log_softmax(t, 1).numpy(), rtol=1e-12)
    np.testing.assert_allclose(hx.special.xlogy(h.abs(), h.abs() + 1).numpy(),
                               torch.special.xlogy(t.abs(), t.abs() + 1).numpy(), rtol=1e-12)


def test_renamed_functions_are_haelixes_own_ops():
    assert hx.special.expit is hx.sigmoid and hx.special.gammaln is hx.lgamma
    assert hx.special.psi is hx.digamma and hx.special.multigammaln is hx.mvlgamma
    assert all(hasattr(torch.special, n) for n in hx.special.__all__)


def test_every_function_of_torch_special_is_there():
    theirs = {n for n in dir(torch.special) if not n.startswith("_")
              and callable(getattr(torch.special, n)) and n != "Tensor"}
    assert theirs <= set(hx.special.__all__)


def test_a_misspelt_name_says_which_is_closest():
    # (torch.special has nothing Haelixe lacks: the names here are no real ones)
    with pytest.raises(AttributeError, match="hx.special has no bessel_j2; the closest is "
                                             "hx.special.bessel_j1"):
        hx.special.bessel_j2  # noqa: B018
    with pytest.raises(AttributeError, match="hx.special has no qqq; it has: airy_ai, "
                                             "bessel_j0"):
        hx.special.qqq  # noqa: B018
