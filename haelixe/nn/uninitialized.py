"""UninitializedParameter and UninitializedBuffer (PyTorch's torch.nn.parameter names):
the placeholders a lazy module holds until its first forward tells it their shape.

Each is a tensor of a dtype and a device with no shape yet: reading its shape raises
PyTorch's RuntimeError, and an op that reads its values raises PyTorch's ValueError.
``materialize(shape)`` gives it memory in place, so the object itself (and whatever
holds it: a module, a list of parameters) becomes a plain Parameter or tensor.
"""

from __future__ import annotations

from .. import creation
from ..tensor import Tensor
from .module import Parameter

_SHAPE_ERROR = ("Can't access the shape of an uninitialized parameter or buffer. This "
                "error usually happens in `load_state_dict` when trying to load an "
                "uninitialized parameter into an initialized one. Call `forward` to "
                "initialize the parameters before accessing their attributes.")

_SHAPE_SLOT, _DATA_SLOT = Tensor.shape, Tensor._data


class UninitializedTensorMixin:
    """What the two placeholders share. ``shape`` and ``_data`` (Tensor's slots, which
    every op reads) are properties here: a write passes through to the slot, so the
    tensor is built and moved as any other, and a read says to run forward first."""

    __slots__ = ()
    #: the class a placeholder becomes once materialized
    cls_to_become: type = Tensor
    #: (what Module and the optimizers test, on the class, for a placeholder)
    _uninitialized = True

    @property
    def shape(self):
        raise RuntimeError(_SHAPE_ERROR)

    @shape.setter
    def shape(self, value):
        _SHAPE_SLOT.__set__(self, value)

    @property
    def _data(self):
        name = type(self).__name__
        raise ValueError(f"Attempted to use an uninitialized parameter ({name}). This "
                         f"error happens when you are using a `LazyModule` or explicitly "
                         f"manipulating `torch.nn.parameter.{name}` objects. When using "
                         f"LazyModules Call `forward` with a dummy batch to initialize "
                         f"the parameters before calling torch functions")

    @_data.setter
    def _data(self, value):
        _DATA_SLOT.__set__(self, value)

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the placeholder memory of ``shape`` (uninitialized values) on its device
        and in its dtype, or those given; it becomes ``cls_to_become`` in place."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        data = creation.empty(*shape, dtype=dtype or self.dtype,
                              device=device or self.device)
        self._set_data(data)
        self.__class__ = self.cls_to_become

    def _retarget(self, device, dtype) -> None:
        """Module.to on a placeholder: the device and the (floating) dtype it will have."""
        dtype = dtype if dtype is not None and self.dtype.is_floating_point else self.dtype
        self._set_data(creation.empty(0, dtype=dtype, device=device or self.device))

    def detach(self):
        # (a state dict holds the placeholder itself, as PyTorch's does)
        return self

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. "
                           "Call `forward` to initialize the parameters before calling "
                           "`module.share_memory()`.")

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.requires_grad, self.device, self.dtype)
        return memo[id(self)]

    def __reduce_ex__(self, protocol):
        # (a placeholder holds no values: pickled as what makes it again)
        return type(self), (self.requires_grad, self.device.type, self.dtype.name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A parameter whose shape is not known yet (a lazy module's, before its first
    forward); it becomes a Parameter when materialized. ``device`` and ``dtype`` are
    those it will have."""

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return Parameter.__new__(cls, creation.empty(0, dtype=dtype, device=device),
                                 requires_grad)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet (a lazy norm's running statistics); it
    becomes a plain tensor when materialized."""

    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        t = creation.empty(0, dtype=dtype, device=device)._alias(cls)
        t._base = None
        if requires_grad:
            t.requires_grad_(True)
        return t

    def __init__(self, requires_grad=False, device=None, dtype=None):
        pass


def is_lazy(param) -> bool:
    """Whether ``param`` is an UninitializedParameter or UninitializedBuffer."""
    return isinstance(param, UninitializedTensorMixin)
