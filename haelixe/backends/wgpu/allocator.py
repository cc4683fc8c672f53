"""GPU memory: a wgpu buffer driver under the project's binning slab allocator."""

from __future__ import annotations

import threading

from ... import memory
from .context import get_context

__all__ = ["GpuBufferRefused", "WgpuBufferDriver", "gpu_allocator"]


class GpuBufferRefused(MemoryError):
    """The adapter refused a buffer: too large for its limits, or out of memory.

    A MemoryError, so the allocator gives its cached slabs back, retries once and then
    raises :class:`~haelixe.memory.OutOfMemoryError` with its own figures.
    """


class WgpuBufferDriver:
    """``malloc`` makes a storage buffer, ``free`` destroys it.

    ``before_free(buffer)`` is called before a buffer is destroyed; the dispatcher sets it
    to submit recorded work first (a destroyed buffer may not appear in a submit) and to
    drop the bind groups cached for it.
    """

    def __init__(self, context):
        import wgpu

        self.device = context.device
        self.max_size = min(context.limits.get("max-buffer-size", 1 << 28),
                            context.limits.get("max-storage-buffer-binding-size", 1 << 27))
        self.usage = (wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC
                      | wgpu.BufferUsage.COPY_DST)
        self.before_free = None
        # every buffer made and not yet freed: a Block caught in a reference cycle is
        # collected together with its buffer, and wgpu's finalizer could release the
        # buffer before the Block hands it back to the cache; held here, it never is
        self._live: dict[int, object] = {}

    def malloc(self, nbytes: int):
        import wgpu

        if nbytes > self.max_size:
            raise GpuBufferRefused(
                f"a buffer of {nbytes} bytes exceeds this adapter's largest storage "
                f"binding, {self.max_size} bytes; split the tensor or use device=\"cpu\"")
        try:
            buffer = self.device.create_buffer(size=max(int(nbytes), 4), usage=self.usage)
        except wgpu.GPUError as err:
            raise GpuBufferRefused(f"wgpu refused a buffer of {nbytes} bytes: {err}") \
                from err
        self._live[id(buffer)] = buffer
        return buffer

    def free(self, handle) -> None:
        if self.before_free is not None:
            self.before_free(handle)
        handle.destroy()
        self._live.pop(id(handle), None)


_allocator = None
_lock = threading.Lock()


def gpu_allocator() -> memory.Allocator:
    """The allocator of the "gpu" device, created and registered on first use."""
    global _allocator
    if _allocator is None:
        with _lock:
            if _allocator is None:
                driver = WgpuBufferDriver(get_context())
                # stable reuse: a training step gets the same buffers every time, so
                # its bind groups come from the cache (bindings.py)
                alloc = memory.Allocator("gpu", driver, reuse="stable")
                memory.register_allocator("gpu", alloc)
                _allocator = alloc
    return _allocator
