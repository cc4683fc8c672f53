"""LayoutView: the highlighted storage cell equals the layout math for every kind of
layout; broadcast and flip show as they should; as_strided edits are validated."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import haelixe as hx
from haelixe import layout as L
from haelixe.viz.layout import LayoutView, position_formula, render_layout_svg

NS = "{http://www.w3.org/2000/svg}"


def _render(t, selected, **kw):
    root = ET.fromstring(render_layout_svg(t.shape, t.strides, t.offset, t.storage.size,
                                           selected, **kw))
    assert root.get("class") == "hx-layout"
    return root


def _storage_cells(root):
    return [r for r in root.iter(f"{NS}rect") if "storage" in (r.get("class") or "")]


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 2, 3, 2)])
def test_highlighted_cell_is_the_layout_math(make, shape):
    t, _ = make(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))
    for idx in [tuple(0 for _ in shape), tuple(n - 1 for n in shape),
                tuple(n // 2 for n in shape)]:
        root = _render(t, idx)
        pos = L.element_position(idx, t.strides, t.offset)
        sel = [r for r in _storage_cells(root) if "selected" in r.get("class")]
        assert [int(r.get("data-pos")) for r in sel] == [pos]
        assert int(root.get("data-selected-position")) == pos
        assert position_formula(idx, t.strides, t.offset).endswith(f"= {pos}")
        text = ET.tostring(root, "unicode")
        assert position_formula(idx, t.strides, t.offset) in text


def test_grid_cells_show_their_positions():
    x = hx.arange(12).float().reshape(3, 4).T
    root = _render(x, (1, 2))
    cells = {g.get("data-index"): int(g.get("data-pos")) for g in root.iter(f"{NS}g")
             if g.get("class") == "element"}
    for i, j in itertools.product(range(4), range(3)):
        assert cells[f"{i}, {j}"] == L.element_position((i, j), x.strides, x.offset)


def test_broadcast_lands_many_elements_on_one_cell():
    b = hx.arange(4).float().broadcast_to((3, 4))
    root = _render(b, (2, 1))
    counts = {int(r.get("data-pos")): int(r.get("data-count")) for r in _storage_cells(root)}
    assert counts == {0: 3, 1: 3, 2: 3, 3: 3}
    assert "×3" in ET.tostring(root, "unicode")


def test_flip_runs_backwards():
    x = hx.arange(6).float().flip(0)
    root = _render(x, (0,))
    cells = {int(g.get("data-pos")): g.get("data-index") for g in root.iter(f"{NS}g")
             if g.get("class") == "element"}
    assert [cells[p] for p in range(6)] == [str(i) for i in range(5, -1, -1)]
    assert x.strides == (-1,) and int(root.get("data-selected-position")) == 5


def test_out_of_bounds_layout_is_drawn_with_the_engine_message():
    root = ET.fromstring(render_layout_svg((3, 4), (4, 2), 1, 12, (0, 0)))
    errors = "".join(t.text for t in root.iter(f"{NS}text") if t.get("class") == "hx-error")
    assert "as_strided" in errors and "storage holds 12" in errors


def test_widget_selects_edits_and_compares():
    x = hx.arange(12).float().reshape(3, 4)
    view = LayoutView(x)
    assert view.select((2, 1)) == 9
    assert 'data-selected-position="9"' in view.picture.html.value
    view._sliders[1].value = 3  # a slider move selects too
    assert view.selected == (2, 3)
    assert view.apply("2, 2", "(1, 4)", "1")
    assert view.tensor.shape == (2, 2) and view.tensor.strides == (1, 4)
    assert view.tensor.storage is x.storage
    assert not view.apply("3, 4", "4, 2", "0")
    assert "refused" in view._message.value and "storage holds 12" in view._message.value
    assert view.tensor.shape == (2, 2)  # a refused edit keeps the last good view
    assert not view.apply("3, x", "1", "0")
    cmp = LayoutView.compare(x, x.T, names=["x", "x.T"])
    cmp.views[0].select((1, 2))
    assert cmp.views[1].highlight == {6}
    assert len(cmp.to_svg()) == 2


def test_nd_shows_the_selected_slice():
    y = hx.arange(2 * 3 * 2 * 4).float().reshape(2, 3, 2, 4)
    view = LayoutView(y, name="y")
    view.select((1, 0, 1, 2))
    assert "y[1, 0, :, :]" in view.picture.html.value and "y[1, 2, :, :]" in view.picture.html.value


def _title(view):
    root = ET.fromstring(view.to_svg())
    return next(t.text for t in root.iter(f"{NS}text") if (t.text or "").startswith("layout"))


def test_title_follows_as_strided_and_reset():
    x = hx.arange(12).float().reshape(3, 4)
    xt = x.T
    view = LayoutView(xt, name="x.T")
    assert _title(view) == "layout of x.T"
    assert view.apply("2, 2", "1, 4", "1")
    assert _title(view) == "layout of x.T.as_strided((2, 2), (1, 4), 1)"
    assert "x.T.as_strided((2, 2), (1, 4), 1)" in view._message.value
    assert not view.apply("3, 4", "4, 2", "0")  # refused: the title keeps the last view
    assert _title(view) == "layout of x.T.as_strided((2, 2), (1, 4), 1)"
    view.reset()
    assert _title(view) == "layout of x.T" and view.tensor is xt


def test_pictures_fit_the_page_and_wide_compositions_wrap():
    x = hx.arange(12).float().reshape(3, 4)
    view = LayoutView(x)
    root = ET.fromstring(view.to_svg())
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    page = view.picture.html.value
    assert "width:100%" in page and f"max-width:{root.get('width')}px" in page
    editor = view.widget.children[2]
    assert editor.layout.flex_flow == "row wrap"  # the editor wraps, never hides
    cmp = LayoutView.compare(x, x.T, x[0:1].expand(3, 4))
    assert cmp.widget.layout.flex_flow == "row wrap"
    assert all(p.layout.flex.startswith("1 1 ") for p in cmp.widget.children)
    html = cmp._repr_mimebundle_()["text/html"]
    assert html.count("<img") == 3 and "flex-wrap:wrap" in html
    assert repr(cmp).startswith("LayoutCompare of v0, v1, v2")
    assert repr(view).startswith("LayoutView of x: shape (3, 4), strides (4, 1)")


def test_compare_saves_one_svg(tmp_path):
    x = hx.arange(6).float().reshape(2, 3)
    cmp = LayoutView.compare(x, x.T)
    cmp.save_svg(tmp_path / "c.svg")
    root = ET.fromstring((tmp_path / "c.svg").read_text().split("\n", 1)[1])
    assert [s.get("class") for s in root.findall(f"{NS}svg")] == ["hx-layout", "hx-layout"]


def test_the_dashed_pointer_leaves_from_the_selected_cell_and_is_drawn_over_the_grid():
    doc = render_layout_svg((4, 3), (-1, 4), 3, 12, selected=(1, 1))
    cell = re.search(r'data-index="1, 1"[^>]*>.*?<rect x="([\d.]+)" y="([\d.]+)" '
                     r'width="([\d.]+)" height="([\d.]+)"', doc)
    pointer = re.search(r'<path d="M([\d.]+),([\d.]+) C[^"]*"[^>]*stroke-dasharray', doc)
    assert cell and pointer
    x, y, w, h = (float(v) for v in cell.groups())
    px, py = (float(v) for v in pointer.groups())
    assert x <= px <= x + w and abs(py - (y + h)) <= 2  # the bottom of the selected cell
    # drawn after every grid cell, so the cells below it do not hide where it starts
    assert pointer.start() > doc.rfind('class="element"')
