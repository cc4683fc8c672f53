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
from collections import Counter

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




class MultiplicativeLR(LRScheduler):
    """Multiply the learning rate of each group by ``lr_lambda(epoch)`` every epoch.

    Args:
        optimizer (Optimizer): Wrapped optimizer.
        lr_lambda (function or list): A function of the epoch giving the factor, or a
            list of such functions, one per group in ``optimizer.param_groups``.
        last_epoch (int): The index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        self.optimizer = optimizer
        self.lr_lambdas = _per_group("MultiplicativeLR", optimizer, lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"MultiplicativeLR: lr_lambda must be a function, got "
                                f"{type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        if self._is_initial:
            return self._lrs()
        return [lr * fn(self.last_epoch) for fn, lr in zip(self.lr_lambdas, self._lrs())]

    # saved as LambdaLR saves its functions
    _part = LambdaLR._part
    _save_part = LambdaLR._save_part
    _load_part = LambdaLR._load_part


class MultiStepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` at each of ``milestones`` (by
    ``gamma ** n`` at a milestone listed n times).

    Args:
        optimizer (Optimizer): Wrapped optimizer.
        milestones (list): Epoch indices, increasing.
        gamma (float): Multiplicative factor of learning rate decay. Default: 0.1.
        last_epoch (int): The index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        if self.last_epoch not in self.milestones:
            return self._lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        milestones = sorted(self.milestones.elements())
        return [base * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """Multiply the learning rate by ``factor`` until epoch ``total_iters``, then
    restore it.

    Args:
        optimizer (Optimizer): Wrapped optimizer.
        factor (float): The factor, in [0, 1]. Default: 1./3.
        total_iters (int): The number of epochs scaled by ``factor``. Default: 5.
        last_epoch (int): The index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1):
        if not 0 <= factor <= 1:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._lrs()]
        if self.last_epoch != self.total_iters:
            return self._lrs()
        return [lr * (1.0 / self.factor) for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        return [base * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every epoch.

    Args:
        optimizer (Optimizer): Wrapped optimizer.
        gamma (float): Multiplicative factor of learning rate decay.
        last_epoch (int): The index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        # resuming (last_epoch >= 0), the constructor's step must not decay once more
        if self._is_initial:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """base_lr * (1 - epoch / total_iters) ** power, constant after ``total_iters``.

    Args:
        optimizer (Optimizer): Wrapped optimizer.
        total_iters (int): The number of epochs of decay. Default: 5.
        power (float): The power of the polynomial. Default: 1.0.
        last_epoch (int): The index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        t, n = self.last_epoch, self.total_iters
        if self._is_initial or t > n:
            return self._lrs()
        factor = ((1.0 - t / n) / (1.0 - (t - 1) / n)) ** self.power
        return [lr * factor for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        frac = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (1.0 - frac) ** self.power for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from the initial lr to ``eta_min`` over ``T_i`` epochs, then a
    restart; ``T_i`` starts at ``T_0`` and is multiplied by ``T_mult`` at each restart
    (SGDR). ``step(epoch)`` accepts a fractional epoch (a step per batch).

    Args:
        optimizer (Optimizer): Wrapped optimizer.
        T_0 (int): Number of iterations until the first restart.
        T_mult (int, optional): The factor by which T_i grows after a restart. Default: 1.
        eta_min (float, optional): Minimum learning rate. Default: 0.
        last_epoch (int, optional): The index of the last epoch. Default: -1.
    """

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1):
        if not isinstance(T_0, int) or T_0 <= 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a positive "
                             f"integer, got {T_0!r}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_mult must be an integer "
                             f">= 1, got {T_mult!r}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"CosineAnnealingWarmRestarts: eta_min must be a float or "
                             f"int, got {type(eta_min).__name__}")
        self.T_0, self.T_i, self.T_mult = T_0, T_0, T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        cos = 1 + math.cos(math.pi * self.T_cur / self.T_i)
        return [self.eta_min + (base - self.eta_min) * cos / 2 for base in self.base_lrs]

    def step(self, epoch=None) -> None:
        """Advance one epoch, or go to ``epoch`` (a float: epoch + batch / batches)."""
        replay.outside_only("CosineAnnealingWarmRestarts.step()")
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur %= self.T_i
                self.T_i *= self.T_mult
        else:
            self._go_to(epoch)
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = self._lrs()

    def _go_to(self, epoch) -> None:
        if epoch < 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: epoch must be >= 0, got "
                             f"{epoch}")
        if epoch < self.T_0:
            self.T_i, self.T_cur = self.T_0, epoch
        elif self.T_mult == 1:
            self.T_cur = epoch % self.T_0
        else:
            # the restart n before epoch: T_0 * (T_mult**n - 1) / (T_mult - 1) <= epoch
            n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
            self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
            self.T_i = self.T_0 * self.T_mult ** n


class CyclicLR(LRScheduler):
    """Cycle the learning rate between ``base_lr`` and ``max_lr`` (and the momentum,
    inversely, between ``max_momentum`` and ``base_momentum``), a step per batch (CLR).

    Args:
        optimizer (Optimizer): Wrapped optimizer.
        base_lr (float or list): Lower learning-rate boundary, per group.
        max_lr (float or list): Upper learning-rate boundary, per group.
        step_size_up (int): Iterations in the rising half of a cycle. Default: 2000.
        step_size_down (int): Iterations in the falling half; None: step_size_up.
        mode (str): One of ``'triangular'``, ``'triangular2'`` (the amplitude halves every
            cycle), ``'exp_range'`` (scaled by ``gamma ** iteration``); ignored when
            ``scale_fn`` is given. Default: 'triangular'.
        gamma (float): The base of ``'exp_range'``. Default: 1.0.
        scale_fn (function): A custom amplitude scaling, of the cycle or the iteration
            (``scale_mode``). Default: None.
        scale_mode (str): ``'cycle'`` or ``'iterations'``: what ``scale_fn`` takes.
            Default: 'cycle'.
        cycle_momentum (bool): Cycle ``momentum`` (or ``betas[0]``) too. Default: True.
        base_momentum (float or list): Lower momentum boundary. Default: 0.8.
        max_momentum (float or list): Upper momentum boundary. Default: 0.9.
        last_epoch (int): The index of the last batch. Default: -1.
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum: float = 0.8,
                 max_momentum: float = 0.9, last_epoch: int = -1):
        _check_optimizer("CyclicLR", optimizer)
        self.optimizer = optimizer
        base_lrs = _per_group("CyclicLR: base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = _per_group("CyclicLR: max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode must be 'triangular', 'triangular2' or "
                             f"'exp_range' (or give scale_fn), got {mode!r}")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        # the built-in modes fix what their scaling takes
        self.scale_mode = scale_mode if scale_fn is not None else (
            "iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _use_beta1("CyclicLR", optimizer)
            self.base_momentums = _per_group("CyclicLR: base_momentum", optimizer,
                                             base_momentum)
            self.max_momentums = _per_group("CyclicLR: max_momentum", optimizer,
                                            max_momentum)
            if last_epoch == -1:
                _init_momentum(optimizer, self.use_beta1, self.base_momentums,
                               self.max_momentums)
        super().__init__(optimizer, last_epoch)
        # as PyTorch: the constructor's step used the groups' initial_lr
        self.base_lrs = base_lrs

    def scale_fn(self, x) -> float:
        """The amplitude's scale at cycle (or iteration) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self) -> list:
        """The learning rates at batch ``last_epoch``; sets the momenta as a side effect
        when ``cycle_momentum``."""
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            height = x / self.step_ratio
        else:
            height = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (top - base) * height * scale
               for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            momenta = [top - (top - base) * height * scale
                       for base, top in zip(self.base_momentums, self.max_momentums)]
            _set_momentum(self.optimizer, self.use_beta1, momenta)
        return lrs

    _part = "_scale_fn_custom"

    def _save_part(self):
        # as PyTorch: a custom scale_fn is saved only when it is a callable object
        fn = self._scale_fn_custom
        return None if fn is None or isinstance(fn, types.FunctionType) else dict(fn.__dict__)

    def _load_part(self, saved) -> None:
        self._scale_fn_custom.__dict__.update(saved)


def _check_optimizer(name, optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{name}: {type(optimizer).__name__} is not an Optimizer")


def _use_beta1(name, optimizer) -> bool:
    """Whether momentum is cycled through ``betas[0]`` (Adam-like) or ``momentum``."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError(f"{name}: cycle_momentum=True needs an optimizer with momentum "
                         f"or betas; {type(optimizer).__name__} has neither (pass "
                         f"cycle_momentum=False)")
    return "betas" in optimizer.defaults


def _set_momentum(optimizer, use_beta1, momenta) -> None:
    for group, m in zip(optimizer.param_groups, momenta):
        if use_beta1:
            group["betas"] = (m, *group["betas"][1:])
        else:
            group["momentum"] = m


def _init_momentum(optimizer, use_beta1, base_momenta, max_momenta) -> None:
    _set_momentum(optimizer, use_beta1, max_momenta)
    for group, low, high in zip(optimizer.param_groups, base_momenta, max_momenta):
        group["max_momentum"], group["base_momentum"] = high, low


class OneCycleLR(LRScheduler):
    """The 1cycle policy: the learning rate rises from ``max_lr / div_factor`` to
    ``max_lr``, then anneals to ``initial_lr / final_div_factor``, over ``total_steps``
    batches; the momentum moves inversely. Not chainable.

    Args:
        optimizer (Optimizer): Wrapped optimizer.
        max_lr (float or list): Upper learning-rate boundary, per group.
        total_steps (int): The number of steps in the cycle; or give ``epochs`` and
            ``steps_per_epoch``. Default: None.
        epochs (int): The number of epochs. Default: None.
        steps_per_epoch (int): The number of steps per epoch. Default: None.
        pct_start (float): The fraction of the cycle spent rising. Default: 0.3.
        anneal_strategy (str): ``'cos'`` or ``'linear'``. Default: 'cos'.
        cycle_momentum (bool): Cycle ``momentum`` (or ``betas[0]``) inversely between
            ``max_momentum`` and ``base_momentum``. Default: True.
        base_momentum (float or list): Lower momentum boundary. Default: 0.85.
        max_momentum (float or list): Upper momentum boundary. Default: 0.95.
        div_factor (float): initial_lr = max_lr / div_factor. Default: 25.
        final_div_factor (float): min_lr = initial_lr / final_div_factor. Default: 1e4.
        three_phase (bool): Fall back to initial_lr symmetrically, then anneal to min_lr in
            a third phase (the paper's schedule). Default: False.
        last_epoch (int): The index of the last batch. Default: -1.
    """

    def __init__(self, optimizer, max_lr, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1):
        _check_optimizer("OneCycleLR", optimizer)
        self.optimizer = optimizer
        self.total_steps = _total_steps(total_steps, epochs, steps_per_epoch)
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be a float in [0, 1], got "
                             f"{pct_start!r}")
        self._schedule_phases = _one_cycle_phases(self.total_steps, pct_start, three_phase)
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _per_group("OneCycleLR: max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for top, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _use_beta1("OneCycleLR", optimizer)
            highs = _per_group("OneCycleLR: max_momentum", optimizer, max_momentum)
            lows = _per_group("OneCycleLR: base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                _init_momentum(optimizer, self.use_beta1, lows, highs)
        super().__init__(optimizer, last_epoch)

    def _anneal_func(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list:
        """The learning rates at batch ``last_epoch``; sets the momenta as a side effect
        when ``cycle_momentum``."""
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: step() called {step} times, past total_steps="
                             f"{self.total_steps}; the cycle is over (make total_steps, or "
                             f"epochs * steps_per_epoch, cover every step)")
        lrs, momenta = [], []
        for group in self.optimizer.param_groups:
            phase, pct = self._phase(step)
            lrs.append(self._anneal_func(group[phase["start_lr"]], group[phase["end_lr"]],
                                         pct))
            if self.cycle_momentum:
                momenta.append(self._anneal_func(group[phase["start_momentum"]],
                                                 group[phase["end_momentum"]], pct))
        if self.cycle_momentum:
            _set_momentum(self.optimizer, self.use_beta1, momenta)
        return lrs

    def _phase(self, step):
        """The phase ``step`` falls in, and the fraction of it done."""
        start = 0.0
        last = len(self._schedule_phases) - 1
        for i, phase in enumerate(self._schedule_phases):
            end = phase["end_step"]
            if step <= end or i == last:
                return phase, (step - start) / (end - start)
            start = end


def _total_steps(total_steps, epochs, steps_per_epoch) -> int:
    if total_steps is not None:
        if not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"OneCycleLR: total_steps must be a positive integer, got "
                             f"{total_steps!r}")
        return total_steps
    if epochs is None or steps_per_epoch is None:
        raise ValueError("OneCycleLR: give total_steps, or both epochs and steps_per_epoch")
    for name, value in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"OneCycleLR: {name} must be a positive integer, got "
                             f"{value!r}")
    return epochs * steps_per_epoch


def _one_cycle_phases(total, pct_start, three_phase) -> list:
    def phase(end_step, lr, momentum):
        return {"end_step": end_step, "start_lr": lr[0], "end_lr": lr[1],
                "start_momentum": momentum[0], "end_momentum": momentum[1]}

    up = float(pct_start * total) - 1
    if three_phase:
        return [phase(up, ("initial_lr", "max_lr"), ("max_momentum", "base_momentum")),
                phase(float(2 * pct_start * total) - 2, ("max_lr", "initial_lr"),
                      ("base_momentum", "max_momentum")),
                phase(total - 1, ("initial_lr", "min_lr"), ("max_momentum", "max_momentum"))]
    return [phase(up, ("initial_lr", "max_lr"), ("max_momentum", "base_momentum")),
            phase(total - 1, ("max_lr", "min_lr"), ("base_momentum", "max_momentum"))]


class ReduceLROnPlateau(LRScheduler):
    """Multiply the learning rate by ``factor`` once a metric has not improved for
    ``patience`` epochs; ``step(metrics)`` after each validation.

    Args:
        optimizer (Optimizer): Wrapped optimizer.
        mode (str): ``'min'`` (the metric should fall) or ``'max'``. Default: 'min'.
        factor (float): new_lr = lr * factor, below 1. Default: 0.1.
        patience (int): The number of epochs without improvement tolerated before
            reducing. Default: 10.
        threshold (float): The least change that counts as improvement. Default: 1e-4.
        threshold_mode (str): ``'rel'`` (best * (1 -/+ threshold)) or ``'abs'``
            (best -/+ threshold). Default: 'rel'.
        cooldown (int): Epochs after a reduction when bad epochs are not counted.
            Default: 0.
        min_lr (float or list): Lower bound on the learning rate, for all groups or per
            group. Default: 0.
        eps (float): A reduction smaller than eps is skipped. Default: 1e-8.
    """

    def __init__(self, optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr=0, eps: float = 1e-8):
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1.0, got {factor}")
        self.factor = factor
        _check_optimizer("ReduceLROnPlateau", optimizer)
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            self.default_min_lr = None
            self.min_lrs = _per_group("ReduceLROnPlateau: min_lr", optimizer, min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.last_epoch = 0
        self._last_lr = self._lrs()
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None) -> None:
        """Record ``metrics`` (a number or a one-element tensor) for the next epoch."""
        replay.outside_only("ReduceLROnPlateau.step()")
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs in the cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self._lrs()

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"ReduceLROnPlateau: the optimizer has {len(groups)} "
                                   f"parameter groups, min_lr has {len(self.min_lrs)} "
                                   f"(a group was added?); set min_lrs to one per group")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, low in zip(groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, low)
            if old - new > self.eps:
                group["lr"] = new

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a, best) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', "
                             f"got {threshold_mode!r}")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


class ChainedScheduler(LRScheduler):
    """Step every one of ``schedulers`` at each ``step()``, their changes composed
    (e.g. ConstantLR warm-up times ExponentialLR decay).

    Args:
        schedulers (sequence): The chained schedulers.
        optimizer (Optimizer, optional): Their optimizer. Default: the first one's.
    """

    def __init__(self, schedulers, optimizer=None):
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError("ChainedScheduler expects at least one scheduler")
        optimizer = optimizer or schedulers[0].optimizer
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(f"ChainedScheduler: scheduler {i} ({type(s).__name__}) "
                                f"has no optimizer")
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(f"ChainedScheduler: scheduler {i} is a ReduceLROnPlateau, "
                                 f"whose step() needs the metric; step it on its own")
            if s.optimizer is not optimizer:
                raise ValueError(f"ChainedScheduler: scheduler {i} ({type(s).__name__}) "
                                 f"belongs to another optimizer; build every scheduler on "
                                 f"the same one")
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = self._lrs()

    def step(self) -> None:
        replay.outside_only("ChainedScheduler.step()")
        for s in self._schedulers:
            s.step()
        self._last_lr = self._lrs()

    _part = SequentialLR._part
    _save_part = SequentialLR._save_part
    _load_part = SequentialLR._load_part

    def __repr__(self) -> str:
        inner = ", ".join(repr(s) for s in self._schedulers)
        return f"ChainedScheduler([{inner}])"


__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR",
           "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
           "CosineAnnealingWarmRestarts", "CyclicLR", "OneCycleLR", "ReduceLROnPlateau",
           "SequentialLR", "ChainedScheduler"]


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals())
