"""Recording kernels: pipeline cache, one metadata ring, batched submits, counters.

Each :meth:`Dispatcher.dispatch` appends a compute dispatch to a command encoder that
stays open; nothing reaches the GPU queue until :meth:`Dispatcher.flush`, which happens
on a read-back, before an upload or buffer destruction (see below), or when
``max_pending`` dispatches (or a full metadata ring) have piled up. A training step is
then a handful of submits, not one per op.

Metadata (shapes, strides, scalars) of every dispatch of a batch is packed into one host
array and written into one GPU buffer with a single ``write_buffer`` just before the
submit; each dispatch binds its own aligned window of it through a dynamic offset. No
buffer is created per dispatch (driver allocations are slow, on software adapters above
all), and no bind group either once a step has run: they are cached by their buffers
(see ``bindings.py``).

Ordering rules that keep recycled buffers safe: commands in one encoder run in order, so a
block freed and handed out again within a batch is fine. ``queue.write_buffer`` however
runs *before* the next submitted command buffer, so uploads flush recorded work first;
and a buffer must not be destroyed while recorded work still names it, so the allocator
driver flushes before destroying.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from .bindings import BindGroupCache, layout_entries
from .shaders import KernelSpec

DEFAULT_MAX_PENDING = int(os.environ.get("HAELIXE_GPU_MAX_PENDING", "256"))
META_RING_BYTES = 1 << 20
META_WINDOW_INTS = 256  # what one dispatch's metadata may use (the largest needs ~110)


class Dispatcher:
    """Pipeline cache plus the open command encoder of the process's GPU queue."""

    def __init__(self, context, max_pending: int = DEFAULT_MAX_PENDING):
        import wgpu

        self.context = context
        self.device = context.device
        self.queue = context.queue
        self.max_pending = max_pending
        align = context.limits.get("min-storage-buffer-offset-alignment", 256)
        self.align_ints = max(align, 16) // 4
        self._meta_host = np.zeros(META_RING_BYTES // 4, np.int32)
        self._meta_used = 0  # ints
        self._meta_buf = self.device.create_buffer(
            size=META_RING_BYTES, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST
            | wgpu.BufferUsage.COPY_SRC)
        self._modules: dict[str, object] = {}
        self._pipelines: dict[KernelSpec, tuple] = {}
        self._groups = BindGroupCache(self.device, self._meta_buf, 4 * META_WINDOW_INTS)
        self._encoder = None
        self._pass = None
        self._pending = 0
        self._lock = threading.RLock()
        self.counters = dict.fromkeys(
            ("dispatches", "submits", "bind_groups", "pipelines_compiled", "uploads",
             "upload_bytes", "downloads", "download_bytes"), 0)

    # -- pipelines ---------------------------------------------------------------------
    def pipeline(self, spec: KernelSpec):
        """(pipeline, bind group layout) for ``spec``, compiled once."""
        hit = self._pipelines.get(spec)
        if hit is None:
            src = spec.source()
            module = self._modules.get(src)
            if module is None:
                module = self.device.create_shader_module(code=src, label=spec.file)
                self._modules[src] = module
            # an explicit layout: binding 0 takes a dynamic offset, which "auto" cannot
            label = f"{spec.file}:{spec.entry}"
            group_layout = self.device.create_bind_group_layout(
                label=label, entries=layout_entries(spec.bindings, 4 * META_WINDOW_INTS))
            pipe = self.device.create_compute_pipeline(
                layout=self.device.create_pipeline_layout(
                    label=label, bind_group_layouts=[group_layout]),
                label=label, compute={"module": module, "entry_point": spec.entry})
            hit = (pipe, group_layout)
            self._pipelines[spec] = hit
            self.counters["pipelines_compiled"] += 1
        return hit

    # -- recording ---------------------------------------------------------------------
    def dispatch(self, spec: KernelSpec, buffers, meta, grid) -> None:
        """Record ``spec`` over ``grid`` workgroups; ``buffers`` fill bindings 1.. in the
        order of ``spec.bindings`` and ``meta`` (ints) is binding 0."""
        pipe, layout = self.pipeline(spec)
        meta = np.asarray(meta, np.int32)
        if meta.size > META_WINDOW_INTS:
            raise ValueError(f"{spec.file}:{spec.entry}: {meta.size} metadata ints exceed "
                             f"the window of {META_WINDOW_INTS}")
        n = -(-max(meta.size, 1) // self.align_ints) * self.align_ints
        with self._lock:
            if (self._pending >= self.max_pending
                    or self._meta_used + META_WINDOW_INTS > self._meta_host.size):
                self.flush()
            start = self._meta_used
            self._meta_host[start:start + meta.size] = meta
            self._meta_used += n
            before = self._groups.created
            group = self._groups.get(layout, buffers)
            self.counters["bind_groups"] += self._groups.created - before
            if self._pass is None:
                self._encoder = self.device.create_command_encoder()
                self._pass = self._encoder.begin_compute_pass()
            self._pass.set_pipeline(pipe)
            self._pass.set_bind_group(0, group, [start * 4])
            self._pass.dispatch_workgroups(*grid)
            self._pending += 1
            self.counters["dispatches"] += 1

    @property
    def pending(self) -> int:
        """Dispatches recorded and not yet submitted."""
        return self._pending

    def flush(self) -> None:
        """Submit everything recorded so far (one submit)."""
        with self._lock:
            if self._pass is None:
                return
            self._pass.end()
            commands = self._encoder.finish()
            self.queue.write_buffer(self._meta_buf, 0, self._meta_host[:self._meta_used])
            self.queue.submit([commands])
            self._pass = self._encoder = None
            self._pending = 0
            self._meta_used = 0
            self.counters["submits"] += 1

    def release(self, buffer) -> None:
        """Before ``buffer`` is destroyed: submit the work that names it and drop its
        cached bind groups."""
        with self._lock:
            self.flush()
            self._groups.forget(buffer)

    # -- transfers -----------------------------------------------------------------------
    def upload(self, buffer, words: np.ndarray, byte_offset: int = 0) -> None:
        """Copy host words into ``buffer`` (after any recorded work that may read it)."""
        self.flush()
        self.queue.write_buffer(buffer, byte_offset, words)
        self.counters["uploads"] += 1
        self.counters["upload_bytes"] += words.nbytes

    def download(self, buffer, byte_offset: int, nbytes: int) -> memoryview:
        """Submit recorded work and read ``nbytes`` of ``buffer`` back to the host."""
        self.flush()
        data = self.queue.read_buffer(buffer, byte_offset, nbytes)
        self.counters["downloads"] += 1
        self.counters["download_bytes"] += nbytes
        return data

    def synchronize(self) -> None:
        """Submit recorded work and wait until the GPU has finished it."""
        self.flush()
        self.queue.read_buffer(self._meta_buf, 0, 4)  # returns once the queue drained

    def stats(self) -> dict:
        return {**self.counters, "pending": self._pending,
                "pipelines_cached": len(self._pipelines),
                "bind_groups_cached": len(self._groups)}

    def reset_stats(self) -> None:
        for k in self.counters:
            if k != "pipelines_compiled":
                self.counters[k] = 0
