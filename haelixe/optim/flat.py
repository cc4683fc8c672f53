"""Flat parameter buffers: every parameter of a group becomes a view into one storage.

An optimizer step is then a handful of whole-buffer kernel calls over all parameters at
once instead of a loop of small ops per parameter. Gradients get the same treatment: each
``param.grad`` is a view into one flat gradient buffer, which backward accumulates into in
place. This is the strided-view engine earning its keep: the parameters' identity, shape
and values are unchanged; only their storage moved.

Which parameters step is PyTorch's rule: those whose ``.grad`` is not None. ``sync``
returns that as a mask (one flag per parameter); the optimizer turns the mask into runs
of neighbouring parameters, so the common case (every parameter has a gradient) is still
one kernel call over the whole buffer, and a parameter without a gradient (unused in the
loss, frozen, or zero_grad(set_to_none=True) and not reached since) is left untouched,
with its optimizer state.
"""

from __future__ import annotations

from .. import creation
from ..autograd.mode import no_grad
from ..memory import tagged


class FlatGroup:
    """Parameters of one device and dtype packed into flat ``data`` and ``grad``
    buffers, with per-parameter step counts and the optimizer's flat state."""

    def __init__(self, params):
        self.params = list(params)
        ref = self.params[0]
        self.device, self.dtype = ref.device, ref.dtype
        self.sizes = [p.numel() for p in self.params]
        self.bounds = []  # (start, stop) of each parameter in the flat buffers
        self.steps = [0] * len(self.params)  # PyTorch's per-parameter state["step"]
        self.state = {}  # name -> flat tensor, laid out as ``data``
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
                if p.grad is not None:  # a gradient that exists is kept; None stays None
                    gv.copy_(p.grad)
                    p.grad = gv
                self.data_views.append(dv)
                self.grad_views.append(gv)
                self.bounds.append((start, start + n))
                start += n

    def __len__(self) -> int:
        return len(self.params)

    def sync(self) -> list:
        """Which parameters step (their grad is not None), after bringing back any
        parameter whose data or grad was replaced since packing (a fresh gradient from
        backward after zero_grad(set_to_none=True), p.data = ...): the values are copied
        into the flat buffers and the parameter points at its view again."""
        mask = []
        with no_grad():
            for p, dv, gv in zip(self.params, self.data_views, self.grad_views):
                if p._storage is not dv._storage:
                    if p.device is not dv.device or p.dtype is not dv.dtype:
                        raise RuntimeError(
                            f"optimizer: a parameter of shape {p.shape} is now "
                            f"{p.dtype.name} on {p.device.type}, but was {dv.dtype.name} "
                            f"on {dv.device.type} when the optimizer was built; build the "
                            f"optimizer after model.to(...)")
                    dv.copy_(p.detach())
                    p._set_data(dv)
                g = p.grad
                if g is None:
                    mask.append(False)
                    continue
                if g is not gv:
                    gv.copy_(g)
                    p.grad = gv
                mask.append(True)
        return mask

    def runs(self, mask, by_step: bool):
        """Count a step for every masked parameter and yield (start, stop, step) for each
        run of neighbouring masked parameters (of equal step count when ``by_step``):
        the element ranges one kernel call updates."""
        run = None
        for i, on in enumerate(mask):
            if not on:
                if run is not None:
                    yield run
                    run = None
                continue
            self.steps[i] += 1
            start, stop = self.bounds[i]
            step = self.steps[i]
            if run is not None and (not by_step or run[2] == step):
                run = (run[0], stop, run[2])
                continue
            if run is not None:
                yield run
            run = (start, stop, step)
        if run is not None:
            yield run

    def part(self, t, start: int, stop: int):
        """``t[start:stop]`` of a flat buffer; the buffer itself when that is all of it."""
        return t if start == 0 and stop == t.shape[0] else t[start:stop]

    def zero_grad(self, set_to_none: bool) -> None:
        """PyTorch's zero_grad: set every grad to None, or zero the grads that exist
        (None stays None). The flat gradient buffer stays; sync re-attaches it."""
        if set_to_none:
            for p in self.params:
                p.grad = None
            return
        with no_grad():
            self.grad.zero_()
            for p, gv in zip(self.params, self.grad_views):
                if p.grad is not None and p.grad is not gv:
                    p.grad.zero_()


def group_by_device_dtype(params):
    groups = {}
    for p in params:
        groups.setdefault((p.device.type, p.dtype.name), []).append(p)
    return list(groups.values())
