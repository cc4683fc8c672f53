"""Tensor factories: tensor, from_numpy, zeros/ones/full/empty/arange/rand/randn..."""

from __future__ import annotations

import contextlib
import math
import numbers

import numpy as np

from . import dtype as dt
from .backends import backend_for
from .device import CPU, as_device, factory_device
from .dtype import as_dtype, stored_number
from .errors import OpError, OpNotImplementedError
from .memory import OutOfMemoryError
from .random import generator as numpy_generator
from .tensor import Tensor


def _finish(raw_host: np.ndarray, device, requires_grad) -> Tensor:
    device = factory_device(device)
    # (on the CPU the same array: through the backend all the same, so that a captured
    # step sees host data made inside it)
    raw = backend_for(device).from_numpy(raw_host)
    t = Tensor._wrap(raw)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_dtype(data) -> dt.DType:
    """PyTorch's defaults: Python floats -> float32, ints -> int64, bools -> bool;
    numpy arrays keep their dtype."""
    if isinstance(data, np.ndarray):
        return dt.from_numpy(data.dtype)
    arr = _host_array(data)
    if arr.dtype == np.bool_:
        return dt.bool_
    if arr.dtype.kind in "iu":
        return dt.int64
    if arr.dtype.kind == "f":
        return dt.default_float
    raise TypeError(f"tensor: cannot build a tensor from {type(data).__name__} "
                    f"(numpy sees dtype {arr.dtype}); give numbers, nested lists or arrays")


def tensor(data, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A new tensor holding a copy of ``data`` (scalar, nested lists, numpy array or
    Tensor)."""
    if isinstance(data, Tensor):
        host = data.detach()._be.to_numpy(data._data)
        dtype = data.dtype if dtype is None else as_dtype(dtype)
    else:
        if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in data):
            data = [x.tolist() if isinstance(x, Tensor) else x for x in data]
        dtype = _infer_dtype(data) if dtype is None else as_dtype(dtype)
        host = data
    return _finish(_host_array(host, dtype.np), device, requires_grad)


def _host_array(data, np_dtype=None):
    """``data`` as a new C-ordered numpy array, with the package's own error for data
    that is not rectangular or not numbers."""
    if np_dtype is not None and np.dtype(np_dtype).kind in "iu" and \
            not isinstance(data, np.ndarray):
        return _integer_array(data, np.dtype(np_dtype))
    try:
        return np.array(data, dtype=np_dtype, copy=True, order="C")
    except OverflowError:
        raise _overflow(np.dtype(np_dtype).name if np_dtype else "int64") from None
    except (ValueError, TypeError) as e:
        if "inhomogeneous" in str(e) or "sequence" in str(e):
            raise OpError("tensor: the nested lists are ragged (rows of different "
                          "lengths); every row of one level needs the same length, as "
                          "a tensor is rectangular") from None
        raise TypeError(f"tensor: cannot build a tensor from {type(data).__name__} "
                        f"({e})") from None


def _overflow(name: str) -> RuntimeError:
    return RuntimeError(f"tensor: a value cannot be converted to {name} without overflow "
                        f"(as in PyTorch); use a wider dtype or values in range")


def _integer_array(data, np_dtype: np.dtype) -> np.ndarray:
    """Python numbers as an integer dtype, checked as PyTorch checks them: a float must
    lie in the dtype's range (it is then truncated), an int too, except that a negative
    int down to minus the greatest value wraps into an unsigned dtype below 64 bits
    (uint8 takes -1 as 255)."""
    raw = _host_array(data)  # numpy's own reading tells floats from ints
    info = np.iinfo(np_dtype)
    if raw.dtype.kind == "f" and raw.size and not (
            raw.min() >= info.min and raw.max() <= info.max):  # (nan is refused too)
        raise _overflow(np_dtype.name)
    try:
        return np.array(data, dtype=np_dtype, copy=True, order="C")
    except OverflowError:
        pass
    if np_dtype.kind == "u" and np_dtype.itemsize < 8 and raw.dtype.kind == "i" and \
            raw.min() >= -int(info.max) and raw.max() <= info.max:
        return raw.astype(np_dtype)
    raise _overflow(np_dtype.name)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    if isinstance(data, Tensor) and (dtype is None or as_dtype(dtype) is data.dtype) and (
            device is None or as_device(device) is data.device):
        return data
    if isinstance(data, np.ndarray) and factory_device(device) is CPU and (
            dtype is None or as_dtype(dtype).np == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype, device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with ``array`` (its strides and offset included)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    dt.from_numpy(array.dtype)  # refuses dtypes Haelixe lacks, naming the fix
    # (which shares a strided array's buffer: storage_for; through the backend, which
    # on the CPU gives the array itself, so that a captured step sees host data)
    return Tensor._wrap(backend_for(CPU).from_numpy(array))


def _shape(size, keyword=None, op=None) -> tuple:
    """The size a factory was given: its positional ints (or one sequence of them), or
    ``size=`` (PyTorch's factories take that too; ``keyword``: the factory's other
    keyword arguments, which a ``*size`` parameter cannot name)."""
    if keyword:
        extra = [k for k in keyword if k != "size"]
        if extra:
            raise TypeError(f"{op}() got an unexpected keyword argument {extra[0]!r}")
        if size:
            raise TypeError(f"{op}: the size given twice, as {size} and as "
                            f"size={keyword['size']!r}")
        size = (keyword["size"],)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for n in size:
        if not isinstance(n, numbers.Integral) or n < 0:
            raise OpError(f"sizes must be non-negative ints, got {tuple(size)}")
    return tuple(int(n) for n in size)


@contextlib.contextmanager
def _allocating(op, size, dtype):
    """An allocation no memory holds: Haelixe's error naming the shape and the bytes
    (numpy's "array is too big" and MemoryError name neither)."""
    try:
        yield
    except (MemoryError, ValueError) as e:
        if isinstance(e, ValueError) and "too big" not in str(e):
            raise
        nbytes = math.prod(size) * dtype.itemsize
        raise OutOfMemoryError(
            f"{op}: a tensor of shape {tuple(size)} and dtype {dtype.name} needs "
            f"{nbytes:,} bytes ({nbytes / 2**30:,.1f} GiB), more than this machine can "
            f"allocate; use a smaller shape, or a lower-precision dtype") from None


def _dtype(dtype, default=None):
    return (default or dt.default_float) if dtype is None else as_dtype(dtype)


def full(size, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    size = _shape((size,) if isinstance(size, int) else (tuple(size),))
    if dtype is None:
        dtype = dt.bool_ if isinstance(fill_value, bool) else (
            dt.int64 if isinstance(fill_value, numbers.Integral) else dt.default_float)
    dtype = as_dtype(dtype)
    device = factory_device(device)
    value = fill_value if isinstance(fill_value, bool) else \
        stored_number(dtype.np, fill_value, "full")
    with _allocating("full", size, dtype):
        t = Tensor._wrap(backend_for(device).full(size, value, dtype.np))
    if requires_grad:
        t.requires_grad_(True)
    return t


def zeros(*size, dtype=None, device=None, requires_grad=False, **size_keyword) -> Tensor:
    return full(_shape(size, size_keyword, "zeros"), 0, _dtype(dtype), device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False, **size_keyword) -> Tensor:
    return full(_shape(size, size_keyword, "ones"), 1, _dtype(dtype), device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False, **size_keyword) -> Tensor:
    size = _shape(size, size_keyword, "empty")
    device = factory_device(device)
    with _allocating("empty", size, _dtype(dtype)):
        t = Tensor._wrap(backend_for(device).empty(size, _dtype(dtype).np))
    if requires_grad:
        t.requires_grad_(True)
    return t


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = dt.int64 if ints else dt.default_float
    arr = np.arange(start, end, step).astype(as_dtype(dtype).np)
    return _finish(arr, device, requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False) -> Tensor:
    if _dtype(dtype) is dt.bool_:
        raise OpError("linspace: dtype bool is not supported (as in PyTorch); make the "
                      "values in a number dtype and compare them")
    arr = np.linspace(start, end, steps).astype(_dtype(dtype).np)
    return _finish(arr, device, requires_grad)


def _steps(op, steps) -> int:
    if not isinstance(steps, numbers.Integral) or isinstance(steps, bool):
        raise TypeError(f"{op}: steps must be an int, got {type(steps).__name__}")
    if steps < 0:
        raise OpError(f"{op}: number of steps must be non-negative, got {steps}")
    return int(steps)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None,
             requires_grad=False) -> Tensor:
    """``steps`` values from base ** start to base ** end, their exponents evenly spaced.

    As PyTorch computes them: start and end are first converted to the dtype (an integer
    dtype truncates them), each exponent counted from the nearer end in float64, and
    base ** exponent rounded to the dtype."""
    steps = _steps("logspace", steps)
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    d = _dtype(dtype)
    if d is dt.bool_:
        raise OpError("logspace: dtype bool is not supported (as in PyTorch); make the "
                      "values in a number dtype and compare them")
    with np.errstate(all="ignore"):  # (a negative base to a fraction: nan, as PyTorch)
        if steps == 1:
            values = np.array([float(base) ** float(start)])
        else:
            # (converted as full() writes a number: out of the dtype's range refused)
            first, last = (stored_number(d.np, v, "logspace") for v in (start, end))
            # (the span in the dtype's own arithmetic; integers in Python's, unbounded)
            span = last.item() - first.item() if d.np.kind in "iu" else last - first
            step = float(span) / (steps - 1) if steps else 0.0
            i = np.arange(steps, dtype=np.float64)
            exponents = np.where(i < steps // 2, float(first) + step * i,
                                 float(last) - step * (steps - 1 - i))
            values = np.power(float(base), exponents)
        arr = values.astype(d.np)
    return _finish(arr, device, requires_grad)


def _triangle_indices(op, row, col, offset, dtype, device, lower) -> Tensor:
    for name, n in (("row", row), ("col", col)):
        if not isinstance(n, numbers.Integral) or isinstance(n, bool):
            raise TypeError(f"{op}: {name} must be an int, got {type(n).__name__}")
        if n < 0:
            raise OpError(f"{op}: {name} must be non-negative, got {n}")
    d = as_dtype(dtype)
    if d not in (dt.int32, dt.int64):
        raise OpNotImplementedError(f"{op}: dtype must be int32 or int64 (as in PyTorch), "
                                    f"got {d.name}")
    pick = np.tril_indices if lower else np.triu_indices
    rows, cols = pick(int(row), int(offset), int(col))
    return _finish(np.stack([rows, cols]).astype(d.np).reshape(2, -1), device, False)


def tril_indices(row, col, offset=0, *, dtype=dt.int64, device=None) -> Tensor:
    """The (row, column) indices of the lower triangle of a row x col matrix, on and
    below the ``offset``-th diagonal, row by row: a (2, N) tensor."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, True)


def triu_indices(row, col, offset=0, *, dtype=dt.int64, device=None) -> Tensor:
    """The (row, column) indices of the upper triangle of a row x col matrix, on and
    above the ``offset``-th diagonal, row by row: a (2, N) tensor."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, False)


def eye(n, m=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    return _finish(np.eye(n, m, dtype=_dtype(dtype).np), device, requires_grad)


def _float_dtype(op, dtype):
    """``dtype`` (the default float when None), refused unless it is a float: PyTorch's
    uniform and normal kernels exist for those only."""
    d = _dtype(dtype)
    if not d.is_floating_point:
        raise TypeError(f"{op}: draws floats, not {d.name} (as in PyTorch); pass a float "
                        f"dtype, or use randint / randint_like for integers")
    return d


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False,
         **size_keyword) -> Tensor:
    size = _shape(size, size_keyword, "rand")
    d = _float_dtype("rand", dtype)
    with _allocating("rand", size, d):
        arr = numpy_generator(generator).random(
            size, dtype=np.float64 if d is dt.float64 else np.float32)
    return _finish(arr.astype(d.np, copy=False), device, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False,
          **size_keyword) -> Tensor:
    size = _shape(size, size_keyword, "randn")
    d = _float_dtype("randn", dtype)
    with _allocating("randn", size, d):
        arr = numpy_generator(generator).standard_normal(
            size, dtype=np.float64 if d is dt.float64 else np.float32)
    return _finish(arr.astype(d.np, copy=False), device, requires_grad)


def randint(low, high=None, size=None, generator=None, dtype=None, device=None,
            requires_grad=False) -> Tensor:
    """Integers in [low, high); PyTorch's randint(high, size) form works too."""
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if high <= low:
        raise OpError(f"randint: high ({high}) must be greater than low ({low})")
    if requires_grad:
        raise RuntimeError("randint: only floating-point tensors can require gradients")
    arr = numpy_generator(generator).integers(low, high, size=tuple(size or ()))
    return _finish(arr.astype(_dtype(dtype, dt.int64).np), device, False)


def randperm(n, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    if requires_grad:
        raise RuntimeError("randperm: only floating-point tensors can require gradients")
    arr = numpy_generator(generator).permutation(n)
    return _finish(arr.astype(_dtype(dtype, dt.int64).np), device, False)


def _like(x, dtype, device):
    return (x.dtype if dtype is None else as_dtype(dtype),
            x.device if device is None else as_device(device))


def zeros_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    d, dev = _like(x, dtype, device)
    return full(x.shape, 0, d, dev, requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    d, dev = _like(x, dtype, device)
    return full(x.shape, 1, d, dev, requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    d, dev = _like(x, dtype, device)
    return full(x.shape, fill_value, d, dev, requires_grad)


def empty_like(x, dtype=None, device=None, requires_grad=False) -> Tensor:
    d, dev = _like(x, dtype, device)
    return empty(x.shape, dtype=d, device=dev, requires_grad=requires_grad)


def check_layout(op, layout=None, memory_format=None) -> None:
    """Accept PyTorch's ``layout`` and ``memory_format`` where they change nothing for a
    fresh tensor: None, strided, and the dense formats (a new tensor is contiguous;
    PyTorch's preserve_format gives one of its input's strides, with the same values)."""
    if layout is not None and not str(layout).endswith("strided"):
        raise OpError(f"{op}: layout={layout} is not supported; Haelixe's tensors are "
                      f"strided (leave layout out)")
    if memory_format is not None and not str(memory_format).endswith(
            ("preserve_format", "contiguous_format")):
        raise OpError(f"{op}: memory_format={memory_format} is not supported; a new "
                      f"tensor is contiguous (leave memory_format out)")


def _random_like(op, draw, x, generator, dtype, layout, device, requires_grad,
                 memory_format):
    check_layout(op, layout, memory_format)
    d, dev = _like(x, dtype, device)
    return draw(x.shape, generator=generator, dtype=_float_dtype(op, d), device=dev,
                requires_grad=requires_grad)


def rand_like(input, *, generator=None, dtype=None, layout=None, device=None,  # noqa: A002
              requires_grad=False, memory_format=None) -> Tensor:
    """rand_like(input, *, generator=None, dtype=None, layout=None, device=None,
    requires_grad=False, memory_format=None) -> Tensor

    Uniform draws in [0, 1) of input's shape (and its dtype and device unless given)."""
    return _random_like("rand_like", rand, input, generator, dtype, layout, device,
                        requires_grad, memory_format)


def randn_like(input, *, generator=None, dtype=None, layout=None, device=None,  # noqa: A002
               requires_grad=False, memory_format=None) -> Tensor:
    """randn_like(input, *, generator=None, dtype=None, layout=None, device=None,
    requires_grad=False, memory_format=None) -> Tensor

    Standard normal draws of input's shape (and its dtype and device unless given)."""
    return _random_like("randn_like", randn, input, generator, dtype, layout, device,
                        requires_grad, memory_format)
