"""SGD with momentum, Nesterov and (coupled, L2) weight decay, as PyTorch defines it."""

from __future__ import annotations

from .. import creation
from ..memory import tagged
from .optimizer import Optimizer


class SGD(Optimizer):
    def __init__(self, params, lr, momentum=0.0, nesterov=False, weight_decay=0.0):
        if nesterov and momentum <= 0:
            raise ValueError("SGD: nesterov momentum needs momentum > 0")
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov,
                                      weight_decay=weight_decay))

    def _init_state(self):
        self.state = []
        for group, fgs in zip(self.param_groups, self.flat_groups):
            per = []
            for fg in fgs:
                buf = None
                if group["momentum"]:
                    with tagged("optimizer_state"):
                        buf = creation.zeros(fg.data.numel(), dtype=fg.dtype, device=fg.device)
                per.append(buf)
            self.state.append(per)

    def _update(self, group, fg, index):
        buf = self.state[self.param_groups.index(group)][index]
        fg.data._be.sgd_step(fg.data._data, fg.grad._data,
                             None if buf is None else buf._data, group["lr"],
                             group["momentum"], group["nesterov"], group["weight_decay"])
        fg.data._storage.version += 1

    def _state_tensors(self) -> dict:
        return {f"group{gi}.flat{fi}.momentum": b for gi, per in enumerate(self.state)
                for fi, b in enumerate(per) if b is not None}
