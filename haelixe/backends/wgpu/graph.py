"""Capture and replay of a step on the GPU: the backend side of ``hx.capture``.

A :class:`Recording` watches the dispatcher while the step runs eagerly: each dispatch
(pipeline, buffers, metadata, grid) and each upload, with the line of the step it came
from. Meanwhile new blocks come from a private pool (``memory.PrivatePool``), which keeps
their slabs for this graph; a buffer made before the call and read by it (a parameter,
the optimizer's state) is reserved in the pool too, so neither kind is handed to another
tensor between replays. Each binding is named by what it holds: argument ``i`` (a static
input), the ``n``-th allocation of the call, or a buffer from outside.

Two recordings are compared word by word (metadata, uploads, launch sizes, which buffer
each binding names). Where they differ, the replay would freeze a value that changes, so
:meth:`WgpuGraph.finish` raises :class:`CaptureError` naming the op and the fix. The second
recording becomes the replay:

- its metadata goes once into a buffer of the graph; every dispatch gets a bind group
  over that buffer and its recorded buffers, made once;
- uploads inside the step (equal on both calls: constants) become copies from a
  constants buffer, at their place in the sequence;
- :meth:`WgpuGraph.replay` encodes the commands after any pending work and submits once;
  outputs of up to ``STAGE_BYTES`` are copied to mappable buffers in that submit, so a
  ``loss.item()`` after it is one wait and no second submit.
"""

from __future__ import annotations

import contextlib
import threading
from typing import NamedTuple

import numpy as np

from .. import graph as shared
from ..graph import CaptureError, where
from . import dtypes as gd
from .array import GpuArray
from .bindings import BindGroupCache
from .dispatch import META_WINDOW_INTS
from .geometry import N_SCALARS

__all__ = ["WgpuGraph", "Recording", "STAGE_BYTES"]

STAGE_BYTES = 1 << 16  # outputs up to this size are staged for a read-back by the replay


class _Dispatch(NamedTuple):
    spec: object
    pipeline: object
    layout: object
    buffers: tuple
    tokens: tuple
    meta: np.ndarray
    grid: tuple
    where: str

    @property
    def what(self) -> str:
        return f"kernel {self.spec.file.removesuffix('.wgsl')}:{self.spec.entry}"


class _Upload(NamedTuple):
    buffer: object
    token: tuple
    byte_offset: int
    words: np.ndarray
    where: str

    @property
    def what(self) -> str:
        return f"an upload of {self.words.nbytes} bytes"


class Recording:
    """The commands of one call of a step, and the pool its new blocks came from."""

    def __init__(self, pool, inputs):
        self.pool = pool
        self.thread = threading.get_ident()  # other threads' commands are not the step's
        self.entries: list = []
        self.made: frozenset = frozenset()  # ids of slabs made by the call and alive after
        self._arguments = {id(raw.buffer): i for i, raw in enumerate(inputs)}

    def token(self, buffer) -> tuple:
        """What ``buffer`` holds: ("argument", i), ("new", n) or ("outside", id)."""
        i = self._arguments.get(id(buffer))
        if i is not None:
            return ("argument", i)
        n = self.pool.serial(buffer)
        if n is not None:
            return ("new", n)
        self.pool.reserve(buffer)
        return ("outside", id(buffer))

    # -- told by the dispatcher -----------------------------------------------------------
    def on_dispatch(self, spec, pipeline, layout, buffers, meta, grid) -> None:
        self.entries.append(_Dispatch(spec, pipeline, layout, tuple(buffers),
                                      tuple(self.token(b) for b in buffers),
                                      np.array(meta, np.int32), tuple(grid), where()))

    def on_upload(self, buffer, words, byte_offset) -> None:
        self.entries.append(_Upload(buffer, self.token(buffer), int(byte_offset),
                                    np.array(words).view(np.uint32).reshape(-1), where()))

    def on_download(self, nbytes) -> None:
        raise shared.read_back_error(f"{nbytes} bytes", where(), "read the GPU")

    def on_replay(self) -> None:
        raise CaptureError(f"a captured step was called inside another captured function "
                           f"({where()}); capture the outer function only")


class WgpuGraph:
    """One captured signature of a step on the GPU (see the module docstring)."""

    def __init__(self, backend):
        self.backend = backend
        self.dispatcher = backend.dispatcher
        self._recordings: list = []
        self._pool = None  # the replayed recording's
        self._ops = None
        self._stage = ()
        self._owned = []  # buffers of the graph itself: metadata, constants, staging
        self._entries = ()

    # -- inputs ----------------------------------------------------------------------------
    def load(self, dst: GpuArray, value) -> None:
        """Copy an argument into the static input ``dst``: a GpuArray by a copy kernel,
        host data (a numpy array) by one upload."""
        if isinstance(value, GpuArray):
            if value.storage is not dst.storage:
                self.backend.copy_into(dst, value)
            return
        a = gd.narrow(np.asarray(value), "capture")
        if a.shape != dst.shape or a.dtype != dst.dtype:
            raise CaptureError(f"capture: an argument of shape {a.shape} and dtype {a.dtype} "
                               f"cannot fill a static input of shape {dst.shape} and dtype "
                               f"{dst.dtype}")
        if a.size:
            self.dispatcher.upload(dst.buffer, gd.to_words(np.ascontiguousarray(a)))

    # -- recording -------------------------------------------------------------------------
    @contextlib.contextmanager
    def recording(self, inputs):
        """Record the commands of the call made inside the block."""
        d = self.dispatcher
        if d.recording is not None:
            raise CaptureError(f"a step is already being captured ({where()}); capture "
                               f"the outer function only")
        if len(self._recordings) >= 2:
            raise CaptureError("capture: this graph is already recorded")
        pool = self.backend.allocator.private_pool()
        rec = Recording(pool, inputs)
        d.recording = rec
        try:
            with pool.routing():
                yield rec
        except BaseException:
            pool.release()
            raise
        finally:
            d.recording = None
        rec.made = pool.held_ids()
        self._recordings.append(rec)
        if len(self._recordings) == 1:
            pool.release()  # its slabs serve the second call; only that one is replayed

    @contextlib.contextmanager
    def paused(self):
        """Run work inside a recording that is not part of the step (not recorded; its
        allocations come from the shared cache)."""
        d = self.dispatcher
        rec = d.recording
        if rec is None:
            yield
            return
        d.recording = None
        try:
            with rec.pool.paused():
                yield
        finally:
            d.recording = rec

    def finish(self, outputs) -> None:
        """Compare the two recordings and prepare the second for replay; ``outputs`` are
        the raw arrays the step returned (staged for read-back when small)."""
        first, second = self._recordings
        try:
            _compare(first, second)
            if second.pool.lost:
                raise CaptureError(
                    "a tensor created outside the captured function was read by the step "
                    "and then freed during it (an attribute replaced by a new tensor?): "
                    "update such state in place (t.copy_(new)) so a replay finds it")
        except CaptureError:
            self.release()
            raise
        self._pool = second.pool
        self._entries = second.entries
        self._build(second.entries, outputs)
        self._recordings = []

    def _build(self, entries, outputs) -> None:
        d = self.dispatcher
        import wgpu

        usage = wgpu.BufferUsage
        dispatches = [e for e in entries if isinstance(e, _Dispatch)]
        offsets, used = [], 0
        for e in dispatches:
            offsets.append(used)
            used += -(-max(e.meta.size, 1) // d.align_ints) * d.align_ints
        meta_host = np.zeros(used + META_WINDOW_INTS, np.int32)
        for e, at in zip(dispatches, offsets):
            meta_host[at:at + e.meta.size] = e.meta
        meta_buf = d.device.create_buffer(size=meta_host.nbytes,
                                          usage=usage.STORAGE | usage.COPY_DST)
        d.queue.write_buffer(meta_buf, 0, meta_host)
        self._owned.append(meta_buf)
        uploads = [e for e in entries if isinstance(e, _Upload)]
        const_buf, const_at = None, {}
        if uploads:
            words = np.concatenate([e.words for e in uploads])
            const_buf = d.device.create_buffer(size=max(words.nbytes, 4),
                                               usage=usage.COPY_SRC | usage.COPY_DST)
            d.queue.write_buffer(const_buf, 0, words)
            self._owned.append(const_buf)
            at = 0
            for e in uploads:
                const_at[id(e)] = at
                at += e.words.nbytes
        groups = BindGroupCache(d.device, meta_buf, 4 * META_WINDOW_INTS,
                                capacity=max(len(dispatches), 1))
        ops, k = [], 0
        for e in entries:
            if isinstance(e, _Upload):
                ops.append((None, const_buf, const_at[id(e)], e.buffer, e.byte_offset,
                            e.words.nbytes))
                continue
            group = groups.get(e.layout, e.buffers)
            ops.append((e.pipeline, group, [4 * offsets[k]], e.grid))
            k += 1
        d.counters["bind_groups"] += groups.created
        d.counters["uploads"] += 1 + bool(uploads)
        stage, seen = [], set()
        for raw in outputs:
            buf = raw.buffer
            if buf.size <= STAGE_BYTES and id(buf) not in seen:
                seen.add(id(buf))
                staging = d.staging_buffer(buf.size)
                self._owned.append(staging)
                stage.append((buf, 0, buf.size, staging))
        self._ops, self._stage = ops, tuple(stage)

    # -- replay ----------------------------------------------------------------------------
    def replay(self, run, static_outputs, prelude):
        """Run the host-side ``prelude``, then encode and submit the recorded commands
        (one submit); the outputs are the static ones, rewritten by this replay."""
        if self._ops is None:
            raise CaptureError("capture: this graph was released")
        if self._pool.lost:
            raise shared.lost_error(self._lost_reader())
        prelude()
        self.dispatcher.replay(self._ops, self._stage)
        return static_outputs()

    def _lost_reader(self) -> str:
        lost = {id(h) for h in self._pool.lost}
        for e in self._entries:
            if isinstance(e, _Dispatch) and any(id(b) in lost for b in e.buffers):
                return f"{e.what}, {e.where}"
        return "the step"

    def release(self) -> None:
        """Give the pool's slabs back to the allocator and drop the graph's buffers."""
        for rec in self._recordings:
            rec.pool.release()
        self._recordings = []
        if self._pool is not None:
            self._pool.release()
            self._pool = None
        for buf, *_ in self._stage:
            self.dispatcher.unstage(buf)
        for buf in self._owned:
            buf.destroy()
        self._owned, self._ops, self._stage, self._entries = [], None, (), ()

    @property
    def stats(self) -> dict:
        """What the replay holds: dispatches, copies, staged outputs, pool bytes."""
        ops = self._ops or ()
        return {"dispatches": sum(op[0] is not None for op in ops),
                "copies": sum(op[0] is None for op in ops),
                "staged_outputs": len(self._stage),
                "pool_free_bytes": self._pool.free_bytes if self._pool is not None else 0}


# -- comparing two recordings ----------------------------------------------------------------
def _compare(a: Recording, b: Recording) -> None:
    for k, (ea, eb) in enumerate(zip(a.entries, b.entries)):
        if type(ea) is not type(eb) or (isinstance(ea, _Dispatch) and ea.spec != eb.spec):
            raise _diverged(a, b, k)
        if isinstance(ea, _Dispatch):
            if ea.grid != eb.grid or not np.array_equal(ea.meta, eb.meta):
                raise _values_differ(k, ea, eb)
            pairs = zip(ea.tokens, eb.tokens)
        else:
            if ea.byte_offset != eb.byte_offset or not np.array_equal(ea.words, eb.words):
                raise _upload_differs(k, ea, eb)
            pairs = [(ea.token, eb.token)]
        for slot, (ta, tb) in enumerate(pairs):
            if ta != tb:
                raise _buffers_differ(k, slot, ea, eb, ta, tb, a.made)
    if len(a.entries) != len(b.entries):
        raise _diverged(a, b, min(len(a.entries), len(b.entries)))


def _diverged(a, b, k) -> CaptureError:
    return shared.diverged_error(a.entries, b.entries, k, "command",
                                 lambda e: f"{e.what} ({e.where})")


def _values_differ(k, ea, eb) -> CaptureError:
    if ea.grid != eb.grid:
        detail = f"its launch size differs ({ea.grid} and {eb.grid}): a size"
    else:
        i = int(np.flatnonzero(ea.meta != eb.meta)[0])
        va, vb = int(ea.meta[i]), int(eb.meta[i])
        if 0 < i < N_SCALARS:
            fa, fb = (float(np.array(v, np.int32).view(np.float32)) for v in (va, vb))
            detail = (f"its scalar operand {i} differs ({fa:.9g} and {fb:.9g} as float32, "
                      f"{va} and {vb} as int32): a Python number")
        else:
            detail = f"its metadata word {i} differs ({va} and {vb}): a size or offset"
    return shared.values_differ_error(f"capture: {ea.what} (command #{k}, {eb.where})", detail)


def _upload_differs(k, ea, eb) -> CaptureError:
    return CaptureError(
        f"capture: {ea.what} inside the step (command #{k}, {eb.where}) carried other "
        f"data on two calls: host data that changes would be frozen into the replay. "
        f"That is host-side randomness (dropout, hx.rand/randn inside the step) or a CPU "
        f"tensor moved to the GPU inside it. Pass such data as an argument of the captured "
        f"function (hx.capture(fn, device='gpu') uploads host arguments straight into the "
        f"step's inputs), or turn the randomness off (model.eval(), dropout p=0).")


def _buffers_differ(k, slot, ea, eb, ta, tb, made_by_first) -> CaptureError:
    head = f"capture: {ea.what} (command #{k}, {eb.where}), buffer {slot},"
    if tb[0] == "outside" and tb[1] in made_by_first:
        return shared.state_replaced_error(head)
    if ta[0] == tb[0] == "outside":
        return shared.different_outside_error(head)
    return shared.flow_differs_error(head, _token(ta), _token(tb))


def _token(t) -> str:
    kind, v = t
    if kind == "argument":
        return f"argument {v}"
    if kind == "new":
        return f"the call's allocation #{v}"
    return "a tensor made outside the call"
