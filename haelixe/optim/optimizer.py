"""Optimizer base: parameter groups packed into flat buffers, zero_grad, state dicts."""

from __future__ import annotations

from ..autograd.mode import no_grad
from .flat import FlatGroup, group_by_device_dtype


class Optimizer:
    """Holds ``param_groups`` (dicts with "params" and hyperparameters, as in PyTorch);
    each group's parameters are packed by device and dtype into FlatGroups so that
    ``step()`` is one pass of whole-buffer kernels per group."""

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        if not isinstance(params[0], dict):
            params = [{"params": params}]
        self.param_groups = []
        self.flat_groups = []  # parallel to param_groups: a list of FlatGroup each
        self.step_count = 0
        for g in params:
            group = {**self.defaults, **g, "params": list(g["params"])}
            for p in group["params"]:
                if not p.requires_grad:
                    raise ValueError(f"{type(self).__name__}: parameter of shape {p.shape} "
                                     f"does not require grad")
            self.param_groups.append(group)
            self.flat_groups.append([FlatGroup(ps) for ps in
                                     group_by_device_dtype(group["params"])])
        self._init_state()

    def _init_state(self):
        pass

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero every gradient. The flat gradient buffers stay (zeroed in place), so
        backward keeps accumulating into them; ``set_to_none`` is accepted for
        PyTorch compatibility."""
        for fgs in self.flat_groups:
            for fg in fgs:
                fg.zero_grad()

    def set_lr(self, lr: float) -> None:
        for g in self.param_groups:
            g["lr"] = lr

    @property
    def lr(self) -> float:
        return self.param_groups[0]["lr"]

    def step(self) -> None:
        self.step_count += 1
        with no_grad():
            for group, fgs in zip(self.param_groups, self.flat_groups):
                for i, fg in enumerate(fgs):
                    if fg.sync():
                        self._update(group, fg, i)

    def _update(self, group, fg, index):
        raise NotImplementedError

    # -- state dicts ---------------------------------------------------------------------
    def _state_tensors(self) -> dict:
        """name -> tensor of the optimizer state (flat buffers)."""
        return {}

    def state_dict(self) -> dict:
        groups = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]
        return {"step": self.step_count, "param_groups": groups,
                "state": {k: t.detach().clone() for k, t in self._state_tensors().items()}}

    def load_state_dict(self, state: dict) -> None:
        self.step_count = int(state["step"])
        for g, saved in zip(self.param_groups, state["param_groups"]):
            g.update({k: v for k, v in saved.items() if k != "params"})
        own = self._state_tensors()
        missing = [k for k in own if k not in state["state"]]
        if missing:
            raise KeyError(f"optimizer state dict lacks {missing}")
        with no_grad():
            for k, t in own.items():
                src = state["state"][k]
                if tuple(src.shape) != t.shape:
                    raise ValueError(f"optimizer state {k}: shape {tuple(src.shape)} in the "
                                     f"state dict, {t.shape} here")
                t.copy_(src)
