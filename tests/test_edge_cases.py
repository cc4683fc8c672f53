"""Edge cases where a wrong answer would be silent, against PyTorch: saved tensors
changed through any alias, integer division's dtype, the gradient of an additive
attention mask, label smoothing with ignored targets, variance without degrees of
freedom, PyTorch's placement of advanced indices, and the error class of bad arguments."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import SavedTensorError
from haelixe.errors import OpError
from haelixe.nn import functional as F

torch = pytest.importorskip("torch")

DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


@pytest.fixture(params=DEVICES)
def device(request):
    if request.param == "gpu":
        request.getfixturevalue("be")  # skips where there is no adapter
    return request.param


def values(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- a saved tensor changed in place through any alias raises at backward -------------------
#: (name, forward from the leaf w, the in-place edit after it), each as PyTorch runs it
ALIAS_EDITS = {
    "the base of a saved view": (lambda w: (w[1:4] * w[1:4]).sum(), lambda w, y: w.add_(1)),
    "a saved tensor through detach()": (lambda w: (w * w).sum(),
                                        lambda w, y: w.detach().mul_(2)),
    "a view of a saved tensor's detach()": (lambda w: (w * w).sum(),
                                            lambda w, y: w.detach()[2:].zero_()),
    "the output exp saved": (lambda w: w.exp(), lambda w, y: y.add_(1)),
    "exp's output through detach()": (lambda w: w.exp(), lambda w, y: y.detach().mul_(2)),
    "a view of exp's output": (lambda w: w.exp(), lambda w, y: y[1:].mul_(2)),
    "the output tanh saved": (lambda w: w.tanh(), lambda w, y: y.mul_(2)),
    "a saved view through the base's detach()": (
        lambda w: (w.view(2, 3) * w.view(2, 3)).sum(), lambda w, y: w.detach().add_(1)),
}


@pytest.mark.parametrize("case", sorted(ALIAS_EDITS))
def test_a_saved_tensor_changed_through_any_alias_raises_as_in_pytorch(device, case):
    build, edit = ALIAS_EDITS[case]
    x0 = values(6)

    def run(lib, dev):
        x = lib.tensor(x0, requires_grad=True, **({"device": dev} if dev else {}))
        w = x * 1.0
        y = build(w)
        with lib.no_grad():
            edit(w, y)
        y.sum().backward()

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        run(torch, None)
    with pytest.raises(SavedTensorError, match="modified by an inplace operation"):
        run(hx, device)


def test_views_and_detach_share_the_base_version_counter():
    w = hx.zeros(6)
    aliases = [w, w[1:3], w.detach(), w.view(2, 3).t(), w.detach()[::2]]
    for alias in aliases:
        before = w._version
        alias.add_(0)
        assert [a._version for a in aliases] == [before + 1] * len(aliases)


# -- div(int, float, rounding_mode='trunc') ------------------------------------------------
@pytest.mark.parametrize("a_dtype, b_dtype", [("int32", "float32"), ("int32", "int32"),
                                              ("int64", "int32"), ("int32", "int64"),
                                              ("int64", "float32")])
def test_trunc_division_takes_pytorchs_result_dtype_and_is_exact_on_ints(device, a_dtype,
                                                                        b_dtype):
    a = [7, -7, 2**24 + 1, -9, 0, 2**30 + 3]
    b = [2, 2, 1, -4, 5, 3]
    ours = hx.div(hx.tensor(a, dtype=getattr(hx, a_dtype), device=device),
                  hx.tensor(b, dtype=getattr(hx, b_dtype), device=device),
                  rounding_mode="trunc")
    theirs = torch.div(torch.tensor(a, dtype=getattr(torch, a_dtype)),
                       torch.tensor(b, dtype=getattr(torch, b_dtype)), rounding_mode="trunc")
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    assert ours.to("cpu").tolist() == theirs.tolist()
    for scalar in (-2, 2.5):
        ours = hx.div(hx.tensor(a[:4], dtype=hx.int32, device=device), scalar,
                      rounding_mode="trunc")
        theirs = torch.div(torch.tensor(a[:4], dtype=torch.int32), scalar, rounding_mode="trunc")
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
        assert ours.to("cpu").tolist() == theirs.tolist()


# -- an additive float attention mask gets its gradient ------------------------------------
@pytest.mark.parametrize("mask_shape", [(3, 3), (2, 1, 3, 3)])
def test_a_float_attention_mask_that_requires_grad_gets_pytorchs_gradient(device, mask_shape):
    q, k, v = (values(2, 2, 3, 4, seed=s) for s in (1, 2, 3))
    m = values(*mask_shape, seed=4)
    hq, hk, hv = (hx.tensor(a, device=device, requires_grad=True) for a in (q, k, v))
    hm = hx.tensor(m, device=device, requires_grad=True)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    tm = torch.tensor(m, requires_grad=True)
    out = F.scaled_dot_product_attention(hq, hk, hv, attn_mask=hm)
    (out * out).sum().backward()
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
    (ref * ref).sum().backward()
    np.testing.assert_allclose(out.detach().to("cpu").numpy(), ref.detach().numpy(),
                               atol=1e-5)
    assert hm.grad is not None
    for ours, theirs in ((hm, tm), (hq, tq), (hv, tv)):
        np.testing.assert_allclose(ours.grad.to("cpu").numpy(), theirs.grad.numpy(),
                                   atol=2e-5)


def test_cross_entropy_with_ignored_targets_and_label_smoothing_averages_over_the_kept():
    x = values(5, 4)
    t = np.array([0, 1, 2, 1, 3])
    ours = F.cross_entropy(hx.tensor(x), hx.tensor(t), ignore_index=1, label_smoothing=0.3)
    theirs = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t),
                                               ignore_index=1, label_smoothing=0.3)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)


@pytest.mark.parametrize("data, correction", [([1.0, 2.0], 2), ([1.0, 2.0], 5), ([3.0, 3.0], 2),
                                              ([1.0], 1), ([1.0, 4.0, 2.0], 0)])
def test_var_and_std_without_degrees_of_freedom_divide_by_zero_as_pytorch(device, data,
                                                                          correction):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch warns about the degrees of freedom
        want_var = torch.tensor(data).var(correction=correction).item()
        want_std = torch.tensor(data).std(correction=correction).item()
    x = hx.tensor(data, device=device)
    np.testing.assert_equal(x.var(correction=correction).item(), np.float32(want_var))
    np.testing.assert_equal(x.std(correction=correction).item(), np.float32(want_std))


# -- advanced indices placed where PyTorch puts them ---------------------------------------
I, J = [0, 1], [[1], [2]]
MASK = np.array([True, False, True])
INDEX_KEYS = [(0, slice(None), I), (I, slice(None), 0), (slice(None), 0, slice(None), I),
              (Ellipsis, I, 0), (0, Ellipsis, I), (I, 0, J), (None, 0, slice(None), I),
              (I, None, 0, I), (0, MASK, slice(None), I), (I, Ellipsis, I), (1, MASK),
              (-1, slice(None), J, I), (I, 1, slice(None), 2)]


@pytest.mark.parametrize("key", INDEX_KEYS, ids=repr)
def test_advanced_indices_with_ints_go_where_pytorch_puts_them(device, key):
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    ours_key = tuple(hx.tensor(k, device=device) if isinstance(k, (list, np.ndarray)) else k
                     for k in key)
    their_key = tuple(torch.tensor(k) if isinstance(k, (list, np.ndarray)) else k for k in key)
    x = hx.tensor(a, device=device, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    got, want = x[ours_key], t[their_key]
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.detach().to("cpu").numpy(), want.detach().numpy())
    g = values(*want.shape, seed=5)
    got.backward(hx.tensor(g, device=device))
    want.backward(torch.tensor(g))
    np.testing.assert_array_equal(x.grad.to("cpu").numpy(), t.grad.numpy())
    # setitem takes a value of the same (PyTorch's) shape
    y, u = hx.zeros(a.shape, device=device), torch.zeros(a.shape)
    y[ours_key] = hx.tensor(g, device=device)
    u[their_key] = torch.tensor(g)
    np.testing.assert_array_equal(y.to("cpu").numpy(), u.numpy())


# -- bad arguments raise an error that is a RuntimeError (PyTorch) and a ValueError ---------
BAD_ARGUMENTS = {
    "matmul shapes": lambda: hx.ones(2, 3) @ hx.ones(2, 3),
    "permute dims": lambda: hx.ones(2, 3).permute(0),
    "reshape size": lambda: hx.ones(2, 3).reshape(4),
    "flip repeated dim": lambda: hx.ones(2, 3).flip((0, 0)),
    "unknown rounding mode": lambda: hx.div(hx.ones(2), 2, rounding_mode="round"),
}


@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_bad_arguments_raise_a_runtime_error_that_is_also_a_value_error(case):
    with pytest.raises(RuntimeError) as err:
        BAD_ARGUMENTS[case]()
    assert isinstance(err.value, ValueError) and isinstance(err.value, OpError)
