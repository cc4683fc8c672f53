"""LayoutView: a tensor's logical grid beside the physical buffer its strides walk.

Pure part: :func:`render_layout_svg` draws a layout (shape, strides, offset) over a
storage of ``storage_size`` elements: every grid cell shows the storage position it reads,
every storage cell the logical index that lands on it (or "×N" when a zero stride makes N
elements share it), and a selected element is traced to its cell with the sum
``offset + Σ stride·index``. Widget part: :class:`LayoutView` adds index sliders, editable
shape/strides/offset through ``as_strided`` and linked comparison of views of one storage
(:class:`LayoutCompare`).
"""

from __future__ import annotations

import math

import numpy as np

from .. import layout as L
from . import svg
from .display import LiveWidget, Picture, flex_row

__all__ = ["element_positions", "position_formula", "render_layout_svg", "LayoutView",
           "LayoutCompare"]

CELL = 32  # logical grid cell, pixels
SCELL_W, SCELL_H = 36, 38  # storage cell
MAX_SIDE = 16  # rows / columns drawn per grid
MAX_PANELS = 8  # slices of a 3-D block drawn side by side
MAX_STORAGE = 384  # storage cells drawn
_M, _GAP = 18, 26
_OUTSIDE_FILL, _OUTSIDE_STROKE = "#f8d7d6", "#c23b36"


def element_positions(shape, strides, offset) -> np.ndarray:
    """Storage position of every element, as an int64 array of ``shape``."""
    pos = np.full(tuple(shape), int(offset), dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        view = [1] * len(shape)
        view[d] = n
        pos = pos + (np.arange(n, dtype=np.int64) * int(s)).reshape(view)
    return pos


def position_formula(index, strides, offset) -> str:
    """``offset + Σ stride·index = position`` written out, e.g. '2 + 4·1 + (-1)·3 = 3'."""
    terms = [str(offset)] + [f"{s if s >= 0 else f'({s})'}·{i}"
                             for i, s in zip(index, strides)]
    return " + ".join(terms) + f" = {L.element_position(index, strides, offset)}"


def _fmt_index(index) -> str:
    return ", ".join(str(i) for i in index)


def _panels(shape, selected, leading):
    """(prefix, panel indices, rows, cols): which slices of an N-D layout are drawn.
    Dims before the last three are fixed at ``prefix`` (the slice selector)."""
    nd = len(shape)
    if nd > 3:
        src = selected if selected is not None else (leading or (0,) * (nd - 3))
        prefix = tuple(src[:nd - 3])
    else:
        prefix = ()
    panels = list(range(min(shape[-3], MAX_PANELS))) if nd >= 3 else [None]
    rows = shape[-2] if nd >= 2 else 1
    cols = shape[-1] if nd >= 1 else 1
    return prefix, panels, rows, cols


def _element(prefix, p, i, j, nd) -> tuple:
    idx = prefix + ((p,) if nd >= 3 else ()) + ((i,) if nd >= 2 else ())
    return idx + ((j,) if nd >= 1 else ())


def render_layout_svg(shape, strides, offset, storage_size, selected=None, *,
                      name: str = "x", leading=None, highlight_positions=(),
                      values=None) -> str:
    """A strided layout as an SVG string (root ``<svg class="hx-layout">``).

    shape, strides, offset: the view, in elements; storage_size: elements in the
    buffer. selected: a full index tuple to trace (its storage cell gets class
    ``selected`` and the root ``data-selected-position``). leading: for more than three
    dims, the indices of the leading dims to show (default: the selected element's, else
    zeros). highlight_positions: storage positions to outline (a view beside this one
    picked them). values: optional array of ``shape`` for the selected element's value.
    A layout that reaches outside the storage is drawn, with the offending cells in red
    and the engine's message.
    """
    shape, strides = tuple(int(n) for n in shape), tuple(int(s) for s in strides)
    offset, nd = int(offset), len(shape)
    if len(strides) != nd:
        raise ValueError(f"render_layout_svg: shape {shape} and strides {strides} must "
                         f"have the same length")
    if selected is not None:
        selected = tuple(int(i) for i in selected)
        if len(selected) != nd or any(not 0 <= i < n for i, n in zip(selected, shape)):
            raise IndexError(f"render_layout_svg: index {selected} is outside shape {shape}")
    error = None
    try:
        L.check_as_strided(storage_size, shape, strides, offset)
    except ValueError as e:
        error = str(e)
    numel = math.prod(shape)
    highlight = set(highlight_positions)
    sel_pos = L.element_position(selected, strides, offset) if selected is not None else None

    # How many elements land on each storage cell, and the first one that does.
    counts, first = {}, {}
    if 0 < numel <= 2_000_000:
        pos = element_positions(shape, strides, offset).reshape(-1)
        uniq, idx, cnt = np.unique(pos, return_index=True, return_counts=True)
        for p, k, c in zip(uniq.tolist(), idx.tolist(), cnt.tolist()):
            counts[p] = c
            first[p] = np.unravel_index(k, shape) if nd else ()

    lo, hi = L.extent(shape, strides, offset)
    if storage_size <= MAX_STORAGE:
        s_lo, s_hi = 0, storage_size
    else:  # a window over the cells the view reads, keeping the selected one in it
        s_lo = max(0, min(lo, storage_size - 1) - 8)
        if sel_pos is not None and not s_lo <= sel_pos < s_lo + MAX_STORAGE:
            s_lo = max(0, sel_pos - MAX_STORAGE // 2)
        s_lo = min(s_lo, storage_size - MAX_STORAGE)
        s_hi = s_lo + MAX_STORAGE
    span = max(s_hi - s_lo, 1)

    def color(p):
        if not 0 <= p < storage_size:
            return _OUTSIDE_FILL
        return svg.ramp((p - s_lo) / max(span - 1, 1))

    # -- the logical grid ----------------------------------------------------------------
    prefix, panels, rows, cols = _panels(shape, selected, leading)
    r_show, c_show = min(rows, MAX_SIDE), min(cols, MAX_SIDE)
    gw, gh = max(c_show, 1) * CELL, max(r_show, 1) * CELL
    top = _M + (138 if selected is not None else 96)
    parts, grid_at = [], {}
    x = _M + 22
    for p in panels:
        label = name if nd < 3 else \
            f"{name}[{_fmt_index(prefix + (p,))}, :, :]"
        parts.append(svg.text(x, top - 20, label, 11.5, svg.MUTED, svg.MONO))
        for j in range(c_show):
            parts.append(svg.text(x + j * CELL + CELL / 2, top - 5, j, 9, svg.FAINT,
                                  anchor="middle"))
        for i in range(r_show if nd >= 2 else 1):
            if nd >= 2:
                parts.append(svg.text(x - 5, top + i * CELL + CELL / 2 + 3, i, 9, svg.FAINT,
                                      anchor="end"))
            for j in range(c_show if nd >= 1 else 1):
                idx = _element(prefix, p, i, j, nd)
                q = L.element_position(idx, strides, offset)
                cx, cy = x + j * CELL, top + i * CELL
                grid_at[idx] = (cx, cy)
                inside = 0 <= q < storage_size
                stroke, sw = (svg.WHITE, 1.5) if inside else (_OUTSIDE_STROKE, 1.5)
                if q in highlight:
                    stroke, sw = svg.ACCENT, 2
                if idx == selected:
                    stroke, sw = svg.ACCENT, 3
                cell = svg.rect(cx + 1, cy + 1, CELL - 2, CELL - 2, color(q), stroke, rx=4,
                                stroke_width=sw)
                cell += svg.text(cx + CELL / 2, cy + CELL / 2 + 4, q, 10.5,
                                 svg.INK if inside else _OUTSIDE_STROKE, svg.MONO,
                                 anchor="middle")
                parts.append(svg.group(svg.title(f"{name}[{_fmt_index(idx)}] -> "
                                                 f"storage[{q}]") + cell,
                                       class_="element", data_index=_fmt_index(idx),
                                       data_pos=q))
        x += gw + _GAP
    grid_w = x - _GAP
    notes = []
    if rows > MAX_SIDE or cols > MAX_SIDE:
        notes.append(f"grid shows {r_show}×{c_show} of {rows}×{cols}")
    if nd >= 3 and shape[-3] > MAX_PANELS:
        notes.append(f"{MAX_PANELS} of {shape[-3]} slices")
    if numel == 0:
        notes.append("the view has no elements")
    y = top + gh + 14
    if notes:
        parts.append(svg.text(_M, y + 4, "; ".join(notes), 10.5, svg.FAINT))
        y += 14

    # -- the storage strip -----------------------------------------------------------------
    y += 34
    parts.append(svg.text(_M, y - 8, f"storage: {storage_size} elements"
                          + (f" (cells {s_lo}..{s_hi - 1} shown)"
                             if (s_lo, s_hi) != (0, storage_size) else "")
                          + " · number above: position · below: index that reads it",
                          11, svg.MUTED))
    ncols = min(span, max(16, int(max(grid_w - _M, 560) // SCELL_W)))
    row_h = SCELL_H + 22
    strip_at = {}
    for k, q in enumerate(range(s_lo, s_hi)):
        r, c = divmod(k, ncols)
        cx, cy = _M + c * SCELL_W, y + 20 + r * row_h
        strip_at[q] = (cx, cy)
        n = counts.get(q, 0)
        stroke, sw = "#d0d6dd", 1
        classes = "cell storage"
        if q in highlight:
            stroke, sw = svg.ACCENT, 2
        if q == sel_pos:
            stroke, sw, classes = svg.ACCENT, 3, "cell storage selected"
        fill = color(q) if n else svg.PANEL
        body = [svg.title(f"storage[{q}]: " + (f"{n} element(s), first "
                                               f"{name}[{_fmt_index(first[q])}]"
                                               if n else "not read by this view")),
                svg.rect(cx + 1, cy, SCELL_W - 2, SCELL_H, fill, stroke, rx=3,
                         stroke_width=sw, class_=classes, data_pos=q, data_count=n),
                svg.text(cx + SCELL_W / 2, cy + 12, q, 9, svg.MUTED if n else svg.FAINT,
                         svg.MONO, anchor="middle")]
        if n > 1:
            body.append(svg.text(cx + SCELL_W / 2, cy + 29, f"×{n}", 11.5, svg.INK,
                                 anchor="middle", weight="700"))
        elif n == 1:
            lab = _fmt_index(first[q]).replace(" ", "")
            body.append(svg.text(cx + SCELL_W / 2, cy + 29, lab,
                                 9.5 if len(lab) <= 5 else 7.5, svg.INK, svg.MONO,
                                 anchor="middle"))
        parts.append(svg.group("".join(body), class_="storage-cell"))
    strip_rows = math.ceil(span / ncols) if s_hi > s_lo else 0

    # The selected element's row, walked along its last dim: arcs from one element's cell
    # to the next show the direction (backwards for a negative stride).
    if selected is not None and nd >= 1:
        walk = [L.element_position(selected[:-1] + (k,), strides, offset)
                for k in range(min(shape[-1], MAX_SIDE))]
        for a, b in zip(walk, walk[1:]):
            if a == b or a not in strip_at or b not in strip_at:
                continue
            (ax, ay), (bx, by) = strip_at[a], strip_at[b]
            if ay != by:
                continue
            x1, x2 = ax + SCELL_W / 2, bx + SCELL_W / 2
            lift = min(4 + abs(x2 - x1) * 0.1, 9)
            x1, x2 = x1 + (3 if x2 > x1 else -3), x2 - (3 if x2 > x1 else -3)
            parts.append(svg.path(f"M{svg.num(x1)},{svg.num(ay - 2)} Q{svg.num((x1 + x2) / 2)}"
                                  f",{svg.num(ay - 2 - 2 * lift)} {svg.num(x2)},"
                                  f"{svg.num(ay - 5)}", svg.ACCENT, 1.4, class_="walk"))
            parts.append(svg.path(f"M{svg.num(x2)},{svg.num(ay - 1)} l-4,-6 l8,0 z",
                                  svg.ACCENT, 0, fill=svg.ACCENT))
    # ... and a dashed line from the selected grid cell down to its storage cell, drawn
    # over the grid: beneath it, the line would seem to leave from the cells below
    if selected is not None and selected in grid_at and sel_pos in strip_at:
        (gx, gy), (sx, sy) = grid_at[selected], strip_at[sel_pos]
        parts.append(svg.path(f"M{svg.num(gx + CELL / 2)},{svg.num(gy + CELL)} "
                                 f"C{svg.num(gx + CELL / 2)},{svg.num(sy - 40)} "
                                 f"{svg.num(sx + SCELL_W / 2)},{svg.num(gy + CELL + 30)} "
                                 f"{svg.num(sx + SCELL_W / 2)},{svg.num(sy - 2)}",
                                 svg.ACCENT, 1.4, stroke_dasharray="4 3", opacity="0.8"))
    y += 20 + strip_rows * row_h

    # -- header --------------------------------------------------------------------------
    kind = ("contiguous" if L.is_contiguous(shape, strides) else
            "non-contiguous, no cell shared" if L.is_non_overlapping(shape, strides) else
            "overlapping: some cells are read by several elements")
    head = [svg.text(_M, _M + 12, f"layout of {name}", 14, svg.INK, weight="600"),
            svg.text(_M, _M + 31, f"shape {shape}  strides {strides}  offset {offset}",
                     12, svg.INK, svg.MONO),
            svg.text(_M, _M + 47, f"{numel} elements over a storage of {storage_size}; "
                     f"{kind}", 11, svg.MUTED)]
    formula_w = 0.0
    if selected is not None:
        val = ""
        if values is not None:
            v = np.asarray(values)[selected] if nd else np.asarray(values)
            val = f"  (value {float(v):.5g})"
        line1 = f"{name}[{_fmt_index(selected)}] → storage[{sel_pos}]{val}"
        line2 = f"offset + Σ stride·index = {position_formula(selected, strides, offset)}"
        head.append(svg.text(_M, _M + 73, line1, 12.5, svg.INK, svg.MONO, weight="600",
                             class_="hx-layout-formula"))
        head.append(svg.text(_M, _M + 91, line2, 12.5, svg.ACCENT, svg.MONO))
        formula_w = svg.text_width(line2, 12.5, mono=True)
    width = max(grid_w, _M + ncols * SCELL_W, _M + formula_w, 420) + _M
    if error:
        for ln in svg.wrap(error, width - 2 * _M, 11):
            head.append(svg.text(_M, y + 4, ln, 11, _OUTSIDE_STROKE, class_="hx-error"))
            y += 15
    return svg.document(width, y + _M, "".join(head + parts), "hx-layout",
                        data_selected_position="" if sel_pos is None else sel_pos,
                        data_shape=",".join(map(str, shape)),
                        data_strides=",".join(map(str, strides)), data_offset=offset,
                        data_storage_size=storage_size)


# -- the widget --------------------------------------------------------------------------

def _parse_ints(text: str, what: str) -> tuple:
    body = text.strip().strip("()[]").strip()
    if not body:
        return ()
    try:
        return tuple(int(p) for p in body.replace(" ", ",").split(",") if p)
    except ValueError:
        raise ValueError(f"{what}: expected integers separated by commas, got {text!r}") \
            from None


class LayoutView(LiveWidget):
    """A tensor's layout as a notebook widget.

        hx.viz.LayoutView(x)                    # grid, buffer strip, index sliders
        hx.viz.LayoutView.compare(x, x.T)       # views of one storage, linked

    The sliders pick an element (for more than three dims the leading sliders choose
    the slice drawn). The shape / strides / offset boxes build a new view of the same
    storage through ``as_strided`` (the title then names it so); a layout reaching
    outside the storage is refused with the engine's message. ``on_select(index,
    position)`` callbacks run on every pick.
    """

    def __init__(self, tensor, name: str = "x"):
        import ipywidgets as w

        self.base = tensor
        self.tensor = tensor
        self.base_name = name
        self.name = name
        self.highlight: set = set()
        self.selected = None
        self._callbacks = []
        self.picture = Picture()
        self._sliders_box = w.VBox(layout=w.Layout(flex="1 1 320px", max_width="440px"))
        self._shape_in = w.Text(description="shape", layout=w.Layout(width="190px"))
        self._strides_in = w.Text(description="strides", layout=w.Layout(width="190px"))
        self._offset_in = w.Text(description="offset", layout=w.Layout(width="130px"))
        self._apply = w.Button(description="as_strided", button_style="primary",
                               tooltip="make this view of the same storage",
                               layout=w.Layout(width="auto"))
        self._reset = w.Button(description="reset", layout=w.Layout(width="auto"))
        self._message = w.HTML()
        self._apply.on_click(lambda _: self.apply(self._shape_in.value,
                                                  self._strides_in.value,
                                                  self._offset_in.value))
        self._reset.on_click(lambda _: self.reset())
        editor = flex_row([self._shape_in, self._strides_in, self._offset_in, self._apply,
                           self._reset])
        editor.add_class("hx-layout-editor")
        self.widget = w.VBox([flex_row([self._sliders_box, *self.picture.controls]),
                              self.picture.html, editor, self._message],
                             layout=w.Layout(width="100%"))
        self.widget.add_class("hx-layout-view")
        self.set_tensor(tensor)

    def __repr__(self) -> str:
        t = self.tensor
        return (f"LayoutView of {self.name}: shape {tuple(t.shape)}, strides "
                f"{tuple(t.strides)}, offset {t.offset}, over a storage of "
                f"{t.storage.size} elements. Display it in a notebook for the picture, or "
                f"write it with .save_svg('layout.svg').")

    # -- state -------------------------------------------------------------------------
    def set_tensor(self, tensor, name: str | None = None) -> None:
        """Show another view (of any storage), named ``name`` (default: the name it had);
        the selection starts at the first element."""
        import ipywidgets as w

        self.tensor = tensor
        if name is not None:
            self.name = name
        self._shape_in.value = ", ".join(map(str, tensor.shape))
        self._strides_in.value = ", ".join(map(str, tensor.strides))
        self._offset_in.value = str(tensor.offset)
        self._message.value = ""
        sliders = []
        for d, n in enumerate(tensor.shape):
            s = w.IntSlider(value=0, min=0, max=max(n - 1, 0), description=f"index {d}",
                            disabled=n <= 1, continuous_update=True,
                            layout=w.Layout(width="100%"))
            s.observe(self._on_slider, names="value")
            sliders.append(s)
        self._sliders = sliders
        self._sliders_box.children = sliders
        self.selected = tuple(0 for _ in tensor.shape) if tensor.numel() else None
        self.refresh()

    def reset(self) -> None:
        """Back to the tensor the view was made with, under its name."""
        self.set_tensor(self.base, self.base_name)

    def _on_slider(self, _change) -> None:
        self.select(tuple(s.value for s in self._sliders))

    def select(self, index) -> int:
        """Pick the element at ``index``; returns its storage position."""
        index = tuple(int(i) for i in index)
        pos = L.element_position(index, self.tensor.strides, self.tensor.offset)
        self.selected = index
        for s, i in zip(self._sliders, index):
            if s.value != i:
                s.value = i
        self.refresh()
        for fn in self._callbacks:
            fn(index, pos)
        return pos

    def on_select(self, fn) -> None:
        self._callbacks.append(fn)

    def apply(self, shape, strides, offset) -> bool:
        """Replace the view with ``base.as_strided(shape, strides, offset)`` (strings or
        tuples); the title then names the new view. Returns False, showing why, when
        the engine refuses."""
        try:
            if isinstance(shape, str):
                shape = _parse_ints(shape, "shape")
            if isinstance(strides, str):
                strides = _parse_ints(strides, "strides")
            if isinstance(offset, str):
                offset = int(offset.strip() or 0)
            view = self.base.detach().as_strided(tuple(shape), tuple(strides), offset)
        except (ValueError, TypeError, IndexError, RuntimeError) as e:
            self._message.value = (f'<div style="color:#c23b36;font:12px monospace;'
                                   f'white-space:pre-wrap">refused: {svg.esc(e)}</div>')
            return False
        call = f"as_strided({tuple(shape)}, {tuple(strides)}, {offset})"
        # self.base is kept: later edits start from it again
        self.set_tensor(view, f"{self.base_name}.{call}")
        self._message.value = (f'<div style="color:#2f8f5b;font:12px sans-serif;'
                               f'overflow-wrap:anywhere">{svg.esc(self.name)}</div>')
        return True

    # -- drawing -----------------------------------------------------------------------
    def _values(self):
        t = self.tensor
        if t.numel() > 100_000 or t.device.type != "cpu":
            return None
        return np.asarray(t.detach().float().numpy(), dtype=np.float64)

    def to_svg(self) -> str:
        t = self.tensor
        return render_layout_svg(t.shape, t.strides, t.offset, t.storage.size,
                                 self.selected, name=self.name,
                                 highlight_positions=self.highlight, values=self._values())

    def refresh(self) -> None:
        self.picture.show(self.to_svg())

    @staticmethod
    def compare(*tensors, names=None) -> LayoutCompare:
        """Views side by side (one above the other when the page is narrow); picking an
        element in one outlines, in the others, every element that reads the same
        storage cell (when they share a storage)."""
        return LayoutCompare(tensors, names)


#: the width each view of a LayoutCompare asks for: two fit side by side on a wide
#: page, and they stack on a laptop's notebook column
COMPARE_BASIS = 460


class LayoutCompare(LiveWidget):
    """Several :class:`LayoutView` side by side, linked through their storage; they wrap
    onto the next line when the output area is narrower than they need."""

    static_basis = COMPARE_BASIS

    def __init__(self, tensors, names=None):
        import ipywidgets as w

        names = list(names or [])
        names += [f"v{k}" for k in range(len(names), len(tensors))]
        self.views = [LayoutView(t, n) for t, n in zip(tensors, names)]
        for v in self.views:
            v.on_select(lambda index, pos, src=v: self._link(src, pos))
        panels = []
        for v in self.views:
            panel = w.Box([v.widget], layout=w.Layout(border="1px solid #e4e7eb",
                                                      padding="4px"))
            panels.append(panel)
        self.widget = flex_row(panels, f"{COMPARE_BASIS}px")
        self.widget.add_class("hx-layout-compare")
        if self.views and self.views[0].selected is not None:
            self.views[0].select(self.views[0].selected)

    def __repr__(self) -> str:
        return ("LayoutCompare of " + ", ".join(v.name for v in self.views)
                + ". Display it in a notebook for the pictures.")

    def _link(self, src, pos) -> None:
        for v in self.views:
            if v is src:
                continue
            v.highlight = {pos} if v.tensor.storage is src.tensor.storage else set()
            v.refresh()

    def to_svg(self) -> list[str]:
        return [v.to_svg() for v in self.views]

    def static_svgs(self) -> list[str]:
        return self.to_svg()

    def standalone_svg(self) -> str:
        """The views side by side in one SVG (what :meth:`save_svg` writes)."""
        return svg.side_by_side(self.to_svg(), "hx-layout-compare")
