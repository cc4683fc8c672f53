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
    return root, [g for g in root.iter(f"{NS}g") if g.get("class") == "node"]


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
    offenders = [str(p) for p in root.rglob("*.py")
                 if "viz" not in p.relative_to(root).parts and pattern.search(p.read_text())]
    assert offenders == []
