"""WGSL sources: finding the shaders folder and specialising a kernel for its dtypes.

A shader file holds the kernels of one family. Before compiling, a :class:`KernelSpec`
turns it into a module:

    common.wgsl                     index math, bf16 packing, math helpers
    generated prelude               binding 0 ``metadata: array<i32>``, then one buffer per
                                    binding with typed accessors (below)
    ``//! include: x.wgsl`` files   helpers shared by a few families (rows.wgsl)
    the family file                 only the ``//! section:`` parts the entry needs, with
                                    ``${NAME}`` placeholders filled from ``params`` and
                                    ``@unroll(NAME)`` lines repeated (see :func:`unroll`)

For a binding named ``x`` the prelude defines ``alias x_t`` (the type kernels compute in:
f32 for float32/bfloat16, i32 for int32, u32 0/1 for bool) and, by access mode,
``load_x(i: i32) -> x_t``, ``store_x(i: i32, v: x_t)`` or ``add_x(i: i32, v: x_t)``
(an atomic accumulate). ``i`` is an element index, so bfloat16's two-per-word packing is
invisible to kernels.
"""

from __future__ import annotations

import functools
from pathlib import Path
from string import Template
from typing import NamedTuple

from .dtypes import COMPUTE_TYPE

_PACKAGE = Path(__file__).resolve().parents[2]  # haelixe/


def shader_dir() -> Path:
    """The installed wheel's ``haelixe/shaders``, else the repository's ``shaders/``."""
    wheel = _PACKAGE / "shaders"
    return wheel if (wheel / "common.wgsl").is_file() else _PACKAGE.parent / "shaders"


@functools.cache
def read_shader(name: str) -> str:
    path = shader_dir() / name
    try:
        return path.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(f"WGSL file {name} not found in {shader_dir()}") from None


class Binding(NamedTuple):
    """One buffer of a kernel: its WGSL name, element kind and access mode.

    kind: 'f32' | 'bf16' | 'i32' | 'bool' | 'u32' (raw words).
    access: 'read' | 'write' | 'rw' | 'atomic_add'.
    """

    name: str
    kind: str
    access: str = "read"


class KernelSpec(NamedTuple):
    """Everything that makes one compute pipeline; hashable, so it keys the cache."""

    file: str
    entry: str
    bindings: tuple
    params: tuple = ()

    def source(self) -> str:
        return module_source(self.file, self.entry, self.bindings, self.params)


def kernel(file: str, entry: str, bindings, **params) -> KernelSpec:
    """A :class:`KernelSpec`; ``bindings`` are (name, kind, access) triples."""
    return KernelSpec(file, entry, tuple(Binding(*b) for b in bindings),
                      tuple(sorted((k, str(v)) for k, v in params.items())))


@functools.lru_cache(maxsize=512)
def module_source(file: str, entry: str, bindings: tuple, params: tuple) -> str:
    """common.wgsl + prelude + included files + the parts of ``file`` that ``entry``
    needs, with ``${NAME}`` placeholders filled from ``params``."""
    text = read_shader(file)
    parts = [read_shader("common.wgsl"), prelude(bindings)]
    for line in text.splitlines():
        if line.startswith("//! include:"):
            parts.append(read_shader(line.split(":", 1)[1].strip()))
    parts.append(select_sections(text, entry))
    source = unroll("\n".join(parts), dict(params))
    return Template(source).safe_substitute(dict(params))


def unroll(text: str, params: dict) -> str:
    """Expand ``@unroll(NAME) statement`` lines into ``params[NAME]`` copies of the
    statement with ``#i`` replaced by 0, 1, ...

    Kernels use it for per-invocation registers (``var q#i = vec4<f32>();``): WGSL arrays
    in function memory that are indexed in loops end up in slow local memory on some
    compilers, while named variables stay in registers."""
    out = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("@unroll("):
            name, stmt = stripped[len("@unroll("):].split(")", 1)
            indent = line[:len(line) - len(stripped)]
            out.extend(indent + stmt.strip().replace("#i", str(i))
                       for i in range(int(params[name])))
        else:
            out.append(line)
    return "\n".join(out)


def select_sections(text: str, entry: str) -> str:
    """The lines of ``text`` that ``entry`` needs: everything before the first
    ``//! section: name ...`` marker, then each section whose names include ``entry``.

    Entries of one family may bind different buffers; compiling only their own sections
    keeps the module valid for the bindings the spec declares."""
    keep, out = True, []
    for line in text.splitlines():
        if line.startswith("//! section:"):
            keep = entry in line.split(":", 1)[1].split()
            continue
        if keep:
            out.append(line)
    return "\n".join(out)


def prelude(bindings) -> str:
    lines = ["@group(0) @binding(0) var<storage, read> metadata: array<i32>;"]
    for slot, b in enumerate(bindings, start=1):
        lines.extend(_accessors(slot, Binding(*b)))
    return "\n".join(lines) + "\n"


def _accessors(slot: int, b: Binding) -> list[str]:
    name, kind, access = b
    ct = "u32" if kind == "u32" else COMPUTE_TYPE[kind]
    at = f"@group(0) @binding({slot})"
    buf = f"{name}_buf"
    out = [f"alias {name}_t = {ct};"]
    mode = "read" if access == "read" else "read_write"
    if access == "atomic_add":
        if kind == "f32":
            out += [f"{at} var<storage, read_write> {buf}: array<atomic<u32>>;",
                    f"fn add_{name}(i: i32, v: f32) {{",
                    f"    var old = atomicLoad(&{buf}[i]);",
                    "    loop {",
                    f"        let r = atomicCompareExchangeWeak(&{buf}[i], old, "
                    "bitcast<u32>(bitcast<f32>(old) + v));",
                    "        if (r.exchanged) { break; }",
                    "        old = r.old_value;",
                    "    }",
                    "}"]
        elif kind == "i32":
            out += [f"{at} var<storage, read_write> {buf}: array<atomic<i32>>;",
                    f"fn add_{name}(i: i32, v: i32) {{ atomicAdd(&{buf}[i], v); }}"]
        else:
            raise TypeError(f"atomic accumulation into {kind} is not supported")
        return out
    if kind == "bf16":
        if access == "read":
            out += [f"{at} var<storage, read> {buf}: array<u32>;",
                    f"fn load_{name}(i: i32) -> f32 {{ return bf16_at({buf}[u32(i) >> 1u], "
                    "u32(i) & 1u); }"]
        elif access == "write":
            # two elements share a word: atomics keep neighbours written by other
            # invocations intact
            out += [f"{at} var<storage, read_write> {buf}: array<atomic<u32>>;",
                    f"fn store_{name}(i: i32, v: f32) {{",
                    "    let w = u32(i) >> 1u;",
                    "    let sh = (u32(i) & 1u) * 16u;",
                    f"    atomicAnd(&{buf}[w], ~(0xffffu << sh));",
                    f"    atomicOr(&{buf}[w], bf16_bits(v) << sh);",
                    "}"]
        else:
            raise TypeError("bfloat16 buffers are read or written by a kernel, not both")
        return out
    st = {"f32": "f32", "i32": "i32", "bool": "u32", "u32": "u32"}[kind]
    out.append(f"{at} var<storage, {mode}> {buf}: array<{st}>;")
    if access in ("read", "rw"):
        out.append(f"fn load_{name}(i: i32) -> {ct} {{ return {buf}[i]; }}")
    if access in ("write", "rw"):
        out.append(f"fn store_{name}(i: i32, v: {ct}) {{ {buf}[i] = v; }}")
    return out
