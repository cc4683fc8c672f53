"""GraphView: the SVG has one node group per graph node with its label; watch() sees every
node finish; the widget builds and updates headless."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

import haelixe as hx
from haelixe.viz.graph import GraphView, layout_graph, node_label, render_graph_svg

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
    from haelixe.viz.graph import collapse_graph

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
    from haelixe.viz.graph import collapse_graph

    c = collapse_graph(hx.autograd.graph(loss), 1)
    assert sorted(g.cls for g in c.groups.values()) == \
        ["Linear", "Linear", "RMSNorm", "TransformerBlock"]
    assert sorted(g.name for g in c.groups.values()) == \
        ["Linear0", "Linear3", "RMSNorm2", "TransformerBlock1"]  # numbered in flow order


def test_watch_lights_every_module_box_and_the_toggle_rerenders():
    model, loss = _denoiser_loss()
    view = GraphView(loss, model=model, collapse=1)
    assert [v for _, v in view._collapse.options][:3] == [None, 1, 2]
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
    view._collapse.value = None
    _, groups = _node_groups(view.to_svg())
    assert len(groups) == len(view.graph.nodes) and not _split(groups)[0]


def test_a_group_that_would_close_a_cycle_stays_open():
    from haelixe import nn
    from haelixe.viz.graph import collapse_graph

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
