"""F.rms_norm and nn.RMSNorm against PyTorch's: signatures, values, gradients, eps=None
(the machine epsilon of the dtype computed in), normalized_shape over several trailing
dims, no weight; on the CPU and the GPU."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn
from haelixe.autograd import gradcheck
from haelixe.errors import OpError
from haelixe.nn import functional as F

torch = pytest.importorskip("torch")


def _params(sig):
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def test_signatures_are_pytorchs():
    assert _params(inspect.signature(F.rms_norm)) == \
        _params(inspect.signature(torch.nn.functional.rms_norm))
    # (nn.RMSNorm's: tests/test_op_surfaces.py, with every declared op's layer)


CASES = [  # (x shape, normalized_shape, with weight, eps)
    ((3, 5, 8), 8, True, None),
    ((3, 5, 8), (8,), False, 0.5),
    ((2, 3, 4, 5), (4, 5), True, None),
    ((2, 3, 4), (3, 4), False, 1e-6),
    ((2, 0, 4), [4], True, None),
]


@pytest.mark.parametrize("shape,normalized_shape,with_weight,eps", CASES)
def test_values_and_gradients_match_pytorch(device, shape, normalized_shape, with_weight,
                                            eps):
    g = np.random.default_rng(7)
    # small values: there eps=None (float32's epsilon) moves the result measurably
    a = (g.standard_normal(shape) * 1e-3).astype(np.float32)
    trailing = shape[-1:] if isinstance(normalized_shape, int) else tuple(normalized_shape)
    wa = g.standard_normal(trailing).astype(np.float32)
    gy = g.standard_normal(shape).astype(np.float32)
    x = hx.tensor(a, device=device, requires_grad=True)
    w = hx.tensor(wa, device=device, requires_grad=True) if with_weight else None
    tx = torch.tensor(a, requires_grad=True)
    tw = torch.tensor(wa, requires_grad=True) if with_weight else None
    y = F.rms_norm(x, normalized_shape, w, eps)
    ty = torch.nn.functional.rms_norm(tx, trailing, tw, eps)  # (PyTorch: no int here)
    assert y.shape == tuple(ty.shape) and y.dtype is hx.float32
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
    y.backward(hx.tensor(gy, device=device))
    ty.backward(torch.tensor(gy))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-3, atol=1e-2)
    if with_weight:
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_gradcheck_float64_over_two_trailing_dims():
    g = np.random.default_rng(8)
    x = hx.from_numpy(g.standard_normal((3, 2, 4))).requires_grad_()
    w = hx.from_numpy(g.standard_normal((2, 4))).requires_grad_()
    w2 = hx.from_numpy(g.standard_normal((3, 4))).requires_grad_()
    assert gradcheck(lambda x, w: F.rms_norm(x, (2, 4), w), (x, w), name="rms_norm (2, 4)")
    # x.transpose(0, 1) is (2, 3, 4), strided: normalized over (3, 4)
    assert gradcheck(lambda x, w: F.rms_norm(x.transpose(0, 1), (3, 4), w, 0.1), (x, w2),
                     name="rms_norm strided")
    assert gradcheck(lambda x: F.rms_norm(x, 4), (x,), name="rms_norm no weight")


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
def test_eps_none_is_pytorchs_default(dtype):
    """PyTorch takes the epsilon of the type it computes in: float32's for 16-bit
    inputs (bfloat16's own, 2**-7, would change these values by a factor of 2)."""
    a = np.linspace(-1e-3, 2e-3, 24).reshape(3, 8)
    x = hx.from_numpy(a).to(getattr(hx, dtype))
    t = torch.from_numpy(a).to(getattr(torch, dtype))
    y = F.rms_norm(x, (8,)).float().numpy()
    want = torch.nn.functional.rms_norm(t, (8,)).float().numpy()
    np.testing.assert_allclose(y, want, rtol=1e-2 if dtype in ("bfloat16", "float16")
                               else 1e-6)


def test_module_matches_pytorchs():
    for args, kw in (((6,), {}), (((2, 3),), {"eps": 1e-5, "elementwise_affine": False})):
        ours, theirs = nn.RMSNorm(*args, **kw), torch.nn.RMSNorm(*args, **kw)
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        a = np.random.default_rng(9).standard_normal((4, 2, 3) if kw else (4, 6))
        a = a.astype(np.float32)
        np.testing.assert_allclose(ours(hx.tensor(a)).detach().numpy(),
                                   theirs(torch.tensor(a)).detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    norm = nn.RMSNorm((2, 3), dtype=hx.float64, device="cpu")
    assert norm.weight.shape == (2, 3) and norm.weight.dtype is hx.float64


def test_bad_shapes_are_named():
    x = hx.ones(2, 4)
    with pytest.raises(OpError, match=r"rms_norm: normalized_shape=\(3,\) must be the "
                                      r"trailing dims"):
        F.rms_norm(x, 3)
    with pytest.raises(OpError, match=r"rms_norm: weight has shape \(3,\), expected \(4,\)"):
        F.rms_norm(x, (4,), hx.ones(3))
    with pytest.raises(TypeError, match="rms_norm.*pass the weight as weight="):
        F.rms_norm(x, hx.ones(4))  # (the weight where normalized_shape goes)
