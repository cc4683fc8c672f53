"""``hx.capture``: record a training step once, then replay its kernels without its Python.

    step = hx.capture(train_step)          # or @hx.capture, @hx.capture(device="gpu")
    for x, y in batches:
        loss = step(x, y)                  # forward, backward, optimizer step
        losses.append(loss.item())

In the spirit of CUDA graphs and tinygrad's TinyJit. Per signature of the arguments
(shapes, dtypes, devices, other values, grad and autocast modes), the first ``warmup`` calls run
eagerly; the next two run eagerly *and are recorded*; they are compared word by word
and the second becomes the replay. From then on a call copies the arguments into the
step's static inputs (host data straight from numpy with one upload each), replays the
recorded kernels with one submit, and returns the step's outputs: tensors over buffers
the next replay rewrites (clone one to keep it). Results equal eager mode bit for bit
(where eager mode is itself deterministic: scatter_add and index_add into large tables
accumulate with atomics, in an order the GPU picks; an embedding's gradient sums its
repeated rows in a fixed order up to a table of 2**31 / positions elements).

A replay runs none of the step's Python, so:

- what a call computes must not depend on host values that change from call to call.
  The comparison of the two recordings catches the ones that reach the device (a Python
  number given to a kernel, host-side randomness, a tensor replaced instead of updated)
  and raises :class:`CaptureError` naming the op. Optimizers need ``capturable=True``
  (their step count and learning rate then live on the device) and schedulers step
  outside the captured function;
- a read-back inside the step (``.item()``, ``.numpy()``, printing) is an error: return
  the tensor and read it after the call;
- host-side effects (appending to a list, counters, logging) happen on the recorded calls
  only. Library code that keeps host state in step with the device registers it with
  :func:`on_replay` or :func:`every_call`, as the optimizers do.

Under ``hx.autograd.detect_anomaly()`` every call runs eagerly: its checks read each
gradient back.

On the GPU the buffers the replay names stay reserved for it (a private pool) until
``release()`` or until the captured step is garbage-collected. On the CPU a replay makes
the recorded backend calls (numpy's kernels, the fused ones) from one generated function,
without the Python above them: modules, autograd, the optimizer's bookkeeping (see
``backends/cpu_graph.py``).
"""

from __future__ import annotations

import functools
import threading
import weakref

import numpy as np

from . import creation
from .autograd.mode import STATE, no_grad
from .backends.graph import CaptureError
from .device import CPU, as_device
from .dtype import from_numpy as dtype_of_numpy
from .tensor import Tensor

__all__ = ["capture", "CapturedStep", "CaptureError", "recording", "on_replay",
           "every_call", "outside_only"]

_local = threading.local()  # .signature: the _Signature recording on this thread (read
# from its __dict__: getattr with a default raises and catches an AttributeError)


# -- for library code running inside a captured step ----------------------------------------
def recording() -> bool:
    """Whether a captured step is being recorded on this thread (its Python runs now but
    not on replays)."""
    return _local.__dict__.get("signature") is not None


def on_replay(fn) -> None:
    """While recording: call ``fn()`` before every replay of this step (host-side
    bookkeeping the step's Python did, such as counting steps). Otherwise nothing."""
    sig = _local.__dict__.get("signature")
    if sig is not None:
        sig.pending_hooks.append(fn)


def every_call(fn):
    """Call ``fn()`` now and, while recording, before every replay too; kernels it
    launches are not part of the recording (e.g. writing a changed learning rate into
    the device buffer a capturable optimizer reads)."""
    sig = _local.__dict__.get("signature")
    if sig is None:
        return fn()
    with sig.graph.paused():
        result = fn()
    sig.pending_hooks.append(fn)
    return result


def outside_only(what: str) -> None:
    """Raise :class:`CaptureError` while recording: ``what`` changes host state that the
    step's replays would not change again (a scheduler's step, a new learning rate)."""
    if recording():
        from .backends.graph import where

        raise CaptureError(
            f"{what} inside a captured step ({where(skip=1)}): it runs on the host, so it would "
            f"happen on the recorded calls only, never on a replay. Call it outside the "
            f"captured function (after each call, or once per epoch).")


# -- the front end ------------------------------------------------------------------------
def capture(fn=None, *, device=None, warmup: int = 1):
    """Capture ``fn`` (see the module docstring). ``device`` is where the step runs when
    arguments are host data (numpy arrays or CPU tensors, uploaded straight into the
    static inputs); by default it is the device of the tensor arguments. ``warmup``
    eager calls come before the two recorded ones."""
    if fn is None:
        return lambda f: CapturedStep(f, device=device, warmup=warmup)
    return CapturedStep(fn, device=device, warmup=warmup)


class CapturedStep:
    """A captured function: call it like the function; ``release()`` frees its replays."""

    def __init__(self, fn, *, device=None, warmup: int = 1):
        if not callable(fn):
            raise TypeError(f"hx.capture needs a function, got {type(fn).__name__}")
        if not isinstance(warmup, int) or warmup < 0:
            raise ValueError(f"hx.capture: warmup must be an int >= 0, got {warmup!r}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.device = None if device is None else as_device(device)
        self.warmup = warmup
        self._signatures: dict = {}
        # the graphs alone are released at garbage collection: the finalizer must not
        # hold the signatures, whose function may hold this object (a bound method)
        self._graphs: list = []
        self._lock = threading.RLock()
        self._finalizer = weakref.finalize(self, _release_graphs, self._graphs)

    def __call__(self, *args, **kwargs):
        if recording():
            raise CaptureError(f"{self.__name__}: a captured step was called inside "
                               f"another captured function; capture the outer one only")
        with self._lock:
            names = list(kwargs)
            values = [*args, *(kwargs[k] for k in names)]
            device = self._device_of(values)
            key = (STATE.grad_enabled, STATE.autocast, STATE.anomaly, tuple(names),
                   tuple(_signature_of(v, i) for i, v in enumerate(values)))
            sig = self._signatures.get(key)
            if sig is None:
                sig = self._signatures[key] = _Signature(self.fn, self.__name__,
                                                         self.warmup, device, values, names)
                self._graphs.append(sig.graph)
            try:
                out = sig.call(values)
            except BaseException:
                if not sig.replaying:  # start again on the next call
                    sig.release()
                    del self._signatures[key]
                    self._graphs.remove(sig.graph)
                raise
            return out

    def release(self) -> None:
        """Free every replay of this step: its reserved buffers go back to the allocator.
        Later calls capture again."""
        with self._lock:
            for sig in self._signatures.values():
                sig.release()
            self._signatures.clear()
            self._graphs.clear()

    @property
    def captured(self) -> int:
        """How many signatures of the arguments replay now."""
        return sum(s.replaying for s in self._signatures.values())

    def graph_stats(self) -> list:
        """Per replaying signature: what its replay holds (dispatches, copies, staged
        outputs, bytes its private pool keeps free)."""
        return [s.graph.stats for s in self._signatures.values() if s.replaying]

    def _device_of(self, values):
        devices = {v.device for v in values if isinstance(v, Tensor) and v.device is not CPU}
        if len(devices) > 1:
            raise CaptureError(f"{self.__name__}: arguments on several devices "
                               f"({', '.join(sorted(d.type for d in devices))}); a captured "
                               f"step runs on one")
        device = self.device or (devices.pop() if devices else CPU)
        if device is not CPU and self.device is None:
            for i, v in enumerate(values):
                if isinstance(v, np.ndarray) or (isinstance(v, Tensor) and v.device is CPU):
                    raise CaptureError(
                        f"{self.__name__}: argument {i} is host data (a "
                        f"{'numpy array' if isinstance(v, np.ndarray) else 'CPU tensor'})"
                        f" while the others are on {device.type}: a CPU tensor mixed into "
                        f"a GPU step. Move it first, or capture with "
                        f"hx.capture(fn, device='{device.type}') to upload host "
                        f"arguments straight into the step's inputs.")
        return device

    def __repr__(self) -> str:
        return (f"CapturedStep({self.__name__}, warmup={self.warmup}, "
                f"replaying={self.captured})")


def _release_graphs(graphs: list) -> None:
    for graph in graphs:
        graph.release()
    graphs.clear()


def _signature_of(v, i: int) -> tuple:
    if isinstance(v, Tensor):
        if v.requires_grad:
            raise CaptureError(f"capture: argument {i} requires grad; a captured step "
                               f"takes data, and its gradient would not reach the caller. "
                               f"Pass x.detach() (parameters belong inside the step's "
                               f"model, not in its arguments).")
        return ("tensor", v.shape, v.dtype.name, v.device.type)
    if isinstance(v, np.ndarray):
        return ("array", v.shape, v.dtype.str)
    try:
        hash(v)
    except TypeError:
        raise CaptureError(f"capture: argument {i} is a {type(v).__name__}: arguments of "
                           f"a captured step are tensors, numpy arrays or hashable values "
                           f"(a new value captures again)") from None
    return ("value", type(v).__name__, v)


class _Signature:
    """One signature of the arguments: its static inputs, its graph, its outputs. (It
    holds the function, not the CapturedStep, so that one can be garbage-collected.)"""

    def __init__(self, fn, name: str, warmup: int, device, values, kw_names):
        self.fn, self.name, self.warmup = fn, name, warmup
        self.device = device
        self.kw_names = kw_names
        self.graph = device.backend.new_graph()
        self.calls = 0
        self.replaying = False
        self.hooks: list = []
        self.pending_hooks: list = []
        self.tree = None
        self.outputs: list = []  # the last recording's outputs, detached
        with no_grad():
            self.static = [
                creation.empty(*v.shape, dtype=_dtype(v), device=device)
                if isinstance(v, (Tensor, np.ndarray)) else None for v in values]

    def call(self, values):
        with no_grad():
            for st, v in zip(self.static, values):
                if st is not None:
                    self.graph.load(st._data, _raw_for(v, st))
        if STATE.anomaly:  # its checks read every gradient back: eager on every call
            return self._run(values)
        if self.replaying:
            return self.graph.replay(lambda: self._run(values), self._static_outputs,
                                     self._run_hooks)
        self.calls += 1
        if self.calls <= self.warmup:
            return self._run(values)
        self.pending_hooks = []
        _local.signature = self
        try:
            with self.graph.recording([st._data for st in self.static if st is not None]):
                out = self._run(values, keep=True)
        finally:
            _local.signature = None
        if self.calls == self.warmup + 2:
            self.graph.finish([t._data for t in self.outputs])
            self.hooks = self.pending_hooks
            self.replaying = True
        return out

    def _run(self, values, keep: bool = False):
        args = [v if st is None else st.detach() for st, v in zip(self.static, values)]
        n = len(args) - len(self.kw_names)
        result = self.fn(*args[:n], **dict(zip(self.kw_names, args[n:])))
        leaves: list = []
        tree = _flatten(result, leaves, self.name)
        for t in leaves:
            if t.device is not self.device:
                raise CaptureError(
                    f"{self.name}: returned a tensor on {t.device.type} from a "
                    f"step captured on {self.device.type}; a replay rewrites its outputs "
                    f"on the device, so return device tensors (call .cpu() after the "
                    f"call)")
        detached = [t.detach() for t in leaves]
        if keep:
            self.tree, self.outputs = tree, detached
        return _unflatten(tree, iter(detached))

    def _run_hooks(self) -> None:
        for hook in self.hooks:
            hook()

    def _static_outputs(self):
        return _unflatten(self.tree, (t.detach() for t in self.outputs))

    def release(self) -> None:
        self.graph.release()
        self.replaying = False
        self.static, self.outputs, self.hooks, self.pending_hooks = [], [], [], []


def _dtype(v):
    return v.dtype if isinstance(v, Tensor) else dtype_of_numpy(v.dtype)


def _raw_for(v, static: Tensor):
    """What loads the static input: the device array, or host data as numpy."""
    if isinstance(v, np.ndarray):
        return v
    if v.device is CPU and static.device is not CPU:
        return v.detach().numpy()
    return v._data


_LEAF = object()


def _flatten(out, leaves: list, name: str):
    if out is None:
        return None
    if isinstance(out, Tensor):
        leaves.append(out)
        return _LEAF
    if isinstance(out, (tuple, list)):
        return (type(out), [_flatten(o, leaves, name) for o in out])
    if isinstance(out, dict):
        return (dict, {k: _flatten(v, leaves, name) for k, v in out.items()})
    raise CaptureError(
        f"{name}: a captured step returns tensors (alone or in tuples, lists and dicts), "
        f"got a {type(out).__name__}: a value computed on the host would be the recorded "
        f"call's on every replay. Return it as a tensor, or compute it outside.")


def _unflatten(tree, leaves):
    if tree is None:
        return None
    if tree is _LEAF:
        return next(leaves)
    kind, items = tree
    if kind is dict:
        return {k: _unflatten(v, leaves) for k, v in items.items()}
    values = [_unflatten(o, leaves) for o in items]
    if hasattr(kind, "_fields"):  # a namedtuple
        return kind(*values)
    return kind(values)
