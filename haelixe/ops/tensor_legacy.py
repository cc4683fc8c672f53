"""PyTorch's older Tensor methods and those that change a tensor's own shape or class:
new (the legacy constructor), new_empty_strided, as_subclass, apply_ and map_ (Python
callables over the elements, CPU only), resize_ and resize_as_."""

from __future__ import annotations

import math

import numpy as np

from .. import creation, layout
from ..autograd.mode import no_grad
from ..device import as_device
from ..dtype import as_dtype
from ..errors import OpError
from ..tensor import Tensor
from .registry import tensor_method
from .views import as_strided


@tensor_method
def new(self, *args, device=None):
    """The legacy constructor, in this tensor's dtype (and device): new() is empty,
    new(2, 3) or new(hx.Size([2, 3])) an uninitialized (2, 3) tensor, new([1, 2]) a
    tensor of the data (a list or tuple is data, as in PyTorch), new(t) t itself."""
    device = self.device if device is None else as_device(device)
    if not args:
        return creation.empty(0, dtype=self.dtype, device=device)
    if len(args) == 1 and isinstance(args[0], Tensor):
        other = args[0]
        if other.dtype is not self.dtype or other.device is not device:
            raise TypeError(f"new(): expected a tensor of {self.dtype.name} on "
                            f"{device.type} (this tensor's), got {other.dtype.name} on "
                            f"{other.device.type}; use .to(...) first")
        return other.detach()
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        return creation.empty(*args, dtype=self.dtype, device=device)
    if len(args) == 1 and isinstance(args[0], layout.Size):
        return creation.empty(*args[0], dtype=self.dtype, device=device)
    if len(args) == 1:
        return creation.tensor(args[0], dtype=self.dtype, device=device)
    raise TypeError(f"new(): expected sizes (ints), one sequence of data or one tensor, got "
                    f"{', '.join(type(a).__name__ for a in args)}")


@tensor_method
def new_empty_strided(self, size, stride, dtype=None, device=None, requires_grad=False):
    """An uninitialized tensor of ``size`` with these ``stride``s (elements), over a
    storage just large enough, in this tensor's dtype and device unless given."""
    size, stride = tuple(size), tuple(stride)
    if len(size) != len(stride):
        raise OpError(f"new_empty_strided: size {size} and stride {stride} must have one "
                      f"length")
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise OpError(f"new_empty_strided: size {size} and stride {stride} may not be "
                      f"negative")
    dt = self.dtype if dtype is None else as_dtype(dtype)
    dev = self.device if device is None else as_device(device)
    needed = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    with no_grad():
        out = as_strided(creation.empty(needed, dtype=dt, device=dev), size, stride, 0)
    return out.requires_grad_() if requires_grad else out


@tensor_method
def as_subclass(self, cls):
    """This tensor as an instance of ``cls`` (a subclass of Tensor): the same memory,
    and, where it has a graph, in it (the gradient passes through unchanged)."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"as_subclass: cls must be a subclass of Tensor, got {cls!r}")
    if self._requires_grad:
        # (an alias recorded in the graph: view_as, whose gradient is the identity)
        out = self.view_as(self)
        sub = out._alias(cls)
        sub.grad_fn, sub._requires_grad = out.grad_fn, True
        return sub
    return self._alias(cls)


def _host_elements(op, self):
    if self.device.type != "cpu":
        raise TypeError(f"{op} only works on CPU tensors (it calls a Python function per "
                        f"element); move the tensor with .cpu() first")
    if self._requires_grad:
        raise RuntimeError(f"Can't call {op}() on a tensor that requires grad. Use "
                           f"tensor.detach().{op}() instead.")


def _write_results(op, self, values, fn):
    out = np.empty(self.shape, dtype=self.dtype.np)
    flat = out.reshape(-1)
    for i, args in enumerate(values):
        flat[i] = fn(*args)
    self.copy_(Tensor._wrap(out))
    return self


@tensor_method
def apply_(self, callable):  # noqa: A002 (PyTorch's name)
    """Replace each element x with callable(x), a Python function of a number, in place
    (CPU only; slow: one call per element)."""
    _host_elements("apply_", self)
    items = self.numpy().astype(object).reshape(-1)
    return _write_results("apply_", self, ((v,) for v in _numbers(self, items)), callable)


@tensor_method
def map_(self, tensor, callable):  # noqa: A002
    """Replace each element x with callable(x, y), y the element of ``tensor`` (broadcast
    to this tensor's shape) at its place, in place (CPU only)."""
    _host_elements("map_", self)
    if not isinstance(tensor, Tensor):
        raise TypeError(f"map_: expected a tensor, got {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise TypeError("map_ only works on CPU tensors; move the other tensor with .cpu()")
    other = tensor.detach().expand(*self.shape).numpy().astype(object).reshape(-1)
    mine = self.numpy().astype(object).reshape(-1)
    return _write_results("map_", self, zip(_numbers(self, mine), _numbers(tensor, other)),
                          callable)


def _numbers(t, items):
    """The elements as Python numbers of the tensor's kind (PyTorch passes floats,
    ints or bools)."""
    kind = float if t.dtype.is_floating_point else bool if t.dtype.name == "bool" else int
    return (kind(v) for v in items)


@tensor_method
def resize_(self, *sizes, memory_format=None):
    """Give this tensor the shape ``sizes``, contiguous from its storage offset: over
    the same storage where it holds enough elements (its values kept in memory order),
    else over a larger copy of it (the new elements uninitialized)."""
    shape = tuple(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) \
        else tuple(sizes)
    if any(not isinstance(n, (int, np.integer)) or n < 0 for n in shape):
        raise OpError(f"resize_: sizes must be non-negative ints, got {shape}")
    if self._requires_grad:
        raise RuntimeError("cannot resize tensors that require grad (as in PyTorch); "
                           "resize a detach()ed copy, or use reshape")
    storage, offset = self._storage, self.offset
    needed = offset + math.prod(shape)
    if needed > storage.size:
        # (a larger storage holding the old one's elements first)
        with no_grad():
            bigger = creation.empty(needed, dtype=self.dtype, device=self.device)
            if storage.size:
                old = self._view((storage.size,), (1,), 0)
                bigger.narrow(0, 0, storage.size).copy_(old)
        storage = bigger._storage
    strides = layout.contiguous_strides(shape)
    raw = self._be.make_view(storage, shape, strides, offset)
    grown = Tensor._over(raw, storage, shape, strides, offset)
    self._set_data(grown)
    self._layout = None if offset == 0 else (tuple(strides), offset)
    return self


@tensor_method
def resize_as_(self, the_template, memory_format=None):
    """resize_ to ``the_template``'s shape."""
    return self.resize_(the_template.shape)
