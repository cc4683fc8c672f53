"""viz sits on top and reads the engine only through its introspection hooks: no module
of haelixe.viz imports a backend or an app, and without ipywidgets the import names the
extra to install."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import haelixe

PKG = Path(haelixe.__file__).parent
FORBIDDEN = ("haelixe.backends", "haelixe.denoise")


def _package_of(path: Path) -> list[str]:
    rel = path.relative_to(PKG.parent).with_suffix("")
    return list(rel.parts[:-1])


def _imports(path: Path, package: list[str] | None = None) -> set[str]:
    """Absolute names of every module ``path`` imports (at any depth, lazily too);
    ``package`` is the dotted package it lives in, as a list."""
    package = _package_of(path) if package is None else package
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def test_viz_imports_neither_backends_nor_apps():
    files = sorted((PKG / "viz").rglob("*.py"))
    assert len(files) >= 10
    offenders = {str(p.relative_to(PKG)): sorted(m for m in _imports(p)
                                                 if m.startswith(FORBIDDEN))
                 for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_import_check_sees_lazy_relative_imports(tmp_path):
    probe = tmp_path / "probe.py"  # as if it sat in haelixe/viz/
    probe.write_text("def f():\n    from ..denoise import evaluate\n"
                     "    from ..backends.wgpu.allocator import gpu_allocator\n")
    found = _imports(probe, ["haelixe", "viz"])
    assert {"haelixe.denoise", "haelixe.backends.wgpu.allocator"} <= found


def test_graph_split_has_one_job_per_module():
    graph = PKG / "viz" / "graph"
    assert sorted(p.name for p in graph.glob("*.py")) == [
        "__init__.py", "drawing.py", "model.py", "placement.py", "widget.py"]
    for p in graph.glob("*.py"):
        assert len(p.read_text().splitlines()) < 420, p.name
    assert not any("ipywidgets" in m for m in _imports(graph / "drawing.py")
                   | _imports(graph / "placement.py") | _imports(graph / "model.py"))


def test_import_without_ipywidgets_names_the_lab_extra():
    code = ("import sys; sys.modules['ipywidgets'] = None\n"
            "try:\n    import haelixe.viz\nexcept ModuleNotFoundError as e:\n"
            "    print(type(e).__name__, e.name, '|', e)\nelse:\n    print('imported')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=PKG.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ModuleNotFoundError ipywidgets |"), out.stdout
    assert "pip install 'haelixe[lab]'" in out.stdout
