"""The autograd graph as SVG: boxes, routed edges, a header with counts and a legend.

:func:`render_graph_svg` is pure (graph records in, an SVG string out). Each node shown
is one ``<g class="node" data-id=...>`` (a collapsed module ``<g class="node group">``),
each edge one ``<g class="edge" data-src=... data-dst=...>``, inside an
``<svg class="hx-graph">``.
"""

from __future__ import annotations

from .. import svg
from .model import Collapsed, collapse_graph, detail, is_cast, node_label
from .placement import BOX_H, MARGIN, SAVED_H, GraphLayout, layout_graph, route_path

__all__ = ["render_graph_svg", "LEGEND", "cap_hint"]


def _lit_swatch(x, y, size) -> str:
    """The "gradient done" swatch, drawn as a lit node is: thick accent outline, left bar."""
    return (svg.rect(x, y, size, size, svg.WHITE, svg.ACCENT, rx=2, stroke_width=2.4)
            + svg.rect(x, y, 3, size, svg.ACCENT))


#: legend entries: (label, fill, stroke), or (label, swatch drawing)
LEGEND = [(k, *svg.KIND_COLORS[k]) for k in ("op", "leaf", "parameter", "output", "saved")]
LEGEND += [("cast", svg.WHITE, svg.CAST_COLOR), ("gradient done", _lit_swatch)]


def _tooltip(info, names) -> str:
    lines = [f"{node_label(info, names)}  [{info.kind}]", detail(info)]
    if info.op != node_label(info, names):
        lines.append(f"op: {info.op}")
    for shape, dtype, nbytes in info.saved:
        lines.append(f"saved {svg.fmt_shape(shape)} {dtype}: {svg.fmt_bytes(nbytes)}")
    if info.grad_norm is not None:
        lines.append(f"grad norm {info.grad_norm:.4g}")
    return "\n".join(lines)


def _ring(x, y, w) -> str:
    return svg.rect(x - 4, y - 4, w + 8, BOX_H + 8, "none", svg.ACCENT, rx=9,
                    stroke_width=2.5, class_="ring")


def _node_svg(info, box, names, state, selected) -> str:
    x, y, w, h = box
    fill, stroke = svg.KIND_COLORS.get(info.kind, svg.KIND_COLORS["op"])
    stroke_w, dash = 1.2, None
    if is_cast(info):
        stroke, stroke_w, dash = svg.CAST_COLOR, 2.2, "5 3"
    if state == "lit":  # keep the kind's fill, so a finished graph still reads
        stroke, stroke_w = svg.ACCENT, 2.4
    parts = [svg.title(_tooltip(info, names))]
    if selected:
        parts.append(_ring(x, y, w))
    parts.append(svg.rect(x, y, w, BOX_H, fill, stroke, rx=6, stroke_width=stroke_w,
                          stroke_dasharray=dash))
    if state == "lit":
        parts.append(svg.rect(x, y, 5, BOX_H, svg.ACCENT, rx=2))
    parts.extend(_box_text(info, node_label(info, names), x, y, w, bool(info.saved)))
    opacity = "0.42" if state == "waiting" else None
    return svg.group("".join(parts), class_="node", data_id=info.id, data_kind=info.kind,
                     data_op=info.op, data_state=state or "idle", opacity=opacity)


def _box_text(info, title, x, y, w, pill) -> list:
    """A box's two text lines and, when ``pill``, the saved-for-backward pill below."""
    parts = [svg.text(x + w / 2, y + 16, title, 12.5, svg.INK, anchor="middle",
                      weight="600"),
             svg.text(x + w / 2, y + 30, detail(info), 10.5, svg.MUTED, svg.MONO,
                      anchor="middle")]
    if pill:
        sf, ss = svg.KIND_COLORS["saved"]
        label = f"saved {len(info.saved)} · {svg.fmt_bytes(info.saved_bytes)}"
        pw = svg.text_width(label, 9.5) + 12
        parts.append(svg.rect(x + (w - pw) / 2, y + BOX_H - 1, pw, SAVED_H - 1, sf, ss,
                              rx=5, stroke_width=0.8))
        parts.append(svg.text(x + w / 2, y + BOX_H + 10, label, 9.5, ss, anchor="middle"))
    return parts


def _group_tooltip(info, done) -> str:
    g = info.node
    lines = [f"{g.label}  [module, collapsed]",
             f"{g.ops} ops" + (f", {g.params} params" if g.params else "")
             + f" · output {svg.fmt_shape(info.shape)} · {info.dtype} · {info.device}"]
    if info.saved_bytes:
        lines.append(f"saved for backward {svg.fmt_bytes(info.saved_bytes)}")
    if done:
        lines.append(f"gradients done {done}/{len(g.members)}")
    return "\n".join(lines)


def _group_svg(info, box, done, animating, selected) -> str:
    """A collapsed module: one box; its bottom fills as its members finish backward."""
    x, y, w, h = box
    n = len(info.node.members)
    state = "lit" if done == n else "partial" if done else \
        ("waiting" if animating else "idle")
    fill, stroke = svg.KIND_COLORS["group"]
    stroke_w = 2.4 if state == "lit" else 1.4
    if state == "lit":
        stroke = svg.ACCENT
    parts = [svg.title(_group_tooltip(info, done))]
    if selected:
        parts.append(_ring(x, y, w))
    # a double outline: this box stands for several nodes
    parts.append(svg.rect(x + 3, y - 3, w, BOX_H, fill, stroke, rx=6, stroke_width=1))
    parts.append(svg.rect(x, y, w, BOX_H, fill, stroke, rx=6, stroke_width=stroke_w))
    if done:
        parts.append(svg.rect(x + 1, y + BOX_H - 5, (w - 2) * done / n, 4, svg.ACCENT,
                              rx=2, class_="hx-graph-progress"))
    if done or animating:
        parts.append(svg.text(x + w - 5, y + 11, f"{done}/{n}", 9.5, svg.MUTED,
                              anchor="end", class_="hx-graph-count"))
    parts.extend(_box_text(info, info.node.label, x, y, w, bool(info.saved_bytes)))
    opacity = "0.42" if state == "waiting" else None
    return svg.group("".join(parts), class_="node group", data_id=info.id,
                     data_kind="group", data_op=info.node.cls, data_module=info.node.name,
                     data_members=n, data_done=done, data_state=state, opacity=opacity)


def _edge_svg(src, dst, route, direction, lit) -> str:
    color, width = (svg.ACCENT, 1.6) if lit else (svg.FAINT, 1.1)
    ex, ey = route[-1]
    head = (f"M{svg.num(ex)},{svg.num(ey)} l-7,-3.5 l0,7 z" if direction == "LR" else
            f"M{svg.num(ex)},{svg.num(ey)} l-3.5,-7 l7,0 z")
    return svg.group(svg.path(route_path(route, direction), color, width)
                     + svg.path(head, color, 0, fill=color),
                     class_="edge", data_src=src, data_dst=dst)


def _legend_svg(x, y, groups) -> tuple[str, float]:
    items = LEGEND + ([("module", *svg.KIND_COLORS["group"])] if groups else [])
    return svg.legend(x, y, items)


def cap_hint(graph, collapsed) -> str | None:
    """What to suggest when a graph is capped: collapsing modules, if it has any."""
    if collapsed is None and any(n.module is not None for n in graph.nodes):
        return ("Or collapse modules into one box each (collapse=1, or the widget's "
                "collapse menu).")
    return None


def render_graph_svg(graph, highlighted=frozenset(), direction: str = "LR", *,
                     animating: bool = False, selected=None, names: dict | None = None,
                     max_nodes: int = 300, layout: GraphLayout | None = None,
                     collapse=None, model=None, collapsed: Collapsed | None = None,
                     title: str = "autograd graph") -> str:
    """The autograd DAG as an SVG string (root ``<svg class="hx-graph">``).

    graph: a :class:`haelixe.autograd.Graph`. highlighted: node ids drawn lit (their
    gradients are done). animating: dim the nodes not yet highlighted (a backward pass in
    progress). selected: a node id to ring. names: {node id: label} overriding node
    labels (GraphView fills it from the user's variables and a model's parameters). Each
    shown node is one ``<g class="node" data-id=...>``; a capped graph says so in its
    header.

    collapse: a module depth or a list of qualified module names (see
    :func:`collapse_graph`; ``model`` gives the names), or a ready ``collapsed``. Each
    module box is one ``<g class="node group" data-id=... data-members=N>``; it is lit
    when all its members are highlighted.
    """
    if collapsed is None and collapse:
        collapsed = collapse_graph(graph, collapse, model)
    drawn = collapsed.graph if collapsed is not None else graph
    lay = layout or layout_graph(drawn, direction, max_nodes, names,
                                 cap_hint(graph, collapsed))
    direction = lay.direction
    by_id = drawn.by_id()
    groups = collapsed.groups if collapsed is not None else {}
    done = {g: sum(i in highlighted for i in grp.members) for g, grp in groups.items()}

    def finished(i):
        return done[i] == len(groups[i].members) if i in groups else i in highlighted

    parts = [_edge_svg(s, d, route, direction, finished(s) and finished(d))
             for (s, d), route in lay.routes.items()]
    for i in lay.shown:
        if i in groups:
            parts.append(_group_svg(by_id[i], lay.boxes[i], done[i], animating,
                                    i == selected))
            continue
        state = "lit" if i in highlighted else ("waiting" if animating else None)
        parts.append(_node_svg(by_id[i], lay.boxes[i], names, state, i == selected))

    shown = set(lay.shown)
    header = [svg.text(MARGIN, MARGIN + 12, title, 14, svg.INK, weight="600")]
    n_saved = sum(by_id[i].saved_bytes for i in shown)
    # counts in graph nodes, a module box counting as its members
    members = {i for i in shown if i not in groups}
    members.update(m for g in shown & set(groups) for m in groups[g].members)
    boxes = f" ({len(shown & set(groups))} modules collapsed)" if groups else ""
    sub = (f"{len(members)} nodes{boxes} · {len(lay.layers)} layers · "
           f"saved for backward {svg.fmt_bytes(n_saved)}")
    if animating or highlighted:
        sub += f" · gradients done {len(members & set(highlighted))}/{len(members)}"
    header.append(svg.text(MARGIN + svg.text_width(title, 14, bold=True) + 12,
                           MARGIN + 12, sub, 11.5, svg.MUTED, class_="hx-graph-sub"))
    legend, legend_w = _legend_svg(MARGIN, MARGIN + 32, groups)
    header.append(legend)
    height = lay.height
    if not graph.nodes:
        header.append(svg.text(MARGIN, lay.height + 4, "no autograd graph: the tensor does "
                               "not require grad (make a leaf with requires_grad=True)", 12,
                               svg.MUTED, class_="hx-graph-message"))
        height += 18
    if lay.message:
        header.append(svg.text(MARGIN, lay.height + 4, lay.message, 12, svg.WASTE,
                               class_="hx-graph-message"))
        height += 18
    width = max(lay.width, MARGIN * 2 + svg.text_width(title, 14, bold=True) + 12
                + svg.text_width(sub, 11.5), MARGIN * 2 + legend_w)
    return svg.document(width, height, "".join(header) + "".join(parts), "hx-graph",
                        data_nodes=len(lay.shown), data_total_nodes=len(graph.nodes),
                        data_direction=direction)

