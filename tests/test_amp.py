"""BF16 mixed precision: rounding, the autocast policy, master weights, memory."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import haelixe as hx
from haelixe import nn
from haelixe.amp import POLICY, memory_report, round_to
from haelixe.nn import functional as F
from haelixe.optim import AdamW


def test_bf16_cast_matches_ml_dtypes_bit_for_bit():
    # ties to even, around powers of two, subnormals, inf and nan
    specials = np.array([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 1.0 + 2 ** -8 + 2 ** -20, 2 ** -130,
                         -0.0, np.inf, -np.inf, np.nan, 3.4e38, 1e-45], np.float32)
    rnd = np.random.default_rng(0).standard_normal(1000).astype(np.float32) * 100
    x = np.concatenate([specials, rnd])
    got = hx.from_numpy(x).to(hx.bfloat16).numpy().view(np.uint16)
    want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(got, want)


def test_module_to_bf16_halves_parameter_bytes():
    model = nn.TransformerBlock(32, 4)
    f32 = memory_report(model)["parameters"]["float32"]
    model.to(hx.bfloat16)
    report = memory_report(model)["parameters"]
    assert report == {"bfloat16": f32 // 2}
    assert all(p.dtype is hx.bfloat16 for p in model.parameters())


def test_autocast_policy_dtypes_and_grads():
    lin = nn.Linear(8, 8).to(hx.bfloat16)
    norm = nn.RMSNorm(8).to(hx.bfloat16)
    x = hx.randn(2, 8, requires_grad=True)  # so its cast is recorded too
    with hx.autocast(dtype=hx.bfloat16):
        h = lin(x)
        assert h.dtype is hx.bfloat16                       # matmul family returns BF16
        n = norm(h)
        assert n.dtype is hx.float32                        # norms compute and return F32
        assert n.softmax(-1).dtype is hx.float32
        assert (h @ h.mT).dtype is hx.bfloat16
        loss = F.mse_loss(n, hx.zeros(2, 8))
        assert loss.dtype is hx.float32
    loss.backward()
    assert lin.weight.grad.dtype is hx.bfloat16             # gradients in the param dtype
    assert norm.weight.grad.dtype is hx.bfloat16
    ops = {node.op for node in hx.autograd.graph(loss).nodes}
    # both precision changes show: the norm's cast to F32 as a Cast node, the Linear's
    # read of the F32 input rounded to BF16 (inside its kernel) in its node's name
    assert "Cast(bfloat16->float32)" in ops and "Linear(float32->bfloat16)" in ops
    assert set(POLICY) >= {"matmul", "linear", "attention", "norm", "loss"}


def test_autocast_linear_accumulates_in_f32():
    # 4096 products of 1/64: BF16 accumulation would stall, F32 gets the exact 64 * 1/64...
    w = hx.full((1, 4096), 1 / 64, dtype=hx.bfloat16)
    x = hx.ones(1, 4096)
    with hx.autocast():
        y = F.linear(x, w)
    assert y.float().item() == 64.0


def test_autocast_is_off_outside_and_can_be_disabled():
    lin = nn.Linear(4, 4)
    x = hx.randn(1, 4)
    with hx.autocast(), hx.autocast(enabled=False):
        assert lin(x).dtype is hx.float32
    assert lin(x).dtype is hx.float32


def _tiny_updates(master):
    # grad of 1e-4 * w is constant, so every AdamW step moves w by ~lr = 1e-3, below half
    # the BF16 spacing at 1.0 (2^-8 = 0.0039)
    w = nn.Parameter(hx.ones(4, dtype=hx.bfloat16))
    opt = AdamW([w], lr=1e-3, weight_decay=0.0, master_weights=master)
    for _ in range(100):
        opt.zero_grad()
        (w.float() * 1e-4).sum().backward()
        opt.step()
    return w.detach().float().numpy()


def test_master_weights_keep_updates_plain_bf16_loses():
    lost = _tiny_updates(master=False)
    kept = _tiny_updates(master=True)
    np.testing.assert_array_equal(lost, np.ones(4))             # every update rounded away
    assert np.all(np.abs(kept - 0.9) < 0.004)                   # 100 x 1e-3 arrived


def test_master_weights_state_is_f32():
    w = nn.Parameter(hx.ones(10, dtype=hx.bfloat16))
    opt = AdamW([w], master_weights=True)
    rep = memory_report(None, opt)["optimizer_state"]
    assert rep == {"float32": 3 * 10 * 4}  # m, v and the master copy


def test_stochastic_rounding_is_unbiased():
    hx.manual_seed(0)
    x = hx.full((20000,), 1.0 + 2 ** -10)  # a quarter of the way to the next bf16
    r = round_to(x, hx.bfloat16, stochastic=True).float().numpy()
    assert set(np.unique(r)) == {1.0, 1.0 + 2 ** -7}
    assert r.mean() == pytest.approx(1.0 + 2 ** -10, abs=2e-4)
    assert round_to(x, hx.bfloat16).float().numpy()[0] == 1.0  # nearest even


def test_bf16_denoiser_trains():
    from haelixe.denoise import train

    res = train("seed", epochs=6, steps_per_epoch=50, dtype="bf16")
    assert res["final_mse"] < 0.5 * res["noise_mse"]
    assert all(p.dtype is hx.bfloat16 for p in res["model"].parameters())
