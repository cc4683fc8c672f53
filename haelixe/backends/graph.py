"""What a backend offers ``hx.capture``: a *graph* records the kernel launches of one
call of a step and replays them later without running its Python.

``Backend.new_graph()`` returns one graph per captured signature. The front end
(``haelixe/capture_replay.py``) drives it:

- ``load(dst, value)``: copy an argument (a raw array of the backend, or a numpy array)
  into the static input array ``dst``, before every call;
- ``with recording(inputs):`` around a call that runs eagerly and is recorded
  (``inputs`` are the static input arrays); ``paused()`` inside it runs work that is not
  part of the step (host-side bookkeeping the front end repeats before each replay);
- ``finish(outputs)`` after the second recording: compares it with the first, raises
  :class:`CaptureError` naming the op where they differ, and prepares the replay;
- ``replay(run, static_outputs, prelude)``: run the step once more and return its
  outputs: either ``run()`` (the step's Python, eagerly) or ``prelude()`` (the host-side
  bookkeeping the step registered) then the recorded work, returning ``static_outputs()``;
- ``release()``: give back everything the graph keeps; ``stats``: what a replay holds.

:class:`EagerGraph` is the default: it records nothing and "replays" by running the step
again. The GPU's graph (``wgpu/graph.py``) replays its kernel launches in one submit; the
CPU's (``cpu_graph.py``) replays its backend calls without the Python above them.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

__all__ = ["CaptureError", "EagerGraph", "where", "read_back_error", "diverged_error",
           "values_differ_error", "state_replaced_error", "different_outside_error",
           "flow_differs_error", "lost_error"]

_PACKAGE = str(Path(__file__).resolve().parents[1])
_BACKENDS = str(Path(__file__).resolve().parent)


class CaptureError(RuntimeError):
    """A step cannot be captured (or replayed) as written; the message says where and
    how to fix it."""


class EagerGraph:
    """The default graph: every call, replays included, runs the step eagerly."""

    def __init__(self, backend):
        self.backend = backend

    def load(self, dst, value) -> None:
        be = self.backend
        be.copy_into(dst, value if isinstance(value, be.raw_type) else be.from_numpy(value))

    @contextlib.contextmanager
    def recording(self, inputs):
        yield None

    @contextlib.contextmanager
    def paused(self):
        yield

    def finish(self, outputs) -> None:
        pass

    def replay(self, run, static_outputs, prelude):
        return run()

    def release(self) -> None:
        pass

    @property
    def stats(self) -> dict:
        """What a replay holds: nothing here."""
        return {"dispatches": 0, "copies": 0, "staged_outputs": 0, "pool_free_bytes": 0}


def where(skip: int = 0) -> str:
    """Where the running code was called from, for error messages: the last calls inside
    Haelixe outside its backends (the op or optimizer at work) and the user's line, e.g.
    ``Optimizer.step -> Adam._update (haelixe/optim/adam.py:78), at train.py:20 in
    train_step``. ``skip`` more frames of the caller's are left out."""
    frame = sys._getframe(1 + skip)
    chain = []  # innermost first
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(_PACKAGE):
            break  # the user's code
        if not path.startswith(_BACKENDS) and frame.f_code.co_name not in _WRAPPERS:
            chain.append(frame)
        frame = frame.f_back
    parts = []
    if chain:
        names = [_name(f) for f in reversed(chain[:3])]
        parts.append(f"{' -> '.join(names)} ({_short(chain[0])})")
    if frame is not None:
        parts.append(f"at {Path(frame.f_code.co_filename).name}:{frame.f_lineno} in "
                     f"{frame.f_code.co_name}")
    return ", ".join(parts) or "in the captured function"


# generic call layers that name no op
_WRAPPERS = {"op", "front", "method", "wrapper", "__call__", "_call_impl", "apply",
             "<lambda>"}


def _name(frame) -> str:
    code = frame.f_code
    name = getattr(code, "co_qualname", code.co_name)
    owner = frame.f_locals.get("cls")  # a classmethod of a generated op class
    if isinstance(owner, type) and "." in name:
        name = f"{owner.__name__}.{code.co_name}"
    return name


def _short(frame) -> str:
    path = Path(frame.f_code.co_filename)
    rel = path.relative_to(Path(_PACKAGE).parent)
    return f"{rel.as_posix()}:{frame.f_lineno}"


# -- the errors both graphs give, worded once ------------------------------------------------
def read_back_error(what: str, at: str, reads: str) -> CaptureError:
    return CaptureError(
        f"a read-back of {what} inside a captured step ({at}): .item(), .numpy(), .tolist(), "
        f"float(t), printing a tensor and boolean-mask indexing {reads}, but a replay runs "
        f"none of the step's Python, so the value could not be read on later calls. Return "
        f"the tensor from the function and read it after the call (loss = step(x, y); "
        f"loss.item()), or move the read-back out of the captured function.")


def diverged_error(first: list, second: list, k: int, unit: str, describe) -> CaptureError:
    """Two recordings (lists of commands; ``unit``: what one is called) part at number
    ``k``; ``describe(command)`` names one for the message."""
    def at(commands):
        return describe(commands[k]) if k < len(commands) else "nothing more"

    return CaptureError(
        f"capture: two calls of the step launched different work ({len(first)} and "
        f"{len(second)} {unit}s; {unit} #{k} was {at(first)} on the first and "
        f"{at(second)} on the second). The step's Python takes a different path from "
        f"call to call (a branch on a counter, a lazily created state, a set of parameters "
        f"with gradients that changes), which a replay cannot follow. Make every call do "
        f"the same work (create state before capturing), or raise warmup= in hx.capture so "
        f"the first calls run eagerly.")


def values_differ_error(head: str, detail: str) -> CaptureError:
    """``head``: "capture: <the op> (<which command>, <where>)"; ``detail``: which value
    differed, ending in what it is (a Python number, a size)."""
    return CaptureError(
        f"{head} got other values on two calls: {detail} that changes from call to call "
        f"would be frozen into the replay. Keep such values in a tensor the step updates "
        f"itself (optimizers: capturable=True keeps the step count and learning rate in "
        f"tensors on the device) or pass them as a tensor argument.")


def state_replaced_error(head: str) -> CaptureError:
    """``head``: "capture: <the op> (<which command>, <where>), <which operand>,"."""
    return CaptureError(
        f"{head} reads a tensor the previous call created: the step carries state from "
        f"call to call by replacing a tensor (an attribute or a list entry assigned a new "
        f"tensor), so a replay would keep reading the first one. Update such state in place "
        f"(state.copy_(new), state.add_(...)).")


def different_outside_error(head: str) -> CaptureError:
    return CaptureError(
        f"{head} reads a different tensor created outside the function on each call (data "
        f"read through a global or a closure?): a replay would keep reading the last one. "
        f"Pass data that changes as an argument of the captured function.")


def flow_differs_error(head: str, first: str, second: str) -> CaptureError:
    return CaptureError(
        f"{head} names different data on two calls ({first} and {second}): the step's data "
        f"flow changes from call to call, which a replay cannot follow. Make every call "
        f"compute the same way, or pass changing data as arguments.")


def lost_error(first: str) -> CaptureError:
    """An outside tensor the replay reads was freed; ``first``: the op that read it."""
    return CaptureError(
        f"a tensor created outside the captured function and read by it has been freed "
        f"since the capture (first read by {first}); the replay would read stale data. Pass "
        f"data that changes as an argument of the captured function, keep the model and "
        f"optimizer alive while the captured step is in use, or call release() on it and "
        f"capture again.")
