"""Errors for a name a package does not have, naming the closest thing it does have.

A module's ``__getattr__`` raises ``missing_attribute(...)``: a PyTorch name with a
known counterpart gets that hint; any other name gets the nearest spelling among the
module's public names, or the list of them.
"""

from __future__ import annotations

import difflib
import types


def missing_attribute(module: str, name: str, namespace, hints: dict | None = None):
    """The AttributeError for ``module.name``. ``namespace`` holds the module's names,
    ``hints`` maps names it lacks to what to use instead."""
    shown = module.replace("haelixe", "hx", 1)
    if name.startswith("__"):  # protocol probes (copy, pickle, doctest): the plain error
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    hint = (hints or {}).get(name)
    if hint is None:
        names = namespace.get("__all__") or namespace  # a module's declared API first
        public = sorted(n for n in names if not n.startswith("_") and n in namespace)
        # classes and functions first: a submodule is a match only when nothing else is
        objects = [n for n in public if not isinstance(namespace[n], types.ModuleType)]
        close = _nearest(name, objects) or _nearest(name, public)
        if close is None:
            return AttributeError(f"{shown} has no {name}; it has: {', '.join(objects)}")
        hint = f"{shown}.{close}"
    return AttributeError(f"{shown} has no {name}; the closest is {hint}")


def _nearest(name: str, candidates) -> str | None:
    lower = {n.lower(): n for n in candidates}
    close = difflib.get_close_matches(name.lower(), list(lower), n=1, cutoff=0.6)
    return lower[close[0]] if close else None
