"""Optimizer base: parameter groups packed into flat buffers, the step mask, zero_grad,
state dicts."""

from __future__ import annotations

import functools

import numpy as np

from .. import capture_replay as replay
from .. import creation
from ..autograd.mode import STATE, enable_grad, no_grad
from ..memory import tagged
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

    # -- state dicts: PyTorch's layout ------------------------------------------------------
    # {"state": {index: {"step": tensor, name: tensor of the parameter's shape, ...}},
    #  "param_groups": [{..., "params": [index, ...]}]}, indices counting parameters
    # across the groups in order, so that a state dict moves between Haelixe's optimizer
    # and PyTorch's of the same name. Subclasses name their flat state (PyTorch's names).
    _host_names: tuple = ()  # per-parameter host scalars in ``fg.host_state``
    _eager_state = False  # PyTorch builds every parameter's state at construction
    _saves_step = True  # PyTorch's state holds the parameter's "step" (SGD's does not)

    def _state_names(self, group: dict) -> tuple:
        """The flat state tensors this group's update uses (PyTorch's names)."""
        return ()

    def _initial(self, group: dict, name: str) -> float:
        """The value a fresh state entry starts at."""
        return 0.0

    def _buffer(self, group, fg, name):
        """The flat state tensor ``name``, created (at its initial value) when missing:
        an option that needs it may be switched on after construction."""
        t = fg.state.get(name)
        if t is None:
            with tagged("optimizer_state"):
                t = fg.state[name] = creation.full((fg.data.numel(),),
                                                   self._initial(group, name),
                                                   dtype=state_dtype(fg), device=fg.device)
        return t

    def _state_tensors(self) -> dict:
        """name -> flat state tensor of each flat group (what the optimizer's memory is)."""
        return {f"group{gi}.flat{fi}.{k}": t
                for gi, fgs in enumerate(self.flat_groups)
                for fi, fg in enumerate(fgs)
                for k, t in fg.state.items() if t is not None}

    def _locations(self):
        """(group, saved index, flat group, position in it) for every parameter, in
        PyTorch's order: group by group, each group's parameters as given."""
        index = 0
        for group, fgs in zip(self.param_groups, self.flat_groups):
            where = {id(p): (fg, i) for fg in fgs for i, p in enumerate(fg.params)}
            for p in group["params"]:
                yield (group, index, *where[id(p)])
                index += 1

    def state_dict(self) -> dict:
        state = {}
        for group, index, fg, i in self._locations():
            if fg.steps[i] or self._eager_state:  # PyTorch's state starts at a first step
                entry = self._param_state(group, fg, i)
                if entry:
                    state[index] = entry
        groups, index = [], 0
        for group in self.param_groups:
            n = len(group["params"])
            groups.append({**{k: v for k, v in group.items() if k != "params"},
                           "params": list(range(index, index + n))})
            index += n
        return {"state": state, "param_groups": groups}

    def _param_state(self, group, fg, i) -> dict:
        a, b = fg.bounds[i]
        shape = fg.params[i].shape
        entry = {}
        if self._saves_step:
            entry["step"] = creation.tensor(float(fg.steps[i]), dtype="float32")
        for n in self._state_names(group):
            entry[n] = self._buffer(group, fg, n)[a:b].view(shape).detach().clone()
        for n in self._host_names:
            entry[n] = creation.tensor(fg.host_state[n][i], dtype="float64")
        return entry

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state dict of ``state_dict()``'s layout (PyTorch's); a parameter with
        no entry starts afresh (step 0), as one PyTorch never stepped."""
        name = type(self).__name__
        saved_groups, saved = state_dict["param_groups"], state_dict["state"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: the state dict has "
                             f"{len(saved_groups)} parameter groups, this optimizer "
                             f"{len(self.param_groups)}")
        for gi, (g, sg) in enumerate(zip(self.param_groups, saved_groups)):
            if "params" not in sg:
                raise ValueError(f"{name}.load_state_dict: group {gi} of the state dict "
                                 f"has no 'params' list: it is not an optimizer's "
                                 f"state_dict() (PyTorch's layout)")
            if len(sg["params"]) != len(g["params"]):
                raise ValueError(f"{name}.load_state_dict: group {gi} holds "
                                 f"{len(sg['params'])} parameters in the state dict, "
                                 f"{len(g['params'])} here")
        # (saved index, saved hyperparameters) of every parameter, in _locations' order
        saved_of = [(key, {k: v for k, v in sg.items() if k != "params"})
                    for sg in saved_groups for key in sg["params"]]
        plan = []
        for (group, _, fg, i), (key, hyper) in zip(list(self._locations()), saved_of):
            entry = saved.get(key)
            if entry is not None:
                self._check_entry(name, {**group, **hyper}, fg, i, key, entry)
            plan.append((group, fg, i, entry))
        # everything checked: now change this optimizer
        for g, sg in zip(self.param_groups, saved_groups):
            g.update({k: v for k, v in sg.items() if k != "params"})
        with no_grad():
            for group, fg, i, entry in plan:
                self._load_param(group, fg, i, entry)
        self.step_count = max((n for fgs in self.flat_groups for fg in fgs
                               for n in fg.steps), default=0)
        for g, fgs in zip(self.param_groups, self.flat_groups):
            for fg in fgs:
                if g.get("capturable"):
                    fg.make_capturable(g["lr"])
                    fg.sync_device_steps()
                    fg.sync_lr(g["lr"])

    def _check_entry(self, name, group, fg, i, key, entry) -> None:
        shape = fg.params[i].shape
        needed = (("step",) if self._saves_step else ()) + self._state_names(group)
        for n in needed + self._host_names:
            if n not in entry:
                raise KeyError(f"{name}.load_state_dict: the state of parameter {key} "
                               f"lacks {n!r}")
        for n in self._state_names(group):
            got = tuple(entry[n].shape)
            if got != tuple(shape):
                raise ValueError(f"{name}.load_state_dict: state {n!r} of parameter "
                                 f"{key} has shape {got} in the state dict, {shape} here")

    def _load_param(self, group, fg, i, entry) -> None:
        a, b = fg.bounds[i]
        if entry is None:
            fg.steps[i] = 0
            for n in self._state_names(group):
                self._buffer(group, fg, n)[a:b].fill_(self._initial(group, n))
            for n in self._host_names:
                fg.host_state[n][i] = self._initial(group, n)
            return
        # (SGD's state has no count: a parameter with state has stepped)
        fg.steps[i] = int(float(entry["step"])) if self._saves_step else max(fg.steps[i], 1)
        for n in self._state_names(group):
            self._buffer(group, fg, n)[a:b].copy_(_flat(entry[n]))
        for n in self._host_names:
            fg.host_state[n][i] = float(entry[n])


def _flat(x):
    """A state tensor from a state dict (a Haelixe tensor, or an array such as a CPU torch
    tensor) as a flat Haelixe tensor."""
    if isinstance(x, Tensor):
        return x.detach().reshape(-1)
    return creation.tensor(np.asarray(x).reshape(-1))


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
