"""A 16-bit float tensor beside a float32 one in an elementwise op: the kernel reads it as
it is and computes in float32, with no Cast node, as PyTorch computes mixed operands.
The result, and each input's gradient (in that input's own dtype), must equal what the
op gives on operands converted first, exactly; and PyTorch's, where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx

BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "maximum": hx.maximum, "pow": lambda a, b: a.abs() ** b,
    "logaddexp": hx.logaddexp,
}
LOW = {"bfloat16": hx.bfloat16, "float16": hx.float16}


def _device(device, request):
    if device == "gpu":
        request.getfixturevalue("be")
    return device


def _leaves(device, low, shapes=((3, 5), (3, 5))):
    g = np.random.default_rng(0)
    a = g.standard_normal(shapes[0]).astype(np.float32)
    b = (g.standard_normal(shapes[1]) + 2.5).astype(np.float32)
    ta = hx.from_numpy(a).to(device).requires_grad_()
    tb = hx.from_numpy(b).to(device).to(low).detach().requires_grad_()
    return ta, tb


def _nodes(t):
    seen, stack = [], [t.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or n in seen:
            continue
        seen.append(n)
        stack.extend(getattr(n, "next", ()))
    return [n.name for n in seen]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("low", list(LOW))
@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize("order", ["f32_first", "low_first"])
def test_mixed_equals_converted_first(op, low, device, order, request):
    device = _device(device, request)
    fn = BINARY[op]
    ta, tb = _leaves(device, LOW[low])
    args = (ta, tb) if order == "f32_first" else (tb, ta)
    out = fn(*args)
    assert out.dtype is hx.float32
    assert not any(n.startswith("Cast") for n in _nodes(out)), _nodes(out)
    out.backward(hx.ones_like(out))
    assert ta.grad.dtype is hx.float32 and tb.grad.dtype is LOW[low]

    ca, cb = ta.detach().requires_grad_(), tb.detach().float().requires_grad_()
    cargs = (ca, cb) if order == "f32_first" else (cb, ca)
    ref = fn(*cargs)
    ref.backward(hx.ones_like(ref))
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    np.testing.assert_array_equal(ta.grad.numpy(), ca.grad.numpy())
    np.testing.assert_array_equal(tb.grad.numpy(), cb.grad.to(LOW[low]).numpy())


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_mixed_broadcast_and_scalars(device, request):
    """Broadcast shapes, a Python number beside them, and a comparison (bool out)."""
    device = _device(device, request)
    ta, tb = _leaves(device, hx.bfloat16, ((4, 1, 3), (2, 3)))
    out = (ta * tb + 0.5) * 2.0
    out.sum().backward()
    assert ta.grad.shape == (4, 1, 3) and tb.grad.shape == (2, 3)
    assert tb.grad.dtype is hx.bfloat16
    ca, cb = ta.detach().requires_grad_(), tb.detach().float().requires_grad_()
    ((ca * cb + 0.5) * 2.0).sum().backward()
    np.testing.assert_array_equal(out.detach().numpy(), ((ca * cb + 0.5) * 2.0).detach().numpy())
    np.testing.assert_array_equal(tb.grad.numpy(), cb.grad.to(hx.bfloat16).numpy())
    np.testing.assert_array_equal(ta.grad.numpy(), ca.grad.numpy())
    lt = ta < tb
    assert lt.dtype is hx.bool
    np.testing.assert_array_equal(lt.numpy(), (ca < cb).numpy())


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_mixed_create_graph(device, request):
    """Second derivatives through a mixed op: each gradient in its input's dtype."""
    device = _device(device, request)
    ta, tb = _leaves(device, hx.bfloat16)
    (ga, gb) = hx.autograd.grad((ta * tb * tb).sum(), (ta, tb), create_graph=True)
    assert ga.dtype is hx.float32 and gb.dtype is hx.bfloat16
    (gga,) = hx.autograd.grad(gb.float().sum(), (ta,))
    ca, cb = ta.detach().requires_grad_(), tb.detach().float().requires_grad_()
    (rb,) = hx.autograd.grad((ca * cb * cb).sum(), (cb,), create_graph=True)
    (rga,) = hx.autograd.grad(rb.to(hx.bfloat16).float().sum(), (ca,))
    np.testing.assert_array_equal(gga.numpy(), rga.numpy())


@pytest.mark.parametrize("op", ["add", "mul", "div", "maximum"])
def test_mixed_matches_pytorch(op):
    torch = pytest.importorskip("torch")
    ta, tb = _leaves("cpu", hx.bfloat16)
    out = BINARY[op](ta, tb)
    out.backward(hx.ones_like(out))
    xa = torch.from_numpy(ta.detach().numpy()).requires_grad_()
    xb = torch.from_numpy(tb.detach().float().numpy()).to(torch.bfloat16).requires_grad_()
    tfn = {"add": torch.add, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum}[op]
    ref = tfn(xa, xb)
    assert ref.dtype == torch.float32
    ref.backward(torch.ones_like(ref))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(ta.grad.numpy(), xa.grad.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(tb.grad.float().numpy(), xb.grad.float().numpy())


NORMS = {
    "rms_norm": lambda x, w, b: hx.nn.functional.rms_norm(x, x.shape[-1:], w),
    "layer_norm": lambda x, w, b: hx.nn.functional.layer_norm(x, x.shape[-1:], w, b),
}


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("norm", list(NORMS))
def test_norm_reads_16_bit_weight_under_autocast(norm, device, request):
    """Under autocast a norm casts only its input: the bf16 weight and bias are read as
    they are, with no Cast node, and get bf16 gradients equal to those of the cast path."""
    device = _device(device, request)
    g = np.random.default_rng(1)
    x = hx.from_numpy(g.standard_normal((2, 3, 8)).astype(np.float32)).to(device)
    w = hx.from_numpy(g.standard_normal(8).astype(np.float32)).to(device).to(hx.bfloat16)
    b = hx.from_numpy(g.standard_normal(8).astype(np.float32)).to(device).to(hx.bfloat16)
    x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
    with hx.autocast(dtype=hx.bfloat16):
        y = NORMS[norm](x, w, b)
    assert y.dtype is hx.float32
    assert not any(n.startswith("Cast") for n in _nodes(y)), _nodes(y)
    gy = hx.from_numpy(g.standard_normal((2, 3, 8)).astype(np.float32)).to(device)
    y.backward(gy)
    assert w.grad.dtype is hx.bfloat16
    assert (b.grad is None) if norm == "rms_norm" else (b.grad.dtype is hx.bfloat16)

    cx, cw, cb = (t.detach().float().requires_grad_() for t in (x, w, b))
    ref = NORMS[norm](cx, cw, cb)
    ref.backward(gy)
    np.testing.assert_array_equal(y.detach().numpy(), ref.detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), cx.grad.numpy())
    np.testing.assert_array_equal(w.grad.numpy(), cw.grad.to(hx.bfloat16).numpy())
    if norm == "layer_norm":
        np.testing.assert_array_equal(b.grad.numpy(), cb.grad.to(hx.bfloat16).numpy())


def test_layer_norm_refuses_mixed_outside_autocast():
    x = hx.ones(2, 4)
    with pytest.raises(TypeError, match="layer_norm: dtypes float32 and bfloat16"):
        hx.nn.functional.layer_norm(x, (4,), hx.ones(4, dtype=hx.bfloat16))


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")
def test_rms_norm_mixed_matches_pytorch():
    """rms_norm takes a weight of another float dtype outside autocast too, as PyTorch's
    does: float32 out, the weight's gradient in its dtype."""
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(2)
    xn, wn = g.standard_normal((3, 6)).astype(np.float32), g.standard_normal(6)
    x = hx.from_numpy(xn).requires_grad_()
    w = hx.from_numpy(wn.astype(np.float32)).to(hx.bfloat16).detach().requires_grad_()
    y = hx.nn.functional.rms_norm(x, (6,), w, eps=1e-6)
    y.sum().backward()
    tx = torch.from_numpy(xn).requires_grad_()
    tw = torch.from_numpy(wn.astype(np.float32)).to(torch.bfloat16).requires_grad_()
    ty = torch.nn.functional.rms_norm(tx, (6,), tw, eps=1e-6)
    ty.sum().backward()
    assert ty.dtype == torch.float32 and tw.grad.dtype == torch.bfloat16
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w.grad.float().numpy(), tw.grad.float().numpy(), rtol=1e-2)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_bfloat16_with_float16_computes_in_float32(device, request):
    """bfloat16 beside float16 promotes to float32 (PyTorch's promote_types): both are
    read as they are, and the gradients come back in bfloat16 and float16."""
    device = _device(device, request)
    g = np.random.default_rng(3)
    a = hx.from_numpy(g.standard_normal(6).astype(np.float32)).to(device)
    b = hx.from_numpy(g.standard_normal(6).astype(np.float32)).to(device)
    x = a.to(hx.bfloat16).detach().requires_grad_()
    y = b.to(hx.float16).detach().requires_grad_()
    out = x * y
    assert out.dtype is hx.float32
    out.sum().backward()
    assert x.grad.dtype is hx.bfloat16 and y.grad.dtype is hx.float16
    np.testing.assert_array_equal(out.detach().numpy(), (x.float() * y.float()).detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().float().to(hx.bfloat16).numpy())
    np.testing.assert_array_equal(y.grad.numpy(), x.detach().float().to(hx.float16).numpy())


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("activation", [None, "gelu", "gelu_tanh"])
@pytest.mark.parametrize("shape", [(2, 5, 12), (300, 20)], ids=["batched", "long"])
def test_linear_reads_float32_input_rounded_under_autocast(shape, activation, device,
                                                           request):
    """Under autocast a Linear with a bf16 weight takes a float32 input as it is: the
    kernel rounds it to bf16 as it reads it, with no Cast node, and the input's gradient
    comes back in float32 rounded through bf16; all of it bit for bit what the explicit
    casts give."""
    device = _device(device, request)
    g = np.random.default_rng(4)
    n_in, n_out = shape[-1], 10
    x = hx.from_numpy(g.standard_normal(shape).astype(np.float32)).to(device)
    w = hx.from_numpy(g.standard_normal((n_out, n_in)).astype(np.float32)).to(device)
    b = hx.from_numpy(g.standard_normal(n_out).astype(np.float32)).to(device)
    gy = hx.from_numpy(g.standard_normal(shape[:-1] + (n_out,)).astype(np.float32))
    x = x.detach().requires_grad_()
    w, b = (t.to(hx.bfloat16).detach().requires_grad_() for t in (w, b))
    with hx.autocast(dtype=hx.bfloat16):
        y = hx.nn.functional.linear(x, w, b, activation=activation)
    assert y.dtype is hx.bfloat16
    assert not any(n.startswith("Cast") for n in _nodes(y)), _nodes(y)
    y.backward(gy.to(device).to(hx.bfloat16))
    assert x.grad.dtype is hx.float32 and w.grad.dtype is hx.bfloat16

    cx, cw, cb = (t.detach().requires_grad_() for t in (x, w, b))
    ref = hx.nn.functional.linear(cx.to(hx.bfloat16), cw, cb, activation=activation)
    ref.backward(gy.to(device).to(hx.bfloat16))
    for got, want in ((y.detach(), ref.detach()), (x.grad, cx.grad), (w.grad, cw.grad),
                      (b.grad, cb.grad)):
        assert got.dtype is want.dtype
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_linear_autocast_matches_pytorch():
    """The same against PyTorch's CPU bf16 autocast (a float32 input, bf16 weights)."""
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(5)
    xn, wn, bn = (g.standard_normal(s).astype(np.float32) for s in ((6, 16), (8, 16), (8,)))
    x = hx.from_numpy(xn).requires_grad_()
    w, b = (hx.from_numpy(t).to(hx.bfloat16).detach().requires_grad_() for t in (wn, bn))
    with hx.autocast(dtype=hx.bfloat16):
        y = hx.nn.functional.linear(x, w, b)
    y.float().sum().backward()
    tx = torch.from_numpy(xn).requires_grad_()
    tw, tb = (torch.from_numpy(t).to(torch.bfloat16).requires_grad_() for t in (wn, bn))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ty = torch.nn.functional.linear(tx, tw, tb)
    ty.float().sum().backward()
    assert ty.dtype == torch.bfloat16 and tx.grad.dtype == torch.float32
    np.testing.assert_allclose(y.float().detach().numpy(), ty.float().detach().numpy(),
                               rtol=1e-2, atol=1e-2)
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(w.grad.float().numpy(), tw.grad.float().numpy(), rtol=1e-2)


EDGES = {  # name: (fn, operands as (values, dtype name, requires_grad))
    "0-d float32 with bf16": (lambda a, b: a + b, [(np.array(2.0), "float32", True),
                                                   (np.ones((3, 4)), "bfloat16", True)]),
    "0-d bf16 with float32": (lambda a, b: a * b, [(np.array(2.0), "bfloat16", True),
                                                   (np.ones((3, 4)), "float32", True)]),
    "both 0-d": (lambda a, b: a * b, [(np.array(3.0), "bfloat16", True),
                                      (np.array(2.0), "float32", True)]),
    "0-size": (lambda a, b: a * b, [(np.zeros((0, 4)), "float32", True),
                                    (np.zeros((0, 4)), "bfloat16", True)]),
    "int32 with bf16": (lambda a, b: a + b, [(np.arange(12).reshape(3, 4), "int32", False),
                                             (np.ones((3, 4)), "bfloat16", True)]),
    "bool with bf16": (lambda a, b: a * b, [(np.eye(3, 4) > 0, "bool", False),
                                            (np.ones((3, 4)), "bfloat16", True)]),
    "transposed": (lambda a, b: a.mT / b, [(np.arange(12.0).reshape(4, 3), "float32", True),
                                           (np.full((3, 4), 2.0), "bfloat16", True)]),
    "expanded": (lambda a, b: a + b.expand(3, 4), [(np.ones((3, 4)), "float32", True),
                                                   (np.arange(4.0)[None], "bfloat16", True)]),
    "flipped float16": (lambda a, b: a.flip(0).maximum(b), [
        (np.arange(12.0).reshape(3, 4), "float32", True), (np.full((3, 4), 5.0), "float16", True)]),
}


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("case", list(EDGES))
def test_mixed_edges_match_pytorch(case, device, request):
    """0-d operands (which promote within their category as PyTorch says), 0-size ones,
    ints and bools beside bf16, and views: dtypes, values and gradients as PyTorch's."""
    torch = pytest.importorskip("torch")
    device = _device(device, request)
    fn, operands = EDGES[case]
    hs = [hx.from_numpy(np.asarray(v, np.float32) if d != "bool" else np.asarray(v)).to(device)
          .to(getattr(hx, d)).detach().requires_grad_(rg) for v, d, rg in operands]
    ts = [torch.from_numpy(np.asarray(v, np.float32) if d != "bool" else np.asarray(v))
          .to(getattr(torch, d)).requires_grad_(rg) for v, d, rg in operands]
    y, ty = fn(*hs), fn(*ts)
    assert y.dtype.name == str(ty.dtype).removeprefix("torch.") and y.shape == tuple(ty.shape)
    np.testing.assert_array_equal(y.detach().float().numpy(), ty.detach().float().numpy())
    y.float().sum().backward()
    ty.float().sum().backward()
    for h, t, (_, _, rg) in zip(hs, ts, operands):
        if rg:
            assert h.grad.dtype.name == str(t.grad.dtype).removeprefix("torch.")
            np.testing.assert_array_equal(h.grad.float().numpy(), t.grad.float().numpy())
