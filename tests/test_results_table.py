"""benchmarks/results.py reads each figure from its benchmark's own report and writes one
table naming the machine, the BLAS kernels, PyTorch's version and the date."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import results  # noqa: E402  (benchmarks/results.py)


def _bench(name):
    return next(b for b in results.BENCHES if b.name == name)


def test_figures_are_read_from_a_real_benchmark_report():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")]))
    out = subprocess.run([sys.executable, "benchmarks/autograd_overhead.py", "--repeat", "1",
                          "--number", "20"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    bench = _bench("autograd")
    got = {f.key: results.read_figure(f, out) for f in bench.figures}
    torch_keys = {"autograd-mulsum-torch", "autograd-mix-torch", "autograd-mix-ratio"}
    for key, value in got.items():
        if key in torch_keys and "torch" not in out.splitlines()[1]:
            continue  # PyTorch absent: no comparison column
        assert value is not None, (key, out)
        med, lo, hi = value
        assert lo <= med <= hi and med > 0, key


def test_an_app_figure_is_read_from_its_json_line():
    fig = next(f for f in _bench("denoise-seed-f32").figures if f.key.endswith("-train"))
    report = '{"final_mse": 6.6e-07, "heldout_mse": 6.5e-07}\n'
    assert results.read_figure(fig, report) == (6.6e-07,) * 3
    assert results.read_figure(fig, "no json here\n") is None


def test_a_missing_figure_is_said_in_the_table_not_dropped():
    info = {"cpu": "a CPU", "cores": 2, "os": "Linux", "numpy": "2", "blas": "openblas",
            "python": "3.11", "pytorch": "not installed"}
    text = results.render({}, info, True, ("1", "1"), False, ["step-ratio"])
    assert "not measured" in text and "machine load not controlled" in text


def test_the_results_table_names_the_machine_blas_pytorch_and_date():
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    for field in ("- date: ", "- CPU: ", "BLAS: ", "kernels", "PyTorch ", "load average"):
        assert field in text, field
    assert "| figure | median | range | unit | command |" in text
