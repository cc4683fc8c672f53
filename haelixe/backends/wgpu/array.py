"""GpuArray: a strided view (shape, strides, offset in elements) of one GPU Storage."""

from __future__ import annotations

import math

import numpy as np

from ...layout import contiguous_strides as _contiguous  # (cached per shape)

__all__ = ["GpuArray", "contiguous_strides"]


def contiguous_strides(shape) -> tuple:
    """C-order strides (elements) of ``shape``."""
    return _contiguous(tuple(map(int, shape)))


class GpuArray:
    """What the GPU backend hands the ops layer as a raw array.

    ``storage`` is a :class:`haelixe.storage.Storage` whose ``data`` is the allocator
    block (``storage.data.handle`` is the wgpu buffer). ``strides`` and ``offset`` count
    elements, may be zero or negative, and several GpuArrays share one Storage when they
    are views of each other. ``dtype`` is a numpy dtype (bfloat16 from ml_dtypes).
    """

    __slots__ = ("storage", "shape", "strides", "offset", "dtype")

    def __init__(self, storage, shape, strides=None, offset: int = 0):
        self.storage = storage
        self.shape = shape = tuple(map(int, shape))  # (numpy integers become ints)
        self.strides = _contiguous(shape) if strides is None else tuple(map(int, strides))
        self.offset = int(offset)
        self.dtype = storage.dtype.np
        if len(self.strides) != len(self.shape):
            raise ValueError(f"GpuArray: shape {self.shape} and strides {self.strides} "
                             f"differ in length")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def buffer(self):
        """The wgpu buffer behind the storage."""
        return self.storage.data.handle

    @property
    def device(self):
        return self.storage.device

    def is_contiguous(self) -> bool:
        """C-contiguous (dims of size 1 may carry any stride)."""
        expect = 1
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True

    def view(self, shape, strides, offset) -> GpuArray:
        """Another layout over the same storage (no copy, no checks)."""
        return GpuArray(self.storage, shape, strides, offset)

    def __repr__(self) -> str:
        return (f"GpuArray(shape={self.shape}, dtype={np.dtype(self.dtype).name}, "
                f"strides={self.strides}, offset={self.offset})")
