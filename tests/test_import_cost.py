"""`import haelixe` stays light: the heavy optional modules load on first use. ml_dtypes
(registering its ufunc loops with numpy takes most of a second) comes with the first
bfloat16, numba with the compiled CPU kernels. Each check runs in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("ml_dtypes", "numba", "llvmlite", "wgpu", "torch", "matplotlib", "ipywidgets",
         "threadpoolctl", "safetensors", "tqdm", "scipy")


def _fresh(code: str) -> dict:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_loads_no_heavy_module_and_bfloat16_then_works():
    got = _fresh(f"""
import json, sys
import numpy as np
import haelixe as hx
loaded = sorted(m for m in {HEAVY!r} if m in sys.modules)
t = hx.ones((2, 3), dtype=hx.bfloat16)
y = t @ t.T  # (the CPU's 16-bit path: float32 inside, rounded back)
print(json.dumps({{"loaded": loaded, "ml_dtypes": "ml_dtypes" in sys.modules,
                  "dtype": repr(y.dtype), "np": str(y.numpy().dtype),
                  "same": bool(y.numpy().dtype == hx.bfloat16.np), "kind": y.numpy().dtype.kind,
                  "value": y.sum().item(), "signed": hx.bfloat16.is_signed}}))
""")
    assert got["loaded"] == []
    assert got["ml_dtypes"] and got["dtype"] == "hx.bfloat16" and got["np"] == "bfloat16"
    assert got["same"] and got["kind"] == "V" and got["value"] == 12.0
    assert got["signed"] is True  # as torch.bfloat16.is_signed


def test_a_bfloat16_array_made_before_haelixe_used_one_is_known():
    got = _fresh("""
import io, json
import ml_dtypes
import numpy as np
import haelixe as hx
from haelixe import pickled
a = np.arange(3, dtype=ml_dtypes.bfloat16)
buf = io.BytesIO()
pickled.save({"a": a}, buf)  # (its dtype looked up before bfloat16's first use)
buf.seek(0)
back = pickled.load(buf)["a"]
t = hx.from_numpy(np.arange(2, dtype=ml_dtypes.bfloat16))
print(json.dumps({"back": str(back.dtype), "equal": back.tolist() == a.tolist(),
                  "tensor": repr(t.dtype), "sum": repr((t + t).dtype)}))
""")
    assert got == {"back": "bfloat16", "equal": True, "tensor": "hx.bfloat16",
                   "sum": "hx.bfloat16"}
