"""Tensor: one Storage, a layout (shape, strides, offset) over it, and an autograd slot.

The public contract: ``.shape`` (tuple), ``.strides`` (elements), ``.offset`` (elements
into the storage), ``.dtype``, ``.device``, ``.storage``. Views (``transpose``, slicing,
``expand``, ``flip``...) compute a new layout in ``haelixe.layout`` and build a new raw
array over the *same* Storage object; only ops copy. The raw array (``_data``) is a
numpy view on the CPU and a GpuArray on the GPU; ops hand it to the device's backend.

This module holds the data structure only: the ops (haelixe/ops) attach the methods
that compute (``x + y``, ``x.sum()``, ``x.view(...)``), and autograd attaches
``backward``, so nothing here depends on them.
"""

from __future__ import annotations

import math

import numpy as np

from . import device as _device
from . import dtype as _dtypes
from . import layout, printing
from .backends import backend_for, backend_of
from .closest import missing_attribute
from .device import CPU
from .dtype import _BY_NP as _DTYPE_OF_NP
from .storage import OBSERVERS, Storage

_new = object.__new__
_ndarray = np.ndarray


class Tensor:
    __slots__ = ("_data", "_storage", "shape", "dtype", "device", "_requires_grad", "grad",
                 "grad_fn", "_layout", "_accumulator", "_base", "_is_param", "name",
                 "_retains_grad", "_be", "__weakref__")

    # numpy defers to Tensor's reflected operators (np.float32(2) * t is t.__rmul__)
    __array_ufunc__ = None

    # -- construction (internal): one constructor, three ways in ------------------------
    def _init(self, data, storage, layout_, shape, dtype, device, base) -> Tensor:
        """Fill every slot: the one place a tensor's fields are set."""
        self._data = data
        self._storage = storage
        self._layout = layout_
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self._be = device._be or backend_for(device)  # (every op asks: no property)
        self._requires_grad = False
        self.grad = None
        self.grad_fn = None
        self._accumulator = None
        self._base = base
        self._is_param = False
        self._retains_grad = False
        self.name = None
        return self

    @staticmethod
    def _wrap(raw) -> Tensor:
        """A fresh tensor owning the raw array an op just produced."""
        if raw.__class__ is not _ndarray:
            if not isinstance(raw, np.generic):
                return _wrap_other(raw)
            raw = np.asarray(raw)  # the numpy scalar of a full reduction
        elif not raw.flags.c_contiguous:
            return _wrap_other(raw)
        # A C-contiguous numpy array, as every CPU op's output is: tested first, with
        # the rest in _wrap_other, and its fields stored here directly, as
        # Storage.__init__ and _init would (which saves their two calls: 40% of it)
        dtype = _DTYPE_OF_NP[raw.dtype]
        storage = _new(Storage)
        storage.data = raw
        storage.device = CPU
        storage.dtype = dtype
        storage.nbytes = raw.nbytes
        storage.version = storage.history = 0
        t = _new(Tensor)
        t._data = raw
        t._storage = storage
        t._layout = None
        t.shape = raw.shape
        t.dtype = dtype
        t.device = CPU
        t._be = CPU._be or backend_for(CPU)
        t._requires_grad = t._is_param = t._retains_grad = False
        t.grad = t.grad_fn = t._accumulator = t._base = t.name = None
        if OBSERVERS:  # (memory history: empty otherwise)
            for o in OBSERVERS:
                o.buffer_made(raw)
        return t

    def _view(self, shape, strides, offset, raw=None) -> Tensor:
        """A tensor over this tensor's storage with another layout (no autograd); ``raw``:
        the raw view of that layout, where the caller has it."""
        if raw is None:
            raw = self._be.make_view(self._storage, shape, strides, offset)
        return _new(Tensor)._init(raw, self._storage, (tuple(strides), offset), tuple(shape),
                                  self.dtype, self.device,
                                  self if self._base is None else self._base)

    @staticmethod
    def _over(raw, storage, shape, strides, offset) -> Tensor:
        """A fresh tensor (no history, no base) over ``storage`` with this layout:
        view(dtype), whose storage reads another's memory as its own dtype."""
        return _new(Tensor)._init(raw, storage, (tuple(strides), offset), tuple(shape),
                                  storage.dtype, storage.device, None)

    def _alias(self, cls=None) -> Tensor:
        """Same storage, same layout, no history: what detach() returns."""
        return _new(cls or Tensor)._init(self._data, self._storage, self._layout, self.shape,
                                         self.dtype, self.device, self._base)

    def _set_data(self, src: Tensor) -> None:
        """Point this tensor at ``src``'s storage and layout (Module.to, flat optimizer
        buffers): the object, and everything holding it, stays the same."""
        self._data, self._storage, self._layout = src._data, src._storage, src._layout
        self.shape, self.dtype, self.device, self._be = src.shape, src.dtype, src.device, src._be

    @property
    def data(self) -> Tensor:
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        self._set_data(value.detach())

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

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def is_contiguous(self) -> bool:
        return self._layout is None or layout.is_contiguous(self.shape, self._layout[0])

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
    def _version(self) -> int:
        """In-place writes so far into this tensor's storage, through any view or
        detach() of it (PyTorch's name): one counter per storage, as PyTorch shares it."""
        return self._storage.version

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def detach(self) -> Tensor:
        return self._alias()

    def detach_(self) -> Tensor:
        self.grad_fn = None
        self._requires_grad = False
        return self

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
        # PyTorch's layout under the print options (haelixe/printing.py)
        a = self._be.to_numpy(self._data)
        if a.dtype.kind == "V" or self.dtype.name in ("bfloat16", "float16"):
            a = a.astype(np.float32)
        prefix = "tensor("
        suffixes = []
        if self.device is not _device.get_default_device():
            suffixes.append(f"device='{self.device.type}'")
        default = _dtypes.default_float
        if a.size == 0:
            if a.ndim != 1:
                suffixes.append(f"size={self.shape}")
            if self.dtype is not default:
                suffixes.append(f"dtype={self.dtype!r}")
            text = "[]"
        else:
            if not printing.OPTIONS.edgeitems:  # (no element shown at an end: the size is)
                suffixes.append(f"size={self.shape}")
            if self.dtype is not default and self.dtype.name not in ("int64", "bool"):
                suffixes.append(f"dtype={self.dtype!r}")
            text = printing.body(a, len(prefix))
        if self.grad_fn is not None:
            suffixes.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self._requires_grad:
            suffixes.append("requires_grad=True")
        return printing.with_suffixes(prefix + text, suffixes, len(prefix))

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

    def __format__(self, spec: str) -> str:
        # f"{loss:.4f}": a 0-d tensor formats as its number, as in PyTorch
        if self.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point:
            raise TypeError("only integer tensors of a single element can be used as an index")
        return int(self.item())

    __hash__ = object.__hash__

    def __getattr__(self, name):
        # only reached for a name Tensor lacks: say what is closest (protocol probes such
        # as numpy's __array_interface__ get the plain error at once)
        if name.startswith("_"):
            raise AttributeError(f"'Tensor' object has no attribute {name!r}")
        raise missing_attribute("haelixe.Tensor", name, vars_of_tensor(), _TENSOR_HINTS)


def _wrap_other(raw) -> Tensor:
    """Tensor._wrap of a strided numpy view or of another backend's array."""
    be = backend_of(raw)
    if raw.__class__ is not be.raw_type:
        raw = np.asarray(raw)  # (a subclass of numpy's array)
    storage, strides, offset = be.adopt(raw)
    if strides is None:
        lay = None
    else:
        lay = (strides, offset)
        if offset == 0 and strides == layout.contiguous_strides(raw.shape):
            lay = None
    t = _new(Tensor)._init(raw, storage, lay, tuple(raw.shape), storage.dtype,
                           storage.device, None)
    if OBSERVERS:
        for o in OBSERVERS:
            o.buffer_made(storage.data)
    return t


def vars_of_tensor() -> dict:
    return {n: getattr(Tensor, n, None) for n in dir(Tensor)}


#: PyTorch names Haelixe spells otherwise
_TENSOR_HINTS = {
    "pin_memory": "hx.Tensor.clone (Haelixe has no page-locked memory to pin; the tensor "
                  "as it is serves)",
}
