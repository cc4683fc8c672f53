"""Factories PyTorch has beside tensor(): scalar_tensor, empty_strided, empty_permuted,
asarray (which shares memory with its input wherever it can, and copies only where asked
or where a dtype or device change needs it) and frombuffer (a tensor over a Python
buffer's memory)."""

from __future__ import annotations

import numbers
import warnings

import numpy as np

from .. import creation
from .. import dtype as dt
from .. import layout as layout_module
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


@function
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
    requires_grad=False, pin_memory=False) -> Tensor

    An uninitialised tensor of ``size`` whose dims lie in memory in the order
    ``physical_layout`` names them, outermost first: (0, 2, 1) over size (2, 3, 4) gives
    strides (12, 1, 3); (0, 1, ..., n - 1) is empty(size)."""
    size, order = tuple(size), tuple(physical_layout)
    if len(order) != len(size):
        raise OpError(f"empty_permuted: Number of dimensions in size does not match the "
                      f"length of the physical_layout; i.e. len(size) = {len(size)} is not "
                      f"equal to len(physical_layout) = {len(order)}")
    if sorted(order) != list(range(len(size))):
        raise OpError(f"empty_permuted: physical_layout {order} must name each dim of "
                      f"size {size} once, as 0 to {len(size) - 1} (no negative dims, as "
                      f"in PyTorch)")
    stored = creation.empty(*(size[d] for d in order), dtype=dtype, device=device)
    t = stored.permute(layout_module.inverse_permutation(order)).detach()
    if requires_grad:
        t.requires_grad_(True)
    return t


def _frombuffer_bytes(buffer):
    try:
        view = memoryview(buffer)
    except TypeError:
        raise ValueError(f"frombuffer: a {type(buffer).__name__} does not implement "
                         f"Python's buffer protocol; pass bytes, a bytearray, an array, a "
                         f"memoryview or a numpy array") from None
    if not view.contiguous:
        raise RuntimeError("frombuffer: the buffer is not contiguous in memory; copy it "
                           "first (a numpy array: np.ascontiguousarray)")
    return view


@function
def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False) -> Tensor

    A 1-D CPU tensor over the bytes of an object with Python's buffer protocol
    (bytearray, array.array, memoryview, a numpy array...), sharing its memory: its
    ``count`` elements of ``dtype`` from byte ``offset`` (count -1: all that follow). A
    read-only buffer (bytes) gives a read-only tensor, with a warning (PyTorch's lets
    writes into the bytes through)."""
    view = _frombuffer_bytes(buffer)
    if not isinstance(dtype, dt.DType):
        raise TypeError(f"frombuffer: dtype must be a dtype such as hx.float32, got "
                        f"{dtype!r}")
    want = dtype
    n, size = view.nbytes, want.itemsize
    if n == 0 or count == 0:
        raise ValueError(f"frombuffer: both buffer length ({n}) and count ({count}) must "
                         f"not be 0")
    if not 0 <= offset < n:
        raise ValueError(f"frombuffer: offset ({offset} bytes) must be non-negative and no "
                         f"greater than buffer length ({n} bytes) minus 1")
    if count < 0:
        if (n - offset) % size:
            raise ValueError(f"frombuffer: buffer length ({n - offset} bytes) after offset "
                             f"({offset} bytes) must be a multiple of element size ({size})")
        count = (n - offset) // size
    elif count * size > n - offset:
        raise ValueError(f"frombuffer: requested buffer length ({count} * {size} bytes) "
                         f"after offset ({offset} bytes) must not be greater than actual "
                         f"buffer length ({n - offset} bytes)")
    array = np.frombuffer(view.cast("B"), dtype=want.np, count=count, offset=offset)
    if view.readonly:  # (PyTorch warns too; it lets writes through, Haelixe refuses them)
        warnings.warn("frombuffer: the buffer is not writable, so neither is the tensor "
                      "(it shares the buffer's memory: an in-place op on it raises); copy "
                      "it with .clone(), or pass a bytearray to write through",
                      UserWarning, stacklevel=2)
    t = creation.from_numpy(array)
    if requires_grad:
        t.requires_grad_(True)
    return t
