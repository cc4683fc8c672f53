"""Which dtypes live on the GPU and how their elements are laid out in words.

- float32, int32: one 32-bit word per element.
- bool: one u32 (0 or 1) per element.
- bfloat16, float16: two elements per u32 (element 2w in the low half of word w, as in
  memory on a little-endian host). Kernels widen them to f32 on load and round to nearest
  even on store; with the adapter's ``shader-f16`` feature, float16 kernels may also read
  the same words as WGSL ``f16`` and compute in it.
- int64: with the ``shader-int64`` feature, one 64-bit ``i64`` per element. Without it
  WGSL has no 64-bit integer: the values are stored as int32 words (range-checked on the
  way in, an OverflowError otherwise) while the array keeps reporting int64, so a round
  trip GPU -> CPU gives int64 back. Arithmetic then wraps at 32 bits.

- uint8, int8, int16, uint16: WGSL has no 8- or 16-bit integers. Each element is
  stored widened in one i32 word (its exact value), and the GPU does with them only what
  is exact without wrap-around arithmetic: moving to and from the host, views, copies
  and casts (a cast into one of them wraps as the CPU does: int32 300 -> uint8 44). Any
  other kernel asks :func:`kind` and is refused, naming the conversion to make first, so
  ``image.to("gpu").float()`` works and ``image.to("gpu") + 1`` says what to do.

float64 is refused rather than rounded (a silent loss of digits), as are uint32 and
uint64 (PyTorch's limited-support dtypes).
"""

from __future__ import annotations

import numpy as np

from ... import dtype as hdt

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)
I32 = np.dtype(np.int32)
BOOL = np.dtype(np.bool_)
I64 = np.dtype(np.int64)
BF16 = hdt.bfloat16.np  # (imports ml_dtypes: the tables below key on it)
#: integer dtypes narrower than 32 bits, stored one widened i32 word per element
WIDENED = tuple(np.dtype(d.np) for d in hdt.NARROW_INTS)
SUPPORTED = (F32, BF16, F16, I32, I64, BOOL, *WIDENED)
#: dtypes stored two per 32-bit word
PACKED = (BF16, F16)

# short names used in shader specialisation (int64 depends on the device: see kind())
KIND = {F32: "f32", BF16: "bf16", F16: "f16", I32: "i32", BOOL: "bool"}
# the WGSL type a kernel computes in for each storage kind
COMPUTE_TYPE = {"f32": "f32", "bf16": "f32", "f16": "f32", "i32": "i32", "i64": "i64",
                "bool": "u32"}
FLOAT_KINDS = ("f32", "bf16", "f16")
INT_KINDS = ("i32", "i64")


def int64_native() -> bool:
    """Whether int64 is stored as 64-bit words (the device has ``shader-int64``)."""
    from .context import get_context

    return get_context().int64_native


def check_dtype(dt, what: str = "a GPU array") -> np.dtype:
    """``dt`` as a numpy dtype the GPU stores, or a TypeError that says what to do."""
    dt = hdt.as_dtype(dt).np if not isinstance(dt, np.dtype) else dt
    if dt in SUPPORTED:
        return dt
    hint = "float32" if dt.name == "float64" else None
    hint = f"cast to {hint} first (e.g. .astype(np.{hint}))" if hint else \
        "use float32, bfloat16, float16, int32, int64, bool, uint8, int8, int16 or " \
        "uint16 (e.g. .to(hx.int64) first)"
    why = "WGSL has no float64" if dt.name == "float64" else \
        f"Haelixe's GPU kernels have no {dt.name}"
    raise TypeError(f"{what}: dtype {dt.name} is not available on the GPU ({why}); {hint}")


def storage_dtype(dt, what: str = "a GPU array") -> np.dtype:
    """The dtype a GPU array of ``dt`` reports (every supported dtype is kept; others
    raise, see :func:`check_dtype`)."""
    return check_dtype(dt, what)


def stored(dtype) -> tuple:
    """(numpy dtype, haelixe DType) of a new GPU array of ``dtype`` (a numpy dtype or a
    haelixe DType; others raise, see :func:`check_dtype`)."""
    hit = _STORED.get(dtype)
    if hit is None:
        dt = storage_dtype(dtype.np if hasattr(dtype, "np") else np.dtype(dtype),
                           "empty")
        hit = _STORED[dtype] = (dt, haelixe_dtype(dt))
    return hit


_STORED: dict = {}  # every new array asks: dtype -> stored(dtype)


def check_same_words(src, dst) -> None:
    """Refuse reading GPU memory of dtype ``src`` as ``dst`` (view(dtype)) unless both
    lay their elements out in words alike: float32 and int32 (one word each), bfloat16
    and float16 (two per word). The others are stored widened (bool, uint8, int16) or
    narrowed (int64 without shader-int64), so their words are not their bytes."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst or {src, dst} <= {F32, I32} or {src, dst} <= set(PACKED):
        return
    raise TypeError(f"view(dtype): reading {src.name} as {dst.name} is not available on "
                    f"the GPU, whose memory does not hold {src.name} as its bytes (it "
                    f"stores bool and 8- and 16-bit integers one per 32-bit word); move "
                    f"the tensor to the CPU for this view, or use .to({dst.name}) for a "
                    f"converted copy")


def narrow(a: np.ndarray, what: str = "from_numpy") -> np.ndarray:
    """``a`` unchanged, after checking that int64 values fit the int32 words they are
    stored in when the device has no 64-bit integers (OverflowError otherwise)."""
    if a.dtype != I64 or int64_native():
        return a
    info = np.iinfo(np.int32)
    if a.size and (a.max() > info.max or a.min() < info.min):
        raise OverflowError(
            f"{what}: int64 values in [{a.min()}, {a.max()}] do not fit int32, which this "
            f"GPU stores int64 tensors in (its adapter lacks the shader-int64 feature); "
            f"keep this tensor on the CPU or rescale it")
    return a


def kind(dt) -> str:
    """'f32', 'bf16', 'f16', 'i32', 'i64' or 'bool' (int64 is 'i32' where it is stored
    as int32 words): the type a kernel computes in. A widened dtype has none (a kernel
    computing in i32 would not wrap at its width): a TypeError naming the fix."""
    k = _KIND_OF.get(dt)
    if k is not None:
        return k
    dt = np.dtype(dt)
    if dt == I64:
        k = "i64" if int64_native() else "i32"
    else:
        k = KIND.get(dt)
    if k is None:
        raise TypeError(
            f"{dt.name} on the GPU: only conversions (.float(), .int(), .to(dtype)), copies, "
            f"views and moving back are available (WGSL has no {8 * dt.itemsize}-bit "
            f"integers, so other kernels could not wrap as {dt.name} must); convert first, "
            f"e.g. x.int() or x.float(), or compute on the CPU")
    _KIND_OF[dt] = k
    return k


def storage_kind(dt) -> str:
    """How an element of ``dt`` is loaded and stored: :func:`kind`, or 'i32' for the
    widened dtypes (for the copies and casts that move them)."""
    k = _STORAGE_KIND_OF.get(dt)
    if k is None:
        dt = np.dtype(dt)
        k = _STORAGE_KIND_OF[dt] = "i32" if dt in WIDENED else kind(dt)
    return k


# dtype -> kind() / storage_kind(), filled on first use: every dispatch asks several
# times, and the answer is fixed for the process (int64's storage is set at start)
_KIND_OF: dict = {}
_STORAGE_KIND_OF: dict = {}


def wrap_to(expr: str, dt) -> str:
    """WGSL of the i32 ``expr`` wrapped into the range of ``dt`` (two's complement, as
    numpy's and PyTorch's casts), or ``expr`` itself for a dtype of 32 bits or more."""
    dt = np.dtype(dt)
    if dt not in WIDENED:
        return expr
    bits = 8 * dt.itemsize
    if dt.kind == "u":
        return f"({expr} & {(1 << bits) - 1})"
    return f"(({expr} << {32 - bits}u) >> {32 - bits}u)"


def is_float(dt) -> bool:
    return np.dtype(dt) in (F32, BF16, F16)


def per_word(dt) -> int:
    """Elements per 32-bit word (2 for 16-bit floats), or -2 for 64-bit words (two words
    per element)."""
    k = _PER_WORD_OF.get(dt)
    if k is None:
        dt = np.dtype(dt)
        k = 2 if dt in PACKED else -2 if dt == I64 and int64_native() else 1
        _PER_WORD_OF[dt] = k
    return k


_PER_WORD_OF: dict = {}  # dtype -> per_word(), as _KIND_OF


def nbytes_physical(dt, n: int) -> int:
    """Bytes a buffer needs for ``n`` elements of ``dt`` (whole words)."""
    k = per_word(dt)
    if k == 2:
        return 4 * ((n + 1) // 2)
    return 8 * n if k == -2 else 4 * n


def word_span(dt, first: int, n: int) -> tuple:
    """(byte offset, byte count, element offset inside the span) of the whole words that
    hold elements ``first .. first + n`` of an array of ``dt``."""
    k = per_word(dt)
    if k == -2:
        return 8 * first, 8 * n, 0
    w0 = first // k
    w1 = -(-(first + n) // k)
    return 4 * w0, 4 * (w1 - w0), first - w0 * k


def to_words(a: np.ndarray) -> np.ndarray:
    """C-contiguous numpy array -> its GPU words (uint32), ready for upload."""
    dt = a.dtype
    if dt == BOOL:
        return a.reshape(-1).astype(np.uint32)
    if dt in PACKED:
        bits = a.reshape(-1).view(np.uint16)
        if bits.size % 2:
            bits = np.concatenate([bits, np.zeros(1, np.uint16)])
        return bits.view(np.uint32)
    if (dt == I64 and not int64_native()) or dt in WIDENED:
        return narrow(a).reshape(-1).astype(np.int32).view(np.uint32)
    return a.reshape(-1).view(np.uint32)


def from_words(words: bytes | memoryview, dt, first: int, n: int) -> np.ndarray:
    """Elements ``first .. first + n`` of ``dt`` from raw words (``first`` counted from
    the start of ``words``)."""
    dt = np.dtype(dt)
    raw = np.frombuffer(words, np.uint32)
    if dt in PACKED:
        return raw.view(np.uint16)[first:first + n].view(dt).copy()
    if dt == BOOL:
        return raw[first:first + n] != 0
    if dt == I64:
        if int64_native():
            return raw.view(np.int64)[first:first + n].copy()
        return raw[first:first + n].view(np.int32).astype(np.int64)
    if dt in WIDENED:
        return raw[first:first + n].view(np.int32).astype(dt)
    return raw[first:first + n].view(dt).copy()


def haelixe_dtype(dt) -> hdt.DType:
    return hdt.from_numpy(dt)
