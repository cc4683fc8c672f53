"""MemorySnapshotView: a memory snapshot's timeline by category, its peak, and the
largest blocks live at any moment with the source lines that made them.

Pure part: :func:`snapshot_series` replays a snapshot's trace into bytes per category
after each event; :func:`live_at` lists the blocks live after one event;
:func:`render_snapshot_svg` draws both. Widget part: :class:`MemorySnapshotView` takes
what ``hx.memory_snapshot()`` returned or a file ``hx.save_memory_snapshot`` wrote, and
scrubs over the trace with a slider (the table follows), starting at the peak.
"""

from __future__ import annotations

import os

from ..memory import TAGS
from . import svg
from .clock import RedrawClock
from .display import LiveWidget, Picture, flex_row
from .memory import _nice_ticks, byte_axis, stacked_areas

__all__ = ["snapshot_series", "live_at", "render_snapshot_svg", "MemorySnapshotView"]

EARLIER = "before recording"
_CATEGORIES = (*TAGS, EARLIER)
_COLORS = {**svg.TAG_COLORS, EARLIER: svg.CACHED}
WIDTH = 780
_M = 18
_AXIS_W = 64
PLOT_H = 170
ROW_H = 17
MAX_POINTS = 600


def snapshot_series(snap: dict) -> list[tuple[int, tuple]]:
    """[(event index, bytes per category in ``_CATEGORIES`` order)], one point before the
    first event (index -1) and one after each, bucketed to at most ``MAX_POINTS``
    points that keep each bucket's highest total (so the peak survives)."""
    blocks = snap["timeline_blocks"]
    index = {c: k for k, c in enumerate(_CATEGORIES)}
    run = [0] * len(_CATEGORIES)
    run[index[EARLIER]] = snap["start_allocated_bytes"]
    points = [(-1, tuple(run))]
    for k, ev in enumerate(snap["trace"]):
        b = blocks[ev["block"]]
        sign = 1 if ev["action"] == "alloc" else -1
        run[index[b["category"]]] += sign * b["size"]
        # the allocator's own total: what was allocated before, or freed from before
        run[index[EARLIER]] = ev["allocated_bytes"] - sum(run[:-1])
        points.append((k, tuple(run)))
    if len(points) <= MAX_POINTS:
        return points
    stride = -(-len(points) // MAX_POINTS)
    out = []
    for start in range(0, len(points), stride):
        out.append(max(points[start:start + stride], key=lambda p: sum(p[1])))
    if out[-1] != points[-1]:
        out.append(points[-1])
    return out


def live_at(snap: dict, event: int) -> list[dict]:
    """The trace's blocks live right after event ``event`` (-1: before the first),
    largest first."""
    held: set = set()
    for ev in snap["trace"][:event + 1]:
        (held.add if ev["action"] == "alloc" else held.discard)(ev["block"])
    blocks = snap["timeline_blocks"]
    return sorted((blocks[b] for b in held), key=lambda b: -b["size"])


def _where(block) -> str:
    frames = block.get("frames") or []
    if not frames:
        return "(no line outside haelixe)"
    f = frames[0]
    return f"{os.path.basename(f['filename'])}:{f['line']} in {f['name']}"


def render_snapshot_svg(snap: dict, at: int | None = None, rows: int = 10) -> str:
    """The snapshot as an SVG string (root ``<svg class="hx-memory-snapshot">``): stacked
    bytes by category over the trace, the peak marked (``line.peak``), the moment ``at``
    (default the peak; ``line.at``) and a table of the largest blocks live then
    (``g.block-row``, each with its size, category, op and source line)."""
    peak = snap["peak"]
    at = peak["event"] if at is None else int(at)
    series = snapshot_series(snap)
    n = len(snap["trace"])
    x0, w = _M + _AXIS_W, WIDTH - 2 * _M - _AXIS_W
    parts = [svg.text(_M, _M + 12, f"memory snapshot · {snap.get('device', '?')}", 14,
                      svg.INK, weight="600"),
             svg.text(_M, _M + 30, f"{n} allocations and frees recorded · peak allocated "
                      f"{svg.fmt_bytes(peak['allocated_bytes'])} at event {peak['event']}",
                      11.5, svg.MUTED)]
    leg, _ = svg.legend(_M, _M + 50, [(c.replace("_", " "), _COLORS[c], None)
                                      for c in _CATEGORIES])
    parts.append(leg)
    y0 = _M + 74
    top = max(max(sum(p[1]) for p in series), 1) * 1.08
    ticks = _nice_ticks(top, 3)
    top = max(top, ticks[-1])

    def px(k):
        return x0 + w * (k + 1) / max(n, 1)

    def py(v):
        return y0 + PLOT_H - PLOT_H * v / top

    parts.append(byte_axis(x0, w, ticks, py))
    order = [len(_CATEGORIES) - 1] + list(range(len(_CATEGORIES) - 1))  # earlier first
    parts.append(stacked_areas([px(p[0]) for p in series],
                               [(_CATEGORIES[c], _COLORS[_CATEGORIES[c]],
                                 [p[1][c] for p in series]) for c in order],
                               py, "data_category"))
    parts.append(svg.line(x0, y0 + PLOT_H, x0 + w, y0 + PLOT_H, svg.MUTED))
    parts.append(svg.text(x0 + w, y0 + PLOT_H + 14, f"events 0..{max(n - 1, 0)}", 9.5,
                          svg.FAINT, anchor="end"))
    if peak["event"] >= 0:
        xp = px(peak["event"])
        parts.append(svg.line(xp, y0, xp, y0 + PLOT_H, svg.WASTE, 1.2,
                              stroke_dasharray="4 3", class_="peak"))
        label = f"peak {svg.fmt_bytes(peak['allocated_bytes'])}"
        right = xp + 4 + svg.text_width(label, 10) < x0 + w
        parts.append(svg.text(xp + (4 if right else -4), y0 + 10, label, 10, svg.WASTE,
                              anchor="start" if right else "end"))
    if at != peak["event"] and -1 <= at < n:
        parts.append(svg.line(px(at), y0, px(at), y0 + PLOT_H, svg.INK, 1.2, class_="at"))
    # the table: what held the memory at that moment
    held = live_at(snap, at)
    ty = y0 + PLOT_H + 40
    moment = "the peak" if at == peak["event"] else f"event {at}"
    total = sum(b["size"] for b in held)
    parts.append(svg.text(_M, ty, f"largest blocks live at {moment}: {len(held)} blocks, "
                          f"{svg.fmt_bytes(total)} recorded (+ "
                          f"{svg.fmt_bytes(_earlier_at(snap, at, total))} from before)",
                          11.5, svg.INK, weight="600"))
    cols = (_M, _M + 80, _M + 200, _M + 330)
    ty += 18
    for k, label in enumerate(("size", "category", "saved by", "allocated at")):
        parts.append(svg.text(cols[k], ty, label, 10.5, svg.MUTED))
    for b in held[:rows]:
        ty += ROW_H
        row = [svg.rect(cols[1] - 14, ty - 9, 9, 9, _COLORS.get(b["category"], svg.FAINT)),
               svg.text(cols[0], ty, svg.fmt_bytes(b["size"]), 11, svg.INK, svg.MONO),
               svg.text(cols[1], ty, b["category"].replace("_", " "), 11, svg.INK),
               svg.text(cols[2], ty, b.get("op") or "–", 11, svg.INK),
               svg.text(cols[3], ty, _where(b), 11, svg.INK, svg.MONO)]
        parts.append(svg.group("".join(row), class_="block-row",
                               data_category=b["category"], data_size=b["size"]))
    if len(held) > rows:
        ty += ROW_H
        parts.append(svg.text(cols[0], ty, f"… and {len(held) - rows} smaller", 10.5,
                              svg.MUTED))
    return svg.document(WIDTH, ty + 20, "".join(parts), "hx-memory-snapshot",
                        data_at=at, data_peak_event=peak["event"])


def _earlier_at(snap, at, recorded) -> int:
    if at < 0 or not snap["trace"]:
        return snap["start_allocated_bytes"]
    return snap["trace"][at]["allocated_bytes"] - recorded


class MemorySnapshotView(LiveWidget):
    """A memory snapshot in the notebook: where the bytes were over the recorded step,
    by category, the peak marked, and what held them at any moment.

        hx.record_memory_history(device="gpu")
        ... one training step ...
        view = hx.viz.MemorySnapshotView(hx.memory_snapshot("gpu"))   # or a saved file
        view.scrub(120)          # the table at event 120 (the slider does the same)

    ``snapshot`` is what ``hx.memory_snapshot()`` returned or the path of a file
    ``hx.save_memory_snapshot`` wrote.
    """

    def __init__(self, snapshot, rows: int = 10):
        import ipywidgets as w

        if isinstance(snapshot, (str, os.PathLike)):
            from ..memory_history import load_memory_snapshot

            snapshot = load_memory_snapshot(snapshot)
        self.snapshot = snapshot
        self.rows = rows
        self.at = snapshot["peak"]["event"]
        self.clock = RedrawClock(0.1)
        self.picture = Picture()
        n = len(snapshot["trace"])
        self._slider = w.IntSlider(value=self.at, min=-1, max=max(n - 1, 0),
                                   description="event", continuous_update=False,
                                   layout=w.Layout(width="100%", max_width="420px"))
        self._peak_btn = w.Button(description="peak", tooltip="move to the peak",
                                  layout=w.Layout(width="auto"))
        self._slider.observe(lambda ch: self.scrub(ch["new"]), names="value")
        self._peak_btn.on_click(lambda _: self.scrub(self.snapshot["peak"]["event"]))
        self.widget = w.VBox([flex_row([self._slider, self._peak_btn,
                                        *self.picture.controls]), self.picture.html],
                             layout=w.Layout(width="100%"))
        self.widget.add_class("hx-memory-snapshot-view")
        self._redraw()

    def __repr__(self) -> str:
        s, peak = self.snapshot, self.snapshot["peak"]
        where = f"peak {svg.fmt_bytes(peak['allocated_bytes'])} at event {peak['event']}"
        return (f"MemorySnapshotView of {s.get('device', '?')}: {len(s['trace'])} events, "
                f"{where}. Display it in a notebook for the picture, or write it with "
                f".save_svg('snapshot.svg').")

    def scrub(self, event: int) -> None:
        """Show the blocks live right after ``event`` (the peak at first)."""
        self.at = int(event)
        if self._slider.value != self.at:
            self._slider.value = self.at
        self._redraw()

    def live(self) -> list[dict]:
        """The blocks live at the moment shown, largest first."""
        return live_at(self.snapshot, self.at)

    def to_svg(self) -> str:
        return render_snapshot_svg(self.snapshot, self.at, self.rows)

    def static_svgs(self) -> list[str]:
        return [render_snapshot_svg(self.snapshot, None, self.rows)]

    def close(self) -> None:
        self.widget.close()
