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

The file is PyTorch's own checkpoint archive (``haelixe.torch_archive``): PyTorch
reads what Haelixe saves and Haelixe reads what PyTorch saves, tensors that were views
of one storage coming back as views of one storage. Haelixe's GPU is PyTorch's ``cuda``
in a file, both ways. Numpy arrays load under ``weights_only=True`` (PyTorch asks for
``safe_globals`` first): rebuilding one runs no code. Files of the format Haelixe wrote
before (a header line, then the pickle) still load.
"""

from __future__ import annotations

import _compat_pickle
import builtins
import collections
import contextlib
import io
import os
import pickle
import struct

import numpy as np

from . import dtype as dt
from . import torch_archive
from .creation import from_numpy
from .device import Device, as_device
from .tensor import Tensor

MAGIC = b"HAELIXE-PICKLE 1\n"
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


def save(obj, f, pickle_module=None, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True) -> None:
    """Write ``obj`` to ``f`` (a path or a binary file object) as PyTorch's archive."""
    if pickle_module not in (None, pickle):
        raise ValueError("torch.save: only the standard pickle module is supported")
    if not _use_new_zipfile_serialization:
        raise ValueError("torch.save: Haelixe writes PyTorch's zip archive only (PyTorch "
                         "1.6 and later read it); drop _use_new_zipfile_serialization=False")
    protocol = max(int(pickle_protocol), 2)
    if hasattr(f, "write"):
        torch_archive.write(obj, f, protocol)
        return
    from .atomic import AtomicFile

    folder = os.path.splitext(os.path.basename(os.fspath(f)))[0] or "archive"
    with AtomicFile(f) as out, open(out.temp_path, "wb") as fh:
        torch_archive.write(obj, fh, protocol, folder=folder)


def _refusal(module: str, name: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(
        f"Weights only load failed: the file names {module}.{name}, which "
        f"weights_only=True does not load. If you trust it, allow it with "
        f"torch.serialization.add_safe_globals([{name}]) (or `with "
        f"torch.serialization.safe_globals([{name}]):`), or load with "
        f"weights_only=False (which can run code the file names)")


class _SafeUnpickler(pickle.Unpickler):
    """A file of the format Haelixe wrote before: only the SAFE callables and classes,
    and those allowed by add_safe_globals."""

    def find_class(self, module, name):
        key = (module, name)
        found = SAFE.get(key) or _user_safe.get(key)
        if found is None:
            raise _refusal(module, name)
        return found


class _ArchiveUnpickler(pickle.Unpickler):
    """PyTorch's archive: the names its files use (torch's rebuild functions, storage
    classes, dtypes, devices), numpy's arrays, the SAFE ones and those allowed by
    add_safe_globals; with ``safe`` off, anything else too (plain pickle)."""

    def __init__(self, file, reader, safe: bool, **kwargs):
        super().__init__(file, **kwargs)
        self.reader, self.safe = reader, safe
        self.known = {**torch_archive.names(reader), **torch_archive.NUMPY_NAMES, **SAFE}

    def persistent_load(self, pid):
        return self.reader.storage(pid)

    def find_class(self, module, name):
        # (protocol 2 writes Python 2's names, as __builtin__.set: read as Python 3's)
        module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        key = (module, name)
        found = self.known.get(key, _ABSENT)
        if found is _ABSENT:
            found = _user_safe.get(key, _ABSENT)
        if found is not _ABSENT:
            return found
        if self.safe:
            raise _refusal(module, name)
        return super().find_class(module, name)


_ABSENT = object()
#: how a pickle of PyTorch's format before its archive starts (protocol 2, its magic number)
_LEGACY = b"\x80\x02\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")


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
    """Read an object written by :func:`save` (see the module docstring). ``mmap=True``
    maps each storage of the file instead of reading it (copy on write, as PyTorch's:
    an in-place change of a tensor does not reach the file)."""
    if pickle_module not in (None, pickle):
        raise ValueError("torch.load: only the standard pickle module is supported")
    safe = weights_only is None or weights_only
    if mmap:
        if hasattr(f, "read"):
            raise ValueError("torch.load: mmap=True maps a file: f must be a file path, "
                             "not a file object (as in PyTorch)")
        path = os.fspath(f)
        with open(path, "rb") as fh:
            head = fh.read(4)
        if not torch_archive.is_archive(head):
            raise ValueError("torch.load: mmap=True needs PyTorch's zip archive (what "
                             "torch.save writes); this file is not one")
        return _load_archive(path, map_location, safe, pickle_load_args, mapped=path)
    if hasattr(f, "read"):
        data = f.read()
    else:
        with open(os.fspath(f), "rb") as fh:
            data = fh.read()
    if torch_archive.is_archive(data):
        return _load_archive(data, map_location, safe, pickle_load_args)
    if data.startswith(_LEGACY):
        raise pickle.UnpicklingError(
            "torch.load: this file is in PyTorch's format from before its zip archive "
            "(PyTorch before 1.6, or _use_new_zipfile_serialization=False), which Haelixe "
            "does not read; in PyTorch, load it and save it again with torch.save")
    if not data.startswith(MAGIC):
        raise pickle.UnpicklingError(f"torch.load: not a file torch.save wrote (it "
                                     f"starts with {data[:16]!r})")
    stream = io.BytesIO(data[len(MAGIC):])
    unpickler = (_SafeUnpickler if safe else pickle.Unpickler)(stream, **pickle_load_args)
    _MAP_LOCATION["map"] = _map_location(map_location)
    try:
        return unpickler.load()
    finally:
        _MAP_LOCATION.pop("map", None)


def _load_archive(data, map_location, safe: bool, pickle_load_args, mapped=None):
    """``data``: the file's bytes, or its path; ``mapped``: the path whose storage
    records are mapped (copy on write) instead of read."""
    place = _map_location(map_location) or as_device
    with torch_archive.open_zip(data) as zf:
        reader = torch_archive.Reader(zf, place, mapped)
        stream = io.BytesIO(reader.pickle_bytes())
        try:
            return _ArchiveUnpickler(stream, reader, safe, **pickle_load_args).load()
        except pickle.UnpicklingError:
            raise
        except Exception as e:
            # a damaged pickle; with weights_only=False a class the file names may itself
            # fail (not found, or its own error), which is the user's to see as it is
            if not safe and not isinstance(e, _DAMAGED):
                raise
            raise torch_archive.ArchiveError(
                f"torch.load: the archive's data.pkl cannot be read ({type(e).__name__}: "
                f"{e}); the file is damaged") from None


_DAMAGED = (EOFError, ValueError, KeyError, IndexError, struct.error, OverflowError)


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
