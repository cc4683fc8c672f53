"""A dataset directory's manifest.json: its fields in order (each a NAME.npy beside the
manifest), their dtypes and sample shapes, the sample count and free-form meta, with a
SHA-256 of all of it, so a damaged manifest is refused rather than misread:

    {"format": "haelixe-dataset", "version": 2, "length": 100000,
     "fields": [{"name": "inputs", "dtype": "float32", "shape": [32, 1]}, ...],
     "meta": {...anything JSON...}, "checksum": "<SHA-256 of the rest>"}

Field names are plain identifiers, checked when a dataset is written and when it is
read, so a manifest can never name a file outside its directory. Version 1 manifests
(the same without the checksum, meta optional) still open.
"""

from __future__ import annotations

import json
import os
import re

from .. import dtype as dt
from ..atomic import recover_directory
from ..fileio import json_digest, strict_json
from .npy import NpyFormatError, NpyHeader

MANIFEST = "manifest.json"
FORMAT = "haelixe-dataset"
VERSION = 2
_CHECKSUM = "checksum"
# The keys of each version, (required, allowed): a key renamed by damage is refused.
_V1 = frozenset({"format", "version", "length", "fields"})
_KEYS = {1: (_V1, _V1 | {"meta"}), VERSION: (_V1 | {"meta", _CHECKSUM},) * 2}
_FIELD_KEYS = frozenset({"name", "dtype", "shape"})
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
PLAIN_NAME_RULE = ("letters, digits and '_', not starting with a digit, at most 128: it "
                   "names the field's file, NAME.npy, so no path separator, '..' or "
                   "absolute path")


def is_plain_name(name) -> bool:
    return isinstance(name, str) and _PLAIN_NAME.fullmatch(name) is not None


def check_field_names(names, who: str) -> None:
    """Refuse (ValueError) any field name that is not plain, before anything is written."""
    for name in names:
        if not is_plain_name(name):
            raise ValueError(f"{who}: field name {name!r} is not a plain name "
                             f"({PLAIN_NAME_RULE}); rename the field")


def write_manifest(directory: str, length: int, fields: list, meta: dict) -> None:
    """Write ``directory``/manifest.json for ``fields`` [(name, DType, shape tail)];
    ``meta`` must already be plain JSON (as json.loads gives it back)."""
    manifest = {"format": FORMAT, "version": VERSION, "length": length,
                "fields": [{"name": n, "dtype": d.name, "shape": list(tail)}
                           for n, d, tail in fields],
                "meta": meta}
    manifest[_CHECKSUM] = json_digest(manifest)
    with open(os.path.join(directory, MANIFEST), "w", encoding="utf8") as f:
        json.dump(manifest, f, indent=1)


def _is_count(n) -> bool:
    return type(n) is int and n >= 0


def _parse(mpath: str) -> dict:
    """The manifest's JSON, its keys, version and checksum checked."""
    with open(mpath, "rb") as f:
        m = strict_json(f.read(), constants=True)
    if not isinstance(m, dict):
        raise ValueError(f"a JSON {type(m).__name__}, not an object")
    if m.get("format") != FORMAT:
        raise ValueError(f"format is {m.get('format')!r}, not {FORMAT!r}")
    version = m.get("version")
    if type(version) is not int or version not in _KEYS:
        raise ValueError(f"version {version!r}; this Haelixe reads {sorted(_KEYS)}")
    required, allowed = _KEYS[version]
    if not required <= set(m) <= allowed:
        raise ValueError(f"keys {sorted(m)}, expected {sorted(allowed)}")
    if _CHECKSUM in m and m[_CHECKSUM] != json_digest(
            {k: v for k, v in m.items() if k != _CHECKSUM}):
        raise ValueError("its content does not match its checksum (it was edited or "
                         "damaged)")
    return m


def read_layout(path: str) -> tuple[dict, int | None, dict]:
    """{field: (file, DType or None, shape tail or None)}, the length the manifest states
    (or None) and its meta dict, for a dataset directory or a single .npy file."""
    if os.path.isfile(path):
        return {"inputs": (path, None, None)}, None, {}
    if not os.path.isdir(path) and not recover_directory(path):
        raise FileNotFoundError(f"MemmapDataset: no dataset at {path}; write one with "
                                f"hx.data.DatasetWriter or hx.data.write_dataset")
    mpath = os.path.join(path, MANIFEST)
    if not os.path.exists(mpath):
        names = [n for n in ("inputs", "targets")
                 if os.path.exists(os.path.join(path, n + ".npy"))]
        if "inputs" not in names:
            raise FileNotFoundError(f"MemmapDataset: {path} has neither {MANIFEST} nor "
                                    f"inputs.npy; write it with hx.data.DatasetWriter")
        return {n: (os.path.join(path, n + ".npy"), None, None) for n in names}, None, {}
    try:
        m = _parse(mpath)
        length, fields, meta = m["length"], m["fields"], m.get("meta", {})
        if not _is_count(length) or not isinstance(meta, dict):
            raise ValueError(f"length {length!r}, meta of type {type(meta).__name__}")
        if not isinstance(fields, list) or not fields:
            raise ValueError(f"fields {fields!r}: expected a list of at least one")
        specs = {}
        for fld in fields:
            if not isinstance(fld, dict) or set(fld) != _FIELD_KEYS:
                raise ValueError(f"field entry {fld!r}")
            name, shape = fld["name"], fld["shape"]
            if not is_plain_name(name):
                raise ValueError(f"field name {name!r} is not a plain name "
                                 f"({PLAIN_NAME_RULE}); a damaged or crafted manifest")
            if name in specs:
                raise ValueError(f"field {name!r} is listed twice")
            if not isinstance(shape, list) or not all(map(_is_count, shape)):
                raise ValueError(f"field {name!r} has shape {shape!r}")
            specs[name] = (os.path.join(path, name + ".npy"), dt.from_name(fld["dtype"]),
                           tuple(shape))
    except (ValueError, TypeError) as e:  # (dt.from_name raises TypeError)
        raise NpyFormatError(f"MemmapDataset: {mpath} is damaged ({type(e).__name__}: "
                             f"{e}); write the dataset again") from None
    for name, (file, _, _) in specs.items():
        if not os.path.isfile(file):
            raise NpyFormatError(f"MemmapDataset: {mpath} lists field {name!r} but {file} "
                                 f"does not exist; the dataset is incomplete, write it "
                                 f"again")
    return specs, length, meta


def check_field(header: NpyHeader, name: str, dtype, tail, length) -> None:
    """The .npy header must agree with the manifest and hold a Haelixe dtype in C order."""
    p = header.path
    if header.fortran_order and len(header.shape) > 1:
        raise NpyFormatError(f"MemmapDataset: {p} is stored in Fortran (column-major) "
                             f"order, so a sample's values are not contiguous; save it "
                             f"with np.save(path, np.ascontiguousarray(a))")
    if not header.shape:
        raise NpyFormatError(f"MemmapDataset: {p} holds a 0-d array; samples lie along "
                             f"axis 0, so it needs at least one dimension")
    if dtype is None:
        if header.dtype.kind == "V" and header.dtype.itemsize == 2:
            raise NpyFormatError(
                f"MemmapDataset: {p} holds raw 2-byte values (|V2): numpy writes bfloat16 "
                f"so, losing its name; add a {MANIFEST} naming the dtype (write the "
                f"dataset with hx.data.DatasetWriter)")
        try:
            dt.from_numpy(header.dtype)
        except TypeError:
            hint = (f"it is big-endian; store it as {header.dtype.newbyteorder('<')}"
                    if header.dtype.byteorder == ">" else
                    f"convert it with .astype() to one of {[d.name for d in dt.ALL]}")
            raise NpyFormatError(f"MemmapDataset: {p} has dtype {header.dtype}, which "
                                 f"Haelixe has no type for; {hint}") from None
        return
    ok_bf16 = dtype is dt.bfloat16 and header.dtype.kind == "V" and header.dtype.itemsize == 2
    if header.dtype != dtype.np and not ok_bf16:
        raise NpyFormatError(f"MemmapDataset: {p} holds {header.dtype} but {MANIFEST} says "
                             f"field {name!r} is {dtype.name}; the file was replaced or "
                             f"written with the wrong dtype, write the dataset again")
    if header.shape[1:] != tail:
        raise NpyFormatError(f"MemmapDataset: {p} has samples of shape {header.shape[1:]} "
                             f"but {MANIFEST} says {tail} for field {name!r}")
    if header.shape[0] != length:
        raise NpyFormatError(f"MemmapDataset: {p} has {header.shape[0]} samples but "
                             f"{MANIFEST} says {length}; the file was replaced or cut, "
                             f"write the dataset again")
