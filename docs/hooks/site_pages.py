"""mkdocs hooks: pages made from the repository rather than written under docs/.

- the instructor's lab notebooks (labs/NN_*.ipynb, saved with their outputs), rendered by
  mkdocs-jupyter;
- benchmarks/RESULTS.md, the generated results table;
- the reference of the names made at import time, which mkdocstrings (reading the source)
  cannot see: the op registry's function forms (``hx.exp``) and the methods the op
  modules attach to Tensor. These are listed by importing haelixe, each with its
  signature and docstring.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]


def _signature(obj) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"


def _entry(title: str, obj, prefix: str) -> str:
    kind = ("class" if inspect.isclass(obj) else "property" if isinstance(obj, property)
            else "function" if callable(obj) else "value")
    head = f"{prefix}{title}"
    if kind in ("class", "function"):
        head += _signature(obj)
    elif kind == "value":
        value = repr(obj)
        head += f" = {value if len(value) <= 80 else value[:77] + '...'}"
    doc = inspect.cleandoc(obj.__doc__ or "") if kind != "value" else ""
    text = f"### `{title}`\n\n```python\n{head}\n```\n\n"
    if doc:
        text += "```text\n" + doc.replace("```", "'''") + "\n```\n\n"
    return text


def public_names(module) -> list[str]:
    """The public names of the ``haelixe`` namespace the namespace page lists (modules
    and the Tensor class have pages of their own)."""
    return sorted(n for n, v in vars(module).items()
                  if not n.startswith("_") and not inspect.ismodule(v) and n != "Tensor")


def tensor_members(cls) -> list[str]:
    return sorted(n for n in dir(cls) if not n.startswith("_"))


def namespace_page() -> str:
    sys.path.insert(0, str(ROOT))
    import haelixe

    out = ["# haelixe\n",
           "Every public name of the `haelixe` namespace (`import haelixe as hx`), with its "
           "signature and docstring. The function forms of the ops (`hx.exp(x)`, "
           "`hx.cat([...])`) come from the op registry; the subpackages have pages of their "
           "own: [nn](nn.md), [optim](optim.md), [data](data.md), [autograd](autograd.md), "
           "[amp and memory](amp_memory.md), [viz](viz.md). `hx.autocast`, `hx.save`, "
           "`hx.load`, `hx.memory_stats` and `hx.empty_cache` load their modules on first "
           "use and are described on [amp and memory](amp_memory.md).\n"]
    out += [_entry(n, getattr(haelixe, n), "hx.") for n in public_names(haelixe)]
    return "\n".join(out)


def tensor_page() -> str:
    sys.path.insert(0, str(ROOT))
    from haelixe.tensor import Tensor

    out = ["# Tensor\n", "Every public method and property, with its signature (most are "
           "attached by the op modules when haelixe is imported).\n"]
    out += [_entry(n, inspect.getattr_static(Tensor, n), "Tensor.")
            for n in tensor_members(Tensor)]
    return "\n".join(out)


@event_priority(100)  # before mkdocs-jupyter turns the notebooks into pages
def on_files(files, config):
    for nb in sorted((ROOT / "labs").glob("[0-9][0-9]_*.ipynb")):
        files.append(File(f"labs/{nb.name}", str(ROOT), config["site_dir"],
                          config["use_directory_urls"]))
    results = ROOT / "benchmarks" / "RESULTS.md"
    if results.exists():
        files.append(File.generated(config, "results.md", content=results.read_text()))
    files.append(File.generated(config, "api/haelixe.md", content=namespace_page()))
    files.append(File.generated(config, "api/tensor.md", content=tensor_page()))
    return files
