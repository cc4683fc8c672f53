"""Learning-rate schedulers with PyTorch's names, formulas and state dicts.

Each scheduler sets ``group["lr"]`` of every parameter group; construct it after the
optimizer, call ``step()`` after ``optimizer.step()``. The chainable (recursive) forms
are PyTorch's own, so the learning-rate sequences agree with it to the last bit of a
float; ``step(epoch)`` uses the closed form where there is one.
"""

from __future__ import annotations

import math
import types
from bisect import bisect_right

from .. import capture_replay as replay
from .optimizer import Optimizer


class LRScheduler:
    """Base: ``base_lrs`` from each group's ``initial_lr``, ``last_epoch``, ``step()``,
    ``get_last_lr()``, ``state_dict()`` / ``load_state_dict()``."""

    def __init__(self, optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: {type(optimizer).__name__} is not an "
                            f"Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"{type(self).__name__}: param_groups[{i}] has no "
                                   f"'initial_lr', needed to resume with last_epoch="
                                   f"{last_epoch}; load the optimizer's state dict first")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list:
        """The learning rates for ``last_epoch`` (chainable form)."""
        raise NotImplementedError

    def get_last_lr(self) -> list:
        """The learning rates the last ``step()`` set, one per parameter group."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        replay.outside_only(f"{type(self).__name__}.step()")
        self._step_count += 1
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        groups = self.optimizer.param_groups
        if len(values) != len(groups):
            raise RuntimeError(f"{type(self).__name__}: {len(values)} learning rates for "
                               f"{len(groups)} parameter groups")
        for group, lr in zip(groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in groups]

    def _lrs(self) -> list:
        return [group["lr"] for group in self.optimizer.param_groups]

    # an attribute saved in a form of its own (functions, inner schedulers), by
    # _save_part / _load_part
    _part = None

    def state_dict(self) -> dict:
        """Every attribute but the optimizer."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", self._part)}
        if self._part is not None:
            state[self._part] = self._save_part()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)  # the caller's dict stays as it was
        part = state.pop(self._part, None) if self._part is not None else None
        self.__dict__.update(state)
        if part is not None:
            self._load_part(part)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch})"


def _per_group(name, optimizer, value) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name}: {len(value)} values for "
                             f"{len(optimizer.param_groups)} parameter groups")
        return list(value)
    return [value] * len(optimizer.param_groups)


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch); one function, or one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        self.optimizer = optimizer
        self.lr_lambdas = _per_group("LambdaLR", optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]

    _part = "lr_lambdas"

    def _save_part(self) -> list:
        # as PyTorch: a function is saved only when it is a callable object (its
        # __dict__), not a plain function or lambda
        return [None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
                for fn in self.lr_lambdas]

    def _load_part(self, saved) -> None:
        for own, state in zip(self.lr_lambdas, saved):
            if state is not None:
                own.__dict__.update(state)


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the learning rate by a factor going linearly from ``start_factor`` to
    ``end_factor`` over ``total_iters`` epochs (a warm-up when it rises)."""

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1):
        if not 0 < start_factor <= 1:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1], got {start_factor}")
        if not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
        self.start_factor, self.end_factor = start_factor, end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        if self.last_epoch == 0:
            return [lr * self.start_factor for lr in self._lrs()]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._lrs()
        rise = self.end_factor - self.start_factor
        factor = 1.0 + rise / (self.total_iters * self.start_factor
                               + (self.last_epoch - 1) * rise)
        return [lr * factor for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        frac = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (self.start_factor + (self.end_factor - self.start_factor) * frac)
                for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, computed
    recursively from the previous learning rate as PyTorch does (so it composes with
    other changes to the learning rate), in closed form for ``step(epoch)``."""

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        t, n, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._lrs()
        if self._step_count == 1 and t > 0:
            return [lo + (base - lo) * (1 + math.cos(t * math.pi / n)) / 2
                    for base in self.base_lrs]
        if (t - 1 - n) % (2 * n) == 0:
            return [lr + (base - lo) * (1 - math.cos(math.pi / n)) / 2
                    for base, lr in zip(self.base_lrs, self._lrs())]
        ratio = (1 + math.cos(math.pi * t / n)) / (1 + math.cos(math.pi * (t - 1) / n))
        return [ratio * (lr - lo) + lo for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        return [self.eta_min + (base - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base in self.base_lrs]


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after another, switching at each of ``milestones`` (the
    epochs where the next one starts): e.g. LinearLR warm-up, then CosineAnnealingLR."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        schedulers, milestones = list(schedulers), list(milestones)
        if not schedulers:
            raise ValueError("SequentialLR expects at least one scheduler")
        for i, s in enumerate(schedulers):
            if getattr(s, "optimizer", None) is not optimizer:
                raise ValueError(f"SequentialLR: scheduler {i} ({type(s).__name__}) belongs "
                                 f"to another optimizer; build every scheduler on the same "
                                 f"one")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: {len(schedulers)} schedulers need "
                             f"{len(schedulers) - 1} milestones, got {len(milestones)}")
        self._schedulers, self._milestones = schedulers, milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # back to the initial learning rates, undoing the schedulers' own first steps
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for s in schedulers:
            _undo_initial_step(s)
        first = schedulers[bisect_right(milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:
        replay.outside_only("SequentialLR.step()")
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    _part = "_schedulers"

    def _save_part(self) -> list:
        return [s.state_dict() for s in self._schedulers]

    def _load_part(self, saved) -> None:
        for s, state in zip(self._schedulers, saved):
            s.load_state_dict(state)


def _undo_initial_step(scheduler) -> None:
    inner = getattr(scheduler, "_schedulers", None)
    if inner is not None:
        for s in inner:
            _undo_initial_step(s)
    else:
        scheduler.last_epoch -= 1


__all__ = ["LRScheduler", "LambdaLR", "StepLR", "LinearLR", "CosineAnnealingLR",
           "SequentialLR"]

_MISSING = {
    "OneCycleLR": "SequentialLR([LinearLR(...), CosineAnnealingLR(...)], milestones=[n])",
    "ExponentialLR": "LambdaLR(opt, lambda epoch: gamma ** epoch)",
    "MultiStepLR": "LambdaLR(opt, lambda epoch: gamma ** bisect.bisect_right(milestones, "
                   "epoch))",
    "MultiplicativeLR": "LambdaLR",
    "ConstantLR": "LambdaLR(opt, lambda epoch: factor if epoch < n else 1.0)",
    "PolynomialLR": "LambdaLR(opt, lambda epoch: (1 - min(epoch, n) / n) ** power)",
    "CosineAnnealingWarmRestarts": "CosineAnnealingLR (no restarts)",
    "CyclicLR": "LambdaLR with a periodic function",
    "ChainedScheduler": "SequentialLR",
    "ReduceLROnPlateau": "LambdaLR, or setting group['lr'] from the validation loss",
}


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), _MISSING)
