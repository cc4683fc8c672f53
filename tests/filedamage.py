"""Helpers shared by the file tests: take a checkpoint or a dataset file apart, damage or
rewrite a part of it, put it back together (re-signing its checksum when a test plays
someone who crafts a file rather than a disk that damages one), and compare what loads
with what was saved.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import numpy as np

import haelixe as hx
from haelixe import serialization
from haelixe.fileio import json_digest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
META = "__metadata__"
DIGEST = "haelixe.digest"


def bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).tobytes()


def same(a, b) -> bool:
    """``a`` and ``b`` hold the same values: tensors bit for bit with the same dtype and
    shape, containers of the same type in the same order, plain values equal."""
    if isinstance(a, hx.Tensor):
        return (isinstance(b, hx.Tensor) and a.dtype is b.dtype and a.shape == b.shape
                and bits(a.detach().numpy()) == bits(b.numpy()))
    if isinstance(a, dict):
        return (isinstance(b, dict) and list(a) == list(b)
                and all(same(a[k], b[k]) for k in a))
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(same(x, y) for x, y in zip(a, b)))
    return type(a) is type(b) and a == b


def rewrite(path, data: bytes) -> None:
    """Make the file at ``path`` hold ``data``, in place: written over from the start,
    then cut to length (quick on any filesystem, where truncating to nothing or
    renaming over a file may force a flush to disk, milliseconds per case)."""
    with open(path, "r+b" if os.path.exists(path) else "wb") as f:
        f.write(data)
        f.truncate(len(data))


def write_byte(path, i: int, value: int) -> None:
    with open(path, "r+b") as f:
        f.seek(i)
        f.write(bytes([value]))


def run_in_subprocess(script: str, *args, timeout: float = 120):
    """Run ``script`` in a fresh interpreter (where a SIGBUS kills only it) and return
    the JSON it printed last."""
    r = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=REPO), timeout=timeout)
    assert r.returncode == 0, f"exit {r.returncode} (-7 is SIGBUS): {r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


# -- checkpoints -----------------------------------------------------------------------
def split_checkpoint(data: bytes) -> tuple[dict, bytes]:
    """The header (as JSON) and the bytes after it."""
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def resign_checkpoint(header) -> None:
    """Recompute ``header``'s digest in place, as someone crafting a file would (when
    it is a dict with a digest to recompute)."""
    meta = header.get(META) if isinstance(header, dict) else None
    if isinstance(meta, dict) and DIGEST in meta:
        try:
            meta[DIGEST] = serialization._digest(header)
        except (TypeError, ValueError):  # a header too odd to digest: left unsigned
            pass


def compose_checkpoint(header, rest: bytes, resign: bool = False) -> bytes:
    """A file of ``header`` (a dict, or JSON text used as it is) followed by ``rest``;
    ``resign`` recomputes the header digest first."""
    if resign:
        resign_checkpoint(header)
    text = header if isinstance(header, str) else json.dumps(header, separators=(",", ":"))
    raw = text.encode("utf8", "surrogatepass")
    return struct.pack("<Q", len(raw)) + raw + rest


def tree_of(header: dict):
    return json.loads(header[META]["haelixe.tree"])


def with_tree(header: dict, tree) -> dict:
    """``header`` with its tree of saved values replaced (not yet re-signed)."""
    meta = dict(header[META], **{"haelixe.tree": json.dumps(tree)})
    return dict(header, **{META: meta})


# -- dataset manifests -----------------------------------------------------------------
def resign_manifest(m):
    """``m`` with its checksum recomputed (when it is a dict that has one)."""
    if isinstance(m, dict) and "checksum" in m:
        try:
            m = dict(m, checksum=json_digest({k: v for k, v in m.items()
                                              if k != "checksum"}))
        except (TypeError, ValueError):
            pass
    return m
