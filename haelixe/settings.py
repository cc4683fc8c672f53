"""PyTorch's global switches that Haelixe keeps and returns without changing what it
computes: deterministic algorithms, float32 matmul precision, inter-op threads.

Haelixe's CPU kernels give the same bits on every run already, and its matmuls run in
the input's precision (numpy's BLAS), so as on a PyTorch build without CUDA these
settings are remembered for the programs that read them back and change nothing else.
"""

from __future__ import annotations

import os
import warnings

_STATE = {"deterministic": False, "warn_only": False, "matmul_precision": "highest",
          "interop_threads": None}
_PRECISIONS = ("highest", "high", "medium")


def use_deterministic_algorithms(mode, *, warn_only=False) -> None:
    """use_deterministic_algorithms(mode, *, warn_only=False)

    Kept and returned by are_deterministic_algorithms_enabled(): Haelixe's ops are
    deterministic on the CPU already, so nothing else changes."""
    if not isinstance(mode, bool) or not isinstance(warn_only, bool):
        raise TypeError(f"use_deterministic_algorithms: mode and warn_only must be bools, "
                        f"got {type(mode).__name__} and {type(warn_only).__name__}")
    _STATE["deterministic"], _STATE["warn_only"] = mode, warn_only


def are_deterministic_algorithms_enabled() -> bool:
    """are_deterministic_algorithms_enabled() -> bool

    What use_deterministic_algorithms last set (False at the start)."""
    return _STATE["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """is_deterministic_algorithms_warn_only_enabled() -> bool

    The warn_only that use_deterministic_algorithms last set (False at the start)."""
    return _STATE["warn_only"]


def set_float32_matmul_precision(precision) -> None:
    """set_float32_matmul_precision(precision)

    "highest" (the start), "high" or "medium" (another string warns and changes
    nothing, as PyTorch's): kept and returned by
    get_float32_matmul_precision(). Haelixe's float32 matmuls always run in float32
    (as PyTorch's on a CPU), so it changes no result."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, got "
                           f"{type(precision).__name__}")
    if precision not in _PRECISIONS:  # (a warning and no change, as PyTorch's)
        warnings.warn(f"set_float32_matmul_precision: {precision!r} is not one of "
                      f"{', '.join(_PRECISIONS)}; the call has no effect", stacklevel=2)
        return
    _STATE["matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    """get_float32_matmul_precision() -> str

    What set_float32_matmul_precision last set ("highest" at the start)."""
    return _STATE["matmul_precision"]


def get_num_interop_threads() -> int:
    """get_num_interop_threads() -> int

    The inter-op thread count: the machine's cores unless set_num_interop_threads set
    it. Haelixe runs one op at a time, so this count changes nothing."""
    return _STATE["interop_threads"] or os.cpu_count() or 1


def set_num_interop_threads(num) -> None:
    """set_num_interop_threads(num)

    Kept and returned by get_num_interop_threads() (see there)."""
    if isinstance(num, bool) or not isinstance(num, int) or num < 1:
        raise RuntimeError(f"set_num_interop_threads: expects a positive number of "
                           f"threads, got {num!r}")
    _STATE["interop_threads"] = num
