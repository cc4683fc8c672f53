"""The comparisons and logical ops in place, as PyTorch's ``x.gt_(y)``: the bool result
written into x in x's own dtype (1 and 0), x's shape kept (other must broadcast to it).

Their out-of-place forms return bool, so the table entries make no in-place form (it
would keep the dtype); these are written here once for all of them. Under autograd x
keeps requiring grad, with a zero gradient, as PyTorch's (a step has no slope)."""

from __future__ import annotations

from .. import creation
from ..dtype import bool_
from ..tensor import Tensor
from . import elementwise  # noqa: F401  (the ops written in place here)
from .indexing import where
from .inplace import _rebase, _records_graph, copy_
from .registry import OPS

#: the ops given an in-place form here (PyTorch's Tensor has each with a trailing _)
NAMES = ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
         "logical_not")


def _write(decl, self, other):
    op = decl.name + "_"
    result = decl.apply(self, *other)
    if result.shape != self.shape:
        shown = other[0].shape if other and isinstance(other[0], Tensor) else ()
        raise RuntimeError(f"{op}: the result of shape {result.shape} (other's shape "
                           f"{shown} broadcast) does not fit the in-place target of "
                           f"shape {self.shape}; other must broadcast to it")
    values = result.to(self.dtype)
    if _records_graph(self, next((o for o in other if isinstance(o, Tensor)), None), op):
        # (where with an all-false condition: the values, and a zero gradient to self)
        never = creation.zeros_like(result, dtype=bool_)
        return _rebase(self, where(never, self, values), op)
    return copy_(self, values)


def _in_place(name):
    decl = OPS[name]
    if decl.arity == 1:
        def method(self):
            return _write(decl, self, ())
    else:
        def method(self, other):
            return _write(decl, self, (other,))
    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"{name}_({'' if decl.arity == 1 else 'other'}) -> Tensor\n\n" \
                     f"In-place {name}: its result (True as 1, False as 0) written into " \
                     f"self, in self's dtype."
    return method


for _name in NAMES:
    setattr(Tensor, _name + "_", _in_place(_name))
