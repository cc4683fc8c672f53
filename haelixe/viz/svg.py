"""Small SVG building blocks shared by the widgets: palette, fonts, escaping, shapes.

Everything returns plain strings. Styling is written as presentation attributes on each
element, never as a ``<style>`` sheet: an inline SVG's stylesheet would leak into the
whole notebook page. Nothing here knows about tensors or widgets.
"""

from __future__ import annotations

from html import escape as _escape

SANS = "Inter, 'Segoe UI', 'Helvetica Neue', Helvetica, Arial, sans-serif"
MONO = "'JetBrains Mono', 'SFMono-Regular', Menlo, Consolas, 'DejaVu Sans Mono', monospace"

# One palette for every picture, so a colour means the same thing in each widget.
INK = "#1f2933"
MUTED = "#616e7c"
FAINT = "#9aa5b1"
RULE = "#e4e7eb"
PANEL = "#f5f7fa"
WHITE = "#ffffff"
ACCENT = "#f08c00"  # selection and "just happened"
ACCENT_FILL = "#ffe8a3"

# Graph node kinds: (fill, stroke).
KIND_COLORS = {
    "op": ("#dde8f7", "#4a78b5"),
    "leaf": ("#d8f0e2", "#2f8f5b"),
    "parameter": ("#efe6d0", "#7a5c1e"),  # olive brown: far from ACCENT's orange
    "output": ("#f8d7d6", "#c23b36"),
    "saved": ("#ebe0f7", "#7b4fb3"),
    "group": ("#d5f3f8", "#15aabf"),  # a collapsed module
}
CAST_COLOR = "#d6336c"

# Line series, as the labs' matplotlib plots draw them: the noisy input as grey dots,
# the clean target in blue, the model's prediction as a dashed red line.
SERIES_INPUT = "#b0b7c3"
SERIES_TARGET = "#2f6fde"
SERIES_PREDICTION = "#e5484d"
SERIES_RAW = "#a9c4f5"  # a noisy per-step curve under its smoothed SERIES_TARGET line

# Allocation tags, in the allocator's order (haelixe.memory.TAGS).
TAG_COLORS = {
    "parameter": "#e8a33d",
    "gradient": "#e0607e",
    "optimizer_state": "#8e6cc8",
    "activation": "#4a90d9",
    "temporary": "#9aa5b1",
}
REQUESTED = "#4a78b5"
WASTE = "#e8590c"
CACHED = "#cbd2d9"
RESERVED = "#1f2933"


def esc(value) -> str:
    """``value`` as text safe inside an element or an attribute."""
    return _escape(str(value), quote=True)


def num(v: float) -> str:
    """A coordinate, short: 12, 12.5, 12.25 (never 12.000000001)."""
    r = round(float(v), 2)
    return str(int(r)) if r == int(r) else f"{r:g}"


def _attrs(attrs: dict) -> str:
    parts = []
    for k, v in attrs.items():
        if v is None or v is False:
            continue
        name = k.rstrip("_").replace("_", "-")
        parts.append(f' {name}="{esc(num(v) if isinstance(v, float) else v)}"')
    return "".join(parts)


def rect(x, y, w, h, fill, stroke=None, **attrs) -> str:
    return (f'<rect x="{num(x)}" y="{num(y)}" width="{num(max(w, 0))}" '
            f'height="{num(max(h, 0))}" fill="{fill}"'
            + (f' stroke="{stroke}"' if stroke else "") + _attrs(attrs) + "/>")


def text(x, y, s, size=12, fill=INK, family=None, anchor="start", weight=None,
         **attrs) -> str:
    """A text element; ``family`` defaults to the document's (sans-serif)."""
    fam = f' font-family="{esc(family)}"' if family and family != SANS else ""
    return (f'<text x="{num(x)}" y="{num(y)}"{fam} '
            f'font-size="{num(size)}" fill="{fill}" text-anchor="{anchor}"'
            + (f' font-weight="{weight}"' if weight else "") + _attrs(attrs)
            + f">{esc(s)}</text>")


def line(x1, y1, x2, y2, stroke=RULE, width=1, **attrs) -> str:
    return (f'<line x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}" '
            f'stroke="{stroke}" stroke-width="{num(width)}"' + _attrs(attrs) + "/>")


def path(d: str, stroke=INK, width=1, fill="none", **attrs) -> str:
    return (f'<path d="{d}" stroke="{stroke}" stroke-width="{num(width)}" fill="{fill}"'
            + _attrs(attrs) + "/>")


def polyline(points, stroke=INK, width=1.5, fill="none", **attrs) -> str:
    pts = " ".join(f"{num(x)},{num(y)}" for x, y in points)
    return (f'<polyline points="{pts}" stroke="{stroke}" stroke-width="{num(width)}" '
            f'fill="{fill}" stroke-linejoin="round"' + _attrs(attrs) + "/>")


def title(s: str) -> str:
    """A hover tooltip for the enclosing element (shown by every browser, no script)."""
    return f"<title>{esc(s)}</title>"


def group(body: str, **attrs) -> str:
    return f"<g{_attrs(attrs)}>{body}</g>"


def document(width, height, body: str, cls: str, **attrs) -> str:
    """The root ``<svg>``; ``cls`` is its stable class (tests and the browser find it)."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="{cls}" width="{num(width)}" '
            f'height="{num(height)}" viewBox="0 0 {num(width)} {num(height)}" '
            f'font-family="{esc(SANS)}"'
            + _attrs(attrs) + f'>{rect(0, 0, width, height, WHITE)}{body}</svg>')


def side_by_side(svgs, cls: str, gap: float = 16) -> str:
    """Several SVG documents in one, left to right, tops aligned."""
    import re

    parts, x, height = [], 0.0, 0.0
    for s in svgs:
        m = re.match(r'<svg\b[^>]*?\swidth="([\d.]+)"\sheight="([\d.]+)"', s)
        w, h = float(m.group(1)), float(m.group(2))
        parts.append(s.replace("<svg ", f'<svg x="{num(x)}" y="0" ', 1))
        x, height = x + w + gap, max(height, h)
    return document(max(x - gap, 0), height, "".join(parts), cls)


def text_width(s: str, size: float, mono: bool = False, bold: bool = False) -> float:
    """Approximate rendered width, enough to size boxes around labels."""
    return len(s) * size * (0.61 if mono else 0.62 if bold else 0.56)


def wrap(s: str, width: float, size: float) -> list[str]:
    """Split ``s`` into lines of at most ``width`` pixels (by words)."""
    lines, cur = [], ""
    for word in s.split():
        cand = f"{cur} {word}" if cur else word
        if cur and text_width(cand, size) > width:
            lines.append(cur)
            cand = word
        cur = cand
    return lines + ([cur] if cur else [])


def legend(x, y, items, size=11, swatch=11, gap=16) -> tuple[str, float]:
    """A one-row legend of ``(label, fill, stroke)`` items, or ``(label, draw)`` where
    ``draw(x, y, size)`` returns the swatch's SVG; returns (svg, width)."""
    parts, cx = [], x
    for label, *look in items:
        if callable(look[0]):
            parts.append(look[0](cx, y - swatch + 2, swatch))
        else:
            parts.append(rect(cx, y - swatch + 2, swatch, swatch, look[0], look[1], rx=2))
        parts.append(text(cx + swatch + 5, y, label, size, MUTED))
        cx += swatch + 5 + text_width(label, size) + gap
    return "".join(parts), cx - x - gap


def fmt_bytes(n: float) -> str:
    """1536 -> '1.5 KiB': :func:`haelixe.memory.format_bytes`, so pictures use the units
    Haelixe prints."""
    from ..memory import format_bytes

    return format_bytes(n)


def fmt_shape(shape) -> str:
    """(4, 5) -> '4×5'; a scalar -> 'scalar'."""
    return "×".join(str(d) for d in shape) if len(shape) else "scalar"


# A light, ordered ramp (lavender -> blue -> mint -> green -> straw): storage positions
# get colours from it, so a cell in a grid and its place in the buffer match.
_RAMP = ((0xd8, 0xc8, 0xf0), (0xbc, 0xd4, 0xf2), (0xb4, 0xe6, 0xd9), (0xd6, 0xee, 0xb0),
         (0xfb, 0xe3, 0x9c))


def ramp(t: float) -> str:
    """Colour at ``t`` in [0, 1] on the light position ramp."""
    t = min(max(float(t), 0.0), 1.0) * (len(_RAMP) - 1)
    k = min(int(t), len(_RAMP) - 2)
    f = t - k
    a, b = _RAMP[k], _RAMP[k + 1]
    return "#" + "".join(f"{round(x + (y - x) * f):02x}" for x, y in zip(a, b))
