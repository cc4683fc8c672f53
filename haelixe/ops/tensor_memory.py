"""PyTorch's names for where a tensor's memory is: data_ptr, untyped_storage,
is_pinned, share_memory_ and is_shared.

On the CPU a storage is a numpy buffer: data_ptr is the address of the tensor's first
element in it (so a view's moves with its offset, as PyTorch's). Memory there is never
pinned (no CUDA), and it stays process-local: share_memory_ marks the storage as
shared, so is_shared() answers as PyTorch's does afterwards, but it moves nothing
(Haelixe's DataLoader workers send their batches by pickling). A GPU buffer has no
address wgpu shows: its data_ptr is a stable number naming the buffer, plus the offset
in bytes, so pointers of one storage compare and subtract as PyTorch's; a GPU tensor
is shareable, is_shared() True, as a CUDA one is."""

from __future__ import annotations

import weakref

from ..tensor import Tensor
from .registry import tensor_method

#: storages share_memory_ marked (weakly: a storage's mark goes with it)
_MARKED = weakref.WeakSet()


def _base_address(storage) -> int:
    if storage.nbytes == 0:
        return 0  # (an empty storage holds no memory: PyTorch's pointer is 0 too)
    data = storage.data
    interface = getattr(data, "__array_interface__", None)
    if interface is not None:
        return interface["data"][0]
    return id(data) << 4  # (a GPU block: a number of its own, its offsets added to it)


class UntypedStorage:
    """What Tensor.untyped_storage() returns: the tensor's storage as bytes (PyTorch's
    torch.UntypedStorage, for reading its size and address)."""

    __slots__ = ("_storage",)

    def __init__(self, storage):
        self._storage = storage

    def nbytes(self) -> int:
        return self._storage.nbytes

    def size(self) -> int:
        """The size in bytes (an untyped storage's element is a byte)."""
        return self._storage.nbytes

    __len__ = size

    def data_ptr(self) -> int:
        return _base_address(self._storage)

    @property
    def device(self):
        return self._storage.device

    def element_size(self) -> int:
        return 1

    def is_shared(self) -> bool:
        return _is_shared(self._storage)

    def __eq__(self, other) -> bool:  # (two tensors' storages: the same buffer)
        return isinstance(other, UntypedStorage) and other._storage is self._storage

    def __hash__(self) -> int:
        return id(self._storage)

    def __repr__(self) -> str:
        return f"UntypedStorage(nbytes={self.nbytes()}, device={self.device.type!r})"


def _is_shared(storage) -> bool:
    return storage.device.type != "cpu" or storage in _MARKED


@tensor_method
def data_ptr(self) -> int:
    """The address of the tensor's first element (its storage's, plus the offset in
    bytes); 0 for a tensor whose storage holds nothing."""
    base = _base_address(self._storage)
    return base and base + self.offset * self.dtype.itemsize


@tensor_method
def untyped_storage(self) -> UntypedStorage:
    """The tensor's storage, in bytes: nbytes(), size(), data_ptr()."""
    return UntypedStorage(self._storage)


@tensor_method
def is_pinned(self) -> bool:
    """False: Haelixe has no page-locked (CUDA pinned) memory."""
    return False


@tensor_method
def share_memory_(self) -> Tensor:
    """Mark the storage shared and return the tensor (nothing moves: see the module's
    note)."""
    if self._storage.device.type == "cpu":
        _MARKED.add(self._storage)
    return self


@tensor_method
def is_shared(self) -> bool:
    """True once share_memory_ marked the storage (on the CPU); True on the GPU."""
    return _is_shared(self._storage)
