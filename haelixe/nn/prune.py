"""``torch.nn.utils.prune``: zero out parts of a module's tensor through a mask.

    prune.l1_unstructured(layer, "weight", amount=0.3)   # the 30% smallest |w| become 0
    layer.weight_orig, layer.weight_mask                 # the parameter and the mask
    layer.weight                                         # weight_orig * weight_mask
    prune.remove(layer, "weight")                        # bake the mask in: one parameter

As in PyTorch, the parameter moves to ``<name>_orig`` (it keeps training), the mask is
the buffer ``<name>_mask``, and a forward pre-hook (the pruning method itself) sets
``module.<name> = <name>_orig * <name>_mask`` before each call. Pruning the same tensor
again gathers the methods into a :class:`PruningContainer`, each new one acting on what
the earlier ones left. The masks agree with PyTorch's, ties included (see
prune_select); the random methods draw from Haelixe's generator.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import numpy as np

from .. import creation
from ..tensor import Tensor
from .prune_select import topk_positions

__all__ = ["BasePruningMethod", "CustomFromMask", "Identity", "L1Unstructured",
           "LnStructured", "PruningContainer", "RandomStructured", "RandomUnstructured",
           "custom_from_mask", "global_unstructured", "identity", "is_pruned",
           "l1_unstructured", "ln_structured", "random_structured", "random_unstructured",
           "remove"]


def _pre_hooks(module):
    return module._hooks.forward_pre if module._hooks is not None else {}


def _host(t) -> np.ndarray:
    return t.detach().cpu().numpy() if isinstance(t, Tensor) else np.asarray(t)


def _like(values: np.ndarray, t: Tensor, dtype=None) -> Tensor:
    """``values`` as a tensor on ``t``'s device, of ``dtype`` (else ``t``'s)."""
    return creation.tensor(np.ascontiguousarray(values), dtype=dtype or t.dtype,
                           device=t.device)


class BasePruningMethod(ABC):
    """A pruning rule: ``compute_mask(t, default_mask)`` says which entries of ``t``
    to keep (1) and zero (0). ``PRUNING_TYPE`` ("unstructured", "structured" or
    "global") tells a :class:`PruningContainer` what the method may act on when it
    follows other methods. ``Method.apply(module, name, ...)`` prunes
    ``module.<name>``; the instance is then that module's forward pre-hook."""

    _tensor_name: str | None = None

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The mask for ``t``, given the mask ``default_mask`` already on it."""

    def apply_mask(self, module):
        """``<name>_orig`` times ``<name>_mask`` of ``module``."""
        if self._tensor_name is None:
            raise RuntimeError(f"Module {module} has to be pruned before its mask can be "
                               f"applied")
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)``, ranking the entries by
        ``importance_scores`` (default: the tensor itself). Returns the method now
        hooked on the module (a PruningContainer when the tensor was pruned before)."""
        old_key, old = _find_method(module, name)
        method = cls(*args, **kwargs)
        method._tensor_name = name
        container = None
        if isinstance(old, PruningContainer):
            container, before = old, old._pruning_methods
            old.add_pruning_method(method)
            method = old
        elif old is not None:
            container_of_two = PruningContainer(old)
            container_of_two.add_pruning_method(method)
            method = container_of_two
        orig = getattr(module, name)
        if importance_scores is not None:
            if tuple(importance_scores.shape) != tuple(orig.shape):
                raise ValueError(f"prune: importance_scores should have the same shape as "
                                 f"parameter {name} of {module}, got "
                                 f"{tuple(importance_scores.shape)} vs {tuple(orig.shape)}")
        else:
            importance_scores = orig
        first = old is None
        if first:
            if name not in module._parameters:
                raise TypeError(f"prune: {name!r} of {type(module).__name__} is not a "
                                f"parameter (a {type(orig).__name__}); only parameters can "
                                f"be pruned")
            default_mask = creation.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            if not isinstance(mask, Tensor) or tuple(mask.shape) != tuple(orig.shape):
                raise ValueError(f"prune: {type(method).__name__}.compute_mask returned "
                                 f"{_described(mask)} for a tensor of shape "
                                 f"{tuple(orig.shape)}; it must return a mask of that shape")
        except Exception:
            if container is not None:
                container._pruning_methods = before
            raise
        if old_key is not None:
            del module._hooks.forward_pre[old_key]
        if first:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
        module.register_buffer(name + "_mask", mask)
        setattr(module, name, method.apply_mask(module))
        module.register_forward_pre_hook(method)
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` times the mask this method computes for it (from ``importance_scores``
        where given)."""
        if importance_scores is not None:
            if tuple(importance_scores.shape) != tuple(t.shape):
                raise ValueError(f"prune: importance_scores should have the same shape as "
                                 f"the tensor, got {tuple(importance_scores.shape)} vs "
                                 f"{tuple(t.shape)}")
        else:
            importance_scores = t
        default_mask = default_mask if default_mask is not None else creation.ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module) -> None:
        """Make the pruning permanent: ``<name>`` becomes the parameter again, holding
        ``<name>_orig * <name>_mask``; the mask and the original go."""
        if self._tensor_name is None:
            raise RuntimeError(f"Module {module} has to be pruned before pruning can be "
                               f"removed")
        name = self._tensor_name
        weight = self.apply_mask(module)
        module.__dict__.pop(name, None)
        orig = module._parameters[name + "_orig"]
        orig.data = weight.data
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


def _described(mask) -> str:
    if isinstance(mask, Tensor):
        return f"a tensor of shape {tuple(mask.shape)}"
    return f"a {type(mask).__name__}"


def _find_method(module, name):
    """(hook key, pruning method) already on ``module.<name>``, or (None, None)."""
    found = [(k, h) for k, h in _pre_hooks(module).items()
             if isinstance(h, BasePruningMethod) and h._tensor_name == name]
    if len(found) > 1:
        raise RuntimeError(f"Avoid adding multiple pruning hooks to the same tensor {name} "
                           f"of module {module}. Use a PruningContainer.")
    return found[0] if found else (None, None)


class PruningContainer(BasePruningMethod):
    """The methods applied to one tensor, in order; its mask is the last method's,
    computed on the entries (or channels) the earlier ones kept."""

    def __init__(self, *args):
        self._pruning_methods: tuple = ()
        if len(args) == 1 and not isinstance(args[0], Iterable):
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            methods = args[0] if len(args) == 1 else args
            for method in methods:
                if self._tensor_name is None and isinstance(method, BasePruningMethod):
                    self._tensor_name = method._tensor_name
                self.add_pruning_method(method)

    def add_pruning_method(self, method) -> None:
        """Append ``method`` (it must act on the same tensor name)."""
        if method is None:
            return
        if not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if self._tensor_name != method._tensor_name:
            raise ValueError(f"Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer {self}. Found "
                             f"'{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """The last method's mask, computed on the part of ``t`` that ``default_mask``
        still keeps: the kept entries (unstructured), the channels with any kept
        entry (structured), or all of it (global)."""
        if not self._pruning_methods:
            raise RuntimeError("PruningContainer.compute_mask: the container holds no "
                               "pruning method")
        method = self._pruning_methods[-1]
        mask = _host(default_mask)
        kind = getattr(method, "PRUNING_TYPE", None)
        if kind == "unstructured":
            part = mask == 1
        elif kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to '
                                     'have the attribute `dim` defined.')
            ndim = mask.ndim
            dim = method.dim + ndim if method.dim < 0 else method.dim
            if not 0 <= dim < ndim:
                raise IndexError(f"Index is out of bounds for tensor with dimensions {ndim}")
            others = tuple(d for d in range(ndim) if d != dim)
            part = [slice(None)] * ndim
            part[dim] = np.flatnonzero(mask.sum(axis=others) != 0)
            part = tuple(part)
        elif kind == "global":
            part = (Ellipsis,)
        else:
            raise ValueError(f"Unrecognized PRUNING_TYPE {kind}")
        values = _host(t)
        partial = method.compute_mask(_like(values[part], t),
                                      default_mask=_like(mask[part], default_mask))
        combined = mask.astype(values.dtype)
        combined[part] = _host(partial)
        return _like(combined, t)


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (a tensor made prunable, e.g. to be pruned
    later by hand through its mask)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _check_amount(amount) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or \
            (not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or "
                         f"a non-negative integer")


def _count_to_prune(amount, size: int) -> int:
    """An integer amount is a count; a fraction rounds half to even, as Python's round."""
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ValueError(f"amount={amount} should be smaller than the number of "
                             f"parameters to prune={size}")
        return int(amount)
    return int(round(float(amount) * size))


def _check_structured(t, dim: int) -> None:
    if t.ndim <= 1:
        raise ValueError(f"Structured pruning can only be applied to multidimensional "
                         f"tensors. Found tensor of shape {tuple(t.shape)} with {t.ndim} "
                         f"dims")
    if not -t.ndim <= dim < t.ndim:
        raise IndexError(f"Invalid index {dim} for tensor of size {tuple(t.shape)}")


def _channel_mask(t: Tensor, dim: int, keep: np.ndarray, default_mask) -> Tensor:
    """Ones on the kept slices of ``dim``, zeros elsewhere, times ``default_mask``."""
    mask = np.zeros(tuple(t.shape), dtype=_host(t).dtype)
    index = [slice(None)] * t.ndim
    index[dim] = keep
    mask[tuple(index)] = 1
    return _like(mask * _host(default_mask).astype(mask.dtype), t)


class _Unstructured(BasePruningMethod):
    """Zeroes ``amount`` (a count, or a fraction) of the entries, those ``_positions``
    picks (flat positions into the tensor)."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount) -> None:
        _check_amount(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _count_to_prune(self.amount, t.numel())
        mask = _host(default_mask).copy()
        if k:
            mask.reshape(-1)[self._positions(t, k)] = 0
        return _like(mask, default_mask)


class RandomUnstructured(_Unstructured):
    """Zeroes ``amount`` (a count, or a fraction) of the entries chosen at random."""

    @staticmethod
    def _positions(t, k):
        draws = _host(creation.rand_like(t)).reshape(-1)
        return np.argsort(-draws, kind="stable")[:k]

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    """Zeroes the ``amount`` (a count, or a fraction) entries of smallest absolute
    value."""

    @staticmethod
    def _positions(t, k):
        return topk_positions(np.abs(_host(t)), k, largest=False)

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount,
                             importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Zeroes ``amount`` (a count, or a fraction) of the slices along ``dim`` (whole
    output channels with dim=0), chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1) -> None:
        _check_amount(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _check_structured(t, self.dim)
        size = t.shape[self.dim]
        k = _count_to_prune(self.amount, size)
        if k == 0:
            return default_mask
        draws = _host(creation.rand(size))
        keep = draws > np.sort(draws)[k - 1]  # (the k-th smallest draw and below go)
        return _channel_mask(t, self.dim, keep, default_mask)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


def _norms(values: np.ndarray, n, dim: int) -> np.ndarray:
    """The ``n``-norm of each slice along ``dim`` (torch.norm's orders), in the
    tensor's own precision."""
    moved = np.moveaxis(values, dim, 0).reshape(values.shape[dim], -1)
    a = np.abs(moved)
    if n == "fro":  # (torch.norm's Frobenius norm takes one or two dims)
        if values.ndim > 3:
            raise RuntimeError(f"ln_structured: the Frobenius norm ('fro') reduces one or "
                               f"two dims, and the slices along dim {dim} of a tensor of "
                               f"shape {values.shape} have {values.ndim - 1}; use n=2")
        n = 2
    if n == "nuc":
        if values.ndim != 3:
            raise RuntimeError(f"ln_structured: the nuclear norm ('nuc') needs the slices "
                               f"along dim {dim} to be matrices, the tensor has shape "
                               f"{values.shape}")
        mats = np.moveaxis(values, dim, 0).astype(np.float64)
        return np.linalg.svd(mats, compute_uv=False).sum(-1)
    if not isinstance(n, numbers.Real) or isinstance(n, bool):
        raise ValueError(f"ln_structured: n must be a number, inf, -inf, 'fro' or 'nuc', "
                         f"got {n!r}")
    if n == math.inf:
        return a.max(axis=1) if a.shape[1] else np.zeros(a.shape[0], a.dtype)
    if n == -math.inf:
        return a.min(axis=1) if a.shape[1] else np.zeros(a.shape[0], a.dtype)
    if n == 0:
        return (a != 0).sum(axis=1).astype(a.dtype)
    if n == 1:
        return a.sum(axis=1)
    if n == 2:
        return np.sqrt((a * a).sum(axis=1))
    return (a ** n).sum(axis=1) ** (1.0 / n)


class LnStructured(BasePruningMethod):
    """Zeroes the ``amount`` (a count, or a fraction) slices along ``dim`` of smallest
    ``n``-norm."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1) -> None:
        _check_amount(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _check_structured(t, self.dim)
        size = t.shape[self.dim]
        k = _count_to_prune(self.amount, size)
        norms = _norms(_host(t), self.n, self.dim % t.ndim)
        if k == 0:
            return default_mask
        keep = topk_positions(norms, size - k, largest=True)
        return _channel_mask(t, self.dim, keep, default_mask)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """The given ``mask`` (times any mask already there)."""

    PRUNING_TYPE = "global"

    def __init__(self, mask) -> None:
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise ValueError(f"custom_from_mask: the mask has shape "
                             f"{tuple(self.mask.shape)}, the tensor pruned has shape "
                             f"{tuple(default_mask.shape)}")
        mine = self.mask if isinstance(self.mask, Tensor) else creation.tensor(self.mask)
        return default_mask * mine.to(device=default_mask.device, dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


# -- the functions ----------------------------------------------------------------------------
def identity(module, name):
    """Make ``module.<name>`` prunable without pruning anything (an all-ones mask)."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Zero ``amount`` of the entries of ``module.<name>`` at random."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Zero the ``amount`` entries of ``module.<name>`` of smallest absolute value (of
    ``importance_scores`` where given)."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Zero ``amount`` of the slices along ``dim`` of ``module.<name>`` at random."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Zero the ``amount`` slices along ``dim`` of ``module.<name>`` of smallest
    ``n``-norm."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    """Prune ``module.<name>`` with the given 0/1 ``mask``."""
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None,
                        **kwargs) -> None:
    """Prune several tensors together, ``parameters`` being (module, name) pairs: the
    method (an unstructured one, e.g. L1Unstructured with amount=0.2) ranks all their
    entries at once, so some tensors lose more than others."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    if not parameters:
        raise ValueError("global_unstructured(): parameters is empty; give (module, name) "
                         "pairs")
    tensors = [getattr(module, name) for module, name in parameters]
    scores = np.concatenate([
        _host(importance_scores.get((module, name), t)).reshape(-1)
        for (module, name), t in zip(parameters, tensors)])
    masks = np.concatenate([_mask_of(module, name, t).reshape(-1)
                            for (module, name), t in zip(parameters, tensors)])
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if getattr(method, "PRUNING_TYPE", None) != "unstructured":
        raise TypeError(f'Only "unstructured" PRUNING_TYPE supported for the '
                        f'`pruning_method`. Found method {pruning_method} of type '
                        f'{getattr(method, "PRUNING_TYPE", None)}')
    container = PruningContainer()
    container._tensor_name = "temp"
    container.add_pruning_method(method)
    first = tensors[0]
    final = _host(container.compute_mask(_like(scores, first), _like(masks, first)))
    at = 0
    for (module, name), t in zip(parameters, tensors):
        n = t.numel()
        custom_from_mask(module, name, mask=_like(final[at:at + n].reshape(tuple(t.shape)), t))
        at += n


def _mask_of(module, name, t) -> np.ndarray:
    mask = getattr(module, name + "_mask", None)
    return _host(mask) if mask is not None else np.ones(tuple(t.shape), _host(t).dtype)


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent (see BasePruningMethod.remove)."""
    for key, hook in list(_pre_hooks(module).items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._hooks.forward_pre[key]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before "
                     f"pruning can be removed")


def is_pruned(module) -> bool:
    """Whether ``module`` or any module inside it has a pruning hook."""
    return any(isinstance(hook, BasePruningMethod)
               for m in module.modules() for hook in _pre_hooks(m).values())



def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals())
