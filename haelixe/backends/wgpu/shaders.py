"""WGSL sources: finding the shaders folder and specialising a kernel for its dtypes.

A shader file holds the kernels of one family. Before compiling, a :class:`KernelSpec`
turns it into a module:

    common.wgsl                     index math, bf16 packing, math helpers
    generated prelude               binding 0 ``metadata: array<i32>``, then one buffer per
                                    binding with typed accessors (below)
    ``//! include: x.wgsl`` files   helpers shared by a few families (rows.wgsl)
    the family file                 only the ``//! section:`` parts the entry needs
    then                            ``${NAME}`` placeholders filled from ``params`` and
                                    ``@unroll(NAME)`` lines repeated (see :func:`unroll`)

For a binding named ``x`` the prelude defines ``alias x_t`` (the type kernels compute in:
f32 for the float dtypes, i32 / i64 for int32 / int64, u32 0/1 for bool) and, by access
mode, ``load_x(i: i32) -> x_t``, ``store_x(i: i32, v: x_t)`` or ``add_x(i: i32, v: x_t)``
(an atomic accumulate). ``i`` is an element index, so the two-per-word packing of
bfloat16 and float16 is invisible to kernels. ``load2_x`` / ``store2_x`` move elements
i and i + 1 (i even): one word of a 16-bit dtype, which a kernel that writes whole words
stores without atomics; bindings of width 4 add ``load4_x`` / ``store4_x`` (and, read as
16-bit floats, ``load4w_x``: the two raw words, which ``widen4_x`` turns into the vec4).
"""

from __future__ import annotations

import functools
import re
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
    """One buffer of a kernel: its WGSL name, element kind, access mode and width.

    kind: 'f32' | 'bf16' | 'f16' | 'i32' | 'i64' | 'bool' | 'u32' (raw words).
    access: 'read' | 'write' | 'rw' | 'atomic_add' | 'atomic_mul' | 'atomic_max' |
    'atomic_min', or 'write_words' / 'rw_words': as 'write' / 'rw' for a kernel in which
    no two invocations write the halves of one 32-bit word (pairs from an even element,
    or a lone element whose neighbour no other invocation touches), so a 16-bit buffer
    needs no atomics (plain, vectorisable stores; a lone element is read, merged and
    written back by its own invocation).
    width: 1, or 4 to also get ``load4_x`` / ``store4_x`` (four elements from index i,
    a multiple of 4) through 16-byte (8 for 16-bit kinds) words.
    """

    name: str
    kind: str
    access: str = "read"
    width: int = 1


class KernelSpec(NamedTuple):
    """Everything that makes one compute pipeline; hashable, so it keys the cache.
    ``enable`` lists WGSL extensions the module turns on ("f16"); with "f16", float16
    bindings are read and written as WGSL ``f16``. ``checks`` False compiles the module
    without wgpu's runtime checks (an index clamp on every workgroup-array and vector
    access, a counter in every loop): only for kernels whose every index stays in bounds
    and every loop ends by construction, as an out-of-bounds access is then undefined."""

    file: str
    entry: str
    bindings: tuple
    params: tuple = ()
    enable: tuple = ()
    checks: bool = True

    def source(self) -> str:
        return module_source(self.file, self.entry, self.bindings, self.params, self.enable)


def kernel(file: str, entry: str, bindings, enable=(), checks=True, **params) -> KernelSpec:
    """A :class:`KernelSpec`; ``bindings`` are (name, kind, access[, width]) tuples."""
    # (the values' types too: 1, 1.0 and True are one key, and three texts)
    key = (file, entry, *map(tuple, bindings), enable, checks, *params.items(),
           *map(type, params.values()))
    try:
        spec = _KERNELS.get(key)
    except TypeError:  # (an unhashable parameter value: the spec is made each time)
        key = spec = None
    if spec is None:
        spec = KernelSpec(file, entry, tuple(Binding(*b) for b in bindings),
                          tuple(sorted((k, str(v)) for k, v in params.items())),
                          tuple(enable), bool(checks))
        if key is not None:
            if len(_KERNELS) > 4096:  # (user kernels could grow it without end)
                _KERNELS.clear()
            _KERNELS[key] = spec
    return spec


# kernel()'s arguments -> its KernelSpec: kernels that build their spec on every dispatch
# (norms, reductions, fills) find it here, without remaking their bindings and parameters
_KERNELS: dict = {}


@functools.lru_cache(maxsize=512)
def module_source(file: str, entry: str, bindings: tuple, params: tuple,
                  enable: tuple = ()) -> str:
    """common.wgsl + prelude + included files + the parts of ``file`` that ``entry``
    needs, with ``${NAME}`` placeholders filled from ``params``."""
    text = read_shader(file)
    parts = []
    parts += [read_shader("common.wgsl"), prelude(bindings, "f16" in enable)]
    keys = {entry, *dict(params).get("SECTIONS", "").split()}
    for line in text.splitlines():
        if line.startswith("//! include:"):
            parts.append(select_sections(read_shader(line.split(":", 1)[1].strip()), keys))
    parts.append(select_sections(text, keys))
    values = dict(params)
    # comments keep their placeholders: a multi-line value would end them early
    source = "\n".join(line if line.lstrip().startswith("//") else
                       Template(line).safe_substitute(values)
                       for line in "\n".join(parts).splitlines())
    source = unroll(source, values)
    code = re.sub(r"//.*", "", source)  # (comments may name the builtins)
    if _SUBGROUP_USE.search(code) and "subgroups" not in enable:
        enable = (*enable, "subgroups")
    return "".join(f"enable {e};\n" for e in enable) + source


# WGSL requires ``enable subgroups;`` in a module that uses subgroup builtins
_SUBGROUP_USE = re.compile(r"\bsubgroup[A-Z]\w*\s*\(|@builtin\((subgroup_|num_subgroups)")
# naga (wgpu-native 0.32) accepts subgroup builtins without the directive and refuses the
# directive itself ("not yet supported"): dispatch.py drops it for naga only
NAGA_UNSUPPORTED_ENABLES = ("subgroups",)


def for_naga(source: str) -> str:
    """``source`` without the enable directives naga refuses (see above)."""
    for e in NAGA_UNSUPPORTED_ENABLES:
        source = source.replace(f"enable {e};\n", "", 1)
    return source


_PLACEHOLDERS = ("#i", "#j", "#k", "#l")


def unroll(text: str, params: dict) -> str:
    """Expand ``@unroll(N) statement`` lines into N copies of the statement with ``#i``
    replaced by 0, 1, ...; N is a number or the name of a param. The statement may be
    another ``@unroll``, whose copies number ``#j`` (and deeper levels ``#k``, ``#l``).

    Kernels use it for per-invocation registers (``var q#i = vec4<f32>();``): WGSL arrays
    in function memory that are indexed in loops end up in slow local memory on some
    compilers, while named variables stay in registers."""
    out = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("@unroll("):
            indent = line[:len(line) - len(stripped)]
            out.extend(indent + stmt for stmt in _expand(stripped, params, 0))
        else:
            out.append(line)
    return "\n".join(out)


def _expand(stmt: str, params: dict, level: int) -> list:
    if not stmt.startswith("@unroll("):
        return [stmt]
    name, rest = stmt[len("@unroll("):].split(")", 1)
    name = name.strip()
    count = int(name) if name.isdigit() else int(params[name])
    out = []
    for i in range(count):
        out.extend(_expand(rest.strip().replace(_PLACEHOLDERS[level], str(i)), params,
                           level + 1))
    return out


def only_sections(text: str, keys) -> str:
    """The sections of ``text`` that name one of ``keys``, without what precedes the first
    section marker."""
    return select_sections("//! section:\n" + text, keys)


def select_sections(text: str, keys) -> str:
    """The lines of ``text`` that an entry needs: everything before the first
    ``//! section: name ...`` marker, then each section that names one of ``keys`` (the
    entry, plus the names in the ``SECTIONS`` param: variants of a helper).

    Entries of one family may bind different buffers; compiling only their own sections
    keeps the module valid for the bindings the spec declares."""
    keys = {keys} if isinstance(keys, str) else set(keys)
    keep, out = True, []
    for line in text.splitlines():
        if line.startswith("//! section:"):
            keep = bool(keys.intersection(line.split(":", 1)[1].split()))
            continue
        if keep:
            out.append(line)
    return "\n".join(out)


def prelude(bindings, native_f16: bool = False) -> str:
    lines = ["@group(0) @binding(0) var<storage, read> metadata: array<i32>;"]
    if native_f16:  # exact rounding (f16() leaves it to the implementation)
        lines += ["fn to_f16(v: f32) -> f16 { return f16(unpack2x16float(f16_bits(v)).x); }",
                  "fn to_f16x4(v: vec4<f32>) -> vec4<f16> {",
                  "    return vec4<f16>(to_f16(v.x), to_f16(v.y), to_f16(v.z), to_f16(v.w));",
                  "}"]
    for slot, b in enumerate(bindings, start=1):
        lines.extend(_accessors(slot, Binding(*b), native_f16))
    if any(Binding(*b).kind == "i64" for b in bindings):
        lines.append(_I64_HELPERS)  # i64 may appear only in modules of int64 devices
    return "\n".join(lines) + "\n"


_I64_HELPERS = """fn no_nan_i64(x: i64) -> bool { return false; }
// as floor_divide_i32 / remainder_i32 (common.wgsl), in u64: one driver (NVIDIA 580,
// Vulkan) also takes % of i64 as unsigned
fn abs_u64(x: i64) -> u64 {
    let u = bitcast<u64>(x);
    return select(u, 0lu - u, x < 0li);
}
fn floor_divide_i64(a: i64, b: i64) -> i64 {
    let ua = abs_u64(a);
    let ub = max(abs_u64(b), 1lu);
    let q = ua / ub;
    let neg = (a < 0li) != (b < 0li);
    let m = select(q, q + 1lu, neg && q * ub != ua);
    return select(bitcast<i64>(select(m, 0lu - m, neg)), 0li, b == 0li);
}
fn remainder_i64(a: i64, b: i64) -> i64 {
    let ua = abs_u64(a);
    let ub = max(abs_u64(b), 1lu);
    let r = ua - (ua / ub) * ub;
    let m = select(r, ub - r, (a < 0li) != (b < 0li) && r != 0lu);
    return select(bitcast<i64>(select(m, 0lu - m, b < 0li)), 0li, b == 0li);
}
fn gcd_i64(a: i64, b: i64) -> i64 {
    var x = select(a, -a, a < 0li);
    var y = select(b, -b, b < 0li);
    loop {
        if (x == 0li) { break; }
        let c = x;
        x = fmod_i64(y, x);
        y = c;
    }
    return y;
}
fn lcm_i64(a: i64, b: i64) -> i64 {
    let g = abs_u64(gcd_i64(a, b));
    if (g == 0lu) { return 0li; }
    let m = bitcast<i64>((abs_u64(a) / g) * abs_u64(b));
    return select(m, -m, m < 0li);
}
fn shl_i64(a: i64, b: i64) -> i64 { return select(a << u32(b), 0li, b < 0li || b >= 64li); }
fn shr_i64(a: i64, b: i64) -> i64 { return a >> select(u32(b), 63u, b < 0li || b >= 64li); }
fn fmod_i64(a: i64, b: i64) -> i64 {
    let ub = max(abs_u64(b), 1lu);
    let r = abs_u64(a) % ub;
    return select(bitcast<i64>(select(r, 0lu - r, a < 0li)), 0li, b == 0li);
}
fn ipow_i64(a: i64, b: i64) -> i64 {
    if (b < 0li) {
        if (a == 1li) { return 1li; }
        if (a == -1li) { return select(1li, -1li, (b & 1li) == 1li); }
        return 0li;
    }
    var r = 1li;
    var base = a;
    var e = b;
    loop {
        if (e == 0li) { break; }
        if ((e & 1li) == 1li) { r *= base; }
        base *= base;
        e = e >> 1u;
    }
    return r;
}"""


# -- accessors ---------------------------------------------------------------------------
# Packed 16-bit floats: two elements per u32. Reads widen them to f32; writes go through
# atomics (an element shares its word with a neighbour another invocation may write;
# store2/store4 write whole words, atomically too), unless the binding says its words
# are written whole by one invocation each ("write_words", "rw_words"): then the buffer
# is plain words and stores are plain (on an H200 an atomic store of a word cost about
# ten times a plain one). A buffer both read and written ("rw": an in-place update)
# reads through atomic loads too.
_UNPACK = {"bf16": "bf16_pair", "f16": "unpack2x16float"}
_PACK = {"bf16": "bf16_pack", "f16": "f16_pack"}
_BITS = {"bf16": "bf16_bits", "f16": "f16_bits"}


def _accessors(slot: int, b: Binding, native_f16: bool = False) -> list[str]:
    name, kind, access, width = b
    at = f"@group(0) @binding({slot})"
    buf = f"{name}_buf"
    if access in _WORDS and kind not in _UNPACK:  # (words matter to packed kinds only)
        access = _WORDS[access]
    if access in _ATOMIC_COMBINE:
        return _atomic_accessors(at, buf, name, kind, access)
    if kind == "f16" and native_f16:
        return _native_f16_accessors(at, buf, name, _WORDS.get(access, access), width)
    if kind in _UNPACK:
        return _packed_accessors(at, buf, name, kind, access, width)
    ct = "u32" if kind == "u32" else COMPUTE_TYPE[kind]
    st = {"f32": "f32", "i32": "i32", "i64": "i64", "bool": "u32", "u32": "u32"}[kind]
    mode = "read" if access == "read" else "read_write"
    if width == 4 and kind == "i64":
        raise TypeError("int64 buffers are read one element at a time")
    # width 4: vec4 words, element i a component, and load4 / store4; else elements, and
    # load2 / store2 (elements i and i + 1)
    if width == 4:
        decl, elem, n = f"array<vec4<{st}>>", f"{buf}[u32(i) >> 2u][u32(i) & 3u]", 4
        wide_load = f"vec4<{ct}>({buf}[u32(i) >> 2u])"
        wide_store = f"{buf}[u32(i) >> 2u] = vec4<{st}>(v);"
    else:
        decl, elem, n = f"array<{st}>", f"{buf}[i]", 2
        wide_load = f"vec2<{ct}>({buf}[i], {buf}[i + 1])"
        wide_store = f"{buf}[i] = v.x; {buf}[i + 1] = v.y;"
    out = [f"alias {name}_t = {ct};", f"{at} var<storage, {mode}> {buf}: {decl};"]
    if access in ("read", "rw"):
        out += [f"fn load_{name}(i: i32) -> {ct} {{ return {ct}({elem}); }}",
                f"fn load{n}_{name}(i: i32) -> vec{n}<{ct}> {{ return {wide_load}; }}"]
    if access in ("write", "rw"):
        out += [f"fn store_{name}(i: i32, v: {ct}) {{ {elem} = {st}(v); }}",
                f"fn store{n}_{name}(i: i32, v: vec{n}<{ct}>) {{ {wide_store} }}"]
    return out


#: the combinations an atomic binding offers: its WGSL function's name, then the new
#: value from the old ``a`` and the incoming ``v`` (a float max or min keeps a NaN, as
#: numpy's and PyTorch's do; NaN tested on the bits, which no compiler folds away)
_FLOAT_NAN = "((bitcast<u32>({x}) & 0x7fffffffu) > 0x7f800000u)"
_ATOMIC_COMBINE = {
    "atomic_add": ("add", "a + v"),
    "atomic_mul": ("combine", "a * v"),
    "atomic_max": ("combine", "select(select(max(a, v), a, {nan_a}), v, {nan_v})"),
    "atomic_min": ("combine", "select(select(min(a, v), a, {nan_a}), v, {nan_v})"),
}
#: int32 combinations WGSL has as one atomic builtin (the others loop on a compare-exchange)
_I32_BUILTIN = {"atomic_add": "atomicAdd", "atomic_max": "atomicMax", "atomic_min": "atomicMin"}


def _atomic_accessors(at, buf, name, kind, access) -> list[str]:
    """``add_x(i, v)`` (atomic_add) or ``combine_x(i, v)`` (atomic_mul / max / min): the
    element at i combined with v atomically, so repeated indices all take part."""
    fn, expr = _ATOMIC_COMBINE[access]
    ct = COMPUTE_TYPE.get(kind, "u32")
    out = [f"alias {name}_t = {ct};"]
    if kind == "i32" and access in _I32_BUILTIN:
        return out + [f"{at} var<storage, read_write> {buf}: array<atomic<i32>>;",
                      f"fn {fn}_{name}(i: i32, v: i32) {{ {_I32_BUILTIN[access]}(&{buf}[i], v); }}"]
    if kind == "i32":
        word, load, store = "i32", "old", "{}"
    elif kind == "f32":
        word, load, store = "u32", "bitcast<f32>(old)", "bitcast<u32>({})"
        expr = expr.format(nan_a=_FLOAT_NAN.format(x="a"), nan_v=_FLOAT_NAN.format(x="v"))
    else:
        raise TypeError(f"atomic accumulation into {kind} is not supported")
    return out + [f"{at} var<storage, read_write> {buf}: array<atomic<{word}>>;",
                  f"fn {fn}_{name}(i: i32, v: {ct}) {{",
                  f"    var old = atomicLoad(&{buf}[i]);",
                  "    loop {",
                  f"        let a = {load};",
                  f"        let r = atomicCompareExchangeWeak(&{buf}[i], old, "
                  f"{store.format(expr)});",
                  "        if (r.exchanged) { break; }",
                  "        old = r.old_value;",
                  "    }",
                  "}"]


_WORDS = {"write_words": "write", "rw_words": "rw"}


def _half(kind, word: str) -> str:
    """WGSL of element i (its half of ``word``) widened to f32: bf16 by a select of two
    bit operations rather than a vec2 indexed by a value known only at run time."""
    if kind == "bf16":
        return f"bf16_at({word}, u32(i) & 1u)"
    return f"{_UNPACK[kind]}({word})[u32(i) & 1u]"


def _packed_accessors(at, buf, name, kind, access, width) -> list[str]:
    out = [f"alias {name}_t = f32;"]
    unpack, pack, bits = _UNPACK[kind], _PACK[kind], _BITS[kind]
    if access in _WORDS:
        return out + _word_accessors(at, buf, name, kind, access, width)
    if access == "read":
        if width == 4:
            out += [f"{at} var<storage, read> {buf}: array<vec2<u32>>;",
                    f"fn {name}_word(w: u32) -> u32 {{ return {buf}[w >> 1u][w & 1u]; }}",
                    f"fn load4w_{name}(i: i32) -> vec2<u32> {{ return {buf}[u32(i) >> 2u]; }}",
                    f"fn widen4_{name}(w: vec2<u32>) -> vec4<f32> {{ "
                    f"return vec4<f32>({unpack}(w.x), {unpack}(w.y)); }}",
                    f"fn load4_{name}(i: i32) -> vec4<f32> {{ "
                    f"return widen4_{name}(load4w_{name}(i)); }}"]
        else:
            out += [f"{at} var<storage, read> {buf}: array<u32>;",
                    f"fn {name}_word(w: u32) -> u32 {{ return {buf}[w]; }}"]
        out += [f"fn load_{name}(i: i32) -> f32 {{ "
                f"return {_half(kind, f'{name}_word(u32(i) >> 1u)')}; }}",
                f"fn load2_{name}(i: i32) -> vec2<f32> {{ "
                f"return {unpack}({name}_word(u32(i) >> 1u)); }}"]
        return out
    if access not in ("write", "rw"):
        raise TypeError(f"{kind} buffers are read or written by a kernel, not both")
    if access == "rw":  # in place: an element is read, then written, by its invocation
        out += [f"fn load_{name}(i: i32) -> f32 {{ "
                f"return {_half(kind, f'atomicLoad(&{buf}[u32(i) >> 1u])')}; }}",
                f"fn load2_{name}(i: i32) -> vec2<f32> {{ "
                f"return {unpack}(atomicLoad(&{buf}[u32(i) >> 1u])); }}"]
    return out + [
        f"{at} var<storage, read_write> {buf}: array<atomic<u32>>;",
        f"fn store_{name}(i: i32, v: f32) {{",
        "    let w = u32(i) >> 1u;",
        "    let sh = (u32(i) & 1u) * 16u;",
        f"    atomicAnd(&{buf}[w], ~(0xffffu << sh));",
        f"    atomicOr(&{buf}[w], {bits}(v) << sh);",
        "}",
        f"fn store2_{name}(i: i32, v: vec2<f32>) {{ "
        f"atomicStore(&{buf}[u32(i) >> 1u], {pack}(v)); }}",
        f"fn store4_{name}(i: i32, v: vec4<f32>) {{",
        "    let w = u32(i) >> 1u;",
        f"    atomicStore(&{buf}[w], {pack}(v.xy));",
        f"    atomicStore(&{buf}[w + 1u], {pack}(v.zw));",
        "}"]


def _word_accessors(at, buf, name, kind, access, width) -> list[str]:
    """A packed 16-bit buffer whose words each belong to one invocation: plain words
    (vec2 of them with width 4: one 8-byte store per four elements), no atomics."""
    unpack, pack, bits = _UNPACK[kind], _PACK[kind], _BITS[kind]
    if width == 4:
        decl, word = "array<vec2<u32>>", f"{buf}[w >> 1u][w & 1u]"
        store4 = f"{buf}[u32(i) >> 2u] = vec2<u32>({pack}(v.xy), {pack}(v.zw));"
    else:
        decl, word = "array<u32>", f"{buf}[w]"
        store4 = f"store2_{name}(i, v.xy); store2_{name}(i + 2, v.zw);"
    out = [f"{at} var<storage, read_write> {buf}: {decl};"]
    if access == "rw_words":
        out += [f"fn load_{name}(i: i32) -> f32 {{ let w = u32(i) >> 1u; "
                f"return {_half(kind, word)}; }}",
                f"fn load2_{name}(i: i32) -> vec2<f32> {{ let w = u32(i) >> 1u; "
                f"return {unpack}({word}); }}"]
    return out + [
        f"fn store_{name}(i: i32, v: f32) {{",
        "    let w = u32(i) >> 1u;",
        "    let sh = (u32(i) & 1u) * 16u;",
        f"    {word} = ({word} & ~(0xffffu << sh)) | ({bits}(v) << sh);",
        "}",
        f"fn store2_{name}(i: i32, v: vec2<f32>) {{ let w = u32(i) >> 1u; {word} = {pack}(v); }}",
        f"fn store4_{name}(i: i32, v: vec4<f32>) {{ {store4} }}"]


def _native_f16_accessors(at, buf, name, access, width) -> list[str]:
    """float16 as WGSL f16 (the ``f16`` extension): 16-bit loads and stores, no atomics.
    ``load_x`` still widens to f32; ``loadh_x`` / ``load4h_x`` give f16 values."""
    mode = "read" if access == "read" else "read_write"
    out = [f"alias {name}_t = f32;"]
    if width == 4:
        out.append(f"{at} var<storage, {mode}> {buf}: array<vec4<f16>>;")
        elem = f"{buf}[u32(i) >> 2u][u32(i) & 3u]"
        if access in ("read", "rw"):
            out += [f"fn load4h_{name}(i: i32) -> vec4<f16> {{ return {buf}[u32(i) >> 2u]; }}",
                    f"fn load4_{name}(i: i32) -> vec4<f32> {{ "
                    f"return vec4<f32>({buf}[u32(i) >> 2u]); }}"]
        if access in ("write", "rw"):
            out += [f"fn store4_{name}(i: i32, v: vec4<f32>) {{ "
                    f"{buf}[u32(i) >> 2u] = to_f16x4(v); }}"]
    else:
        out.append(f"{at} var<storage, {mode}> {buf}: array<f16>;")
        elem = f"{buf}[i]"
        if access in ("read", "rw"):
            out.append(f"fn load2_{name}(i: i32) -> vec2<f32> {{ "
                       f"return vec2<f32>(f32({buf}[i]), f32({buf}[i + 1])); }}")
        if access in ("write", "rw"):
            out += [f"fn store2_{name}(i: i32, v: vec2<f32>) {{ "
                    f"{buf}[i] = to_f16(v.x); {buf}[i + 1] = to_f16(v.y); }}",
                    f"fn store4_{name}(i: i32, v: vec4<f32>) {{ store2_{name}(i, v.xy); "
                    f"store2_{name}(i + 2, v.zw); }}"]
    if access in ("read", "rw"):
        out += [f"fn loadh_{name}(i: i32) -> f16 {{ return {elem}; }}",
                f"fn load_{name}(i: i32) -> f32 {{ return f32({elem}); }}"]
    if access in ("write", "rw"):
        out.append(f"fn store_{name}(i: i32, v: f32) {{ {elem} = to_f16(v); }}")
    return out
