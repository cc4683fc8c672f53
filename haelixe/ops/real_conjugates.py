"""PyTorch's conjugation and autograd-bookkeeping names on Haelixe's real tensors.

Haelixe has no complex dtypes, so a tensor is never a lazily conjugated or negated view:
conj, resolve_conj, resolve_neg and conj_physical return the tensor itself (as
PyTorch's do for a real tensor), .real is the tensor and .imag raises as PyTorch's does;
.H, .mH and adjoint() are the transposes; isreal is True everywhere. is_inference() is
False: Haelixe's inference_mode is no_grad, and marks no tensor made inside it."""

from __future__ import annotations

import warnings

from ..dtype import bool_
from ..errors import OpError
from ..tensor import Tensor
from .registry import declare, function, tensor_method


@tensor_method(function=True)
def conj(input):  # noqa: A002 (PyTorch's name)
    """conj(input) -> Tensor

    The complex conjugate: a real tensor is its own, returned as it is."""
    return input


@tensor_method(function=True)
def resolve_conj(input):  # noqa: A002
    """resolve_conj(input) -> Tensor

    The tensor with its conjugate bit applied: a real tensor has none (itself)."""
    return input


@tensor_method(function=True)
def resolve_neg(input):  # noqa: A002
    """resolve_neg(input) -> Tensor

    The tensor with its negative bit applied: a real tensor has none (itself)."""
    return input


@tensor_method(function=True)
def conj_physical(input):  # noqa: A002
    """conj_physical(input) -> Tensor

    The conjugate computed into memory: a real tensor is its own (itself, as PyTorch's)."""
    return input


@tensor_method(function=True)
def is_conj(input):  # noqa: A002
    """is_conj(input) -> bool

    False: a real tensor is never a conjugated view."""
    return False


@tensor_method(function=True)
def is_neg(input):  # noqa: A002
    """is_neg(input) -> bool

    False: a real tensor is never a negated view."""
    return False


@tensor_method(function=True)
def is_inference(input):  # noqa: A002
    """is_inference(input) -> bool

    False: Haelixe's inference_mode is no_grad and makes no inference tensors."""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_inference(): argument 'input' must be a Tensor, not "
                        f"{type(input).__name__}")
    return False


@tensor_method(function=True)
def isreal(input):  # noqa: A002
    """isreal(input) -> Tensor

    A bool tensor of input's shape, True where an element is real: everywhere (a real
    dtype holds real values only; Haelixe has no complex dtypes)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"isreal(): argument 'input' must be a Tensor, not "
                        f"{type(input).__name__}")
    return Tensor._wrap(input._be.full(input.shape, True, bool_.np))


declare("isreal", differentiable=False, dtypes="any")


def _real(self):
    return self


def _imag(self):
    raise RuntimeError(f"imag is not implemented for tensors with non-complex dtypes "
                       f"(this one is {self.dtype.name}; Haelixe has no complex dtypes)")


Tensor.real = property(_real)
Tensor.imag = property(_imag)


@function
def real(input):  # noqa: A002
    """real(input) -> Tensor

    The real part: a real tensor itself."""
    return input


@function
def imag(input):  # noqa: A002
    """imag(input) -> Tensor

    Raises for real tensors, as PyTorch's does (Haelixe has no complex dtypes)."""
    return _imag(input)


def _matrices(op, x, only_2d=False):
    """x.transpose of its last two dims, checked as PyTorch checks; a 0-d tensor is
    itself, with PyTorch's deprecation warning."""
    if x.ndim == 0:
        warnings.warn(f"{op} is deprecated on 0-D tensors. Consider using x.conj().",
                      UserWarning, stacklevel=3)
        return x
    if only_2d and x.ndim != 2:
        more = " For batches of matrices, consider using tensor.mH" if x.ndim > 2 else ""
        raise OpError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                      f"{x.ndim}-D tensor.{more}")
    if x.ndim < 2:
        raise OpError(f"{op} is only supported on matrices or batches of matrices. Got "
                      f"{x.ndim}-D tensor of shape {tuple(x.shape)}")
    return x.transpose(-2, -1)


Tensor.H = property(lambda self: _matrices("Tensor.H", self, only_2d=True))
Tensor.mH = property(lambda self: _matrices("Tensor.mH", self))


@tensor_method(function=True)
def adjoint(input):  # noqa: A002
    """adjoint(input) -> Tensor

    The conjugate transpose of the last two dims: for a real tensor, their transpose (a
    view)."""
    return _matrices("adjoint()", input)


def _output_nr(self):
    # (each Haelixe node makes one output, so every tensor is its node's first)
    return 0


Tensor.output_nr = property(_output_nr)
