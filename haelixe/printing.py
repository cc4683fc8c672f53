"""How a tensor prints: PyTorch's layout of ``repr(x)`` under its print options
(set_printoptions: precision, threshold, edgeitems, linewidth, profile, sci_mode).

It works on the host values as numpy (16-bit floats already widened to float32), so it
depends on nothing above numpy: Tensor.__repr__ hands it the array and the suffixes
(dtype, device, grad_fn) and gets the text back.

The rules, as PyTorch prints: a float tensor whose finite nonzero values are all
integral prints them as ``1.``; otherwise with ``precision`` decimals, switching to
scientific notation where the largest is more than 1000 times the smallest, above 1e8,
or below 1e-4 (``sci_mode`` forces it on or off); every element is right-aligned to
the widest; rows wrap at ``linewidth``; past ``threshold`` elements only ``edgeitems``
at each end of each dim are shown, with ``...`` between."""

from __future__ import annotations

import math

import numpy as np

_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}


class _Options:
    def __init__(self):
        self.__dict__.update(_PROFILES["default"], sci_mode=None)


OPTIONS = _Options()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
    profile=None, sci_mode=None)

    Options of how tensors print, as PyTorch's: ``precision`` decimals (4); more than
    ``threshold`` elements (1000) are summarised, showing ``edgeitems`` (3) at each
    end of each dim; lines wrap at ``linewidth`` (80) characters; ``profile``
    ("default", "short" or "full") sets those four first; ``sci_mode`` True or False
    forces scientific notation on or off, None (every call that does not pass it)
    lets the values choose."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of "
                             f"{sorted(_PROFILES)}, got {profile!r}")
        OPTIONS.__dict__.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            setattr(OPTIONS, name, value)
    OPTIONS.sci_mode = sci_mode  # (not kept across calls, as PyTorch's)


def get_printoptions() -> dict:
    """get_printoptions() -> dict

    The current print options, as keywords set_printoptions takes."""
    return dict(OPTIONS.__dict__)


class _Formatter:
    """The format of one tensor's elements, chosen from all of them (or from the
    elements a summary shows)."""

    def __init__(self, a: np.ndarray):
        self.floating = a.dtype.kind == "f"
        self.int_mode, self.sci_mode, self.width = True, False, 1
        flat = a.reshape(-1)
        if not self.floating:
            self.width = max([1, *(len(str(v)) for v in flat.tolist())])
            return
        shown = flat[np.isfinite(flat) & (flat != 0)]
        if shown.size == 0:  # (zeros, infinities and NaNs only: nothing to fit)
            return
        size = np.abs(shown.astype(np.float64))
        low, high = float(size.min()), float(size.max())
        values = shown.tolist()
        self.int_mode = bool(np.all(shown == np.ceil(shown)))
        if OPTIONS.sci_mode is None:
            self.sci_mode = high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4
        else:
            self.sci_mode = bool(OPTIONS.sci_mode)
        p = OPTIONS.precision
        if self.sci_mode:
            widths = (len(f"{v:.{p}e}") for v in values)
        elif self.int_mode:
            widths = (len(f"{v:.0f}") + 1 for v in values)  # (+1: the point of "3.")
        else:
            widths = (len(f"{v:.{p}f}") for v in values)
        self.width = max(1, *widths)

    def format(self, v) -> str:
        if not self.floating:
            text = str(v)
        elif self.sci_mode:
            text = f"{v:.{OPTIONS.precision}e}"
        elif self.int_mode:
            text = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            text = f"{v:.{OPTIONS.precision}f}"
        return text.rjust(self.width)


def _summary(a: np.ndarray) -> np.ndarray:
    """The elements a summary shows (edgeitems at each end of each dim), for the
    formatter to fit."""
    e = OPTIONS.edgeitems
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        return np.concatenate((a[:e], a[-e:])) if a.shape[0] > 2 * e else a
    if not e:
        return a[(slice(0, 0),) * a.ndim]
    rows = list(range(e)) + list(range(a.shape[0] - e, a.shape[0])) \
        if a.shape[0] > 2 * e else range(a.shape[0])
    return np.stack([_summary(a[i]) for i in rows])


def _vector(a, indent, summarize, fmt) -> str:
    e = OPTIONS.edgeitems
    per_line = max(1, int(math.floor((OPTIONS.linewidth - indent) / (fmt.width + 2))))
    if summarize and not e:
        cells = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        cells = [fmt.format(v) for v in a[:e].tolist()] + [" ..."] + \
            [fmt.format(v) for v in a[-e:].tolist()]
    else:
        cells = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(cells[i:i + per_line]) for i in range(0, len(cells), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(a, indent, summarize, fmt) -> str:
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    e, n = OPTIONS.edgeitems, a.shape[0]
    if summarize and n > 2 * e:
        parts = [_nested(a[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."] + \
            [_nested(a[i], indent + 1, summarize, fmt) for i in range(n - e, n)]
    else:
        parts = [_nested(a[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def body(a: np.ndarray, indent: int) -> str:
    """The values of a non-empty tensor as PyTorch prints them, the first line starting
    ``indent`` characters in (after ``tensor(``)."""
    summarize = a.size > OPTIONS.threshold
    fmt = _Formatter(_summary(a) if summarize else a)
    return _nested(a, indent, summarize, fmt)


def with_suffixes(text: str, suffixes, indent: int) -> str:
    """``text`` (``tensor(...`` so far) with each suffix (``dtype=...``) after a comma,
    on a new line where the current one would pass linewidth, and the closing ``)``."""
    out = [text]
    last = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if last + len(s) + 2 > OPTIONS.linewidth:
            out.append(",\n" + " " * indent + s)
            last = indent + len(s)
        else:
            out.append(", " + s)
            last += len(s) + 2
    out.append(")")
    return "".join(out)
