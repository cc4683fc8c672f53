"""Grad mode, anomaly mode and autocast: switches read on every op, one set per thread
(as PyTorch's: a thread inside no_grad() leaves the others recording)."""

from __future__ import annotations

import functools
import threading


class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.anomaly = False
        self.autocast = None  # the low-precision DType while hx.autocast is active
        # the Modules whose forward is running, outermost first: each recorded node keeps
        # the innermost one, so a picture of the graph can group nodes by module
        self.modules = []


STATE = _State()


def is_grad_enabled() -> bool:
    return STATE.grad_enabled


class _GradMode:
    """Context manager and decorator that sets grad mode for its extent."""

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
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):
    """Ops inside build no graph: ``with hx.no_grad():`` or ``@hx.no_grad()``."""

    enabled = False


class inference_mode(_GradMode):
    """As no_grad (PyTorch's inference_mode is no_grad with extra checks on the
    tensors made inside; Haelixe records nothing either way)."""

    enabled = False

    def __init__(self, mode: bool = True):
        self.enabled = not mode


class enable_grad(_GradMode):
    enabled = True


class set_grad_enabled(_GradMode):
    def __init__(self, mode: bool):
        self.enabled = bool(mode)

    def __call__(self, fn):
        mode = self.enabled

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper


class detect_anomaly:
    """While active, every op checks its forward output and every backward node checks
    the gradients it produced for NaN/Inf, and raises an error naming the op."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = STATE.anomaly
        STATE.anomaly = self.check_nan
        return self

    def __exit__(self, *exc):
        STATE.anomaly = self._prev
        return False
