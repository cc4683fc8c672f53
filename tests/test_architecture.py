"""The shape of the package: layers point only down, no import cycles, and nothing
outside haelixe/backends names a concrete backend. Read from the source (ast), so an
import inside a function counts as much as one at the top of a file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "haelixe"

#: lowest first; a module may import its own layer and the layers below it
LAYERS = [
    ("foundations", ["errors", "dtype", "dtype_info", "device", "layout", "storage", "atomic",
                     "fileio", "memory", "closest", "printing"]),
    ("backends", ["backends"]),
    ("tensor", ["tensor"]),
    ("creation", ["creation", "random"]),  # random: Generator states are tensors
    ("autograd", ["autograd"]),
    ("amp", ["amp", "amp_scaler"]),
    ("ops", ["ops"]),
    ("library", ["nn", "optim", "data", "utils", "serialization", "capture_replay", "pickled",
                 "torch_archive", "compiling", "cuda", "accelerator", "backend_flags", "onnx",
                 "profiler", "memory_history", "distributions", "linalg", "special", "func",
                 "settings", "aten_forms", "aten_native", "sparse"]),
    ("widgets", ["viz"]),
    ("apps", ["denoise", "charlm", "progress", "exercises", "__main__", "torch_alias",
              "run"]),
]
CONCRETE_BACKENDS = ("haelixe.backends.cpu", "haelixe.backends.cpu_attention",
                     "haelixe.backends.wgpu")


def _module_name(path: Path) -> str:
    parts = ("haelixe",) + path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path):
    """(imported module, at module level?) for every import in the file."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, id(node) in top
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:  # `from . import x` may name a submodule
                yield (f"{mod}.{a.name}" if _exists(f"{mod}.{a.name}") else mod), \
                    id(node) in top


def _exists(module: str) -> bool:
    rel = module.split(".")[1:]
    return (ROOT.joinpath(*rel).with_suffix(".py").is_file()
            or ROOT.joinpath(*rel, "__init__.py").is_file()) if rel else False


def _layer(module: str):
    rel = module.split(".")[1:]
    if not rel:
        return len(LAYERS) - 1  # the package itself (`import haelixe as hx`): the apps' layer
    for i, (_, names) in enumerate(LAYERS):
        if rel[0] in names:
            return i
    raise AssertionError(f"{module} is in no layer: add it to LAYERS in this test")


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}
GRAPH = {m: [(i, top) for i, top in _imports(p) if i.startswith("haelixe")]
         for m, p in MODULES.items()}


def test_every_module_has_a_layer():
    for m in MODULES:
        _layer(m)


def test_layers_point_only_down():
    bad = []
    for m, imports in GRAPH.items():
        if m == "haelixe":
            continue  # the package's __init__ gathers every layer
        lm = _layer(m)
        for i, _ in imports:
            li = _layer(i)
            if li > lm:
                bad.append(f"{m} ({LAYERS[lm][0]}) imports {i} ({LAYERS[li][0]})")
    assert not bad, "imports from a lower layer to a higher one:\n" + "\n".join(bad)


def test_no_concrete_backend_outside_backends():
    bad = [f"{m} imports {i}" for m, imports in GRAPH.items()
           if not m.startswith("haelixe.backends") and m != "haelixe"
           for i, _ in imports if i.startswith(CONCRETE_BACKENDS)]
    assert not bad, "\n".join(bad)


def test_no_module_level_import_cycle():
    edges = {m: {i for i, top in imports if top and i in MODULES and i != m}
             for m, imports in GRAPH.items()}
    # a package's __init__ importing its own submodules is how packages are built
    for m in edges:
        edges[m] = {i for i in edges[m] if not (MODULES[m].name == "__init__.py"
                                                and i.startswith(m + "."))}
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    assert not cycles, f"module-level import cycles: {cycles}"


@pytest.mark.parametrize("module, imported, check, message", [
    ("haelixe.ops.fake", "haelixe.viz", "test_layers_point_only_down", "ops.* imports"),
    ("haelixe.fake", "haelixe.backends.cpu", "test_no_concrete_backend_outside_backends",
     "imports haelixe.backends.cpu"),
])
def test_the_checks_catch_a_violation(monkeypatch, module, imported, check, message):
    """The rules above are not vacuous: an upward import and a concrete backend's import
    planted in the graph are both reported."""
    monkeypatch.setitem(GRAPH, module, [(imported, True)])
    with pytest.raises(AssertionError, match=message):
        globals()[check]()
