"""benchmarks/gpu_matmul_sweep.py's section 6 at its small size on whatever wgpu adapter
exists: every operand kind (fp32, bf16, f16, fp32 read as bf16) and epilogue is timed,
on the chosen tile and on the 16-bit one."""

from __future__ import annotations

import benchmark_script
import pytest

pytestmark = pytest.mark.gpu


def test_sixteen_bit_section_times_every_kind_on_every_tile(be, capsys):
    bench = benchmark_script.load("gpu_matmul_sweep")
    report = bench.main(["--small", "--skip", "alu", "square", "f16", "linears",
                         "attention"])
    rows = report["sixteen_bit"]
    kinds = {(r["operands"], r["epilogue"]) for r in rows}
    assert kinds == {(k, e) for k in ("f32", "bf16", "f16", "f32 read as bf16")
                     for e in ("bias", "bias+gelu+pre")}
    for r in rows:
        assert isinstance(r["times"]["choose()"], float) and r["times"]["choose()"] > 0
        assert isinstance(r["times"]["128x128k8"], float)
    assert "6. 16-bit Linear forward" in capsys.readouterr().out
