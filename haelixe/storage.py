"""Storage: one physical buffer. Every view of it holds this same object."""

from __future__ import annotations


class Storage:
    """One physical buffer and what it knows about itself.

    ``data`` is a 1-D contiguous numpy array on the CPU, or an allocator block (whose
    ``.buffer`` is the wgpu buffer) on the GPU. ``version`` counts in-place writes through
    any view; autograd compares it to catch edits of tensors saved for backward.
    ``history`` counts the in-place ops that autograd recorded (each gave the written
    tensor a new grad_fn); a view taken before one of them would still send its
    gradient to the old history, so its backward compares this count.
    """

    __slots__ = ("data", "device", "dtype", "nbytes", "version", "history", "__weakref__")

    def __init__(self, data, device, dtype, nbytes: int):
        self.data = data
        self.device = device
        self.dtype = dtype
        self.nbytes = nbytes
        self.version = 0
        self.history = 0

    @property
    def size(self) -> int:
        """Capacity in elements."""
        return self.nbytes // self.dtype.itemsize

    @property
    def block(self):
        """The allocator block this buffer came from (None for numpy-owned memory)."""
        return None if self.device.type == "cpu" else self.data

    def __repr__(self) -> str:
        return (f"Storage(device={self.device.type}, dtype={self.dtype.name}, "
                f"nbytes={self.nbytes}, id=0x{id(self):x})")
