"""Spectral normalization (Miyato et al.): a weight divided by its largest singular
value, estimated by power iteration with vectors ``u`` and ``v`` kept between calls.

``nn.utils.spectral_norm`` (the older hook form) keeps ``weight_orig`` and the buffers
``weight_u`` / ``weight_v`` on the module and recomputes ``weight`` before each forward;
``nn.utils.parametrizations.spectral_norm`` registers it as a parametrization
(``parametrizations.weight.original``, ``parametrizations.weight.0._u`` / ``_v``). As in
PyTorch, the iteration runs in training mode only, under no_grad, and sigma is
``u . (W v)`` with u and v held fixed, so the gradient flows through W alone. The two
forms update u and v in PyTorch's two orders (v first in the hook form, u first in the
parametrization).
"""

from __future__ import annotations

from ..autograd.mode import no_grad
from ..tensor import Tensor
from .functional import normalize
from .module import Module, Parameter
from .parametrize import register_parametrization

__all__ = ["remove_spectral_norm", "spectral_norm", "spectral_norm_parametrized"]

_TRANSPOSED = ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")


def _default_dim(module: Module, dim):
    """Output channels: dim 1 of a transposed convolution's weight, else dim 0."""
    if dim is not None:
        return dim
    return 1 if any(c.__name__ in _TRANSPOSED for c in type(module).__mro__) else 0


def _as_matrix(weight: Tensor, dim: int) -> Tensor:
    """The weight as (size of dim, everything else)."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.reshape(weight.shape[0], -1)


def _check_iterations(n_power_iterations) -> None:
    if n_power_iterations <= 0:
        raise ValueError(f"Expected n_power_iterations to be positive, but got "
                         f"n_power_iterations={n_power_iterations}")


def _unit_normal(n: int, like: Tensor, eps: float) -> Tensor:
    return normalize(like.new_empty(n).normal_(0, 1), dim=0, eps=eps)


class SpectralNorm:
    """The hook form's forward pre-hook: ``<name>`` = ``<name>_orig`` / sigma."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        _check_iterations(n_power_iterations)
        self.name, self.dim = name, dim
        self.n_power_iterations, self.eps = n_power_iterations, eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        return _as_matrix(weight, self.dim)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(mat.t() @ u, dim=0, eps=self.eps))
                    u.copy_(normalize(mat @ v, dim=0, eps=self.eps))
                # (copies: the buffers change in place at the next call, the graph
                # must keep the values it used)
                u, v = u.clone(), v.clone()
        sigma = u @ (mat @ v)
        return weight / sigma

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        module.__dict__.pop(self.name, None)
        for suffix in ("_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        object.__setattr__(module, self.name,
                           self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int,
              eps: float) -> SpectralNorm:
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters.get(name)
        if weight is None:
            raise ValueError(f"spectral_norm: {type(module).__name__} has no parameter "
                             f"{name!r}" + (" (it is None)" if name in module._parameters
                                            else ""))
        _check_dim(weight, dim, "spectral_norm")
        with no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u, v = _unit_normal(h, weight, eps), _unit_normal(w, weight, eps)
        del module._parameters[name]
        module.register_parameter(name + "_orig", weight)
        object.__setattr__(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def _check_dim(weight: Tensor, dim: int, op: str) -> None:
    if weight.ndim == 0 or not -weight.ndim <= dim < weight.ndim:
        raise IndexError(f"{op}: dim {dim} is out of range for a weight of shape "
                         f"{tuple(weight.shape)} (expected in [{-max(weight.ndim, 1)}, "
                         f"{max(weight.ndim, 1) - 1}])")


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """``nn.utils.spectral_norm``: ``module.<name>`` divided by its spectral norm before
    each forward; ``dim`` is the output dim (default: 0, or 1 for ConvTranspose)."""
    SpectralNorm.apply(module, name, n_power_iterations, _default_dim(module, dim), eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Undo :func:`spectral_norm`: ``<name>`` is one parameter again, holding the
    normalized weight (from the current u and v, without a new iteration)."""
    hooks = module._hooks.forward_pre if module._hooks is not None else {}
    for key, hook in list(hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del hooks[key]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")


class _SpectralNorm(Module):
    """The parametrization: ``weight / sigma`` (a 1-D weight: ``weight / ||weight||``)."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        _check_iterations(n_power_iterations)
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = _as_matrix(weight, self.dim)
            h, w = mat.shape
            with no_grad():
                self.register_buffer("_u", _unit_normal(h, mat, eps))
                self.register_buffer("_v", _unit_normal(w, mat, eps))
            self._power_method(mat, 15)  # (a good estimate from the start)

    def _power_method(self, mat: Tensor, iterations: int) -> None:
        with no_grad():
            for _ in range(iterations):
                self._u.copy_(normalize(mat @ self._v, dim=0, eps=self.eps))
                self._v.copy_(normalize(mat.t() @ self._u, dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        mat = _as_matrix(weight, self.dim)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        return weight / (u @ (mat @ v))

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm_parametrized(module: Module, name: str = "weight",
                               n_power_iterations: int = 1, eps: float = 1e-12,
                               dim: int | None = None) -> Module:
    """``nn.utils.parametrizations.spectral_norm``: ``module.<name>`` read as itself
    divided by its spectral norm (estimated anew at each read in training mode)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    register_parametrization(module, name, _SpectralNorm(
        weight, n_power_iterations, _default_dim(module, dim), eps))
    return module
