"""The CPU tuning switch (backends/tuning.py): HAELIXE_TUNING names the pieces that are
on, a wrong value is refused with the valid ones, and with every piece off the CPU gives
the same results through plain numpy and BLAS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from haelixe.backends import tuning

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("value,want", [
    (None, tuning.DEFAULT), ("", tuning.DEFAULT), ("0", frozenset()), ("none", frozenset()),
    ("all", frozenset(tuning.PIECES)), ("malloc", frozenset({"malloc"})),
    ("dot_sums, idle_cores", frozenset({"dot_sums", "idle_cores"})),
])
def test_the_switch_names_the_pieces_that_are_on(value, want):
    assert tuning._parse(value) == want


def test_an_unknown_piece_is_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match="idle_cores") as e:
        tuning._parse("malloc,fast_sums")
    assert "fast_sums" in str(e.value) and "HAELIXE_TUNING" in str(e.value)


def test_with_tuning_off_the_cpu_runs_plain_numpy_with_the_same_results():
    code = """
import json, numpy as np, haelixe as hx
from haelixe.backends import cpu, threads
a = np.random.default_rng(0).standard_normal((4, 32, 64)).astype(np.float32)
x = hx.from_numpy(a)
print(json.dumps({"on": sorted(cpu.tuning.ON), "dot_sums": cpu._DOT_SUMS,
                  "measures": threads._MEASURE_IDLE, "free": threads._POLICY.free_cores(),
                  "cap": hx.get_num_threads(), "sampled": threads._POLICY.last is not None,
                  "total": x.sum().item(), "rows": x.sum(-1).numpy().tolist(),
                  "want": float(a.astype(np.float64).sum()),
                  "want_rows": a.astype(np.float64).sum(-1).tolist()}))
"""
    env = dict(os.environ, HAELIXE_TUNING="0", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["on"] == [] and not got["dot_sums"] and not got["measures"]
    assert got["free"] == got["cap"] and not got["sampled"]  # /proc/stat never read
    assert got["total"] == pytest.approx(got["want"], rel=1e-5, abs=1e-4)
    np.testing.assert_allclose(got["rows"], got["want_rows"], rtol=1e-5, atol=1e-5)
