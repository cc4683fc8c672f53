"""A Module's hooks (PyTorch's ``register_forward_pre_hook``, ``register_forward_hook``,
``register_full_backward_pre_hook``, ``register_full_backward_hook``): functions called
around its forward, and when the backward reaches its outputs and its input.

    feats = {}
    handle = model.encoder.register_forward_hook(
        lambda module, args, output: feats.update(encoder=output.detach()))
    model(x)                    # feats["encoder"] holds the encoder's output
    handle.remove()

A module with no hooks pays one attribute check per call. Backward hooks put an identity
node on the module's input (the one tensor argument that requires grad) and one on each
output: the output's node notes its gradient (``grad_output``), the input's node calls
the hooks with both, and passes on what they return.
"""

from __future__ import annotations

import itertools
import warnings
from collections import OrderedDict

from ..autograd.function import Function
from ..tensor import Tensor

_ids = itertools.count()


class HookHandle:
    """What ``register_*_hook`` returns: ``remove()`` takes the hook off again (also as
    a context manager: ``with module.register_forward_hook(f): ...``)."""

    def __init__(self, *tables):
        self.id = next(_ids)
        self._tables = tables

    def remove(self) -> None:
        for table in self._tables:
            if isinstance(table, dict):
                table.pop(self.id, None)
            else:
                table.discard(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class ModuleHooks:
    """One module's hooks, by handle id in the order they run."""

    def __init__(self):
        self.forward_pre: OrderedDict = OrderedDict()
        self.forward: OrderedDict = OrderedDict()
        self.backward_pre: OrderedDict = OrderedDict()
        self.backward: OrderedDict = OrderedDict()
        self.with_kwargs: set = set()
        self.always_call: set = set()

    def add(self, table: OrderedDict, hook, prepend: bool, *flags) -> HookHandle:
        if not callable(hook):
            raise TypeError(f"register a hook: expected a callable, got "
                            f"{type(hook).__name__}")
        handle = HookHandle(table, *flags)
        table[handle.id] = hook
        if prepend:
            table.move_to_end(handle.id, last=False)
        for flag in flags:
            flag.add(handle.id)
        return handle


def call_with_hooks(module, hooks: ModuleHooks, args: tuple, kwargs: dict):
    """``module(*args, **kwargs)`` with its hooks around the forward."""
    for key, hook in list(hooks.forward_pre.items()):
        if key in hooks.with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"forward pre-hook must return None or a tuple of "
                                       f"(new_args, new_kwargs), but got {result}.")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    state = None
    if hooks.backward or hooks.backward_pre:
        state = _BackwardState(module, hooks)
        args = state.hook_inputs(args)
    called = set()
    try:
        result = module.forward(*args, **kwargs)
        for key, hook in list(hooks.forward.items()):
            called.add(key)
            out = hook(module, args, kwargs, result) if key in hooks.with_kwargs else \
                hook(module, args, result)
            if out is not None:
                result = out
    except Exception:
        for key, hook in list(hooks.forward.items()):
            if key in hooks.always_call and key not in called:
                try:
                    if key in hooks.with_kwargs:
                        hook(module, args, kwargs, None)
                    else:
                        hook(module, args, None)
                except Exception as e:
                    warnings.warn(f"module forward hook with always_call=True raised an "
                                  f"exception that was silenced as another error was "
                                  f"raised in forward: {e}", stacklevel=3)
        raise
    if state is not None:
        result = state.hook_outputs(result)
    return result


class _BackwardState:
    """One call's backward hooks: the gradients of its outputs as they arrive, then the
    hooks at its input."""

    def __init__(self, module, hooks: ModuleHooks):
        self.module, self.hooks = module, hooks
        self.inputs = 0  # the module's tensor arguments that require grad
        self.grad_output: list = []

    def hook_inputs(self, args: tuple) -> tuple:
        needing = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        if len(needing) > 1:
            raise NotImplementedError(
                f"{type(self.module).__name__}: a full backward hook sees the gradients of "
                f"a module's inputs together, and Haelixe's hooks handle a module with one "
                f"tensor input that requires grad (this call has {len(needing)}); hook the "
                f"inputs' tensors with Tensor.register_hook instead")
        self.inputs = len(needing)
        if not needing:
            return args
        i = needing[0]
        return (*args[:i], _HookedInput.apply(args[i], self), *args[i + 1:])

    def hook_outputs(self, result):
        single = isinstance(result, Tensor)
        outputs = (result,) if single else result
        if not isinstance(outputs, tuple) or not all(isinstance(o, Tensor) for o in outputs):
            warnings.warn(f"For backward hooks to be called, module output should be a "
                          f"Tensor or a tuple of Tensors but received {type(result)}",
                          stacklevel=3)
            return result
        if len(outputs) > 1 and (self.hooks.backward_pre or not self.inputs):
            raise NotImplementedError(
                f"{type(self.module).__name__}: Haelixe's backward pre-hooks (and backward "
                f"hooks of a module none of whose inputs requires grad) take a module with "
                f"one output, this one has {len(outputs)}; hook the outputs with "
                f"Tensor.register_hook instead")
        self.grad_output = [None] * len(outputs)
        hooked = tuple(_HookedOutput.apply(o, self, i) if o.requires_grad else o
                       for i, o in enumerate(outputs))
        return hooked[0] if single else hooked

    def output_grad(self, i: int, g):
        """The gradient of output ``i``, after the backward pre-hooks."""
        for hook in list(self.hooks.backward_pre.values()):
            out = hook(self.module, (g,))
            if out is not None:
                g = _one(out, "backward pre-hook")
        self.grad_output[i] = g
        if not self.inputs:  # (no input node will call them)
            self.call_backward_hooks((None,))
        return g

    def call_backward_hooks(self, grad_input: tuple):
        grad_output = tuple(self.grad_output)
        for hook in list(self.hooks.backward.values()):
            out = hook(self.module, grad_input, grad_output)
            if out is not None:
                grad_input = (_one(out, "backward hook"),)
        return grad_input[0]


def _one(result, what: str):
    if isinstance(result, (tuple, list)):
        if len(result) != 1:
            raise RuntimeError(f"{what} returned {len(result)} gradients, expected 1")
        result = result[0]
    if result is not None and not isinstance(result, Tensor):
        raise TypeError(f"{what} must return None or a tuple of Tensors, got "
                        f"{type(result).__name__}")
    return result


class _HookedInput(Function):
    """Identity on the module's input: its backward calls the full backward hooks."""

    label = "BackwardHook"

    @staticmethod
    def forward(ctx, x, state):
        ctx.state = state
        return x._alias()

    @staticmethod
    def backward(ctx, g):
        return ctx.state.call_backward_hooks((g,)), None


class _HookedOutput(Function):
    """Identity on an output: its backward notes the output's gradient."""

    label = "BackwardHook"

    @staticmethod
    def forward(ctx, y, state, i):
        ctx.state, ctx.i = state, i
        return y._alias()

    @staticmethod
    def backward(ctx, g):
        return ctx.state.output_grad(ctx.i, g), None, None
