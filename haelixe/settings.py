"""PyTorch's global switches that Haelixe keeps and returns without changing what it
computes: deterministic algorithms (and their debug mode), float32 matmul precision,
inter-op threads, warn-always, flushing denormals.

Haelixe's CPU kernels give the same bits on every run already, and its matmuls run in
the input's precision (numpy's BLAS), so as on a PyTorch build without CUDA these
settings are remembered for the programs that read them back and change nothing else.
"""

from __future__ import annotations

import os
import warnings

_STATE = {"deterministic": False, "warn_only": False, "matmul_precision": "highest",
          "interop_threads": None, "warn_always": False}
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


#: the debug modes' names (set_deterministic_debug_mode("warn") is 1)
_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode) -> None:
    """set_deterministic_debug_mode(debug_mode)

    use_deterministic_algorithms by another name: "default" or 0 is
    use_deterministic_algorithms(False), "warn" or 1 (True, warn_only=True), "error" or
    2 (True); get_deterministic_debug_mode() reads it back."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(f"set_deterministic_debug_mode: invalid value of debug_mode, "
                               f"expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    elif not isinstance(debug_mode, int):  # (a bool is an int here, as in PyTorch)
        raise TypeError(f"set_deterministic_debug_mode: debug_mode must be str or int, but "
                        f"got {type(debug_mode).__name__}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"set_deterministic_debug_mode: invalid value of debug_mode, "
                           f"expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    """get_deterministic_debug_mode() -> int

    0 while deterministic algorithms are off, 1 while they are on with warn_only, 2
    while they are on (what set_deterministic_debug_mode or
    use_deterministic_algorithms last set)."""
    if not _STATE["deterministic"]:
        return 0
    return 1 if _STATE["warn_only"] else 2


def set_warn_always(b, /) -> None:
    """set_warn_always(b)

    Kept and returned by is_warn_always_enabled(). PyTorch shows some of its warnings
    once per process unless this is True; Haelixe's warnings go through Python's
    warnings module, whose filters decide how often each one shows."""
    if not isinstance(b, bool):
        raise RuntimeError(f"set_warn_always expects a bool, but got {type(b).__name__}")
    _STATE["warn_always"] = b


def is_warn_always_enabled() -> bool:
    """is_warn_always_enabled() -> bool

    What set_warn_always last set (False at the start)."""
    return _STATE["warn_always"]


def set_flush_denormal(mode) -> bool:
    """set_flush_denormal(mode) -> bool

    False, changing nothing: numpy and the GPU's kernels offer no switch for the CPU's
    flush-to-zero mode, so denormal numbers stay (as PyTorch answers on a CPU where it
    cannot set the mode)."""
    if not isinstance(mode, bool):
        raise RuntimeError(f"set_flush_denormal expects a bool, but got "
                           f"{type(mode).__name__}")
    return False


def init_num_threads() -> None:
    """init_num_threads()

    Nothing to do: Haelixe's thread count (set_num_threads) is one setting for the
    process, which every thread reads already."""


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
