"""mkdocs hooks: pages made from the repository rather than written under docs/.

- the instructor's lab notebooks (labs/NN_*.ipynb, saved with their outputs), rendered by
  mkdocs-jupyter;
- benchmarks/RESULTS.md, the generated results table;
- the API reference of each public namespace (``hx``, ``hx.nn``, ``hx.optim`` ...):
  every public name with its signature and docstring, and each class's own public
  methods. Much of the API is made at import time (the op registry's function forms,
  the methods the op modules attach to Tensor), which a reader of the source cannot see,
  so these pages come from importing haelixe. mkdocstrings renders the module-level
  pages (amp, memory, capture, exercises) from the source.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]

#: page -> (title, intro, [(module, prefix shown before each name)])
NAMESPACES = {
    "api/haelixe.md": ("haelixe", "Every public name of the `haelixe` namespace (`import "
                       "haelixe as hx`). The function forms of the ops (`hx.exp(x)`, "
                       "`hx.cat([...])`) come from the op registry. `hx.autocast`, "
                       "`hx.save`, `hx.load`, `hx.memory_stats` and `hx.empty_cache` load "
                       "their modules on first use: see [amp, memory and "
                       "checkpoints](amp_memory.md).",
                       [("haelixe", "hx.")]),
    "api/nn.md": ("nn", "Modules, layers and losses (`hx.nn`), with PyTorch's names and "
                  "signatures, then `hx.nn.init` and `hx.nn.utils`. The functional forms "
                  "are on [functional](functional.md).",
                  [("haelixe.nn", "nn."), ("haelixe.nn.init", "nn.init."),
                   ("haelixe.nn.utils", "nn.utils.")]),
    "api/functional.md": ("nn.functional", "`from haelixe.nn import functional as F`.",
                          [("haelixe.nn.functional", "F.")]),
    "api/optim.md": ("optim", "Optimizers, clipping and learning-rate schedules.",
                     [("haelixe.optim", "optim."),
                      ("haelixe.optim.lr_scheduler", "optim.lr_scheduler.")]),
    "api/data.md": ("data", "Datasets, samplers and the DataLoader (`hx.data`, as "
                    "`torch.utils.data`), then the memory-mapped datasets and the tasks the "
                    "labs train on.",
                    [("haelixe.data", "data."), ("haelixe.data.memmap", "data.memmap."),
                     ("haelixe.data.sine", "data.sine."), ("haelixe.data.text", "data.text.")]),
    "api/linalg.md": ("linalg", "`hx.linalg`, as `torch.linalg`: norms, determinants, "
                      "inverses and solves, the factorizations, the pseudo-inverse and "
                      "least squares, batched over leading dims and differentiable.",
                      [("haelixe.linalg", "linalg.")]),
    "api/autograd.md": ("autograd", "Reverse-mode automatic differentiation: custom "
                        "Functions, `grad`, `gradcheck`, grad modes, anomaly detection and "
                        "graph introspection.", [("haelixe.autograd", "autograd.")]),
    "api/viz.md": ("viz", "The notebook widgets and their pure render functions (needs the "
                   "`lab` extra).", [("haelixe.viz", "viz.")]),
}


def _signature(obj) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


def _kind(obj) -> str:
    if inspect.isclass(obj):
        return "class"
    if isinstance(obj, property):
        return "property"
    if isinstance(obj, (staticmethod, classmethod)):
        return "function"
    return "function" if callable(obj) else "value"


def _entry(title: str, obj, prefix: str, level: str = "###") -> str:
    kind = _kind(obj)
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    head = f"{prefix}{title}"
    if kind in ("class", "function"):
        head += _signature(obj)
    elif kind == "value":
        value = repr(obj)
        head += f" = {value if len(value) <= 80 else value[:77] + '...'}"
    doc = inspect.cleandoc(obj.__doc__ or "") if kind != "value" else ""
    if kind == "class" and obj.__doc__ is type.__doc__:
        doc = ""
    text = f"{level} `{prefix}{title}`\n\n```python\n{head}\n```\n\n"
    if doc:
        text += "```text\n" + doc.replace("```", "'''") + "\n```\n\n"
    return text


def public_names(module) -> list[str]:
    """The public names a namespace page lists: ``__all__`` where the module has one,
    else every public non-module name (the top-level page leaves Tensor to its own)."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items()
                 if not n.startswith("_") and not inspect.ismodule(v)]
    return sorted(n for n in names if not (module.__name__ == "haelixe" and n == "Tensor"))


def own_members(cls) -> list[str]:
    """A class's public methods and properties defined in the class itself."""
    return sorted(n for n, v in vars(cls).items() if not n.startswith("_")
                  and (callable(v) or isinstance(v, (property, staticmethod, classmethod))))


def tensor_members(cls) -> list[str]:
    return sorted(n for n in dir(cls) if not n.startswith("_"))


def _import_haelixe() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def namespace_page(title: str, intro: str, modules) -> str:
    _import_haelixe()
    out = [f"# {title}\n", intro + "\n"]
    for module_name, prefix in modules:
        module = importlib.import_module(module_name)
        if len(modules) > 1:
            out.append(f"## `{module_name.replace('haelixe', 'hx', 1)}`\n")
        for name in public_names(module):
            obj = getattr(module, name)
            out.append(_entry(name, obj, prefix))
            if inspect.isclass(obj) and obj.__module__.startswith("haelixe"):
                out += [_entry(m, inspect.getattr_static(obj, m), f"{prefix}{name}.", "####")
                        for m in own_members(obj)]
    return "\n".join(out)


def tensor_page() -> str:
    _import_haelixe()
    from haelixe.tensor import Tensor

    out = ["# Tensor\n", "Every public method and property, with its signature (most are "
           "attached by the op modules when haelixe is imported).\n"]
    out += [_entry(n, inspect.getattr_static(Tensor, n), "Tensor.")
            for n in tensor_members(Tensor)]
    return "\n".join(out)


def lab_notebooks() -> list[Path]:
    return sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb"))


def lab_title(path: Path) -> str:
    """'08 Convolution is a strided view', from the notebook's first heading."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    first = "".join(cells[0]["source"]).splitlines()[0] if cells else path.stem
    return first.lstrip("# ").replace(" · ", " ") or path.stem


def _nav_paths(nav) -> set:
    out = set()
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        out |= _nav_paths(value) if isinstance(value, list) else {value}
    return out


def md_title(path: Path) -> str:
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.startswith("# ")]
    return lines[0][2:].strip() if lines else path.stem.replace("_", " ")


def on_config(config):
    """The Labs section of the nav lists every lab notebook, and a Markdown page under
    docs/ that the nav does not name (one a contributor adds) goes under "More", so that
    neither needs an edit of mkdocs.yml."""
    nav = config["nav"]
    for entry in nav:
        if isinstance(entry, dict) and "Labs" in entry:
            entry["Labs"] = [{lab_title(nb): f"labs/{nb.name}"} for nb in lab_notebooks()]
    docs = Path(config["docs_dir"])
    listed = _nav_paths(nav)
    extra = [{md_title(p): p.relative_to(docs).as_posix()} for p in sorted(docs.rglob("*.md"))
             if p.relative_to(docs).as_posix() not in listed
             and not p.relative_to(docs).as_posix().startswith("hooks/")]
    if extra:
        nav.append({"More": extra})
    return config



@event_priority(100)  # before mkdocs-jupyter turns the notebooks into pages
def on_files(files, config):
    for nb in lab_notebooks():
        files.append(File(f"labs/{nb.name}", str(ROOT), config["site_dir"],
                          config["use_directory_urls"]))
    results = ROOT / "benchmarks" / "RESULTS.md"
    if results.exists():
        files.append(File.generated(config, "results.md", content=results.read_text()))
    for page, (title, intro, modules) in NAMESPACES.items():
        files.append(File.generated(config, page, content=namespace_page(title, intro,
                                                                           modules)))
    files.append(File.generated(config, "api/tensor.md", content=tensor_page()))
    return files
