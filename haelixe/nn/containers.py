"""ModuleDict, ParameterList and ParameterDict: modules and parameters held by key or
position, seen by the parent module (state_dict names "<key>" and "<index>", as in
PyTorch)."""

from __future__ import annotations

from collections.abc import Mapping

from ..tensor import Tensor
from .module import Module, Parameter


def _pairs(values, what: str):
    if isinstance(values, Mapping):
        return list(values.items())
    pairs = []
    for item in values:
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise TypeError(f"{what}.update: expects a mapping or an iterable of (key, value) "
                            f"pairs, got an element {type(item).__name__}")
        pairs.append(tuple(item))
    return pairs


class _Keyed(Module):
    """A dict's methods over one of the module's stores (``_modules`` for ModuleDict,
    ``_parameters`` for ParameterDict), in insertion order; ``__setitem__`` registers."""

    _store_name = ""  # the subclass's store

    def __init__(self, entries=None):
        super().__init__()
        if entries is not None:
            self.update(entries)

    @property
    def _store(self):
        return self.__dict__[self._store_name]

    def __getitem__(self, key: str):
        return self._store[key]

    def __delitem__(self, key: str) -> None:
        del self._store[key]

    def __len__(self) -> int:
        return len(self._store)

    def __iter__(self):
        return iter(self._store)

    def __contains__(self, key) -> bool:
        return key in self._store

    def keys(self):
        return self._store.keys()

    def values(self):
        return self._store.values()

    def items(self):
        return self._store.items()

    def pop(self, key: str):
        value = self._store[key]
        del self._store[key]
        return value

    def clear(self) -> None:
        self._store.clear()

    def update(self, entries) -> None:
        for key, value in _pairs(entries, type(self).__name__):
            self[key] = value


class ModuleDict(_Keyed):
    """Sub-modules by string key, in insertion order (a dict's methods)."""

    _store_name = "_modules"

    def __init__(self, modules=None):
        super().__init__(modules)

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)


def _as_parameter(value):
    # PyTorch wraps a plain tensor into a Parameter; other values are refused here
    if isinstance(value, Parameter) or value is None:
        return value
    if isinstance(value, Tensor):
        return Parameter(value)
    raise TypeError(f"expects a Parameter or a tensor, got {type(value).__name__}")


class ParameterList(Module):
    """Parameters by position ("0", "1", ... in the state dict); a plain tensor given to
    it becomes a Parameter, as in PyTorch."""

    def __init__(self, values=None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def _key(self, i: int) -> str:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"ParameterList index {i} is out of range for {n} parameters")
        return str(i % n)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return ParameterList(list(self._parameters.values())[i])
        return self._parameters[self._key(i)]

    def __setitem__(self, i: int, value) -> None:
        self._parameters[self._key(i)] = _as_parameter(value)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def append(self, value) -> ParameterList:
        self.register_parameter(str(len(self)), _as_parameter(value))
        return self

    def extend(self, values) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): Parameter containing: [{p.dtype.name} of size "
                         f"{'x'.join(map(str, p.shape))}]" for k, p in self._parameters.items())


class ParameterDict(_Keyed):
    """Parameters by string key, in insertion order; a plain tensor becomes a Parameter."""

    _store_name = "_parameters"

    def __init__(self, parameters=None):
        super().__init__(parameters)

    def __setitem__(self, key: str, value) -> None:
        self.register_parameter(key, _as_parameter(value))

    def get(self, key: str, default=None):
        return self._store.get(key, default)
