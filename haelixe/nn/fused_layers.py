"""The layers PyTorch has for a fused op of the registry (nn.Linear, nn.Conv2d,
nn.MaxPool2d, nn.RMSNorm, nn.LayerNorm, nn.MSELoss, nn.CrossEntropyLoss, F.pad's fifteen
padding layers...), each made from the op's declaration (``@fused(..., layer=Layer(...))``
on its functional form, ops/registry.py): the constructor is the layer's ``state``
function, whose signature is PyTorch's; forward calls the functional form with the layer's
attributes for its arguments; extra_repr shows what the declaration says."""

from __future__ import annotations

import inspect
import operator
import string

from ..ops.registry import OPS, Fused

# (imported for their declarations: the layers' ops)
from . import conv, losses  # noqa: F401
from . import functional as F  # noqa: F401
from .module import Module, Parameter


def _layer(decl, spec) -> type:
    """The Module class of ``spec``, one of ``decl``'s layers."""
    form = decl.form
    # forward's arguments of the functional form, after its inputs: the layer's attributes
    # (read with one attrgetter: a layer's forward is on every step's path)
    params = list(decl.signature.parameters.values())[spec.inputs:]
    if spec.forward is None and any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in params):
        raise ValueError(f"{spec.name}: its forward passes F.{decl.name}'s arguments by "
                         f"position; {decl.name}{decl.signature} has others")
    names = tuple(p.name for p in params)
    if len(names) > 1:
        read = operator.attrgetter(*names)
    elif names:
        def read(self, get=operator.attrgetter(*names)):
            return (get(self),)
    else:  # (an op of its input alone: F.logsigmoid)
        def read(self):
            return ()
    state, parameters, buffers, shown = spec.state, spec.parameters, spec.buffers, spec.shown

    state_signature = inspect.signature(state)

    def __init__(self, *args, **kwargs):
        try:  # (the error names the layer, not the state function)
            state_signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{spec.name}(): {e}; signature: {spec.name}{state_signature}"
                            ) from None
        Module.__init__(self)
        for name, value in state(*args, **kwargs).items():
            if name in buffers:
                self.register_buffer(name, value)
            else:
                setattr(self, name, Parameter(value) if name in parameters and
                        value is not None else value)

    if spec.forward is not None:
        forward = spec.forward(form)
    elif spec.inputs == 1:
        def forward(self, input):  # noqa: A002 (PyTorch's name)
            return form(input, *read(self))
    elif spec.inputs == 2:
        def forward(self, input, target):  # noqa: A002
            return form(input, target, *read(self))
    else:  # (three inputs: the ranking and triplet losses)
        inputs = list(decl.signature.parameters.values())[:spec.inputs]

        def forward(self, *args):
            if len(args) != spec.inputs:
                raise TypeError(f"{spec.name}.forward takes {spec.inputs} tensors "
                                f"({', '.join(p.name for p in inputs)}), got {len(args)}")
            return form(*args, *read(self))

        forward.__signature__ = inspect.Signature([
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *inputs])

    if callable(shown):
        def extra_repr(self) -> str:
            return shown(self)
    else:
        fields = [f for _, f, _, _ in string.Formatter().parse(shown) if f]

        def extra_repr(self) -> str:
            return shown.format(**{f: getattr(self, f) for f in fields})

    __init__.__signature__ = inspect.signature(state).replace(parameters=[
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        *inspect.signature(state).parameters.values()])
    for f in (__init__, forward, extra_repr):
        f.__qualname__ = f"{spec.name}.{f.__name__}"
    return type(spec.name, (Module,), {
        **spec.fixed, **spec.methods, "__init__": __init__, "forward": forward,
        "extra_repr": extra_repr,
        "__module__": __name__,
        "__doc__": f"nn.{spec.name}{inspect.signature(state)}: the layer form of "
                   f"F.{decl.name}. {inspect.getdoc(state) or ''}\n\n"
                   f"{decl.form.__doc__.split(chr(10) * 2, 1)[1]}"})


#: class name -> the layer, for every layer of every fused op declared with layers
LAYERS = {spec.name: _layer(decl, spec) for decl in OPS.values() if isinstance(decl, Fused)
          for spec in decl.layers}
globals().update(LAYERS)
__all__ = sorted(LAYERS)
