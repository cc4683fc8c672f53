"""``import torch`` resolved to Haelixe: a meta-path finder that maps names only.

    import haelixe as hx
    hx.install_as_torch()        # in a notebook; `python -m haelixe.run prog.py` does it too
    import torch, torch.nn as nn # Haelixe's modules under PyTorch's names

Each ``torch...`` module is a thin module of its own whose attributes are read from the
Haelixe module of the same role (``torch.nn`` -> ``haelixe.nn``, ``torch.utils.data`` ->
``haelixe.data``); nothing is copied or wrapped, so ``torch.nn.Module is hx.nn.Module``.
The Haelixe modules themselves are left untouched: the import system's bookkeeping
(``__spec__``, a parent's attribute per child) lands on the thin modules.

A name Haelixe lacks raises AttributeError (``hasattr`` probes keep working) naming the
PyTorch name and Haelixe's closest thing; a submodule it lacks raises
ModuleNotFoundError (``try: import torch.distributed`` keeps working) saying what is
missing and what to use instead.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

#: PyTorch's module name -> the Haelixe module whose names it shows (None: only its
#: submodules); the longest matching prefix wins, so "torch.nn.modules.rnn" falls to
#: "torch.nn.modules" (PyTorch's files per layer family are one namespace here).
MODULES = {
    "torch": "haelixe",
    "torch.nn": "haelixe.nn",
    "torch.nn.functional": "haelixe.nn.functional",
    "torch.nn.init": "haelixe.nn.init",
    "torch.nn.utils": "haelixe.nn.utils",
    "torch.nn.utils.clip_grad": "haelixe.nn.utils",
    "torch.nn.utils.rnn": "haelixe.nn.rnn_utils",
    "torch.nn.utils.parametrize": "haelixe.nn.parametrize",
    "torch.nn.utils.parametrizations": "haelixe.nn.parametrizations",
    "torch.nn.utils.stateless": "haelixe.nn.stateless",
    "torch.nn.utils.prune": "haelixe.nn.prune",
    "torch.nn.modules": "haelixe.nn",
    "torch.nn.parameter": "haelixe.nn",
    "torch.nn.parallel": "haelixe.nn.parallel",
    "torch.optim": "haelixe.optim",
    "torch.optim.lr_scheduler": "haelixe.optim.lr_scheduler",
    "torch.optim.swa_utils": "haelixe.optim.swa_utils",
    "torch.optim.optimizer": "haelixe.optim",
    "torch.utils": "haelixe.utils",
    "torch.utils.data": "haelixe.utils.data",
    "torch.utils.tensorboard": "haelixe.utils.tensorboard",
    "torch.utils.checkpoint": "haelixe.utils.checkpoint",
    "torch.autograd": "haelixe.autograd",
    "torch.autograd.functional": "haelixe.autograd.functional",
    "torch.func": "haelixe.func",
    "torch.random": "haelixe.random",
    "torch.serialization": "haelixe.pickled",
    "torch.cuda": "haelixe.cuda",
    "torch.cuda.amp": "haelixe.amp",
    "torch.amp": "haelixe.amp",
    "torch.backends": "haelixe.backend_flags",
    "torch.accelerator": "haelixe.accelerator",
    "torch.onnx": "haelixe.onnx",
    "torch.distributions": "haelixe.distributions",
    "torch.distributions.constraints": "haelixe.distributions.constraints",
    "torch.distributions.utils": "haelixe.distributions.utils",
    "torch.distributions.kl": "haelixe.distributions.kl",
    "torch.linalg": "haelixe.linalg",
    "torch.special": "haelixe.special",
    "torch.sparse": "haelixe.sparse",
}

#: packages whose submodules (PyTorch's files, lower-case names) are all one namespace
FAMILIES = ("torch.nn.modules", "torch.utils.data", "torch.distributions")

#: names of the top-level ``torch`` that differ from ``haelixe``'s: module -> attribute
TOP_LEVEL = {
    "save": ("haelixe.pickled", "save"),
    "load": ("haelixe.pickled", "load"),
    "set_float32_matmul_precision": ("haelixe.backend_flags", "set_float32_matmul_precision"),
    "get_float32_matmul_precision": ("haelixe.backend_flags", "get_float32_matmul_precision"),
}

#: PyTorch packages Haelixe does not have, with what to use instead
MISSING_MODULES = {
    "torch.distributed": "one process trains on one device; there is no distributed "
                         "training",
    "torch.multiprocessing": "the standard library's multiprocessing (DataLoader's "
                             "num_workers starts worker processes itself)",
    "torch.jit": "hx.capture (torch.compile maps to it) for a step replayed without its "
                 "Python; there is no TorchScript",
    "torch.fx": "hx.viz.GraphView to look at the autograd graph; there is no graph "
                "rewriting",
    "torch.hub": "loading weights with torch.load / hx.load from a local file",
    "torch.profiler": "hx.profile() (each kernel of a step with its time, a Chrome trace) "
                      "and hx.memory_snapshot() for memory",
    "torch.quantization": "bfloat16 (hx.autocast) for lower precision",
    "torch.ao": "bfloat16 (hx.autocast) for lower precision",
    "torch.fft": "nothing yet: Haelixe has no Fourier transforms",
    "torch.testing": "numpy.testing.assert_allclose on x.numpy()",
    "torch.export": "nothing: programs run eagerly or captured (hx.capture)",
    "torch.mps": "torch.cuda / torch.accelerator, which answer for Haelixe's GPU",
    "torch.xpu": "torch.cuda / torch.accelerator, which answer for Haelixe's GPU",
}


class MissingModuleError(ModuleNotFoundError):
    """A PyTorch package that Haelixe does not provide."""


def _target_of(name: str):
    """(Haelixe module name or None, known?) for the PyTorch module ``name``."""
    if name in MODULES:
        return MODULES[name], True
    parent, _, leaf = name.rpartition(".")
    while parent:
        if parent in FAMILIES and leaf.islower():
            return MODULES[parent], True
        parent, _, leaf = parent.rpartition(".")
    return None, False


def _is_missing(name: str) -> bool:
    parts = name.split(".")
    return any(".".join(parts[:n]) in MISSING_MODULES for n in range(2, len(parts) + 1))


def _missing_module(name: str) -> MissingModuleError:
    parts = name.split(".")
    for n in range(len(parts), 1, -1):
        hint = MISSING_MODULES.get(".".join(parts[:n]))
        if hint is not None:
            break
    else:
        hint = "the modules Haelixe maps: " + ", ".join(sorted(MODULES))
    # .name stays None: `from torch import distributed` would otherwise swallow this
    # message for the import system's bare "cannot import name"
    return MissingModuleError(f"{name} is not part of Haelixe (import torch runs on Haelixe "
                              f"here); use instead: {hint}")


class _AliasModule(types.ModuleType):
    """A PyTorch name whose attributes are read from a Haelixe module."""

    def __init__(self, name: str, target: str | None):
        super().__init__(name)
        self.__dict__["_haelixe_target"] = target
        self.__dict__["__path__"] = []  # a package: `import torch.nn.functional` works

    def __getattr__(self, attr):
        if self.__name__ == "torch" and attr in TOP_LEVEL:
            module, name = TOP_LEVEL[attr]
            return getattr(importlib.import_module(module), name)
        target = self.__dict__["_haelixe_target"]
        sub = f"{self.__name__}.{attr}"
        if sub in MODULES:
            return importlib.import_module(sub)  # torch.cuda without `import torch.cuda`
        if sub in MISSING_MODULES:
            raise AttributeError(str(_missing_module(sub)))
        if target is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        try:
            found = getattr(importlib.import_module(target), attr)
        except AttributeError as e:
            if attr.startswith("__"):
                raise
            if _target_of(sub)[1]:  # torch.nn.modules.rnn without importing it
                return importlib.import_module(sub)
            raise AttributeError(f"{sub} (import torch runs on Haelixe): {e}") from None
        if isinstance(found, types.ModuleType) and _target_of(sub)[1]:
            # a Haelixe file of the same name (haelixe.nn.normalization) is not PyTorch's
            # torch.nn.modules.normalization: the family's one namespace answers
            return importlib.import_module(sub)
        return found

    def __dir__(self):
        target = self.__dict__["_haelixe_target"]
        names = set(self.__dict__)
        if target is not None:
            names |= set(dir(importlib.import_module(target)))
        return sorted(names)

    def __repr__(self) -> str:
        target = self.__dict__["_haelixe_target"]
        return f"<module {self.__name__!r} (Haelixe's {target or 'modules'})>"


def _raise_name_error(module: _AliasModule, name: str):
    """`from torch.x import Name` where Name is missing: the import system would say only
    "cannot import name"; this says what Haelixe has instead (as an ImportError)."""
    try:
        getattr(module, name)
    except AttributeError as e:
        err = ImportError(f"cannot import name {name!r} from {module.__name__!r}: {e}")
        err.name = module.__name__
        raise err from None
    raise _missing_module(f"{module.__name__}.{name}")


def _module_attribute(module: _AliasModule, name: str):
    try:
        found = getattr(module, name)
    except AttributeError:
        return None
    return found if isinstance(found, types.ModuleType) else None


class _Existing(importlib.abc.Loader):
    """Loads a module object Haelixe made already (a namespace of flags)."""

    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return _AliasModule(spec.name, spec.loader_state)

    def exec_module(self, module):
        pass


class TorchFinder(importlib.abc.MetaPathFinder):
    """Finds ``torch`` and ``torch.*`` as Haelixe's modules (see the module docstring)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" and not fullname.startswith("torch."):
            return None
        haelixe_name, known = _target_of(fullname)
        if not known:
            parent, _, leaf = fullname.rpartition(".")
            if _is_missing(fullname):
                raise _missing_module(fullname)
            if isinstance(sys.modules.get(parent), _AliasModule):
                found = _module_attribute(sys.modules[parent], leaf)
                if found is not None:  # torch.backends.cudnn: a module object of Haelixe's
                    return importlib.util.spec_from_loader(fullname, _Existing(found))
                _raise_name_error(sys.modules[parent], leaf)
            raise _missing_module(fullname)
        spec = importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)
        spec.loader_state = haelixe_name
        return spec


FINDER = TorchFinder()


def install_as_torch() -> None:
    """Make ``import torch`` (and its submodules) resolve to Haelixe from now on, in this
    process. Raises RuntimeError if PyTorch itself was imported already (its modules
    would be mixed with Haelixe's); calling it twice is harmless."""
    if FINDER in sys.meta_path:
        return
    real = [n for n, m in list(sys.modules.items())
            if (n == "torch" or n.startswith("torch.")) and not isinstance(m, _AliasModule)]
    if real:
        raise RuntimeError("install_as_torch: PyTorch itself is already imported in this "
                           "process (sys.modules has 'torch'); restart the kernel and call "
                           "hx.install_as_torch() before anything imports torch")
    sys.meta_path.insert(0, FINDER)


def uninstall_as_torch() -> None:
    """Undo :func:`install_as_torch`: ``import torch`` finds PyTorch again (if installed)."""
    if FINDER in sys.meta_path:
        sys.meta_path.remove(FINDER)
    for n in [n for n, m in sys.modules.items() if isinstance(m, _AliasModule)]:
        del sys.modules[n]
