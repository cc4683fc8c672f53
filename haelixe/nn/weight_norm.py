"""Weight normalization (Salimans and Kingma): a weight written as a magnitude ``g`` times
a direction ``v / ||v||``, trained apart. ``nn.utils.parametrizations.weight_norm``
registers it as a parametrization (``parametrizations.weight.original0`` is g,
``original1`` is v); the older ``nn.utils.weight_norm`` keeps ``weight_g`` and
``weight_v`` on the module and recomputes ``weight`` before each forward."""

from __future__ import annotations

import warnings

from ..autograd.mode import no_grad
from ..ops.linalg_norms import vector_norm
from .module import Module, Parameter
from .parametrize import register_parametrization

__all__ = ["norm_except_dim", "remove_weight_norm", "weight_norm", "weight_norm_parametrized"]


def norm_except_dim(v, pow: float = 2, dim: int = 0):  # noqa: A002
    """The ``pow``-norm of ``v`` over every dim but ``dim``, kept as size-1 dims; over all
    of ``v`` where ``dim`` is -1 (PyTorch's convention, also for ``dim=None``)."""
    if dim is None or dim == -1:
        return vector_norm(v, pow)
    d = dim % v.ndim
    return vector_norm(v, pow, dim=tuple(i for i in range(v.ndim) if i != d), keepdim=True)


def _weight_of(g, v, dim):
    return v * (g / norm_except_dim(v, 2, dim))


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_of(weight_g, weight_v, self.dim)

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm_parametrized(module: Module, name: str = "weight", dim: int | None = 0):
    """``nn.utils.parametrizations.weight_norm``: ``module.<name>`` becomes
    g * v / ||v|| over every dim but ``dim`` (``None``: over all of it)."""
    return register_parametrization(module, name, _WeightNorm(dim), unsafe=True)


class _WeightNormHook:
    """The older form's forward pre-hook: ``<name>`` from ``<name>_g`` and ``<name>_v``."""

    def __init__(self, name: str, dim: int):
        self.name, self.dim = name, dim

    def compute(self, module):
        return _weight_of(getattr(module, self.name + "_g"), getattr(module, self.name + "_v"),
                          self.dim)

    def __call__(self, module, args):
        object.__setattr__(module, self.name, self.compute(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """``nn.utils.weight_norm`` (deprecated in PyTorch for the parametrization):
    ``<name>_g`` and ``<name>_v`` replace the parameter ``<name>``."""
    warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                  "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning,
                  stacklevel=2)
    hooks = module._hooks.forward_pre.values() if module._hooks is not None else ()
    if any(isinstance(h, _WeightNormHook) and h.name == name for h in hooks):
        raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter "
                           f"{name}")
    if name not in module._parameters:
        raise ValueError(f"weight_norm: {type(module).__name__} has no parameter {name!r}")
    dim = -1 if dim is None else dim
    weight = module._parameters[name]
    del module._parameters[name]
    with no_grad():
        setattr(module, name + "_g", Parameter(norm_except_dim(weight, 2, dim)))
        setattr(module, name + "_v", Parameter(weight.detach()))
    hook = _WeightNormHook(name, dim)
    object.__setattr__(module, name, hook.compute(module))
    module.register_forward_pre_hook(hook)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo :func:`weight_norm`: ``<name>`` is one parameter again, of the same value."""
    hooks = module._hooks.forward_pre.items() if module._hooks is not None else ()
    for key, hook in list(hooks):
        if isinstance(hook, _WeightNormHook) and hook.name == name:
            with no_grad():
                weight = hook.compute(module).detach()
            del module._hooks.forward_pre[key]
            del module._parameters[name + "_g"], module._parameters[name + "_v"]
            module.__dict__.pop(name, None)
            setattr(module, name, Parameter(weight))
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
