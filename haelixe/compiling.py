"""``hx.compile`` (PyTorch's ``torch.compile``): what Haelixe can do of it.

- A Module comes back as it is: its forward runs eagerly, because its backward is made
  by autograd outside the call, and a replay (``hx.capture``) returns tensors without a
  graph. The whole step (forward, backward, optimizer) is what replays.
- A function is captured with ``hx.capture`` once its first call shows it returns no
  tensor that needs a gradient (a whole training step, or inference); a function whose
  results need a gradient (a forward used by a ``backward()`` outside it) runs eagerly
  from then on, since a replay's outputs would carry none. The rules of ``hx.capture``
  hold for what is captured: a read-back inside (``.item()``, printing a tensor) raises
  CaptureError naming the op; a captured optimizer needs ``capturable=True``.
- ``disable=True`` gives back the module or function itself. ``backend``, ``mode``,
  ``dynamic``, ``fullgraph`` and ``options`` are accepted and change nothing (they
  choose among PyTorch's compilers).
"""

from __future__ import annotations

import functools

from .capture_replay import capture
from .tensor import Tensor


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="inductor",  # noqa: A001
            mode=None, options=None, disable: bool = False):
    """See the module docstring. Usable as ``@hx.compile`` and ``@hx.compile(...)``."""
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic,
                                 backend=backend, mode=mode, options=options,
                                 disable=disable)
    from .nn.module import Module

    if disable or isinstance(model, Module):
        return model
    if not callable(model):
        raise TypeError(f"compile: expected a Module or a function, got "
                        f"{type(model).__name__}")
    return CompiledFunction(model)


def _needs_grad(out) -> bool:
    if isinstance(out, Tensor):
        return out.requires_grad
    if isinstance(out, (tuple, list)):
        return any(_needs_grad(o) for o in out)
    if isinstance(out, dict):
        return any(_needs_grad(o) for o in out.values())
    return False


class CompiledFunction:
    """A function under hx.compile: eager on its first call, then captured or eager."""

    def __init__(self, fn):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.captured = None  # the CapturedStep, once the first call allowed one
        self.eager = False

    def __call__(self, *args, **kwargs):
        if self.captured is not None:
            return self.captured(*args, **kwargs)
        out = self.fn(*args, **kwargs)
        if not self.eager:
            if _needs_grad(out):
                self.eager = True
            else:  # the first call was capture's warm-up: the next ones record, then replay
                self.captured = capture(self.fn, warmup=0)
        return out

    def __repr__(self) -> str:
        how = "captured" if self.captured is not None else "eager" if self.eager else "new"
        return f"<hx.compile of {getattr(self.fn, '__name__', self.fn)!r} ({how})>"
