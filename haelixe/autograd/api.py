"""Public autograd entry points: backward, grad, hooks."""

from __future__ import annotations

import weakref

from ..creation import tensor, zeros_like
from ..tensor import Tensor
from .engine import accumulate_into_leaf, run_backward
from .function import edge_of


def _roots(tensors, grad_tensors, op, create_graph):
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors]
    nodes, grads = [], []
    for t, g in zip(tensors, grad_tensors):
        if not t._requires_grad:
            raise RuntimeError(
                f"{op}: element 0 of tensors does not require grad and does not have a "
                f"grad_fn (shape {t.shape}); call requires_grad_() on the inputs before the "
                f"forward pass, or check that grad mode was on (hx.no_grad() disables it)")
        if g is None:
            if t.shape and t.numel() != 1:
                raise RuntimeError(
                    f"{op}: grad can be implicitly created only for scalar outputs, but the "
                    f"output has shape {t.shape}; pass gradient= (a tensor of that shape), "
                    f"or reduce first (.sum() / .mean())")
            nodes.append(edge_of(t))
            grads.append(_seed(t))
            continue
        if not isinstance(g, Tensor):
            g = tensor(g, dtype=t.dtype, device=t.device)
        if g.shape != t.shape:
            raise RuntimeError(f"{op}: gradient of shape {g.shape} does not match the output "
                               f"shape {t.shape}")
        nodes.append(edge_of(t))
        # a graph built by backward runs through the given gradients too, as in PyTorch
        grads.append(g if create_graph else g.detach())
    return nodes, grads


def _seed(t) -> Tensor:
    """The implicit gradient of a one-element output: a fresh one (no history, nothing
    to detach)."""
    return Tensor._wrap(t._be.full(t.shape, 1, t.dtype.np))


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(tensors)/d(leaf) into every leaf's ``.grad``."""
    if retain_graph is None:
        retain_graph = create_graph
    nodes, grads = _roots(tensors, grad_tensors, "backward", create_graph)
    if inputs is not None:
        _grad_impl(nodes, grads, list(inputs), retain_graph, create_graph, True, accumulate=True)
        return
    run_backward(nodes, grads, retain_graph=retain_graph, create_graph=create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """Gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated)."""
    if retain_graph is None:
        retain_graph = create_graph
    single = isinstance(inputs, Tensor)
    inputs = [inputs] if single else list(inputs)
    nodes, grads = _roots(outputs, grad_outputs, "grad", create_graph)
    return _grad_impl(nodes, grads, inputs, retain_graph, create_graph, allow_unused)


def _grad_impl(nodes, grads, inputs, retain_graph, create_graph, allow_unused,
               accumulate=False):
    targets = []
    for t in inputs:
        if not t._requires_grad:
            raise RuntimeError(f"grad: one of the inputs (shape {t.shape}) does not require "
                               f"grad")
        targets.append(edge_of(t))
    capture = run_backward(nodes, grads, retain_graph=retain_graph,
                           create_graph=create_graph, capture=dict.fromkeys(targets),
                           accumulate=False)
    out = []
    for t, node in zip(inputs, targets):
        g = capture.get(node)
        if g is None and not allow_unused:
            raise RuntimeError(f"grad: an input of shape {t.shape} is not reachable from the "
                               f"outputs; pass allow_unused=True to get None for it")
        if g is not None and g.shape != t.shape:
            g = g.sum_to(t.shape)
        if accumulate:
            if g is not None:  # as the engine does for leaves: in place after the first
                accumulate_into_leaf(t, g, create_graph)
            continue
        out.append(g if g is not None else (None if allow_unused else zeros_like(t)))
    return None if accumulate else tuple(out)


class RemovableHandle:
    def __init__(self, hooks: list, fn):
        self._hooks, self._fn = hooks, fn

    def remove(self) -> None:
        if self._fn in self._hooks:
            self._hooks.remove(self._fn)


def register_hook(t, fn):
    if not t._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require grad")
    node = edge_of(t)
    if node.hooks is None:
        node.hooks = []
    node.hooks.append(fn)
    node.watch = True
    return RemovableHandle(node.hooks, fn)


def register_post_accumulate_grad_hook(t, hook):
    """Call ``hook(t)`` after each backward has added a gradient into this leaf's .grad
    (PyTorch's; an optimizer step per parameter hangs on it). Returns a handle whose
    remove() takes the hook off."""
    if not t._requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require grad")
    if t.grad_fn is not None:
        raise RuntimeError(f"post accumulate grad hooks cannot be registered on non-leaf "
                           f"tensors (this one was made by {t.grad_fn.name}); register it "
                           f"on the leaf, or use register_hook")
    node = edge_of(t)
    if node.post_hooks is None:
        node.post_hooks = []
    node.post_hooks.append(hook)
    return RemovableHandle(node.post_hooks, hook)


def retain_grad(t) -> None:
    """Keep the gradient of a non-leaf tensor in its ``.grad`` after backward: the
    gradient after every hook of the tensor has run, as in PyTorch."""
    if t.grad_fn is None:
        if not t._requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
        return
    if t._retains_grad:
        return
    t._retains_grad = True
    ref = weakref.ref(t)

    def keep(g):
        owner = ref()
        if owner is not None:
            owner.grad = g.detach() if owner.grad is None else owner.grad + g.detach()

    t.grad_fn.retain = keep
    t.grad_fn.watch = True


# -- the Tensor methods autograd provides -------------------------------------------------
def _backward_method(self, gradient=None, retain_graph=None, create_graph=False,
                     inputs=None):
    if gradient is None and inputs is None and not create_graph and self._requires_grad \
            and self.grad_fn is not None and self._data.size == 1:
        # loss.backward(), every step: straight to the engine with _seed's gradient
        run_backward((self.grad_fn,), (Tensor._wrap(self._be.full(self.shape, 1,
                                                                   self.dtype.np)),),
                     retain_graph=bool(retain_graph))
        return
    backward([self], None if gradient is None else [gradient], retain_graph, create_graph,
             inputs)


Tensor.backward = _backward_method
Tensor.register_hook = register_hook
Tensor.retain_grad = retain_grad
Tensor.register_post_accumulate_grad_hook = register_post_accumulate_grad_hook
Tensor.retains_grad = property(lambda self: self._retains_grad)
