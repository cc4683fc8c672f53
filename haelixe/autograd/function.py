"""Function: one op's forward and backward, and the graph node it leaves behind.

An op is a subclass with two static methods, written next to each other so the
derivative is read beside what it differentiates (MiniTorch's shape):

    class Mul(Function):
        @staticmethod
        def forward(ctx, a, b):          # Tensors in, a raw array out
            ctx.save_for_backward(a, b)
            return a._be.mul(a._data, b._data)

        @staticmethod
        def backward(ctx, g):            # Tensors in, one grad per forward argument out
            a, b = ctx.saved_tensors
            return g * b, g * a

``Mul.apply(a, b)`` runs forward and, when grad mode is on and some input requires grad,
keeps the ctx as the output's ``grad_fn``: a node whose ``next`` edges point at the
nodes that made the inputs (or at the AccumulateGrad node of a leaf). Backward is
written with Haelixe ops, so running it under grad mode (create_graph=True) builds the
graph of the gradient itself.

``backward(ctx, g)`` is the one protocol between a node and the engine: ``g`` is a
Tensor, the gradient of the output (a PartialGrad that waited is made whole first), and
backward returns per forward argument a Tensor, a PartialGrad or None. The engine runs
it with grad mode off for a first-order pass and on under create_graph, so an op whose
first derivative is faster on the backend's raw arrays (the elementwise table, matmul,
softmax, the fused kernels) branches on ``STATE.grad_enabled``: off, it calls the
kernels on the raw arrays and wraps what they return (``Tensor._wrap``, ``wrap_grads``);
on, it runs the same derivative with ops.
"""

from __future__ import annotations

import itertools
import traceback
import weakref

import numpy as np

from ..storage import OBSERVERS
from ..tensor import Tensor
from .mode import STATE

_new = object.__new__

#: the number a node gets when it is recorded: it is made after the nodes its edges lead
#: to, so numbers decrease along every edge (the backward engine's order)
next_seq = itertools.count().__next__


class SavedTensorError(RuntimeError):
    pass


def freed_graph_error(name: str) -> SavedTensorError:
    return SavedTensorError(
        f"Trying to backward through the graph a second time (or directly access saved "
        f"tensors after they have already been freed) in {name}. Saved tensors are freed "
        f"after backward; pass retain_graph=True to the first backward() if you need to "
        f"backward through the graph again.")


class Node:
    """What every graph node has: edges to the next nodes, hooks, a display name."""

    __slots__ = ()
    is_accumulate = False
    checks_gradients = False
    #: True once a hook or retain_grad is on the node: the engine's one read per node
    #: for both (set by register_hook and retain_grad, never cleared)
    watch = False
    retain = None  # retain_grad's keeper (Functions only), run after the hooks
    #: a Function's output's shape, dtype and device (None for a leaf's accumulator)
    out_shape = out_dtype = out_device = None

    @property
    def name(self) -> str:
        return type(self).__name__


class AccumulateGrad(Node):
    """The sink for a leaf tensor: backward adds the gradient into ``leaf.grad``.

    It holds the leaf weakly (the leaf holds this node), so a leaf nobody references
    can still be freed; its gradient is then dropped, as in PyTorch.
    """

    __slots__ = ("_leaf", "hooks", "post_hooks", "next", "_home", "seq", "watch",
                 "__weakref__")
    is_accumulate = True

    def __init__(self, leaf):
        self._leaf = weakref.ref(leaf)
        self.seq = next_seq()
        self.hooks = None
        self.post_hooks = None  # (register_post_accumulate_grad_hook's: leaf -> None)
        self.watch = False
        self.next = ()
        self._home = None

    @property
    def leaf(self):
        return self._leaf()

    @property
    def home(self):
        """Where a first gradient is written instead of a buffer of its own (a view into
        an optimizer's flat gradient buffer), while that view lives; else None."""
        return None if self._home is None else self._home()

    @home.setter
    def home(self, t) -> None:
        self._home = None if t is None else weakref.ref(t)

    @property
    def name(self) -> str:
        return "AccumulateGrad"


class Function(Node):
    """Base of every differentiable op. Instances are the graph's nodes (and the ctx)."""

    __slots__ = ("next", "seq", "needs_input_grad", "out_ref", "__dict__", "__weakref__")

    #: False for fused kernels whose backward calls raw kernels: create_graph through
    #: them raises instead of silently giving a gradient without its own graph.
    twice_differentiable = True
    #: the name shown in graphs and errors; defaults to the class name
    label: str | None = None
    #: True where backward reads the output: apply saves a detached alias of it (the
    #: output itself would hold its own node: a reference cycle)
    saves_output = False
    #: False for ops with no derivative (comparisons): their outputs never require grad
    differentiable = True
    #: True where forward keeps nothing sizeable but its saved tensors (shapes, numbers,
    #: dims): release then drops the saved tensors alone and leaves the small fields
    small_state = False
    #: whether the engine checks the shapes of the gradients backward returns: for the
    #: Functions a user writes (set per subclass below); Haelixe's own ops are tested
    #: against PyTorch's gradients instead, and skip the check on every node
    checks_gradients = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "checks_gradients" not in cls.__dict__:
            cls.checks_gradients = not cls.__module__.startswith("haelixe.")

    # Per-node state starts as these class-level defaults, so making a node runs no
    # __init__ (every op makes one, recorded or not); assignments land in the instance.
    saved = ()
    _versions = ()
    hooks = None
    trace = None
    module = None  # the innermost Module whose forward made this node

    @property
    def name(self) -> str:
        return self.label or type(self).__name__

    # -- ctx API used inside forward -----------------------------------------------------
    def save_for_backward(self, *tensors) -> None:
        self.saved = tensors
        if len(tensors) == 2:  # (most ops save two or one: no comprehension for them)
            a, b = tensors
            self._versions = (None if a is None else a._storage.version,
                              None if b is None else b._storage.version)
        elif len(tensors) == 1:
            t = tensors[0]
            self._versions = (None if t is None else t._storage.version,)
        else:
            self._versions = [None if t is None else t._storage.version for t in tensors]

    @property
    def saved_tensors(self) -> tuple:
        saved = self.saved
        if saved is None:
            raise freed_graph_error(self.name)
        versions = self._versions
        if len(saved) == 2:  # (as in save_for_backward: no loop for the usual two)
            a, b = saved
            if (a is not None and a._storage.version != versions[0]) or \
                    (b is not None and b._storage.version != versions[1]):
                self._modified_error()
            return saved
        if len(saved) == 1:
            t = saved[0]
            if t is not None and t._storage.version != versions[0]:
                self._modified_error()
            return saved
        for t, v in zip(saved, versions):
            if t is not None and t._storage.version != v:
                self._modified_error()
        return saved

    def _modified_error(self):
        for i, (t, v) in enumerate(zip(self.saved, self._versions)):
            if t is not None and t._storage.version != v:
                raise SavedTensorError(
                    f"one of the variables needed for gradient computation has been "
                    f"modified by an inplace operation: saved tensor {i} of {self.name} "
                    f"(shape {t.shape}, dtype {t.dtype.name}) is at version "
                    f"{t._storage.version}; expected version {v} instead. Hint: replace "
                    f"the in-place op (add_, mul_, ...) that changed it by its out-of-place "
                    f"form, or clone() the tensor before changing it.")

    def release(self) -> None:
        """Drop the saved tensors (after backward, unless retain_graph)."""
        # everything forward kept goes (arrays, tensors, tables); what the graph shows
        # (label, the output's shape, dtype and device, hooks...) stays, and saved = None
        # marks the node as freed
        if self.small_state:
            self.saved = None  # (the rest is small: rebuilding the dict costs more)
            return
        d = self.__dict__
        if "module" in d or "hooks" in d or "retain" in d or "trace" in d or "label" in d:
            kept = {k: d[k] for k in _KEPT_ON_RELEASE if k in d}
        else:  # (what record set, written out: no comprehension for every node)
            kept = {"out_shape": d["out_shape"], "out_dtype": d["out_dtype"],
                    "out_device": d["out_device"]}
        kept["saved"] = None
        self.__dict__ = kept

    @property
    def saved_bytes(self) -> int:
        if not self.saved:
            return 0
        return sum(t.numel() * t.dtype.itemsize for t in self.saved if t is not None)

    # -- the op protocol -----------------------------------------------------------------
    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad):
        """The gradients of the forward's arguments, given ``grad`` (a Tensor, the
        output's): per argument a Tensor of its shape, a PartialGrad or None (see the
        module's docstring)."""
        raise NotImplementedError

    @classmethod
    def apply(cls, *args):
        """Run forward; record the node when some Tensor argument requires grad."""
        state = STATE  # (one lookup: the state lives per thread)
        requires = False
        if state.grad_enabled and cls.differentiable:
            for a in args:
                if isinstance(a, Tensor) and a._requires_grad:
                    requires = True
                    break
        if not requires and not state.anomaly:
            # Nothing to record (inference, no_grad, a first-order backward): forward
            # writes its ctx attributes into a sink instead of a node nobody keeps.
            raw = cls.forward(SINK, *args)
            return raw if raw.__class__ is Tensor else Tensor._wrap(raw)
        ctx = _new(cls)
        raw = cls.forward(ctx, *args)
        # Views return a Tensor over their input's storage; other ops a raw array, or a
        # tensor they made, which may be a view of their own intermediate (a convolution's
        # rows laid out as channels): that output is a base tensor of its own, as the
        # user sees it, so in-place ops on it (nn.ReLU(inplace=True)) record as on any
        out = raw if raw.__class__ is Tensor else Tensor._wrap(raw)
        if out._base is not None and not _views_an_input(out, args):
            out._base = None
        if state.anomaly:
            _check_finite(out, f"forward of {ctx.name}", inf_ok=True)
            ctx.trace = traceback.format_stack()[:-1]
        return record(ctx, out, args, state) if requires else out


def _views_an_input(out, args) -> bool:
    """Whether ``out`` shares the memory of one of ``args`` (a view op's output)."""
    storage = out._storage
    return any(isinstance(a, Tensor) and a._storage is storage for a in args)


def record(ctx, out, inputs, state):
    """The one place a node is recorded, once forward has run and some input requires
    grad: ``out`` gets ``ctx`` as its node, whose edges lead from each of ``inputs`` to
    the node its gradient flows into (None for a number or a tensor needing none). An op
    that saves its output keeps a detached alias of it (with its version). Function.apply
    calls it, and so does an elementwise op's direct path, which ran its kernel itself."""
    # per input, the node its gradient flows into: the node that made it, or a leaf's
    # accumulator; None for a number or a tensor that needs no gradient (a loop in here,
    # not a call: it runs for every recorded node)
    edges = []
    for t in inputs:
        if isinstance(t, Tensor) and t._requires_grad:
            edges.append(t.grad_fn or t._accumulator or accumulator_of(t))
        else:
            edges.append(None)
    ctx.next = edges
    ctx.seq = next_seq()
    out._requires_grad = True
    out.grad_fn = ctx
    ctx.out_shape, ctx.out_dtype, ctx.out_device = out.shape, out.dtype, out.device
    if ctx.saves_output:
        y = out._alias()
        ctx.saved = (*ctx.saved, y)
        ctx._versions = (*ctx._versions, y._storage.version)
    if state.modules:
        ctx.module = state.modules[-1]
    if OBSERVERS:  # (memory history: empty otherwise)
        for o in OBSERVERS:
            o.node_recorded(ctx)
    return out


def edge_of(t):
    """The node a gradient for the tensor ``t`` flows into, as record links it: the node
    that made it, or a leaf's accumulator (None if it needs none)."""
    if not t._requires_grad:
        return None
    return t.grad_fn or accumulator_of(t)


def accumulator_of(leaf) -> AccumulateGrad:
    """The AccumulateGrad node of ``leaf``, made on first use. Its ``home``, where set,
    is where the leaf's first gradient is written (see accumulate_into_leaf)."""
    acc = leaf._accumulator
    if acc is None:
        acc = leaf._accumulator = AccumulateGrad(leaf)
    return acc


def wrap_grads(grads) -> tuple:
    """The gradients an array formula gave (per input a raw array, a Tensor, a
    PartialGrad or None) as backward returns them: each raw array made a tensor."""
    out = []
    for gi in grads:  # (a loop: a comprehension is one more call, on every node)
        if gi is not None and gi.__class__ is not Tensor and \
                not isinstance(gi, (Tensor, PartialGrad)):
            gi = Tensor._wrap(gi)
        out.append(gi)
    return tuple(out)


class PartialGrad:
    """A first-order gradient that is zero outside a part of its tensor (a slice's
    backward gives one). The engine keeps it unmaterialised while it waits: when several
    arrive for one node (q, k and v sliced out of one projection) they are added into a
    single buffer instead of each making a full-size tensor of zeros and the engine
    adding those up. A subclass gives ``shape``, ``dtype``, ``device``, :meth:`dense`
    (a fresh tensor nothing else holds) and :meth:`add_into` (add itself into such a
    tensor in place)."""

    __slots__ = ()

    def dense(self) -> Tensor:
        raise NotImplementedError

    def add_into(self, t: Tensor) -> None:
        raise NotImplementedError


class _Sink:
    """The ctx of an op that records no node: whatever forward saves is dropped at
    once (holding it would keep buffers, and GPU slabs, alive for nothing)."""

    __slots__ = ()
    label = None
    next = ()

    def __setattr__(self, name, value) -> None:
        pass

    def save_for_backward(self, *tensors) -> None:
        pass


SINK = _Sink()

# what a node keeps once backward has freed it: what pictures of the graph show
_OUTPUT_FIELDS = ("out_shape", "out_dtype", "out_device")
_KEPT_ON_RELEASE = ("label", *_OUTPUT_FIELDS, "hooks", "trace", "module", "retain")


def _check_finite(t, where: str, inf_ok: bool = False) -> None:
    """Anomaly mode's check of a gradient (NaN or Inf), or with ``inf_ok`` of a forward
    output (NaN only: an infinity there is legitimate, a causal mask's -inf)."""
    if t.dtype.is_floating_point:
        data = t._be.to_numpy(t._data)
        if np.isnan(data).any() or (not inf_ok and not np.isfinite(data).all()):
            bad = "NaN" if np.isnan(data).any() else "Inf"
            raise RuntimeError(f"anomaly: {where} produced {bad} values (output shape "
                               f"{t.shape}, dtype {t.dtype.name})")


