"""Module and Parameter: the containers models are built from (PyTorch's shape)."""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

from .. import dtype as dtypes
from ..autograd.mode import STATE, no_grad
from ..device import Device, as_device
from ..tensor import Tensor
from .module_hooks import HookHandle, ModuleHooks, call_with_hooks


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

    def __deepcopy__(self, memo):
        # copy's default rebuilds through __new__ with no data; PyTorch's copy is a
        # fresh Parameter over cloned values, without the gradient
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.detach().clone(), self.requires_grad)
        return memo[id(self)]

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class Buffer(Tensor):
    """A tensor marked to become a buffer of the module it is assigned to
    (``self.stats = nn.Buffer(t, persistent=False)`` is ``self.register_buffer("stats",
    t, persistent=False)``): the module holds the plain tensor, as PyTorch's does."""

    __slots__ = ("persistent",)

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            from ..creation import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"nn.Buffer: data must be a tensor, got {type(data).__name__}")
        b = data.detach()._alias(cls)
        b._requires_grad = data.requires_grad  # (kept, as PyTorch's Buffer keeps it)
        b.persistent = bool(persistent)
        return b

    def __init__(self, data=None, *, persistent=True):
        pass


class IncompatibleKeys(NamedTuple):
    """What load_state_dict found: keys the model has that the state dict lacks, and
    keys the state dict has that the model lacks."""

    missing_keys: list
    unexpected_keys: list


class Module:
    """Holds Parameters, buffers and sub-Modules as attributes, in the order they were
    set (PyTorch's shape: state_dict key names, .to(), train/eval, ...)."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}.__init__ must call "
                                 f"super().__init__() before assigning {name!r}")
        if isinstance(value, Buffer):
            self._assign_buffer(name, value)
            return
        if name in self._buffers and (value is None or (isinstance(value, Tensor)
                                                        and not isinstance(value, Parameter))):
            self._buffers[name] = value  # a buffer stays a buffer when reassigned
            return
        if name in self._parameters and not isinstance(value, Parameter):
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as parameter "
                                f"{name!r} of {type(self).__name__} (a Parameter or None "
                                f"is expected); wrap it: nn.Parameter(t), or copy values "
                                f"in with {name}.copy_(t) under hx.no_grad()")
            self._parameters[name] = None
            return
        for store in (self._parameters, self._buffers, self._modules):
            store.pop(name, None)
        self._non_persistent_buffers.discard(name)
        if isinstance(value, Parameter):
            self.__dict__.pop(name, None)
            self._parameters[name] = value
            value.name = value.name or name
        elif isinstance(value, Module):
            self.__dict__.pop(name, None)
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def _assign_buffer(self, name, value):
        """``self.name = nn.Buffer(t, persistent=...)``: t registered as a buffer."""
        if name in self._parameters:
            raise TypeError(f"cannot assign a Buffer as parameter {name!r} of "
                            f"{type(self).__name__} (a Parameter or None is expected); "
                            f"del the parameter first")
        plain = value._alias()
        plain._requires_grad = value._requires_grad
        for store in (self._modules, self._buffers):
            store.pop(name, None)
        self.__dict__.pop(name, None)
        self._buffers[name] = plain
        if value.persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

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
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def _check_new_name(self, name, what):
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"{what} name must be a non-empty string without '.', got "
                           f"{name!r}")
        stores = {"parameter": self._parameters, "buffer": self._buffers,
                  "module": self._modules}
        if name in self.__dict__ or any(name in store for kind, store in stores.items()
                                        if kind != what):
            raise KeyError(f"attribute {name!r} already exists on {type(self).__name__}")

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """A tensor that belongs to the module's state but is not trained (it moves with
        .to()). ``persistent=False`` keeps it out of state_dict; None reserves the name."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer({name!r}): expects a tensor or None, got "
                            f"{type(tensor).__name__}")
        if isinstance(tensor, Parameter):
            raise TypeError(f"register_buffer({name!r}): got a Parameter; use "
                            f"register_parameter or assign it as an attribute")
        self._check_new_name(name, "buffer")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def register_parameter(self, name: str, param) -> None:
        self._register("register_parameter", self._parameters, name, param, Parameter)
        if param is not None:
            param.name = param.name or name

    def add_module(self, name: str, module) -> None:
        self._register("add_module", self._modules, name, module, Module)

    def _register(self, op, store, name, value, cls):
        if value is not None and not isinstance(value, cls):
            raise TypeError(f"{op}({name!r}): expects a {cls.__name__} or None, got "
                            f"{type(value).__name__}")
        self._check_new_name(name, "parameter" if store is self._parameters else "module")
        store[name] = value

    register_module = add_module

    #: the module's hooks (a ModuleHooks) once one is registered
    _hooks = None

    def __call__(self, *args, **kwargs):
        # the graph's nodes remember which module made them (graph pictures group them)
        stack = STATE.modules
        stack.append(self)
        try:
            if self._hooks is not None:
                return call_with_hooks(self, self._hooks, args, kwargs)
            return self.forward(*args, **kwargs)
        finally:
            stack.pop()

    # -- hooks (see module_hooks) ----------------------------------------------------------
    def _hook_table(self) -> ModuleHooks:
        if self._hooks is None:
            object.__setattr__(self, "_hooks", ModuleHooks())
        return self._hooks

    @property
    def _forward_pre_hooks(self) -> OrderedDict:
        """The forward pre-hooks by handle id (PyTorch's attribute, which programs read
        to find a pruning method or a spectral norm on a module)."""
        return self._hooks.forward_pre if self._hooks is not None else OrderedDict()

    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> HookHandle:
        """``hook(module, args)`` before each forward (``hook(module, args, kwargs)``
        with ``with_kwargs``); what it returns, unless None, replaces the arguments."""
        table = self._hook_table()
        flags = (table.with_kwargs,) if with_kwargs else ()
        return table.add(table.forward_pre, hook, prepend, *flags)

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False) -> HookHandle:
        """``hook(module, args, output)`` after each forward; what it returns, unless
        None, replaces the output. ``always_call``: also when forward raises."""
        table = self._hook_table()
        flags = ((table.with_kwargs,) if with_kwargs else ()) + \
            ((table.always_call,) if always_call else ())
        return table.add(table.forward, hook, prepend, *flags)

    def register_full_backward_pre_hook(self, hook, prepend: bool = False) -> HookHandle:
        """``hook(module, grad_output)`` when the backward reaches the module's output;
        what it returns, unless None, replaces the gradient."""
        table = self._hook_table()
        return table.add(table.backward_pre, hook, prepend)

    def register_full_backward_hook(self, hook, prepend: bool = False) -> HookHandle:
        """``hook(module, grad_input, grad_output)`` once the gradient of the module's
        input is known; what it returns, unless None, replaces grad_input."""
        table = self._hook_table()
        return table.add(table.backward, hook, prepend)

    def register_backward_hook(self, hook):
        raise NotImplementedError(
            f"{type(self).__name__}.register_backward_hook: PyTorch deprecates it (it sees "
            f"the gradients of the module's last op only); use register_full_backward_hook")

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    # -- traversal -----------------------------------------------------------------------
    def named_modules(self, prefix: str = ""):
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        yield from ((n, m) for n, m in self._modules.items() if m is not None)

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        """(name, parameter) pairs; a parameter shared by several modules (tied
        weights) is listed once, under its first name."""
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

    def named_buffers(self, prefix: str = "", recurse: bool = True):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, b in m._buffers.items():
                if b is None or id(b) in seen:
                    continue
                seen.add(id(b))
                yield (f"{mprefix}.{name}" if mprefix else name), b

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- state ---------------------------------------------------------------------------
    def _state_items(self, prefix: str = ""):
        """(key, tensor) of every parameter and persistent buffer under PyTorch's key
        names, walking sub-modules without removing shared ones: a tied weight appears
        under each name it has, as in a PyTorch state dict."""
        for name, p in self._parameters.items():
            if p is not None:
                yield prefix + name, p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                yield prefix + name, b
        for name, m in self._modules.items():
            if m is not None:
                yield from m._state_items(f"{prefix}{name}.")

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """name -> tensor: detached views of the live parameters and persistent buffers
        (the tensors themselves with keep_vars=True)."""
        out = OrderedDict() if destination is None else destination
        for key, t in self._state_items(prefix):
            out[key] = t if keep_vars else t.detach()
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values (tensors or arrays) into the existing parameters and buffers in
        place, keeping their identity (and any optimizer holding them). Everything is
        checked before anything is written. Returns the named tuple (missing_keys,
        unexpected_keys); with ``strict`` (the default) either being non-empty raises
        RuntimeError, as does a shape that differs (strict or not), as in PyTorch."""
        if assign:
            raise NotImplementedError("load_state_dict(assign=True) is not supported: "
                                      "values are always copied into the existing tensors")
        for prefix, m in self.named_modules():
            # (a lazy module gives its placeholders the shapes the state dict holds)
            before = getattr(type(m), "_before_load", None)
            if before is not None:
                before(m, state_dict, f"{prefix}." if prefix else "")
        own = dict(self._state_items())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        from ..creation import tensor as to_tensor

        errors, sources = [], {}
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: "
                          + ", ".join(f'"{k}"' for k in unexpected) + ". ")
        if strict and missing:
            errors.append("Missing key(s) in state_dict: "
                          + ", ".join(f'"{k}"' for k in missing) + ". ")
        for k, t in own.items():
            if k not in state_dict:
                continue
            src = state_dict[k]
            src = src if isinstance(src, Tensor) else to_tensor(src)
            if getattr(type(t), "_uninitialized", False):
                continue  # (a placeholder into a placeholder: nothing to copy)
            if tuple(src.shape) != t.shape:
                errors.append(f"size mismatch for {k}: copying a param with shape "
                              f"{tuple(src.shape)} from checkpoint, the shape in current "
                              f"model is {t.shape}.")
            sources[k] = src
        if errors:  # PyTorch's error: every problem listed, nothing written
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:"
                               + "".join(f"\n\t{e}" for e in errors))
        with no_grad():
            for k, src in sources.items():
                own[k].copy_(src)
        return IncompatibleKeys(missing, unexpected)

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
                with no_grad():
                    p.grad.zero_()

    # -- device and dtype ----------------------------------------------------------------
    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)`` or the
        keywords device= / dtype=: move every parameter and buffer (integer ones too)
        and cast the floating ones, in place, keeping Parameter identity as PyTorch
        does. Gradients follow their parameters."""
        device, dtype = _to_args("Module.to", args, kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"Module.to: only floating dtypes can be given to a module, "
                            f"got {dtype.name}; integer buffers keep their dtype")
        return self._apply_to(device, dtype)

    def _apply_to(self, device, dtype):
        done = set()
        for m in self.modules():
            tensors = [*m._parameters.values(), *m._buffers.values()]
            for t in tensors:
                if t is None or id(t) in done:
                    continue
                done.add(id(t))
                if getattr(type(t), "_uninitialized", False):  # (a lazy module's)
                    t._retarget(device, dtype)
                    continue
                new = _converted(t.detach(), device, dtype)
                if new is not None:
                    t._set_data(new)
                if t.grad is not None:
                    g = _converted(t.grad, device, dtype)
                    if g is not None:
                        t.grad = g
        return self

    def float(self):
        return self._apply_to(None, dtypes.float32)

    def double(self):
        return self._apply_to(None, dtypes.float64)

    def half(self):
        return self._apply_to(None, dtypes.float16)

    def bfloat16(self):
        return self._apply_to(None, dtypes.bfloat16)

    def cpu(self):
        return self._apply_to(as_device("cpu"), None)

    def cuda(self, device=None):
        """The module on the GPU (PyTorch's name; see hx.cuda for the rule)."""
        return self.to("gpu")

    def gpu(self):
        return self._apply_to(as_device("gpu"), None)

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


def _to_args(op, args, kwargs):
    """(device, dtype) from the arguments of a .to() call, through the one parser of
    device and dtype names (haelixe.device.as_device, haelixe.dtype.as_dtype)."""
    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)  # a transfer hint; copies here are synchronous
    if kwargs:
        raise TypeError(f"{op}: unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, Device):
            device = a
        elif isinstance(a, dtypes.DType):
            dtype = a
        elif isinstance(a, str):
            try:
                device = as_device(a)
            except ValueError:
                try:
                    dtype = dtypes.as_dtype(a)
                except TypeError:
                    raise ValueError(f"{op}: {a!r} is neither a device ('cpu', 'gpu') nor "
                                     f"a dtype ('float32', 'bfloat16', ...)") from None
        else:
            dtype = dtypes.as_dtype(a)
    return (None if device is None else as_device(device),
            None if dtype is None else dtypes.as_dtype(dtype))


def _converted(t, device, dtype):
    """t moved to ``device`` and, when floating, cast to ``dtype``; None when nothing
    changes."""
    out = t
    if device is not None and out.device is not device:
        out = out.to(device)
    if dtype is not None and out.dtype.is_floating_point and out.dtype is not dtype:
        out = out.to(dtype)
    return None if out is t else out


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

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __setitem__(self, i: int, module) -> None:
        key = list(self._modules)[i]  # (an IndexError names the bad index)
        self.add_module(key, module)
