"""Learning-rate schedules."""

from __future__ import annotations

import math

from .. import capture_replay as replay


class CosineAnnealing:
    """lr(step) = lr_min + 0.5 * (lr_max - lr_min) * (1 + cos(pi * step / total)).

    The 0.5 is applied once (a common slip applies it twice). With ``warmup`` > 0 the
    first ``warmup`` steps rise linearly to lr_max and the cosine spans the rest. Call
    ``step()`` once per scheduling unit (a step or an epoch); the optimizer's lr is set
    to ``lr(0)`` at construction.
    """

    def __init__(self, optimizer, total: int, lr_max: float, lr_min: float = 0.0,
                 warmup: int = 0):
        if total <= 0 or warmup < 0 or warmup >= total:
            raise ValueError(f"CosineAnnealing: need 0 <= warmup < total, got warmup={warmup}"
                             f", total={total}")
        self.optimizer, self.total = optimizer, total
        self.lr_max, self.lr_min, self.warmup = lr_max, lr_min, warmup
        self.last_step = 0
        optimizer.set_lr(self.lr(0))

    def lr(self, step: int) -> float:
        if step < self.warmup:
            return self.lr_max * (step + 1) / self.warmup
        t = min(step - self.warmup, self.total - self.warmup) / (self.total - self.warmup)
        return self.lr_min + 0.5 * (self.lr_max - self.lr_min) * (1.0 + math.cos(math.pi * t))

    def step(self) -> float:
        replay.outside_only("CosineAnnealing.step()")
        self.last_step += 1
        lr = self.lr(self.last_step)
        self.optimizer.set_lr(lr)
        return lr

    def get_last_lr(self) -> float:
        return self.lr(self.last_step)
