"""``torch.nn.utils.stateless``: call a module with other tensors in the places of its
parameters and buffers, leaving the module as it was afterwards.

    out = functional_call(model, {"weight": w, "bias": b}, (x,))

Each given tensor is put where the module keeps the one of that dotted name (its
``_parameters`` or ``_buffers`` entry, so ``self.weight`` reads it in forward) for the
one call; a name the module lacks becomes a plain attribute for the call. The given
tensors are used as they are: a gradient flows back to them, not to the module's
parameters. ``torch.func.functional_call`` (``hx.func``) is the same call and also takes
several dicts."""

from __future__ import annotations

import contextlib
import warnings

from ..tensor import Tensor
from .module import Module

__all__ = ["functional_call"]

_MISSING = object()  # what was at a name the module did not have


def _named_tensors(module: Module):
    """(dotted name, tensor) for every parameter and buffer, a shared one under each of
    its names."""
    for prefix, m in module.named_modules():
        for store in (m._parameters, m._buffers):
            for name, t in store.items():
                if t is not None:
                    yield (f"{prefix}.{name}" if prefix else name), t


def _untied(module: Module, values: dict) -> dict:
    """``values`` with a value given for one name of a tied tensor (a weight shared by
    two layers) given for all its names too; two different values for one tied tensor
    are refused."""
    names_of = {}
    for name, t in _named_tensors(module):
        names_of.setdefault(id(t), []).append(name)
    tied = {n: group for group in names_of.values() if len(group) > 1 for n in group}
    out = dict(values)
    for name in values:
        group = tied.get(name)
        if group is None:
            continue
        if len({id(values[n]) for n in group if n in values}) > 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(group)}, "
                             f"which are tied. Consider using tie_weights=False")
        for n in group:
            out[n] = values[name]
    return out


def _check_keys(module: Module, keys) -> None:
    valid = {name for name, _ in _named_tensors(module)}
    keys = set(keys)
    errors = []
    if keys - valid:
        errors.append(f"Unexpected key(s): {', '.join(map(repr, sorted(keys - valid)))}.")
    if valid - keys:
        errors.append(f"Missing key(s): {', '.join(map(repr, sorted(valid - keys)))}.")
    if errors:
        raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                           + "\n\t".join(errors))


def _owner(module: Module, path: str) -> Module:
    m = module
    for attr in path.split(".") if path else ():
        try:
            m = getattr(m, attr)
        except AttributeError as e:
            raise AttributeError(f"functional_call: {type(m).__name__} has no attribute "
                                 f"`{attr}` (in the name {path!r})") from e
        if not isinstance(m, Module):
            raise TypeError(f"functional_call: `{path}` is a {type(m).__name__}, not a "
                            f"module, so it holds no tensors to replace")
    return m


def _swap(module: Module, name: str, value):
    """Put ``value`` at the dotted ``name`` (``_MISSING``: take it away); returns what
    was there."""
    if value is not _MISSING and value is not None and not isinstance(value, Tensor):
        raise TypeError(f"functional_call: the value given for {name!r} is a "
                        f"{type(value).__name__}; give a tensor (or None)")
    prefix, _, attr = name.rpartition(".")
    owner = _owner(module, prefix)
    for store in (owner._parameters, owner._buffers):
        if attr in store:
            old = store[attr]
            if value is _MISSING:
                del store[attr]
            else:
                store[attr] = value
            return old
    old = getattr(owner, attr, _MISSING)
    if old is not _MISSING and old is not None and not isinstance(old, Tensor):
        raise TypeError(f"functional_call: {type(owner).__name__}.{attr} is a "
                        f"{type(old).__name__}, not a tensor, so it cannot be replaced")
    if value is not _MISSING:
        object.__setattr__(owner, attr, value)
    elif attr in owner.__dict__:
        object.__delattr__(owner, attr)
    return old


@contextlib.contextmanager
def reparametrized(module: Module, values: dict, tie_weights: bool = True,
                   strict: bool = False):
    """Inside it, ``module``'s tensors of the names in ``values`` are those values; the
    module's own come back on leaving, and a tensor the module replaced during the call
    (a buffer it reassigned) is written back into ``values``."""
    given = _untied(module, values) if tie_weights else dict(values)
    if strict:
        _check_keys(module, given)
    originals = {}
    try:
        for name, value in given.items():
            originals[name] = _swap(module, name, value)
        yield
    finally:
        now = {name: _swap(module, name, old) for name, old in reversed(originals.items())}
        values.update({k: now[k] for k in values if k in now})


def call(module: Module, parameters_and_buffers: dict, args=None, kwargs=None, *,
         tie_weights: bool = True, strict: bool = False):
    """module(*args, **kwargs) with ``parameters_and_buffers`` in place of its own."""
    if not isinstance(module, Module):
        raise TypeError(f"functional_call: expected an nn.Module, got "
                        f"{type(module).__name__}")
    args = () if args is None else (args if isinstance(args, tuple) else (args,))
    with reparametrized(module, parameters_and_buffers, tie_weights, strict):
        return module(*args, **(kwargs or {}))


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """Call ``module`` with the tensors of ``parameters_and_buffers`` (a dict from dotted
    names to tensors) in place of its parameters and buffers. ``args`` not a tuple is
    one argument. ``tie_weights``: a value for one name of a tied tensor stands for all
    of them. ``strict``: the names must be exactly the module's. Deprecated in PyTorch
    for ``torch.func.functional_call``, the same call, and warns as there."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch "
                  "2.0 and will be removed in a future version of PyTorch. Please use "
                  "`torch.func.functional_call` instead which is a drop-in replacement.",
                  FutureWarning, stacklevel=2)
    return call(module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights,
                strict=strict)
