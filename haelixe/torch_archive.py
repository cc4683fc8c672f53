"""PyTorch's checkpoint file, read and written without PyTorch: the zip archive that
``torch.save`` writes (and has since PyTorch 1.6), so that a checkpoint moves both ways
between PyTorch and Haelixe.

The archive holds, under one folder:

- ``data.pkl``: the object tree as a pickle, in which each tensor is a call of
  ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
  hooks)`` and each storage a *persistent id* ``("storage", torch.FloatStorage, key,
  location, numel)`` naming its record;
- ``data/<key>``: each storage's bytes, once, however many tensors view it (each record
  starts at a multiple of 64 bytes, so that PyTorch can memory-map it);
- ``byteorder``, ``version``, ``.format_version``, ``.storage_alignment`` and
  ``.data/serialization_id``, small records PyTorch reads or writes beside them.

Tensors that were views of one storage come back as tensors over one Storage, as in
PyTorch. Haelixe's GPU is written as PyTorch's ``cuda`` (the device a PyTorch program
asks for), and ``cuda`` reads back as Haelixe's GPU. Which classes and functions a file
may name is the caller's policy (``haelixe.pickled``): this module knows only the names
PyTorch's own files use.
"""

from __future__ import annotations

import collections
import hashlib
import io
import os
import pickle
import struct
import sys
import zipfile
import zlib

import numpy as np

from . import dtype as dt

try:  # (numpy 2's name; numpy 1 has it as numpy.core)
    from numpy._core import multiarray as _multiarray
except ImportError:  # pragma: no cover
    from numpy.core import multiarray as _multiarray
from .creation import from_numpy
from .device import Device, as_device
from .layout import Size
from .tensor import Tensor

#: PyTorch's legacy storage classes, each one dtype's (the dtypes without one, as
#: uint16, are written as ``torch.storage.UntypedStorage`` bytes with their dtype)
STORAGE_CLASSES = {"FloatStorage": dt.float32, "DoubleStorage": dt.float64,
                   "HalfStorage": dt.float16, "BFloat16Storage": dt.bfloat16,
                   "LongStorage": dt.int64, "IntStorage": dt.int32, "ShortStorage": dt.int16,
                   "CharStorage": dt.int8, "ByteStorage": dt.uint8, "BoolStorage": dt.bool_}
_CLASS_OF = {d: name for name, d in STORAGE_CLASSES.items()}
_ALIGNMENT = 64
_PAD_FIELD = 0x4246  # the zip extra field PyTorch pads a record's header with ("FB")
_PICKLE_PROTOCOL = 2  # what torch.save writes by default


def is_archive(head: bytes) -> bool:
    return head.startswith(b"PK\x03\x04")


# -- writing ---------------------------------------------------------------------------------
class Global:
    """A name written into the pickle as a GLOBAL (``torch FloatStorage``), without
    importing its module: the file is read by PyTorch, which has it."""

    _made: dict = {}

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __call__(self, *args):  # (pickle asks a reduce's function to be callable)
        raise TypeError(f"{self.module}.{self.name} is PyTorch's, named in a file only")

    @classmethod
    def of(cls, module: str, name: str) -> Global:
        key = (module, name)
        if key not in cls._made:  # (one object per name: the pickle memoizes it once)
            cls._made[key] = cls(module, name)
        return cls._made[key]


class _StorageRecord:
    """One storage as the archive writes it: its record's key and its bytes."""

    def __init__(self, key: str, data: np.ndarray, dtype, location: str):
        self.key, self.data, self.dtype, self.location = key, data, dtype, location


class _ArchivePickler(pickle._Pickler):  # (Python's pickler: it lets Global write itself)
    def __init__(self, file, protocol):
        super().__init__(file, protocol)
        self.records: dict = {}  # id(Storage) -> (_StorageRecord, the Storage, kept alive)

    dispatch = dict(pickle._Pickler.dispatch)

    def _save_global(self, obj: Global) -> None:
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[Global] = _save_global
    # a dtype is torch's name of it, as PyTorch writes its own
    dispatch[dt.DType] = lambda self, obj: self.save(Global.of("torch", obj.name))

    def persistent_id(self, obj):
        if obj.__class__ is not _StorageRecord:
            return None
        cls = _CLASS_OF.get(obj.dtype)
        numel = obj.data.size if cls is not None else obj.data.nbytes
        kind = Global.of("torch", cls) if cls is not None else \
            Global.of("torch.storage", "UntypedStorage")
        return ("storage", kind, obj.key, obj.location, numel)

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return self._reduce_tensor(obj)
        if obj.__class__ is Device:
            return Global.of("torch", "device"), ("cuda" if obj.type == "gpu" else "cpu",)
        if obj.__class__ is Size:
            return Global.of("torch", "Size"), (tuple(obj),)
        if isinstance(obj, np.ndarray) and obj.dtype.hasobject:
            raise pickle.PicklingError("torch.save: a numpy array of Python objects cannot "
                                       "be saved safely; convert it to numbers")
        return NotImplemented

    def _reduce_tensor(self, t: Tensor):
        if t._is_param:  # (its data as a plain tensor, requires_grad on the Parameter)
            return Global.of("torch._utils", "_rebuild_parameter"), (
                t.detach(), t.requires_grad, collections.OrderedDict())
        record, offset, strides = self._record_of(t)
        args = (record, offset, tuple(t.shape), strides, t.requires_grad,
                collections.OrderedDict())
        if t.dtype in _CLASS_OF:
            return Global.of("torch._utils", "_rebuild_tensor_v2"), args
        return Global.of("torch._utils", "_rebuild_tensor_v3"), args + (
            Global.of("torch", t.dtype.name),)

    def _record_of(self, t: Tensor):
        """(the record of t's storage, t's offset and strides in it); a tensor with a
        negative stride (PyTorch has none) is written as a contiguous copy of its own."""
        strides = tuple(t.strides)
        if any(s < 0 for s in strides):
            t = t.contiguous()
            strides = tuple(t.strides)
        storage = t._storage
        entry = self.records.get(id(storage))
        if entry is None:
            data = _storage_bytes(t)
            location = "cuda:0" if t.device.type == "gpu" else "cpu"
            entry = (_StorageRecord(str(len(self.records)), data, t.dtype, location), storage)
            self.records[id(storage)] = entry
        return entry[0], t.offset, strides


def _storage_bytes(t: Tensor) -> np.ndarray:
    """The whole of t's storage, on the host, as a flat array of its dtype."""
    storage = t._storage
    n = storage.nbytes // t.dtype.itemsize
    flat = Tensor._over(t._be.make_view(storage, (n,), (1,), 0), storage, (n,), (1,), 0)
    return np.ascontiguousarray(flat.cpu().numpy()).reshape(-1)


def write(obj, fh, protocol: int = _PICKLE_PROTOCOL, folder: str = "archive") -> None:
    """Write ``obj`` to the binary file ``fh`` as PyTorch's archive."""
    buf = io.BytesIO()
    pickler = _ArchivePickler(buf, protocol)
    pickler.dump(obj)
    pickled = buf.getvalue()
    records = [("data.pkl", pickled), (".format_version", b"1"),
               (".storage_alignment", str(_ALIGNMENT).encode()),
               ("byteorder", sys.byteorder.encode())]
    for record, _ in pickler.records.values():
        records.append((f"data/{record.key}", record.data.tobytes()))
    digest = int.from_bytes(hashlib.sha1(pickled).digest()[:16], "little")
    records += [("version", b"3\n"), (".data/serialization_id", f"{digest:040d}".encode())]
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
        for name, data in records:
            info = zipfile.ZipInfo(f"{folder}/{name}", date_time=(1980, 1, 1, 0, 0, 0))
            info.extra = _padding(zf.fp.tell(), len(info.filename))
            zf.writestr(info, data)


def _padding(offset: int, name_len: int) -> bytes:
    """The extra field that starts a record's data at a multiple of the alignment (a
    local header is 30 bytes, then the name, then the extra field)."""
    start = offset + 30 + name_len + 4
    pad = -start % _ALIGNMENT
    return struct.pack("<HH", _PAD_FIELD, pad) + b"Z" * pad


#: what Python's zipfile raises on a damaged archive (a flipped flag byte asks for a
#: password, a compression method or a zip version it lacks)
_ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError,
               RuntimeError, struct.error, zlib.error)


# -- reading ---------------------------------------------------------------------------------
class ArchiveError(pickle.UnpicklingError):
    """A PyTorch archive that cannot be read: what is wrong, and where."""


class Reader:
    """The records of one archive, and the functions its pickle names, bound to them.

    ``place(saved_location) -> Device`` says where each storage goes (map_location);
    ``mapped``, the archive's path, maps each storage record instead of reading it."""

    def __init__(self, zf: zipfile.ZipFile, place, mapped=None):
        names = [n for n in zf.namelist() if n.endswith("data.pkl")]
        if len(names) != 1:
            raise ArchiveError(f"torch.load: a PyTorch archive holds one data.pkl, this zip "
                               f"holds {len(names)}: it is not a checkpoint torch.save "
                               f"wrote")
        self.zf, self.prefix, self.place = zf, names[0][:-len("data.pkl")], place
        self.mapped = mapped
        order = self._read("byteorder", missing_ok=True)
        self.swap = order not in (None, sys.byteorder.encode())
        self.flat: dict = {}  # (key, dtype) -> the storage as a flat tensor, on its device

    def record(self, name: str) -> np.ndarray:
        """Record ``name``'s bytes as a flat uint8 array: read, or mapped copy-on-write
        where the archive is mapped and stores the record as it is."""
        if self.mapped is not None:
            start, size = self._stored_span(name)
            if start is not None:
                if size == 0:
                    return np.zeros(0, np.uint8)
                return np.memmap(self.mapped, np.uint8, "c", start, (size,))
        return np.frombuffer(self._read(name), np.uint8).copy()

    def _stored_span(self, name: str):
        """(offset, size) in the file of a record stored uncompressed, else (None, 0)."""
        try:
            info = self.zf.getinfo(self.prefix + name)
        except KeyError:
            return None, 0
        if info.compress_type != zipfile.ZIP_STORED:
            return None, 0
        with open(self.mapped, "rb") as fh:  # (the local header's own name and extra)
            fh.seek(info.header_offset)
            local = fh.read(30)
        if len(local) != 30 or local[:4] != b"PK\x03\x04":
            return None, 0
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        start = info.header_offset + 30 + name_len + extra_len
        if start + info.file_size > os.path.getsize(self.mapped):
            return None, 0
        return start, info.file_size

    def pickle_bytes(self) -> bytes:
        return self._read("data.pkl")

    def _read(self, name: str, missing_ok: bool = False):
        try:
            return self.zf.read(self.prefix + name)
        except KeyError:
            if missing_ok:
                return None
            raise ArchiveError(f"torch.load: the archive has no record {name!r}; the file "
                               f"is truncated or was not written by torch.save") from None
        except _ZIP_ERRORS as e:
            raise ArchiveError(f"torch.load: the archive's record {name!r} cannot be read "
                               f"({e}); the file is damaged") from None

    # what the pickle's persistent ids and names turn into
    def storage(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise ArchiveError(f"torch.load: unknown persistent id {pid!r} in the archive")
        _, kind, key, location, numel = pid
        if not isinstance(kind, _StorageKind) or not isinstance(key, str) or \
                not isinstance(numel, int):
            raise ArchiveError(f"torch.load: a malformed storage entry {pid!r}")
        return _StorageRef(self, key, kind.dtype, str(location), numel)

    def tensor_of(self, ref, dtype, offset, size, stride, requires_grad) -> Tensor:
        if not isinstance(ref, _StorageRef):
            raise ArchiveError("torch.load: a tensor rebuilt from something other than a "
                               "storage record")
        flat = ref.flat(dtype)
        size, stride = tuple(size), tuple(stride)
        _check_layout(ref.key, flat.shape[0], offset, size, stride)
        raw = flat._be.make_view(flat._storage, size, stride, offset)
        t = Tensor._over(raw, flat._storage, size, stride, offset)
        return t.requires_grad_(True) if requires_grad else t


class _StorageKind:
    """What ``torch FloatStorage`` (and the others) names: a storage class, its dtype
    (None for ``UntypedStorage``: bytes, the tensor says its dtype)."""

    def __init__(self, dtype):
        self.dtype = dtype


class _StorageRef:
    """A storage the pickle refers to; its bytes are read once, when a tensor needs them."""

    def __init__(self, reader: Reader, key, dtype, location, numel):
        self.reader, self.key, self.dtype, self.location, self.numel = \
            reader, key, dtype, location, numel

    def flat(self, dtype) -> Tensor:
        reader = self.reader
        cached = reader.flat.get((self.key, dtype))
        if cached is not None:
            return cached
        raw = reader.record(f"data/{self.key}")
        itemsize = 1 if self.dtype is None else self.dtype.itemsize
        if raw.size != self.numel * itemsize:
            raise ArchiveError(f"torch.load: storage {self.key} holds {raw.size} bytes, its "
                               f"entry says {self.numel} elements of {itemsize} bytes; the "
                               f"file is damaged")
        if raw.size % dtype.itemsize:
            raise ArchiveError(f"torch.load: storage {self.key} of {raw.size} bytes does not "
                               f"hold whole {dtype.name} elements")
        array = raw.view(dtype.np)
        if reader.swap:
            array = array.byteswap()
        t = from_numpy(array)
        place = reader.place(self.location)
        if place is not t.device:
            t = t.to(place)
        reader.flat[(self.key, dtype)] = t
        return t


def _check_layout(key, numel, offset, size, stride) -> None:
    ok = isinstance(offset, int) and offset >= 0 and len(size) == len(stride) and all(
        isinstance(n, int) and n >= 0 for n in size + stride)
    if ok and 0 not in size:
        ok = offset + sum((n - 1) * s for n, s in zip(size, stride)) < numel
    if not ok:
        raise ArchiveError(f"torch.load: a tensor of size {size}, stride {stride} and offset "
                           f"{offset} does not fit storage {key} of {numel} elements; the "
                           f"file is damaged")


def _latin1_bytes(text, encoding="latin1") -> bytes:
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise ArchiveError(f"torch.load: bytes encoded as {encoding!r} in the pickle")
    return text.encode("latin1")


def names(reader: Reader) -> dict:
    """(module, name) -> object for every name PyTorch's files use, bound to ``reader``."""
    from .nn.module import Parameter

    def rebuild_v2(storage, offset, size, stride, requires_grad, hooks, metadata=None):
        dtype = storage.dtype if isinstance(storage, _StorageRef) else None
        if dtype is None:
            raise ArchiveError("torch.load: an untyped storage rebuilt without a dtype")
        return reader.tensor_of(storage, dtype, offset, size, stride, requires_grad)

    def rebuild_v3(storage, offset, size, stride, requires_grad, hooks, dtype,
                   metadata=None):
        if not isinstance(dtype, dt.DType):
            raise ArchiveError(f"torch.load: a tensor of dtype {dtype!r}")
        return reader.tensor_of(storage, dtype, offset, size, stride, requires_grad)

    def rebuild_parameter(data, requires_grad, hooks, state=None):
        p = Parameter(data, requires_grad)
        for k, v in (state or {}).items():  # (Python attributes the Parameter carried)
            setattr(p, k, v)
        return p

    def rebuild_from_type(func, new_type, args, state):
        t = func(*args)
        if new_type is Parameter:
            t = Parameter(t, t.requires_grad)
        elif new_type is not Tensor:
            raise ArchiveError(f"torch.load: a tensor of class {new_type!r}")
        return t

    def device(kind="cpu", index=None):
        return as_device(kind if index is None else f"{kind}:{index}")

    found = {("torch._utils", "_rebuild_tensor_v2"): rebuild_v2,
             ("torch._utils", "_rebuild_tensor_v3"): rebuild_v3,
             ("torch._utils", "_rebuild_parameter"): rebuild_parameter,
             ("torch._utils", "_rebuild_parameter_with_state"): rebuild_parameter,
             ("torch._tensor", "_rebuild_from_type_v2"): rebuild_from_type,
             ("torch", "Tensor"): Tensor, ("torch.nn.parameter", "Parameter"): Parameter,
             ("torch", "device"): device, ("torch", "Size"): Size,
             ("torch.storage", "UntypedStorage"): _StorageKind(None),
             ("collections", "OrderedDict"): collections.OrderedDict,
             # (how pickle's protocol 2 writes bytes: as text to encode as latin-1)
             ("_codecs", "encode"): _latin1_bytes}
    for name, d in STORAGE_CLASSES.items():
        found[("torch", name)] = _StorageKind(d)
    for d in dt.ALL:
        found[("torch", d.name)] = d
    return found


#: numpy's own pickle of an array and of a scalar: safe to rebuild (an object array's
#: elements are unpickled under the same policy as everything else)
NUMPY_NAMES = {(m, n): obj for m in ("numpy.core.multiarray", "numpy._core.multiarray")
               for n, obj in (("_reconstruct", _multiarray._reconstruct),
                              ("scalar", _multiarray.scalar))}
NUMPY_NAMES.update({("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype})
NUMPY_NAMES.update({("ml_dtypes", d.np.type.__name__): d.np.type for d in dt.ALL
                    if d.np.type.__module__.startswith("ml_dtypes")})


def open_zip(data) -> zipfile.ZipFile:
    """The archive of ``data``: the file's bytes, or its path."""
    try:
        return zipfile.ZipFile(io.BytesIO(data) if isinstance(data, bytes) else data)
    except _ZIP_ERRORS as e:
        raise ArchiveError(f"torch.load: the file starts as a zip archive but is not one "
                           f"that can be read ({e}); it is truncated or damaged") from None
