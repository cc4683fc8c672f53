"""PyTorch's small questions about tensors: is_tensor, numel, is_floating_point,
is_nonzero, is_signed, get_device, typename... as functions (``hx.<name>``) and, where
PyTorch has them, Tensor methods and properties (is_cpu, ndimension, itemsize). None of
them computes on the data except is_nonzero, which reads one element."""

from __future__ import annotations

from ..device import CPU
from ..errors import OpError
from ..storage import Storage
from ..tensor import Tensor
from .registry import function, tensor_method

#: the dtypes PyTorch calls unsigned (is_signed() is False for them and for bool)
_UNSIGNED = frozenset(("bool", "uint8", "uint16", "uint32", "uint64"))


def _tensor(op, x):
    # (PyTorch raises TypeError for a non-tensor argument of these)
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, not "
                        f"{type(x).__name__}; wrap numbers with hx.tensor(...)")
    return x


@function
def is_tensor(obj):
    """is_tensor(obj) -> bool

    True if obj is a Haelixe tensor (a Parameter included)."""
    return isinstance(obj, Tensor)


@function
def is_storage(obj):
    """is_storage(obj) -> bool

    True if obj is a tensor's storage (``x.storage``)."""
    return isinstance(obj, Storage)


@function
def numel(input):  # noqa: A002
    """numel(input) -> int

    The number of elements of input (1 for a 0-d tensor)."""
    return _tensor("numel", input).numel()


@tensor_method(function=True)
def is_floating_point(input):  # noqa: A002
    """is_floating_point(input) -> bool

    True if input's dtype is a float dtype (float64, float32, float16, bfloat16)."""
    return _tensor("is_floating_point", input).dtype.is_floating_point


@tensor_method(function=True)
def is_complex(input):  # noqa: A002
    """is_complex(input) -> bool

    Always False: Haelixe has no complex dtypes."""
    _tensor("is_complex", input)
    return False


@tensor_method(function=True)
def is_nonzero(input):  # noqa: A002
    """is_nonzero(input) -> bool

    Whether the one element of input is not zero (False for 0, 0.0 and False); a
    tensor with no element or more than one raises, as PyTorch's does."""
    n = _tensor("is_nonzero", input).numel()
    if n != 1:
        what = "no values" if n == 0 else "more than one value"
        raise OpError(f"is_nonzero: Boolean value of Tensor with {what} is ambiguous "
                      f"(shape {input.shape}); reduce it with .any() or .all() first")
    return input.item() != 0


@tensor_method(function=True)
def is_same_size(input, other):  # noqa: A002
    """is_same_size(input, other) -> bool

    True if input and other have the same shape."""
    return _tensor("is_same_size", input).shape == _tensor("is_same_size", other).shape


@tensor_method(function=True)
def is_signed(input):  # noqa: A002
    """is_signed(input) -> bool

    True unless the dtype is bool or an unsigned integer dtype."""
    return _tensor("is_signed", input).dtype.name not in _UNSIGNED


@tensor_method(function=True)
def get_device(input):  # noqa: A002
    """get_device(input) -> int

    The device's index: -1 on the CPU (as PyTorch's), 0 on the GPU (Haelixe has one, as
    PyTorch's first CUDA device, "cuda:0")."""
    return -1 if _tensor("get_device", input).device is CPU else 0


@tensor_method
def ndimension(self):
    """ndimension() -> int

    dim()'s other name: the number of dims."""
    return len(self.shape)


Tensor.is_cpu = property(lambda self: self.device is CPU,
                         doc="True if the tensor is on the CPU.")
Tensor.itemsize = property(lambda self: self.dtype.itemsize,
                           doc="The size of one element in bytes (element_size()).")


@function
def typename(obj):
    """typename(obj) -> str

    A tensor's legacy type name ("torch.FloatTensor", as x.type()); for anything else
    its module and qualified name, a builtin's plain name ("int")."""
    if isinstance(obj, Tensor):
        return obj.type()
    named = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if named is not None:
        module = getattr(obj, "__module__", "") or ""
    else:  # (an instance: named after its class)
        module, named = type(obj).__module__ or "", type(obj).__qualname__
    return named if module in ("", "builtins") else f"{module}.{named}"
