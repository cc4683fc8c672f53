"""``hx.profile()``: the kernels a block of code ran, with their shapes, times and bytes.

While a profile is active, every public method of each loaded backend (and the CPU's
``direct`` ufuncs) is wrapped through the same mechanism capture uses
(:func:`haelixe.backends.cpu_graph.wrap_methods`), and on the GPU the dispatcher's
``dispatch`` too; nothing is wrapped otherwise, so a program that does not profile pays
nothing. The methods that only make a view (the backend's ``layout_only``) run no
kernel and stay as they are. A backend call inside another backend call belongs to the
outer one.

A kernel's phase and node come from where the calls that make them say: the engine
names the node whose backward runs (``backward_node`` of the grad-mode state), and while
a profile is active ``Function.apply`` and each optimizer class's own ``step()`` are
wrapped too, the one naming the node its op makes, the other the optimizer phase (its
closure aside). No kernel walks up the stack.

Each :class:`KernelEvent` is one backend call (``kind="op"``) or, on the GPU, one compute
dispatch (``kind="dispatch"``, named ``file:entry`` of its WGSL, with the op that issued
it as ``parent``). On the CPU times are host wall time (``time.perf_counter_ns``), the
kernel's time. On the GPU, where the adapter grants 'timestamp-query', the device's clock
is written around each dispatch (the backend's ``device_timer``: inside the shared
compute pass where the adapter allows it, else in a pass of its own for each dispatch),
read back when the profile ends: a dispatch's
``duration_ns`` is then the device's (``clock="device"``) and its ``start_ns`` the
device's start, aligned to the host clock at the first dispatch (``extra`` keeps the
host's encode time). Elsewhere a dispatch's time is its host encode time
(``clock="host"``), since the work runs later, at a submit. A captured step's replay is
one host-timed event.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import json
import threading
import time
from dataclasses import dataclass, field

from .atomic import AtomicFile
from .autograd.function import Function
from .autograd.mode import STATE as _MODE
from .backends import loaded_backends, unwrap_methods, wrap_methods
from .device import CPU
from .optim.optimizer import Optimizer

__all__ = ["KernelEvent", "Profile", "profile"]

_clock = time.perf_counter_ns
_get_ident = threading.get_ident
_APPLY = Function.__dict__["apply"]  # (the classmethod: put back when a profile ends)


def _made_node(key, outer_of: dict, made: dict):
    """(id, name) of the node a forward kernel's op made: the innermost Function.apply
    around it (``key``) that made one (an apply with nothing to record passes it to the
    one around it), or (None, None). ``made`` maps an apply's number to its node's id
    and, at the number's negative, the node's name."""
    while key is not None:
        node_id = made.get(key)
        if node_id is not None:
            return node_id, made[-key]
        key = outer_of.get(key)
    return None, None


def _profiled_apply(prof):
    """Function.apply while ``prof`` is active: the kernels run inside get its number
    (``local["made"]``), under which it notes, once the call returns, the node it
    recorded (its output's ``grad_fn``, of this class, not an input's) in
    ``prof._made``, and the apply around it in ``prof._outer_of``; so each forward
    kernel knows its node with no walk up the stack, no node kept alive, and numbers
    only in its record."""
    apply = _APPLY.__func__
    state = _STATE
    keys, outer_of, made = itertools.count(1), prof._outer_of, prof._made

    def profiled_apply(cls, *args):
        local = state.local.__dict__
        outer = local.get("made")
        key = local["made"] = next(keys)
        if outer is not None:
            outer_of[key] = outer
        try:
            out = apply(cls, *args)
        finally:
            local["made"] = outer
        node = getattr(out, "grad_fn", None)
        if node.__class__ is cls:
            for a in args:
                if node is getattr(a, "grad_fn", None):  # (an input's node, passed on)
                    break
            else:
                # (numbers and a string, no tuple: see _record)
                made[key], made[-key] = id(node), node.name
        return out

    return classmethod(profiled_apply)


def _outside_step(closure, local):
    """A step()'s closure (it re-runs the user's forward and backward: their kernels are
    not the optimizer's)."""
    def run():
        steps, local["steps"] = local.get("steps"), 0
        try:
            return closure()
        finally:
            local["steps"] = steps
    return run


def _profiled_step(step):
    """An optimizer class's own step() while a profile is active: its kernels are the
    optimizer phase's."""
    state = _STATE

    @functools.wraps(step)
    def profiled_step(self, *args, **kwargs):
        local = state.local.__dict__
        if args and args[0] is not None:
            args = (_outside_step(args[0], local), *args[1:])
        elif kwargs.get("closure") is not None:
            kwargs["closure"] = _outside_step(kwargs["closure"], local)
        local["steps"] = (local.get("steps") or 0) + 1
        try:
            return step(self, *args, **kwargs)
        finally:
            local["steps"] -= 1

    return profiled_step


def _own_steps(base=Optimizer) -> list:
    """Each class under ``base`` (itself included) that defines its own step()."""
    out, todo = [], [base]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "step" in cls.__dict__:
            out.append(cls)
    return out


@dataclass
class KernelEvent:
    """One kernel run while a profile was active."""

    name: str            # the backend method, the ufunc, or a dispatch's "file:entry"
    device: str          # "cpu" or "gpu"
    kind: str            # "op" (a backend call) or "dispatch" (a GPU compute dispatch)
    shapes: list         # the array inputs' shapes
    dtypes: list         # and their dtypes (as strings)
    start_ns: int        # host clock, from the profile's start
    duration_ns: int
    bytes_moved: int     # the array inputs' and outputs' sizes
    thread: int
    clock: str = "host"  # what measured duration_ns
    parent: str | None = None  # a dispatch's op
    extra: dict = field(default_factory=dict)  # a dispatch's grid
    node: str | None = None  # the autograd node whose backward ran it (None: forward)
    phase: str = "forward"  # "forward", "backward", "optimizer" (a step()), "replay"
    node_id: int | None = None  # id() of its node: the one whose backward ran it, or in
    # the forward the one its op made (as haelixe.autograd.graph's NodeInfo.id)
    made: str | None = None  # in the forward: the name of the node its op made


class _State:
    def __init__(self):
        self.profile = None  # the active Profile (one per process)
        self.local = threading.local()  # .call: inside a profiled call, (its name, phase,
        # node's name, node's id), else None


_STATE = _State()

# A record: one kernel, as these fields appended one after the other to the profile's
# flat list ``_raw`` (one ``list.extend`` of a tuple that is dropped at once). A tuple
# kept per kernel would be one more object for the garbage collector to count, and a
# step's few hundred of them would start a collection every step or two (about 5% of an
# eager CPU step); its numbers and strings are not counted. What repeats is shared: the
# site (name, device, kind, clock: one tuple per wrapped method or WGSL entry) and the
# signature (a kernel's input and output shapes and dtypes, a dispatch's grid), interned
# in ``Profile._interned`` (a step repeats them). A phase of None is the forward's. The
# start is the host clock's own (the profile's start is taken off when events are read).
(_R_SITE, _R_SIG, _R_START, _R_DURATION, _R_PARENT, _R_PHASE, _R_NODE_NAME, _R_NODE_ID,
 _R_THREAD, _R_SLOT) = range(10)
_FIELDS = 10
_WRAPPERS: dict = {}  # (name, fn) -> its wrapper: one object per method, so a capture
# recorded over two profiled calls sees the same function both times


def _arrays(values, raw_types, arrays: list) -> list:
    """Append the shape and dtype of each raw array among ``values`` (and inside its
    tuples and lists) to ``arrays``, one after the other. (The tuples of one level down,
    most of them shapes, are read here: no call for each.) Their bytes are counted from
    these when the events are read (:func:`_bytes`), not during the step."""
    for v in values:
        cls = v.__class__
        if cls in raw_types:
            arrays += (v.shape, v.dtype)
        elif cls is tuple or cls is list:
            for w in v:
                cls = w.__class__
                if cls is int:
                    continue
                if cls in raw_types:
                    arrays += (w.shape, w.dtype)
                elif cls is tuple or cls is list:
                    _arrays(w, raw_types, arrays)
    return arrays


def _bytes(arrays) -> int:
    """The bytes of the arrays whose (shape, dtype, shape, dtype, ...) ``arrays`` lists."""
    moved = 0
    for shape, dtype in zip(arrays[::2], arrays[1::2]):
        n = dtype.itemsize
        for d in shape:
            n *= d
        moved += n
    return moved


def _wrap_for(device: str, layout_only=frozenset()):
    def wrap(name, fn):
        if name in layout_only:  # (a view: nothing runs)
            return fn
        key = (device, name, fn)
        wrapper = _WRAPPERS.get(key)
        if wrapper is None:
            wrapper = _WRAPPERS[key] = _profiled(device, name, fn)
        return wrapper
    return wrap


def _profiled(device, name, fn):
    state, mode = _STATE, _MODE
    site = (name, device, "op", "host")
    last = [None]  # the signature this method recorded last (a step repeats them)

    def profiled(*args, **kwargs):
        prof = state.profile
        local = state.local.__dict__  # (the thread's own: no attribute lookups)
        if prof is None or local.get("call") is not None:
            return fn(*args, **kwargs)
        # (the node: in the backward the engine's, known now; in the forward the cell
        # its Function.apply fills in when it returns, read when events are made)
        node = mode.backward_node
        if node is not None:
            phase, node_name, node_id = "backward", node.name, id(node)
        elif local.get("steps"):
            phase, node_name, node_id = "optimizer", None, None
        else:
            phase, node_name, node_id = None, None, local.get("made")
        local["call"] = (name, phase, node_name, node_id)  # (read by a GPU dispatch)
        t0 = _clock()
        try:
            out = fn(*args, **kwargs)
        finally:
            t1 = _clock()
            local["call"] = None
        raw_types = prof._raw_types
        arrays = []
        for v in args:  # (the top level here: most arguments are arrays)
            cls = v.__class__
            if cls in raw_types:
                arrays += (v.shape, v.dtype)
            elif cls is tuple or cls is list:
                _arrays(v, raw_types, arrays)
        if kwargs:
            _arrays(kwargs.values(), raw_types, arrays)
        # then the outputs' shapes and dtypes, for the bytes moved (counted when read),
        # and where the inputs' end: one flat tuple, compared with the last one before
        # it is looked up (a comparison of numbers, where a lookup hashes every shape)
        inputs = len(arrays)
        if out.__class__ in raw_types:
            arrays += (out.shape, out.dtype, inputs)
        else:
            _arrays((out,), raw_types, arrays).append(inputs)
        sig = tuple(arrays)
        if sig != last[0]:
            last[0] = sig = prof._interned.setdefault(sig, sig)
        else:
            sig = last[0]
        prof._raw.extend((site, sig, t0, t1 - t0, None, phase, node_name, node_id,
                          _get_ident(), None))
        return out

    profiled.__name__ = name
    return profiled


_NO_CALL = (None, None, None, None)  # (op, phase, node, node id) outside a profiled call
_REPLAY_SITE = ("replay", "gpu", "replay", "host")


def _dispatch_extra(grid, slot) -> dict:
    """A dispatch's extra from its record's grid and device slot; its record's extra as
    it is where it is a dict already (its device time put in)."""
    if grid.__class__ is dict:
        return grid
    extra = {"grid": list(grid) if grid.__class__ is tuple else grid}
    if slot is not None:
        extra["device_slot"] = slot
    return extra


def _profiled_dispatch(fn):
    state = _STATE

    def dispatch(spec, buffers, meta, grid):
        prof = state.profile
        t0 = _clock()
        slot = fn(spec, buffers, meta, grid)
        t1 = _clock()
        if prof is None:
            return slot
        # (a buffer is an allocator block, larger than the array: bytes are the op's)
        site = prof._names.get(id(spec))
        if site is None:  # (the spec is kept, so its id stays its own)
            name = f"{spec.file}:{spec.entry}"
            site = prof._names[id(spec)] = (name, "gpu", "dispatch", "host")
            prof._specs.setdefault(name, spec)  # (its WGSL, made when asked for)
            prof._names_kept.append(spec)
        op, phase, node, node_id = state.local.__dict__.get("call") or _NO_CALL
        # (its extra as its grid and device slot: made a dict when read, see
        # _dispatch_extra)
        grid = grid if grid.__class__ is not list else tuple(grid)
        prof._raw.extend((site, prof._interned.setdefault(grid, grid), t0, t1 - t0, op,
                          phase, node, node_id, _get_ident(), slot))
        return slot

    return dispatch


def _profiled_replay(dispatcher, fn):
    state = _STATE

    def replay(ops, stage=()):
        prof = state.profile
        before = dispatcher.counters["dispatches"]
        t0 = _clock()
        fn(ops, stage)
        t1 = _clock()
        if prof is None:
            return
        # a captured step's dispatches, encoded and submitted at once (one event)
        prof._raw.extend((_REPLAY_SITE, {"dispatches": dispatcher.counters["dispatches"]
                                         - before}, t0, t1 - t0,
                          (state.local.__dict__.get("call") or _NO_CALL)[0], "replay",
                          None, None, _get_ident(), None))

    return replay


class Profile:
    """What ``with hx.profile() as prof:`` recorded: :attr:`events`, :meth:`table`,
    :meth:`export_chrome_trace`."""

    def __init__(self, device_times: bool = True):
        self.device_times = device_times  # time GPU dispatches on the device's clock
        self._raw: list = []  # the kernels' records, flat (see _FIELDS; list.extend of
        # a tuple is atomic: no lock)
        self._interned: dict = {}  # each shape signature and grid recorded -> itself
        self._made: dict = {}  # a Function.apply's number -> its node's id (and its
        # negative -> the node's name)
        self._outer_of: dict = {}  # ... -> the number of the apply around it
        self._events: list[KernelEvent] = []
        self._raw_types: frozenset = frozenset()
        self._t0 = 0
        self._saved: list = []  # (backend, saved names, dispatcher) to undo
        self._gpu_clock_note = ""
        self._specs: dict = {}  # a GPU dispatch's "file:entry" -> its KernelSpec
        self._names: dict = {}  # id of a KernelSpec dispatched -> its site ("file:entry", ...)
        self._names_kept: list = []  # ... and the specs themselves (their ids stay theirs)
        self._kernel_types: dict = {}  # "cpu"/"gpu" -> the backend's class
        self._timers: list = []  # the GPU's device timers, running while active
        self._steps: list = []  # (optimizer class, its own step) wrapped while active

    @classmethod
    def from_events(cls, events) -> Profile:
        """A profile holding ``events`` (KernelEvents), as if it had recorded them: to
        read a saved or a made-up step with :meth:`kernels`, :meth:`table` and the
        widgets."""
        prof = cls()
        prof._events = list(events)
        return prof

    @property
    def events(self) -> list[KernelEvent]:
        """The kernels recorded so far, in the order they ended."""
        raw, events, t0 = self._raw, self._events, self._t0
        end = len(raw) // _FIELDS * _FIELDS  # (another thread may be adding one)
        for i in range(len(events) * _FIELDS, end, _FIELDS):
            (site, sig, start, dur, parent, phase, node_name, node_id, tid,
             slot) = raw[i:i + _FIELDS]
            name, device, kind, clock = site
            phase = phase or "forward"
            backward = phase == "backward"
            if phase == "forward":  # (its apply's number: the node its op made)
                node_id, node_name = _made_node(node_id, self._outer_of, self._made)
            arrays, moved, extra = (), 0, sig
            if kind == "dispatch":
                extra = _dispatch_extra(sig, slot)
            elif kind == "op":  # (inputs', then outputs' shapes and dtypes, then where
                # the inputs end: the bytes are counted now)
                inputs = sig[-1]
                arrays = sig[:inputs]
                moved, extra = _bytes(arrays) + _bytes(sig[inputs:-1]), None
            events.append(KernelEvent(name, device, kind, [tuple(s) for s in arrays[::2]],
                                      [str(d) for d in arrays[1::2]], start - t0, dur,
                                      moved, tid,
                                      clock, parent, extra or {},
                                      node_name if backward else None, phase, node_id,
                                      None if backward else node_name))
        return list(events)

    def __enter__(self):
        with _START:
            if _STATE.profile is not None:
                raise RuntimeError(
                    "hx.profile: a profile is already active in this process (nested, or "
                    "in another thread); one records at a time: end the other first, or "
                    "read both parts from the outer profile's events")
            backends = loaded_backends()
            self._raw_types = frozenset(be.raw_type for _, be in backends)
            try:
                for device, backend in backends:
                    self._wrap("cpu" if device is CPU else "gpu", backend)
                    self._kernel_types["cpu" if device is CPU else "gpu"] = type(backend)
            except BaseException:
                self._unwrap()
                raise
            # (the forward's node and the optimizer's phase, told by the calls that
            # make them: put back when the profile ends)
            Function.apply = _profiled_apply(self)
            self._steps = [(cls, cls.__dict__["step"]) for cls in _own_steps()]
            for cls, step in self._steps:
                cls.step = _profiled_step(step)
            for device, backend in backends:  # (asked before any call is recorded)
                timer = backend.device_timer() \
                    if device is not CPU and self.device_times else None
                if timer is not None:
                    timer.start()
                    self._timers.append(timer)
            self._gpu_clock_note = _gpu_clock_note(backends, bool(self._timers),
                                                   self.device_times)
            self._t0 = _clock()
            _STATE.profile = self
        return self

    def _wrap(self, device: str, backend) -> None:
        saved: dict = {}
        self._saved.append((backend, saved, None))
        direct = backend.__dict__.get("direct", getattr(backend, "direct", None))
        lookup = direct.get if isinstance(direct, dict) else None
        wrap_methods(backend, _wrap_for(device, backend.layout_only), saved, lookup)
        dispatcher = getattr(backend, "dispatcher", None)
        if dispatcher is not None:
            before = {k: dispatcher.__dict__.get(k) for k in ("dispatch", "replay")}
            self._saved[-1] = (backend, saved, (dispatcher, before))
            dispatcher.dispatch = _profiled_dispatch(dispatcher.dispatch)
            dispatcher.replay = _profiled_replay(dispatcher, dispatcher.replay)

    def _unwrap(self) -> None:
        Function.apply = _APPLY
        for cls, step in reversed(self._steps):
            cls.step = step
        self._steps = []
        for backend, saved, dispatched in reversed(self._saved):
            unwrap_methods(backend, saved)
            if dispatched is not None:
                dispatcher, before = dispatched
                for key, fn in before.items():
                    if fn is None:
                        dispatcher.__dict__.pop(key, None)
                    else:
                        setattr(dispatcher, key, fn)
        self._saved = []

    def __exit__(self, exc_type, exc, tb) -> None:
        with _START:
            _STATE.profile = None
            self._unwrap()
            timers, self._timers = self._timers, []
            for timer in timers:  # (one GPU: its slots are its dispatches' slots)
                self._device_times(timer.stop())

    def _device_times(self, readings) -> None:
        """Put each timed dispatch's device start and duration in its event: the
        device's clock, aligned to the host's at the first timed dispatch."""
        raw = self._raw
        align = None
        for i in range(0, len(raw) // _FIELDS * _FIELDS, _FIELDS):
            slot, site = raw[i + _R_SLOT], raw[i + _R_SITE]
            if site[2] != "dispatch" or slot is None or slot >= len(readings) \
                    or readings[slot] is None:
                continue
            begin, duration = readings[slot]
            host_start = raw[i + _R_START]
            if align is None:
                align = host_start - begin
            extra = _dispatch_extra(raw[i + _R_SIG], None)
            extra["host_start_ns"] = host_start - self._t0
            extra["host_encode_ns"] = raw[i + _R_DURATION]
            raw[i + _R_START], raw[i + _R_DURATION] = begin + align, duration
            raw[i + _R_SITE] = (*site[:3], "device")
            raw[i + _R_SIG], raw[i + _R_SLOT] = extra, None

    # -- reading -------------------------------------------------------------------------
    def kernels(self, device: str | None = None) -> list[KernelEvent]:
        """The kernels that ran: backend calls on the CPU, compute dispatches on the GPU
        (a captured step's replay is one ``kind="replay"`` event, not listed here, whose
        ``extra["dispatches"]`` counts its dispatches)."""
        return [e for e in self.events
                if (e.kind == "dispatch" or e.device == "cpu")
                and (device is None or e.device == device)]

    @property
    def gpu_clock_note(self) -> str:
        """What a GPU event's time is, and why (the table says it beside GPU times)."""
        return self._gpu_clock_note

    def kernel_source(self, event: KernelEvent) -> tuple[str, str] | None:
        """(language, source) of the code an event ran: a GPU dispatch's WGSL module,
        or the Python of a CPU backend method; None where there is none to show."""
        if event.kind == "dispatch":
            spec = self._specs.get(event.name)
            return None if spec is None else ("wgsl", spec.source())
        cls = self._kernel_types.get(event.device)
        fn = getattr(cls, event.name, None) if cls is not None else None
        try:
            return "python", inspect.getsource(fn)
        except (TypeError, OSError):
            return None

    def table(self, sort_by: str = "total", row_limit: int = 30) -> str:
        """A text summary per (device, kind, name), sorted by total time (like
        ``key_averages().table()``)."""
        rows: dict = {}
        events = self.events
        for e in events:
            r = rows.setdefault((e.device, e.kind, e.name), [0, 0, 0, e.clock])
            r[0] += 1
            r[1] += e.duration_ns
            r[2] += e.bytes_moved
        order = sorted(rows.items(), key=lambda kv: -(kv[1][0] if sort_by == "calls"
                                                      else kv[1][1]))
        total = sum(r[1] for r in rows.values()) or 1
        head = (f"{'name':<40} {'device':>6} {'kind':>8} {'calls':>6} {'total us':>10} "
                f"{'%':>6} {'mean us':>9} {'KB moved':>9}  clock")
        lines = [head, "-" * len(head)]
        for (device, kind, name), (n, ns, moved, clock) in order[:row_limit]:
            lines.append(f"{name[:40]:<40} {device:>6} {kind:>8} {n:>6} {ns / 1e3:>10.1f} "
                         f"{100 * ns / total:>5.1f}% {ns / 1e3 / n:>9.2f} "
                         f"{moved / 1e3:>9.1f}  {clock}")
        lines.append(f"{len(events)} events, {total / 1e3:.1f} us in all"
                     + (f" ({self.gpu_clock_note})"
                        if any(e.device == "gpu" for e in events) else ""))
        by_phase = self.time_by_phase()
        lines.append("by phase: " + ", ".join(
            f"{p} {ns / 1e3:.1f} us ({100 * ns / total:.0f}%)" for p, ns in by_phase.items()))
        return "\n".join(lines)

    def time_by_phase(self) -> dict:
        """Total kernel time (ns) per phase: forward, backward, optimizer, replay."""
        out: dict = {}
        for e in self.events:
            if e.kind != "replay" or e.phase == "replay":
                out[e.phase] = out.get(e.phase, 0) + e.duration_ns
        return out

    def chrome_trace(self) -> dict:
        """The events in the Chrome trace format (chrome://tracing, Perfetto)."""
        threads: dict = {}
        events = []
        for e in self.events:  # (the device's clock: a track of its own)
            tid = threads.setdefault("device" if e.clock == "device" else e.thread,
                                     len(threads))
            args = {"shapes": [list(s) for s in e.shapes], "dtypes": e.dtypes,
                    "bytes": e.bytes_moved, "clock": e.clock}
            if e.parent is not None:
                args["op"] = e.parent
            args["node"] = e.node if e.node is not None else e.phase
            args["phase"] = e.phase
            args.update(e.extra)
            events.append({"name": e.name, "cat": f"{e.device}.{e.kind}", "ph": "X",
                           "ts": e.start_ns / 1e3, "dur": e.duration_ns / 1e3,
                           "pid": e.device, "tid": tid, "args": args})
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def export_chrome_trace(self, path) -> None:
        """Write :meth:`chrome_trace` to ``path`` as JSON (atomically: a reader never sees
        half a file)."""
        with AtomicFile(path) as tmp:
            with open(tmp.temp_path, "w") as f:
                json.dump(self.chrome_trace(), f)


_START = threading.Lock()


def _gpu_clock_note(backends, timed: bool, asked: bool) -> str:
    """What a GPU event's time is, and why: what the table says beside GPU times."""
    if timed:
        return ("GPU dispatch times are the device's (timestamp queries around each "
                "dispatch); a captured step's replay is timed by the host")
    if not asked:
        return ("GPU times are host encode times: device times were not asked for "
                "(hx.profile(device_times=False))")
    for device, backend in backends:
        if device is not CPU:
            info = getattr(backend, "info", {}) or {}
            return (f"GPU times are host encode times, not device times: the adapter "
                    f"({info.get('name', 'this GPU')}) grants no 'timestamp-query' "
                    f"feature")
    return "GPU times are host encode times, not device times"


def profile(device_times: bool = True) -> Profile:
    """A context manager recording each kernel the backends run inside it::

        with hx.profile() as prof:
            loss = F.mse_loss(model(x), y); loss.backward()
        print(prof.table())
        prof.export_chrome_trace("step.json")

    ``device_times``: time each GPU dispatch on the device's clock (timestamp queries,
    where the adapter grants them), which makes the device wait at each one; with False
    a dispatch keeps its host encode time and the step runs closer to its own speed."""
    return Profile(device_times)
