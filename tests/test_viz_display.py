"""The page plumbing every widget shares: pictures fit the output area or zoom inside a
scrolling frame, panels wrap when the page is narrow, and the static copy is an image
any notebook viewer shows."""

from __future__ import annotations

import base64
import re

import pytest

from haelixe.viz import svg
from haelixe.viz.display import LiveWidget, framed, natural_size, static_html

A = svg.document(400, 100, "", "hx-a")
B = svg.document(300, 80, "", "hx-b")


def _styles(html):
    return re.findall(r'<svg [^>]*style="([^"]*)"', html)


def test_fit_never_enlarges_and_zoom_scrolls():
    (fit,) = _styles(framed(A))
    assert "width:100%" in fit and "max-width:400px" in fit and "height:auto" in fit
    (big,) = _styles(framed(A, 2.0))
    assert "width:800px" in big and "max-width:none" in big
    assert 'style="overflow:auto;max-width:100%;max-height:75vh"' in framed(A, 2.0)
    assert natural_size(A) == (400.0, 100.0)
    with pytest.raises(ValueError, match="root gives width= and height="):
        natural_size("<div/>")


def test_panels_wrap_when_narrow_and_line_up_when_zoomed():
    page = framed([A, B])
    assert "flex-wrap:wrap" in page
    assert "flex:1 1 400px;min-width:0;max-width:400px" in page
    assert "flex:1 1 300px;min-width:0;max-width:300px" in page
    zoomed = framed([A, B], 1.0)
    assert "width:max-content" in zoomed and "flex:none;width:300px" in zoomed


def test_static_copy_is_a_data_url_image_per_picture():
    html = static_html([A, B], "note", basis=320, extra="<p>x</p>")
    imgs = re.findall(r'<img [^>]*src="data:image/svg\+xml;base64,([^"]+)"', html)
    assert [base64.b64decode(d).decode() for d in imgs] == [A, B]
    assert "flex:1 1 320px" in html and "<p>x</p>" in html and ">note<" in html
    assert "<svg" not in html  # inline SVG would be stripped from untrusted output


def test_live_widget_sends_the_static_copy_beside_the_widget_view(tmp_path):
    import ipywidgets as w

    class Tiny(LiveWidget):
        def __init__(self):
            self.widget = w.VBox()

        def to_svg(self):
            return A

        def __repr__(self):
            return "Tiny picture"

    t = Tiny()
    bundle = t._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html",
                           "application/vnd.jupyter.widget-view+json"}
    assert bundle["text/plain"] == "Tiny picture" and "<img" in bundle["text/html"]
    t.save_svg(tmp_path / "t.svg")
    assert (tmp_path / "t.svg").read_text().endswith(A)
    assert [p.name for p in tmp_path.iterdir()] == ["t.svg"]  # no temporary left
