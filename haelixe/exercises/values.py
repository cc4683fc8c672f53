"""Reading a learner's answer whatever its type: short descriptions for the feedback, and
conversions that say what is wrong instead of raising.

Every ``as_*`` function returns ``(value, None)`` when the answer can be read and
``(None, complaint)`` when it cannot; the complaint is a sentence for the feedback.
"""

from __future__ import annotations

import numbers

import numpy as np


def _is_tensor(v) -> bool:
    from ..tensor import Tensor

    return isinstance(v, Tensor)


def describe(value, limit: int = 120) -> str:
    """A short, typed description: 'None', 'the tuple (1, 12, 4)', 'a Tensor of shape
    (3, 4) float32: [[0, 1, ...]]'."""
    if value is None:
        return "None"
    if _is_tensor(value):
        body = _array_text(_tensor_numpy(value), limit)
        return f"a Tensor of shape {value.shape} {value.dtype.name}: {body}"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} {value.dtype}: {_array_text(value, limit)}"
    if isinstance(value, (tuple, list)):
        kind = "tuple" if isinstance(value, tuple) else "list"
        return f"the {kind} {_clip(repr(_plain(value)), limit)}"
    if isinstance(value, type):
        return f"the class {value.__name__}"
    if callable(value):
        return f"the function {getattr(value, '__name__', repr(value))}"
    return _clip(repr(value), limit)


def _plain(v):
    """numpy scalars inside tuples print as np.int64(3) in numpy 2: show 3."""
    if isinstance(v, (tuple, list)):
        return type(v)(_plain(x) for x in v)
    if isinstance(v, np.generic):
        return v.item()
    return v


def _clip(s: str, limit: int) -> str:
    return s if len(s) <= limit else s[:limit - 1] + "…"


def _tensor_numpy(t) -> np.ndarray:
    return np.asarray(t.detach().cpu().float().numpy() if t.dtype.name == "bfloat16"
                      else t.detach().cpu().numpy())


def _array_text(a: np.ndarray, limit: int) -> str:
    with np.printoptions(precision=5, suppress=True, threshold=24, edgeitems=3,
                         linewidth=10_000):
        s = np.array2string(np.asarray(a), separator=", ")
    return _clip(" ".join(s.split()), limit)


def _is_integral(v) -> bool:
    """An int, or a float holding a whole number (never a bool, nan or inf)."""
    if isinstance(v, (bool, np.bool_)):
        return False
    if isinstance(v, numbers.Integral):
        return True
    return isinstance(v, numbers.Real) and float(v).is_integer()


def as_int_tuple(value, length: int | None = None, what: str = "the answer"):
    """A tuple of Python ints from a tuple, list, 1-D array or Tensor of integers."""
    if _is_tensor(value):
        value = _tensor_numpy(value)
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            return None, f"{what} should be a flat tuple of integers, got {describe(value)}"
        value = value.tolist()
    if not isinstance(value, (tuple, list)):
        return None, f"{what} should be a tuple of integers, got {describe(value)}"
    out = []
    for v in value:
        if not _is_integral(v):
            return None, f"{what} should hold integers only, got {describe(value)}"
        out.append(int(v))
    if length is not None and len(out) != length:
        return None, (f"{what} should have {length} entries (one per dim), got {len(out)}: "
                      f"{describe(value)}")
    return tuple(out), None


def as_int(value, what: str = "the answer"):
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if not _is_integral(value):
        return None, f"{what} should be an integer, got {describe(value)}"
    return int(value), None


def as_array(value, shape=None, what: str = "the answer", dtype=np.float64):
    """A numpy array (``dtype``) from a Tensor, array, list or number, of ``shape`` if
    given."""
    try:
        if _is_tensor(value):
            a = _tensor_numpy(value)
        elif isinstance(value, (np.ndarray, list, tuple, numbers.Number)):
            a = np.asarray(value)
        else:
            return None, f"{what} should be a Tensor or an array, got {describe(value)}"
        if a.dtype == object:
            return None, f"{what} should hold numbers, got {describe(value)}"
        a = a.astype(dtype)
    except (TypeError, ValueError) as e:
        return None, f"{what} could not be read as numbers ({e}): {describe(value)}"
    if shape is not None and a.shape != tuple(shape):
        return None, f"{what} has shape {a.shape}, expected {tuple(shape)}"
    return a, None


def as_dtype(value, what: str = "the answer"):
    """A haelixe DType from a DType or a name ('bfloat16', 'bf16', 'float32', 'f32')."""
    from ..dtype import DType
    from ..dtype import as_dtype as parse

    if isinstance(value, DType):
        return value, None
    if isinstance(value, str):
        try:
            return parse(value), None
        except (TypeError, ValueError, KeyError):
            pass
    return None, f"{what} should be a dtype such as hx.float32 or hx.bfloat16, got " \
                 f"{describe(value)}"


def first_difference(expected: np.ndarray, got: np.ndarray, atol: float, rtol: float):
    """The index of the first element that differs (None when all agree)."""
    bad = ~np.isclose(got, expected, atol=atol, rtol=rtol, equal_nan=False)
    if not bad.any():
        return None
    return tuple(int(i) for i in np.argwhere(bad)[0])
