"""Dynamic loss scaling for float16 training: ``hx.amp.GradScaler``, PyTorch's API and
semantics.

float16 has a narrow range (smallest normal 6e-5): small gradients underflow to zero.
The scaler multiplies the loss by a large factor before backward, so gradients are
computed scaled up, then divides them back before the optimizer step. When a gradient
came out inf or NaN (the scale was too large) the step is skipped and the scale backs
off; after ``growth_interval`` clean steps it grows again::

    scaler = hx.amp.GradScaler()
    with hx.autocast(dtype=hx.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)        # unscales, skips the step on inf / NaN
    scaler.update()
    opt.zero_grad()

The scale lives on the host (a Python float: multiplying by it costs no upload); the
inf / NaN check stays on the gradients' device until ``step`` reads one flag per device.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GradScaler"]

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


def _getter_setter(attr: str, cast):
    """PyTorch's get_x() / set_x(value) pair for the attribute ``attr``."""
    def get(self):
        return getattr(self, attr)

    def set_(self, value) -> None:
        setattr(self, attr, cast(value))

    return get, set_


class GradScaler:
    """``scale(outputs)``, ``unscale_(optimizer)``, ``step(optimizer)``,
    ``update(new_scale=None)``, ``get_scale()``, ``state_dict()`` / ``load_state_dict``,
    as ``torch.amp.GradScaler``. ``device`` is accepted for PyTorch compatibility: the
    scaler works on whatever devices the gradients live on."""

    def __init__(self, device=None, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True):
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got "
                             f"{backoff_factor}")
        if int(growth_interval) <= 0:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got "
                             f"{growth_interval}")
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"stage", "found_inf": [flags]}

    # -- the training step ---------------------------------------------------------------
    def scale(self, outputs):
        """``outputs`` (a tensor, or nested lists / tuples of tensors) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if not hasattr(outputs, "dtype"):
            raise TypeError(f"GradScaler.scale: expected a tensor or a list / tuple of "
                            f"tensors, got {type(outputs).__name__}")
        return outputs * self._scale

    def _state(self, optimizer) -> dict:
        return self._per_optimizer.setdefault(id(optimizer),
                                              {"stage": _READY, "found_inf": []})

    def unscale_(self, optimizer) -> None:
        """Divide the gradients of ``optimizer``'s parameters by the scale, in place, and
        note whether any of them holds an inf or NaN."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if state["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        grads = [p.grad for g in optimizer.param_groups for p in g["params"]
                 if p.grad is not None]
        if any(g.dtype.name == "float16" for g in grads):
            raise ValueError("Attempting to unscale FP16 gradients: keep the parameters in "
                             "float32 under hx.autocast(dtype=hx.float16).")
        state["found_inf"] = _unscale_and_check(grads, 1.0 / self._scale)
        state["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` unless a gradient was inf or NaN (then the
        step is skipped and None returned). Unscales first if ``unscale_`` was not called."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        result = None
        if not _found(state["found_inf"]):
            result = optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None) -> None:
        """Back off after a step that found inf / NaN, grow after ``growth_interval``
        clean ones; or set ``new_scale`` (a float or a one-element tensor)."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if hasattr(new_scale, "item") else new_scale)
        else:
            flags = [f for s in self._per_optimizer.values() for f in s["found_inf"]]
            assert self._per_optimizer, "No inf checks were recorded prior to update."
            if _found(flags):
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    grown = self._scale * self._growth_factor
                    if grown != float("inf"):
                        self._scale = grown
                    self._growth_tracker = 0
        self._per_optimizer = {}

    # -- inspection and state ------------------------------------------------------------
    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    get_growth_factor, set_growth_factor = _getter_setter("_growth_factor", float)
    get_backoff_factor, set_backoff_factor = _getter_setter("_backoff_factor", float)
    get_growth_interval, set_growth_interval = _getter_setter("_growth_interval", int)

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was "
                               "saved from a disabled instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])

    def __repr__(self) -> str:
        return (f"GradScaler(scale={self.get_scale():g}, growth_factor={self._growth_factor:g},"
                f" backoff_factor={self._backoff_factor:g}, "
                f"growth_interval={self._growth_interval}, enabled={self._enabled})")


def _unscale_and_check(grads, inv_scale: float) -> list:
    """Multiply every gradient by ``inv_scale`` in place; one 0-d float32 flag per device
    that is non-zero (or NaN) when some gradient held an inf or NaN. A backend with an
    ``unscale_and_check`` kernel does both in one pass; elsewhere ``(g - g).sum()`` is 0
    for finite gradients and NaN otherwise."""
    from .autograd.mode import no_grad
    from .creation import zeros

    flags = {}
    with no_grad():
        for g in grads:
            key = g.device.type
            if key not in flags:
                flags[key] = zeros((), dtype="float32", device=g.device)
            flag = flags[key]
            fused = getattr(g._be, "unscale_and_check", None)
            if fused is not None and fused(g._data, inv_scale, flag._data):
                g._storage.version += 1
                continue
            with np.errstate(invalid="ignore"):  # inf - inf is the NaN looked for
                flags[key] = flag + (g - g).sum().float()
            g.mul_(inv_scale)
    return list(flags.values())


def _found(flags) -> bool:
    """Whether any flag says an inf / NaN was seen (reads one value per device)."""
    return any(f.item() != 0.0 for f in flags)  # NaN != 0 too
