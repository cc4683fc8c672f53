"""KernelView: the kernels a profiled step ran, on a timeline by phase and as one bar per
op, each bar linked to its autograd node (in a GraphView) and to the code it ran (a GPU
dispatch's WGSL, a CPU kernel's Python), highlighted.

Pure part: :func:`kernel_rows` groups a profile's kernels per (phase, kernel, node);
:func:`render_kernels_svg` draws the timeline and the bars; :func:`highlight` colours
source as HTML. Widget part: :class:`KernelView` draws the timeline, one button per bar
(clicking it selects the bar: its node is ringed in the linked GraphView and its source
shows below), and keeps the static picture of both for a notebook not run.
"""

from __future__ import annotations

import re

from . import svg
from .clock import RedrawClock
from .display import LiveWidget, Picture, flex_row

__all__ = ["PHASE_COLORS", "kernel_rows", "render_kernels_svg", "highlight", "KernelView"]

PHASES = ("forward", "backward", "optimizer", "replay")
PHASE_COLORS = {"forward": "#4a90d9", "backward": "#e0607e", "optimizer": "#8e6cc8",
                "replay": "#2f8f5b"}
WIDTH = 780
_M = 18
_LABEL_W = 250
LANE_H = 22
BAR_H = 18


def kernel_rows(events) -> list[dict]:
    """One row per (phase, kernel name, node) of the kernels in ``events`` (a profile's
    ``kernels()`` and its replays), largest total time first: ``key``, ``name``,
    ``phase``, ``node`` (the node's name), ``node_id``, ``calls``, ``total_ns``,
    ``bytes``, ``device``, ``dispatches`` (a replay's), ``event`` (the first)."""
    rows: dict = {}
    for e in events:
        node = e.node if e.phase == "backward" else e.made
        key = f"{e.phase}|{e.name}|{e.node_id}"
        r = rows.get(key)
        if r is None:
            r = rows[key] = {"key": key, "name": e.name, "phase": e.phase, "node": node,
                             "node_id": e.node_id, "calls": 0, "total_ns": 0, "bytes": 0,
                             "device": e.device, "dispatches": 0, "event": e,
                             "parent": e.parent}
        r["calls"] += 1
        r["total_ns"] += e.duration_ns
        r["bytes"] += e.bytes_moved
        r["dispatches"] += e.extra.get("dispatches", 0) if e.kind == "replay" else 0
    return sorted(rows.values(), key=lambda r: -r["total_ns"])


def _us(ns: float) -> str:
    return f"{ns / 1e3:.0f} us" if ns >= 100e3 else f"{ns / 1e3:.1f} us"


def row_label(r: dict) -> str:
    """A bar's label: the kernel, then whose it is."""
    if r["phase"] == "replay":
        return f"replay · {r['dispatches']} dispatches in one submit"
    who = r["node"] or ("no node (no grad)" if r["phase"] == "forward" else r["phase"])
    op = f" ({r['parent']})" if r.get("parent") and r["device"] == "gpu" else ""
    return f"{r['name']}{op} · {who}"


def _timeline(events, x, y, w, clock_note) -> tuple[str, float]:
    clock = ("host clock; GPU dispatches: the device's" if any(
        e.clock == "device" for e in events) else "host clock")
    parts = [svg.text(x - _LABEL_W + 4 + 170, y - 8, "timeline: each kernel at its start, "
                      f"as long as it took ({clock})", 11, svg.MUTED)]
    end = max((e.start_ns + e.duration_ns for e in events), default=0) or 1
    start = min((e.start_ns for e in events), default=0)
    span = max(end - start, 1)
    lanes = [p for p in PHASES if any(e.phase == p for e in events)] or ["forward"]
    for k, phase in enumerate(lanes):
        ly = y + k * LANE_H
        parts.append(svg.rect(x, ly, w, LANE_H - 4, svg.PANEL))
        parts.append(svg.text(x - 8, ly + 13, phase, 11, PHASE_COLORS[phase],
                              anchor="end", weight="600"))
        for e in events:
            if e.phase != phase:
                continue
            ex = x + w * (e.start_ns - start) / span
            ew = max(w * e.duration_ns / span, 1.0)
            parts.append(svg.rect(ex, ly, ew, LANE_H - 4, PHASE_COLORS[phase],
                                  class_="kernel", data_phase=phase)
                         + svg.title(f"{e.name}: {_us(e.duration_ns)}"))
    ly = y + len(lanes) * LANE_H
    parts.append(svg.text(x, ly + 8, "0", 9.5, svg.FAINT))
    parts.append(svg.text(x + w, ly + 8, _us(span), 9.5, svg.FAINT, anchor="end"))
    for k, piece in enumerate(svg.wrap(clock_note, w, 9.5) if clock_note else []):
        parts.append(svg.text(x, ly + 22 + 12 * k, piece, 9.5, svg.FAINT))
        ly += 12 if k else 0
    return "".join(parts), ly + 30


def _bars(rows, x, y, w, selected, limit) -> tuple[str, float]:
    total = sum(r["total_ns"] for r in rows) or 1
    top = max((r["total_ns"] for r in rows), default=1) or 1
    parts = [svg.text(_M, y, "per kernel and node: total time (calls, share)", 11,
                      svg.MUTED)]
    y += 10
    for r in rows[:limit]:
        on = r["key"] == selected
        label = row_label(r)
        while svg.text_width(label, 11) > _LABEL_W - 16 and len(label) > 8:
            label = label[:-2]
        if label != row_label(r):
            label = label.rstrip(" ·") + "…"
        bw = max(w * r["total_ns"] / top, 1.0)
        body = [svg.title(f"{row_label(r)}: {r['calls']} calls, {_us(r['total_ns'])}")]
        if on:
            body.append(svg.rect(_M - 4, y - 2, WIDTH - 2 * _M + 8, BAR_H + 4,
                                 svg.ACCENT_FILL, svg.ACCENT, rx=4, class_="selected"))
        body += [svg.text(x - 8, y + 13, label, 11, svg.INK, anchor="end"),
                 svg.rect(x, y, bw, BAR_H, PHASE_COLORS[r["phase"]], rx=2, class_="bar"),
                 svg.text(x + bw + 6, y + 13,
                          f"{_us(r['total_ns'])} · {r['calls']}× · "
                          f"{100 * r['total_ns'] / total:.0f}%", 10.5, svg.MUTED)]
        parts.append(svg.group("".join(body), class_="kernel-row", data_key=r["key"],
                               data_phase=r["phase"], data_selected="1" if on else None))
        y += BAR_H + 6
    if len(rows) > limit:
        parts.append(svg.text(x, y + 10, f"… {len(rows) - limit} more rows, shorter", 10.5,
                              svg.MUTED))
        y += 16
    return "".join(parts), y


def render_kernels_svg(events, *, selected=None, limit: int = 12, clock_note: str = "",
                       title: str | None = None, part: str = "both") -> str:
    """The kernels ``events`` (KernelEvents) as an SVG string (root ``<svg
    class="hx-kernels">``): a timeline lane per phase (``rect.kernel``), then one row
    per (phase, kernel, node) with its bar (``g.kernel-row``; the ``selected`` key is
    highlighted). ``part``: "timeline", "bars" or "both"."""
    events = list(events)
    rows = kernel_rows(events)
    x, w = _M + _LABEL_W, WIDTH - 2 * _M - _LABEL_W - 120
    total = sum(e.duration_ns for e in events)
    head = title or (f"kernels of the step · {len(events)} kernels, {_us(total)} "
                     f"in all")
    parts = [svg.text(_M, _M + 12, head, 14, svg.INK, weight="600")]
    y = _M + 40
    if part in ("timeline", "both"):
        tl, y = _timeline(events, x, y, w + 120, clock_note)
        parts.append(tl)
        y += 14
    if part in ("bars", "both"):
        bars, y = _bars(rows, x, y, w, selected, limit)
        parts.append(bars)
    if not events:
        parts.append(svg.text(WIDTH / 2, y + 10, "no kernels recorded", 12, svg.FAINT,
                              anchor="middle"))
        y += 20
    return svg.document(WIDTH, y + 10, "".join(parts), "hx-kernels", data_part=part)


# -- source, highlighted -------------------------------------------------------------------

_KEYWORDS = {
    "wgsl": r"fn|let|var|const|override|struct|return|if|else|for|loop|while|break|"
            r"continue|switch|case|default|enable|alias|storage|uniform|workgroup|"
            r"read_write|read|write|private|function",
    "python": r"def|return|if|elif|else|for|while|in|is|not|and|or|import|from|class|"
              r"with|as|None|True|False|lambda|yield|try|except|finally|raise|pass",
}
_TYPES = r"f32|f16|u32|i32|bool|vec[234]|mat[234]x[234]|array|atomic|ptr"
_COMMENT = {"wgsl": r"//[^\n]*", "python": r"#[^\n]*"}
_STYLE = {"comment": svg.FAINT, "keyword": "#7b4fb3", "type": "#2f8f5b",
          "attribute": "#c23b36", "number": "#b35c00", "string": "#2f6fde"}


def highlight(source: str, language: str) -> str:
    """``source`` as HTML (escaped) with its comments, keywords, types, attributes and
    numbers in colour: the inside of a ``<pre>``."""
    token = re.compile(
        rf"(?P<comment>{_COMMENT.get(language, r'(?!x)x')})"
        rf"|(?P<string>\"[^\"\n]*\"|'[^'\n]*')"
        rf"|(?P<attribute>@\w+)"
        rf"|(?P<keyword>\b(?:{_KEYWORDS.get(language, r'(?!x)x')})\b)"
        rf"|(?P<type>\b(?:{_TYPES})\b)"
        rf"|(?P<number>\b\d+(?:\.\d+)?[uif]?\b)")
    out, last = [], 0
    for m in token.finditer(source):
        out.append(svg.esc(source[last:m.start()]))
        kind = m.lastgroup
        if kind == "type" and language != "wgsl":
            out.append(svg.esc(m.group()))
        else:
            out.append(f'<span class="hx-{kind}" style="color:{_STYLE[kind]}">'
                       f'{svg.esc(m.group())}</span>')
        last = m.end()
    out.append(svg.esc(source[last:]))
    return "".join(out)


def entry_point(source: str, entry: str) -> str | None:
    """The WGSL function ``entry`` of a module (with the attributes above it), or None."""
    m = re.search(rf"\bfn\s+{re.escape(entry)}\s*\(", source)
    if m is None:
        return None
    start = source.rfind("@compute", 0, m.start())
    start = m.start() if start < 0 or source.count("\n", start, m.start()) > 3 else start
    depth, k = 0, source.find("{", m.end())
    while 0 <= k < len(source):
        depth += {"{": 1, "}": -1}.get(source[k], 0)
        if depth == 0:
            return source[start:k + 1]
        k += 1
    return None


def _details_html(row, source) -> str:
    if row is None:
        return (f'<div style="font:12px {svg.SANS};color:{svg.MUTED}">Click a bar: its '
                f'node is ringed in the graph and the code it ran shows here.</div>')
    e = row["event"]
    facts = [f"<b>{svg.esc(row_label(row))}</b>",
             f"{row['phase']} · {row['calls']} calls · {_us(row['total_ns'])} in all · "
             f"{_us(row['total_ns'] / row['calls'])} each",
             f"shapes {svg.esc(', '.join(svg.fmt_shape(s) for s in e.shapes) or '–')} · "
             f"{svg.esc(', '.join(e.dtypes) or '–')} · {row['bytes'] / 1e3:.1f} KB moved"]
    if e.extra.get("grid") is not None:
        facts.append(f"workgroups {svg.esc(e.extra['grid'])}")
    body = "<br>".join(facts)
    if source is not None:
        language, text = source
        entry = entry_point(text, e.name.split(":")[-1]) if language == "wgsl" else None
        what = "WGSL" if language == "wgsl" else "Python"
        style = (f'style="max-height:320px;overflow:auto;background:{svg.PANEL};'
                 f'padding:6px 8px;font:11.5px {svg.MONO};white-space:pre;margin:2px 0"')
        if entry is not None:
            body += (f'<div style="margin-top:6px;color:{svg.MUTED}">its entry point:</div>'
                     f'<pre class="hx-kernel-entry" {style}>{highlight(entry, language)}'
                     f'</pre><details><summary style="color:{svg.MUTED}">the whole WGSL '
                     f'module</summary>')
        else:
            body += f'<div style="margin-top:6px;color:{svg.MUTED}">the {what} it ran:</div>'
        body += (f'<pre class="hx-kernel-source" data-language="{language}" {style}>'
                 f'{highlight(text, language)}</pre>'
                 + ("</details>" if entry is not None else ""))
    return f'<div class="hx-kernel-details" style="font:12px {svg.SANS}">{body}</div>'


class KernelView(LiveWidget):
    """The kernels of a profiled step, linked to the graph and to their code.

        with hx.profile() as prof:
            loss = F.mse_loss(model(x), y); loss.backward()
        graph = hx.viz.GraphView(loss, model=model)
        kernels = hx.viz.KernelView(prof, graph=graph)   # display both
        kernels.select(kernels.rows[0]["key"])           # what a click on the bar does

    Selecting a bar rings its node in ``graph`` (a GraphView of the same step, when
    given: the node, or the collapsed module box that holds it) and shows the code the
    kernel ran: a GPU dispatch's WGSL, a CPU kernel's Python. ``limit`` bars are drawn,
    the longest first.
    """

    def __init__(self, profile, graph=None, limit: int = 12):
        import ipywidgets as w

        self.profile = profile
        self.graph = graph
        self.limit = limit
        kernels = {id(e) for e in profile.kernels()}
        self.events = [e for e in profile.events if e.kind == "replay" or id(e) in kernels]
        self.rows = kernel_rows(self.events)
        self.selected = None
        self.clock_note = _clock_note(profile, self.events)
        self.clock = RedrawClock(0.1)
        self.picture = Picture()
        total = sum(r["total_ns"] for r in self.rows) or 1
        top = max((r["total_ns"] for r in self.rows), default=1) or 1
        self._buttons = {}
        bar_rows = []
        for r in self.rows[:limit]:
            share = 100 * r["total_ns"] / top
            b = w.Button(description=_us(r["total_ns"]),
                         tooltip=f"{row_label(r)}: {r['calls']} calls, "
                                 f"{100 * r['total_ns'] / total:.0f}% of the kernels' time",
                         layout=w.Layout(width=f"calc({share:.1f}% * 0.55 + 64px)",
                                         height="22px", padding="0 4px"))
            b.style.button_color = PHASE_COLORS[r["phase"]]
            b.style.text_color = "white"
            b.add_class("hx-kernel-bar")
            if graph is not None and r["node_id"] in graph._ids:
                b.add_class("hx-linked")  # (its node is in the linked graph)
            b.on_click(lambda _, key=r["key"]: self.select(key))
            self._buttons[r["key"]] = b
            text = svg.esc(row_label(r))
            label = w.HTML(f'<span style="font:12px {svg.SANS};white-space:nowrap" '
                           f'title="{text}">{text} · {r["calls"]}×</span>',
                           layout=w.Layout(width="260px", overflow="hidden"))
            bar_rows.append(w.HBox([label, b], layout=w.Layout(width="100%")))
        self._details = w.HTML(_details_html(None, None))
        self.widget = w.VBox([flex_row([*self.picture.controls]), self.picture.html,
                              w.VBox(bar_rows, layout=w.Layout(width="100%")),
                              self._details], layout=w.Layout(width="100%"))
        self.widget.add_class("hx-kernel-view")
        self._redraw()

    def __repr__(self) -> str:
        total = sum(r["total_ns"] for r in self.rows)
        top = self.rows[0] if self.rows else None
        lead = (f"; the longest: {row_label(top)} ({_us(top['total_ns'])})" if top else "")
        return (f"KernelView: {len(self.events)} kernels in {len(self.rows)} rows, "
                f"{_us(total)} in all{lead}. Display it in a notebook for the picture, "
                f"or write it with .save_svg('kernels.svg').")

    def row(self, key) -> dict | None:
        return next((r for r in self.rows if r["key"] == key), None)

    def select(self, key) -> None:
        """Select the bar ``key`` (None clears): ring its node in the linked GraphView
        and show the code its kernel ran."""
        row = self.row(key) if key is not None else None
        self.selected = None if row is None else key
        for k, b in self._buttons.items():
            b.style.font_weight = "bold" if k == self.selected else "normal"
            if k == self.selected:
                b.add_class("hx-selected")
            else:
                b.remove_class("hx-selected")
        if self.graph is not None and row is not None and row["node_id"] is not None:
            self.graph.reveal(row["node_id"])
        source = None if row is None else self.profile.kernel_source(row["event"])
        self._details.value = _details_html(row, source)
        self._redraw()

    def to_svg(self) -> str:
        return render_kernels_svg(self.events, selected=self.selected, limit=self.limit,
                                  clock_note=self.clock_note, part="timeline")

    def static_svgs(self) -> list[str]:
        return [render_kernels_svg(self.events, selected=self.selected, limit=self.limit,
                                   clock_note=self.clock_note)]

    def close(self) -> None:
        self.widget.close()


def _clock_note(profile, events) -> str:
    if any(e.device == "gpu" for e in events):
        return profile.gpu_clock_note
    return "CPU kernels: their wall time"
