"""Storage: one physical buffer. Every view of it holds this same object."""

from __future__ import annotations

import mmap

#: What watches memory being made (``hx.record_memory_history`` registers one): each
#: has ``buffer_made(data)``, told by ``Tensor._wrap`` of the buffer (``Storage.data``) of
#: every fresh tensor an op makes, and ``node_recorded(node)``, told by the autograd's
#: ``record`` of every graph node. Empty while nothing watches, so the engine pays one
#: falsy check; changed only by :func:`observe` (in place: modules that imported it see
#: the change).
OBSERVERS: list = []


def observe(observer, on: bool = True) -> None:
    """Add ``observer`` to :data:`OBSERVERS` (or, with ``on=False``, remove it)."""
    current = [o for o in OBSERVERS if o is not observer]
    OBSERVERS[:] = current + [observer] if on else current  # (one assignment: a
    # thread iterating it meanwhile sees the list before or after)


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

    def __repr__(self) -> str:
        return (f"Storage(device={self.device.type}, dtype={self.dtype.name}, "
                f"nbytes={self.nbytes}, id=0x{id(self):x})")

    def check_writable(self, op: str) -> None:
        """Refuse an in-place write into a read-only buffer with the fix, before numpy's
        bare "assignment destination is read-only": a batch memory-mapped from a file
        opened read-only, or a read-only numpy array given to from_numpy."""
        flags = getattr(self.data, "flags", None)  # (a GPU block has none: writable)
        if flags is None or flags.writeable:
            return
        base = self.data
        while base is not None and not isinstance(base, mmap.mmap):
            base = getattr(base, "base", None)
        if base is not None:
            raise RuntimeError(
                f"{op}: this tensor is a read-only view of a memory-mapped file (a batch "
                f"of a dataset opened read-only), so it cannot change in place; clone() it "
                f"to change a copy, or open the dataset with "
                f"MemmapDataset(path, writable=True) to write to the file")
        raise RuntimeError(f"{op}: this tensor shares the memory of a read-only numpy "
                           f"array, so it cannot change in place; clone() it to change a "
                           f"copy, or give from_numpy a writable array (array.copy())")


class StorageAlias(Storage):
    """The memory of another Storage read as another dtype (``x.view(dtype)``): its own
    ``data`` and ``dtype``, the root's ``version`` and ``history`` counters, so an
    in-place write through either is seen by autograd through both (PyTorch's view(dtype)
    shares its version counter too)."""

    __slots__ = ("root",)

    def __init__(self, root: Storage, data, dtype, nbytes: int):
        # (the fields set directly: Storage.__init__ would reset the root's counters)
        self.root = root.root if isinstance(root, StorageAlias) else root
        self.data, self.device, self.dtype, self.nbytes = data, root.device, dtype, nbytes

    version = property(lambda self: self.root.version,
                       lambda self, v: setattr(self.root, "version", v))
    history = property(lambda self: self.root.history,
                       lambda self, v: setattr(self.root, "history", v))
