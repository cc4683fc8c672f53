"""Every WGSL module the engine generates is WebGPU's language, not only naga's: the
modules of a representative workload (tests/wgsl_workload.py, with the features a
browser lacks turned off) compile in headless Chromium's WebGPU (Tint, SwiftShader
adapter), and a set of ops run there on small inputs equal the CPU backend's results.

Tint enforces what naga lets pass: no constant expression may be inf or NaN, subgroup
builtins need ``enable subgroups;``, and every barrier must sit in uniform control flow
(WGSL's uniformity analysis). Skipped where chromium or a wgpu adapter is missing."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from webgpu_browser import CHROMIUM, SKIP_REASON, webgpu_page

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON)]

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def workload(be, tmp_path_factory):
    """The modules and the recorded cases of tests/wgsl_workload.py, run in a process of
    its own (the features are chosen when its device is made)."""
    out = tmp_path_factory.mktemp("wgsl") / "workload.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "wgsl_workload.py"), str(out)],
                          env=env, capture_output=True, text=True, timeout=WORKLOAD_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def chromium_webgpu():
    pytest.importorskip("playwright.sync_api")
    try:
        with webgpu_page() as page:
            yield page
    except RuntimeError as err:
        pytest.skip(str(err))


def test_workload_generates_every_kernel_family(workload):
    families = collections.Counter(m["label"] for m in workload["modules"])
    entries = {label.split(":")[1] for label in families}
    for entry in ("map", "matmul", "matmul_reduce", "attention_forward",
                  "attention_forward_tiled", "attention_dq",
                  "attention_dkdv", "softmax", "layernorm", "rmsnorm", "adamw"):
        assert any(e.startswith(entry) for e in entries), f"no {entry} module in {entries}"
    assert len(workload["modules"]) > 150


def test_every_generated_module_compiles_in_chromium(workload, chromium_webgpu):
    modules = workload["modules"]
    results = chromium_webgpu.compile([m["source"] for m in modules])
    failures = [f"{m['label']}: {errors[0]}" for m, errors in zip(modules, results) if errors]
    assert not failures, (f"{len(failures)} of {len(modules)} modules rejected by Tint:\n"
                          + "\n".join(failures[:40]))


def test_kernels_run_in_chromium_equal_the_cpu(workload, chromium_webgpu):
    mismatches = []
    for case in workload["cases"]:
        got = chromium_webgpu.run(case)
        kernels = ", ".join(k["name"] for k in case["kernels"])
        if "error" in got:
            mismatches.append(f"{case['label']} ({kernels}): {got['error']}")
            continue
        words = np.asarray(got["values"], np.float32)
        value = np.lib.stride_tricks.as_strided(
            words[case["offset"]:], case["shape"], [4 * s for s in case["strides"]])
        expected = np.asarray(case["expected"], np.float32)
        if not np.allclose(value, expected, rtol=1e-5, atol=1e-5):
            mismatches.append(f"{case['label']} ({kernels}): max error "
                              f"{np.abs(value - expected).max():.3g}")
    assert not mismatches, "\n".join(mismatches)
    assert len(workload["cases"]) >= 8


def test_subgroup_modules_enable_the_extension_and_naga_gets_them_without():
    from haelixe.backends.wgpu.shaders import for_naga, module_source

    params = (("SECTIONS", "rows_subgroup"), ("SG_ARGS", ", @builtin(num_subgroups) sg_n: u32"),
              ("SG_SET", "let sgs = sg_n;"), ("WG", "32"))
    bindings = (("x", "f32", "read"), ("out", "f32", "write"))
    src = module_source("softmax.wgsl", "softmax", bindings, params + (("LOG", "false"),))
    assert src.startswith("enable subgroups;\n")
    assert "enable subgroups;" not in for_naga(src) and "subgroupAdd" in for_naga(src)
    tree = module_source("softmax.wgsl", "softmax", bindings,
                         (("SECTIONS", "rows_tree"), ("SG_ARGS", ""), ("SG_SET", "let sgs = 1u;"),
                          ("WG", "32"), ("LOG", "false")))
    assert not tree.startswith("enable") and "subgroupAdd(" not in tree
