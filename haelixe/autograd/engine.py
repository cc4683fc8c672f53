"""The backward engine: reverse topological order, gradients accumulated per node.

The walk is iterative (a 100,000-op chain does not touch Python's recursion limit).
Every node is numbered when it is recorded, after the nodes of its inputs, so running
the reached nodes latest-numbered first (a heap) runs each one after every node that
can send it a gradient: no pass over the graph counts edges first. Gradients wait in a
dict keyed by node, summed as they arrive.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush

from ..backends.base import K_ADD
from ..tensor import Tensor
from .function import (
    AccumulateGrad,
    PartialGrad,
    _check_finite,
    freed_graph_error,
)
from .mode import STATE

# Callbacks told about each node as backward starts and finishes it (the graph widget's
# live mode). Each is called as fn("start", node, None) and fn("finish", node, norms),
# where norms are the L2 norms of the gradients the node produced, one per input edge
# (None for a None gradient, and while a captured step is recorded).
_observers: list = []


class NotTwiceDifferentiableError(RuntimeError):
    """create_graph=True through a node whose backward has no graph of its own (a fused
    kernel's); a RuntimeError, as before, that torch.func's transforms can tell apart."""


def add_backward_observer(fn):
    """Call ``fn(event, node, grad_norms)`` for every node of every backward pass.
    Returns a function that removes it."""
    _observers.append(fn)
    return lambda: _observers.remove(fn) if fn in _observers else None


_ABSENT = object()


def run_backward(roots, grads, retain_graph=False, create_graph=False, capture=None,
                 accumulate=True):
    """Propagate ``grads`` from the ``roots`` nodes back through the graph.

    capture: optional dict {node: None} whose incoming gradients are recorded and
    returned (autograd.grad); with accumulate=False no leaf ``.grad`` is touched.
    """
    pending = {}
    owned = {}  # id -> pending gradient the engine made itself (see _sum)
    for node, g in zip(roots, grads):
        pending[node] = pending[node] + g if node in pending else g
    # Nodes run latest-made first: every node is made after the nodes its edges lead to
    # (record numbers it then), so when a node comes off this max-heap every node that
    # can send it a gradient has run, and its pending gradient is complete. (PyTorch's
    # engine orders its ready queue the same way.) No pass counting edges is needed.
    heap = []
    for node in pending:  # (a loop: a comprehension is one more call)
        heap.append((-node.seq, node))
    heapify(heap)
    # hooks, retain_grad, capture, observers and anomaly mode are rare: one flag says
    # whether a node needs the slow path's checks at all
    watched = bool(_observers) or capture is not None or STATE.anomaly
    # this thread's modes as their dict: one lookup of the thread's state here, where
    # each attribute of STATE is one (a tenth of a microsecond, on every node)
    state = STATE.__dict__
    prev_mode, prev_node = state["grad_enabled"], state["backward_node"]
    prev_accumulates = state["backward_accumulates"]
    try:
        # (set inside the try: a KeyboardInterrupt at the loop's backward jump is taken
        # at the loop's head, which must not be where the try begins, or the finally
        # that restores the mode is skipped; CPython 3.11)
        state["grad_enabled"] = create_graph
        state["backward_accumulates"] = accumulate and capture is None
        while heap:
            node = state["backward_node"] = heappop(heap)[1]
            g = pending.pop(node)
            if owned:  # handed on now: no longer the engine's to add into in place
                owned.pop(id(g), None)
            if g.__class__ is not Tensor and isinstance(g, PartialGrad):  # (it waited)
                g = g.dense()
            if watched or node.watch:  # (hooks, retain_grad)
                g = _before_node(node, g, capture)
            if node.is_accumulate:
                if g is not None and accumulate:
                    leaf = node._leaf()
                    if leaf is not None:
                        accumulate_into_leaf(leaf, g, create_graph)
                        if node.post_hooks:  # (told of the leaf once .grad holds g)
                            for hook in tuple(node.post_hooks):
                                hook(leaf)
                if watched and _observers:
                    _notify("finish", node, (g,))
                continue
            if g is None:
                in_grads = (None,) * len(node.next)
            else:
                if node.saved is None:
                    raise freed_graph_error(node.name)
                if create_graph and not node.twice_differentiable:
                    raise NotTwiceDifferentiableError(
                        f"{node.name} is a fused kernel with a first derivative only; "
                        f"create_graph=True through it is not supported. Compose the op "
                        f"from elementary ops to take higher derivatives.")
                if watched and STATE.anomaly:
                    in_grads = _backward_checked(node, g)
                else:
                    in_grads = node.backward(node, g)
                    if in_grads.__class__ is not tuple:
                        in_grads = (in_grads,)
                if not retain_graph:
                    if node.small_state:  # (release's own first case, without its call)
                        node.saved = None
                    else:
                        node.release()
                if watched:  # what watches a gradient sees it whole
                    in_grads = tuple(gi.dense() if isinstance(gi, PartialGrad) else gi
                                     for gi in in_grads)
            if watched and _observers:
                _notify("finish", node, in_grads)
            if node.checks_gradients:
                _check_shapes(node, in_grads)
            for nxt, gi in zip(node.next, in_grads):
                if nxt is None:
                    continue
                prev = pending.get(nxt, _ABSENT)
                if prev is _ABSENT:
                    # first reached: it waits on the heap (one reached by None gradients
                    # only still runs, passing None on, as hooks and observers expect)
                    pending[nxt] = gi
                    heappush(heap, (-nxt.seq, nxt))
                elif gi is not None:
                    pending[nxt] = gi if prev is None else _sum(prev, gi, owned)
    finally:
        state["grad_enabled"], state["backward_node"] = prev_mode, prev_node
        state["backward_accumulates"] = prev_accumulates
    return capture


def _sum(prev, gi, owned):
    """Two gradients for one node added up. ``owned`` maps id -> tensor for the pending
    gradients the engine made itself (held there, so an id is never reused while
    listed): only those are written in place; a partial gradient adds into one."""
    partial_prev, partial_gi = isinstance(prev, PartialGrad), isinstance(gi, PartialGrad)
    if not (partial_prev or partial_gi or STATE.grad_enabled):
        # first order (no graph for the sum), the usual two gradients of one shape and
        # dtype: one kernel, in place into a buffer the engine made where prev is one (a
        # weight used at every step of an RNN gathers one per step)
        pd, gd = prev._data, gi._data
        if pd.__class__ is gd.__class__ and pd.shape == gd.shape and pd.dtype == gd.dtype:
            be = prev._be
            if id(prev) in owned:
                be.add_into(pd, gd)
                return prev
            out = Tensor._wrap(be.map(K_ADD, (pd, gd), pd.dtype))
            owned[id(out)] = out
            return out
    if not partial_prev and not partial_gi:
        out = prev + gi
    else:
        if not partial_prev:  # the partial one first
            prev, gi, partial_gi = gi, prev, False
        if partial_gi:  # both partial: one buffer for the two
            out = gi.dense()
            prev.add_into(out)
        elif id(gi) in owned and gi.shape == prev.shape and gi.dtype is prev.dtype \
                and gi.device is prev.device:
            prev.add_into(gi)
            return gi
        else:  # a tensor the engine did not make may be held elsewhere: a new buffer
            out = prev.dense()
            if out.shape == gi.shape and out.dtype is gi.dtype and out.device is gi.device:
                out._be.add_into(out._data, gi._data)
            else:
                out = out + gi
    owned.pop(id(prev), None)
    owned.pop(id(gi), None)
    owned[id(out)] = out
    return out


def _before_node(node, g, capture):
    """What runs before a node's backward when something watches it: its hooks (which
    may replace g), retain_grad, autograd.grad's capture, the observers' "start"."""
    if g is not None and node.hooks:
        for hook in node.hooks:
            out = hook(g)
            if out is not None:
                g = out
    if g is not None and node.retain is not None:
        node.retain(g)
    if capture is not None and node in capture:
        capture[node] = g
    for fn in _observers:
        fn("start", node, None)
    return g


def _notify(event, node, grads):
    norms = tuple(None if gi is None else _norm(gi) for gi in grads)
    for fn in _observers:
        fn(event, node, norms)


def _check_shapes(node, in_grads):
    """Every gradient a custom Function's backward returned is a tensor of its input's
    shape.
    Caught here, a bad backward names itself; let through, it would broadcast silently in
    the next node or fail there under another name."""
    for i, (nxt, gi) in enumerate(zip(node.next, in_grads)):
        if gi is not None and not isinstance(gi, (Tensor, PartialGrad)):
            raise TypeError(
                f"backward of {node.name} returned a {type(gi).__name__}, not a Tensor, for "
                f"input {i}: a backward returns a Tensor (or None) per forward argument; "
                f"wrap an array with hx.from_numpy(...)")
        if nxt is not None and gi is not None:
            shape = nxt.out_shape
            if shape is not None and gi.shape != shape:
                raise RuntimeError(
                    f"backward of {node.name} returned a gradient of shape {gi.shape} for "
                    f"input {i}, but that input (made by {nxt.name}) has shape {shape}")


def _backward_checked(node, g):
    """node.backward under anomaly mode. The ops inside a backward formula do not check
    their own outputs (they would be blamed by their own names, e.g. Div for Sqrt's
    derivative); the gradients the node produced are checked and blamed on the node."""
    STATE.anomaly = False
    try:
        in_grads = node.backward(node, g)
        if not isinstance(in_grads, tuple):
            in_grads = (in_grads,)
        # (checked whole: a partial gradient's zeros are part of what the node produced)
        in_grads = tuple(gi.dense() if isinstance(gi, PartialGrad) else gi for gi in in_grads)
    finally:
        STATE.anomaly = True
    for i, gi in enumerate(in_grads):
        if gi is not None:
            try:
                _check_finite(gi, f"backward of {node.name} (gradient {i})")
            except RuntimeError as e:
                if not node.trace:
                    raise
                # where the forward ran, as recorded under anomaly mode (last frames)
                raise RuntimeError(f"{e}\nthe forward of {node.name} was called from:\n"
                                   + "".join(node.trace[-4:])) from None
    return in_grads


def accumulate_into_leaf(leaf, g, create_graph):
    """Add the gradient tensor ``g`` into ``leaf.grad``: in place where it has the
    gradient's shape, dtype and device."""
    grad = leaf.grad
    if not create_graph:
        gd = g._data
        like = leaf if grad is None else grad
        if gd.shape == like.shape and gd.__class__ is like._data.__class__ and \
                gd.dtype == like._data.dtype:
            if grad is not None:  # in place: one kernel reading and writing .grad
                grad._be.add_into(grad._data, gd)
                grad._storage.version += 1
                return
            # The first gradient gets a buffer of its own: the incoming one may be
            # shared (an add passes one gradient to both inputs) or an expanded view. A
            # leaf with a gradient home (its view in an optimizer's flat buffer) is
            # written there: one copy, where a clone and the optimizer's copy were two.
            home = leaf._accumulator._home  # (a weak reference, or None)
            home = None if home is None else home()
            if home is None:
                leaf.grad = Tensor._wrap(leaf._be.copy(gd))
            else:
                home._be.copy_into(home._data, gd)
                home._storage.version += 1
                leaf.grad = home
            return
    # a gradient to sum back over broadcast dims, cast or move; or create_graph (the
    # sum is then recorded)
    if g.shape != leaf.shape:
        g = g.sum_to(leaf.shape)
    if g.dtype is not leaf.dtype:
        g = g.to(leaf.dtype)
    if g.device is not leaf.device:
        g = g.to(leaf.device)
    if grad is None:
        # (a clone under create_graph too, or a later in-place accumulation into one
        # leaf's .grad would change another's)
        leaf.grad = g.clone() if create_graph else g.detach().clone()
    elif create_graph:
        leaf.grad = grad + g
    else:
        grad._be.add_into(grad._data, g._data)
        grad._storage.version += 1


def _norm(t) -> float | None:
    """The L2 norm an observer is told; None while nothing may be read back (a step being
    captured: its replays run no Python to tell observers anything either)."""
    import numpy as np

    if t._be.checks_on_device():
        return None
    data = t._be.to_numpy(t._data)
    return float(np.sqrt(np.sum(np.square(data, dtype=np.float64))))


__all__ = ["run_backward", "add_backward_observer", "accumulate_into_leaf", "AccumulateGrad"]
