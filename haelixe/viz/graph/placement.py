"""Where the boxes of a graph go, and the path of every edge between them.

A layered (Sugiyama) layout: nodes in longest-path layers (columns for "LR", rows for
"TB"), an edge that spans several layers gets a waypoint in each layer it crosses, the
order inside each layer is improved by barycentre sweeps (waypoints included), and each
layer is centred on the others.

Edges never pass behind a box they do not connect to. A layer's boxes are stacked along
it without overlapping, and a waypoint holds a slot of its own between them, so each
route is: a short stub inside its source's own band of the layer, a curve through the
empty gap to the next layer, a straight run through that layer's waypoint slot, ...,
and a stub into the target. A route is a list of points: the segment from point k to
point k + 1 is straight for even k and a curve (horizontal tangents in "LR", vertical
in "TB") for odd k.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import svg
from .model import detail, node_label

__all__ = ["GraphLayout", "layout_graph", "BOX_H", "SAVED_H", "route_path",
           "bezier_points"]

PAD_X, LINE1, LINE2, BOX_H, SAVED_H = 10, 12.5, 10.5, 38, 15
LAYER_GAP, NODE_GAP, WAYPOINT_GAP, MARGIN, HEADER = 64, 14, 6, 16, 46
PORT_SPACING = 7  # between the ends of several edges on one side of a box
MIN_WIDTH = 560


@dataclass
class GraphLayout:
    """Where each shown node sits: ``boxes[id] = (x, y, w, h)`` (``h`` includes the
    saved-tensors pill), each edge's route ``routes[(src, dst)]`` (see the module
    docstring), the picture's size and, when the graph was capped, the message saying
    so."""

    layers: list
    boxes: dict
    width: float
    height: float
    shown: list = field(default_factory=list)
    total_nodes: int = 0
    message: str | None = None
    routes: dict = field(default_factory=dict)
    direction: str = "LR"


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


class _Waypoint:
    """A slot an edge holds in a layer it crosses."""

    __slots__ = ("edge", "k")

    def __init__(self, edge, k):
        self.edge, self.k = edge, k


def _with_waypoints(layers, edges):
    """Layers with a waypoint per crossed layer for every long edge, and the chain of
    each edge (source, waypoints..., target) as consecutive links."""
    where = {i: k for k, layer in enumerate(layers) for i in layer}
    slots = [list(layer) for layer in layers]
    chains, links = {}, []
    for s, d in edges:
        chain = [s]
        for k in range(where[s] + 1, where[d]):
            wp = _Waypoint((s, d), k)
            slots[k].append(wp)
            chain.append(wp)
        chain.append(d)
        chains[(s, d)] = chain
        links.extend(zip(chain, chain[1:]))
    return slots, chains, links


def _order(layers, links, sweeps: int = 3) -> None:
    """Barycentre ordering inside layers (a few sweeps each way) to cut crossings."""
    preds, succs = {}, {}
    for s, d in links:
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


def _node_sizes(graph, shown, names) -> dict:
    by_id = graph.by_id()
    sizes = {}
    for i in shown:
        info = by_id[i]
        w = max(svg.text_width(node_label(info, names), LINE1, bold=True),
                svg.text_width(detail(info), LINE2, mono=True)) + 2 * PAD_X
        if info.kind == "group":  # room for the "done k/n" counter
            w += svg.text_width("99/99", 9.5) + 8
        h = BOX_H + (SAVED_H if info.saved else 0)
        sizes[i] = (max(w, 64), h)
    return sizes


def _spread(n: int, room: float) -> list[float]:
    """Offsets from the middle for ``n`` edge ends sharing one side ``room`` long."""
    if n <= 1:
        return [0.0] * n
    step = min(PORT_SPACING, room / (n - 1))
    return [(k - (n - 1) / 2) * step for k in range(n)]


def layout_graph(graph, direction: str = "LR", max_nodes: int = 300,
                 names: dict | None = None, hint: str | None = None) -> GraphLayout:
    """Place the nodes of ``graph`` in layers (columns for "LR", rows for "TB") and route
    every edge between shown nodes.

    When the graph has more than ``max_nodes`` nodes, only the first layers (from the
    inputs) that fit are shown and ``message`` says so (followed by ``hint``).
    """
    if direction not in ("LR", "TB"):
        raise ValueError(f"GraphView: direction must be 'LR' or 'TB', got {direction!r}")
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
    shown = [i for layer in layers for i in layer]
    shown_set = set(shown)
    edges = list(dict.fromkeys((s, d) for s, d in graph.edges
                               if s in shown_set and d in shown_set))
    slots, chains, links = _with_waypoints(layers, edges)
    _order(slots, links)
    sizes = _node_sizes(graph, shown, names)
    lr = direction == "LR"

    # Work in (u, v): u runs across the layers, v along them; "LR" maps u to x.
    def extent_v(item):
        if isinstance(item, _Waypoint):
            return 0.0
        return sizes[item][1] if lr else sizes[item][0]

    def extent_u(item):
        return sizes[item][0] if lr else sizes[item][1]

    def gap(a, b):
        return WAYPOINT_GAP if isinstance(a, _Waypoint) or isinstance(b, _Waypoint) \
            else NODE_GAP

    extents = [sum(map(extent_v, layer)) + sum(gap(a, b) for a, b in zip(layer, layer[1:]))
               for layer in slots]
    span = max(extents, default=0.0)
    top = MARGIN + HEADER
    u0, u_size, at_v = [], [], {}  # per layer: start and depth; per item: v start
    u = MARGIN if lr else top
    for layer, ext in zip(slots, extents):
        depth = max(extent_u(i) for i in layer if not isinstance(i, _Waypoint))
        u0.append(u)
        u_size.append(depth)
        v = (top if lr else MARGIN) + (span - ext) / 2
        for a, b in zip(layer, layer[1:] + [None]):
            at_v[id(a)] = v
            v += extent_v(a) + (gap(a, b) if b is not None else 0)
        u += depth + (LAYER_GAP if lr else LAYER_GAP * 0.7)
    boxes = {}
    for k, layer in enumerate(slots):
        for item in layer:
            if isinstance(item, _Waypoint):
                continue
            w, h = sizes[item]
            if lr:
                boxes[item] = (u0[k] + (u_size[k] - w) / 2, at_v[id(item)], w, h)
            else:
                boxes[item] = (at_v[id(item)], u0[k], w, h)
    layer_of = {i: k for k, layer in enumerate(slots) for i in layer
                if not isinstance(i, _Waypoint)}
    routes = _route(edges, chains, boxes, layer_of, u0, u_size, at_v, lr)
    gap_u = LAYER_GAP if lr else LAYER_GAP * 0.7
    end_u = (u - gap_u + MARGIN) if slots else (MARGIN * 2 if lr else top + MARGIN)
    if lr:
        width, height = end_u, top + span + MARGIN
    else:
        width, height = MARGIN * 2 + span, end_u
    return GraphLayout(layers, boxes, max(width, MIN_WIDTH), height, shown, total, message,
                       routes, direction)


def _route(edges, chains, boxes, layer_of, u0, u_size, at_v, lr) -> dict:
    """The points of every edge (see the module docstring)."""

    def box_uv(i):
        x, y, w, h = boxes[i]
        # u: (start, end) across the layer; v: the middle and the room for edge ends
        return ((x, x + w), y + BOX_H / 2, BOX_H - 10) if lr else \
            ((y, y + BOX_H), x + w / 2, w - 16)

    # Several edges leaving (or entering) one box get separate ends, ordered by where
    # their other ends lie, so they do not cross at the box.
    def next_v(chain):
        return _item_v(chain[1], boxes, at_v, lr)

    def prev_v(chain):
        return _item_v(chain[-2], boxes, at_v, lr)

    out_v, in_v = {}, {}
    for ends, pick, side in ((out_v, next_v, 0), (in_v, prev_v, 1)):
        by_box = {}
        for e in edges:
            by_box.setdefault(e[side], []).append(e)
        for i, es in by_box.items():
            es.sort(key=lambda e: pick(chains[e]))
            _, mid, room = box_uv(i)
            for e, off in zip(es, _spread(len(es), room)):
                ends[e] = mid + off

    routes = {}
    for e in edges:
        s, d = e
        chain = chains[e]
        (_, s_end), _, _ = box_uv(s)
        (d_start, _), _, _ = box_uv(d)
        ks, kd = layer_of[s], layer_of[d]
        pts = [(s_end, out_v[e]), (u0[ks] + u_size[ks], out_v[e])]
        for k, wp in zip(range(ks + 1, kd), chain[1:-1]):
            v = at_v[id(wp)]
            pts += [(u0[k], v), (u0[k] + u_size[k], v)]
        pts += [(u0[kd], in_v[e]), (d_start, in_v[e])]
        routes[e] = [(a, b) if lr else (b, a) for a, b in pts]
    return routes


def _item_v(item, boxes, at_v, lr) -> float:
    if isinstance(item, _Waypoint):
        return at_v[id(item)]
    x, y, w, _ = boxes[item]
    return y + BOX_H / 2 if lr else x + w / 2


def _curve_controls(p, q, lr):
    if lr:
        c = max((q[0] - p[0]) / 2, 12)
        return (p[0] + c, p[1]), (q[0] - c, q[1])
    c = max((q[1] - p[1]) / 2, 10)
    return (p[0], p[1] + c), (q[0], q[1] - c)


def route_path(points, direction: str, head: float = 6.0) -> str:
    """The SVG path data of a route, stopping ``head`` pixels short of the target (the
    arrowhead fills the rest)."""
    lr = direction == "LR"
    pts = list(points)
    (ex, ey) = pts[-1]
    pts[-1] = (ex - head, ey) if lr else (ex, ey - head)
    n = svg.num
    d = [f"M{n(pts[0][0])},{n(pts[0][1])}"]
    for k in range(len(pts) - 1):
        p, q = pts[k], pts[k + 1]
        if k % 2 == 0:
            d.append(f"L{n(q[0])},{n(q[1])}")
        else:
            c1, c2 = _curve_controls(p, q, lr)
            d.append(f"C{n(c1[0])},{n(c1[1])} {n(c2[0])},{n(c2[1])} {n(q[0])},{n(q[1])}")
    return " ".join(d)


def bezier_points(points, direction: str, samples: int = 24) -> list:
    """Points along a route, curves sampled: what the route covers, for tests and hit
    checks."""
    lr = direction == "LR"
    out = [points[0]]
    for k in range(len(points) - 1):
        p, q = points[k], points[k + 1]
        if k % 2 == 0:
            out += [(p[0] + (q[0] - p[0]) * t / samples, p[1] + (q[1] - p[1]) * t / samples)
                    for t in range(1, samples + 1)]
            continue
        c1, c2 = _curve_controls(p, q, lr)
        for t in (j / samples for j in range(1, samples + 1)):
            a, b = (1 - t) ** 3, 3 * (1 - t) ** 2 * t
            c, e = 3 * (1 - t) * t ** 2, t ** 3
            out.append((a * p[0] + b * c1[0] + c * c2[0] + e * q[0],
                        a * p[1] + b * c1[1] + c * c2[1] + e * q[1]))
    return out
