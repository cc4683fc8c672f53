"""hx.amp.GradScaler against torch.amp.GradScaler: the same scale sequence, skipped steps
and parameters, step for step, on the CPU and the GPU; its errors; its state dict."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx
from haelixe import nn
from haelixe.optim import SGD

torch = pytest.importorskip("torch")


def _devices():
    out = ["cpu"]
    try:
        from haelixe.backends.wgpu.context import gpu_available

        if gpu_available():
            out.append("gpu")
    except ImportError:
        pass
    return out


# inf appears in the loss at these steps (a gradient overflow in fp16 training)
BAD_STEPS = {1, 2, 5}


def _run(lib, lin, opt, scaler, xs, to_device, weight):
    """Scaled steps with inf in the loss at BAD_STEPS: (scales, weights) after each."""
    scales, params = [], []
    for i, x in enumerate(xs):
        opt.zero_grad()
        loss = (lin(to_device(lib.from_numpy(x))) ** 2).mean()
        if i in BAD_STEPS:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        params.append(weight(lin))
    return scales, params, scaler.state_dict()


def _torch_run(w0, b0, xs, **kw):
    lin = torch.nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w0))
        lin.bias.copy_(torch.from_numpy(b0))
    opt = torch.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    return _run(torch, lin, opt, torch.amp.GradScaler("cpu", **kw), xs, lambda t: t,
                lambda m: m.weight.detach().numpy().copy())


def _haelixe_run(w0, b0, xs, device, **kw):
    lin = nn.Linear(3, 2)
    with hx.no_grad():
        lin.weight.copy_(hx.from_numpy(w0))
        lin.bias.copy_(hx.from_numpy(b0))
    lin = lin.to(device)
    opt = SGD(lin.parameters(), lr=0.1, momentum=0.9)
    return _run(hx, lin, opt, hx.amp.GradScaler(device, **kw), xs,
                lambda t: t.to(device), lambda m: m.weight.detach().to("cpu").numpy().copy())


@pytest.mark.parametrize("device", _devices())
def test_grad_scaler_matches_torch_step_for_step(device):
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((2, 3)).astype(np.float32)
    b0 = rng.standard_normal(2).astype(np.float32)
    xs = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(9)]
    kw = dict(init_scale=2.0 ** 10, growth_interval=2)
    ts, tp, tstate = _torch_run(w0, b0, xs, **kw)
    hs, hp, hstate = _haelixe_run(w0, b0, xs, device, **kw)
    assert hs == ts  # backoff at the bad steps, growth after two clean ones
    for i, (a, b) in enumerate(zip(hp, tp)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"step {i}")
    assert hstate == {k: tstate[k] for k in hstate} and set(hstate) == set(tstate)


def test_grad_scaler_scale_nested_and_disabled():
    s = hx.amp.GradScaler(init_scale=4.0)
    a, b = hx.ones(2), hx.full((1,), 2.0)
    out = s.scale([a, (b,)])
    assert out[0].tolist() == [4.0, 4.0] and out[1][0].tolist() == [8.0]
    off = hx.amp.GradScaler(enabled=False)
    assert off.scale(a) is a and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(TypeError, match="expected a tensor"):
        s.scale(3.0)


def test_grad_scaler_errors_match_torch():
    p = nn.Parameter(hx.ones(2))
    opt = SGD([p], lr=0.1)
    s = hx.amp.GradScaler()
    with pytest.raises(AssertionError, match="No inf checks"):
        s.update()
    (s.scale(p.sum())).backward()
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        s.unscale_(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        s.step(opt)
    s.update()
    with pytest.raises(RuntimeError, match="Closure"):
        s.step(opt, closure=lambda: 0)
    with pytest.raises(ValueError, match="growth_factor"):
        hx.amp.GradScaler(growth_factor=1.0)
    with pytest.raises(RuntimeError, match="state dict is empty"):
        hx.amp.GradScaler().load_state_dict({})
    h = nn.Parameter(hx.ones(2, dtype=hx.float16))
    opt16 = SGD([h], lr=0.1)
    (s.scale(h.float().sum())).backward()
    with pytest.raises(ValueError, match="FP16 gradients"):
        s.unscale_(opt16)


def test_grad_scaler_state_dict_round_trip_and_new_scale():
    s = hx.amp.GradScaler(init_scale=8.0, growth_factor=3.0, backoff_factor=0.25,
                          growth_interval=7)
    s._growth_tracker = 3
    t = hx.amp.GradScaler()
    t.load_state_dict(s.state_dict())
    assert t.state_dict() == s.state_dict() == {
        "scale": 8.0, "growth_factor": 3.0, "backoff_factor": 0.25, "growth_interval": 7,
        "_growth_tracker": 3}
    p = nn.Parameter(hx.ones(1))
    opt = SGD([p], lr=0.1)
    t.scale(p.sum()).backward()
    t.step(opt)
    t.update(new_scale=hx.tensor(5.0))
    assert t.get_scale() == 5.0


def test_skipped_step_leaves_parameters_and_float16_autocast_trains():
    """A float16 autocast step with the scaler: an overflowing step changes nothing."""
    hx.manual_seed(0)
    lin = nn.Linear(4, 4)
    opt = SGD(lin.parameters(), lr=0.05)
    s = hx.amp.GradScaler(init_scale=2.0 ** 8)
    x = hx.randn(8, 4)
    before = lin.weight.detach().numpy().copy()
    with hx.autocast(dtype=hx.float16):
        loss = (lin(x).float() ** 2).mean() * float("inf")
    s.scale(loss).backward()
    assert s.step(opt) is None
    s.update()
    np.testing.assert_array_equal(lin.weight.detach().numpy(), before)
    assert s.get_scale() == 2.0 ** 7
    opt.zero_grad()
    with hx.autocast(dtype=hx.float16):
        loss = (lin(x).float() ** 2).mean()
    s.scale(loss).backward()
    s.step(opt)
    s.update()
    assert not np.array_equal(lin.weight.detach().numpy(), before)
