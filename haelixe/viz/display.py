"""What every widget shares on the page: a picture that fits the output area or zooms,
and a static copy of it for a notebook that has not run.

Fit and zoom. :func:`framed` wraps an SVG (which carries its ``viewBox``) in a frame:
at "fit" it is drawn at the width of the output area, never wider than its natural
size; at a zoom factor it is drawn that much larger and the frame scrolls, so every
part stays reachable. :class:`Picture` is that frame as a widget, with its zoom buttons.

The static copy. A notebook saved after running keeps each widget's output, but the
live view needs a running kernel. :class:`LiveWidget` puts, beside the widget view, a
``text/html`` picture: the SVG as an ``<img>`` with a data URL, which survives
JupyterLab's sanitizer (it strips inline SVG from untrusted output), GitHub and
nbviewer. JupyterLab ranks the widget view first, so a running kernel shows the live
widget; without one, or for output it does not trust, the picture shows.
"""

from __future__ import annotations

import base64
import re

from . import svg

__all__ = ["ZOOMS", "framed", "static_html", "Picture", "LiveWidget", "flex_row",
           "TOGGLE_LOOK"]

#: the zoom buttons: (label, factor); 0 is "fit the output area"
ZOOMS = (("fit", 0.0), ("100%", 1.0), ("200%", 2.0))

#: toggle buttons as wide as their labels (which say what they do: no description)
TOGGLE_LOOK = {"style": {"button_width": "auto"}, "layout": {"width": "auto"}}

_ROOT = re.compile(r"^(<svg\b[^>]*?)\swidth=\"([\d.]+)\"\sheight=\"([\d.]+)\"")


def _root(svg_text: str):
    m = _ROOT.match(svg_text)
    if m is None:
        raise ValueError(f"expected an SVG document whose root gives width= and height= "
                         f"(as viz.svg.document writes), got {svg_text[:60]!r}")
    return m


def natural_size(svg_text: str) -> tuple[float, float]:
    """The (width, height) in pixels written on an SVG's root."""
    m = _root(svg_text)
    return float(m.group(2)), float(m.group(3))


def _styled(svg_text: str, style: str) -> str:
    end = _root(svg_text).end()
    return svg_text[:end] + f' style="{style}"' + svg_text[end:]


def _picture_style(width: float, zoom: float) -> str:
    if zoom:
        return f"display:block;width:{svg.num(width * zoom)}px;max-width:none;height:auto"
    return f"display:block;width:100%;max-width:{svg.num(width)}px;height:auto"


def framed(pictures, zoom: float = 0.0, max_height: str = "75vh") -> str:
    """An SVG (or a list of SVG panels) inside a scrolling frame: ``zoom`` 0 fits each
    picture to the frame's width (never enlarging it; panels share a row while they
    fit and wrap onto the next line when not), another value draws them at that
    multiple of their natural size."""
    svgs = [pictures] if isinstance(pictures, str) else list(pictures)
    styled = []
    for s in svgs:
        width, _ = natural_size(s)
        body = _styled(s, _picture_style(width, zoom))
        if len(svgs) > 1:
            size = (f"flex:none;width:{svg.num(width * zoom)}px" if zoom else
                    f"flex:1 1 {svg.num(width)}px;min-width:0;max-width:{svg.num(width)}px")
            body = f'<div class="hx-panel" style="{size}">{body}</div>'
        styled.append(body)
    inner = "".join(styled)
    if len(svgs) > 1:
        inner = (f'<div style="display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start;'
                 f'{"width:max-content" if zoom else ""}">{inner}</div>')
    return (f'<div class="hx-frame" data-zoom="{svg.num(zoom)}" style="overflow:auto;'
            f'max-width:100%;max-height:{max_height}">{inner}</div>')


def _img(svg_text: str, basis: float | None) -> str:
    width, height = natural_size(svg_text)
    data = base64.b64encode(svg_text.encode("utf-8")).decode("ascii")
    grow = (f"flex:1 1 {svg.num(basis)}px;min-width:0;" if basis else "")
    return (f'<div style="{grow}max-width:100%"><img class="hx-static-picture" '
            f'alt="{svg.esc(_root_class(svg_text))}" width="{svg.num(width)}" '
            f'height="{svg.num(height)}" style="max-width:100%;height:auto" '
            f'src="data:image/svg+xml;base64,{data}"/></div>')


def _root_class(svg_text: str) -> str:
    m = re.search(r'class="([^"]*)"', svg_text[:400])
    return m.group(1) if m else "picture"


def static_html(svgs, note: str = "", basis: float | None = None, extra: str = "") -> str:
    """The static copy of a widget: its SVG pictures as images side by side, wrapping
    onto the next line when the page is narrow (``basis``: the width each picture
    asks for before wrapping), then ``extra`` HTML and a one-line ``note``."""
    pictures = "".join(_img(s, basis) for s in svgs)
    caption = (f'<div style="font:11px {svg.SANS};color:{svg.MUTED};margin-top:2px">'
               f'{svg.esc(note)}</div>' if note else "")
    return (f'<div class="hx-static" style="max-width:100%">'
            f'<div style="display:flex;flex-wrap:wrap;gap:8px;align-items:flex-start">'
            f'{pictures}</div>{extra}{caption}</div>')


def flex_row(children, basis: str | None = None):
    """An ipywidgets row whose children wrap onto the next line when the output area is
    narrow (``basis``: the width each child asks for)."""
    import ipywidgets as w

    if basis is not None:
        for child in children:
            child.layout.flex = f"1 1 {basis}"
            child.layout.min_width = "0"
    return w.HBox(list(children), layout=w.Layout(flex_flow="row wrap", width="100%",
                                                  align_items="flex-start"))


class Picture:
    """An SVG picture as a widget: fitted to the output area's width, or zoomed with
    the frame scrolling to pan. ``widget`` holds the zoom buttons and the picture;
    ``show(svg_text)`` replaces the picture and keeps the zoom."""

    def __init__(self, max_height: str = "75vh", zoom_buttons: bool = True):
        import ipywidgets as w

        self.max_height = max_height
        self.svg = ""
        self.html = w.HTML(layout=w.Layout(width="100%"))
        self.html.add_class("hx-picture")
        self.zoom = w.ToggleButtons(options=list(ZOOMS), value=0.0,
                                    tooltips=["fit the picture to the page",
                                              "natural size: scroll the frame to move",
                                              "twice the size: scroll the frame to move"],
                                    **TOGGLE_LOOK)
        self.zoom.observe(lambda _change: self._render(), names="value")
        self.controls = [self.zoom] if zoom_buttons else []

    def show(self, pictures) -> None:
        """Show an SVG string, or a list of SVG panels."""
        self.svg = pictures
        self._render()

    def _render(self) -> None:
        if self.svg:
            self.html.value = framed(self.svg, self.zoom.value, self.max_height)


class LiveWidget:
    """The notebook plumbing every widget shares. A subclass sets ``self.widget`` (the
    ipywidgets box), ``self.picture`` (a :class:`Picture`) and ``self.clock`` (a
    :class:`~haelixe.viz.clock.RedrawClock`), and implements :meth:`to_svg` (and, for
    several pictures, :meth:`static_svgs`) and ``__repr__``; :meth:`_draw` puts the
    current state on the page (override it to update more than the picture).

    Displayed, it sends the widget view together with the static copy; the copy is
    brought up to date by :meth:`sync_static`, which a widget calls when a piece of work
    it follows has ended (not on every live redraw: each update sends the whole copy).
    """

    widget = None
    static_basis: float | None = None  # see static_html
    _handles = ()

    def to_svg(self) -> str:
        raise NotImplementedError

    def _draw(self) -> None:
        self.picture.show(self.to_svg())

    def _redraw(self) -> None:
        """Draw now, timed by the redraw clock (live updates call this when it is due)."""
        with self.clock.timing():
            self._draw()

    def _settle(self) -> None:
        """The work the widget follows has ended: draw, and update the static copy."""
        self._redraw()
        self.sync_static()

    def static_svgs(self) -> list[str]:
        return [self.to_svg()]

    def static_extra_html(self) -> str:
        return ""

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs):
        data = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        data["text/plain"] = repr(self)
        data["text/html"] = static_html(
            self.static_svgs(), f"Static picture of {type(self).__name__}: run the cell "
            f"for the live widget.", self.static_basis, self.static_extra_html())
        return data

    def _ipython_display_(self):
        # Displayed under a display id, so sync_static can replace the static copy.
        from IPython.display import display

        handle = display(self._repr_mimebundle_(), raw=True, display_id=True)
        if handle is not None:
            self._handles = (*self._handles, handle)

    def sync_static(self) -> None:
        """Send the static copy again, as the widget is drawn now (the saved notebook
        then shows the end state, not the state the widget was displayed in)."""
        if self._handles:
            bundle = self._repr_mimebundle_()
            for handle in self._handles:
                handle.update(bundle, raw=True)

    def standalone_svg(self) -> str:
        """The picture :meth:`save_svg` writes (one SVG document)."""
        return self.to_svg()

    def save_svg(self, path) -> None:
        """Write the current picture to ``path`` as a standalone .svg file (atomically:
        an existing file is replaced only once the new one is complete)."""
        from ..atomic import AtomicFile

        with AtomicFile(path) as tmp, open(tmp.temp_path, "w", encoding="utf-8") as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n' + self.standalone_svg())
