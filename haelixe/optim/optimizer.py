"""Optimizer base: parameter groups packed into flat buffers, the step mask, zero_grad,
state dicts."""

from __future__ import annotations

import functools

from .. import capture_replay as replay
from ..autograd.mode import STATE, enable_grad, no_grad
from ..tensor import Tensor
from .flat import FlatGroup, group_by_device_dtype


class Optimizer:
    """Holds ``param_groups`` (dicts with "params" and hyperparameters, as in PyTorch);
    each group's parameters are packed by device and dtype into FlatGroups so that
    ``step()`` is one pass of whole-buffer kernels per group.

    Groups are told apart by position, never compared: two groups with equal
    hyperparameters, or whose parameters hold equal values, keep separate state.
    """

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        if isinstance(params, Tensor):
            raise TypeError(f"{type(self).__name__}: params must be an iterable of tensors "
                            f"or of dicts, got a single tensor; wrap it in a list: [p]")
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        self.param_groups = []
        self.flat_groups = []  # parallel to param_groups: a list of FlatGroup each
        self.step_count = 0
        for g in params:
            self.add_param_group(g)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (with its own hyperparameters, the defaults filling
        the rest), as PyTorch's add_param_group."""
        if not isinstance(param_group, dict) or "params" not in param_group:
            raise TypeError(f"{type(self).__name__}: a parameter group must be a dict with "
                            f"'params', got {param_group!r:.80}")
        params = param_group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        name = type(self).__name__
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"{name} can only optimize tensors, got "
                                f"{type(p).__name__}")
            if getattr(type(p), "_uninitialized", False):
                raise ValueError(f"{name}: got an uninitialized parameter (a lazy module's, "
                                 f"before its first forward); Haelixe's optimizers pack "
                                 f"the parameters into flat buffers when built, so run one "
                                 f"forward with a dummy batch first, then build {name}")
            if not p.is_leaf:
                raise ValueError(f"{name}: can't optimize a non-leaf tensor (shape {p.shape}"
                                 f", made by {p.grad_fn.name}); optimize the leaf it was "
                                 f"computed from, or detach() it")
            if not p.dtype.is_floating_point:
                raise TypeError(f"{name}: parameters must be floating point, got "
                                f"{p.dtype.name} (shape {p.shape})")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in params}) != len(params) or any(id(p) in seen for p in params):
            raise ValueError(f"{name}: some parameters appear more than once (in one "
                             f"group or in several); give each parameter once")
        group = {**self.defaults, **param_group, "params": params}
        self.param_groups.append(group)
        fgs = [FlatGroup(ps) for ps in group_by_device_dtype(params)] if params else []
        self.flat_groups.append(fgs)
        for fg in fgs:
            self._init_state(group, fg)
            if group.get("capturable"):
                fg.make_capturable(group["lr"])

    def _init_state(self, group: dict, fg: FlatGroup) -> None:
        """Create the optimizer's flat state tensors in ``fg.state``."""

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Set every gradient to None (the default, as in PyTorch) or zero it in place.
        The flat gradient buffers stay allocated; the next step re-attaches them."""
        for fgs in self.flat_groups:
            for fg in fgs:
                fg.zero_grad(set_to_none)

    def set_lr(self, lr: float) -> None:
        replay.outside_only(f"{type(self).__name__}.set_lr()")
        for g in self.param_groups:
            g["lr"] = lr

    @property
    def lr(self) -> float:
        return self.param_groups[0]["lr"]

    def step(self, closure=None):
        """Update every parameter that has a gradient; the others (grad None) and their
        state are left as they are. ``closure`` re-evaluates the loss, as in PyTorch.

        Interrupted (a KeyboardInterrupt, or any error raised part way): grad mode is
        what it was before the call (restored by a finally, whichever line the interrupt
        lands on). The step counters may run ahead of the updates: ``step_count`` and the
        per-parameter counts are advanced before the kernels run, so some parameters may
        count a step they did not take. Parameters are updated run by run (neighbouring
        parameters in one kernel call), so some may be stepped and others not; a
        parameter with an fp32 master copy or stochastic rounding may have its state
        (moments, master) stepped but its value not yet written back. To resume exactly,
        load a ``state_dict()`` (and the model's) saved before the step.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        recording = replay.recording()
        self.step_count += 1
        # (a finally, not `with no_grad()`: a KeyboardInterrupt landing as the with's
        # __exit__ is entered would leave grad mode off for good)
        prev_mode = STATE.grad_enabled
        try:
            STATE.grad_enabled = False
            for group, fgs in zip(self.param_groups, self.flat_groups):
                capturable = group.get("capturable", False)
                if recording and not capturable:
                    raise replay.CaptureError(
                        f"{type(self).__name__}.step() inside a captured step: its step "
                        f"count and learning rate are host values a replay would freeze. "
                        f"Build it with capturable=True (they then live on the device) "
                        f"and step learning-rate schedulers outside the captured "
                        f"function.")
                by_step = self._steps_matter(group)
                for fg in fgs:
                    mask = fg.sync()
                    if capturable:  # a changed lr reaches the device before every step
                        replay.every_call(functools.partial(_sync_lr, fg, group))
                    for start, stop, step in fg.runs(mask, by_step):
                        self._update(group, fg, start, stop, step)
                    replay.on_replay(functools.partial(fg.advance, mask))
        finally:
            STATE.grad_enabled = prev_mode
        replay.on_replay(self._count_step)
        return loss

    def _count_step(self) -> None:
        self.step_count += 1

    def _steps_matter(self, group: dict) -> bool:
        """True when the update depends on the per-parameter step count, so that only
        parameters with equal counts share a kernel call."""
        return False

    def _update(self, group: dict, fg: FlatGroup, start: int, stop: int, step: int):
        """Update elements [start, stop) of ``fg``'s buffers: parameters that all have a
        gradient and (where it matters) the same step count ``step``."""
        raise NotImplementedError

    # -- state dicts ---------------------------------------------------------------------
    def _state_tensors(self) -> dict:
        """name -> tensor of the optimizer state (flat buffers)."""
        return {f"group{gi}.flat{fi}.{k}": t
                for gi, fgs in enumerate(self.flat_groups)
                for fi, fg in enumerate(fgs)
                for k, t in fg.state.items() if t is not None}

    def state_dict(self) -> dict:
        groups = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]
        steps = [[list(fg.steps) for fg in fgs] for fgs in self.flat_groups]
        return {"step": self.step_count, "param_groups": groups, "param_steps": steps,
                "state": {k: t.detach().clone() for k, t in self._state_tensors().items()}}

    def load_state_dict(self, state: dict) -> None:
        name = type(self).__name__
        saved_groups = state["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: the state dict has "
                             f"{len(saved_groups)} parameter groups, this optimizer "
                             f"{len(self.param_groups)}")
        own = self._state_tensors()
        missing = [k for k in own if k not in state["state"]]
        if missing:
            raise KeyError(f"{name}.load_state_dict: the state dict lacks {missing}")
        for k, t in own.items():
            src = state["state"][k]
            if tuple(src.shape) != t.shape:
                raise ValueError(f"{name}.load_state_dict: state {k} has shape "
                                 f"{tuple(src.shape)} in the state dict, {t.shape} here")
        steps = state.get("param_steps")  # absent from older checkpoints: one shared count
        counts = []
        for gi, fgs in enumerate(self.flat_groups):
            for fi, fg in enumerate(fgs):
                c = steps[gi][fi] if steps is not None else [int(state["step"])] * len(fg)
                if len(c) != len(fg):
                    raise ValueError(f"{name}.load_state_dict: group {gi} holds {len(c)} "
                                     f"parameters in the state dict, {len(fg)} here")
                counts.append((fg, [int(n) for n in c]))
        # everything checked: now change this optimizer
        self.step_count = int(state["step"])
        for g, saved in zip(self.param_groups, saved_groups):
            g.update({k: v for k, v in saved.items() if k != "params"})
        for fg, c in counts:
            fg.steps = c
        for g, fgs in zip(self.param_groups, self.flat_groups):
            for fg in fgs:
                if g.get("capturable"):
                    fg.make_capturable(g["lr"])
                    fg.sync_device_steps()
                    fg.sync_lr(g["lr"])
        with no_grad():
            for k, t in own.items():
                t.copy_(state["state"][k])


# -- shared by the optimizers' updates ----------------------------------------------------
def _sync_lr(fg: FlatGroup, group: dict) -> None:
    fg.sync_lr(group["lr"])


LOW_PRECISION = ("bfloat16", "float16")


def state_dtype(fg: FlatGroup) -> str:
    """Optimizer state of low-precision parameters is kept in float32 (an update below
    half an ulp of BF16 would vanish); other parameters keep their own dtype."""
    return "float32" if fg.dtype.name in LOW_PRECISION else fg.dtype.name


def working_copies(fg: FlatGroup, p, g, master=None):
    """(p, g) to compute the update on: the buffers themselves, or float32 copies (the
    master weights when there are) for low-precision parameters."""
    if fg.dtype.name not in LOW_PRECISION:
        return p, g
    return (master if master is not None else p.to("float32")), g.to("float32")


def write_back(p, p_work, stochastic: bool = False) -> None:
    """Store the updated working copy into the parameter buffer (rounded when it is a
    float32 copy of a low-precision buffer); a kernel that wrote the buffer itself only
    bumps its version."""
    if p_work is p:
        p._storage.version += 1
        return
    if not stochastic:  # converted (to nearest even) as it is copied: no rounded temporary
        p._be.copy_into(p._data, p_work._data)
        p._storage.version += 1
        return
    from ..amp import round_to

    p.copy_(round_to(p_work, p.dtype, stochastic=True))
