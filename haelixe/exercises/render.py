"""Feedback as text and as HTML, and the small pictures only exercises need.

The HTML is self-contained (inline styles, inline SVG scaled to the output's width), so
it reads the same in JupyterLab, in a notebook saved with its outputs and on nbviewer.
Its text styles are this module's own: a passed check's HTML is saved in the instructor's
notebooks and compared by nbval, so it must not change when the widgets' palette does.
"""

from __future__ import annotations

import re
from html import escape

from ..viz import svg
from .core import FAILED, NOT_DONE, PASSED

FONT = "13px system-ui, 'Segoe UI', Helvetica, Arial, sans-serif"
TEXT, MUTED_TEXT, LINE = "#1f2933", "#616e7c", "#e4e7eb"

# status -> (symbol, word shown after the title, accent colour, background)
_LOOK = {
    PASSED: ("✓", "passed", "#2f8f5b", "#eef8f2"),
    FAILED: ("✗", "not right yet", "#c23b36", "#fdf1f0"),
    NOT_DONE: ("○", "not done yet", "#9a6700", "#fdf8e8"),
    None: ("·", "not checked yet", "#616e7c", "#f5f7fa"),
}


def look(status):
    return _LOOK.get(status, _LOOK[None])


def result_text(r) -> str:
    symbol, word, _, _ = look(r.status)
    lines = [f"{symbol} {r.exercise.label}: {word}"]
    if r.message and r.message != word:
        lines.append(f"  {r.message}")
    if r.detail:
        lines += [f"    {ln}" for ln in r.detail.splitlines()]
    if r.expected is not None:
        lines.append(f"  expected: {r.expected}")
    if r.got is not None:
        lines.append(f"  got:      {r.got}")
    if r.hint:
        lines.append(f"  hint: {r.hint}")
    lines += [f"  [picture: {caption}]" for caption, _ in r.pictures]
    return "\n".join(lines)


def result_html(r) -> str:
    symbol, word, accent, background = look(r.status)
    rows = []
    if r.message and r.message != word:
        rows.append(f'<div style="margin-top:3px">{escape(r.message)}</div>')
    if r.detail:
        rows.append('<pre style="margin:4px 0;padding:4px 6px;background:#ffffff;'
                    f'border:1px solid {LINE};white-space:pre-wrap;font-size:12px">'
                    f'{escape(r.detail)}</pre>')
    table = [(k, v) for k, v in (("expected", r.expected), ("got", r.got)) if v is not None]
    if table:
        cells = "".join(
            f'<tr><td style="color:{MUTED_TEXT};padding:1px 10px 1px 0;vertical-align:top">{k}'
            f'</td><td style="font-family:monospace;white-space:pre-wrap">{escape(v)}</td>'
            f'</tr>' for k, v in table)
        rows.append(f'<table style="margin-top:4px;border-collapse:collapse">{cells}</table>')
    if r.hint:
        rows.append(f'<div style="margin-top:4px"><b>hint:</b> {escape(r.hint)}</div>')
    if r.pictures:
        rows.append(pictures_html(r.pictures))
    return (f'<div class="hx-exercise" data-exercise="{escape(r.exercise.number)}" '
            f'data-status="{escape(r.status)}" style="border-left:4px solid {accent};'
            f'background:{background};padding:6px 10px;margin:2px 0;font:{FONT};'
            f'color:{TEXT};max-width:100%;box-sizing:border-box">'
            f'<div style="font-weight:600;color:{accent}">{symbol} '
            f'{escape(r.exercise.label)}: {word}</div>{"".join(rows)}</div>')


def _natural_width(picture: str) -> float:
    m = re.match(r'<svg [^>]*?width="([0-9.]+)"', picture)
    return float(m.group(1)) if m else 600.0


def fit(picture: str) -> str:
    """An SVG document that shrinks to the width it is given (it has a viewBox)."""
    return re.sub(r'^<svg ([^>]*?)width="[^"]*" height="[^"]*"',
                  r'<svg \1style="width:100%;height:auto"', picture, count=1)


def pictures_html(pictures) -> str:
    """Pictures side by side, each at most its own width: they shrink to three quarters of
    it to stay side by side, and wrap to one per row in a narrower column."""
    items = "".join(
        f'<figure style="margin:0;flex:1 1 {0.75 * _natural_width(p):.0f}px;max-width:'
        f'{_natural_width(p):.0f}px;min-width:0">{fit(p)}'
        f'<figcaption style="color:{MUTED_TEXT};font-size:12px">{escape(c)}</figcaption>'
        f'</figure>'
        for c, p in pictures)
    return f'<div style="display:flex;flex-wrap:wrap;gap:10px;margin-top:6px">{items}</div>'


def grid_svg(values, title: str, cell: int = 18) -> str:
    """A 2-D boolean grid (rows × cols), True cells filled: attention masks and the like."""
    rows, cols = len(values), len(values[0]) if len(values) else 0
    m, top = 14, 40
    parts = [svg.text(m, 20, title, 12.5, svg.INK, weight="600"),
             svg.text(m, 34, "rows: query position · columns: key position", 10.5,
                      svg.MUTED)]
    for i in range(rows):
        for j in range(cols):
            on = bool(values[i][j])
            parts.append(svg.rect(m + 16 + j * cell, top + 6 + i * cell, cell - 2, cell - 2,
                                  "#4a78b5" if on else svg.PANEL, svg.RULE, rx=2,
                                  class_="on" if on else "off"))
    for k in range(max(rows, cols)):
        if k < rows:
            parts.append(svg.text(m + 10, top + 6 + k * cell + cell * 0.7, k, 9, svg.FAINT,
                                  anchor="end"))
        if k < cols:
            parts.append(svg.text(m + 16 + k * cell + cell / 2 - 1, top + 2, k, 9, svg.FAINT,
                                  anchor="middle"))
    width = max(m * 2 + 16 + cols * cell, 250)
    return svg.document(width, top + 12 + rows * cell, "".join(parts), "hx-grid")
