"""Copies and conversions: clone, dtype casts, device moves, and the Tensor methods for
them (``to``, ``float()``, ``cpu()``, ``new_zeros``...)."""

from __future__ import annotations

from .. import dtype as _dtypes
from ..autograd.function import Function
from ..autograd.mode import no_grad
from ..backends import backend_for
from ..creation import tensor
from ..device import CPU, GPU, Device, as_device
from ..dtype import as_dtype
from ..dtype import result_type as _result_type
from ..layout import Size
from ..tensor import Tensor
from .registry import declare, function, tensor_method


class Clone(Function):
    small_state = True

    @staticmethod
    def forward(ctx, x):
        return x._be.copy(x._data)

    @staticmethod
    def backward(ctx, g):
        return g


class Cast(Function):
    """dtype conversion; the gradient flows back in the input's dtype."""

    label = "Cast"
    small_state = True

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.src = x.dtype
        ctx.label = f"Cast({x.dtype.name}->{dtype.name})"
        return x._be.cast(x._data, dtype.np)

    @staticmethod
    def backward(ctx, g):
        return cast(g, ctx.src), None


def as_tensor_like(value, ref, dtype=None):
    """``value`` (a tensor, number, list or numpy array) as a tensor on ``ref``'s device
    (a tensor passes through as it is)."""
    if isinstance(value, Tensor):
        return value
    return tensor(value, dtype=dtype, device=ref.device)


def cast(x, dtype):
    if x.dtype is dtype:
        return x
    if x._requires_grad and not dtype.is_floating_point:
        # Integer results carry no gradient; cut the graph rather than fail later.
        with no_grad():
            return Cast.apply(x, dtype)
    return Cast.apply(x, dtype)


class ToDevice(Function):
    small_state = True

    @staticmethod
    def forward(ctx, x, device):
        ctx.src = x.device
        ctx.label = f"To({device.type})"
        host = x._be.to_numpy(x._data)
        return backend_for(device).from_numpy(host)

    @staticmethod
    def backward(ctx, g):
        return to_device(g, ctx.src), None


def to_device(x, device):
    if x.device is device:
        return x
    return ToDevice.apply(x, device)


declare("clone")
declare("to")


@function
def result_type(tensor, other):
    """The dtype an arithmetic op over ``tensor`` and ``other`` (tensors or Python
    numbers) gives, by PyTorch's rules (torch.result_type)."""
    return _result_type(*((x.dtype, x.ndim == 0) if isinstance(x, Tensor) else x
                          for x in (tensor, other)))


def _is_device(a) -> bool:
    if isinstance(a, Device):
        return True
    if isinstance(a, str):
        try:
            as_device(a)
            return True
        except ValueError:
            return False
    return False


@tensor_method
def to(self, *args, dtype=None, device=None, copy=False, non_blocking=False) -> Tensor:
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)`` or keywords;
    returns self when nothing changes (unless copy=True)."""
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif _is_device(a):
            device = a
        else:
            dtype = a
    out = self
    if device is not None and as_device(device) is not self.device:
        out = to_device(out, as_device(device))
    if dtype is not None and as_dtype(dtype) is not out.dtype:
        out = cast(out, as_dtype(dtype))
    if copy and out is self:
        out = self.clone()
    return out


def _to_dtype(name):
    def method(self) -> Tensor:
        return self.to(dtype=name)

    method.__name__ = name
    method.__doc__ = f"This tensor as {name} (itself when it already is)."
    return method


for _method, _dtype in (("float", "float32"), ("double", "float64"), ("half", "float16"),
                        ("bfloat16", "bfloat16"), ("long", "int64"), ("int", "int32"),
                        ("short", "int16"), ("char", "int8"), ("byte", "uint8"),
                        ("bool", "bool")):
    tensor_method(_to_dtype(_dtype), name=_method)


@tensor_method
def cpu(self) -> Tensor:
    return self.to(CPU)


@tensor_method
def gpu(self) -> Tensor:
    return self.to(GPU)


@tensor_method
def type_as(self, other: Tensor) -> Tensor:
    return self.to(dtype=other.dtype)


@tensor_method(function=True)
def clone(self) -> Tensor:
    return Clone.apply(self)


@tensor_method
def contiguous(self) -> Tensor:
    return self if self.is_contiguous() else Clone.apply(self)


def _new_size(size) -> tuple:
    """new_zeros(2, 3), new_zeros((2, 3)) and new_zeros([2, 3]) alike, as PyTorch."""
    if len(size) == 1 and not isinstance(size[0], int):
        return tuple(size[0])
    return tuple(size)


@tensor_method
def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    size = (size,) if isinstance(size, int) else tuple(size)
    dt = self.dtype if dtype is None else as_dtype(dtype)
    dev = self.device if device is None else as_device(device)
    out = Tensor._wrap(backend_for(dev).full(size, fill_value, dt.np))
    return out.requires_grad_() if requires_grad else out


@tensor_method
def new_zeros(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return self.new_full(_new_size(size), 0, dtype, device, requires_grad)


@tensor_method
def new_ones(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
    return self.new_full(_new_size(size), 1, dtype, device, requires_grad)


@tensor_method
def new_empty(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
    dt = self.dtype if dtype is None else as_dtype(dtype)
    dev = self.device if device is None else as_device(device)
    out = Tensor._wrap(backend_for(dev).empty(_new_size(size), dt.np))
    return out.requires_grad_() if requires_grad else out


@tensor_method
def new_tensor(self, data, dtype=None, device=None) -> Tensor:
    return tensor(data, dtype=self.dtype if dtype is None else dtype,
                  device=self.device if device is None else device)


@tensor_method
def cuda(self, device=None, non_blocking=False) -> Tensor:
    """This tensor on the GPU (see hx.cuda for when a program's "cuda" is the GPU)."""
    if device not in (None, 0) and as_device(device) is not GPU:
        raise ValueError(f"cuda({device!r}): the GPU is device 0 (or 'cuda', 'gpu')")
    return self.to(GPU)


Tensor.is_cuda = property(lambda self: self.device is GPU,
                          doc="Whether the tensor is on the GPU (PyTorch's name).")

# -- PyTorch's legacy tensor types: torch.LongTensor(...), x.type(), isinstance ----------
#: dtype name -> the legacy type's name
LEGACY_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
                "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor",
                "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor",
                "bool": "BoolTensor", "uint16": "UInt16Tensor", "uint32": "UInt32Tensor",
                "uint64": "UInt64Tensor"}
#: the legacy types PyTorch exports as torch.<name> (x.type() names the others too)
EXPORTED_LEGACY = frozenset(LEGACY_NAMES) - {"uint16", "uint32", "uint64"}


class LegacyTensorType(type):
    """``torch.LongTensor`` and its kin: calling one makes a tensor of its dtype (from data,
    or uninitialised of a size); ``isinstance(x, torch.LongTensor)`` checks dtype and
    device."""

    def __call__(cls, *args, device=None):
        if len(args) == 1 and not isinstance(args[0], int):
            data = args[0]
            if isinstance(data, Tensor):
                return data.to(dtype=cls.dtype, device=cls.device)
            return tensor(data, dtype=cls.dtype, device=cls.device)
        size = _new_size(args) if args else (0,)
        return Tensor._wrap(backend_for(cls.device).full(size, 0, as_dtype(cls.dtype).np))

    def __instancecheck__(cls, obj):
        return (isinstance(obj, Tensor) and obj.dtype is as_dtype(cls.dtype)
                and obj.device is cls.device)

    def __repr__(cls):
        return f"<class '{cls.type_name}'>"


def _legacy(dtype_name: str, device: Device) -> type:
    name = LEGACY_NAMES[dtype_name]
    prefix = "torch.cuda." if device is GPU else "torch."
    return LegacyTensorType(name, (), {"dtype": dtype_name, "device": device,
                                       "type_name": prefix + name})


LEGACY_TYPES = {d: _legacy(d, CPU) for d in LEGACY_NAMES}
LEGACY_GPU_TYPES = {d: _legacy(d, GPU) for d in LEGACY_NAMES}
_BY_TYPE_NAME = {t.type_name: t for t in (*LEGACY_TYPES.values(), *LEGACY_GPU_TYPES.values())}


def _legacy_new(cls, *args, device=None):
    """``torch.Tensor(...)``, PyTorch's legacy constructor: from data (a list, an array)
    of the default float dtype; of a tensor, an alias of it (its dtype, its graph); with
    sizes (``Tensor(2, 3)``, ``Tensor(torch.Size([2]))``) or none, uninitialised."""
    if len(args) == 1 and isinstance(args[0], Tensor):
        out = args[0].view_as(args[0])
    elif len(args) == 1 and not isinstance(args[0], (int, Size)):
        data = args[0]
        if not hasattr(data, "__len__") and not hasattr(data, "__array__"):
            raise TypeError(f"Tensor({data!r}): data must be a sequence, an array or a "
                            f"tensor (got {type(data).__name__}); torch.tensor({data!r}) "
                            f"makes a 0-d tensor")
        out = tensor(data, dtype=_dtypes.default_float, device=device)
    else:
        size = _new_size(args) if args else (0,)
        if not all(isinstance(n, int) for n in size) or any(n < 0 for n in size):
            raise ValueError(f"Tensor{tuple(args)!r}: sizes must be ints >= 0")
        out = Tensor._wrap(backend_for(as_device(device) if device is not None else CPU)
                           .full(size, 0, _dtypes.default_float.np))
    return out if cls is Tensor else out._alias(cls)  # (a subclass of Tensor)


Tensor.__new__ = staticmethod(_legacy_new)


@tensor_method(name="type")
def type_(self, dtype=None, non_blocking=False, **kwargs):
    """Without an argument: the legacy type name ("torch.FloatTensor",
    "torch.cuda.LongTensor"); with a dtype, a legacy type or its name: this tensor
    converted to it (itself when it already is)."""
    if dtype is None:
        return (LEGACY_GPU_TYPES if self.device is GPU else LEGACY_TYPES)[self.dtype.name].type_name
    if isinstance(dtype, str) and dtype.startswith("torch."):
        if dtype not in _BY_TYPE_NAME:
            raise ValueError(f"type({dtype!r}): not a tensor type Haelixe has; the types are "
                             f"{', '.join(sorted(_BY_TYPE_NAME))}")
        dtype = _BY_TYPE_NAME[dtype]
    if isinstance(dtype, LegacyTensorType):
        return self.to(device=dtype.device, dtype=dtype.dtype)
    return self.to(dtype=dtype)
