"""MemoryView: the slab allocator's bins, totals and timeline, live from its events.

Pure part: :class:`MemoryTimeline` turns :class:`haelixe.memory.MemoryEvent` records
into a bounded series (allocated bytes by tag, reserved bytes), and
:func:`render_memory_svg` draws ``Allocator.stats()`` and a timeline. Widget part:
:class:`MemoryView` subscribes to an allocator (through :mod:`haelixe.memory`'s public
API: ``get_allocator``, ``stats``, ``events``, ``subscribe``); its callback only records
numbers and the picture is redrawn on the redraw clock (see :mod:`.clock`). Sizes are in
binary units, as Haelixe prints them (:func:`haelixe.memory.format_bytes`).

Bin bars use one linear scale, written on the root as ``data-bin-scale`` (pixels per
byte): a bin's requested, rounding-waste and cached segments are ``bytes * scale`` tall,
with bytes = ``requested_bytes``, ``allocated_bytes - requested_bytes`` and
``cached * bin_size`` from ``stats()["bins"]``.
"""

from __future__ import annotations

import math

from ..memory import TAGS
from . import svg
from .clock import RedrawClock
from .display import LiveWidget, Picture, flex_row

__all__ = ["TAGS", "MemoryTimeline", "bin_segments", "render_memory_svg", "MemoryView"]

_TAG_INDEX = {t: k for k, t in enumerate(TAGS)}

WIDTH = 780
BIN_AREA_H = 150  # pixels for the tallest bin
_LABEL_ROOM = 16  # above the tallest bin, for its "in use+cached" label
TIMELINE_H = 150
_M = 18  # outer margin
_AXIS_W = 64  # room for byte labels left of the plots


class MemoryTimeline:
    """A bounded record of allocated bytes by tag and reserved bytes, one point per
    event (or, once ``max_points`` is reached, per bucket of events, keeping the
    bucket's highest allocated and reserved bytes so peaks survive).

    ``record(event)`` is the allocator subscriber's whole job: a few integer updates.
    """

    def __init__(self, by_tag: dict | None = None, seq: int = 0, reserved: int = 0,
                 max_points: int = 800):
        self.max_points = max_points
        self.tags = [int((by_tag or {}).get(t, 0)) for t in TAGS]
        self.points: list = []  # (seq, reserved, (bytes per tag...))
        self.steps: list = []  # (seq, step) markers
        self.stride = 1  # events per point
        self.needs_resync = False  # a retag event: per-tag bytes must be re-read
        self._bucket = 0
        self._peak = None  # (allocated, point) with the highest allocated in the bucket
        self._seq = seq
        self._reserved = reserved
        self.points.append((seq, reserved, tuple(self.tags)))

    @property
    def last_seq(self) -> int:
        return self._seq

    def record(self, ev) -> None:
        """Account one MemoryEvent (seq, kind, size, requested, bin, tag, allocated,
        reserved)."""
        seq, kind, size, _req, _bin, tag, allocated, reserved = ev
        tags = self.tags
        if kind == "alloc" or kind == "reuse":
            tags[_TAG_INDEX[tag]] += size
        elif kind == "free":
            tags[_TAG_INDEX[tag]] -= size
        elif kind == "retag":
            self.needs_resync = True  # the event names the new tag only
        self._seq, self._reserved = seq, reserved
        if self.stride == 1:
            self.points.append((seq, reserved, tuple(tags)))
        else:
            peak = self._peak
            if peak is None or allocated > peak[0] or reserved > peak[1][1]:
                self._peak = (allocated, (seq, reserved, tuple(tags)))
            self._bucket += 1
            if self._bucket < self.stride:
                return
            self.points.append(self._peak[1])
            self._bucket, self._peak = 0, None
        if len(self.points) >= 2 * self.max_points:
            self._halve()

    def _halve(self) -> None:
        pts = self.points
        merged = [max(pts[k], pts[k + 1], key=lambda p: (sum(p[2]), p[1]))
                  for k in range(0, len(pts) - 1, 2)]
        if len(pts) % 2:
            merged.append(pts[-1])
        self.points = merged
        self.stride *= 2

    def resync(self, by_tag: dict) -> None:
        """Take the per-tag bytes from the allocator (after a retag event)."""
        self.tags = [int(by_tag.get(t, 0)) for t in TAGS]
        self.needs_resync = False

    def mark_step(self, step: int) -> None:
        """Remember that training step ``step`` ended at the latest event."""
        self.steps.append((self._seq, int(step)))
        if len(self.steps) > 400:
            del self.steps[::2]

    def series(self) -> list:
        """[(seq, reserved, (bytes per tag...))], oldest first, ending at the latest
        event even when its bucket is not full yet."""
        last = (self._seq, self._reserved, tuple(self.tags))
        return self.points + ([last] if self.points[-1][0] != self._seq else [])


# -- drawing -----------------------------------------------------------------------------

def bin_segments(stats: dict) -> list[dict]:
    """Per bin, the three byte counts its bar stacks: requested, rounding waste (the
    slab bytes in use beyond the request) and cached (free slabs kept for reuse)."""
    out = []
    for size, b in sorted(stats.get("bins", {}).items()):
        out.append({"size": size, "in_use": b["in_use"], "cached": b["cached"],
                    "requested": b["requested_bytes"],
                    "waste": b["allocated_bytes"] - b["requested_bytes"],
                    "cached_bytes": b["cached"] * size})
    return out


def _nice_ticks(top: float, n: int = 4) -> list[float]:
    """Byte values for axis ticks: 1, 2 or 5 times a power of ten of the right binary
    unit, so labels read 0, 512 KiB, 1 MiB..."""
    if top <= 0:
        return [0.0]
    unit = next((s for s in (1 << 30, 1 << 20, 1 << 10) if top >= s), 1)
    raw = top / unit / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw) * unit
    return [k * step for k in range(int(top // step) + 1)]


def _summary(stats: dict) -> list[str]:
    alloc, req, res = (stats["allocated_bytes"], stats["requested_bytes"],
                       stats["reserved_bytes"])
    hits, misses = stats["cache_hits"], stats["cache_misses"]
    waste = alloc - req
    rate = f"{100 * hits / (hits + misses):.1f}%" if hits + misses else "–"
    return [
        f"allocated {svg.fmt_bytes(alloc)} · requested {svg.fmt_bytes(req)} · rounding "
        f"waste {svg.fmt_bytes(waste)} ({100 * waste / alloc if alloc else 0:.1f}%) · "
        f"reserved {svg.fmt_bytes(res)} (cached {svg.fmt_bytes(res - alloc)})",
        f"cache hit rate {rate} ({hits} hits, {misses} driver allocations) · peak "
        f"allocated {svg.fmt_bytes(stats['peak_allocated_bytes'])} · peak reserved "
        f"{svg.fmt_bytes(stats['peak_reserved_bytes'])} · {stats['active_blocks']} live "
        f"blocks",
    ]


def _tag_bar(stats, x, y, w) -> str:
    res = stats["reserved_bytes"]
    parts = [svg.text(x, y - 5, "allocated by tag, within reserved", 11, svg.MUTED)]
    parts.append(svg.rect(x, y, w, 14, svg.CACHED, rx=3))
    cx = x
    for tag in TAGS:
        b = stats["by_tag"].get(tag, 0)
        if b <= 0 or res <= 0:
            continue
        bw = w * b / res
        parts.append(svg.rect(cx, y, bw, 14, svg.TAG_COLORS[tag], class_="tag",
                              data_tag=tag, data_bytes=b)
                     + svg.title(f"{tag}: {svg.fmt_bytes(b)} ({b} bytes)"))
        cx += bw
    leg, _ = svg.legend(x, y + 30, [(t.replace("_", " "), svg.TAG_COLORS[t], None)
                                    for t in TAGS] + [("cached", svg.CACHED, None)])
    return "".join(parts) + leg


def _bins_panel(segs, x, y, w) -> tuple[str, float]:
    """The bar chart; returns (svg, pixels per byte)."""
    tallest = max((s["requested"] + s["waste"] + s["cached_bytes"] for s in segs),
                  default=0)
    scale = BIN_AREA_H / tallest if tallest else 0.0
    parts = [svg.text(x - _AXIS_W + 4, y - 24, "bins: bytes per size class; above each "
                      "bar, slabs in use + cached", 11, svg.MUTED)]
    leg, _ = svg.legend(x - _AXIS_W + 4, y - 6, [("requested", svg.REQUESTED, None),
                                                 ("rounding waste", svg.WASTE, None),
                                                 ("cached", svg.CACHED, None)])
    parts.append(svg.group(leg, class_="legend"))
    base = y + _LABEL_ROOM + BIN_AREA_H
    for v in _nice_ticks(tallest, 3):
        ty = base - v * scale
        parts.append(svg.line(x, ty, x + w, ty, svg.RULE))
        parts.append(svg.text(x - 6, ty + 4, svg.fmt_bytes(v), 10, svg.FAINT,
                              anchor="end"))
    if not segs:
        parts.append(svg.text(x + w / 2, base - BIN_AREA_H / 2, "no slabs yet", 12,
                              svg.FAINT, anchor="middle"))
        return "".join(parts), scale
    slot = w / len(segs)
    bw = max(min(34.0, slot * 0.72), 2.0)
    rotate = slot < 44
    for k, s in enumerate(segs):
        bx = x + k * slot + (slot - bw) / 2
        top = base
        bar = []
        for cls, key, color in (("bin-requested", "requested", svg.REQUESTED),
                                ("bin-waste", "waste", svg.WASTE),
                                ("bin-cached", "cached_bytes", svg.CACHED)):
            h = s[key] * scale
            top -= h
            bar.append(svg.rect(bx, top, bw, h, color, class_=cls, data_bytes=s[key]))
        tip = (f"bin {svg.fmt_bytes(s['size'])} ({s['size']} bytes): {s['in_use']} in use, "
               f"{s['cached']} cached; requested {s['requested']} B, waste {s['waste']} B, "
               f"cached {s['cached_bytes']} B")
        bar.append(svg.text(bx + bw / 2, top - 4, f"{s['in_use']}+{s['cached']}", 9,
                            svg.MUTED, anchor="middle", class_="bin-label"))
        lx, ly = bx + bw / 2, base + 12
        if rotate:
            bar.append(svg.text(lx, ly, svg.fmt_bytes(s["size"]), 9.5, svg.MUTED,
                                anchor="end", transform=f"rotate(-40 {svg.num(lx)} "
                                                        f"{svg.num(ly)})"))
        else:
            bar.append(svg.text(lx, ly, svg.fmt_bytes(s["size"]), 9.5, svg.MUTED,
                                anchor="middle"))
        parts.append(svg.group(svg.title(tip) + "".join(bar), class_="bin",
                               data_size=s["size"], data_in_use=s["in_use"],
                               data_cached=s["cached"]))
    parts.append(svg.line(x, base, x + w, base, svg.MUTED))
    return "".join(parts), scale


def byte_axis(x, w, ticks, py) -> str:
    """Rules across a plot at the byte values ``ticks``, labelled at the left."""
    return "".join(svg.line(x, py(v), x + w, py(v), svg.RULE)
                   + svg.text(x - 6, py(v) + 4, svg.fmt_bytes(v), 10, svg.FAINT,
                              anchor="end") for v in ticks)


def stacked_areas(xs, layers, py, data_attr: str) -> str:
    """Areas stacked bottom up: ``layers`` is [(name, colour, a value per x)], each
    area a ``path.area`` named by ``data_attr``; a layer that is zero throughout draws
    nothing."""
    parts = []
    below = [0.0] * len(xs)
    xs_text = [svg.num(x) + "," for x in xs]  # (each point's text made once: a live
    # view redraws this often, with hundreds of points per layer)
    below_text = [x + svg.num(py(0.0)) for x in xs_text]
    for name, color, values in layers:
        above = [b + v for b, v in zip(below, values)]
        if any(a != b for a, b in zip(above, below)):
            above_text = [x + svg.num(py(a)) for x, a in zip(xs_text, above)]
            d = "M" + " L".join(above_text + below_text[::-1]) + " Z"
            parts.append(svg.path(d, "none", 0, fill=color, opacity="0.85", class_="area",
                                  **{data_attr: name}))
            below_text = above_text
        below = above
    return "".join(parts)


def _timeline_panel(series, steps, peak, x, y, w) -> str:
    parts = [svg.text(x - _AXIS_W + 4, y - 8, "timeline: allocated by tag (areas), reserved "
                      "(line), over allocator events", 11, svg.MUTED)]
    h = TIMELINE_H
    if len(series) < 2:
        parts.append(svg.rect(x, y, w, h, svg.PANEL))
        parts.append(svg.text(x + w / 2, y + h / 2, "no events yet: the timeline records "
                              "from the moment the view subscribes", 12, svg.FAINT,
                              anchor="middle"))
        return "".join(parts)
    s0, s1 = series[0][0], series[-1][0]
    top = 1.08 * max(max(p[1] for p in series), max(sum(p[2]) for p in series), peak, 1)
    ticks = _nice_ticks(top, 3)
    top = max(top, ticks[-1])

    def px(seq):
        return x + w * (seq - s0) / (s1 - s0 or 1)

    def py(v):
        return y + h - h * v / top

    parts.append(byte_axis(x, w, ticks, py))
    parts.append(stacked_areas([px(p[0]) for p in series],
                               [(tag, svg.TAG_COLORS[tag], [p[2][k] for p in series])
                                for k, tag in enumerate(TAGS)], py, "data_tag"))
    parts.append(svg.polyline([(px(p[0]), py(p[1])) for p in series], svg.RESERVED, 1.6,
                              class_="reserved"))
    if peak:
        parts.append(svg.line(x, py(peak), x + w, py(peak), svg.WASTE, 1,
                              stroke_dasharray="4 3"))
        parts.append(svg.text(x + w - 2, py(peak) - 4, f"peak allocated "
                              f"{svg.fmt_bytes(peak)}", 10, svg.WASTE, anchor="end"))
    shown = [(q, st) for q, st in steps if s0 <= q <= s1]
    labelled = math.inf  # x of the last label drawn: newest first, labels keep clear
    for q, st in reversed(shown):
        parts.append(svg.line(px(q), y + h, px(q), y + h + 4, svg.MUTED))
        label = f"step {st}"
        if labelled - px(q) > svg.text_width(label, 9.5) + 8:
            labelled = px(q)
            parts.append(svg.text(px(q), y + h + 14, label, 9.5, svg.MUTED,
                                  anchor="middle", class_="step-label"))
    parts.append(svg.line(x, y + h, x + w, y + h, svg.MUTED))
    parts.append(svg.text(x + w, y + h + (28 if shown else 14), f"events {s0}..{s1}", 9.5,
                          svg.FAINT, anchor="end"))
    return "".join(parts)


def render_memory_svg(stats: dict, timeline=None, *, title: str | None = None) -> str:
    """The allocator's state as an SVG string (root ``<svg class="hx-memory">``).

    stats: ``Allocator.stats()``. timeline: a :class:`MemoryTimeline` or its
    ``series()`` list, or None. Each bin is a ``<g class="bin" data-size=...>`` holding
    ``rect.bin-requested``, ``rect.bin-waste`` and ``rect.bin-cached``, each
    ``bytes * data-bin-scale`` pixels tall (see the module docstring).
    """
    steps = []
    if isinstance(timeline, MemoryTimeline):
        steps, timeline = timeline.steps, timeline.series()
    series = timeline or []
    x, w = _M + _AXIS_W, WIDTH - 2 * _M - _AXIS_W
    parts = [svg.text(_M, _M + 12, title or f"memory · {stats.get('device', '?')}", 14,
                      svg.INK, weight="600")]
    for k, ln in enumerate(_summary(stats)):
        parts.append(svg.text(_M, _M + 32 + 15 * k, ln, 11.5, svg.INK if k == 0 else
                              svg.MUTED))
    y = _M + 82
    parts.append(_tag_bar(stats, _M, y, WIDTH - 2 * _M))
    y += 86
    bins, scale = _bins_panel(bin_segments(stats), x, y, w)
    parts.append(bins)
    y += _LABEL_ROOM + BIN_AREA_H + 62
    parts.append(_timeline_panel(series, steps, stats.get("peak_allocated_bytes", 0), x, y,
                                 w))
    height = y + TIMELINE_H + 40
    return svg.document(WIDTH, height, "".join(parts), "hx-memory",
                        data_bin_scale=repr(scale), data_device=stats.get("device", "?"))


# -- the widget --------------------------------------------------------------------------

class MemoryView(LiveWidget):
    """A live picture of one allocator: bins, totals, tag split and a timeline.

        mem = hx.viz.MemoryView("gpu")      # or "cpu", or an Allocator
        mem                                 # display; it follows allocations live
        ... training ...; mem.mark_step(step)
        mem.refresh()                       # the final picture (also for the saved page)
        mem.close()

    The subscriber records numbers only; the SVG is redrawn on the
    :class:`~haelixe.viz.clock.RedrawClock` (at most every ``interval`` seconds, at
    least once a second while events come), and on :meth:`refresh`.
    """

    def __init__(self, device="gpu", *, interval: float = 0.25, live: bool = True,
                 max_points: int = 800):
        import ipywidgets as w

        from .. import memory

        self.allocator = device if isinstance(device, memory.Allocator) else \
            memory.get_allocator(device)
        st = self.allocator.stats()
        last = self.allocator.events(last=1)
        self.timeline = MemoryTimeline(st["by_tag"], last[0].seq if last else 0,
                                       st["reserved_bytes"], max_points)
        self.clock = RedrawClock(interval)
        self._countdown = 1
        self._unsubscribe = None
        self.picture = Picture()
        self._live = w.ToggleButton(value=live, description="live", icon="circle",
                                    tooltip="follow allocations as they happen",
                                    layout=w.Layout(width="auto"))
        self._refresh_btn = w.Button(description="refresh", icon="refresh",
                                     layout=w.Layout(width="auto"))
        self._empty_btn = w.Button(description="empty cache",
                                   tooltip="give cached slabs back to the driver",
                                   layout=w.Layout(width="auto"))
        self._live.observe(lambda ch: self.start() if ch["new"] else self.stop(),
                           names="value")
        self._refresh_btn.on_click(lambda _: self.refresh())
        self._empty_btn.on_click(lambda _: (self.allocator.empty_cache(), self.refresh()))
        self.widget = w.VBox([flex_row([self._live, self._refresh_btn, self._empty_btn,
                                        *self.picture.controls]), self.picture.html],
                             layout=w.Layout(width="100%"))
        self.widget.add_class("hx-memory-view")
        if live:
            self.start()
        self._redraw()

    def __repr__(self) -> str:
        st = self.allocator.stats()
        return (f"MemoryView of the {st['device']} allocator: allocated "
                f"{svg.fmt_bytes(st['allocated_bytes'])}, reserved "
                f"{svg.fmt_bytes(st['reserved_bytes'])} in {len(st['bins'])} bins; "
                f"{self.timeline.last_seq} events. Display it in a notebook for the "
                f"picture, or write it with .save_svg('memory.svg').")

    _CHECK_EVERY = 32  # events between looks at the clock (reading it costs more)

    def _on_event(self, ev) -> None:
        # Runs inside the allocator's lock on every event: record, redraw rarely.
        tl = self.timeline
        tl.record(ev)
        self._countdown -= 1
        if self._countdown > 0:
            return
        self._countdown = self._CHECK_EVERY
        if tl.needs_resync:
            tl.resync(self.allocator.stats()["by_tag"])
        if self.clock.due():
            self._redraw()

    def start(self) -> None:
        """Follow the allocator's events (the default)."""
        if self._unsubscribe is None:
            self._unsubscribe = self.allocator.subscribe(self._on_event)
        if not self._live.value:
            self._live.value = True

    def stop(self) -> None:
        """Stop following events (the picture stays as it is)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._live.value:
            self._live.value = False

    def mark_step(self, step: int) -> None:
        """Label the timeline with a training step (call once per step)."""
        self.timeline.mark_step(step)

    def stats(self) -> dict:
        return self.allocator.stats()

    def to_svg(self) -> str:
        tl = self.timeline
        if tl.needs_resync:
            tl.resync(self.allocator.stats()["by_tag"])
        return render_memory_svg(self.allocator.stats(), tl)

    def refresh(self) -> None:
        """Redraw now, and bring the saved page's static picture up to date."""
        self._settle()

    def close(self) -> None:
        """Unsubscribe and close the widgets."""
        self.stop()
        self.widget.close()
