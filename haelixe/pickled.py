"""``torch.save`` / ``torch.load`` (and ``torch.serialization``): any object tree, as
PyTorch saves it, in a pickle that loads without running code.

    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": 10}, "c.pt")
    ckpt = torch.load("c.pt")                      # weights_only=True, PyTorch's default

Tensors (with their dtype, device and requires_grad; Parameters stay Parameters), numpy
arrays, numbers, strings, bytes, None, dicts (OrderedDicts too), lists, tuples, sets,
dtypes and devices load by default. As in PyTorch, ``weights_only=True`` refuses every
other class or function the file names, with an UnpicklingError naming it and the fix:
allow it with ``add_safe_globals([cls])`` or ``with safe_globals([cls]):`` (they widen
what loads, exactly as in PyTorch), or pass ``weights_only=False`` for a file you trust
(plain pickle: it can run any code the file names, as PyTorch warns). A whole Module
saved with ``torch.save(model, f)`` loads back that way.

The file is Haelixe's own (a header line, then the pickle), not PyTorch's zip archive:
files move between Haelixe programs; between Haelixe and PyTorch use safetensors
(``hx.save`` / ``hx.load``). Tensors that were views of one another come back as
separate tensors (one object saved twice is still one object).
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import io
import os
import pickle

import numpy as np

from . import dtype as dt
from .creation import from_numpy
from .device import Device, as_device
from .tensor import Tensor

MAGIC = b"HAELIXE-PICKLE 1\n"
_ZIP = b"PK\x03\x04"
_NAMES = {d.name: d for d in dt.ALL}  # Haelixe's dtypes by name (bfloat16 has no numpy code)
_user_safe: dict = {}  # (module, qualname) -> object, from add_safe_globals


# -- what a file holds: the reduce functions a loader may call ---------------------------
def _rebuild_array(raw: bytes, dtype_name: str, shape: tuple) -> np.ndarray:
    np_dtype = _NAMES[dtype_name].np if dtype_name in _NAMES else np.dtype(dtype_name)
    if np_dtype.hasobject:
        raise pickle.UnpicklingError("torch.load: an object array cannot be loaded safely")
    return np.frombuffer(raw, np_dtype).reshape(shape).copy()


def _rebuild_tensor(array: np.ndarray, requires_grad: bool, device: str,
                    is_param: bool = False) -> Tensor:
    t = from_numpy(array)
    target = _MAP_LOCATION.get("map")
    place = target(device) if target is not None else as_device(device)
    if place is not t.device:
        t = t.to(place)
    if is_param:
        from .nn.module import Parameter

        return Parameter(t, requires_grad)
    return t.requires_grad_(True) if requires_grad else t


_MAP_LOCATION: dict = {}
SAFE = {(f.__module__, f.__qualname__): f for f in (
    _rebuild_array, _rebuild_tensor, dt.from_name, Device, collections.OrderedDict,
    builtins.set, builtins.frozenset, builtins.complex, builtins.slice, builtins.range,
    builtins.bytearray)}


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            host = obj.detach().cpu().numpy()
            return _rebuild_tensor, (np.array(host, order="C"), obj.requires_grad,
                                     obj.device.type, bool(obj._is_param))
        if isinstance(obj, np.ndarray):
            if obj.dtype.hasobject:
                raise pickle.PicklingError("torch.save: a numpy array of Python objects "
                                           "cannot be saved safely; convert it to numbers")
            try:  # (the lookup that also knows bfloat16 before its first use)
                name = dt._BY_NP[obj.dtype].name
            except KeyError:
                name = obj.dtype.str
            return _rebuild_array, (obj.tobytes(order="C"), name, obj.shape)
        if isinstance(obj, dt.DType):
            return dt.from_name, (obj.name,)
        return NotImplemented


def save(obj, f, pickle_module=None, pickle_protocol: int = 4,
         _use_new_zipfile_serialization: bool = True) -> None:
    """Write ``obj`` to ``f`` (a path or a binary file object)."""
    if pickle_module not in (None, pickle):
        raise ValueError("torch.save: only the standard pickle module is supported")
    buf = io.BytesIO()
    buf.write(MAGIC)
    _Pickler(buf, protocol=max(int(pickle_protocol), 2)).dump(obj)
    if hasattr(f, "write"):
        f.write(buf.getvalue())
        return
    from .atomic import AtomicFile

    with AtomicFile(f) as out, open(out.temp_path, "wb") as fh:
        fh.write(buf.getvalue())


class _SafeUnpickler(pickle.Unpickler):
    """Only the SAFE callables and classes, and those allowed by add_safe_globals."""

    def find_class(self, module, name):
        key = (module, name)
        found = SAFE.get(key) or _user_safe.get(key)
        if found is None:
            raise pickle.UnpicklingError(
                f"Weights only load failed: the file names {module}.{name}, which "
                f"weights_only=True does not load. If you trust it, allow it with "
                f"torch.serialization.add_safe_globals([{name}]) (or `with "
                f"torch.serialization.safe_globals([{name}]):`), or load with "
                f"weights_only=False (which can run code the file names)")
        return found


def _map_location(map_location):
    """A function saved device type -> Device."""
    if map_location is None:
        return None
    if isinstance(map_location, dict):
        table = {as_device(k): as_device(v) for k, v in map_location.items()}
        return lambda saved: table.get(as_device(saved), as_device(saved))
    if callable(map_location) and not isinstance(map_location, (str, Device)):
        def call(saved):  # PyTorch's (storage, location) -> storage: a CPU one, or moved
            out = map_location(from_numpy(np.zeros(0, np.float32)), saved)
            return out.device if isinstance(out, Tensor) else as_device(saved)

        return call
    place = as_device(map_location)
    return lambda saved: place


def load(f, map_location=None, pickle_module=None, *, weights_only: bool | None = None,
         mmap=None, **pickle_load_args):
    """Read an object written by :func:`save` (see the module docstring)."""
    if pickle_module not in (None, pickle):
        raise ValueError("torch.load: only the standard pickle module is supported")
    if hasattr(f, "read"):
        data = f.read()
    else:
        with open(os.fspath(f), "rb") as fh:
            data = fh.read()
    if data.startswith(_ZIP):
        raise pickle.UnpicklingError(
            "torch.load: this file is PyTorch's zip checkpoint, which Haelixe does not "
            "read; in PyTorch, save the state dict with safetensors "
            "(safetensors.torch.save_file) and load it with hx.load")
    if not data.startswith(MAGIC):
        raise pickle.UnpicklingError(f"torch.load: not a file torch.save wrote here (it "
                                     f"starts with {data[:16]!r})")
    stream = io.BytesIO(data[len(MAGIC):])
    safe = weights_only is None or weights_only
    unpickler = (_SafeUnpickler if safe else pickle.Unpickler)(stream, **pickle_load_args)
    _MAP_LOCATION["map"] = _map_location(map_location)
    try:
        return unpickler.load()
    finally:
        _MAP_LOCATION.pop("map", None)


# -- widening what loads, as PyTorch's torch.serialization ---------------------------------
def _key(obj) -> tuple:
    if isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[1], str):
        obj, name = obj
        return tuple(name.rsplit(".", 1)) if "." in name else (obj.__module__, name), obj
    return (obj.__module__, obj.__qualname__), obj


def add_safe_globals(safe_globals) -> None:
    """Let weights_only=True loads build these classes and call these functions."""
    for g in safe_globals:
        key, obj = _key(g)
        _user_safe[key] = obj


def get_safe_globals() -> list:
    return list(_user_safe.values())


def clear_safe_globals() -> None:
    _user_safe.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """Within the block, add_safe_globals(safe_globals); afterwards, as before."""
    before = dict(_user_safe)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _user_safe.clear()
        _user_safe.update(before)


def __getattr__(name):
    from .closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), {
        "default_restore_location": "map_location= of torch.load"})
