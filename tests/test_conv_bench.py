"""benchmarks/conv_vs_torch.py at its quick size: the lab's CNN trained in Haelixe and in
PyTorch from the same weights on the same batches gives the same losses, and both
timings are reported with their ratio."""

from __future__ import annotations

import benchmark_script
import pytest


def test_quick_run_reports_both_and_the_losses_agree(capsys):
    bench = benchmark_script.load("conv_vs_torch")
    result = bench.cnn_steps("cpu", steps=4, rounds=2)
    ours, theirs = result["losses"]["haelixe"], result["losses"]["pytorch"]
    assert len(ours) == len(theirs) == 5
    assert ours == pytest.approx(theirs, rel=1e-4)
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert out.count("Haelixe speed / PyTorch's") == 2
    assert "within 1%" in out
