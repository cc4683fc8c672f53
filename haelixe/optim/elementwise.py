"""Base of the optimizers whose update is written once over backend-generic elementwise
ops (RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam): the shared start of the update
(maximize, weight decay, low-precision working copies), state dicts in PyTorch's
per-parameter layout, and the argument checks."""

from __future__ import annotations

import numpy as np

from .. import creation
from ..autograd.mode import no_grad
from ..memory import tagged
from ..tensor import Tensor
from .optimizer import Optimizer, state_dtype, working_copies, write_back


class ElementwiseOptimizer(Optimizer):
    """An optimizer whose per-element update is composed of tensor ops (any backend).

    Subclasses name their flat state (``_state_names(group)``, PyTorch's names), give the
    value a fresh entry starts at (``_initial``) and update one run of parameters in
    ``_step_elements``. ``state_dict()`` is PyTorch's layout: ``{"state": {index: {"step":
    tensor, name: tensor of the parameter's shape}}, "param_groups": [{..., "params":
    [index, ...]}]}``, indices counting parameters across the groups in order.
    """

    _host_names: tuple = ()  # per-parameter host scalars in ``fg.host_state``
    _eager_state = False  # PyTorch builds every parameter's state at construction

    def __init__(self, params, defaults: dict):
        name = type(self).__name__
        if defaults.get("capturable"):
            raise ValueError(f"{name}: capturable=True is not supported (its step counts "
                             f"and learning rate are host values); Adam, AdamW and SGD "
                             f"take capturable=True for captured steps")
        if defaults.get("differentiable"):
            raise ValueError(f"{name}: differentiable=True is not supported (the update "
                             f"runs under no_grad, so no graph goes through it); use "
                             f"differentiable=False")
        super().__init__(params, defaults)

    # -- for subclasses ------------------------------------------------------------------
    def _state_names(self, group: dict) -> tuple:
        """The flat state tensors this group's update uses (PyTorch's names)."""
        raise NotImplementedError

    def _initial(self, group: dict, name: str) -> float:
        """The value a fresh state entry starts at."""
        return 0.0

    def _step_elements(self, group, step, p, g, state, **extra) -> None:
        """Update the working parameter ``p`` in place from the gradient ``g`` (maximize
        and coupled weight decay applied) and the state slices ``state`` (name -> flat
        tensor); ``step`` is the parameters' count, this step included; ``extra`` is
        what a subclass's ``_update`` passes on."""
        raise NotImplementedError

    # -- the update ------------------------------------------------------------------------
    def _init_state(self, group, fg):
        for n in self._state_names(group):
            self._buffer(group, fg, n)
        for n in self._host_names:
            fg.host_state.setdefault(n, [self._initial(group, n)] * len(fg))

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

    def _update(self, group, fg, start, stop, step, **extra):
        p, g = fg.part(fg.data, start, stop), fg.part(fg.grad, start, stop)
        pw, gw = working_copies(fg, p, g)
        if group["maximize"]:
            gw = -gw
        wd = group.get("weight_decay", 0)  # (Rprop has none)
        if wd:
            if group.get("decoupled_weight_decay"):
                pw.mul_(1.0 - group["lr"] * wd)
            else:
                gw = gw + pw * wd
        state = {n: fg.part(self._buffer(group, fg, n), start, stop)
                 for n in self._state_names(group)}
        self._step_elements(group, step, pw, gw, state, **extra)
        write_back(p, pw)

    # -- state dicts -----------------------------------------------------------------------
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
                state[index] = self._param_state(group, fg, i)
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
        entry = {"step": creation.tensor(float(fg.steps[i]), dtype="float32")}
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

    def _check_entry(self, name, group, fg, i, key, entry) -> None:
        shape = fg.params[i].shape
        for n in ("step", *self._state_names(group), *self._host_names):
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
        fg.steps[i] = int(float(entry["step"]))
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


# -- shared pieces of the updates -----------------------------------------------------------
def lerp_(t, end, weight: float):
    """t += weight * (end - t), in place, rounded as PyTorch's lerp_ (from the nearer end)."""
    if weight < 0.5:
        t.add_((end - t) * weight)
    else:
        t.copy_(end - (end - t) * (1.0 - weight))
    return t


def ema_square_(t, g, decay: float):
    """t = decay * t + (1 - decay) * g * g, in place."""
    return t.mul_(decay).add_(g * g * (1.0 - decay))


# -- argument checks ---------------------------------------------------------------------
_LABELS = {"lr": "learning rate", "eps": "epsilon value"}


def check_nonnegative(optimizer: str, **values) -> None:
    """PyTorch's checks that hyperparameters are >= 0 (ValueError naming the optimizer)."""
    for arg, v in values.items():
        if not 0.0 <= v:
            label = _LABELS.get(arg, f"{arg} value")
            raise ValueError(f"{optimizer}: Invalid {label}: {arg}={v!r}; it must be >= 0")


def check_betas(optimizer: str, betas) -> tuple:
    betas = tuple(betas)
    if len(betas) != 2:
        raise ValueError(f"{optimizer}: betas must be a pair (beta1, beta2), got {betas}")
    for i, b in enumerate(betas):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"{optimizer}: Invalid beta parameter at index {i}: "
                             f"betas[{i}]={b!r}; it must lie in [0, 1)")
    return betas
