"""GraphView: the SVG has one node group per graph node with its label; edges are routed
around boxes; nodes carry the user's names; watch() sees every node finish; the menus
always show a value and offer only collapse depths that change the picture; the widget
builds and updates headless."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

import haelixe as hx
from haelixe.viz import svg
from haelixe.viz.graph import (
    GraphView,
    collapse_choices,
    collapse_graph,
    layout_graph,
    node_label,
    render_graph_svg,
)
from haelixe.viz.graph.placement import bezier_points

NS = "{http://www.w3.org/2000/svg}"


def _small():
    x = hx.randn(4, 3, requires_grad=True)
    w = hx.randn(3, 5, requires_grad=True)
    w.name = "w"
    return x, w, ((x @ w).relu() * 2.0).sum()


def _node_groups(svg_text):
    root = ET.fromstring(svg_text)  # also checks the SVG is well formed
    assert root.get("class") == "hx-graph"
    return root, [g for g in root.iter(f"{NS}g")
                  if "node" in (g.get("class") or "").split()]


def _texts(g):
    return [t.text for t in g.iter(f"{NS}text")]


def test_one_node_group_per_graph_node_with_its_label():
    _, _, y = _small()
    graph = hx.autograd.graph(y)
    root, groups = _node_groups(render_graph_svg(graph))
    assert len(groups) == len(graph.nodes) == int(root.get("data-nodes"))
    by_id = {int(g.get("data-id")): g for g in groups}
    assert set(by_id) == {n.id for n in graph.nodes}
    for n in graph.nodes:
        g = by_id[n.id]
        assert node_label(n) in _texts(g)
        assert g.get("data-kind") == n.kind
        assert any(f"{n.dtype} · {n.device}" in t for t in _texts(g))
    assert "w" in [node_label(n) for n in graph.nodes]


def test_kinds_saved_and_casts_are_marked():
    with hx.autocast(dtype=hx.bfloat16):
        a = hx.randn(8, 8, requires_grad=True)
        y = (a @ a).sum()
    graph = hx.autograd.graph(y)
    text = render_graph_svg(graph, direction="TB")
    _, groups = _node_groups(text)
    casts = [g for g in groups if g.get("data-op").startswith("Cast(")]
    assert casts and all('stroke-dasharray="5 3"' in ET.tostring(g, "unicode")
                         for g in casts)
    matmul = next(g for g in groups if g.get("data-op") == "MatMul")
    assert any(t.startswith("saved 2") for t in _texts(matmul))
    assert {g.get("data-kind") for g in groups} >= {"leaf", "output", "op"}
    for legend in ("leaf", "parameter", "output", "saved", "cast"):
        assert f">{legend}<" in text


def test_large_graph_is_capped_with_a_message():
    x = hx.randn(3, requires_grad=True)
    y = x
    for _ in range(60):
        y = y * 1.01 + 0.5
    graph = hx.autograd.graph(y.sum())
    root, groups = _node_groups(render_graph_svg(graph, max_nodes=40))
    assert len(groups) <= 40
    assert int(root.get("data-total-nodes")) == len(graph.nodes)
    msg = "".join(t.text for t in root.iter(f"{NS}text")
                  if t.get("class") == "hx-graph-message")
    assert f"graph has {len(graph.nodes)} nodes" in msg and "showing the first" in msg


def test_layout_puts_every_edge_forward():
    _, _, y = _small()
    graph = hx.autograd.graph(y)
    for direction, axis in (("LR", 0), ("TB", 1)):
        lay = layout_graph(graph, direction)
        for s, d in graph.edges:
            assert lay.boxes[s][axis] < lay.boxes[d][axis]


def test_watch_sees_every_node_finish_and_details_show_grads():
    x, w, y = _small()
    view = GraphView(y)
    with view.watch() as v:
        assert v.animating and not v.finished
        y.backward()
    ids = {n.id for n in view.graph.nodes}
    assert view.finished == ids
    assert not view.animating
    _, groups = _node_groups(view.to_svg())
    assert all(g.get("data-state") == "lit" for g in groups)
    leaf_id = next(n.id for n in view.graph.nodes if n.name == "w")
    d = view.details(leaf_id)
    assert d["grad_norm"] == pytest.approx(float(np.linalg.norm(w.grad.numpy())), rel=1e-5)
    assert "min" in d["values"] and "mean" in d["values"]
    mm = next(n.id for n in view.graph.nodes if n.op == "MatMul")
    assert view.details(mm)["saved_bytes"] == 4 * 3 * 4 + 3 * 5 * 4
    view.select(mm)
    assert "saved[1]" in view._details.value and "60 bytes" in view._details.value


def test_live_mode_and_model_names(tmp_path):
    from haelixe.denoise import Denoiser
    from haelixe.nn import functional as F

    hx.manual_seed(0)
    model = Denoiser(dim=16, heads=2)
    x = hx.randn(2, 8, 1)
    loss = F.mse_loss(model(x), x)
    view = GraphView(loss, direction="TB", model=model, live=True)
    labels = {node_label(n, view.names) for n in view.graph.nodes}
    assert {"embed.weight", "block.attn.qkv.weight", "head.bias"} <= labels
    loss.backward()
    assert view.finished == {n.id for n in view.graph.nodes}
    view.close()
    view.save_svg(tmp_path / "g.svg")
    text = (tmp_path / "g.svg").read_text()
    assert text.startswith("<?xml") and 'class="hx-graph"' in text


def test_engine_never_imports_viz():
    import pathlib
    import re

    root = pathlib.Path(hx.__file__).parent
    pattern = re.compile(r"^\s*(from\s+\S*viz|import\s+\S*viz)", re.M)
    above_viz = {"viz", "exercises"}  # the exercises draw their feedback with the widgets
    offenders = [str(p) for p in root.rglob("*.py")
                 if not above_viz & set(p.relative_to(root).parts)
                 and pattern.search(p.read_text())]
    assert offenders == []


# -- collapsing by module ----------------------------------------------------------------

def _denoiser_loss():
    from haelixe.denoise import Denoiser

    hx.manual_seed(0)
    model = Denoiser(dim=16, heads=2)
    x, y = hx.randn(2, 8, 1), hx.randn(2, 8, 1)
    return model, ((model(x) - y) ** 2).mean()


def _split(groups):
    boxes = [g for g in groups if "group" in g.get("class").split()]
    return boxes, [g for g in groups if g not in boxes]


def test_collapse_depth_1_draws_one_box_per_top_level_module():
    model, loss = _denoiser_loss()
    graph = hx.autograd.graph(loss)
    root, groups = _node_groups(render_graph_svg(graph, collapse=1, model=model))
    boxes, plain = _split(groups)
    assert sorted(g.get("data-module") for g in boxes) == ["block", "embed", "head", "norm"]
    block = next(g for g in boxes if g.get("data-module") == "block")
    assert "block · TransformerBlock" in _texts(block)
    members = sum(int(g.get("data-members")) for g in boxes)
    assert members + len(plain) == len(graph.nodes) == int(root.get("data-total-nodes"))
    assert len(groups) == int(root.get("data-nodes"))
    # nothing made outside the model (the loss) is folded; parameters are
    assert {g.get("data-kind") for g in plain} <= {"op", "output", "leaf"}
    assert any("params" in t for t in _texts(block))


def test_collapse_depth_2_splits_the_block_and_keeps_edges_forward():
    model, loss = _denoiser_loss()
    graph = hx.autograd.graph(loss)
    c = collapse_graph(graph, 2, model)
    names = {g.name for g in c.groups.values()}
    assert {"block.norm1", "block.attn", "block.norm2", "block.mlp"} <= names
    assert "block" not in names  # its residual adds stay between the boxes
    assert sum(len(g.members) for g in c.groups.values()) + \
        len(c.graph.nodes) - len(c.groups) == len(graph.nodes)
    assert len(set(c.graph.edges)) == len(c.graph.edges)
    assert all(s != d for s, d in c.graph.edges)
    lay = layout_graph(c.graph)
    for s, d in c.graph.edges:
        assert lay.boxes[s][0] < lay.boxes[d][0]
    only = collapse_graph(graph, ["block.attn"], model)
    assert [g.label for g in only.groups.values()] == ["block.attn · MultiHeadAttention"]


def test_collapse_without_a_model_names_modules_by_class():
    _, loss = _denoiser_loss()
    c = collapse_graph(hx.autograd.graph(loss), 1)
    assert sorted(g.cls for g in c.groups.values()) == \
        ["Linear", "Linear", "RMSNorm", "TransformerBlock"]
    assert sorted(g.name for g in c.groups.values()) == \
        ["Linear0", "Linear3", "RMSNorm2", "TransformerBlock1"]  # numbered in flow order


def test_watch_lights_every_module_box_and_the_toggle_rerenders():
    model, loss = _denoiser_loss()
    view = GraphView(loss, model=model, collapse=1)
    assert [v for _, v in view._collapse.options][:3] == [0, 1, 2]  # 0: "none"
    with view.watch():
        loss.backward()
    _, groups = _node_groups(view.to_svg())
    boxes, _ = _split(groups)
    assert len(boxes) == 4
    for g in boxes:
        assert g.get("data-state") == "lit" and g.get("data-done") == g.get("data-members")
    # a box partly done shows how far it got
    block = next(g for g in view.collapsed.groups.values() if g.name == "block")
    half = set(block.members[: len(block.members) // 2])
    text = render_graph_svg(view.graph, half, animating=True, collapsed=view.collapsed)
    state = {g.get("data-module"): g.get("data-state") for g in _node_groups(text)[1]}
    assert state["block"] == "partial" and state["head"] == "waiting"
    assert f"{len(half)}/{len(block.members)}" in text

    view.select(block.id)
    assert "TransformerBlock" in view._details.value
    view._collapse.value = 2
    assert view.selected is None  # the block box is gone
    assert len(_split(_node_groups(view.to_svg())[1])[0]) >= 6
    view._collapse.value = 0
    assert view._collapse.label == "none"
    _, groups = _node_groups(view.to_svg())
    assert len(groups) == len(view.graph.nodes) and not _split(groups)[0]


def test_a_group_that_would_close_a_cycle_stays_open():
    from haelixe import nn

    class Twice(nn.Module):  # one Linear called twice, with work outside it between
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(self.lin(x) * 2.0)

    model = Twice()
    loss = model(hx.randn(3, 4)).sum()
    graph = hx.autograd.graph(loss)
    assert sum(n.module is model.lin for n in graph.nodes) >= 2  # both calls recorded
    c = collapse_graph(graph, 1, model)
    assert not c.groups and len(c.graph.nodes) == len(graph.nodes)
    assert sum(len(layer) for layer in c.graph.generations()) == len(c.graph.nodes)


def test_capped_graph_with_modules_suggests_collapsing():
    model, loss = _denoiser_loss()
    graph = hx.autograd.graph(loss)
    root, _ = _node_groups(render_graph_svg(graph, max_nodes=10, model=model))
    msg = "".join(t.text for t in root.iter(f"{NS}text")
                  if t.get("class") == "hx-graph-message")
    assert "collapse=1" in msg
    root, groups = _node_groups(render_graph_svg(graph, max_nodes=10, collapse=1,
                                                 model=model))
    assert len(groups) <= 10 and root.get("data-total-nodes") == str(len(graph.nodes))


# -- names, menus, routing, colours ------------------------------------------------------

def _lab02_loss():
    x = hx.randn(4, 3, requires_grad=True)
    w = hx.randn(3, 2, requires_grad=True)
    b = hx.zeros(2, requires_grad=True)
    return x, w, b, ((x @ w + b).tanh() ** 2).mean()


def _labels(view):
    return {n.id: node_label(n, view.names) for n in view.graph.nodes}


def test_nodes_are_named_after_the_callers_variables():
    x, w, b, loss = _lab02_loss()
    h = x @ w
    view = GraphView(loss)  # no names given: the variables of this function
    labels = _labels(view)
    assert {"x", "w", "b"} <= set(labels.values())
    out = next(n for n in view.graph.nodes if n.kind == "output")
    assert labels[out.id] == f"loss = {out.op}"
    assert "leaf" not in labels.values()
    # a tensor that is not in the graph (h here: a separate MatMul) names nothing
    assert not any(lab.startswith("h = ") for lab in labels.values())
    del h
    # names= replaces the variables; both orientations (torchviz: {"name": tensor})
    view = GraphView(loss, names={x: "input", "weight": w})
    labels = set(_labels(view).values())
    assert {"input", "weight", "leaf"} <= labels and not {"x", "w", "b"} & labels
    # names={} turns naming off: leaves fall back to their kind
    assert set(_labels(GraphView(loss, names={})).values()) >= {"leaf"}


def test_parameters_are_named_by_module_path():
    from haelixe import nn

    lin = nn.Linear(4, 4)
    norm = nn.RMSNorm(4)
    x = hx.randn(2, 4, requires_grad=True)
    loss = norm(lin(x)).sum()
    labels = set(_labels(GraphView(loss)).values())  # modules among the variables
    assert {"lin.weight", "lin.bias", "norm.weight", "x"} <= labels
    model, loss = _denoiser_loss()
    labels = set(_labels(GraphView(loss, model=model, names={})).values())
    assert {"embed.weight", "block.attn.qkv.weight", "head.bias"} <= labels


def _selects(widget):
    import ipywidgets as w

    out, todo = [], [widget]
    while todo:
        x = todo.pop()
        if isinstance(x, (w.Dropdown, w.ToggleButtons, w.Select, w.RadioButtons)):
            out.append(x)
        todo.extend(getattr(x, "children", ()))
    return out


def _assert_selects_show_values(view):
    for sel in _selects(view.widget):
        assert sel.index is not None and sel.label, (sel.description, sel.options)


def test_every_select_shows_a_value():
    *_, loss = _lab02_loss()
    view = GraphView(loss)
    _assert_selects_show_values(view)
    assert view._picker.label.startswith("(pick a node")
    assert view._collapse.layout.display == "none"  # no module: nothing to collapse
    node = view._layout.shown[2]
    view.select(node)
    _assert_selects_show_values(view)
    view.select(None)
    assert view._picker.value == 0 and view._picker.label.startswith("(pick")
    model, loss = _denoiser_loss()
    view = GraphView(loss, model=model, collapse=1)
    _assert_selects_show_values(view)
    for value in (2, 0, 1, 0):  # "none" stays selected and shown
        view._collapse.value = value
        _assert_selects_show_values(view)
    assert view._collapse.label == "none" and view.collapsed is None


def test_collapse_menu_offers_only_depths_that_change_the_picture():
    from haelixe import nn

    class Wrapper(nn.Module):  # depth 2 folds exactly what depth 1 folds
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Wrapper()

        def forward(self, x):
            return self.inner(x).relu()

    model = Model()
    graph = hx.autograd.graph(model(hx.randn(2, 3)).sum())
    assert collapse_choices(graph, model) == [("none", 0), ("depth 1", 1)]
    *_, loss = _lab02_loss()
    assert collapse_choices(hx.autograd.graph(loss)) == [("none", 0)]
    model, loss = _denoiser_loss()
    depths = [d for _, d in collapse_choices(hx.autograd.graph(loss), model)]
    assert depths[:3] == [0, 1, 2]


def _edge_crossings(lay):
    """(edge, box id) pairs where a routed edge passes inside a box it does not join."""
    bad = []
    for (s, d), route in lay.routes.items():
        pts = bezier_points(route, lay.direction)
        for i, (x, y, w, h) in lay.boxes.items():
            if i in (s, d):
                continue
            if any(x + 1 < px < x + w - 1 and y + 1 < py < y + h - 1 for px, py in pts):
                bad.append(((s, d), i))
    return bad


def _routes_join_their_boxes(lay):
    for (s, d), route in lay.routes.items():
        (sx, sy, sw, sh), (dx, dy, dw, dh) = lay.boxes[s], lay.boxes[d]
        (x0, y0), (x1, y1) = route[0], route[-1]
        if lay.direction == "LR":
            assert x0 == pytest.approx(sx + sw) and sy <= y0 <= sy + sh
            assert x1 == pytest.approx(dx) and dy <= y1 <= dy + dh
        else:
            assert sx <= x0 <= sx + sw and sy <= y0 <= sy + sh
            assert y1 == pytest.approx(dy) and dx <= x1 <= dx + dw


def test_edges_are_routed_around_boxes():
    from haelixe import nn

    # lab 03's picture: casts under autocast, and a long edge past other nodes
    lin = nn.Linear(16, 16).to(hx.bfloat16)
    norm = nn.RMSNorm(16).to(hx.bfloat16)
    x = hx.randn(2, 4, 16, requires_grad=True)
    with hx.autocast(dtype=hx.bfloat16):
        loss = nn.functional.mse_loss(norm(lin(x)) + x, hx.zeros(2, 4, 16))
    model, deep = _denoiser_loss()  # a residual that jumps over the attention
    graphs = [hx.autograd.graph(loss), hx.autograd.graph(deep),
              collapse_graph(hx.autograd.graph(deep), 2, model).graph]
    for graph in graphs:
        for direction in ("LR", "TB"):
            lay = layout_graph(graph, direction)
            assert set(lay.routes) == set(graph.edges)
            long = [e for e, r in lay.routes.items() if len(r) > 4]
            assert long, "the test graphs must have edges that span several layers"
            assert _edge_crossings(lay) == []
            _routes_join_their_boxes(lay)
    root, _ = _node_groups(render_graph_svg(graphs[1]))
    edges = [g for g in root.iter(f"{NS}g") if g.get("class") == "edge"]
    assert len(edges) == len(set(graphs[1].edges))


def _lab(hex_color):
    r, g, b = (int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5))
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    xyz = (np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                     [0.0193, 0.1192, 0.9505]]) @ lin) / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_legend_colours_are_distinct():
    from itertools import combinations

    from haelixe.viz.graph.drawing import LEGEND

    stroke = {label: (look[1] if len(look) == 2 else svg.ACCENT) for label, *look in LEGEND}
    stroke["module"] = svg.KIND_COLORS["group"][1]

    def delta_e(a, b):
        return float(np.linalg.norm(_lab(a) - _lab(b)))

    assert delta_e(stroke["parameter"], stroke["gradient done"]) > 40
    for a, b in combinations(stroke, 2):
        assert delta_e(stroke[a], stroke[b]) > 28, (a, b)


def test_direction_auto_fits_the_page_and_the_picture_scales():
    from haelixe.viz.display import framed

    *_, loss = _lab02_loss()
    view = GraphView(loss)
    lr = layout_graph(view.graph, "LR", names=view.names)
    assert view.direction == "TB" and view._layout.width < lr.width
    text = view.to_svg()
    root = ET.fromstring(text)
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    assert "width:100%" in view.picture.html.value
    assert f"max-width:{root.get('width')}px" in view.picture.html.value
    view.picture.zoom.value = 2.0
    width = float(root.get("width"))
    assert f"width:{svg.num(2 * width)}px" in view.picture.html.value
    assert "overflow:auto" in framed(text, 2.0)
    view._direction.value = "LR"  # the toggle still switches by hand
    assert view.direction == "LR" and root.get("data-direction") == "TB"


def test_repr_and_static_picture():
    *_, loss = _lab02_loss()
    view = GraphView(loss)
    text = repr(view)
    assert text.startswith("GraphView of loss") and "9 nodes" in text
    assert "object at 0x" not in text
    bundle = view._repr_mimebundle_()
    assert bundle["text/plain"] == text
    assert "application/vnd.jupyter.widget-view+json" in bundle
    html = bundle["text/html"]
    assert html.count("<img") == 1 and "VBox(" not in html
    assert ET.fromstring(_decoded(html)).get("class") == "hx-graph"


def test_watch_brings_the_static_picture_up_to_date():
    class Handle:
        def __init__(self):
            self.bundles = []

        def update(self, bundle, raw=False):
            self.bundles.append(bundle)

    *_, loss = _lab02_loss()
    view = GraphView(loss)
    view._handles = (Handle(),)
    with view.watch():
        loss.backward()
    (bundle,) = view._handles[0].bundles
    assert 'data-state="lit"' in _decoded(bundle["text/html"])


def _decoded(html):
    import base64

    data = html.split("data:image/svg+xml;base64,")[1].split('"')[0]
    return base64.b64decode(data).decode()
