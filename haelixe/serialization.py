"""hx.save / hx.load: state dicts as safetensors files.

    hx.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": 1000},
            "ckpt.safetensors")
    ckpt = hx.load("ckpt.safetensors")
    model.load_state_dict(ckpt["model"]); opt.load_state_dict(ckpt["optim"])

Tensors are stored under their dotted paths ("model.embed.weight", "optim.state.m"), so
other tools (``safetensors.torch.load_file``) read them as a flat dict; BF16 is the
format's own "BF16". Everything else (nesting, hyperparameters, step counts) goes into
the file's string metadata as JSON, with each tensor's dtype, shape and CRC-32 so a
damaged file is caught on load. Files are written atomically: a temporary file beside
the target, fsynced, then renamed over it.
"""

from __future__ import annotations

import json
import math
import os
import struct
import zlib

import numpy as np
import safetensors

from . import dtype as dt
from .atomic import AtomicFile
from .creation import from_numpy
from .tensor import Tensor

FORMAT = "haelixe"
VERSION = "1"
_MAX_HEADER = 100 << 20  # the safetensors library refuses larger headers too

# safetensors dtype codes <-> Haelixe dtypes
_CODE = {"F64": dt.float64, "F32": dt.float32, "F16": dt.float16, "BF16": dt.bfloat16,
         "I64": dt.int64, "I32": dt.int32, "BOOL": dt.bool_}
_NAME_OF_CODE = {c: d.name for c, d in _CODE.items()}


class CheckpointError(ValueError):
    """A checkpoint file is truncated, damaged or not what this reader expects."""


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


def _encode(obj, path: list, tensors: dict):
    """The JSON tree of ``obj`` with each tensor replaced by a reference to its entry in
    ``tensors`` (named by its dotted path)."""
    if isinstance(obj, (Tensor, np.ndarray)):
        name = ".".join(path)
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
                raise TypeError(f"save: dict key {k!r} at {'.'.join(path) or 'the top'} "
                                f"is a {type(k).__name__}; keys must be str or int")
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
    raise TypeError(f"save: cannot store {type(obj).__name__} at "
                    f"{'.'.join(path) or 'the top'}; checkpoints hold tensors, numpy "
                    f"arrays, dicts, lists, tuples, numbers, strings, bools, None, dtypes")


def _write(specs: dict, filename: str, metadata: dict) -> None:
    """Write the file (the safetensors library does the format)."""
    safetensors.serialize_file(specs, filename, metadata=metadata)


def save(obj: dict, path) -> None:
    """Save ``obj`` (a state dict, or a dict of them and of plain values) to ``path`` in
    the safetensors format, atomically: ``path`` is either left as it was or replaced by
    the complete new file."""
    if not isinstance(obj, dict):
        raise TypeError(f"save: expected a dict (a state dict, or a dict of them), got "
                        f"{type(obj).__name__}; wrap it: hx.save({{'tensor': t}}, path)")
    tensors: dict[str, np.ndarray] = {}
    tree = _encode(obj, [], tensors)
    index = {name: {"dtype": dt.from_numpy(a.dtype).name, "shape": list(a.shape),
                    "crc32": _crc32(a)} for name, a in tensors.items()}
    metadata = {"format": FORMAT, "haelixe.version": VERSION,
                "haelixe.tree": json.dumps(tree), "haelixe.tensors": json.dumps(index)}
    specs = {name: safetensors.TensorSpec(dtype=dt.from_numpy(a.dtype).name,
                                          shape=list(a.shape), data_ptr=a.ctypes.data,
                                          data_len=a.nbytes)
             for name, a in tensors.items()}
    with AtomicFile(path) as f:
        _write(specs, f.temp_path, metadata)


# -- load ------------------------------------------------------------------------------
def _read_validated(path: str) -> tuple[bytes, dict]:
    """The file's bytes and its header, checked for the ways a file goes bad before the
    safetensors library sees it (its messages do not say what to do)."""
    with open(path, "rb") as f:
        data = f.read()
    size = len(data)
    if size < 8:
        raise CheckpointError(f"load: {path} is {size} bytes, too short for a safetensors "
                              f"file (8-byte header length first); it is truncated or not "
                              f"a checkpoint")
    (hlen,) = struct.unpack("<Q", data[:8])
    if hlen > _MAX_HEADER:
        raise CheckpointError(f"load: {path} does not start with a plausible safetensors "
                              f"header length ({hlen} bytes); it is corrupted or not a "
                              f"safetensors file")
    if 8 + hlen > size:
        raise CheckpointError(f"load: {path} is truncated: its header alone needs {hlen} "
                              f"bytes but the file has {size - 8} after the length; "
                              f"restore it from another copy or save again")
    try:
        header = json.loads(data[8:8 + hlen].decode("utf8"))
        if not isinstance(header, dict):
            raise ValueError(f"the header is a JSON {type(header).__name__}, not an object")
    except (UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"load: {path} has a corrupted header ({e}); restore it from "
                              f"another copy or save again") from None
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            lo, hi = (int(v) for v in info["data_offsets"])
            code = info["dtype"]
            shape = [int(n) for n in info["shape"]]
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"load: {path}: corrupted header entry for {name!r}: "
                                  f"{info!r}") from None
        if code not in _CODE:
            raise CheckpointError(
                f"load: {path}: tensor {name!r} has dtype {code}, which Haelixe has no "
                f"type for (it reads {sorted(_CODE)}); convert it before saving")
        if hi - lo != math.prod(shape) * _CODE[code].itemsize:
            raise CheckpointError(f"load: {path}: corrupted header: tensor {name!r} of "
                                  f"shape {shape} {code} spans {hi - lo} bytes")
        end = max(end, hi)
    have = size - 8 - hlen
    if have < end:
        raise CheckpointError(f"load: {path} is truncated: its tensors need {end} bytes "
                              f"after the header but the file holds {have}; restore it "
                              f"from another copy or save again")
    if have > end:
        raise CheckpointError(f"load: {path} has {have - end} unexpected bytes after its "
                              f"tensors; the file is corrupted")
    return data, header


def _decode(node, tensors: dict, path: str):
    if isinstance(node, list):
        return [_decode(v, tensors, path) for v in node]
    if not isinstance(node, dict):
        return node
    if "__tensor__" in node:
        name = node["__tensor__"]
        if name not in tensors:
            raise CheckpointError(f"load: {path} refers to tensor {name!r}, which the file "
                                  f"does not hold; it is corrupted")
        return tensors[name]
    if "__tuple__" in node:
        return tuple(_decode(v, tensors, path) for v in node["__tuple__"])
    if "__dict__" in node:
        return {k: _decode(v, tensors, path) for k, v in node["__dict__"]}
    if "__dtype__" in node:
        return dt.from_name(node["__dtype__"])
    return {k: _decode(v, tensors, path) for k, v in node.items()}


def load(path) -> dict:
    """Load a file written by :func:`save` (the same nesting and values back, tensors as
    CPU tensors), or any safetensors file (a flat dict name -> tensor).

    Raises CheckpointError for a truncated or damaged file, a tensor whose bytes no longer
    match their checksum, or a dtype Haelixe has no type for.
    """
    path = os.fspath(path)
    data, header = _read_validated(path)
    meta = header.get("__metadata__") or {}
    try:
        entries = safetensors.deserialize(data)
    except Exception as e:  # the library's own error type is not importable portably
        raise CheckpointError(f"load: {path} is not a valid safetensors file ({e}); "
                              f"restore it from another copy or save again") from None
    del data
    ours = meta.get("format") == FORMAT
    try:
        index = json.loads(meta["haelixe.tensors"]) if ours else {}
        tree = json.loads(meta["haelixe.tree"]) if ours else None
    except (KeyError, ValueError) as e:
        raise CheckpointError(f"load: {path} has corrupted Haelixe metadata ({e}); "
                              f"restore it from another copy or save again") from None
    tensors = {}
    for name, e in entries:
        code = e["dtype"]
        want = index.get(name)
        if want is not None:
            if want["dtype"] != _NAME_OF_CODE[code] or list(want["shape"]) != e["shape"]:
                raise CheckpointError(
                    f"load: {path}: tensor {name!r} is stored as {_NAME_OF_CODE[code]} "
                    f"{e['shape']} but was saved as {want['dtype']} {want['shape']}; the "
                    f"header was altered, restore the file from another copy")
            crc = zlib.crc32(e["data"])
            if crc != want["crc32"]:
                raise CheckpointError(
                    f"load: {path}: tensor {name!r} is corrupted (CRC-32 {crc:08x}, saved "
                    f"as {want['crc32']:08x}); restore the file from another copy")
        elif ours:
            raise CheckpointError(f"load: {path} holds tensor {name!r} that its metadata "
                                  f"does not list; the file is corrupted")
        arr = np.frombuffer(e["data"], dtype=_CODE[code].np).reshape(e["shape"])
        tensors[name] = from_numpy(arr)  # the bytearray is ours alone: no copy needed
    if not ours:
        return tensors
    missing = sorted(set(index) - set(tensors))
    if missing:
        raise CheckpointError(f"load: {path} lacks tensors {missing} that its metadata "
                              f"lists; the file is corrupted")
    return _decode(tree, tensors, path)
