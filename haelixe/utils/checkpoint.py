"""Activation checkpointing (``torch.utils.checkpoint``): a part of the forward runs
without keeping what its backward needs, and runs again, recording this time, when the
backward reaches it. Memory for compute: a Transformer block checkpointed keeps only its
input until backward.

    from haelixe.utils.checkpoint import checkpoint
    y = checkpoint(block, x, use_reentrant=False)

The part's outputs are one graph node, :class:`Checkpoint`, which saves the part's
tensor inputs only. Its backward restores the random state the forward started from (so
dropout draws the same mask), runs the part again under grad mode, and runs a backward of
its own through what it recorded: gradients for the inputs come back to the node, and
each parameter the part used gets its ``.grad`` there, as in PyTorch's
``use_reentrant=True``. Several outputs are joined into one flat tensor that the caller
gets views of, so their gradients meet in one buffer before the part runs again.
"""

from __future__ import annotations

import warnings

from ..autograd.api import backward as run_backward
from ..autograd.function import Function
from ..autograd.mode import STATE, enable_grad, no_grad
from ..nn.module import Module
from ..ops.indexing import cat
from ..random import get_rng_state, set_rng_state
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]

_SAVED = object()  # where a tensor argument was: it is among the node's saved tensors


def _joined(outputs):
    """The part's output(s) as (one tensor, how to split it again or None)."""
    if isinstance(outputs, Tensor):
        return outputs, None
    if not isinstance(outputs, tuple) or not outputs or \
            not all(isinstance(o, Tensor) for o in outputs):
        raise TypeError(f"checkpoint: the function must return a Tensor or a tuple of "
                        f"Tensors, got {_kind(outputs)}; return the other values apart "
                        f"from the checkpointed part")
    first = outputs[0]
    for o in outputs[1:]:
        if o.dtype is not first.dtype or o.device != first.device:
            raise TypeError(
                f"checkpoint: the function's outputs must share one dtype and device, got "
                f"{[str(o.dtype) for o in outputs]} on {[str(o.device) for o in outputs]}; "
                f"cast them to one dtype inside the function")
    shapes = [o.shape for o in outputs]
    flat = cat([o.reshape(-1) for o in outputs]) if len(outputs) > 1 else \
        first.reshape(-1)
    return flat, shapes


def _kind(value) -> str:
    if isinstance(value, tuple):
        return "a tuple of " + ", ".join(type(v).__name__ for v in value)
    return type(value).__name__


def _split(flat, shapes) -> tuple:
    out, start = [], 0
    for shape in shapes:
        n = 1
        for d in shape:
            n *= d
        out.append(flat[start:start + n].reshape(shape))
        start += n
    return tuple(out)


class Checkpoint(Function):
    """The checkpointed part as one node: forward runs it without recording, backward
    runs it again recording and backpropagates through that."""

    label = "Checkpoint"
    # (its backward runs the part's own ops: a graph of the gradient is theirs to make)
    twice_differentiable = False

    @staticmethod
    def forward(ctx, function, preserve_rng_state, kwargs, *args):
        ctx.function, ctx.kwargs = function, kwargs
        ctx.rng_state = get_rng_state() if preserve_rng_state else None
        ctx.inputs = [_SAVED if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*(a for a in args if isinstance(a, Tensor)))
        with no_grad():
            flat, ctx.shapes = _joined(function(*args, **kwargs))
        # (a fresh tensor: an input returned as it is must not get this node as its own)
        return flat._alias()

    @staticmethod
    def backward(ctx, grad):
        if not STATE.backward_accumulates:
            raise RuntimeError(
                "checkpoint: a checkpointed part computes its parameters' gradients with a "
                "backward of its own, which writes their .grad; it cannot run inside "
                "autograd.grad() or backward(inputs=...). Call .backward() without inputs, "
                "or leave the part un-checkpointed")
        saved = iter(ctx.saved_tensors)
        detached = []
        args = []
        for a in ctx.inputs:
            if a is _SAVED:
                t = next(saved)
                d = t.detach()
                if t.requires_grad:
                    d.requires_grad_(True)
                detached.append((d, t.requires_grad))
                args.append(d)
            else:
                args.append(a)
        outer_state = None
        if ctx.rng_state is not None:
            outer_state = get_rng_state()
            set_rng_state(ctx.rng_state)
        try:
            with enable_grad():
                flat, _ = _joined(ctx.function(*args, **ctx.kwargs))
        finally:
            if outer_state is not None:
                set_rng_state(outer_state)
        if flat.requires_grad:
            run_backward([flat], [grad])
        grads = iter([d.grad if needs else None for d, needs in detached])
        return (None, None, None, *(next(grads) if a is _SAVED else None
                                    for a in ctx.inputs))


def checkpoint(function, *args, use_reentrant: bool | None = None, context_fn=None,
               determinism_check: str = "default", debug: bool = False,
               early_stop: bool = True, preserve_rng_state: bool = True, **kwargs):
    """``function(*args, **kwargs)`` without keeping its activations: they are computed
    again when the backward reaches its outputs (see the module's docstring).
    ``use_reentrant`` either way gives what ``use_reentrant=True`` gives (parameters'
    ``.grad`` written by the recomputation's own backward); ``context_fn`` and
    ``debug`` are not supported."""
    if context_fn is not None:
        raise NotImplementedError("checkpoint: context_fn is not supported; wrap the "
                                  "function's body in the context managers instead")
    if debug:
        raise NotImplementedError("checkpoint: debug=True is not supported; run the "
                                  "function without checkpointing to trace its ops")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"checkpoint: determinism_check must be 'default' or 'none', got "
                         f"{determinism_check!r}")
    if not callable(function):
        raise TypeError(f"checkpoint: expected a callable first, got {_kind(function)}")
    if not (STATE.grad_enabled and any(isinstance(a, Tensor) and a.requires_grad
                                       for a in args)):
        if STATE.grad_enabled:
            warnings.warn("checkpoint: none of the inputs requires grad, so the "
                          "checkpointed part records nothing and its parameters get no "
                          "gradient; pass an input that requires grad", stacklevel=2)
        with no_grad():
            return function(*args, **kwargs)
    out = Checkpoint.apply(function, preserve_rng_state, kwargs, *args)
    shapes = out.grad_fn.shapes
    return out if shapes is None else _split(out, shapes)


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None,
                          **kwargs):
    """Run ``functions`` (an nn.Sequential or a list of modules/functions) one after
    another, cut into ``segments`` parts of which all but the last are checkpointed."""
    if isinstance(functions, Module):
        functions = list(functions.children())
    functions = list(functions)
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError(f"checkpoint_sequential: unexpected keyword arguments "
                         f"{sorted(kwargs)}; only preserve_rng_state is taken")
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be an int >= 1, got "
                         f"{segments!r}")
    size = max(1, len(functions) // segments)
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        part = functions[start:end + 1]
        input = checkpoint(_run_in_order(part), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return _run_in_order(functions[end + 1:])(input)


def _run_in_order(functions):
    def run(x):
        for f in functions:
            x = f(x)
        return x
    return run
