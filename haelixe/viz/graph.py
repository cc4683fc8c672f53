"""GraphView: the autograd DAG behind a tensor, in topological layers, live in backward.

Pure part: :func:`layout_graph` places the nodes of a :class:`haelixe.autograd.Graph`
and :func:`render_graph_svg` draws them (one ``<g class="node" data-id=...>`` per node
shown, inside an ``<svg class="hx-graph">``). Widget part: :class:`GraphView` adds a
node picker with details and :meth:`GraphView.watch`, which lights nodes up as the
backward engine reports them finished.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from . import svg
from .throttle import Throttle

__all__ = ["GraphLayout", "layout_graph", "render_graph_svg", "node_label", "GraphView",
           "collapse_graph", "Collapsed", "Group"]

_PAD_X, _LINE1, _LINE2, _BOX_H, _SAVED_H = 10, 12.5, 10.5, 38, 15
_LAYER_GAP, _NODE_GAP, _MARGIN, _HEADER = 56, 14, 16, 46


def node_label(info, names=None) -> str:
    """The first text line of a node: its op, or for a leaf its (qualified) name."""
    if names and info.id in names:
        return names[info.id]
    if info.kind in ("leaf", "parameter"):
        return info.name or info.kind
    return info.op


def _detail(info) -> str:
    if info.kind == "group":
        g = info.node
        inside = f"{g.ops} ops" + (f" · {g.params} params" if g.params else "")
        return f"{inside} · {svg.fmt_shape(info.shape)}"
    return f"{svg.fmt_shape(info.shape)} · {info.dtype} · {info.device}"


def _is_cast(info) -> bool:
    return info.op.startswith("Cast")


# -- collapsing by module ----------------------------------------------------------------

@dataclass
class Group:
    """One collapsed module instance: the nodes its forward made (and the parameters only
    it consumes), drawn as one box."""

    id: int
    name: str
    cls: str
    members: list
    ops: int = 0
    params: int = 0

    @property
    def label(self) -> str:
        return f"{self.name} · {self.cls}"


@dataclass
class Collapsed:
    """A graph with some modules folded into boxes: ``graph`` is what gets drawn (groups
    are nodes of kind "group"), ``member_of`` maps each folded node id to its group id."""

    graph: object
    groups: dict
    member_of: dict
    original: object


def qualified_modules(graph, model=None) -> dict:
    """{qualified name: module} for the modules that may make nodes of ``graph``.

    With ``model`` the names are its ``named_modules()``. Without, the outermost modules
    that made nodes are named by class and index (``TransformerBlock0``) and their insides
    relative to that.
    """
    if model is not None:
        roots = [("", model)]
    else:
        seen, by_id = {}, graph.by_id()
        for i in (i for layer in graph.generations() for i in layer):  # number in flow order
            if by_id[i].module is not None:
                seen.setdefault(id(by_id[i].module), by_id[i].module)
        inner = {id(m) for root in seen.values() for name, m in root.named_modules()
                 if name}
        roots = [(f"{type(m).__name__}{k}", m)
                 for k, m in enumerate(m for i, m in seen.items() if i not in inner)]
    out, done = {}, set()
    for prefix, root in roots:
        for name, m in root.named_modules(prefix):
            if id(m) not in done:  # a shared module keeps its first name
                done.add(id(m))
                out[name] = m
    return out


def _group_key(qualname, collapse):
    """The collapsed module a node made in ``qualname`` belongs to (None: not collapsed).
    ``collapse`` is a depth (keep the first parts of the name) or a list of names (the
    outermost listed name containing ``qualname`` wins)."""
    if not qualname:
        return None
    if isinstance(collapse, int):
        return ".".join(qualname.split(".")[:collapse]) if collapse > 0 else None
    for name in sorted(collapse, key=lambda s: s.count(".")):
        if qualname == name or qualname.startswith(name + "."):
            return name
    return None


def _cyclic_groups(graph, member_of) -> list:
    """The groups on (or between) cycles of the graph collapsed by ``member_of``.

    Kahn from the sources, then from the sinks of what is left: what survives both lies
    on a cycle or between two."""
    rep = lambda i: member_of.get(i, i)  # noqa: E731
    edges = {(rep(s), rep(d)) for s, d in graph.edges if rep(s) != rep(d)}
    alive = {rep(n.id) for n in graph.nodes}
    for forward in (True, False):
        indeg = dict.fromkeys(alive, 0)
        nbrs = {}
        for s, d in edges:
            a, b = (s, d) if forward else (d, s)
            if a in alive and b in alive:
                indeg[b] += 1
                nbrs.setdefault(a, []).append(b)
        todo = [i for i, k in indeg.items() if k == 0]
        while todo:
            i = todo.pop()
            alive.discard(i)
            for j in nbrs.get(i, ()):
                indeg[j] -= 1
                if indeg[j] == 0:
                    todo.append(j)
    return sorted(i for i in alive if i in set(member_of.values()))


def _without_cycles(graph, member_of) -> dict:
    """``member_of`` less the groups whose folding would close a cycle (the data flow
    leaves the group and comes back: a module called twice with other work between)."""
    while cyclic := _cyclic_groups(graph, member_of):
        # open a group that is cyclic on its own first; else any group on the cycle
        alone = [g for g in cyclic
                 if _cyclic_groups(graph, {i: h for i, h in member_of.items() if h == g})]
        drop = (alone or cyclic)[0]
        member_of = {i: g for i, g in member_of.items() if g != drop}
    return member_of


def _fold_parameters(graph, member_of) -> None:
    """Parameters whose consumers all sit in one group join that group."""
    consumers = {}
    for s, d in graph.edges:
        consumers.setdefault(s, set()).add(member_of.get(d, d))
    for n in graph.nodes:
        owners = consumers.get(n.id, ())
        if n.kind == "parameter" and len(owners) == 1:
            (owner,) = owners
            if owner in member_of.values():
                member_of[n.id] = owner


def collapse_graph(graph, collapse, model=None) -> Collapsed:
    """``graph`` with the modules picked by ``collapse`` (a depth, or a list of qualified
    names) folded into one box each. A group that would close a cycle stays unfolded."""
    from ..autograd.graph import Graph, NodeInfo

    modules = qualified_modules(graph, model)
    names = {id(m): q for q, m in modules.items()}
    by_name = {}
    for n in graph.nodes:
        key = _group_key(names.get(id(n.module)), collapse)
        if key is not None:
            by_name.setdefault(key, []).append(n.id)
    # A module whose children are boxes of their own stays open (its own ops, like a
    # residual add, are drawn between them), so boxes never nest.
    by_name = {k: v for k, v in by_name.items()
               if not any(o.startswith(k + ".") for o in by_name)}
    group_ids = {key: -(k + 1) for k, key in enumerate(sorted(by_name))}  # never an id()
    member_of = {i: group_ids[key] for key, ids in by_name.items() for i in ids}
    member_of = _without_cycles(graph, member_of)
    _fold_parameters(graph, member_of)

    by_id = graph.by_id()
    order = [i for layer in graph.generations() for i in layer]
    groups = {}
    for key, gid in group_ids.items():
        members = [i for i in order if member_of.get(i) == gid]
        if not members:
            continue
        module = modules.get(key)
        params = sum(by_id[i].kind == "parameter" for i in members)
        groups[gid] = Group(gid, key, type(module).__name__ if module else "Module", members,
                            len(members) - params, params)
    nodes = [n for n in graph.nodes if n.id not in member_of]
    nodes += [_group_info(g, by_id, NodeInfo) for g in groups.values()]
    rep = lambda i: member_of.get(i, i)  # noqa: E731
    edges = list(dict.fromkeys((rep(s), rep(d)) for s, d in graph.edges if rep(s) != rep(d)))
    return Collapsed(Graph(nodes, edges), groups, member_of, graph)


def _group_info(group, by_id, NodeInfo):
    members = [by_id[i] for i in group.members]
    last = next(n for n in reversed(members) if n.kind != "parameter")
    saved = [s for n in members for s in n.saved]
    return NodeInfo(group.id, group.label, "group", last.shape, last.dtype, last.device,
                    saved=saved, saved_bytes=sum(n.saved_bytes for n in members),
                    name=group.label, node=group)


@dataclass
class GraphLayout:
    """Where each shown node sits: ``boxes[id] = (x, y, w, h)``, plus the picture's size
    and, when the graph was capped, the message saying so."""

    layers: list
    boxes: dict
    width: float
    height: float
    shown: list = field(default_factory=list)
    total_nodes: int = 0
    message: str | None = None


def _layers(graph) -> list[list[int]]:
    """Longest-path layers, with each leaf moved next to its first consumer (so a
    parameter used late does not sit at the far left with a long edge)."""
    gens = graph.generations()
    depth = {i: k for k, layer in enumerate(gens) for i in layer}
    consumers = {}
    for s, d in graph.edges:
        consumers.setdefault(s, []).append(d)
    for layer in gens[:1]:
        for i in layer:
            if i in consumers:
                depth[i] = min(depth[c] for c in consumers[i]) - 1
    out = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for layer in gens:  # keep the engine's order inside a layer as the starting order
        for i in layer:
            out[depth[i]].append(i)
    return [layer for layer in out if layer]


def _order(layers, edges, sweeps: int = 2) -> None:
    """Barycentre ordering inside layers (a few sweeps each way) to cut crossings."""
    preds, succs = {}, {}
    for s, d in edges:
        preds.setdefault(d, []).append(s)
        succs.setdefault(s, []).append(d)
    pos = {i: k for layer in layers for k, i in enumerate(layer)}

    def sweep(seq, nbrs):
        for layer in seq:
            def key(i, layer=layer):
                ps = [pos[p] for p in nbrs.get(i, ()) if p in pos]
                return sum(ps) / len(ps) if ps else pos[i]
            layer.sort(key=key)
            for k, i in enumerate(layer):
                pos[i] = k

    for _ in range(sweeps):
        sweep(layers[1:], preds)
        sweep(layers[-2::-1], succs)


def layout_graph(graph, direction: str = "LR", max_nodes: int = 300,
                 names: dict | None = None, hint: str | None = None) -> GraphLayout:
    """Place the nodes of ``graph`` in layers (columns for "LR", rows for "TB").

    When the graph has more than ``max_nodes`` nodes, only the first layers (from the
    inputs) that fit are shown and ``message`` says so (followed by ``hint``).
    """
    if direction not in ("LR", "TB"):
        raise ValueError(f"GraphView: direction must be 'LR' or 'TB', got {direction!r}")
    by_id = graph.by_id()
    layers = _layers(graph)
    total = len(graph.nodes)
    message = None
    if total > max_nodes:
        kept, count = [], 0
        for layer in layers:
            if kept and count + len(layer) > max_nodes:
                break
            kept.append(layer)
            count += len(layer)
        message = (f"graph has {total} nodes in {len(layers)} layers; showing the first "
                   f"{len(kept)} layers ({count} nodes). Pass a larger max_nodes to see "
                   f"more." + (f" {hint}" if hint else ""))
        layers = kept
    shown = {i for layer in layers for i in layer}
    _order(layers, [(s, d) for s, d in graph.edges if s in shown and d in shown])

    sizes = {}
    for i in shown:
        info = by_id[i]
        w = max(svg.text_width(node_label(info, names), _LINE1, bold=True),
                svg.text_width(_detail(info), _LINE2, mono=True)) + 2 * _PAD_X
        if info.kind == "group":  # room for the "done k/n" counter
            w += svg.text_width("99/99", 9.5) + 8
        h = _BOX_H + (_SAVED_H if info.saved else 0)
        sizes[i] = (max(w, 64), h)

    boxes = {}
    top = _MARGIN + _HEADER
    if direction == "LR":
        extents = [sum(sizes[i][1] for i in layer) + _NODE_GAP * (len(layer) - 1)
                   for layer in layers]
        span = max(extents, default=0)
        x = _MARGIN
        for layer, ext in zip(layers, extents):
            col_w = max(sizes[i][0] for i in layer)
            y = top + (span - ext) / 2
            for i in layer:
                w, h = sizes[i]
                boxes[i] = (x + (col_w - w) / 2, y, w, h)
                y += h + _NODE_GAP
            x += col_w + _LAYER_GAP
        width, height = x - _LAYER_GAP + _MARGIN, top + span + _MARGIN
    else:
        extents = [sum(sizes[i][0] for i in layer) + _NODE_GAP * (len(layer) - 1)
                   for layer in layers]
        span = max(extents, default=0)
        y = top
        for layer, ext in zip(layers, extents):
            row_h = max(sizes[i][1] for i in layer)
            x = _MARGIN + (span - ext) / 2
            for i in layer:
                w, h = sizes[i]
                boxes[i] = (x, y, w, h)
                x += w + _NODE_GAP
            y += row_h + _LAYER_GAP * 0.7
        width, height = _MARGIN * 2 + span, y - _LAYER_GAP * 0.7 + _MARGIN
    return GraphLayout(layers, boxes, max(width, 560), height,
                       [i for layer in layers for i in layer], total, message)


def _edge_svg(a, b, direction, color, width) -> str:
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    if direction == "LR":
        x1, y1, x2, y2 = ax + aw, ay + _BOX_H / 2, bx - 1, by + _BOX_H / 2
        c = max((x2 - x1) / 2, 20)
        d = f"M{svg.num(x1)},{svg.num(y1)} C{svg.num(x1 + c)},{svg.num(y1)} " \
            f"{svg.num(x2 - c)},{svg.num(y2)} {svg.num(x2 - 6)},{svg.num(y2)}"
        head = f"M{svg.num(x2)},{svg.num(y2)} l-7,-3.5 l0,7 z"
    else:
        x1, y1, x2, y2 = ax + aw / 2, ay + ah, bx + bw / 2, by - 1
        c = max((y2 - y1) / 2, 16)
        d = f"M{svg.num(x1)},{svg.num(y1)} C{svg.num(x1)},{svg.num(y1 + c)} " \
            f"{svg.num(x2)},{svg.num(y2 - c)} {svg.num(x2)},{svg.num(y2 - 6)}"
        head = f"M{svg.num(x2)},{svg.num(y2)} l-3.5,-7 l7,0 z"
    return svg.path(d, color, width) + svg.path(head, color, 0, fill=color)


def _tooltip(info, names) -> str:
    lines = [f"{node_label(info, names)}  [{info.kind}]", _detail(info)]
    if info.op != node_label(info, names):
        lines.append(f"op: {info.op}")
    for shape, dtype, nbytes in info.saved:
        lines.append(f"saved {svg.fmt_shape(shape)} {dtype}: {svg.fmt_bytes(nbytes)}")
    if info.grad_norm is not None:
        lines.append(f"grad norm {info.grad_norm:.4g}")
    return "\n".join(lines)


def _node_svg(info, box, names, state, selected) -> str:
    x, y, w, h = box
    fill, stroke = svg.KIND_COLORS.get(info.kind, svg.KIND_COLORS["op"])
    stroke_w, dash = 1.2, None
    if _is_cast(info):
        stroke, stroke_w, dash = svg.CAST_COLOR, 2.2, "5 3"
    if state == "lit":  # keep the kind's fill, so a finished graph still reads
        stroke, stroke_w = svg.ACCENT, 2.2
    parts = [svg.title(_tooltip(info, names))]
    if selected:
        parts.append(svg.rect(x - 4, y - 4, w + 8, _BOX_H + 8, "none", svg.ACCENT,
                              rx=9, stroke_width=2.5))
    parts.append(svg.rect(x, y, w, _BOX_H, fill, stroke, rx=6, stroke_width=stroke_w,
                          stroke_dasharray=dash))
    if state == "lit":
        parts.append(svg.rect(x, y, 5, _BOX_H, svg.ACCENT, rx=2))
    parts.extend(_box_text(info, node_label(info, names), x, y, w, bool(info.saved)))
    opacity = "0.42" if state == "waiting" else None
    return svg.group("".join(parts), class_="node", data_id=info.id, data_kind=info.kind,
                     data_op=info.op, data_state=state or "idle", opacity=opacity)


def _box_text(info, title, x, y, w, pill) -> list:
    """A box's two text lines and, when ``pill``, the saved-for-backward pill below."""
    parts = [svg.text(x + w / 2, y + 16, title, _LINE1, svg.INK, anchor="middle",
                      weight="600"),
             svg.text(x + w / 2, y + 30, _detail(info), _LINE2, svg.MUTED, svg.MONO,
                      anchor="middle")]
    if pill:
        sf, ss = svg.KIND_COLORS["saved"]
        label = f"saved {len(info.saved)} · {svg.fmt_bytes(info.saved_bytes)}"
        pw = svg.text_width(label, 9.5) + 12
        parts.append(svg.rect(x + (w - pw) / 2, y + _BOX_H - 1, pw, _SAVED_H - 1, sf, ss,
                              rx=5, stroke_width=0.8))
        parts.append(svg.text(x + w / 2, y + _BOX_H + 10, label, 9.5, ss, anchor="middle"))
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
    stroke_w = 2.2 if state == "lit" else 1.4
    if state == "lit":
        stroke = svg.ACCENT
    parts = [svg.title(_group_tooltip(info, done))]
    if selected:
        parts.append(svg.rect(x - 4, y - 4, w + 8, _BOX_H + 8, "none", svg.ACCENT,
                              rx=9, stroke_width=2.5))
    # a double outline: this box stands for several nodes
    parts.append(svg.rect(x + 3, y - 3, w, _BOX_H, fill, stroke, rx=6, stroke_width=1))
    parts.append(svg.rect(x, y, w, _BOX_H, fill, stroke, rx=6, stroke_width=stroke_w))
    if done:
        parts.append(svg.rect(x + 1, y + _BOX_H - 5, (w - 2) * done / n, 4, svg.ACCENT,
                              rx=2, class_="hx-graph-progress"))
    if done or animating:
        parts.append(svg.text(x + w - 5, y + 11, f"{done}/{n}", 9.5, svg.MUTED,
                              anchor="end", class_="hx-graph-count"))
    parts.extend(_box_text(info, info.node.label, x, y, w, bool(info.saved_bytes)))
    opacity = "0.42" if state == "waiting" else None
    return svg.group("".join(parts), class_="node group", data_id=info.id,
                     data_kind="group", data_op=info.node.cls, data_module=info.node.name,
                     data_members=n, data_done=done, data_state=state, opacity=opacity)


def _cap_hint(graph, collapsed) -> str | None:
    """What to suggest when a graph is capped: collapsing modules, if it has any."""
    if collapsed is None and any(n.module is not None for n in graph.nodes):
        return ("Or collapse modules into one box each (collapse=1, or the widget's "
                "collapse menu).")
    return None


def render_graph_svg(graph, highlighted=frozenset(), direction: str = "LR", *,
                     animating: bool = False, selected=None, names: dict | None = None,
                     max_nodes: int = 300, layout: GraphLayout | None = None,
                     collapse=None, model=None, collapsed: Collapsed | None = None) -> str:
    """The autograd DAG as an SVG string (root ``<svg class="hx-graph">``).

    graph: a :class:`haelixe.autograd.Graph`. highlighted: node ids drawn lit (their
    gradients are done). animating: dim the nodes not yet highlighted (a backward pass in
    progress). selected: a node id to ring. names: {node id: label} overriding leaf names
    (GraphView fills it from a model's named parameters). Each shown node is one
    ``<g class="node" data-id=...>``; a capped graph says so in its header.

    collapse: a module depth or a list of qualified module names (see
    :func:`collapse_graph`; ``model`` gives the names), or a ready ``collapsed``. Each
    module box is one ``<g class="node group" data-id=... data-members=N>``; it is lit
    when all its members are highlighted.
    """
    if collapsed is None and collapse is not None:
        collapsed = collapse_graph(graph, collapse, model)
    drawn = collapsed.graph if collapsed is not None else graph
    lay = layout or layout_graph(drawn, direction, max_nodes, names,
                                 _cap_hint(graph, collapsed))
    by_id = drawn.by_id()
    groups = collapsed.groups if collapsed is not None else {}
    done = {g: sum(i in highlighted for i in grp.members) for g, grp in groups.items()}

    def finished(i):
        return done[i] == len(groups[i].members) if i in groups else i in highlighted

    shown = set(lay.shown)
    parts = []
    for s, d in drawn.edges:
        if s in shown and d in shown:
            lit = finished(s) and finished(d)
            parts.append(_edge_svg(lay.boxes[s], lay.boxes[d], direction,
                                   svg.ACCENT if lit else "#9aa5b1", 1.6 if lit else 1.1))
    for i in lay.shown:
        if i in groups:
            parts.append(_group_svg(by_id[i], lay.boxes[i], done[i], animating,
                                    i == selected))
            continue
        state = "lit" if i in highlighted else ("waiting" if animating else None)
        parts.append(_node_svg(by_id[i], lay.boxes[i], names, state, i == selected))

    header = [svg.text(_MARGIN, _MARGIN + 12, "autograd graph", 14, svg.INK, weight="600")]
    n_saved = sum(by_id[i].saved_bytes for i in shown)
    # counts in graph nodes, a module box counting as its members
    members = {i for i in shown if i not in groups}
    members.update(m for g in shown & set(groups) for m in groups[g].members)
    boxes = f" ({len(shown & set(groups))} modules collapsed)" if groups else ""
    sub = (f"{len(members)} nodes{boxes} · {len(lay.layers)} layers · "
           f"saved for backward {svg.fmt_bytes(n_saved)}")
    if animating or highlighted:
        sub += f" · gradients done {len(members & set(highlighted))}/{len(members)}"
    header.append(svg.text(_MARGIN + svg.text_width("autograd graph", 14, bold=True) + 12,
                           _MARGIN + 12, sub, 11.5, svg.MUTED))
    items = [(k, *svg.KIND_COLORS[k]) for k in ("op", "leaf", "parameter", "output",
                                               "saved")]
    items += [("cast", "#ffffff", svg.CAST_COLOR), ("gradient done", "#ffffff", svg.ACCENT)]
    if groups:
        items.append(("module", *svg.KIND_COLORS["group"]))
    leg, _ = svg.legend(_MARGIN, _MARGIN + 32, items)
    header.append(leg)
    height = lay.height
    if not graph.nodes:
        header.append(svg.text(_MARGIN, lay.height + 4, "no autograd graph: the tensor does "
                               "not require grad (make a leaf with requires_grad=True)", 12,
                               svg.MUTED, class_="hx-graph-message"))
        height += 18
    if lay.message:
        header.append(svg.text(_MARGIN, lay.height + 4, lay.message, 12, svg.WASTE,
                               class_="hx-graph-message"))
        height += 18
    return svg.document(lay.width, height, "".join(header) + "".join(parts), "hx-graph",
                        data_nodes=len(lay.shown), data_total_nodes=len(graph.nodes))


# -- the widget --------------------------------------------------------------------------

def _parameter_names(model) -> dict:
    """{id(parameter): qualified name} from a Module."""
    return {id(p): name for name, p in model.named_parameters()}


def _values_summary(tensor) -> str:
    import numpy as np

    a = np.asarray(tensor.detach().float().cpu().numpy(), dtype=np.float64)
    if a.size == 0:
        return "empty"
    return (f"min {a.min():.4g} · max {a.max():.4g} · mean {a.mean():.4g} · "
            f"std {a.std():.4g}")


def _grad_norm(tensor):
    if tensor is None or tensor.grad is None:
        return None
    import numpy as np

    g = np.asarray(tensor.grad.detach().float().cpu().numpy(), dtype=np.float64)
    return float(math.sqrt(np.sum(g * g)))


class GraphView:
    """The autograd graph of ``tensor`` as a live notebook widget.

        view = hx.viz.GraphView(loss, model=model)   # display it: the cell's last line
        with view.watch():                           # nodes light up as backward runs
            loss.backward()
        view.save_svg("graph.svg")

    ``tensor`` may also be a list of tensors or a ready :class:`Graph`. ``model`` (a
    Module) names parameters and modules by their qualified names. ``collapse`` (a module
    depth, or a list of qualified module names; the widget's collapse menu switches it)
    draws each such module as one box. ``live=True`` keeps watching every backward pass
    until :meth:`close`. The view holds the graph's nodes (and so their saved tensors)
    while it lives.
    """

    def __init__(self, tensor, direction: str = "LR", max_nodes: int = 300, *,
                 model=None, collapse=None, live: bool = False, interval: float = 0.1):
        import ipywidgets as w

        from ..autograd import graph as build_graph
        from ..autograd.graph import Graph

        if isinstance(tensor, Graph):
            self.graph = tensor
        else:
            tensors = tensor if isinstance(tensor, (list, tuple)) else [tensor]
            self.graph = build_graph(*tensors)
        self.names = _parameter_names(model) if model is not None else {}
        self._leaf_names()
        self.model = model
        self.direction = direction
        self.max_nodes = max_nodes
        self.collapse = tuple(collapse) if isinstance(collapse, (list, tuple)) else collapse
        self.collapsed = None
        self.finished: set = set()
        self.grad_norms: dict = {}
        self.animating = False
        self.selected = None
        self._ids = {n.id for n in self.graph.nodes}
        self._throttle = Throttle(interval, budget=0.05)
        self._remove_observer = None
        self._relayout()

        self._svg = w.HTML(layout=w.Layout(overflow="auto", max_height="640px",
                                           border="1px solid #e4e7eb"))
        self._direction = w.ToggleButtons(options=[("left → right", "LR"),
                                                   ("top → bottom", "TB")],
                                          value=direction, description="layout",
                                          style={"button_width": "110px"})
        self._collapse = w.Dropdown(options=self._collapse_options(), value=self.collapse,
                                    description="collapse", layout=w.Layout(width="190px"))
        self._picker = w.Dropdown(options=self._picker_options(), value=None,
                                  description="node", layout=w.Layout(width="420px"))
        self._details = w.HTML()
        self._direction.observe(self._on_direction, names="value")
        self._collapse.observe(self._on_collapse, names="value")
        self._picker.observe(self._on_pick, names="value")
        self.widget = w.VBox([w.HBox([self._direction, self._collapse, self._picker]),
                              self._svg, self._details])
        self.refresh()
        if live:
            self._remove_observer = self._observe()

    def _leaf_names(self) -> None:
        # Leaf nodes live on as AccumulateGrad objects; name them by their tensors.
        for n in self.graph.nodes:
            if n.kind in ("leaf", "parameter") and n.node is not None:
                leaf = getattr(n.node, "leaf", None)
                if leaf is not None and id(leaf) in self.names:
                    self.names[n.id] = self.names[id(leaf)]

    def _drawn(self):
        """The graph as drawn: collapsed modules are single nodes of kind "group"."""
        return self.collapsed.graph if self.collapsed is not None else self.graph

    def _relayout(self) -> None:
        self.collapsed = (collapse_graph(self.graph, list(self.collapse)
                                         if isinstance(self.collapse, tuple)
                                         else self.collapse, self.model)
                          if self.collapse is not None else None)
        self._layout = layout_graph(self._drawn(), self.direction, self.max_nodes,
                                    self.names, _cap_hint(self.graph, self.collapsed))

    def _collapse_options(self):
        names = qualified_modules(self.graph, self.model)
        used = {id(n.module) for n in self.graph.nodes if n.module is not None}
        deepest = max((q.count(".") + 1 for q, m in names.items() if q and id(m) in used),
                      default=0)
        options = [("none", None)] + [(f"depth {d}", d) for d in range(1, deepest + 1)]
        if self.collapse is not None and self.collapse not in dict(options).values():
            options.append((str(self.collapse), self.collapse))
        return options

    def _picker_options(self):
        by_id = self._drawn().by_id()
        return [("(pick a node)", None)] + [
            (f"{k}: {node_label(by_id[i], self.names)}  {svg.fmt_shape(by_id[i].shape)}", i)
            for k, i in enumerate(self._layout.shown)]

    def _ordered_nodes(self):
        by_id = self._drawn().by_id()
        return [by_id[i] for i in self._layout.shown]

    # -- display -----------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def to_svg(self) -> str:
        """The current picture as an SVG string."""
        return render_graph_svg(self.graph, self.finished, self.direction,
                                animating=self.animating, selected=self.selected,
                                names=self.names, max_nodes=self.max_nodes,
                                layout=self._layout, collapsed=self.collapsed)

    def save_svg(self, path) -> None:
        """Write the current picture to ``path`` (a standalone .svg file)."""
        with open(path, "w", encoding="utf-8") as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n' + self.to_svg())

    def refresh(self) -> None:
        """Redraw now (live updates are throttled; this is not)."""
        with self._throttle.timing():
            self._svg.value = self.to_svg()
            self._details.value = self.details_html(self.selected)

    def _on_direction(self, change) -> None:
        self.direction = change["new"]
        self._relayout()
        self.refresh()

    def _on_collapse(self, change) -> None:
        self.set_collapse(change["new"])

    def set_collapse(self, collapse) -> None:
        """Switch collapsing (None, a module depth, or a list of module names) and
        redraw; the node picker follows (a selection that no longer shows is cleared)."""
        self.collapse = tuple(collapse) if isinstance(collapse, list) else collapse
        self._relayout()
        if self._collapse.value != self.collapse:
            self._collapse.options = self._collapse_options()
            self._collapse.value = self.collapse
        if self.selected not in self._layout.shown:
            self.selected = None
        self._picker.options = self._picker_options()
        self._picker.value = self.selected
        self.refresh()

    def _on_pick(self, change) -> None:
        self.select(change["new"])

    def select(self, node_id) -> None:
        """Ring node ``node_id`` and show its details (None clears)."""
        self.selected = node_id
        if self._picker.value != node_id:
            self._picker.value = node_id
        self.refresh()

    def details(self, node_id) -> dict:
        """What the details panel shows for one node (or module box), as plain data."""
        info = self._drawn().by_id()[node_id]
        if info.kind == "group":
            return self._group_details(info)
        out = {"label": node_label(info, self.names), "op": info.op, "kind": info.kind,
               "shape": info.shape, "dtype": info.dtype, "device": info.device,
               "saved": list(info.saved), "saved_bytes": info.saved_bytes,
               "grads_to_inputs": self.grad_norms.get(node_id)}
        leaf = getattr(info.node, "leaf", None) if info.kind in ("leaf", "parameter") \
            else None
        if leaf is not None:
            out["values"] = _values_summary(leaf)
            out["grad_norm"] = _grad_norm(leaf)
        else:
            out["grad_norm"] = info.grad_norm
        return out

    def _group_details(self, info) -> dict:
        g = info.node
        return {"label": g.label, "op": g.cls, "kind": "group", "shape": info.shape,
                "dtype": info.dtype, "device": info.device, "saved": list(info.saved),
                "saved_bytes": info.saved_bytes, "grads_to_inputs": None,
                "grad_norm": None, "module": g.name, "members": len(g.members),
                "ops": g.ops, "params": g.params,
                "done": sum(i in self.finished for i in g.members)}

    def details_html(self, node_id) -> str:
        if node_id is None:
            return ('<div style="color:#616e7c;font:12px sans-serif;padding:4px">'
                    'Pick a node to see its saved tensors, gradient and values.</div>')
        d = self.details(node_id)
        rows = [("op", d["op"]), ("kind", d["kind"]),
                ("output", f"{svg.fmt_shape(d['shape'])} · {d['dtype']} · {d['device']}")]
        if d["kind"] == "group":
            rows[0] = ("module", f"{d['module']} ({d['op']})")
            rows.append(("inside", f"{d['ops']} ops, {d['params']} params"))
            rows.append(("gradients done", f"{d['done']}/{d['members']}"))
        if d["saved"]:
            for k, (shape, dtype, nbytes) in enumerate(d["saved"]):
                rows.append((f"saved[{k}]", f"{svg.fmt_shape(shape)} {dtype} · "
                                            f"{nbytes} bytes ({svg.fmt_bytes(nbytes)})"))
            rows.append(("saved total", f"{d['saved_bytes']} bytes"))
        elif d["kind"] == "op":
            rows.append(("saved", "nothing (or already freed by backward)"))
        if d.get("values"):
            rows.append(("values", d["values"]))
        if d["grad_norm"] is not None:
            rows.append(("grad norm", f"{d['grad_norm']:.6g}"))
        if d["grads_to_inputs"]:
            norms = ", ".join("—" if g is None else f"{g:.4g}" for g in d["grads_to_inputs"])
            rows.append(("grad norms sent to inputs", norms))
        cells = "".join(
            f'<tr><td style="color:#616e7c;padding:1px 12px 1px 0">{svg.esc(k)}</td>'
            f'<td style="font-family:monospace">{svg.esc(v)}</td></tr>' for k, v in rows)
        return (f'<div style="font:12px sans-serif;padding:4px"><b>{svg.esc(d["label"])}'
                f'</b><table style="margin-top:4px">{cells}</table></div>')

    # -- live backward -----------------------------------------------------------------
    def _observe(self, slowdown: float = 0.0):
        from ..autograd import add_backward_observer

        def on_event(event, node, norms):
            nid = id(node)
            if nid not in self._ids or event != "finish":
                return
            self.finished.add(nid)
            self.grad_norms[nid] = norms
            if slowdown > 0:
                self.refresh()
                time.sleep(slowdown)
            elif self._throttle.due():
                self.refresh()

        return add_backward_observer(on_event)

    @contextmanager
    def watch(self, slowdown: float = 0.0):
        """Animate the backward passes run inside the ``with`` block: each node lights
        up when the engine finishes it (redraws throttled; ``slowdown`` seconds of pause
        after each node make a small graph's pass visible step by step)."""
        self.finished.clear()
        self.grad_norms.clear()
        self.animating = True
        self.refresh()
        self._throttle.restart()
        remove = self._observe(slowdown)
        try:
            yield self
        finally:
            remove()
            self.animating = False
            self.refresh()

    def close(self) -> None:
        """Stop a ``live=True`` view and close its widgets."""
        if self._remove_observer is not None:
            self._remove_observer()
            self._remove_observer = None
        self.widget.close()
