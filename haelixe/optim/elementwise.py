"""Base of the optimizers whose update is written once over backend-generic elementwise
ops (RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam): the shared start of the update
(maximize, weight decay, low-precision working copies) and the argument checks; their
state dicts are Optimizer's, in PyTorch's per-parameter layout."""

from __future__ import annotations

from .optimizer import Optimizer, working_copies, write_back


class ElementwiseOptimizer(Optimizer):
    """An optimizer whose per-element update is composed of tensor ops (any backend).

    Subclasses name their flat state (``_state_names(group)``, PyTorch's names), give the
    value a fresh entry starts at (``_initial``) and update one run of parameters in
    ``_step_elements``.
    """

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
