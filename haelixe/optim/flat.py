"""Flat parameter buffers: every parameter of a group becomes a view into one storage.

An optimizer step is then a handful of whole-buffer kernel calls over all parameters at
once instead of a loop of small ops per parameter. Gradients get the same treatment: each
``param.grad`` is a view into one flat gradient buffer, which backward accumulates into in
place. This is the strided-view engine earning its keep: the parameters' identity, shape
and values are unchanged; only their storage moved.
"""

from __future__ import annotations

from .. import creation
from ..autograd.mode import no_grad
from ..memory import tagged


class FlatGroup:
    """Parameters of one device and dtype packed into flat ``data`` and ``grad``
    buffers."""

    def __init__(self, params, tag_prefix=""):
        self.params = list(params)
        ref = self.params[0]
        self.device, self.dtype = ref.device, ref.dtype
        self.sizes = [p.numel() for p in self.params]
        total = sum(self.sizes)
        with no_grad():
            with tagged("parameter"):
                self.data = creation.empty(total, dtype=self.dtype, device=self.device)
            with tagged("gradient"):
                self.grad = creation.zeros(total, dtype=self.dtype, device=self.device)
            self.data_views, self.grad_views = [], []
            start = 0
            for p, n in zip(self.params, self.sizes):
                dv = self.data[start:start + n].view(p.shape)
                dv.copy_(p.detach())
                p._set_data(dv)
                gv = self.grad[start:start + n].view(p.shape)
                if p.grad is not None:
                    gv.copy_(p.grad)
                p.grad = gv
                self.data_views.append(dv)
                self.grad_views.append(gv)
                start += n

    def sync(self) -> bool:
        """Bring back any parameter whose data or grad was replaced since packing
        (model.zero_grad(set_to_none=True), p.data = ...). Returns False when no
        parameter has a gradient at all."""
        any_grad = False
        with no_grad():
            for p, dv, gv in zip(self.params, self.data_views, self.grad_views):
                if p._storage is not dv._storage:
                    dv.copy_(p.detach())
                    p._set_data(dv)
                g = p.grad
                if g is gv:
                    any_grad = True
                    continue
                if g is None:
                    gv.zero_()
                else:
                    gv.copy_(g)
                    any_grad = True
                p.grad = gv
        return any_grad

    def zero_grad(self) -> None:
        with no_grad():
            self.grad.zero_()
        for p, gv in zip(self.params, self.grad_views):
            p.grad = gv


def group_by_device_dtype(params):
    groups = {}
    for p in params:
        groups.setdefault((p.device.type, p.dtype.name), []).append(p)
    return list(groups.values())
