"""Writes into part of a tensor while autograd records: ``x[key] = v`` and an in-place
op on a view (``x[0] += w``, ``x[i, j] -= 1``).

The tensor that owns the memory (the view's base, or the tensor itself) takes a node
that stands for "the old value with these elements replaced": its gradient flows to the
old value everywhere else and to the written value at those elements (PyTorch's
CopySlices). A view written in place then reads its values through that node, as a view
of the new base.
"""

from __future__ import annotations

import weakref

import numpy as np

from .. import layout
from ..autograd.function import Function
from ..autograd.mode import no_grad
from ..creation import tensor
from ..tensor import Tensor

#: root storage -> {its count of recorded writes before one: that write's node}, for the
#: writes made here (a whole-tensor in-place op is not listed: it touches every element)
_WRITES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _log_write(storage, count, node, cells) -> None:
    node.cells = cells
    log = _WRITES.setdefault(getattr(storage, "root", storage), {})
    if len(log) >= 64:  # (drop the writes whose graphs are gone)
        for k in [k for k, r in log.items() if r() is None]:
            del log[k]
    log[count] = weakref.ref(node)


def untouched(storage, since, cells) -> bool:
    """Whether every recorded write to ``storage`` after its ``since``-th left the storage
    cells ``cells`` as they were (unknown: False)."""
    log = _WRITES.get(getattr(storage, "root", storage), {})
    for count in range(since, storage.history):
        ref = log.get(count)
        node = ref() if ref is not None else None
        if node is None or np.intersect1d(node.cells, cells).size:
            return False
    return True


class Overwrite(Function):
    """A copy of ``x`` whose elements at ``pos`` (indices into x's row-major elements, an
    int64 tensor of the written region's shape) hold ``value`` (of pos's shape)."""

    small_state = True

    @staticmethod
    def forward(ctx, x, value, pos):
        ctx.pos = pos
        with no_grad():
            out = x.detach().clone().reshape(-1)
            out[pos] = value.detach()
        return out.reshape(x.shape)

    @staticmethod
    def backward(ctx, g):
        pos = ctx.pos
        kept = Overwrite.apply(g, g.new_zeros(pos.shape), pos)  # (the old value: not there)
        return kept, g.reshape(-1)[pos], None


def _dead():
    return None


def _positions(x, base) -> np.ndarray:
    """Each element of the view ``x`` as an index into ``base``'s row-major elements."""
    spos = _storage_positions(x)
    if base._layout is None:  # a contiguous base: its elements are its storage cells
        return spos - base.offset
    bpos = _storage_positions(base).reshape(-1)
    inverse = np.full(int(max(bpos.max(initial=0), spos.max(initial=0))) + 1, -1, np.int64)
    inverse[bpos] = np.arange(bpos.size, dtype=np.int64)
    return inverse[spos]


def _cells(base, pos) -> np.ndarray:
    """The storage cells of ``base``'s elements at row-major indices ``pos``."""
    p = pos.detach().cpu().numpy().reshape(-1)
    if base._layout is None:
        return p + base.offset
    return _storage_positions(base).reshape(-1)[p]


def _storage_positions(t) -> np.ndarray:
    from .views import storage_positions

    return storage_positions(t.shape, t.strides, t.offset)


def _base_of(x, op) -> Tensor:
    base = x if x._base is None else x._base
    if base._requires_grad and base.grad_fn is None:
        raise RuntimeError(
            f"{op}: a view of a leaf tensor that requires grad (base shape {base.shape}) "
            f"is being written in place while autograd records. Do it inside "
            f"`with hx.no_grad():`, or write into a clone()")
    return base


def write_region(x, key, value, op) -> None:
    """``x[key] = value`` (key None: all of x) as a recorded op on x's base; ``value`` a
    tensor that broadcasts to the region."""
    from .convert import cast, to_device
    from .inplace import _rebase

    base = _base_of(x, op)
    whole = np.arange(x.numel(), dtype=np.int64).reshape(x.shape) if x is base \
        else _positions(x, base)
    pos = tensor(whole, device=x.device)
    if key is not None:
        pos = pos[key]
    value = to_device(cast(value, base.dtype), base.device)
    while value.ndim > pos.ndim and value.shape[0] == 1:  # (leading 1s drop, as PyTorch's)
        value = value.squeeze(0)
    shape = layout.broadcast_shapes(pos.shape, value.shape, op=op)
    if shape != pos.shape:
        raise RuntimeError(f"{op}: a value of shape {value.shape} does not broadcast to the "
                           f"written region's shape {pos.shape}")
    before = x.grad_fn
    count = base._storage.history
    result = Overwrite.apply(base, value.expand(pos.shape), pos)
    _rebase(base, result, op)
    if result.grad_fn is not None:
        _log_write(base._storage, count, result.grad_fn, _cells(base, pos))
    if x is not base:
        _renew_view(x, base, before)


def refresh_view(x, op) -> None:
    """Before an in-place op computes on the view ``x``: x reads its base's present
    history through a node of its own, so the write does not pass through the view ops
    that made x (each checks, at backward, that no recorded write came after it)."""
    base = _base_of(x, op)
    _retire(x.grad_fn, x._storage.history)
    _give_fresh_node(x, base)
    if x.grad_fn is not None:
        x.grad_fn.read_by_one_write = True


def _retire(node, history) -> None:
    """Switch off a view node's check of later writes where no write came since it was
    made: only the tensor it made holds it, and that tensor takes a new node now, so
    every read of it came before the writes to come."""
    seen = getattr(node, "history", None)
    if seen is not None and seen[1] == history:
        node.history = (_dead, 0)


def _give_fresh_node(x, base) -> None:
    from .views import as_strided

    fresh = as_strided(base, x.shape, x.strides, x.offset)
    x.grad_fn, x._requires_grad = fresh.grad_fn, fresh._requires_grad


def _renew_view(x, base, before) -> None:
    """The view ``x`` reads its new values through its base's new node. The node that
    refresh_view gave it was read by this write alone, before writing: its check is
    switched off."""
    if before is not None and getattr(before, "read_by_one_write", False):
        before.history = (_dead, 0)
    else:
        _retire(before, x._storage.history - 1)  # (a setitem through x: x's own node)
    _give_fresh_node(x, base)
