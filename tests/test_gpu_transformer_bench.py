"""benchmarks/gpu_transformer.py at its small size on whatever wgpu adapter exists: the
bf16 step beside Haelixe's own fp32 one in the same rounds (--own-f32) starts from the
same loss as fp32 (and as PyTorch where it is installed) and reports their ratio."""

from __future__ import annotations

import benchmark_script
import pytest

pytestmark = pytest.mark.gpu


def test_bf16_against_own_f32_in_the_same_rounds(be, capsys):
    bench = benchmark_script.load("gpu_transformer")
    report = bench.main(["--small", "--dtype", "bf16", "--own-f32", "--steps", "1",
                         "--rounds", "2", "--warmup", "1"])
    rates = report["steps_per_s"]
    assert {"haelixe (gpu)", "haelixe (gpu, f32)"} <= set(rates)
    assert all(r["median"] > 0 for r in rates.values())
    assert report["ratio_to_own_f32"] == pytest.approx(
        rates["haelixe (gpu)"]["median"] / rates["haelixe (gpu, f32)"]["median"])
    first = report["first_loss"]
    # the same weights and batch: bf16 weights and autocast move the loss by ~1e-4
    assert first["haelixe (gpu)"] == pytest.approx(first["haelixe (gpu, f32)"], rel=2e-3)
    for name, loss in first.items():
        if name.startswith("torch"):
            assert first["haelixe (gpu)"] == pytest.approx(loss, rel=2e-3)
    assert "haelixe bf16 / haelixe f32 steps/s" in capsys.readouterr().out
