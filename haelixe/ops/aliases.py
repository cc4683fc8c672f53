"""PyTorch's other names for existing ops (numpy's spellings mostly: subtract, divide,
clip, arccos...), declared once here. An alias is the op's own function and methods,
the same objects, so it has the op's signature, autograd and devices, and is no copy."""

from __future__ import annotations

from ..errors import OpTypeError
from ..tensor import Tensor
from . import elementwise, indexing, inplace_compare  # noqa: F401  (the ops they name)
from .registry import FUNCTIONS, declare, tensor_method

#: alias -> the op it names
ALIASES = {
    "concat": "cat", "concatenate": "cat",
    "subtract": "sub", "multiply": "mul", "divide": "div",
    "negative": "neg", "absolute": "abs", "clip": "clamp", "fix": "trunc",
    "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
    "not_equal": "ne",
    "arccos": "acos", "arcsin": "asin", "arctan": "atan", "arctan2": "atan2",
    "arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh",
}
#: PyTorch has these as functions only (no Tensor.concat, Tensor.concatenate)
_FUNCTION_ONLY = frozenset(("concat", "concatenate"))

for _alias, _target in ALIASES.items():
    FUNCTIONS[_alias] = FUNCTIONS[_target]
    if _alias in _FUNCTION_ONLY:
        continue
    setattr(Tensor, _alias, getattr(Tensor, _target))
    if hasattr(Tensor, _target + "_"):
        setattr(Tensor, _alias + "_", getattr(Tensor, _target + "_"))

# (fix stays declared, as it was before it became trunc's alias: its surfaces are checked)
declare("fix", dtypes="any")


@tensor_method(function=True)
def positive(input):  # noqa: A002
    """positive(input) -> Tensor

    input itself (+input), as PyTorch's; a bool tensor is refused, as there."""
    if input.dtype.name == "bool":
        raise OpTypeError("positive: the + operator on a bool tensor is not supported (as "
                          "in PyTorch); convert with .int() first")
    return input


Tensor.__pos__ = Tensor.positive
