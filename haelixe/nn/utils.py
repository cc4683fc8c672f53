"""torch.nn.utils: gradient clipping, parameters as one vector and back, ``rnn``
(pad_sequence), ``stateless`` (functional_call), ``prune``, weight and spectral
normalization, ``skip_init``."""

from __future__ import annotations

import inspect
import math

from .. import creation
from ..autograd.mode import no_grad
from ..ops.indexing import cat, stack
from ..tensor import Tensor
from . import (  # (torch.nn.utils.parametrize...)  # noqa: F401
    parametrizations,
    parametrize,
    prune,
    stateless,
)
from . import rnn_utils as rnn  # (torch.nn.utils.rnn)  # noqa: F401
from .module import Module
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm


def _grads(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _buffers(grads) -> list:
    """The fewest tensors holding exactly ``grads``: each flat buffer that gradients
    tile (an optimizer's parameter group keeps its gradients as views into one), and any
    other gradient as itself. One reduction and one scale per buffer then replace a
    pair of ops per parameter."""
    groups, out = {}, []
    for g in grads:
        base = g._base
        if base is None or base.ndim != 1 or not base.is_contiguous() or \
                not g.is_contiguous():
            out.append(g)
        else:
            groups.setdefault(id(base), (base, []))[1].append(g)
    for base, members in groups.values():
        spans = sorted((g.offset, g.offset + g.numel()) for g in members)
        at = base.offset
        for start, stop in spans:
            if start != at:  # a gap (a parameter left out) or an overlap (one twice)
                out.extend(members)
                break
            at = stop
        else:
            out.extend([base] if at == base.offset + base.numel() else members)
    return out


def _norm(t, norm_type: float):
    """The p-norm of t's elements, accumulated in at least float32."""
    if t.dtype.name in ("bfloat16", "float16"):
        t = t.float()
    if norm_type == math.inf:
        return t.abs().amax()
    if norm_type == 2.0:
        return (t * t).sum().sqrt()
    if norm_type == 1.0:
        return t.abs().sum()
    return (t.abs() ** norm_type).sum() ** (1.0 / norm_type)


def _total_norm(buffers, norm_type: float):
    """The norm over all ``buffers`` together, on the first one's device."""
    dev = buffers[0].device
    norms = [_norm(g, norm_type).to(dev) for g in buffers]
    return norms[0] if len(norms) == 1 else _norm(stack(norms), norm_type)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale the gradients of ``parameters`` in place so that their joint
    ``norm_type``-norm is at most ``max_norm`` (by max_norm / (norm + 1e-6), as PyTorch).
    Returns the norm before clipping, a 0-d tensor; 0 when no parameter has a gradient.
    Everything stays on the gradients' device (no host round trip)."""
    norm_type = float(norm_type)
    grads = _grads(parameters)
    if not grads:
        return creation.tensor(0.0)
    with no_grad():
        buffers = _buffers(grads)
        total = _total_norm(buffers, norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise RuntimeError(
                f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                f"non-finite ({total.item()}), so it cannot be clipped; pass "
                f"error_if_nonfinite=False to scale by it anyway")
        coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
        for g in buffers:
            g.mul_(coef.to(g.device))
    dtypes = {g.dtype for g in grads}
    return total.to(dtypes.pop()) if len(dtypes) == 1 else total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient of ``parameters`` into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)


def _parameter_list(parameters, op) -> list:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"{op}: expected tensors, got {type(p).__name__}")
        if p.device != params[0].device:
            raise RuntimeError(f"{op}: parameters on {params[0].device.type} and "
                               f"{p.device.type}; move them to one device first")
    return params


def parameters_to_vector(parameters) -> Tensor:
    """parameters_to_vector(parameters) -> Tensor

    Every parameter flattened and joined into one 1-D tensor (a copy, in their order)."""
    params = _parameter_list(parameters, "parameters_to_vector")
    if not params:
        raise RuntimeError("parameters_to_vector: no parameters given")
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec, parameters) -> None:
    """vector_to_parameters(vec, parameters) -> None

    The reverse of parameters_to_vector: each parameter's ``.data`` becomes its slice of
    ``vec`` (a view of it, as in PyTorch: writing into ``vec`` changes them)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected vec to be a tensor, got "
                        f"{type(vec).__name__}")
    params = _parameter_list(parameters, "vector_to_parameters")
    needed = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.numel() != needed:
        raise RuntimeError(f"vector_to_parameters: vec has shape {vec.shape}; the "
                           f"parameters need a 1-D tensor of {needed} elements")
    at = 0
    for p in params:
        n = p.numel()
        p.data = vec[at:at + n].view(p.shape).data
        at += n


def skip_init(module_cls, *args, **kwargs):
    """``module_cls(*args, **kwargs)`` whose parameters the caller initializes itself.
    PyTorch leaves them as uninitialized memory; Haelixe has no memory-less device to
    build on, so they hold the class's own initial values (any values are allowed)."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    device = kwargs.pop("device", None)
    module = module_cls(*args, **kwargs)
    return module if device is None else module.to(device)


__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "parametrizations",
           "parametrize", "prune", "remove_spectral_norm", "remove_weight_norm", "rnn",
           "skip_init", "spectral_norm", "stateless", "vector_to_parameters", "weight_norm"]
