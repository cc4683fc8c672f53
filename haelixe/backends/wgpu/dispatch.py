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

Read-backs copy into a reusable mappable staging buffer at the end of the pending
commands, so a ``loss.item()`` is one submit and one wait. A captured step (``graph.py``)
is encoded from its recording by :meth:`Dispatcher.replay` into the same command buffer
as any pending work, and may leave copies of its small outputs already staged, so a
read-back after it maps them without another submit.

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
from .shaders import KernelSpec, for_naga

_get_ident = threading.get_ident
# submit every 32 dispatches: the GPU starts on a step while Python records the rest
# (the 6-block transformer on an H200: 8.9 steps/s at 256, 14.0 at 32)
DEFAULT_MAX_PENDING = int(os.environ.get("HAELIXE_GPU_MAX_PENDING", "32"))
META_RING_BYTES = 1 << 20
META_WINDOW_INTS = 256  # what one dispatch's metadata may use (the largest needs ~110)
STAGING_KEPT_BYTES = 1 << 24  # read-backs up to this size reuse their staging buffer
# Work of at least LONG_WORK_FLOPS is submitted as soon as it is recorded (submit_long)
# while less than AHEAD_FLOPS of such work went since the host last waited for the GPU:
# after a read-back the GPU idles until the next submit, which batching puts off while
# Python records the rest of the step; once that much is queued, batching keeps ahead
# of the GPU and fewer submits cost the host less (one is a few hundred microseconds on
# an H200). A conv layer's three large products gain from early submits; a Transformer
# step, which reads back every step, loses a little once more than AHEAD_FLOPS is so sent.
LONG_WORK_FLOPS = 1 << 32
AHEAD_FLOPS = 1 << 34


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
        self._map_usage = wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
        self._meta_host = np.zeros(META_RING_BYTES // 4, np.int32)
        self._meta_used = 0  # ints
        self._meta_buf = self.device.create_buffer(
            size=META_RING_BYTES, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST
            | wgpu.BufferUsage.COPY_SRC)
        self._modules: dict[str, object] = {}
        self._module_labels: dict[str, str] = {}  # WGSL source -> "file:entry"
        self._pipelines: dict[KernelSpec, tuple] = {}
        self.counters = dict.fromkeys(
            ("dispatches", "submits", "bind_groups", "pipelines_compiled", "uploads",
             "upload_bytes", "downloads", "download_bytes", "replays"), 0)
        self._groups = BindGroupCache(self.device, self._meta_buf, 4 * META_WINDOW_INTS,
                                      self.counters)
        self._encoder = None
        self._pass = None
        self._pending = 0
        self._lock = threading.RLock()
        self._staging: dict[int, object] = {}  # size -> a mappable buffer for read-backs
        self._staged: dict[int, tuple] = {}  # id(buffer) -> (staging, first, end): copies
        #: the Recording of a step being captured (graph.py), told of every command its
        #: thread (``recording.thread``) issues
        self.recording = None
        self._errors = None  # the device-side checks' error words (see error_words)
        self._sites: list = []  # (error class, message) of each check site, 1-based
        self._site_ids: dict = {}
        #: the DispatchTimer while a profile times each dispatch on the device; else None
        self.timer = None
        self._ahead_flops = 0  # long work submitted at once since the last read-back

    # -- pipelines ---------------------------------------------------------------------
    def pipeline(self, spec: KernelSpec):
        """(pipeline, bind group layout) for ``spec``, compiled once."""
        hit = self._pipelines.get(spec)
        if hit is None:
            module = self.pipeline_module(spec)
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

    def pipeline_module(self, spec: KernelSpec):
        """The shader module of ``spec`` (naga parses and validates it), made once."""
        src = spec.source()
        module = self._modules.get((src, spec.checks))
        if module is None:
            code = for_naga(src)
            module = (self.device.create_shader_module(code=code, label=spec.file)
                      if spec.checks else _unchecked_module(self.device, code, spec.file))
            self._modules[(src, spec.checks)] = module
            self._module_labels.setdefault(src, f"{spec.file}:{spec.entry}")
        return module

    def module_sources(self) -> list[dict]:
        """The final WGSL of every module compiled so far, each once, with the
        ``file:entry`` that first made it: what a portability check compiles elsewhere."""
        return [{"label": label, "source": src} for src, label in self._module_labels.items()]

    # -- recording ---------------------------------------------------------------------
    def dispatch(self, spec: KernelSpec, buffers, meta, grid):
        """Record ``spec`` over ``grid`` workgroups; ``buffers`` fill bindings 1.. in the
        order of ``spec.bindings`` and ``meta`` (ints) is binding 0. Returns the
        dispatch's slot in :attr:`timer` while one times them (else None)."""
        pipe, layout = self.pipeline(spec)
        size = len(meta)  # (a list of ints, or an array: numpy converts it as it copies)
        if size > META_WINDOW_INTS:
            raise ValueError(f"{spec.file}:{spec.entry}: {size} metadata ints exceed "
                             f"the window of {META_WINDOW_INTS}")
        n = -(-max(size, 1) // self.align_ints) * self.align_ints
        with self._lock:
            timer = self.timer
            if (self._pending >= self.max_pending
                    or self._meta_used + META_WINDOW_INTS > self._meta_host.size
                    or (timer is not None and timer.full(self._pass))):
                self.flush()
            start = self._meta_used
            self._meta_host[start:start + size] = meta
            self._meta_used += n
            group = self._groups.get(layout, buffers)
            if self._staged:
                self._unstage_written(spec, buffers)
            slot = None
            if timer is None:
                cpass = self._pass or self._begin_pass()
                _ENCODE.set_pipeline(cpass, pipe)
                _ENCODE.dispatch(cpass, group, start * 4, grid)
            elif timer.in_passes:  # the device's clock read after it (and before the
                # pass's first: a later one starts where the one before it ended)
                cpass = self._pass or self._begin_pass()
                query_set, begin, end, slot = timer.next_in(cpass)
                if begin is not None:
                    _ENCODE.timestamp(cpass, query_set, begin)
                _ENCODE.set_pipeline(cpass, pipe)
                _ENCODE.dispatch(cpass, group, start * 4, grid)
                _ENCODE.timestamp(cpass, query_set, end)
            else:  # its own pass, with the device's clock read at its start and end
                cpass, slot = self._timed_pass(timer)
                _ENCODE.set_pipeline(cpass, pipe)
                _ENCODE.dispatch(cpass, group, start * 4, grid)
                cpass.end()
            self._pending += 1
            self.counters["dispatches"] += 1
            if self.recording is not None and self.recording.thread == _get_ident():
                self.recording.on_dispatch(spec, pipe, layout, buffers, meta, grid)
            return slot

    def _begin_pass(self):
        if self._encoder is None:
            self._encoder = self.device.create_command_encoder()
        self._pass = self._encoder.begin_compute_pass()
        return self._pass

    def _timed_pass(self, timer):
        """(a compute pass of its own writing two timestamps, the dispatch's slot)."""
        if self._pass is not None:
            self._pass.end()
            self._pass = None
        if self._encoder is None:
            self._encoder = self.device.create_command_encoder()
        query_set, first, slot = timer.next_own()
        cpass = self._encoder.begin_compute_pass(timestamp_writes={
            "query_set": query_set, "beginning_of_pass_write_index": first,
            "end_of_pass_write_index": first + 1})
        return cpass, slot

    def device_timer(self):
        """A new :class:`DispatchTimer` of this device, or None where the device writes
        no timestamps (the adapter lacks 'timestamp-query')."""
        if not getattr(self.context, "timestamps", False):
            return None
        return DispatchTimer(self)

    def encode_copy(self, src, src_offset: int, dst, dst_offset: int, nbytes: int) -> None:
        """Record a buffer-to-buffer copy after the pending dispatches (in order)."""
        with self._lock:
            if self._pass is not None:
                self._pass.end()
                self._pass = None
            if self._encoder is None:
                self._encoder = self.device.create_command_encoder()
            self._encoder.copy_buffer_to_buffer(src, src_offset, dst, dst_offset, nbytes)
            self._staged.pop(id(dst), None)

    def replay(self, ops, stage=()) -> None:
        """Encode a captured step's commands after the pending work and submit them all.

        ``ops`` holds ``(pipeline, bind group, [metadata offset], grid)`` per dispatch and
        ``(None, src, src_offset, dst, dst_offset, nbytes)`` per copy; ``stage`` holds
        ``(buffer, first, end, staging)``: copies of small outputs, so a read-back of them
        right after maps ``staging`` without another submit.
        """
        with self._lock:
            if self.recording is not None and self.recording.thread == _get_ident():
                self.recording.on_replay()
            if self._staged:
                self._staged.clear()  # the step may write any of them
            cpass = self._pass or self._begin_pass()
            last = None
            dispatches = 0
            for op in ops:
                pipe = op[0]
                if pipe is None:
                    cpass.end()
                    self._encoder.copy_buffer_to_buffer(*op[1:])
                    cpass = self._encoder.begin_compute_pass()
                    last = None
                    continue
                if pipe is not last:
                    _ENCODE.set_pipeline(cpass, pipe)
                    last = pipe
                _ENCODE.dispatch(cpass, op[1], op[2][0], op[3])
                dispatches += 1
            self._pass = cpass
            errors = self._errors
            for buffer, first, end, staging in stage:
                self.encode_copy(buffer, first, staging, 0, end - first)
                if errors is not None:  # (staging buffers have room for them after)
                    self.encode_copy(errors, 0, staging, _words(end - first), 8)
            self._pending += dispatches
            self.counters["dispatches"] += dispatches
            self.counters["replays"] += 1
            self.flush()
            for buffer, first, end, staging in stage:
                self._staged[id(buffer)] = (staging, first, end, errors is not None)

    def unstage(self, buffer) -> None:
        """Forget a staged copy of ``buffer`` (its staging buffer is going away)."""
        with self._lock:
            self._staged.pop(id(buffer), None)

    def _unstage_written(self, spec, buffers) -> None:
        for binding, buf in zip(spec.bindings, buffers):
            if binding.access != "read":
                self._staged.pop(id(buf), None)

    @property
    def pending(self) -> int:
        """Dispatches recorded and not yet submitted."""
        return self._pending

    def flush(self) -> None:
        """Submit everything recorded so far (one submit)."""
        with self._lock:
            if self._encoder is None:
                return
            resolved = False  # (whether the timer's resolve is in these commands)
            try:
                if self._pass is not None:
                    self._pass.end()
                if self.timer is not None:
                    resolved = self.timer.resolve(self._encoder)
                commands = self._encoder.finish()
            except Exception:
                # wgpu refused the recorded batch (its error names the command): none of
                # it runs; later work records into a fresh encoder instead of this one
                self._pass = self._encoder = None
                self._pending = self._meta_used = 0
                if self.timer is not None:
                    self.timer.abandon(resolved)
                raise
            if self._meta_used:
                self.queue.write_buffer(self._meta_buf, 0, self._meta_host[:self._meta_used])
            self.queue.submit([commands])
            self._pass = self._encoder = None
            self._pending = 0
            self._meta_used = 0
            self.counters["submits"] += 1

    def submit_long(self, flops: float) -> None:
        """Submit what is recorded now where the work just recorded is long (``flops``
        of arithmetic): the GPU runs it while the host records what follows."""
        if flops >= LONG_WORK_FLOPS and self._ahead_flops < AHEAD_FLOPS:
            self._ahead_flops += flops
            self.flush()

    def release(self, buffer) -> None:
        """Before ``buffer`` is destroyed: submit the work that names it and drop its
        cached bind groups."""
        with self._lock:
            self.flush()
            self._groups.forget(buffer)
            self._staged.pop(id(buffer), None)

    # -- transfers -----------------------------------------------------------------------
    def upload(self, buffer, words: np.ndarray, byte_offset: int = 0) -> None:
        """Copy host words into ``buffer`` (after any recorded work that may read it)."""
        with self._lock:
            if self.recording is not None and self.recording.thread == _get_ident():
                self.recording.on_upload(buffer, words, byte_offset)
            self.flush()
            self.queue.write_buffer(buffer, byte_offset, words)
            self._staged.pop(id(buffer), None)
            self.counters["uploads"] += 1
            self.counters["upload_bytes"] += words.nbytes

    def download(self, buffer, byte_offset: int, nbytes: int) -> memoryview:
        """Read ``nbytes`` of ``buffer`` back to the host: one copy into a mappable
        buffer after the recorded work, one submit, one wait (or only the wait, when a
        replay already staged these bytes)."""
        with self._lock:
            if self.recording is not None and self.recording.thread == _get_ident():
                self.recording.on_download(nbytes)
            self.counters["downloads"] += 1
            self.counters["download_bytes"] += nbytes
            errors = self._errors
            hit = self._staged.get(id(buffer))
            if hit is not None and hit[1] <= byte_offset and byte_offset + nbytes <= hit[2] \
                    and (errors is None or hit[3]):
                staging, first, end, _ = hit
                data, words = _read_mapped(staging, byte_offset - first, nbytes,
                                           None if errors is None else _words(end - first))
                self._ahead_flops = 0
                self._raise_device_error(words)
                return data
            at = _words(nbytes)  # where the error words go, when there are any
            size = max(256, 1 << (at + 8 - 1).bit_length())
            staging = self._staging.get(size)
            if staging is None:
                staging = self.device.create_buffer(size=size, usage=self._map_usage)
                if size <= STAGING_KEPT_BYTES:
                    self._staging[size] = staging
            self.encode_copy(buffer, byte_offset, staging, 0, nbytes)
            if errors is not None:
                self.encode_copy(errors, 0, staging, at, 8)
            self.flush()
            data, words = _read_mapped(staging, 0, nbytes, None if errors is None else at)
            self._ahead_flops = 0  # (the GPU has done all of it)
            if size > STAGING_KEPT_BYTES:
                staging.destroy()
            self._raise_device_error(words)
            return data

    # -- device-side checks ----------------------------------------------------------------
    def error_words(self):
        """The two i32 words device-side checks (indexing.check_range) write a failure
        into: the check's site and the failing value, zeros while none failed. Made on
        first use; from then on every read-back reads them too, in the same copy and
        map, and raises the site's error when they are set."""
        if self._errors is None:
            import wgpu

            usage = wgpu.BufferUsage
            self._errors = self.device.create_buffer(  # (new buffers hold zeros)
                size=8, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST)
        return self._errors

    def error_site(self, error, message: str) -> int:
        """The number (from 1) of a check site raising ``error(message)``; ``message``
        may name the failing value as ``{value}``."""
        key = (error, message)
        site = self._site_ids.get(key)
        if site is None:
            self._sites.append(key)
            site = self._site_ids[key] = len(self._sites)
        return site

    def _raise_device_error(self, words) -> None:
        if words is None or not words[0]:
            return
        # reported once: the words are cleared, and so are the replay's staged copies of
        # them (a later read of its outputs copies afresh)
        self.queue.write_buffer(self._errors, 0, np.zeros(2, np.int32))
        self._staged.clear()
        error, message = self._sites[int(words[0]) - 1]
        raise error(f"{message.format(value=int(words[1]))} (found by a check on the GPU "
                    f"inside a captured step, and raised at the next read-back)")

    def staging_buffer(self, nbytes: int):
        """A new mappable buffer a replay copies outputs into (see :meth:`replay`), with
        room for the error words after them."""
        return self.device.create_buffer(size=_words(nbytes) + 8, usage=self._map_usage)

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


class DispatchTimer:
    """The device's clock around each dispatch, while :attr:`Dispatcher.timer` is this.

    Timestamps go into a query set as the dispatches are recorded. Inside the open compute
    pass, where the device has 'timestamp-query-inside-passes', one follows each
    dispatch, and one more comes before the pass's first: a dispatch's time runs from
    the stamp before it (the end of the dispatch before it, or the pass's start) to its
    own. (A stamp makes the device finish the work before it: one per dispatch costs
    it half the waits of a pair.) Elsewhere each dispatch gets a compute pass of its own
    that writes a stamp at its start and end (``timestamp_writes``), which costs the
    host a pass for each dispatch. One query set serves many flushes: each flush resolves
    the stamps written since the last one into the next free 256-byte-aligned region of
    the set's resolve buffer (WebGPU's alignment for a resolve) and copies them into a
    mappable one, so a step makes no new GPU objects; :meth:`read` maps those once the
    work is done. A set is retired when its queries or its buffer's regions run out.
    Slots count the dispatches timed, from 0; each slot's reading is (its start stamp,
    its end stamp minus its start), in nanoseconds of the device's clock (the queue's
    timestamp period converts ticks)."""

    QUERIES = 4096  # timestamps per query set (WebGPU's largest set)
    RESOLVE_BYTES = 1 << 16  # each set's resolve buffer: its queries' 32 KiB, and room
    # for a flush's region to start on a 256-byte boundary
    ALIGN = 256  # a resolve's destination offset is a multiple of this

    def __init__(self, dispatcher):
        import wgpu

        self.dispatcher = dispatcher
        self._wgpu = wgpu
        self.in_passes = dispatcher.context.timestamps_in_passes
        self.period = _timestamp_period(dispatcher.queue)
        self.slots = 0  # dispatches timed so far
        self._batch = None  # the query set in use (see _Batch)
        self._done: list = []  # sets retired, to read
        self._spare: list = []  # sets read, to use again
        self._lost: set = set()  # slots whose flush wgpu refused (no time)
        self._resolved_last = None  # the set the last flush resolved (see abandon)

    def start(self) -> None:
        """Time every dispatch recorded from now on (the pending work first goes)."""
        d = self.dispatcher
        with d._lock:
            d.flush()
            d.timer = self

    def stop(self) -> list:
        """Stop timing; each slot's (start, duration) in nanoseconds (None where none
        was measured)."""
        d = self.dispatcher
        with d._lock:
            d.flush()
            d.timer = None
        if self._batch is not None:
            self._done.append(self._batch)
            self._batch = None
        return self.read()

    def full(self, cpass=None) -> bool:
        """Whether the set in use has no room for the next dispatch's stamps, recorded
        into ``cpass`` (the open pass, or None) (a flush retires it)."""
        batch = self._batch
        if batch is None:
            return False
        # (one stamp where the dispatch follows a stamped one in the same pass, else two)
        need = 1 if cpass is not None and batch.stamped is cpass else 2
        return (batch.used + need > self.QUERIES
                or batch.offset + _aligned(8 * (batch.used - batch.resolved + need),
                                           self.ALIGN) > self.RESOLVE_BYTES)

    def next_in(self, cpass):
        """(query set, index of the stamp before it or None where the last one written
        into ``cpass`` is that, index of its own, slot) for the next dispatch inside the
        pass ``cpass``."""
        batch = self._batch
        if batch is None:
            batch = self._batch = self._new_batch()
        used = batch.used
        if batch.stamped is cpass:
            begin = None
        else:  # (the pass's first: a stamp at its start; the pass is kept, so no other
            # takes its id while it is compared)
            begin, batch.stamped = used, cpass
            used += 1
        batch.ends.append(used)
        batch.used = used + 1
        self.slots += 1
        return batch.query_set, begin, used, self.slots - 1

    def next_own(self):
        """(query set, index of the first of its two stamps, slot) for the next dispatch,
        in a pass of its own."""
        batch = self._batch
        if batch is None:
            batch = self._batch = self._new_batch()
        first = batch.used
        batch.ends.append(first + 1)
        batch.used = first + 2
        batch.stamped = None
        self.slots += 1
        return batch.query_set, first, self.slots - 1

    def _new_batch(self) -> _Batch:
        if self._spare:
            batch = self._spare.pop()
            batch.reset(self.slots)
            return batch
        usage, device = self._wgpu.BufferUsage, self.dispatcher.device
        return _Batch(device.create_query_set(type="timestamp", count=self.QUERIES),
                      device.create_buffer(size=self.RESOLVE_BYTES,
                                           usage=usage.QUERY_RESOLVE | usage.COPY_SRC),
                      device.create_buffer(size=self.RESOLVE_BYTES,
                                           usage=usage.MAP_READ | usage.COPY_DST),
                      self.slots)

    def resolve(self, encoder) -> bool:
        """At a flush: resolve the stamps written since the last flush and copy them
        where they can be read (True where there were any); a full set is retired (the
        next dispatch takes another)."""
        batch = self._batch
        if batch is None:
            return False
        count = batch.used - batch.resolved
        if count:
            encoder.resolve_query_set(batch.query_set, batch.resolved, count,
                                      batch.resolve_buffer, batch.offset)
            encoder.copy_buffer_to_buffer(batch.resolve_buffer, batch.offset,
                                          batch.read_buffer, batch.offset, 8 * count)
            batch.regions.append((batch.offset, batch.resolved, count))
            batch.offset += _aligned(8 * count, self.ALIGN)
            batch.resolved = batch.used
        batch.stamped = None  # (the pass has ended)
        self._resolved_last = batch
        if self.full():
            self._done.append(batch)
            self._batch = None
        return bool(count)

    def abandon(self, resolved: bool) -> None:
        """wgpu refused the flushed commands: their dispatches ran not, nor have times:
        the stamps its resolve took (``resolved``), or those it was yet to take."""
        if resolved:  # (the region it resolved is never written)
            batch = self._resolved_last
            _, first, count = batch.regions.pop()
        else:
            batch = self._batch
            if batch is None or batch.resolved == batch.used:
                return
            first, count = batch.resolved, batch.used - batch.resolved
            batch.resolved, batch.stamped = batch.used, None
        # (a dispatch's two stamps are in one flush: its end stamp tells which)
        self._lost.update(batch.first_slot + i for i, end in enumerate(batch.ends)
                          if first <= end < first + count)

    def read(self) -> list:
        """Each slot's (start, duration) so far, in nanoseconds (waits for the GPU to
        finish the work)."""
        times: list = [None] * self.slots
        done, self._done = self._done, []
        period = self.period
        for batch in done:
            if batch.regions:
                data, _ = _read_mapped(batch.read_buffer, 0, batch.offset)
                words = np.frombuffer(data, np.uint64)
                stamps = np.zeros(batch.used, np.uint64)
                for offset, first, count in batch.regions:
                    stamps[first:first + count] = words[offset // 8:offset // 8 + count]
                stamps = stamps.astype(np.int64).tolist()
                slot = batch.first_slot
                for i, end in enumerate(batch.ends):
                    begin = stamps[end - 1]
                    times[slot + i] = (round(begin * period),
                                       round(max(stamps[end] - begin, 0) * period))
            self._spare.append(batch)
        for slot in self._lost:
            times[slot] = None
        return times


class _Batch:
    """A query set in use by a :class:`DispatchTimer`: its buffers, the slot of its first
    dispatch, the stamps written and resolved so far, each of its dispatches' own stamp
    (the one before it is its start), the pass its last stamp went into (while that is
    open), and each flush's region of its buffers (byte offset, first stamp, stamps)."""

    __slots__ = ("query_set", "resolve_buffer", "read_buffer", "first_slot", "used",
                 "resolved", "offset", "regions", "ends", "stamped")

    def __init__(self, query_set, resolve_buffer, read_buffer, first_slot: int):
        self.query_set, self.resolve_buffer, self.read_buffer = \
            query_set, resolve_buffer, read_buffer
        self.reset(first_slot)

    def reset(self, first_slot: int) -> None:
        self.first_slot, self.used, self.resolved, self.offset = first_slot, 0, 0, 0
        self.regions: list = []
        self.ends: list = []
        self.stamped = None


def _aligned(n: int, align: int) -> int:
    return -(-n // align) * align


def _timestamp_period(queue) -> float:
    """Nanoseconds per timestamp tick (wgpu-native's wgpuQueueGetTimestampPeriod); 1
    where wgpu-py does not reach it (WebGPU's timestamps are nanoseconds)."""
    try:
        from wgpu.backends.wgpu_native._ffi import lib

        return float(lib.wgpuQueueGetTimestampPeriod(queue._internal)) or 1.0
    except (ImportError, AttributeError):
        return 1.0


class _Encoder:
    """A compute pass's set_pipeline, and set_bind_group (one dynamic offset) with
    dispatch_workgroups, straight through wgpu-native's C functions where wgpu-py exposes
    them: its Python wrappers (an error capture around each call, a new C array for each
    offset list) cost a fifth of recording a dispatch. Errors still surface: wgpu-native
    keeps a pass's validation errors in its encoder and reports them when the encoder
    is finished (through wgpu-py's checked call). Elsewhere, wgpu-py's methods."""

    def __init__(self):
        try:
            from wgpu.backends.wgpu_native._ffi import ffi, lib

            self._calls = (lib.wgpuComputePassEncoderSetPipeline,
                           lib.wgpuComputePassEncoderSetBindGroup,
                           lib.wgpuComputePassEncoderDispatchWorkgroups,
                           lib.wgpuComputePassEncoderWriteTimestamp)
            self._offset = ffi.new("uint32_t[1]")  # (dispatches hold the dispatcher's lock)
        except (ImportError, AttributeError):
            self._calls = None

    def set_pipeline(self, cpass, pipe) -> None:
        if self._calls is None:
            cpass.set_pipeline(pipe)
        else:
            self._calls[0](cpass._internal, pipe._internal)

    def dispatch(self, cpass, group, offset: int, grid) -> None:
        if self._calls is None:
            cpass.set_bind_group(0, group, [offset])
            cpass.dispatch_workgroups(*grid)
            return
        _, set_group, run, _ = self._calls
        self._offset[0] = offset
        set_group(cpass._internal, 0, group._internal, 1, self._offset)
        run(cpass._internal, *grid)

    def timestamp(self, cpass, query_set, index: int) -> None:
        """The device's clock into ``query_set[index]``, between two dispatches of the
        pass (the adapter's 'timestamp-query-inside-passes')."""
        if self._calls is None:
            from wgpu.backends.wgpu_native.extras import write_timestamp

            write_timestamp(cpass, query_set, index)
        else:
            self._calls[3](cpass._internal, query_set._internal, index)


_ENCODE = _Encoder()


def _unchecked_module(device, src: str, label: str):
    """A WGSL module compiled without wgpu's runtime checks (see KernelSpec.checks):
    wgpu-native's wgpuDeviceCreateShaderModuleTrusted, which wgpu-py does not wrap. Where
    that is missing (another wgpu build), the checked module."""
    try:
        from wgpu.backends.wgpu_native import _api
        from wgpu.backends.wgpu_native._ffi import ffi, lib
        create = _api.libf.wgpuDeviceCreateShaderModuleTrusted  # raises WGSL errors
    except (ImportError, AttributeError):
        return device.create_shader_module(code=src, label=label)
    code, name = src.encode(), label.encode()
    code_c, name_c = ffi.new("char[]", code), ffi.new("char[]", name)
    source = ffi.new("WGPUShaderSourceWGSL *")
    source.chain.sType = lib.WGPUSType_ShaderSourceWGSL
    source.code.data, source.code.length = code_c, len(code)
    desc = ffi.new("WGPUShaderModuleDescriptor *")
    desc.nextInChain = ffi.cast("WGPUChainedStruct *", source)
    desc.label.data, desc.label.length = name_c, len(name)
    handle = create(device._internal, desc, lib.WGPUShaderRuntimeChecks_None)
    if handle == ffi.NULL:
        raise RuntimeError(f"{label}: shader module creation failed")
    return _api.GPUShaderModule(label, handle, device)


def _read_mapped(staging, first: int, nbytes: int, errors_at=None):
    """Wait for the GPU to fill ``staging``; (``nbytes`` from ``first``, the two error
    words at ``errors_at`` as int32, or None where that is None)."""
    end = _words(first + nbytes)  # mapped from 0: map offsets must be multiples of 8
    if errors_at is not None:
        end = max(end, errors_at + 8)
    staging.map_async("READ_NOSYNC", 0, end).sync_wait()
    try:
        mapped = staging.read_mapped(0, end)
    finally:
        staging.unmap()
    words = None if errors_at is None else \
        np.frombuffer(mapped[errors_at:errors_at + 8], np.int32)
    return mapped[first:first + nbytes], words


def _words(nbytes: int) -> int:
    """``nbytes`` rounded up to whole 4-byte words (copy offsets and sizes must be)."""
    return -(-nbytes // 4) * 4
