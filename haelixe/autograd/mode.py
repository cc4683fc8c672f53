"""Grad mode, anomaly mode and autocast: switches read on every op, one set per thread
(as PyTorch's: a thread inside no_grad() leaves the others recording)."""

from __future__ import annotations

import functools
import threading

from ..dtype import bfloat16


class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.anomaly = False  # (checking for NaN: detect_anomaly's check_nan)
        self.anomaly_mode = False  # (on at all: torch.is_anomaly_enabled)
        self.inference = False  # inside inference_mode() (torch.is_inference_mode_enabled)
        self.autocast = None  # the low-precision DType while hx.autocast is active
        # the dtype autocast runs in where none is given (torch.get_autocast_dtype)
        self.autocast_dtype = bfloat16
        # the Modules whose forward is running, outermost first: each recorded node keeps
        # the innermost one, so a picture of the graph can group nodes by module
        self.modules = []
        # the node whose backward the engine runs now (None outside backward): hx.profile
        # reads it to name each kernel's node without walking the stack
        self.backward_node = None
        # whether the running backward writes leaves' .grad (False inside autograd.grad
        # and backward(inputs=)): a checkpoint's recomputation reads it
        self.backward_accumulates = True


STATE = _State()


def is_grad_enabled() -> bool:
    return STATE.grad_enabled


class _GradMode:
    """Context manager and decorator that sets grad mode for its extent.

    The decorator form restores the mode in a finally, so an interrupt anywhere leaves
    it as before. The ``with`` form restores it in ``__exit__`` (its first statement),
    and Python may deliver a KeyboardInterrupt as that method is entered, before its
    first line runs: the mode then stays as the block set it. Code that must survive
    interrupts (a notebook's training loop, say) uses the decorator form or saves
    ``hx.is_grad_enabled()`` and restores it with ``hx.set_grad_enabled`` in its own
    ``except KeyboardInterrupt``; Haelixe's own backward and optimizer steps do so.
    """

    enabled = True

    def __new__(cls, *args):
        # ``@hx.no_grad`` without the call decorates the function directly, as
        # ``@hx.no_grad()`` does
        if cls is not set_grad_enabled and len(args) == 1 and callable(args[0]):
            return object.__new__(cls)(args[0])
        return object.__new__(cls)

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self.enabled
        return self

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False

    def __call__(self, fn):
        return _with_mode(fn, self.enabled)


class no_grad(_GradMode):
    """Ops inside build no graph: ``with hx.no_grad():`` or ``@hx.no_grad()``."""

    enabled = False


class inference_mode(_GradMode):
    """As no_grad (PyTorch's inference_mode is no_grad with extra checks on the
    tensors made inside; Haelixe records nothing either way)."""

    enabled = False

    def __init__(self, mode: bool = True):
        self.enabled = not mode
        self.mode = bool(mode)

    def __enter__(self):
        self._prev_inference = STATE.inference
        STATE.inference = getattr(self, "mode", True)
        return super().__enter__()

    def __exit__(self, *exc):
        STATE.inference = self._prev_inference
        return super().__exit__(*exc)

    def __call__(self, fn):
        mode = getattr(self, "mode", True)  # (@inference_mode without a call: no __init__)
        return _with_setting(_with_mode(fn, self.enabled), "inference", mode)


def is_inference_mode_enabled() -> bool:
    """is_inference_mode_enabled() -> bool

    True inside ``inference_mode()`` (in this thread)."""
    return STATE.inference


class enable_grad(_GradMode):
    enabled = True


class set_grad_enabled(_GradMode):
    """Sets grad mode at once, as PyTorch's: ``hx.set_grad_enabled(False)`` called as a
    plain function switches it; as a context manager the mode before is restored at the
    end; as a decorator it applies to each call of the function only."""

    def __init__(self, mode: bool):
        self.enabled = bool(mode)
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self.enabled

    def __enter__(self):
        return self

    def __call__(self, fn):
        STATE.grad_enabled = self._prev  # (a decorator changes the mode only per call)
        return _with_mode(fn, self.enabled)


def _with_mode(fn, enabled: bool):
    """``fn`` run with grad mode ``enabled``."""
    return _with_setting(fn, "grad_enabled", enabled)


def _with_setting(fn, name: str, value):
    """``fn`` run with the grad-mode state's field ``name`` set to ``value``, restored by a
    finally: a with statement's __exit__ is a Python call, and a KeyboardInterrupt
    landing as it is entered would leave the setting changed for good."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        prev = getattr(STATE, name)
        try:
            setattr(STATE, name, value)
            return fn(*args, **kwargs)
        finally:
            setattr(STATE, name, prev)

    return wrapper


class detect_anomaly:
    """While active, every op checks its forward output for NaN (an infinity there is
    legitimate: a causal mask's -inf) and every backward node the gradients it produced
    for NaN or Inf, and raises an error naming the op."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = STATE.anomaly, STATE.anomaly_mode
        STATE.anomaly, STATE.anomaly_mode = self.check_nan, True
        return self

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_mode = self._prev
        return False


def set_anomaly_enabled(mode: bool, check_nan: bool = True) -> None:
    """set_anomaly_enabled(mode, check_nan=True)

    Switches anomaly mode (detect_anomaly's checks) on or off for good, in this thread;
    with check_nan=False it is on without the NaN checks, as PyTorch's."""
    STATE.anomaly_mode = bool(mode)
    STATE.anomaly = bool(mode) and bool(check_nan)


def is_anomaly_enabled() -> bool:
    """is_anomaly_enabled() -> bool

    True while anomaly mode is on (detect_anomaly, set_anomaly_enabled)."""
    return STATE.anomaly_mode
