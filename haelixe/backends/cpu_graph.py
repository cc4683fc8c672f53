"""Capture and replay of a step on the CPU: the backend side of ``hx.capture``.

On the CPU every op of a step ends in a call of the backend (``CPUBackend``'s methods
and its ``direct`` ufuncs); the Python above it (tensors, autograd, modules, the
optimizer's bookkeeping) decides *which* calls with *which* arrays, and does it the same
way on every call of a step with the same signature. A :class:`Recording` watches those
calls while the step runs eagerly: each call's function, its arguments and its results,
with every array named by what it holds: argument ``i`` (a static input), the ``n``-th
array the call made (a result of an earlier backend call), or an array from outside (a
parameter, the optimizer's state).

Two recordings are compared call by call: the same functions, the same host values
(shapes, Python numbers, kernels) and the same arrays. Where they differ, a replay would
freeze a value that changes, so :meth:`CpuGraph.finish` raises :class:`CaptureError`
naming the op and the fix. The second recording becomes the replay: one generated Python
function calling the recorded functions in order, each result in a local variable the
later calls read. A replay runs the backend's code and numpy's kernels as the eager
step does, with the same arguments, so its results equal eager mode's bit for bit; it
skips the Python above the backend (about a fifth of the denoiser's training step).

Arrays the call made that outlive it (the outputs, a ``.grad`` it created) are copied
into at the end of every replay, so tensors over them see the replay's values, as the
GPU's replay rewrites its static outputs.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from typing import NamedTuple

import numpy as np

from ..device import CPU
from ..storage import Storage
from . import graph as shared
from .graph import CaptureError, where

__all__ = ["CpuGraph", "recording_here", "unwrap_methods", "wrap_methods"]

#: backend methods a step's Python may call that are not recorded: they compute nothing
#: on the step's data (to_numpy is recorded as refused: a read-back)
_NOT_RECORDED = frozenset({"new_graph", "checks_on_device", "info"})


class _New(NamedTuple):  # the n-th object (array or Storage) the recorded call made
    n: int


class _Arg(NamedTuple):  # static input i
    i: int


class _Outside(NamedTuple):  # an array or Storage made before the call (by identity)
    obj: object


class _StorageOf(NamedTuple):  # a Storage over the n-th array (Tensor._wrap makes those)
    n: int
    dtype: object


class _Const(NamedTuple):  # a host value: compared between the two recordings
    value: object


class _Seq(NamedTuple):  # a tuple or list of templates
    kind: type
    items: tuple


class _Call(NamedTuple):
    name: str
    fn: object      # the backend's own callable (not the recording wrapper)
    args: tuple     # templates
    kwargs: tuple   # (name, template) pairs
    result: object  # a template whose _New entries the call made
    scalar: bool    # the call gave a numpy scalar, handed on as a 0-d array
    fresh: bool     # from_numpy: a host constant, copied anew on every replay
    where: str


class Recording:
    """The backend calls of one call of a step."""

    def __init__(self, inputs):
        self.thread = threading.get_ident()  # other threads' calls are not the step's
        self.calls: list = []
        self.depth = 0  # >0 inside a recorded call: the calls it makes are its own
        self.paused = False
        self.arguments = {id(a): i for i, a in enumerate(inputs)}
        self.inputs = list(inputs)
        self.made: list = []  # the objects the call made, in order (kept alive: ids stay
        self.made_ids: dict = {}  # unique while the recordings are compared)

    def template(self, v):
        cls = v.__class__
        if cls is np.ndarray:
            return self._array(v)
        if cls is Storage:
            n = self.made_ids.get(id(v))
            if n is not None:
                return _New(n)
            n = self.made_ids.get(id(v.data))
            if n is not None:
                return _StorageOf(n, v.dtype)
            return _Outside(v)
        if cls is tuple or cls is list:
            return _Seq(cls, tuple(self.template(e) for e in v))
        if isinstance(v, np.ndarray):
            return self._array(v)
        return _Const(v)

    def _array(self, a):
        # an array neither made by a recorded call nor an argument is named by identity:
        # one made by the step's Python outside the backend differs on the two calls
        # (the first call's objects are kept alive until they are compared)
        n = self.made_ids.get(id(a))
        if n is not None:
            return _New(n)
        i = self.arguments.get(id(a))
        if i is not None:
            return _Arg(i)
        return _Outside(a)

    def note(self, name, fn, args, kwargs, out, fresh=False):
        """Record one call of the backend; returns what the caller gets (a numpy scalar
        result as a 0-d array, which a replay can hand on the same way)."""
        scalar = isinstance(out, np.generic)
        if scalar:
            out = np.asarray(out)
        if fresh:  # from_numpy: host data, kept as it is now (the step may write into
            # the tensor, which shares it) and compared by value
            tmpl_args = (_Const(np.array(args[0], copy=True)),) + tuple(
                self.template(a) for a in args[1:])
        else:
            tmpl_args = tuple(self.template(a) for a in args)
        tmpl_kwargs = tuple((k, self.template(v)) for k, v in kwargs.items())
        self.calls.append(_Call(name, fn, tmpl_args, tmpl_kwargs,
                                self._made(out, fresh), scalar, fresh, where(skip=1)))
        return out

    def _made(self, out, fresh):
        cls = out.__class__
        if cls is tuple or cls is list:
            return _Seq(cls, tuple(self._made(e, fresh) for e in out))
        if isinstance(out, (np.ndarray, Storage)):
            if not fresh:
                known = self.made_ids.get(id(out))
                if known is not None:
                    return _New(known)
                if id(out) in self.arguments:
                    return _Arg(self.arguments[id(out)])
            n = len(self.made)
            self.made.append(out)
            self.made_ids[id(out)] = n
            return _New(n)
        return _Const(out)


class CpuGraph:
    """One captured signature of a step on the CPU (see the module docstring)."""

    def __init__(self, backend):
        self.backend = backend
        self._recordings: list = []
        self._active = None  # the Recording taking calls now
        self._replay = None  # the generated function
        self._escaped: list = []  # arrays the recorded call made that outlived it
        self._n_calls = 0

    # -- inputs ----------------------------------------------------------------------------
    def load(self, dst, value) -> None:
        """Copy an argument (a numpy array or a CPU array) into the static input ``dst``."""
        if value is dst:
            return
        a = np.asarray(value)
        if a.shape != dst.shape or a.dtype != dst.dtype:
            raise CaptureError(f"capture: an argument of shape {a.shape} and dtype {a.dtype} "
                               f"cannot fill a static input of shape {dst.shape} and dtype "
                               f"{dst.dtype}")
        dst[...] = a

    # -- recording -------------------------------------------------------------------------
    @contextlib.contextmanager
    def recording(self, inputs):
        """Record the backend calls of the step's call made inside the block."""
        if _RECORDER.graph is not None:
            other = _RECORDER.graph._active
            if other is not None and other.thread != threading.get_ident():
                raise CaptureError(
                    f"capture: another thread is recording a captured step now ({where()}); "
                    f"the CPU backend records one step at a time per process: record each "
                    f"captured function once from one thread (its first two calls), then "
                    f"call it from any thread, or run this one uncaptured")
            raise CaptureError(f"a step is already being captured ({where()}); capture "
                               f"the outer function only")
        if len(self._recordings) >= 2:
            raise CaptureError("capture: this graph is already recorded")
        rec = Recording(inputs)
        self._active = rec
        try:  # (an interrupt during start still takes off what it put on)
            _RECORDER.start(self.backend, self)
            yield rec
        finally:
            _RECORDER.stop(self.backend)
            self._active = None
        self._recordings.append(rec)

    @contextlib.contextmanager
    def paused(self):
        """Run work inside a recording that is not part of the step (not recorded)."""
        rec = self._active
        if rec is None:
            yield
            return
        was, rec.paused = rec.paused, True
        try:
            yield
        finally:
            rec.paused = was

    def finish(self, outputs) -> None:
        """Compare the two recordings and build the replay from the second."""
        first, second = self._recordings
        try:
            _compare(first, second)
        except CaptureError:
            self.release()
            raise
        self._recordings = []
        del first
        self._build(second)

    def _build(self, rec: Recording) -> None:
        calls = rec.calls
        fresh = {c.result.n for c in calls if c.fresh}
        # which made arrays outlive the call (outputs, a .grad it created): the replay
        # copies its values into them. The rest are dropped now.
        refs = [weakref.ref(o) if o.__class__ is np.ndarray and n not in fresh else None
                for n, o in enumerate(rec.made)]
        rec.made = rec.made_ids = None
        gc.collect(1)  # (the call's own garbage is young: the full collection takes 50 ms)
        escaped = [(n, r()) for n, r in enumerate(refs) if r is not None and r() is not None]
        # (nothing here holds an outside object: a freed one is seen by its weak reference)
        self._replay = _Source(rec.inputs).function(calls, escaped)
        self._escaped = [arr for _, arr in escaped]
        self._n_calls = len(calls)

    # -- replay ----------------------------------------------------------------------------
    def replay(self, run, static_outputs, prelude):
        """Run the host-side ``prelude``, then the recorded backend calls; the outputs are
        the static ones, rewritten by this replay."""
        if self._replay is None:
            raise CaptureError("capture: this graph was released")
        prelude()
        self._replay()
        return static_outputs()

    def release(self) -> None:
        self._recordings = []
        self._replay = None
        self._escaped, self._n_calls = [], 0

    @property
    def stats(self) -> dict:
        """What a replay holds: backend calls, copies into outputs, nothing staged."""
        return {"dispatches": self._n_calls, "copies": len(self._escaped),
                "staged_outputs": 0, "pool_free_bytes": 0}


class _Source:
    """The replay's Python source, from the second recording: one line per backend call,
    a made array a local ``v<n>``, an outside object a weak reference read into ``o<k>``
    at the start (a freed one stops the replay), every other value a global of the
    function."""

    def __init__(self, inputs):
        self.inputs = inputs
        self.env: dict = {"_asarray": np.asarray, "_Storage": Storage, "_CPU": CPU,
                          "_copy": np.array}
        self.names: dict = {}  # id of a value -> its name in env
        self.outside: dict = {}  # id of an outside object -> (name, weak ref, first reader)

    def function(self, calls, escaped):
        body = [f"    {self.line(call)}" for call in calls]
        body += [f"    {self.name_of(arr, 'e')}[...] = v{n}" for n, arr in escaped]
        head = ["def replay():"]
        readers = []
        for i, (name, ref, call) in enumerate(self.outside.values()):
            self.env[f"r{name}"] = ref
            head += [f"    {name} = r{name}()", f"    if {name} is None: _lost({i})"]
            readers.append(f"{call.name}, {call.where}")
        self.env["_lost"] = lambda i: _raise(shared.lost_error(readers[i]))
        code = compile("\n".join(head + body + ["    return None"]), "<hx.capture replay>",
                       "exec")
        exec(code, self.env)
        return self.env.pop("replay")  # (no cycle: released, it frees what it holds at once)

    def line(self, call) -> str:
        args = [self.expr(a, call) for a in call.args]
        args += [f"{key}={self.expr(v, call)}" for key, v in call.kwargs]
        if call.fresh:  # from_numpy of a host constant: a copy of it on every replay
            rhs = f"_copy({args[0]})"
        else:
            rhs = f"{self.name_of(call.fn, 'f')}({', '.join(args)})"
            if call.scalar:
                rhs = f"_asarray({rhs})"
        target = _target(call.result)
        return f"{target} = {rhs}" if target else rhs

    def name_of(self, value, prefix: str) -> str:
        key = id(value)
        if key not in self.names:
            self.names[key] = f"{prefix}{len(self.names)}"
            self.env[self.names[key]] = value
        return self.names[key]

    def expr(self, t, call) -> str:
        cls = t.__class__
        if cls is _New:
            return f"v{t.n}"
        if cls is _Arg:
            return self.name_of(self.inputs[t.i], "a")
        if cls is _Outside:
            key = id(t.obj)
            if key not in self.outside:
                self.outside[key] = (f"o{len(self.outside)}", weakref.ref(t.obj), call)
            return self.outside[key][0]
        if cls is _StorageOf:
            return f"_Storage(v{t.n}, _CPU, {self.name_of(t.dtype, 'd')}, v{t.n}.nbytes)"
        if cls is _Seq:
            inner = ", ".join(self.expr(e, call) for e in t.items)
            if t.kind is tuple:
                return f"({inner},)" if len(t.items) == 1 else f"({inner})"
            return f"[{inner}]"
        value = t.value
        if value is None or value is True or value is False or value.__class__ is int:
            return repr(value)
        return self.name_of(value, "c")


def _raise(error):
    raise error


def _target(t) -> str:
    """The assignment target for a call's result template ('' when nothing is kept)."""
    cls = t.__class__
    if cls is _New:
        return f"v{t.n}"
    if cls is _Seq:
        parts = [_target(e) or "_" for e in t.items]
        if all(p == "_" for p in parts):
            return ""
        return f"({', '.join(parts)},)" if t.kind is tuple else f"[{', '.join(parts)}]"
    return ""


# -- watching the backend ----------------------------------------------------------------------
class _Recorder:
    """Puts recording wrappers over the CPU backend's methods while a graph records (as
    instance attributes, which the ops look up on every call) and takes them off after."""

    def __init__(self):
        self.graph = None
        self.names: dict = {}

    def start(self, backend, graph) -> None:
        self.graph = graph
        self.names = {}  # (filled as it goes: stop takes off what is on)
        wrap_methods(backend, self._wrap, self.names, backend._direct_of)

    def active(self):
        """The Recording taking this thread's backend calls now (None: none, or paused)."""
        graph = self.graph
        rec = graph._active if graph is not None else None
        if rec is None or rec.paused or rec.thread != threading.get_ident():
            return None
        return rec

    def stop(self, backend) -> None:
        unwrap_methods(backend, self.names)
        self.graph, self.names = None, {}

    def _wrap(self, name, fn):
        recorder = self

        def recorded(*args, **kwargs):
            rec = recorder.active()
            if rec is None or rec.depth:  # (a call made by a recorded call is its own)
                return fn(*args, **kwargs)
            if name == "to_numpy":
                raise _read_back(args[0])
            rec.depth += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                rec.depth -= 1
            return rec.note(name, fn, args, kwargs, out, fresh=name == "from_numpy")

        recorded.__name__ = name
        return recorded


class _WrappedDirect(dict):
    """``Backend.direct`` while wrapped: the ufuncs ``lookup`` finds, each wrapped."""

    def __init__(self, lookup, wrap):
        super().__init__()
        self.lookup, self.wrap = lookup, wrap

    def get(self, kernel, default=None):
        f = self.lookup(kernel)
        if f is None:
            return default
        wrapped = super().get(kernel)
        if wrapped is None:
            wrapped = self[kernel] = self.wrap(kernel.name, f)
        return wrapped


_MISSING = object()


def wrap_methods(backend, wrap, saved: dict, direct_lookup=None) -> None:
    """Put ``wrap(name, method)`` over each public method of ``backend`` as an instance
    attribute (which the ops look up on every call), and over its ``direct`` ufuncs when
    ``direct_lookup`` is given; ``saved`` gets what each name held before, as it goes, for
    :func:`unwrap_methods`. Wrappers stack: a method already wrapped is wrapped again."""
    for name in dir(type(backend)):
        if name.startswith("_") or name in _NOT_RECORDED:
            continue
        if isinstance(getattr(type(backend), name), property):
            continue
        fn = getattr(backend, name)
        if not callable(fn) or isinstance(fn, type):
            continue
        saved[name] = backend.__dict__.get(name, _MISSING)
        setattr(backend, name, wrap(name, fn))
    if direct_lookup is not None:
        saved["direct"] = backend.__dict__.get("direct", _MISSING)
        backend.direct = _WrappedDirect(direct_lookup, wrap)


def unwrap_methods(backend, saved: dict) -> None:
    """Give each name :func:`wrap_methods` wrapped back what it held before."""
    for name, before in saved.items():
        if before is _MISSING:
            backend.__dict__.pop(name, None)
        else:
            backend.__dict__[name] = before


_RECORDER = _Recorder()


def recording_here() -> bool:
    """Whether a step is being recorded on this thread now (not paused)."""
    return _RECORDER.active() is not None


def _read_back(a) -> CaptureError:
    return shared.read_back_error(f"a tensor of shape {tuple(getattr(a, 'shape', ()))}",
                                  where(skip=2), "read its values on the host")


# -- comparing two recordings ----------------------------------------------------------------
def _compare(a: Recording, b: Recording) -> None:
    made_by_first = a.made_ids
    for k, (ca, cb) in enumerate(zip(a.calls, b.calls)):
        if ca.fn is not cb.fn and ca.fn != cb.fn:
            raise _diverged(a, b, k)
        pairs = list(zip(ca.args, cb.args))
        if tuple(n for n, _ in ca.kwargs) != tuple(n for n, _ in cb.kwargs) \
                or len(ca.args) != len(cb.args):
            raise _diverged(a, b, k)
        pairs += [(va, vb) for (_, va), (_, vb) in zip(ca.kwargs, cb.kwargs)]
        for slot, (ta, tb) in enumerate(pairs):
            _same(ta, tb, k, slot, ca, cb, made_by_first)
        _same(ca.result, cb.result, k, "result", ca, cb, made_by_first)
    if len(a.calls) != len(b.calls):
        raise _diverged(a, b, min(len(a.calls), len(b.calls)))


def _same(ta, tb, k, slot, ca, cb, made_by_first) -> None:
    if ta.__class__ is not tb.__class__:
        if tb.__class__ is _Outside and id(tb.obj) in made_by_first:
            raise _state_replaced(k, slot, cb)
        raise _flow_differs(k, slot, cb, ta, tb)
    cls = ta.__class__
    if cls is _Seq:
        if ta.kind is not tb.kind or len(ta.items) != len(tb.items):
            raise _values_differ(k, slot, cb, ta, tb)
        for ea, eb in zip(ta.items, tb.items):
            _same(ea, eb, k, slot, ca, cb, made_by_first)
        return
    if cls is _Outside:
        if ta.obj is tb.obj:
            return
        if id(tb.obj) in made_by_first:
            raise _state_replaced(k, slot, cb)
        raise _different_outside(k, slot, cb)
    if cls is _Const:
        if not _equal(ta.value, tb.value):
            if cb.fresh:
                raise _host_data_differs(k, cb)
            raise _values_differ(k, slot, cb, ta, tb)
        return
    if ta != tb:
        raise _flow_differs(k, slot, cb, ta, tb)


def _equal(x, y) -> bool:
    if x is y:
        return True
    if x.__class__ is not y.__class__:
        return False
    if isinstance(x, np.ndarray):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        try:
            return bool(np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"))
        except TypeError:
            return False
    if isinstance(x, (tuple, list)):
        return len(x) == len(y) and all(_equal(a, b) for a, b in zip(x, y))
    try:
        same = x == y
        if same is NotImplemented:
            return False
        if bool(same):
            return True
    except (TypeError, ValueError):
        return False
    return x != x and y != y  # NaN (a float or a numpy scalar)


def _diverged(a, b, k) -> CaptureError:
    return shared.diverged_error(a.calls, b.calls, k, "backend call",
                                 lambda c: f"{c.name} ({c.where})")


def _describe(t) -> str:
    cls = t.__class__
    if cls is _Const:
        v = t.value
        return f"{v!r}" if not isinstance(v, np.ndarray) else f"an array of shape {v.shape}"
    if cls is _New:
        return f"the call's array #{t.n}"
    if cls is _Arg:
        return f"argument {t.i}"
    if cls is _Outside:
        return "a tensor made outside the call"
    if cls is _StorageOf:
        return f"the buffer of the call's array #{t.n}"
    return f"a {t.kind.__name__} of {len(t.items)}"


def _head(k, cb, slot=None) -> str:
    head = f"capture: {cb.name} (backend call #{k}, {cb.where})"
    return head if slot is None else f"{head}, {_slot(slot)},"


def _values_differ(k, slot, cb, ta, tb) -> CaptureError:
    return shared.values_differ_error(
        _head(k, cb), f"its {_slot(slot)} was {_describe(ta)} and then {_describe(tb)}: a "
                      f"host value (a Python number, a size)")


def _host_data_differs(k, cb) -> CaptureError:
    return CaptureError(
        f"{_head(k, cb)} turned other host data into a tensor on two calls: host data that "
        f"changes would be frozen into the replay. That is host-side randomness (dropout, "
        f"hx.rand/randn inside the step) or a numpy array made inside it. Pass such data as "
        f"an argument of the captured function, or turn the randomness off (model.eval(), "
        f"dropout p=0).")


def _state_replaced(k, slot, cb) -> CaptureError:
    return shared.state_replaced_error(_head(k, cb, slot))


def _different_outside(k, slot, cb) -> CaptureError:
    return shared.different_outside_error(_head(k, cb, slot))


def _flow_differs(k, slot, cb, ta, tb) -> CaptureError:
    return shared.flow_differs_error(_head(k, cb, slot), _describe(ta), _describe(tb))


def _slot(slot) -> str:
    return "result" if slot == "result" else f"argument {slot}"
