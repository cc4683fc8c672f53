"""``torch.optim.swa_utils``: weight averaging (SWA, EMA) of a model over training.

    swa_model = AveragedModel(model)                 # a copy whose weights are averaged
    swa_scheduler = SWALR(optimizer, swa_lr=0.05)
    for epoch in range(epochs):
        train_one_epoch(model, optimizer)
        if epoch >= swa_start:
            swa_model.update_parameters(model)
            swa_scheduler.step()
    update_bn(loader, swa_model)                     # batch-norm statistics for the average

The update rules are PyTorch's, in the same order of operations, so the averages agree
with it to rounding.
"""

from __future__ import annotations

import itertools
import math
from copy import deepcopy

from .. import creation
from ..autograd.mode import no_grad
from ..nn.module import Module
from ..nn.normalization import _BatchNorm
from ..tensor import Tensor
from .lr_scheduler import LRScheduler

__all__ = ["SWALR", "AveragedModel", "get_ema_avg_fn", "get_ema_multi_avg_fn",
           "get_swa_avg_fn", "get_swa_multi_avg_fn", "update_bn"]


def _check_decay(decay) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         f"[0,1] range.")


def get_ema_multi_avg_fn(decay=0.999):
    """An update of a list of averages in place: ``ema = decay * ema + (1 - decay) * p``
    (a lerp towards the model's values, for floating tensors)."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        if ema_param_list[0].dtype.is_floating_point:
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                p_ema.lerp_(p_model, 1 - decay)
        else:
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """An update of a list of running means in place, the n-th average taking the new
    value with weight 1 / (n + 1)."""

    @no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        if averaged_param_list[0].dtype.is_floating_point:
            weight = 1 / (num_averaged + 1)
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                w = weight.to(p_avg.dtype) if isinstance(weight, Tensor) else weight
                p_avg.lerp_(p_model, w)
        else:  # (PyTorch's in-place update refuses integers too)
            raise RuntimeError(
                f"get_swa_multi_avg_fn: cannot average {averaged_param_list[0].dtype.name} "
                f"tensors in place (with use_buffers=True, a batch norm's "
                f"num_batches_tracked is one); use get_swa_avg_fn or use_buffers=False")

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """``avg_fn(ema, p, n) = decay * ema + (1 - decay) * p`` (one tensor at a time)."""
    _check_decay(decay)

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """``avg_fn(avg, p, n) = avg + (p - avg) / (n + 1)``, the running mean."""

    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def _deep_copy(model: Module) -> Module:
    """``copy.deepcopy(model)``, its tensors copied by ``clone`` (a GPU tensor's
    memory does not go through the pickle protocol deepcopy uses)."""
    memo = {}
    for m in model.modules():
        for t in [*m._buffers.values(), *m.__dict__.values()]:
            if isinstance(t, Tensor) and id(t) not in memo:
                memo[id(t)] = t.detach().clone()
    return deepcopy(model, memo)


class AveragedModel(Module):
    """A copy of ``model`` (on ``device`` if given) whose parameters
    ``update_parameters(model)`` averages: the running mean by default, or ``avg_fn``
    (one tensor at a time) or ``multi_avg_fn`` (lists of tensors, in place).
    ``use_buffers`` averages the buffers too; otherwise they are copied from the
    model. ``n_averaged`` (a buffer) counts the updates."""

    def __init__(self, model: Module, device=None, avg_fn=None, multi_avg_fn=None,
                 use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("AveragedModel: only one of avg_fn and multi_avg_fn should be "
                             "provided")
        self.module = _deep_copy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged",
                             creation.tensor(0, dtype="int64", device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _averaged(self, model: Module):
        if self.use_buffers:
            return (itertools.chain(self.module.parameters(), self.module.buffers()),
                    itertools.chain(model.parameters(), model.buffers()))
        return self.parameters(), model.parameters()

    def update_parameters(self, model: Module) -> None:
        ours, theirs = self._averaged(model)
        pairs = []
        first = int(self.n_averaged.item()) == 0
        with no_grad():
            for p_avg, p_model in zip(ours, theirs):
                p_model = p_model.detach().to(p_avg.device)
                pairs.append((p_avg.detach(), p_model))
                if first:
                    p_avg.detach().copy_(p_model)
            if not first:
                self._average(pairs)
            if not self.use_buffers:  # the buffers follow the model's
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b_model.detach().to(b_avg.device))
            self.n_averaged += 1

    def _average(self, pairs: list) -> None:
        if self.avg_fn is not None:
            for p_avg, p_model in pairs:
                p_avg.copy_(self.avg_fn(p_avg, p_model, self.n_averaged.to(p_avg.device)))
            return
        groups: dict = {}  # (device, dtype) -> (averages, model values), as PyTorch groups
        for p_avg, p_model in pairs:
            group = groups.setdefault((p_avg.device, p_avg.dtype), ([], []))
            group[0].append(p_avg)
            group[1].append(p_model)
        for (device, _), (avgs, values) in groups.items():
            n = self.n_averaged.to(device)
            if self.multi_avg_fn is not None:
                self.multi_avg_fn(avgs, values, n)
            elif device.type == "gpu":  # (PyTorch's foreach path on an accelerator)
                get_swa_multi_avg_fn()(avgs, values, n)
            else:
                avg_fn = get_swa_avg_fn()
                for p_avg, p_model in zip(avgs, values):
                    p_avg.copy_(avg_fn(p_avg, p_model, n))


@no_grad()
def update_bn(loader, model: Module, device=None) -> None:
    """Recompute the running statistics of every batch norm in ``model`` with one pass
    over ``loader`` (batches, or tuples whose first item is the input), as cumulative
    averages; the model's train/eval mode and momenta are left as they were."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    try:
        for input in loader:  # noqa: A001 (PyTorch's name)
            if isinstance(input, (list, tuple)):
                input = input[0]  # noqa: A001
            if device is not None:
                input = input.to(device)  # noqa: A001
            model(input)
    finally:
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate to ``swa_lr`` over ``anneal_epochs`` steps
    ("cos" or "linear"), then holds it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        groups = optimizer.param_groups
        if isinstance(swa_lr, (list, tuple)):
            if len(swa_lr) != len(groups):
                raise ValueError(f"swa_lr must have the same length as "
                                 f"optimizer.param_groups. swa_lr has {len(swa_lr)} values, "
                                 f"param_groups has {len(groups)}.")
            swa_lrs = list(swa_lr)
        else:
            swa_lrs = [swa_lr] * len(groups)
        for lr, group in zip(swa_lrs, groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        # the rate the annealing started from, recovered from the current one
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else \
            self._linear_anneal

    def get_lr(self) -> list:
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / span)))
        alpha = self.anneal_func(max(0, min(1, step / span)))
        groups = self.optimizer.param_groups
        starts = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, starts)]

    def state_dict(self) -> dict:
        """Every attribute but the optimizer and the annealing function (restored from
        its name)."""
        return {k: v for k, v in self.__dict__.items()
                if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals())
