"""AdamW with decoupled weight decay, bias correction and optional F32 master weights."""

from __future__ import annotations

from .. import creation
from ..memory import tagged
from .optimizer import Optimizer


class AdamW(Optimizer):
    """p <- p - lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * p), the decay
    decoupled from the gradient (Loshchilov & Hutter) and applied as p *= 1 - lr * wd.

    master_weights=True keeps an F32 copy of low-precision (BF16/F16) parameters: the
    moments and the update live in F32 and the parameter receives the rounded result, so
    updates smaller than half a BF16 ulp accumulate instead of vanishing.
    stochastic_rounding=True rounds that write-back stochastically instead.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01,
                 master_weights=False, stochastic_rounding=False):
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"AdamW: invalid hyperparameters lr={lr}, betas={betas}, "
                             f"eps={eps}")
        self.master_weights = master_weights
        self.stochastic_rounding = stochastic_rounding
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))

    def _init_state(self):
        self.state = []
        for fgs in self.flat_groups:
            per = []
            for fg in fgs:
                low = fg.dtype.name in ("bfloat16", "float16")
                use_master = self.master_weights and low
                with tagged("optimizer_state"):
                    st = {
                        "m": creation.zeros(fg.data.numel(), dtype="float32", device=fg.device),
                        "v": creation.zeros(fg.data.numel(), dtype="float32", device=fg.device),
                        "master": fg.data.to("float32", copy=True) if use_master else None,
                    }
                per.append(st)
            self.state.append(per)

    def _update(self, group, fg, index):
        st = self.state[self.param_groups.index(group)][index]
        b1, b2 = group["betas"]
        be = fg.data._be
        master = st["master"]
        if fg.dtype.name == "float32":
            be.adamw_step(fg.data._data, fg.grad._data, st["m"]._data, st["v"]._data,
                          group["lr"], b1, b2, group["eps"], group["weight_decay"],
                          self.step_count)
            fg.data._storage.version += 1
            return
        # low precision: compute in F32 (on the master copy when there is one)
        g32 = fg.grad.to("float32")
        p32 = master if master is not None else fg.data.to("float32")
        be.adamw_step(p32._data, g32._data, st["m"]._data, st["v"]._data, group["lr"], b1,
                      b2, group["eps"], group["weight_decay"], self.step_count)
        from ..amp import round_to

        fg.data.copy_(round_to(p32, fg.dtype, stochastic=self.stochastic_rounding))

    def _state_tensors(self) -> dict:
        out = {}
        for gi, per in enumerate(self.state):
            for fi, st in enumerate(per):
                for k, t in st.items():
                    if t is not None:
                        out[f"group{gi}.flat{fi}.{k}"] = t
        return out
