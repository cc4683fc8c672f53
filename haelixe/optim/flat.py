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
from ..autograd.function import accumulator_of
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
        self.host_state = {}  # name -> one host float per parameter (NAdam's mu_product)
        # capturable optimizers: step counts and learning rate on the device (see
        # make_capturable); None otherwise
        self.device_steps = self.device_lr = None
        self.device_lr_value = None  # the lr last written into device_lr
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
                if p.requires_grad:  # backward writes a fresh gradient straight here
                    accumulator_of(p).home = gv
                if p.grad is not None:  # a gradient that exists is kept; None stays None
                    gv.copy_(p.grad)
                    p.grad = gv
                self.data_views.append(dv)
                self.grad_views.append(gv)
                self.bounds.append((start, start + n))
                start += n
        # run bounds -> parameter indices (the first / last parameter at that offset, so
        # a run covers the empty parameters inside it too)
        self._index_of_start, self._index_of_stop = {}, {}
        for i, (a, b) in enumerate(self.bounds):
            self._index_of_start.setdefault(a, i)
            self._index_of_stop[b] = i

    def __len__(self) -> int:
        return len(self.params)

    def make_capturable(self, lr: float) -> None:
        """Keep a copy of the step counts and the learning rate on the device, read by
        the capturable kernels: a captured step's replay then uses the current values
        (the counts advance by a kernel inside the step; the learning rate is written
        by :meth:`sync_lr` before the step)."""
        if self.device_steps is not None:
            return
        dt = "float32" if self.dtype.name in ("bfloat16", "float16") else self.dtype.name
        with no_grad(), tagged("optimizer_state"):
            self.device_steps = creation.tensor([float(n) for n in self.steps], dtype=dt,
                                                device=self.device)
            self.device_lr = creation.full((1,), lr, dtype=dt, device=self.device)
        self.device_lr_value = lr

    def sync_lr(self, lr: float) -> None:
        """Write ``lr`` into the device copy when it changed (a scheduler stepped)."""
        if lr != self.device_lr_value:
            with no_grad():
                self.device_lr.fill_(lr)
            self.device_lr_value = lr

    def sync_device_steps(self) -> None:
        """Copy the host step counts to the device (after loading a state dict)."""
        if self.device_steps is not None:
            with no_grad():
                self.device_steps.copy_(creation.tensor(
                    [float(n) for n in self.steps], dtype=self.device_steps.dtype,
                    device=self.device))

    def device_step_of(self, start: int, stop: int):
        """Count a step on the device for the parameters stored in [start, stop) (equal
        counts: one run of :meth:`runs`) and return their count as a 1-element view."""
        i0 = self._index_of_start[start]
        i1 = self._index_of_stop[stop] + 1
        self.device_steps[i0:i1].add_(1.0)
        return self.device_steps[i0:i0 + 1]

    def advance(self, mask) -> None:
        """Count a step on the host for every masked parameter (what :meth:`runs` does
        while iterating; a replay of a captured step calls this instead)."""
        for i, on in enumerate(mask):
            if on:
                self.steps[i] += 1

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
