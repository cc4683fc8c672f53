"""The documentation site builds in strict mode (a warning or a broken link fails it), lists
every public name with its signature, and renders the labs with their saved outputs."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
pytest.importorskip("mkdocstrings")
pytest.importorskip("mkdocs_jupyter")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    return out


def _text(path: Path) -> str:
    return re.sub(r"<[^>]+>", "", path.read_text())


def test_docs_build_strict_with_the_guide_architecture_and_results(site):
    for page in ("guide/index.html", "guide/labs/index.html", "guide/devices/index.html",
                 "guide/mixed_precision/index.html", "guide/data_and_checkpoints/index.html",
                 "guide/widgets/index.html", "guide/capture/index.html",
                 "guide/pytorch_programs/index.html", "ARCHITECTURE/index.html",
                 "results/index.html"):
        assert (site / page).exists(), page


def test_api_reference_lists_every_public_name_with_its_signature(site):
    import importlib

    from haelixe.tensor import Tensor

    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    import site_pages as hooks

    for page, (_, _, modules) in hooks.NAMESPACES.items():
        text = _text(site / page.replace(".md", "") / "index.html")
        for module_name, prefix in modules:
            module = importlib.import_module(module_name)
            for name in hooks.public_names(module):
                obj = getattr(module, name)
                assert f"{prefix}{name}" in text, (page, name)
                if inspect.isfunction(obj):
                    params = list(inspect.signature(obj).parameters)
                    assert all(p in text for p in params), (page, name)
    tensor = _text(site / "api" / "tensor" / "index.html")
    assert all(f"Tensor.{name}" in tensor for name in hooks.tensor_members(Tensor))
    nn = _text(site / "api" / "nn" / "index.html")
    assert "nn.Linear(in_features" in nn and "nn.Module.state_dict" in nn


def test_labs_are_rendered_with_their_saved_outputs(site):
    for nb in sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb")):
        html = (site / "labs" / nb.stem / "index.html").read_text()
        assert "jp-OutputArea" in html or "output_area" in html, nb.name
    dashboard = (site / "labs" / "05_transformer_denoiser" / "index.html").read_text()
    assert "<svg" in dashboard or "<img" in dashboard
