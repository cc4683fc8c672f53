"""Tensor: one Storage, a layout (shape, strides, offset) over it, and an autograd slot.

The public contract: ``.shape`` (tuple), ``.strides`` (elements), ``.offset`` (elements
into the storage), ``.dtype``, ``.device``, ``.storage``. Views (``transpose``, slicing,
``expand``, ``flip``...) compute a new layout in ``haelixe.layout`` and build a new raw
array over the *same* Storage object; only ops copy. The raw array (``_data``) is a
numpy view on the CPU and a GpuArray on the GPU; ops hand it to the device's backend.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from . import layout
from .backends.cpu import CPU_BACKEND, storage_for
from .device import CPU, GPU, as_device, backend_for
from .dtype import _BY_NP as _DTYPE_OF_NP
from .dtype import DType, as_dtype
from .storage import Storage

_new = object.__new__


class Tensor:
    __slots__ = ("_data", "_storage", "shape", "dtype", "device", "_requires_grad", "grad",
                 "grad_fn", "_layout", "_accumulator", "_base", "_is_param", "name",
                 "__weakref__")

    # -- construction (internal) ---------------------------------------------------------
    @staticmethod
    def _wrap(raw) -> Tensor:
        """A fresh tensor owning the raw array an op just produced."""
        t = _new(Tensor)
        if raw.__class__ is not np.ndarray:
            if isinstance(raw, (np.generic, numbers.Number)):
                raw = np.asarray(raw)
            elif not isinstance(raw, np.ndarray):
                return Tensor._wrap_gpu(raw)
        dtype = _DTYPE_OF_NP[raw.dtype]
        if raw.flags.c_contiguous:
            t._storage = Storage(raw, CPU, dtype, raw.nbytes)
            t._layout = None
        else:
            t._storage, strides, offset = storage_for(raw, CPU, dtype)
            t._layout = None if strides is None else (strides, offset)
        t._data = raw
        t.shape = raw.shape
        t.dtype = dtype
        t.device = CPU
        t._requires_grad = False
        t.grad = None
        t.grad_fn = None
        t._accumulator = None
        t._base = None
        t._is_param = False
        t.name = None
        return t

    @staticmethod
    def _wrap_gpu(raw) -> Tensor:
        t = _new(Tensor)
        t._data = raw
        t._storage = raw.storage
        t._layout = (tuple(raw.strides), raw.offset)
        t.shape = tuple(raw.shape)
        t.dtype = _DTYPE_OF_NP[np.dtype(raw.dtype)]
        t.device = GPU
        t._requires_grad = False
        t.grad = None
        t.grad_fn = None
        t._accumulator = None
        t._base = None
        t._is_param = False
        t.name = None
        return t

    def _view(self, shape, strides, offset) -> Tensor:
        """A tensor over this tensor's storage with another layout (no autograd)."""
        raw = self._be.make_view(self._storage, shape, strides, offset)
        t = _new(Tensor)
        t._data = raw
        t._storage = self._storage
        t._layout = (tuple(strides), offset)
        t.shape = tuple(shape)
        t.dtype = self.dtype
        t.device = self.device
        t._requires_grad = False
        t.grad = None
        t.grad_fn = None
        t._accumulator = None
        t._base = self if self._base is None else self._base
        t._is_param = False
        t.name = None
        return t

    def _set_data(self, src: Tensor) -> None:
        """Point this tensor at ``src``'s storage and layout (Module.to, flat optimizer
        buffers): the object, and everything holding it, stays the same."""
        self._data, self._storage, self._layout = src._data, src._storage, src._layout
        self.shape, self.dtype, self.device = src.shape, src.dtype, src.device

    @property
    def data(self) -> Tensor:
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        self._set_data(value.detach())

    def _alias(self) -> Tensor:
        """Same storage, same layout, no history: what detach() returns."""
        t = _new(Tensor)
        t._data = self._data  # the same raw array: no new view to build
        t._storage = self._storage
        t._layout = self._layout
        t.shape = self.shape
        t.dtype = self.dtype
        t.device = self.device
        t._requires_grad = False
        t.grad = None
        t.grad_fn = None
        t._accumulator = None
        t._base = self._base
        t._is_param = False
        t.name = None
        return t

    # -- layout --------------------------------------------------------------------------
    @property
    def strides(self) -> tuple:
        lay = self._layout
        if lay is None:
            return layout.contiguous_strides(self.shape)
        return lay[0]

    @property
    def offset(self) -> int:
        lay = self._layout
        return 0 if lay is None else lay[1]

    def stride(self, dim=None):
        return self.strides if dim is None else self.strides[layout.normalize_dim(dim, self.ndim)]

    def storage_offset(self) -> int:
        return self.offset

    @property
    def storage(self):
        return self._storage

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[layout.normalize_dim(dim, self.ndim)]

    def numel(self) -> int:
        return math.prod(self.shape)

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def is_contiguous(self) -> bool:
        return self._layout is None or layout.is_contiguous(self.shape, self._layout[0])

    @property
    def _be(self):
        return CPU_BACKEND if self.device is CPU else backend_for(self.device)

    @property
    def is_cpu(self) -> bool:
        return self.device is CPU

    # -- autograd slot -------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self.grad_fn is not None:
            if not value:
                raise RuntimeError(
                    "requires_grad can only be changed on leaf tensors; this tensor was "
                    f"made by {self.grad_fn.name}. Use detach() for a tensor without history.")
            return
        if value and not self.dtype.is_floating_point:
            raise RuntimeError(f"only floating point tensors can require gradients, got "
                               f"{self.dtype.name}; convert with .float() first")
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def detach(self) -> Tensor:
        return self._alias()

    def detach_(self) -> Tensor:
        self.grad_fn = None
        self._requires_grad = False
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        _autograd_api.backward([self], None if gradient is None else [gradient], retain_graph,
                 create_graph, inputs)

    def register_hook(self, fn):
        """Call ``fn(grad)`` when the gradient for this tensor is computed; a non-None
        return replaces the gradient. Returns a handle with ``remove()``."""
        from .autograd.api import register_hook

        return register_hook(self, fn)

    def retain_grad(self) -> None:
        from .autograd.api import retain_grad

        retain_grad(self)

    # -- data access ---------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The values as numpy. On the CPU this shares memory (a view with the same
        strides, no copy); on the GPU it is a read-back."""
        if self._requires_grad:
            raise RuntimeError("Can't call numpy() on a tensor that requires grad; use "
                               "tensor.detach().numpy() instead.")
        return self._be.to_numpy(self._data)

    def __array__(self, dtype=None, copy=None):
        a = self._be.to_numpy(self._data)
        return a if dtype is None else a.astype(dtype)

    def item(self):
        if self.numel() != 1:
            raise ValueError(f"item(): a tensor with {self.numel()} elements (shape "
                             f"{self.shape}) cannot be converted to a Python scalar; "
                             f"index one element or reduce first")
        v = self._be.to_numpy(self._data).reshape(-1)[0]
        if self.dtype.is_floating_point:
            return float(v)
        if self.dtype.kind == "bool":
            return bool(v)
        return int(v)

    def tolist(self):
        a = self._be.to_numpy(self._data)
        if self.dtype.name in ("bfloat16", "float16"):
            a = a.astype(np.float32)
        return a.tolist()

    def __repr__(self) -> str:
        a = self._be.to_numpy(self._data)
        if a.dtype.kind == "V" or self.dtype.name == "bfloat16":
            a = a.astype(np.float32)
        body = np.array2string(a, separator=", ", precision=4, threshold=200,
                               prefix="tensor(")
        extras = []
        if self.dtype.name not in ("float32", "int64", "bool"):
            extras.append(f"dtype={self.dtype!r}")
        if self.device is not CPU:
            extras.append(f"device='{self.device.type}'")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError(f"the truth value of a tensor with {self.numel()} elements is "
                               f"ambiguous; use .any() or .all()")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point:
            raise TypeError("only integer tensors of a single element can be used as an index")
        return int(self.item())

    __hash__ = object.__hash__

    # -- conversion ----------------------------------------------------------------------
    def to(self, *args, dtype=None, device=None, copy=False) -> Tensor:
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or keywords; returns self
        when nothing changes (unless copy=True)."""
        for a in args:
            if isinstance(a, (DType, np.dtype, type)) or (
                    isinstance(a, str) and a not in ("cpu", "gpu", "wgpu", "cuda")):
                dtype = a
            else:
                device = a
        out = self
        if device is not None and as_device(device) is not self.device:
            out = convert.to_device(out, as_device(device))
        if dtype is not None and as_dtype(dtype) is not out.dtype:
            out = convert.cast(out, as_dtype(dtype))
        if copy and out is self:
            out = self.clone()
        return out

    def cpu(self) -> Tensor:
        return self.to(CPU)

    def gpu(self) -> Tensor:
        return self.to(GPU)

    def float(self) -> Tensor:
        return self.to(dtype="float32")

    def double(self) -> Tensor:
        return self.to(dtype="float64")

    def half(self) -> Tensor:
        return self.to(dtype="float16")

    def bfloat16(self) -> Tensor:
        return self.to(dtype="bfloat16")

    def long(self) -> Tensor:
        return self.to(dtype="int64")

    def int(self) -> Tensor:
        return self.to(dtype="int32")

    def bool(self) -> Tensor:
        return self.to(dtype="bool")

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(dtype=other.dtype)

    def new_zeros(self, shape) -> Tensor:
        return self.new_full(shape, 0)

    def new_ones(self, shape) -> Tensor:
        return self.new_full(shape, 1)

    def new_full(self, shape, value) -> Tensor:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return Tensor._wrap(self._be.full(shape, value, self.dtype.np))

    def new_tensor(self, data) -> Tensor:
        from .creation import tensor

        return tensor(data, dtype=self.dtype, device=self.device)

    def clone(self) -> Tensor:
        return convert.Clone.apply(self)

    def contiguous(self) -> Tensor:
        return self if self.is_contiguous() else convert.Clone.apply(self)

    # -- views ---------------------------------------------------------------------------
    def view(self, *shape) -> Tensor:
        return views.view(self, _shape_args(shape))

    def reshape(self, *shape) -> Tensor:
        return views.reshape(self, _shape_args(shape))

    def view_as(self, other: Tensor) -> Tensor:
        return views.view(self, other.shape)

    def reshape_as(self, other: Tensor) -> Tensor:
        return views.reshape(self, other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        return views.flatten(self, start_dim, end_dim)

    def unflatten(self, dim: int, sizes) -> Tensor:
        dim = layout.normalize_dim(dim, self.ndim, "unflatten")
        return views.reshape(self, self.shape[:dim] + tuple(sizes) + self.shape[dim + 1:])

    def permute(self, *dims) -> Tensor:
        return views.permute(self, _shape_args(dims))

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        return views.permute(self, layout.transpose_dims(self.ndim, dim0, dim1))

    def swapaxes(self, dim0: int, dim1: int) -> Tensor:
        return self.transpose(dim0, dim1)

    def t(self) -> Tensor:
        if self.ndim > 2:
            raise ValueError(f"t() expects a tensor with <= 2 dims, got shape {self.shape}; "
                             f"use .mT or transpose(-2, -1)")
        return self if self.ndim < 2 else self.transpose(0, 1)

    @property
    def T(self) -> Tensor:
        return views.permute(self, tuple(range(self.ndim - 1, -1, -1)))

    @property
    def mT(self) -> Tensor:
        if self.ndim < 2:
            raise ValueError(f"mT needs at least 2 dims, got shape {self.shape}")
        return self.transpose(-2, -1)

    def expand(self, *shape) -> Tensor:
        return views.expand(self, _shape_args(shape))

    def expand_as(self, other: Tensor) -> Tensor:
        return views.expand(self, other.shape)

    def broadcast_to(self, shape) -> Tensor:
        return views.expand(self, tuple(shape))

    def unsqueeze(self, dim: int) -> Tensor:
        return views.unsqueeze(self, dim)

    def squeeze(self, dim=None) -> Tensor:
        return views.squeeze(self, dim)

    def flip(self, *dims) -> Tensor:
        return views.flip(self, _shape_args(dims))

    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        return views.narrow(self, dim, start, length)

    def split(self, split_size_or_sections, dim: int = 0) -> tuple:
        return views.split(self, split_size_or_sections, dim)

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        return views.chunk(self, chunks, dim)

    def unbind(self, dim: int = 0) -> tuple:
        return tuple(self.select(dim, i) for i in range(self.shape[dim]))

    def select(self, dim: int, index: int) -> Tensor:
        dim = layout.normalize_dim(dim, self.ndim, "select")
        return self[(slice(None),) * dim + (index,)]

    def as_strided(self, size, stride, storage_offset=None) -> Tensor:
        return views.as_strided(self, tuple(size), tuple(stride), storage_offset)

    def __getitem__(self, key) -> Tensor:
        return indexing.getitem(self, key)

    def __setitem__(self, key, value) -> None:
        indexing.setitem(self, key, value)

    # -- arithmetic ----------------------------------------------------------------------
    def __add__(self, other):
        return ew.add(self, other)

    def __radd__(self, other):
        return ew.add(self, other)

    def __sub__(self, other):
        return ew.sub(self, other)

    def __rsub__(self, other):
        return ew.rsub(self, other)

    def __mul__(self, other):
        return ew.mul(self, other)

    def __rmul__(self, other):
        return ew.mul(self, other)

    def __truediv__(self, other):
        return ew.div(self, other)

    def __rtruediv__(self, other):
        return ew.rdiv(self, other)

    def __pow__(self, other):
        return ew.pow(self, other)

    def __rpow__(self, other):
        return ew.rpow(self, other)

    def __neg__(self):
        return ew.Neg.apply(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return ew.Abs.apply(self)

    def __matmul__(self, other):
        return linalg.matmul(self, other)

    def __rmatmul__(self, other):
        return linalg.matmul(ew.as_tensor_like(other, self), self)

    def __eq__(self, other):
        return ew.compare("eq", self, other)

    def __ne__(self, other):
        return ew.compare("ne", self, other)

    def __lt__(self, other):
        return ew.compare("lt", self, other)

    def __le__(self, other):
        return ew.compare("le", self, other)

    def __gt__(self, other):
        return ew.compare("gt", self, other)

    def __ge__(self, other):
        return ew.compare("ge", self, other)

    def __invert__(self):
        return ew.logical_not(self)

    def __and__(self, other):
        return ew.logical("and", self, other)

    def __or__(self, other):
        return ew.logical("or", self, other)

    def add(self, other, alpha=1):
        return ew.add(self, other if alpha == 1 else other * alpha)

    def sub(self, other, alpha=1):
        return ew.sub(self, other if alpha == 1 else other * alpha)

    def mul(self, other):
        return ew.mul(self, other)

    def div(self, other):
        return ew.div(self, other)

    def pow(self, other):
        return ew.pow(self, other)

    def neg(self):
        return ew.Neg.apply(self)

    def abs(self):
        return ew.Abs.apply(self)

    def exp(self):
        return ew.Exp.apply(self)

    def log(self):
        return ew.Log.apply(self)

    def sqrt(self):
        return ew.Sqrt.apply(self)

    def rsqrt(self):
        return ew.Rsqrt.apply(self)

    def tanh(self):
        return ew.Tanh.apply(self)

    def sigmoid(self):
        return ew.Sigmoid.apply(self)

    def relu(self):
        return ew.Relu.apply(self)

    def gelu(self, approximate="none"):
        return ew.gelu(self, approximate)

    def silu(self):
        return ew.Silu.apply(self)

    def sin(self):
        return ew.Sin.apply(self)

    def cos(self):
        return ew.Cos.apply(self)

    def sign(self):
        return ew.sign(self)

    def square(self):
        return ew.mul(self, self)

    def reciprocal(self):
        return ew.rdiv(self, 1.0)

    def clamp(self, min=None, max=None):
        return ew.clamp(self, min, max)

    clip = clamp

    def maximum(self, other):
        return ew.binary_minmax("maximum", self, other)

    def minimum(self, other):
        return ew.binary_minmax("minimum", self, other)

    def where(self, condition, other):
        return indexing.where(condition, self, other)

    def masked_fill(self, mask, value):
        return indexing.masked_fill(self, mask, value)

    def gather(self, dim, index):
        return indexing.gather(self, dim, index)

    def matmul(self, other):
        return linalg.matmul(self, other)

    # -- reductions ----------------------------------------------------------------------
    def sum(self, dim=None, keepdim=False, dtype=None):
        x = self if dtype is None else self.to(dtype=dtype)
        return reduce.sum(x, dim, keepdim)

    def mean(self, dim=None, keepdim=False):
        return reduce.mean(self, dim, keepdim)

    def var(self, dim=None, keepdim=False, correction=1, unbiased=None):
        if unbiased is not None:
            correction = 1 if unbiased else 0
        return reduce.var(self, dim, keepdim, correction)

    def std(self, dim=None, keepdim=False, correction=1):
        return reduce.var(self, dim, keepdim, correction).sqrt()

    def max(self, dim=None, keepdim=False):
        return reduce.max_min("max", self, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return reduce.max_min("min", self, dim, keepdim)

    def amax(self, dim=None, keepdim=False):
        return reduce.amax_amin("max", self, dim, keepdim)

    def amin(self, dim=None, keepdim=False):
        return reduce.amax_amin("min", self, dim, keepdim)

    def argmax(self, dim=None, keepdim=False):
        return reduce.argmax(self, dim, keepdim)

    def softmax(self, dim):
        return reduce.softmax(self, dim)

    def log_softmax(self, dim):
        return reduce.log_softmax(self, dim)

    def norm(self):
        return reduce.sum(self * self, None, False).sqrt()

    def all(self):
        return bool(np.all(self._be.to_numpy(self._data)))

    def any(self):
        return bool(np.any(self._be.to_numpy(self._data)))

    def sum_to(self, shape) -> Tensor:
        """Sum a broadcast result back to ``shape`` (the adjoint of expand)."""
        return reduce.sum_to(self, tuple(shape))

    # -- in place ------------------------------------------------------------------------
    def add_(self, other, alpha=1):
        return inplace.apply("add", self, other if alpha == 1 else other * alpha)

    def sub_(self, other, alpha=1):
        return inplace.apply("sub", self, other if alpha == 1 else other * alpha)

    def mul_(self, other):
        return inplace.apply("mul", self, other)

    def div_(self, other):
        return inplace.apply("div", self, other)

    def clamp_(self, min=None, max=None):
        return inplace.clamp_(self, min, max)

    def zero_(self):
        return inplace.fill_(self, 0)

    def fill_(self, value):
        return inplace.fill_(self, value)

    def copy_(self, src):
        return inplace.copy_(self, src)

    def normal_(self, mean=0.0, std=1.0):
        return inplace.random_(self, "normal", mean, std)

    def uniform_(self, a=0.0, b=1.0):
        return inplace.random_(self, "uniform", a, b)

    def _add_inplace_raw(self, g: Tensor) -> None:
        """self += g on the raw buffers, no autograd (gradient accumulation)."""
        if self.device is CPU:
            np.add(self._data, g._data, out=self._data)
        else:
            self._be.binary_into("add", self._data, g._data)  # one dispatch, no temporary
        self._storage.version += 1


def _shape_args(args) -> tuple:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


# The ops need the Tensor class, so they are imported after it.
from .autograd import api as _autograd_api  # noqa: E402
from .ops import convert, indexing, inplace, linalg, reduce, views  # noqa: E402
from .ops import elementwise as ew  # noqa: E402
