"""The activation layers PyTorch has for an elementwise op of the registry (nn.ReLU,
nn.LeakyReLU, nn.Softplus...), each made from the op's declaration: its constructor
takes the op's parameters (and ``inplace`` where PyTorch's does), with the op's
defaults, and its forward is the op's torch.nn.functional form."""

from __future__ import annotations

import inspect

from ..ops.arguments import Arguments
from ..ops.registry import OPS
from . import functional as F
from .module import Module

#: PyTorch's extra_repr where it is not "name=value, ...": the shrinks show lambd bare
_SHOWN = {"Softshrink": "{lambd}", "Hardshrink": "{lambd}"}


def _layer(decl) -> type:
    fn = getattr(F, decl.name)
    takes_inplace = decl.functional == "inplace"
    names = tuple(decl.params) + (("inplace",) if takes_inplace else ())
    arguments = Arguments(decl.module, names, {**decl.params, "inplace": False})

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        for name, value in zip(names, arguments.bind(args, kwargs)):
            setattr(self, name, value)

    def forward(self, input):  # noqa: A002 (PyTorch's name)
        return fn(input, *[getattr(self, name) for name in names])

    def extra_repr(self) -> str:  # (as PyTorch's: inplace only where it is set)
        if decl.module in _SHOWN:
            return _SHOWN[decl.module].format(**{n: getattr(self, n) for n in names})
        shown = [f"{n}={getattr(self, n)}" for n in decl.params]
        if takes_inplace and self.inplace:
            shown.append("inplace=True")
        return ", ".join(shown)

    __init__.__signature__ = arguments.signature.replace(parameters=[
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        *arguments.signature.parameters.values()])
    for f in (__init__, forward, extra_repr):
        f.__qualname__ = f"{decl.module}.{f.__name__}"
    return type(decl.module, (Module,), {
        "__init__": __init__, "forward": forward, "extra_repr": extra_repr,
        "__module__": __name__,
        "__doc__": f"nn.{decl.module}{arguments.signature}: the layer form of "
                   f"{decl.name} ({decl.doc.split(chr(10) * 2, 1)[1]})"})


#: class name -> the layer, for every declared op PyTorch has a layer for
LAYERS = {decl.module: _layer(decl) for decl in OPS.values()
          if getattr(decl, "module", None)}
globals().update(LAYERS)
__all__ = sorted(LAYERS)
