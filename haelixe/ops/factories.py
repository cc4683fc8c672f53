"""Factories PyTorch has beside tensor(): scalar_tensor, empty_strided and asarray
(which shares memory with its input wherever it can, and copies only where asked or
where a dtype or device change needs it)."""

from __future__ import annotations

import numbers

import numpy as np

from .. import creation
from .. import dtype as dt
from ..device import as_device
from ..errors import OpError
from ..tensor import Tensor
from .registry import function
from .views import as_strided


@function
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=False,
                  requires_grad=False):
    """scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=False,
    requires_grad=False) -> Tensor

    A 0-d tensor holding the number s, in the default float dtype unless dtype is
    given (an int or a bool too, as PyTorch's)."""
    if isinstance(s, Tensor):
        s = s.item()
    if not isinstance(s, (numbers.Number, np.generic)):
        raise TypeError(f"scalar_tensor: s must be a number, got {type(s).__name__}")
    return creation.full((), s if dtype is not None else float(s),
                         dt.default_float if dtype is None else dtype, device, requires_grad)


@function
def empty_strided(size, stride, *, dtype=None, layout=None, device=None,
                  requires_grad=False, pin_memory=False):
    """empty_strided(size, stride, *, dtype=None, layout=None, device=None,
    requires_grad=False, pin_memory=False) -> Tensor

    An uninitialised tensor of ``size`` laid out with ``stride`` over a buffer just
    large enough for it."""
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride):
        raise OpError(f"empty_strided: size {size} and stride {stride} must have the same "
                      f"length")
    if any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise OpError(f"empty_strided: size {size} and stride {stride} must be "
                      f"non-negative")
    needed = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    buffer = creation.empty(needed, dtype=dtype, device=device)
    t = as_strided(buffer, size, stride, 0).detach()
    if requires_grad:
        t.requires_grad_(True)
    return t


def _refuse_copy(what):
    raise ValueError(f"asarray: can't alias {what} (copy=False forbids a copy); pass "
                     f"copy=None to copy only where needed")


@function
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False) -> Tensor

    obj (a tensor, a numpy array, a number or nested sequences) as a tensor. A tensor
    or a CPU numpy array is shared, not copied, when dtype and device already match and
    copy is not True; copy=True always copies; copy=False raises where a copy would be
    needed. Python floats take the default float dtype, numpy arrays keep theirs."""
    want = None if dtype is None else dt.as_dtype(dtype)
    where = None if device is None else as_device(device)
    if isinstance(obj, Tensor):
        same = (want is None or want is obj.dtype) and (where is None or where is obj.device)
        if copy is False and not same:
            _refuse_copy(f"a {obj.dtype.name} tensor on {obj.device.type} into "
                         f"{(want or obj.dtype).name} on {(where or obj.device).type}")
        if same and not copy:
            out = obj
        else:
            out = obj.to(device=where or obj.device, dtype=want or obj.dtype, copy=True)
    elif isinstance(obj, np.ndarray) and (where is None or where.type == "cpu") and \
            (want is None or want.np == obj.dtype) and not copy:
        out = creation.from_numpy(obj)
    else:
        if copy is False:
            _refuse_copy(f"a {type(obj).__name__} into a tensor"
                         if not isinstance(obj, np.ndarray)
                         else f"a numpy {obj.dtype} array into {want.name} on "
                              f"{(where.type if where else 'cpu')}")
        out = creation.tensor(obj, dtype=want, device=where)
    if requires_grad:
        out.requires_grad_(True)
    return out
