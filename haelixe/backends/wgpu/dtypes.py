"""Which dtypes live on the GPU and how their elements are laid out in 32-bit words.

WGSL has 32-bit scalars only (f16 is an optional feature, 64-bit types do not exist):

- float32, int32: one word per element.
- bool: one u32 (0 or 1) per element.
- bfloat16: two elements per u32 (element 2w in the low half of word w, as in memory on a
  little-endian host), widened to f32 on load, rounded to nearest even on store.

int64 has no WGSL type either: integer tensors live on the GPU as int32 (JAX does the same
without x64), so ``hx.tensor([0, 2], device="gpu")`` (int64 by default) gives an int32
tensor. Narrowing is exact or an OverflowError; float64 is refused rather than rounded.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ... import dtype as hdt

F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
BOOL = np.dtype(np.bool_)
I64 = np.dtype(np.int64)
BF16 = np.dtype(ml_dtypes.bfloat16)
SUPPORTED = (F32, BF16, I32, BOOL)

# short names used in shader specialisation
KIND = {F32: "f32", BF16: "bf16", I32: "i32", BOOL: "bool"}
# the WGSL type a kernel computes in for each storage dtype
COMPUTE_TYPE = {"f32": "f32", "bf16": "f32", "i32": "i32", "bool": "u32"}


def check_dtype(dt, what: str = "a GPU array") -> np.dtype:
    """``dt`` as a numpy dtype the GPU stores, or a TypeError that says what to do."""
    dt = hdt.as_dtype(dt).np if not isinstance(dt, np.dtype) else dt
    if dt in SUPPORTED:
        return dt
    fix = {"float64": "float32", "int64": "int32", "float16": "float32 or bfloat16"}
    hint = fix.get(dt.name)
    hint = f"cast to {hint} first (e.g. .astype(np.{hint.split()[0]}))" if hint else \
        "use float32, bfloat16, int32 or bool"
    raise TypeError(f"{what}: dtype {dt.name} is not available on the GPU (WGSL has no "
                    f"{dt.name}); {hint}")


def storage_dtype(dt, what: str = "a GPU array") -> np.dtype:
    """The dtype a tensor of ``dt`` is stored as on the GPU: int64 narrows to int32, the
    supported dtypes stay, others raise (see :func:`check_dtype`)."""
    dt = hdt.as_dtype(dt).np if not isinstance(dt, np.dtype) else dt
    return I32 if dt == I64 else check_dtype(dt, what)


def narrow(a: np.ndarray, what: str = "from_numpy") -> np.ndarray:
    """``a`` with int64 narrowed to int32 (range-checked); other dtypes as they are."""
    if a.dtype != I64:
        return a
    info = np.iinfo(np.int32)
    if a.size and (a.max() > info.max or a.min() < info.min):
        raise OverflowError(
            f"{what}: int64 values in [{a.min()}, {a.max()}] do not fit int32, the GPU's "
            f"integer type (WGSL has no int64); keep this tensor on the CPU or rescale it")
    return a.astype(np.int32)


def kind(dt) -> str:
    """'f32', 'bf16', 'i32' or 'bool'."""
    return KIND[np.dtype(dt)]


def nbytes_physical(dt, n: int) -> int:
    """Bytes a buffer needs for ``n`` elements of ``dt`` (whole words)."""
    if np.dtype(dt) == BF16:
        return 4 * ((n + 1) // 2)
    return 4 * n


def to_words(a: np.ndarray) -> np.ndarray:
    """C-contiguous numpy array -> its GPU words (uint32), ready for upload."""
    dt = a.dtype
    if dt == BOOL:
        return a.reshape(-1).astype(np.uint32)
    if dt == BF16:
        bits = a.reshape(-1).view(np.uint16)
        if bits.size % 2:
            bits = np.concatenate([bits, np.zeros(1, np.uint16)])
        return bits.view(np.uint32)
    return a.reshape(-1).view(np.uint32)


def from_words(words: bytes | memoryview, dt, first: int, n: int) -> np.ndarray:
    """Elements ``first .. first + n`` of ``dt`` from raw words (``first`` counted from
    the start of ``words``)."""
    dt = np.dtype(dt)
    raw = np.frombuffer(words, np.uint32)
    if dt == BF16:
        return raw.view(np.uint16)[first:first + n].view(BF16).copy()
    if dt == BOOL:
        return raw[first:first + n] != 0
    return raw[first:first + n].view(dt).copy()


def haelixe_dtype(dt) -> hdt.DType:
    return hdt.from_numpy(dt)
