"""hx.save / hx.load: state dicts as safetensors files.

    hx.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": 1000},
            "ckpt.safetensors")
    ckpt = hx.load("ckpt.safetensors")
    model.load_state_dict(ckpt["model"]); opt.load_state_dict(ckpt["optim"])

Tensors are stored under their dotted paths ("model.embed.weight", "optim.state.m"), so
other tools (``safetensors.torch.load_file``) read them as a flat dict; BF16 is the
format's own "BF16". Everything else (nesting, hyperparameters, step counts) goes into
the file's string metadata as JSON, with each tensor's dtype, shape and CRC-32, and a
SHA-256 of the whole header (key names, dtypes, shapes, offsets and every metadata
string but the digest itself). So a file written here either loads exactly what was
saved or raises CheckpointError, whichever byte of it was damaged.

Files are written atomically: a temporary file beside the target, fsynced, then renamed
over it. Loading reads each tensor straight into its own array, so it needs about the
file's size in memory, not twice that.
"""

from __future__ import annotations

import json
import math
import os
import reprlib
import struct
import zlib

import numpy as np

from . import dtype as dt
from .atomic import AtomicFile
from .creation import from_numpy
from .fileio import json_digest, read_exact, strict_json
from .tensor import Tensor

FORMAT = "haelixe"
VERSION = "2"
_META = "__metadata__"  # the safetensors header's key for string metadata
_DIGEST = "haelixe.digest"
# The metadata keys each version writes, exactly: a key renamed by damage is refused.
_KEYS = {"1": frozenset({"format", "haelixe.version", "haelixe.tree", "haelixe.tensors"})}
_KEYS[VERSION] = _KEYS["1"] | {_DIGEST}
_MAX_HEADER = 100 << 20  # the safetensors library refuses larger headers too
_MAX_DEPTH = 100  # nesting of the saved object; deeper is refused on save and load
_ALIGN = 8  # the header is padded so every tensor's data starts aligned

# safetensors dtype codes <-> Haelixe dtypes
_CODE = {"F64": dt.float64, "F32": dt.float32, "F16": dt.float16, "BF16": dt.bfloat16,
         "I64": dt.int64, "I32": dt.int32, "I16": dt.int16, "I8": dt.int8, "U8": dt.uint8,
         "U16": dt.uint16, "U32": dt.uint32, "U64": dt.uint64, "BOOL": dt.bool_}
_CODE_OF = {d: c for c, d in _CODE.items()}


class CheckpointError(ValueError):
    """A checkpoint file is truncated, damaged or not what this reader expects."""


def _short(value) -> str:
    """A damaged header value for a message, bounded (it may be huge or deeply nested);
    a short string as it is."""
    if isinstance(value, str) and len(value) <= 40 and value.isprintable():
        return value
    return reprlib.repr(value)


def _quoted(name: str) -> str:
    """A tensor name in quotes for a message, cut short when a damaged file made it long."""
    return reprlib.repr(name)


# -- save ------------------------------------------------------------------------------
def _host_array(x) -> np.ndarray:
    if isinstance(x, Tensor):
        a = x.detach().cpu().numpy()
    else:
        a = x
    dt.from_numpy(a.dtype)  # raises, naming the dtype, when Haelixe has no such type
    # (not ascontiguousarray: it turns a 0-d array into 1-d)
    return a if a.flags.c_contiguous else np.array(a, order="C")


def _crc32(a: np.ndarray) -> int:
    # through uint8: bfloat16 has no buffer-protocol format code
    return zlib.crc32(a.reshape(-1).view(np.uint8))


def _where(path: list) -> str:
    return ".".join(path) or "the top"


def _encode(obj, path: list, tensors: dict):
    """The JSON tree of ``obj`` with each tensor replaced by a reference to its entry in
    ``tensors`` (named by its dotted path)."""
    if len(path) > _MAX_DEPTH:
        raise ValueError(f"save: the object nests deeper than {_MAX_DEPTH} levels (at "
                         f"{_where(path[:3])}...); a checkpoint holds state dicts, flatten "
                         f"it")
    if isinstance(obj, (Tensor, np.ndarray)):
        name = ".".join(path)
        if name == _META:
            raise ValueError(f"save: a tensor cannot be stored under the name {_META!r}: "
                             f"the safetensors format keeps the file's metadata under that "
                             f"key; rename it")
        if name in tensors:
            raise ValueError(f"save: two tensors would both be stored as {name!r} (a key "
                             f"containing '.' collides with a nested one); rename one")
        try:
            tensors[name] = _host_array(obj)
        except TypeError as e:
            raise TypeError(f"save: tensor {name!r}: {e}") from None
        return {"__tensor__": name}
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: _encode(v, path + [k], tensors) for k, v in obj.items()}
        # int keys (or ones that look like our markers) are kept as [key, value] pairs
        for k in obj:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError(f"save: dict key {k!r} at {_where(path)} is a "
                                f"{type(k).__name__}; keys must be str or int")
        return {"__dict__": [[k, _encode(v, path + [str(k)], tensors)]
                             for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, path + [str(i)], tensors) for i, v in enumerate(obj)]
        return {"__tuple__": items} if isinstance(obj, tuple) else items
    if isinstance(obj, dt.DType):
        return {"__dtype__": obj.name}
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"save: cannot store {type(obj).__name__} at {_where(path)}; "
                    f"checkpoints hold tensors, numpy arrays, dicts, lists, tuples, "
                    f"numbers, strings, bools, None, dtypes")


def _digest(header: dict) -> str:
    """SHA-256 of the header in a canonical form, leaving out the digest itself."""
    meta = {k: v for k, v in header.get(_META, {}).items() if k != _DIGEST}
    return json_digest({**header, _META: meta})


def _layout(tensors: dict, meta: dict) -> tuple[bytes, list]:
    """The file's first bytes (length, JSON header, padding) and its arrays in file
    order: the widest items first, so every tensor's data starts aligned."""
    order = sorted(tensors, key=lambda n: (-tensors[n].dtype.itemsize, n))
    header, pos = {_META: meta}, 0
    for name in order:
        a = tensors[name]
        header[name] = {"dtype": _CODE_OF[dt.from_numpy(a.dtype)], "shape": list(a.shape),
                        "data_offsets": [pos, pos + a.nbytes]}
        pos += a.nbytes
    meta[_DIGEST] = _digest(header)
    text = json.dumps(header, separators=(",", ":")).encode("ascii")
    text += b" " * (-(8 + len(text)) % _ALIGN)
    if len(text) > _MAX_HEADER:
        raise ValueError(f"save: the checkpoint's header (its nesting, plain values and "
                         f"tensor names) would take {len(text)} bytes, over the safetensors "
                         f"limit of {_MAX_HEADER}; store large lists of numbers as tensors")
    return struct.pack("<Q", len(text)) + text, [tensors[n] for n in order]


def _write(arrays: list, filename: str, head: bytes) -> None:
    """Write the header, then each array's bytes in order."""
    with open(filename, "wb") as f:
        f.write(head)
        for a in arrays:
            f.write(a.reshape(-1).view(np.uint8))  # as bytes: bfloat16 has no buffer code


def save(obj: dict, path) -> None:
    """Save ``obj`` (a state dict, or a dict of them and of plain values) to ``path`` in
    the safetensors format, atomically: ``path`` is either left as it was or replaced by
    the complete new file (which keeps the old file's permissions; a new file gets the
    usual ``0o666`` less the umask)."""
    if not isinstance(obj, dict):
        raise TypeError(f"save: expected a dict (a state dict, or a dict of them), got "
                        f"{type(obj).__name__}; wrap it: hx.save({{'tensor': t}}, path)")
    tensors: dict[str, np.ndarray] = {}
    tree = _encode(obj, [], tensors)
    index = {name: {"dtype": dt.from_numpy(a.dtype).name, "shape": list(a.shape),
                    "crc32": _crc32(a)} for name, a in tensors.items()}
    metadata = {"format": FORMAT, "haelixe.version": VERSION,
                "haelixe.tree": json.dumps(tree), "haelixe.tensors": json.dumps(index)}
    head, arrays = _layout(tensors, metadata)  # every refusal comes before the file
    with AtomicFile(path) as f:
        _write(arrays, f.temp_path, head)


# -- load ------------------------------------------------------------------------------
def _parse_json(raw, what: str, path: str, constants: bool = False):
    """Strict JSON (UTF-8, no repeated keys; NaN and Infinity only where ``constants``),
    any failure a CheckpointError naming ``what``."""
    try:
        return strict_json(raw, constants)
    except ValueError as e:
        raise CheckpointError(f"load: {path} has a corrupted {what} ({e}); restore it from "
                              f"another copy or save again") from None


def _read_header(fd: int, size: int, path: str) -> tuple[dict, int]:
    """The JSON header and where the tensor data starts."""
    if size < 8:
        raise CheckpointError(f"load: {path} is {size} bytes, too short for a safetensors "
                              f"file (8-byte header length first); it is truncated or not "
                              f"a checkpoint")
    prefix = bytearray(8)
    read_exact(fd, prefix, 0)
    (hlen,) = struct.unpack("<Q", prefix)
    if hlen > _MAX_HEADER:
        raise CheckpointError(f"load: {path} does not start with a plausible safetensors "
                              f"header length ({hlen} bytes); it is corrupted or not a "
                              f"safetensors file")
    if 8 + hlen > size:
        raise CheckpointError(f"load: {path} is truncated: its header alone needs {hlen} "
                              f"bytes but the file has {size - 8} after the length; "
                              f"restore it from another copy or save again")
    raw = bytearray(hlen)
    read_exact(fd, raw, 8)
    header = _parse_json(raw, "header", path)
    if not isinstance(header, dict):
        raise CheckpointError(f"load: {path} has a corrupted header (a JSON "
                              f"{type(header).__name__}, not an object); restore it from "
                              f"another copy or save again")
    meta = header.get(_META, {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"load: {path} has a corrupted header: {_META} must map "
                              f"names to strings, got {_short(meta)}")
    return header, 8 + hlen


def _is_count(n) -> bool:
    return type(n) is int and n >= 0


def _entries(header: dict, have: int, path: str) -> list:
    """(name, DType, shape, start, end) of every tensor, in file order, after checking
    that each is well formed and that together they tile the data exactly."""
    entries = []
    for name, info in header.items():
        if name == _META:
            continue
        try:
            code, shape, (lo, hi) = info["dtype"], info["shape"], info["data_offsets"]
            ok = isinstance(code, str) and isinstance(shape, list) and \
                all(map(_is_count, shape)) and _is_count(lo) and _is_count(hi) and lo <= hi
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise CheckpointError(f"load: {path}: corrupted header entry for {_quoted(name)}: "
                                  f"{_short(info)}")
        if code not in _CODE:
            raise CheckpointError(
                f"load: {path}: tensor {_quoted(name)} has dtype {code}, which Haelixe has no "
                f"type for (it reads {sorted(_CODE)}); convert it before saving")
        if hi - lo != math.prod(shape) * _CODE[code].itemsize:
            raise CheckpointError(f"load: {path}: corrupted header: tensor {_quoted(name)} of "
                                  f"shape {shape} {code} spans {hi - lo} bytes")
        entries.append((name, _CODE[code], tuple(shape), lo, hi))
    end = max((e[4] for e in entries), default=0)
    if have < end:
        raise CheckpointError(f"load: {path} is truncated: its tensors need {end} bytes "
                              f"after the header but the file holds {have}; restore it "
                              f"from another copy or save again")
    if have > end:
        raise CheckpointError(f"load: {path} has {have - end} unexpected bytes after its "
                              f"tensors; the file is corrupted")
    entries.sort(key=lambda e: (e[3], e[4]))
    pos = 0
    for name, _, _, lo, hi in entries:
        if lo != pos:
            raise CheckpointError(f"load: {path}: corrupted header: tensor {_quoted(name)} starts "
                                  f"at data byte {lo} where {pos} was expected (tensors "
                                  f"must follow each other without gaps or overlaps)")
        pos = hi
    return entries


def _is_ours(meta: dict) -> bool:
    # Any one marker is enough, so damage to one key cannot turn the checks off.
    return meta.get("format") == FORMAT or any(k.startswith("haelixe") for k in meta)


def _checked_metadata(header: dict, entries: list, path: str) -> tuple[dict, object]:
    """For a file written here: each tensor's CRC-32 and the tree, after checking the
    metadata keys, the tensor index and (from version 2) the header digest."""
    meta = header.get(_META, {})
    version = meta.get("haelixe.version")
    if version not in _KEYS:
        raise CheckpointError(f"load: {path} has Haelixe checkpoint version {version!r}; "
                              f"this Haelixe reads {sorted(_KEYS)} (the file is damaged or "
                              f"from a newer Haelixe)")
    if set(meta) != _KEYS[version] or meta["format"] != FORMAT:
        raise CheckpointError(f"load: {path} has damaged Haelixe metadata (keys "
                              f"{_short(sorted(meta))}, format {_short(meta.get('format'))}); "
                              f"restore it from another copy or save again")
    index = _parse_json(meta["haelixe.tensors"], "tensor index", path)
    names = {e[0] for e in entries}
    if not isinstance(index, dict) or set(index) != names:
        raise CheckpointError(f"load: {path}: its metadata lists tensors "
                              f"{_short(sorted(index) if isinstance(index, dict) else index)}"
                              f" but it holds {_short(sorted(names))}; the file is corrupted")
    crcs = {}
    for name, dtype, shape, _, _ in entries:
        want = index[name]
        if not (isinstance(want, dict) and _is_count(want.get("crc32"))):
            raise CheckpointError(f"load: {path}: corrupted tensor index entry for "
                                  f"{_quoted(name)}: {_short(want)}")
        if want.get("dtype") != dtype.name or want.get("shape") != list(shape):
            raise CheckpointError(
                f"load: {path}: tensor {_quoted(name)} is stored as {dtype.name} {list(shape)} "
                f"but was saved as {_short(want.get('dtype'))} {_short(want.get('shape'))};"
                f" the header was altered, restore the file from another copy")
        crcs[name] = want["crc32"]
    if version != "1" and meta[_DIGEST] != _digest(header):
        raise CheckpointError(f"load: {path}: its header does not match the checksum saved "
                              f"with it (a name, dtype, shape, offset or metadata value was "
                              f"altered); restore the file from another copy or save again")
    return crcs, _parse_json(meta["haelixe.tree"], "tree of saved values", path,
                             constants=True)


def _read_tensors(fd: int, start: int, entries: list, crcs: dict | None,
                  path: str) -> dict:
    """Each tensor read straight into its own new array (checked against its CRC-32
    when the file has them)."""
    tensors = {}
    for name, dtype, shape, lo, _ in entries:
        arr = np.empty(shape, dtype.np)
        raw = arr.reshape(-1).view(np.uint8)
        read_exact(fd, raw, start + lo)
        if crcs is not None:
            crc = zlib.crc32(raw)
            if crc != crcs[name]:
                raise CheckpointError(
                    f"load: {path}: tensor {_quoted(name)} is corrupted (CRC-32 {crc:08x}, saved "
                    f"as {crcs[name]:08x}); restore the file from another copy")
        if dtype is dt.bool_ and raw.size and raw.max() > 1:
            raise CheckpointError(f"load: {path}: bool tensor {_quoted(name)} holds bytes other "
                                  f"than 0 and 1; the file is corrupted")
        tensors[name] = from_numpy(arr)
    return tensors


_MARKERS = ("__tensor__", "__tuple__", "__dict__", "__dtype__")


def _decode(node, tensors: dict, path: str, depth: int = 0):
    """The saved object from its JSON tree (see :func:`_encode`), refusing any shape of
    tree that _encode does not write."""
    if depth > _MAX_DEPTH + 1:
        raise CheckpointError(f"load: {path}: its tree of saved values nests deeper than "
                              f"{_MAX_DEPTH} levels; the file is corrupted")
    if isinstance(node, list):
        return [_decode(v, tensors, path, depth + 1) for v in node]
    if not isinstance(node, dict):
        return node
    if not any(k.startswith("__") for k in node):
        return {k: _decode(v, tensors, path, depth + 1) for k, v in node.items()}
    kind, value = next(iter(node.items()))
    if len(node) == 1 and kind == "__tensor__":
        if not isinstance(value, str) or value not in tensors:
            raise CheckpointError(f"load: {path} refers to tensor {_short(value)}, which "
                                  f"the file does not hold; it is corrupted")
        return tensors[value]
    if len(node) == 1 and kind == "__tuple__" and isinstance(value, list):
        return tuple(_decode(v, tensors, path, depth + 1) for v in value)
    if len(node) == 1 and kind == "__dict__" and isinstance(value, list) and all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], (str, int))
            and not isinstance(p[0], bool) for p in value):
        return {k: _decode(v, tensors, path, depth + 1) for k, v in value}
    if len(node) == 1 and kind == "__dtype__" and isinstance(value, str):
        try:
            return dt.from_name(value)
        except TypeError:
            pass
    raise CheckpointError(f"load: {path}: its tree of saved values holds {_short(node)}, "
                          f"which hx.save never writes; the file is corrupted")


def load(path) -> dict:
    """Load a file written by :func:`save` (the same nesting and values back, tensors as
    CPU tensors), or any safetensors file (a flat dict name -> tensor).

    Raises CheckpointError for a truncated or damaged file (for a file written by
    :func:`save`, damage anywhere: header, metadata or tensor bytes), or a dtype
    Haelixe has no type for.
    """
    path = os.fspath(path)
    with open(path, "rb", buffering=0) as f:
        fd, size = f.fileno(), os.fstat(f.fileno()).st_size
        try:
            header, start = _read_header(fd, size, path)
            entries = _entries(header, size - start, path)
            ours = _is_ours(header.get(_META, {}))
            crcs, tree = _checked_metadata(header, entries, path) if ours else (None, None)
            tensors = _read_tensors(fd, start, entries, crcs, path)
        except EOFError as e:
            raise CheckpointError(f"load: {path} was truncated while being read ({e}); "
                                  f"restore it from another copy or save again") from None
    if not ours:
        return tensors
    saved = _decode(tree, tensors, path)
    if not isinstance(saved, dict):  # save() takes only a dict
        raise CheckpointError(f"load: {path}: its tree of saved values is a "
                              f"{type(saved).__name__}, not a dict; the file is corrupted")
    return saved
