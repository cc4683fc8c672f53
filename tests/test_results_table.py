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


# Lines of the GPU benchmarks' reports, in the formats they print
GPU_REPORTS = {
    "gpu-denoiser-eager": "  ratio haelixe / pytorch: 0.84x [0.77 .. 1.12]\n",
    "gpu-attention": "".join(
        f"attention {shape} causal=False: haelixe fwd 1.0 [1.0-1.1] ms (20.6 TFLOP/s), "
        f"fwd+bwd 3.0 [3.0-3.1] ms | torch fwd 0.9 [0.9-0.9] ms, fwd+bwd 2.0 [2.0-2.0] ms "
        f"| ratio fwd {fwd}, fwd+bwd {both}, rel err 1e-06\n"
        f"attention {shape} causal=True: haelixe fwd 9.0 [9.0-9.0] ms (1.0 TFLOP/s), "
        f"fwd+bwd 9.0 [9.0-9.0] ms | torch fwd 1.0 [1.0-1.0] ms, fwd+bwd 1.0 [1.0-1.0] ms "
        f"| ratio fwd 0.11, fwd+bwd 0.11, rel err 1e-06\n"
        for shape, fwd, both in [("(8, 16, 4096, 64)", 0.87, 0.8),
                                 ("(4, 16, 4096, 128)", 0.63, 0.85),
                                 ("(16, 8, 512, 64)", 0.66, 0.74)]),
    "gpu-transformer": "    torch (cuda):    31.57 steps/s [30.58-31.60] over 5 rounds\n"
                       "   haelixe (gpu):    20.13 steps/s [19.44-21.35] over 5 rounds\n"
                       "haelixe / torch steps/s: 0.64\n",
    "gpu-transformer-bf16": "haelixe bf16 / haelixe f32 steps/s: 1.01 (per round 1.02 "
                            "[0.94-1.03])\n",
}


def test_gpu_figures_are_read_from_their_reports_lines():
    """Each GPU figure reads its own value: the attention shapes apart, the causal lines
    skipped, the bf16 figure per round with its range."""
    got = {f.key: results.read_figure(f, GPU_REPORTS[b.name])
           for b in results.BENCHES if b.name in GPU_REPORTS for f in b.figures}
    assert got["gpu-eager-ratio"] == (0.84, 0.77, 1.12)
    assert got["gpu-attention-8x16x4096x64-fwd"] == (0.87,) * 3
    assert got["gpu-attention-8x16x4096x64-fwd-bwd"] == (0.8,) * 3
    assert got["gpu-attention-4x16x4096x128-fwd-bwd"] == (0.85,) * 3
    assert got["gpu-attention-16x8x512x64-fwd"] == (0.66,) * 3
    assert got["gpu-transformer-haelixe"] == (20.13, 19.44, 21.35)
    assert got["gpu-transformer-torch"] == (31.57, 30.58, 31.6)
    assert got["gpu-transformer-ratio"] == (0.64,) * 3
    assert got["gpu-bf16-own-ratio"] == (1.02, 0.94, 1.03)


def test_gpu_headlines_go_to_the_gpu_table_and_cpu_ones_to_the_cpu_table():
    """A figure of a GPU benchmark is a headline of the README's GPU table only, and the
    README's two tables are replaced each between its own markers."""
    figures = {f.key: (1.0, 1.0, 1.0, 1) for b in results.BENCHES for f in b.figures}
    cpu, gpu = results.headline_rows(figures, False), results.headline_rows(figures, False,
                                                                             gpu=True)
    assert cpu and gpu and not set(cpu) & set(gpu)
    assert all("gpu_" in row or "GPU" in row or "--device gpu" in row for row in gpu)
    text = (f"a\n{results.HEADLINE_BEGIN}\nold\n{results.HEADLINE_END}\nb\n"
            f"{results.GPU_HEADLINE_BEGIN}\nold gpu\n{results.GPU_HEADLINE_END}\nc\n")
    out = results.update_readme(gpu, text, "", results.GPU_HEADLINE_BEGIN,
                                results.GPU_HEADLINE_END)
    assert "\nold\n" in out and "old gpu" not in out and gpu[0] in out


REAL_PROGRAMS_REPORT = """\
40 steps per model; steps/s as median [range] over 3 rounds per thread count [1, 2]; first \
step of a fresh model apart

gpt: held-out loss after 40 steps haelixe 2.11910 torch 2.11910 (rel diff 2.8e-08); first \
step haelixe 449.6 ms (its compiled kernels loaded 1093 ms after), torch 228.9 ms
  1 thread(s): steps/s haelixe     3.9 [3.9..3.9]  torch     4.2 [4.2..4.2]  ratio 0.93x
  2 thread(s): steps/s haelixe     5.2 [5.1..5.2]  torch     7.2 [7.2..7.7]  ratio 0.72x

rnn: held-out loss after 40 steps haelixe 2.56954 torch 2.56954 (rel diff 4.6e-08); first \
step haelixe 3.3 ms (its compiled kernels loaded 0 ms after), torch 101.7 ms
  1 thread(s): steps/s haelixe   384.5 [370.8..399.1]  torch   380.7 [378.6..402.5]  ratio 1.01x
  2 thread(s): steps/s haelixe   380.1 [351.2..413.6]  torch   196.9 [188.1..200.5]  ratio 1.93x
"""


def test_each_real_programs_figure_is_read_from_its_own_models_lines():
    bench = _bench("real-programs")
    got = {f.key: results.read_figure(f, REAL_PROGRAMS_REPORT) for f in bench.figures}
    assert got["real-gpt-ratio-1"] == (0.93,) * 3
    assert got["real-gpt-ratio-default"] == (0.72,) * 3
    assert got["real-gpt-loss"] == (2.8e-08,) * 3
    assert got["real-gpt-first"] == (449.6,) * 3
    assert got["real-rnn-ratio-1"] == (1.01,) * 3
    assert got["real-rnn-ratio-default"] == (1.93,) * 3
    assert got["real-rnn-first"] == (3.3,) * 3
    assert got["real-lstm-ratio-1"] is None  # (a model the report lacks: not measured)
    assert set(results.REAL_PROGRAMS) == set(__import__("real_programs").SIZES)


def test_tracking_figures_are_read_from_a_real_short_run():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")]))
    out = subprocess.run([sys.executable, "benchmarks/viz_overhead.py", "--part", "tracking",
                          "--tracking-rounds", "5", "--tracking-steps", "1"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300,
                         check=True).stdout
    for f in _bench("viz-tracking").figures:
        med, lo, hi = results.read_figure(f, out)
        assert 0 < lo <= med <= hi, (f.key, out)
