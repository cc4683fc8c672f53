"""Module and Parameter: the containers models are built from (PyTorch's shape)."""

from __future__ import annotations

from collections import OrderedDict

from ..autograd.mode import STATE, no_grad
from ..tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor that a Module owns and an optimizer updates."""

    __slots__ = ()

    def __new__(cls, data: Tensor, requires_grad: bool = True):
        p = data.detach()._alias(cls)
        p._base = None
        p._is_param = True
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Holds Parameters and sub-Modules as attributes, in the order they were set."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.__init__ must call "
                                 f"super().__init__() before assigning {name!r}")
        for store in (self._parameters, self._buffers, self._modules):
            store.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
            value.name = value.name or name
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                return
        object.__delattr__(self, name)

    def register_buffer(self, name: str, value: Tensor) -> None:
        """A tensor that belongs to the module's state but is not trained."""
        self._buffers[name] = value

    def __call__(self, *args, **kwargs):
        # the graph's nodes remember which module made them (graph pictures group them)
        stack = STATE.modules
        stack.append(self)
        try:
            return self.forward(*args, **kwargs)
        finally:
            stack.pop()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    # -- traversal -----------------------------------------------------------------------
    def named_modules(self, prefix: str = ""):
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        yield from self._modules.items()

    def children(self):
        yield from self._modules.values()

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, p in m._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mprefix}.{name}" if mprefix else name), p

    def parameters(self, recurse: bool = True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self):
        for mprefix, m in self.named_modules():
            for name, b in m._buffers.items():
                yield (f"{mprefix}.{name}" if mprefix else name), b

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- state ---------------------------------------------------------------------------
    def state_dict(self) -> OrderedDict:
        """name -> tensor (detached views of the live parameters and buffers)."""
        out = OrderedDict()
        for name, p in self.named_parameters():
            out[name] = p.detach()
        for name, b in self.named_buffers():
            out[name] = b.detach()
        return out

    def load_state_dict(self, state, strict: bool = True):
        """Copy values into the existing parameters in place (their identity, and any
        optimizer holding them, is kept)."""
        own = dict(self.named_parameters())
        own.update(self.named_buffers())
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys "
                           f"{unexpected}")
        with no_grad():
            for k, t in own.items():
                if k not in state:
                    continue
                src = state[k]
                if not isinstance(src, Tensor):
                    from ..creation import tensor

                    src = tensor(src)
                if tuple(src.shape) != t.shape:
                    raise ValueError(f"load_state_dict: {k} has shape {tuple(src.shape)} in "
                                     f"the state dict but {t.shape} in the model")
                t.copy_(src)
        return missing, unexpected

    def train(self, mode: bool = True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.zero_()

    def to(self, *args, **kwargs):
        """Move / cast every parameter and buffer in place (floating ones only for a
        dtype), keeping Parameter identity as PyTorch does."""
        for p in list(self.parameters()) + [b for _, b in self.named_buffers()]:
            new = p.detach().to(*args, **kwargs) if p.dtype.is_floating_point else \
                p.detach().to(*[a for a in args if not _is_dtype(a)],
                              device=kwargs.get("device"))
            if new is not p:
                p._set_data(new)
                if p.grad is not None:
                    p.grad = None
        return self

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # -- display -------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, m in self._modules.items():
            body = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n" + "\n".join(lines) + "\n)"


def _is_dtype(a) -> bool:
    from ..dtype import DType

    return isinstance(a, DType) or (isinstance(a, str) and a not in ("cpu", "gpu"))


class _ModuleSequence(Module):
    """Sub-modules kept in order under the names "0", "1", ...: indexable, iterable."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, m):
        setattr(self, str(len(self._modules)), m)
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class Sequential(_ModuleSequence):
    """Calls its modules one after another."""

    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(_ModuleSequence):
    """A list of modules whose parameters the parent module sees."""
