"""``torch.nn.utils.parametrize``: a module's tensor computed from other parameters on
every read, as PyTorch's parametrizations are.

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).mT
    parametrize.register_parametrization(layer, "weight", Symmetric())
    layer.weight            # Symmetric()(layer.parametrizations.weight.original)

The module's own tensor moves to ``module.parametrizations[name].original`` (or
``original0``, ``original1``, ... where a parametrization's ``right_inverse`` gives
several, as weight norm's magnitude and direction), and the module's class becomes a
subclass of its own with a property of that name, whose getter runs the
parametrizations and whose setter runs their ``right_inverse``.
"""

from __future__ import annotations

import contextlib

from ..autograd.mode import no_grad
from ..tensor import Tensor
from .containers import ModuleDict
from .module import Module, ModuleList, Parameter

__all__ = ["ParametrizationList", "cached", "is_parametrized", "register_parametrization",
           "remove_parametrizations", "type_before_parametrizations"]

_CACHE: dict | None = None  # (id of a module, tensor name) -> its value, inside cached()


@contextlib.contextmanager
def cached():
    """Inside it, each parametrized tensor is computed once and reused (a weight read
    in several places of one forward)."""
    global _CACHE
    outer = _CACHE
    _CACHE = {} if outer is None else outer
    try:
        yield
    finally:
        _CACHE = outer


def _as_original(t: Tensor, like: Tensor):
    """``t`` kept as the original: a Parameter where ``like`` was one, else a tensor."""
    t = t.detach()
    return Parameter(t, like.requires_grad) if isinstance(like, Parameter) else t


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and its original(s)."""

    def __init__(self, modules, original: Tensor, unsafe: bool = False):
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:  # (taken as the identity, as PyTorch)
                        pass
        self.is_tensor = isinstance(new, Tensor)
        if self.is_tensor:
            self._set_original("original", new, original)
        else:
            if not isinstance(new, (tuple, list)) or \
                    not all(isinstance(t, Tensor) for t in new):
                raise ValueError(f"register_parametrization: right_inverse must return a "
                                 f"Tensor or a sequence of Tensors, got {type(new).__name__}")
            self.ntensors = len(new)
            for i, t in enumerate(new):
                self._set_original(f"original{i}", t, original)

    def _set_original(self, name: str, value: Tensor, like: Tensor) -> None:
        kept = _as_original(value, like)
        if isinstance(kept, Parameter):
            setattr(self, name, kept)
        else:
            self.register_buffer(name, kept)

    def originals(self) -> tuple:
        if self.is_tensor:
            return (self.original,)
        return tuple(getattr(self, f"original{i}") for i in range(self.ntensors))

    def forward(self):
        modules = list(self)
        x = modules[0](*self.originals())
        for module in modules[1:]:
            x = module(x)
        return x

    def right_inverse(self, value: Tensor) -> None:
        """Set the originals so that the parametrized tensor reads ``value``."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       f"implement right_inverse.")
                value = module.right_inverse(value)
            values = (value,) if self.is_tensor else tuple(value)
            for original, v in zip(self.originals(), values):
                if original.shape != v.shape or original.dtype is not v.dtype:
                    raise ValueError(
                        f"parametrize: right_inverse gave shape {v.shape} and dtype "
                        f"{v.dtype} for an original of shape {original.shape} and dtype "
                        f"{original.dtype}")
                original.copy_(v)


def type_before_parametrizations(module: Module) -> type:
    """The module's class from before any parametrization was registered."""
    return getattr(module, "_class_before_parametrizations", type(module))


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    p = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(p, ModuleDict):
        return False
    return len(p) > 0 if tensor_name is None else tensor_name in p


def _property(name: str) -> property:
    def get(self):
        if _CACHE is not None:
            key = (id(self), name)
            value = _CACHE.get(key)
            if value is None:
                value = _CACHE[key] = self.parametrizations[name]()
            return value
        return self.parametrizations[name]()

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)

    return property(get, set_)


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Make ``module.<tensor_name>`` read ``parametrization(original)`` (after the
    parametrizations already registered on it)."""
    if not isinstance(parametrization, Module):
        raise TypeError(f"register_parametrization: the parametrization must be an "
                        f"nn.Module, got {type(parametrization).__name__}")
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        before = getattr(module, tensor_name)
        if not unsafe:
            with no_grad():
                after = parametrization(before)
            _check_same(after, before, tensor_name, type(parametrization).__name__)
        plist.append(parametrization)
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ValueError(f"register_parametrization: module {type(module).__name__} has no "
                         f"parameter or buffer named {tensor_name!r}")
    original = getattr(module, tensor_name)
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    if not unsafe:
        with no_grad():
            _check_same(plist(), original, tensor_name, type(parametrization).__name__)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        cls = type(module)
        new_cls = type(f"Parametrized{cls.__name__}", (cls,), {})
        object.__setattr__(module, "_class_before_parametrizations", cls)
        module.__class__ = new_cls
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = plist
    setattr(type(module), tensor_name, _property(tensor_name))
    return module


def _check_same(value, original, name: str, what: str) -> None:
    if not isinstance(value, Tensor):
        raise ValueError(f"register_parametrization: {what} must return a tensor, got "
                         f"{type(value).__name__}")
    if value.shape != original.shape or value.dtype is not original.dtype:
        raise ValueError(
            f"register_parametrization: {what} changes {name!r} from shape "
            f"{original.shape} and dtype {original.dtype} to shape {value.shape} and dtype "
            f"{value.dtype}; pass unsafe=True if that is meant")


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Undo :func:`register_parametrization` for ``tensor_name``: it becomes a plain
    parameter again, holding its parametrized value (``leave_parametrized``) or its
    original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"remove_parametrizations: module {type(module).__name__} has no "
                         f"parametrization on {tensor_name!r}")
    plist = module.parametrizations[tensor_name]
    if not leave_parametrized and not plist.is_tensor:
        raise ValueError("remove_parametrizations: leave_parametrized=False needs a "
                         "parametrization with one original tensor")
    with no_grad():
        value = getattr(module, tensor_name) if leave_parametrized else None
    if plist.is_tensor:
        # (the original object stays, so an optimizer holding it goes on updating it)
        kept = plist.original
        if value is not None:
            if value.shape != kept.shape or value.dtype is not kept.dtype:
                kept = _as_original(value, kept)
            else:
                with no_grad():
                    kept.copy_(value)
    else:
        kept = _as_original(value, plist.originals()[0])
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(kept, Parameter):
        setattr(module, tensor_name, kept)
    else:
        module.register_buffer(tensor_name, kept)
    if not is_parametrized(module):
        del module.parametrizations
        module.__class__ = module.__dict__.pop("_class_before_parametrizations")
    return module
