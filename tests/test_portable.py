"""Haelixe without its optional packages: with numba and wgpu blocked (as if not
installed), a fresh interpreter imports the engine, trains the denoiser on numpy alone
(the fused ops as base.py's composed defaults) to the compiled kernels' results, and a
GPU request says which package it needs. ``make test-portable`` runs the CPU suite and the
labs the same way (tests/blocked_imports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

TRAIN = """
import json, sys
import numpy as np
import haelixe as hx
from haelixe.backends.cpu import CPU_BACKEND
from haelixe.data.sine import random_batch
from haelixe.denoise import Denoiser
from haelixe.nn import functional as F
from haelixe.optim import AdamW

hx.set_num_threads(1)  # (a product split over threads rounds differently)
hx.manual_seed(0)
model = Denoiser()
opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
rng = np.random.default_rng(0)
losses = []
for _ in range(4):
    x, y = (hx.from_numpy(v) for v in random_batch(rng, 8, 32))
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
gpu_error = None
try:
    hx.zeros(2, device="gpu")
except Exception as e:
    gpu_error = f"{type(e).__name__}: {e}"
print(json.dumps({
    "backend": type(CPU_BACKEND).__name__,
    "loaded": sorted(m for m in ("numba", "wgpu") if m in sys.modules),
    "losses": losses,
    "params": [p.detach().numpy().tolist() for p in model.parameters()],
    "gpu_error": gpu_error,
}))
"""


def _train(block: str) -> dict:
    env = dict(os.environ, HAELIXE_BLOCK_IMPORTS=block, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "tests" / "blocked_imports"), str(ROOT)]))
    r = subprocess.run([sys.executable, "-c", TRAIN], env=env, capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs():
    return {"blocked": _train("numba,wgpu"), "compiled": _train("wgpu")}


def test_without_numba_and_wgpu_the_cpu_runs_numpy_alone(runs):
    blocked = runs["blocked"]
    assert blocked["backend"] == "CPUBackend"
    assert blocked["loaded"] == []


@pytest.mark.numba
def test_without_numba_training_equals_the_compiled_kernels(runs):
    blocked, compiled = runs["blocked"], runs["compiled"]
    assert compiled["backend"] == "CompiledCPUBackend"
    np.testing.assert_allclose(blocked["losses"], compiled["losses"], rtol=1e-4)
    assert blocked["losses"][-1] < blocked["losses"][0]  # it trains
    for a, b in zip(blocked["params"], compiled["params"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_without_wgpu_the_gpu_names_the_missing_package(runs):
    err = runs["blocked"]["gpu_error"]
    assert err is not None and err.startswith("GpuUnavailableError")
    assert "wgpu" in err and "haelixe[gpu]" in err and 'device="cpu"' in err


def test_the_blocker_refuses_the_modules_and_their_submodules():
    env = dict(os.environ, HAELIXE_BLOCK_IMPORTS="numba,wgpu",
               PYTHONPATH=str(ROOT / "tests" / "blocked_imports"))
    code = ("import importlib\n"
            "for name in ('numba', 'numba.core', 'wgpu', 'wgpu.utils'):\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except ModuleNotFoundError as e:\n"
            "        assert 'HAELIXE_BLOCK_IMPORTS' in str(e), e\n"
            "    else:\n"
            "        raise SystemExit(name + ' imported')\n"
            "import json; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
