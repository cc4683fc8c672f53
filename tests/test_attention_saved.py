"""What attention keeps for its backward (Backend.attention_for_backward): the CPU's
probabilities live on the graph node, give PyTorch's gradients whether they are kept or
rebuilt, survive retain_graph, go when backward releases the node, and are never made
for an op that records no node."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

import haelixe as hx
import haelixe.nn.functional as F
from haelixe.backends import cpu_attention
from haelixe.backends.cpu import CPU_BACKEND

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.numba  # (the compiled backend's kept probabilities)

RNG = np.random.default_rng(11)
SQ, SK = 5, 6


def _mask(kind):
    """None, a bool mask (True attends; every query sees key 0) or an additive one."""
    if kind == "bool":
        m = RNG.random((SQ, SK)) > 0.4
        m[:, 0] = True
        return m
    if kind == "float":
        return RNG.standard_normal((2, 1, SQ, SK))
    return None


def _inputs(dtype, seed=0):
    """q, k, v and the output's gradient, the same ones for the same seed."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype)
            for shape in ((2, 3, SQ, 4), (2, 3, SK, 4), (2, 3, SK, 4), (2, 3, SQ, 4))]


def _haelixe(arrays, mask, causal, keep_limit, monkeypatch):
    """Forward and backward under the given KEEP_PROBS_BYTES: the gradients, and what
    the node held for its backward."""
    monkeypatch.setattr(cpu_attention, "KEEP_PROBS_BYTES", keep_limit)
    q, k, v = (hx.from_numpy(a).requires_grad_() for a in arrays[:3])
    m = None if mask is None else hx.from_numpy(mask.astype(arrays[0].dtype, copy=False)
                                                if mask.dtype != np.bool_ else mask)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, scale=0.4)
    held = out.grad_fn.kernel_saved
    out.backward(hx.from_numpy(arrays[3]))
    return [t.grad.numpy() for t in (q, k, v)], held


def _torch(arrays, mask, causal):
    q, k, v = (torch.from_numpy(a).requires_grad_() for a in arrays[:3])
    m = None if mask is None else torch.from_numpy(mask.astype(arrays[0].dtype, copy=False)
                                                   if mask.dtype != np.bool_ else mask)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m,
                                                           is_causal=causal, scale=0.4)
    out.backward(torch.from_numpy(arrays[3]))
    return [t.grad.numpy() for t in (q, k, v)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal,mask", [(False, None), (True, None), (False, "bool"),
                                         (False, "float")])
def test_gradients_with_and_without_kept_probabilities_equal_pytorch(monkeypatch, dtype,
                                                                     causal, mask):
    arrays, m = _inputs(dtype), _mask(mask)
    want = _torch(arrays, m, causal)
    kept, held = _haelixe(arrays, m, causal, 16 << 20, monkeypatch)
    rebuilt, none = _haelixe(arrays, m, causal, 0, monkeypatch)
    assert held is not None and held.shape == (2, 3, SQ, SK) and held.dtype == dtype
    assert none is None
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-12)
    for a, b, w in zip(kept, rebuilt, want):
        np.testing.assert_allclose(a, w, **tol)
        np.testing.assert_allclose(b, w, **tol)


def test_the_default_limit_is_16_mib():
    assert cpu_attention.KEEP_PROBS_BYTES == 16 << 20


def _attention_node(requires_grad=True, dtype=hx.float64):
    q, k, v = (hx.from_numpy(a).to(dtype).requires_grad_(requires_grad)
               for a in _inputs(np.float64)[:3])
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return (q, k, v), out


def test_the_probabilities_go_when_backward_releases_the_node():
    _, out = _attention_node()
    node = out.grad_fn
    assert node.name == "Attention"
    held = weakref.ref(node.kernel_saved)
    (out * out).sum().backward()
    assert held() is None  # freed at once (by reference count: no cycle holds them)
    assert "kernel_saved" not in node.__dict__ and "lse" not in node.__dict__


def test_retain_graph_keeps_them_for_a_second_backward_that_agrees():
    inputs, out = _attention_node()
    node = out.grad_fn
    held = weakref.ref(node.kernel_saved)
    loss = (out * out).sum()
    loss.backward(retain_graph=True)
    first = [t.grad.numpy().copy() for t in inputs]
    assert held() is not None
    for t in inputs:
        t.grad = None
    loss.backward()
    for t, want in zip(inputs, first):
        np.testing.assert_array_equal(t.grad.numpy(), want)
    assert held() is None  # the second backward, not retaining, released them


@pytest.mark.parametrize("keep_limit", [16 << 20, 0])
def test_retain_graph_gradients_equal_with_and_without_kept_ones(monkeypatch, keep_limit):
    monkeypatch.setattr(cpu_attention, "KEEP_PROBS_BYTES", keep_limit)
    inputs, out = _attention_node()
    assert (out.grad_fn.kernel_saved is None) == (keep_limit == 0)
    g = hx.from_numpy(RNG.standard_normal(out.shape))
    out.backward(g, retain_graph=True)
    first = [t.grad.numpy().copy() for t in inputs]
    out.backward(g)  # accumulates: twice the first
    for t, want in zip(inputs, first):
        np.testing.assert_allclose(t.grad.numpy(), 2 * want, rtol=1e-14, atol=0)


@pytest.fixture
def made(monkeypatch):
    """The probabilities the CPU kernel returned (None where it kept none), and the
    calls of attention_for_backward."""
    log = {"probs": [], "for_backward": 0}
    forward = cpu_attention._forward
    for_backward = type(CPU_BACKEND).attention_for_backward

    def spy_forward(*args):
        result = forward(*args)
        log["probs"].append(result[2])
        return result

    def spy_for_backward(self, *args, **kwargs):
        log["for_backward"] += 1
        return for_backward(self, *args, **kwargs)

    monkeypatch.setattr(cpu_attention, "_forward", spy_forward)
    monkeypatch.setattr(type(CPU_BACKEND), "attention_for_backward", spy_for_backward)
    return log


def test_no_probabilities_are_made_for_an_op_that_records_no_node(made):
    with hx.no_grad():
        _, out = _attention_node()
    assert out.grad_fn is None
    _, out = _attention_node(requires_grad=False)  # inference: nothing requires grad
    assert out.grad_fn is None
    assert made["for_backward"] == 0
    assert made["probs"] == [None, None]
    _, out = _attention_node()  # (the spies see a recorded op's probabilities)
    assert made["for_backward"] == 1
    assert made["probs"][-1] is out.grad_fn.kernel_saved is not None


def test_low_precision_keeps_none_and_its_gradients_are_unchanged(monkeypatch):
    grads = []
    for keep_limit in (16 << 20, 0):
        monkeypatch.setattr(cpu_attention, "KEEP_PROBS_BYTES", keep_limit)
        inputs, out = _attention_node(dtype=hx.bfloat16)
        assert out.grad_fn.kernel_saved is None
        out.float().sum().backward()
        grads.append([t.grad.float().numpy() for t in inputs])
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)
