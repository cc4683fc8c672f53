"""Small line charts in SVG: a plot area with axes, ticks and a legend, and the series
drawn in it. The training dashboard is made of these.

:class:`Axes` maps data to pixels (a linear or log y axis) and draws lines, dots and
reference lines clipped to its limits. The left margin is measured from the widest tick
label, so labels are never cut, whatever the values (or none yet).
"""

from __future__ import annotations

import math

import numpy as np

from . import svg

__all__ = ["Axes", "nice_ticks", "log_ticks", "fmt_tick", "thin", "line_swatch",
           "dot_swatch"]

_TICK = 9.5  # tick label font size
_MAX_POINTS = 600  # points drawn per series (a panel is narrower than that)


def nice_ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    """About ``n`` round values (1, 2, 2.5 or 5 times a power of ten) covering lo..hi."""
    if not math.isfinite(lo) or not math.isfinite(hi) or hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    out, v = [], first
    while v <= hi + step * 1e-9:
        out.append(0.0 if abs(v) < step * 1e-9 else v)
        v += step
    return out


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten within lo..hi (with 2 and 5 times them when there are few)."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    decades = [10.0 ** k for k in range(a, b + 1)]
    if b - a <= 2:
        decades = sorted(m * d for d in decades for m in (1, 2, 5))
    return [v for v in decades if lo <= v * (1 + 1e-9) and v <= hi * (1 + 1e-9)]


def fmt_tick(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e4 or a < 1e-3:
        m, e = f"{v:.0e}".split("e")
        return f"{m}e{int(e)}"
    return f"{v:.3g}"


def thin(x, y, limit: int = _MAX_POINTS):
    """Every k-th point (and always the last), so drawing stays fast on long runs."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    k = max(1, -(-len(x) // limit))
    if k == 1:
        return x, y
    idx = np.r_[np.arange(0, len(x) - 1, k), len(x) - 1]
    return x[idx], y[idx]


def line_swatch(color, dash=None, width=1.8):
    """A legend swatch drawn as the line it names (dashed when ``dash``)."""
    def draw(x, y, size):
        return svg.line(x, y + size / 2, x + size, y + size / 2, color, width,
                        stroke_dasharray=dash)
    return draw


def dot_swatch(color):
    """A legend swatch drawn as the dots it names."""
    def draw(x, y, size):
        return "".join(f'<circle cx="{svg.num(x + dx)}" cy="{svg.num(y + size / 2)}" '
                       f'r="2.2" fill="{color}"/>' for dx in (2, size - 2))
    return draw


class Axes:
    """A plot area inside a panel ``width`` x ``height`` pixels: ``xlim`` and ``ylim``
    are the data limits, ``log`` makes y logarithmic. Draw calls return SVG strings."""

    def __init__(self, width, height, xlim, ylim, *, log: bool = False, title: str = "",
                 xlabel: str = "", yticks=None):
        self.log = log
        lo, hi = ylim
        if log:
            lo, hi = max(lo, 1e-12), max(hi, lo * 10)
        elif hi <= lo:
            lo, hi = lo - 1, hi + 1
        self.ylim = (lo, hi)
        x0, x1 = xlim
        self.xlim = (x0, x1 if x1 > x0 else x0 + 1)
        self.yticks = yticks if yticks is not None else \
            (log_ticks(lo, hi) if log else nice_ticks(lo, hi))
        self.xticks = nice_ticks(*self.xlim, n=4)
        label_w = max((svg.text_width(fmt_tick(v), _TICK) for v in self.yticks),
                      default=10)
        self.left = 12 + label_w + 6
        self.top = 44
        self.right = width - 12
        self.bottom = height - (34 if xlabel else 22)
        self.width, self.height = width, height
        self.title, self.xlabel = title, xlabel

    def px(self, x):
        x0, x1 = self.xlim
        return self.left + (np.asarray(x, dtype=np.float64) - x0) / (x1 - x0) * \
            (self.right - self.left)

    def py(self, y):
        lo, hi = self.ylim
        y = np.asarray(y, dtype=np.float64)
        if self.log:
            y = np.log10(np.maximum(y, lo * 1e-3))
            lo, hi = math.log10(lo), math.log10(hi)
        return self.bottom - (y - lo) / (hi - lo) * (self.bottom - self.top)

    def frame(self, legend=()) -> str:
        """Title, grid, tick labels and a legend row of ``(label, fill, stroke)``."""
        parts = [svg.text(12, 18, self.title, 12.5, svg.INK, weight="600",
                          class_="hx-chart-title")]
        if legend:
            leg, _ = svg.legend(12, 35, legend, size=10, swatch=10, gap=12)
            parts.append(leg)
        for v in self.yticks:
            y = float(self.py(v))
            parts.append(svg.line(self.left, y, self.right, y, svg.RULE))
            parts.append(svg.text(self.left - 6, y + 3.5, fmt_tick(v), _TICK, svg.MUTED,
                                  anchor="end", class_="hx-ytick"))
        for v in self.xticks:
            x = float(self.px(v))
            parts.append(svg.line(x, self.bottom, x, self.bottom + 4, svg.FAINT))
            parts.append(svg.text(x, self.bottom + 15, fmt_tick(v), _TICK, svg.MUTED,
                                  anchor="middle"))
        parts.append(svg.line(self.left, self.bottom, self.right, self.bottom, svg.FAINT))
        if self.xlabel:
            parts.append(svg.text((self.left + self.right) / 2, self.height - 6,
                                  self.xlabel, 10, svg.MUTED, anchor="middle"))
        return "".join(parts)

    def _inside(self, x, y):
        x, y = thin(x, y)
        lo, hi = self.ylim
        keep = np.isfinite(y) & (y >= lo) & (y <= hi) if self.log else np.isfinite(y)
        return x[keep], y[keep]

    def line(self, x, y, color, width=1.5, dash=None, cls=None) -> str:
        x, y = self._inside(x, y)
        if len(x) == 0:
            return ""
        pts = list(zip(self.px(x).tolist(), np.clip(self.py(y), self.top,
                                                    self.bottom).tolist()))
        if len(pts) == 1:
            return self.dots(x, y, color, 2.5, cls)
        return svg.polyline(pts, color, width, stroke_dasharray=dash, class_=cls)

    def dots(self, x, y, color, r=2.2, cls=None) -> str:
        x, y = self._inside(x, y)
        body = "".join(f'<circle cx="{svg.num(a)}" cy="{svg.num(b)}" r="{svg.num(r)}"/>'
                       for a, b in zip(self.px(x).tolist(), self.py(y).tolist()))
        return svg.group(body, fill=color, class_=cls) if body else ""

    def hline(self, y, color, dash="4 3", label=None, cls=None) -> str:
        lo, hi = self.ylim
        if y is None or not lo <= y <= hi:
            return ""
        py = float(self.py(y))
        out = svg.line(self.left, py, self.right, py, color, 1, stroke_dasharray=dash,
                       class_=cls)
        if label:
            out += svg.text(self.right - 2, py - 4, label, 9.5, color, anchor="end")
        return out

    def message(self, text) -> str:
        return svg.text((self.left + self.right) / 2, (self.top + self.bottom) / 2, text,
                        11, svg.FAINT, anchor="middle", class_="hx-chart-empty")
