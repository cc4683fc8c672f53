"""GraphView: the autograd DAG behind a tensor as a notebook widget, live in backward.

It adds to the pure drawing (:mod:`.drawing`) a layout toggle, a collapse menu with the
module depths that change the picture, a node picker with details, fit/zoom, and
:meth:`GraphView.watch`, which lights nodes up as the backward engine reports them
finished (through :func:`haelixe.autograd.add_backward_observer`).
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager

from .. import svg
from ..clock import RedrawClock
from ..display import TOGGLE_LOOK, LiveWidget, Picture, flex_row
from .drawing import cap_hint, render_graph_svg
from .model import (
    collapse_choices,
    collapse_graph,
    node_label,
    resolve_names,
    scope_of_caller,
)
from .placement import layout_graph

__all__ = ["GraphView", "choose_direction"]

#: the output-area width a picture is fitted to when choosing a direction (JupyterLab
#: at 1280 px with the file browser open)
FIT_WIDTH = 840
_NO_NODE = 0  # the node picker's "(pick a node)": never an id() nor a group id


def choose_direction(graph, max_nodes=300, names=None, hint=None):
    """The layout ("LR" or "TB") that needs less shrinking to fit :data:`FIT_WIDTH`;
    left to right unless top to bottom is clearly larger on the page."""
    lays = {d: layout_graph(graph, d, max_nodes, names, hint) for d in ("LR", "TB")}
    scale = {d: min(1.0, FIT_WIDTH / lay.width) for d, lay in lays.items()}
    best = "TB" if scale["TB"] > 1.15 * scale["LR"] else "LR"
    return best, lays[best]


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


class GraphView(LiveWidget):
    """The autograd graph of ``tensor`` as a live notebook widget.

        view = hx.viz.GraphView(loss, model=model)   # display it: the cell's last line
        with view.watch():                           # nodes light up as backward runs
            loss.backward()
        view.save_svg("graph.svg")

    ``tensor`` may also be a list of tensors or a ready :class:`Graph`. Nodes are named
    after the caller's variables: ``names`` ({tensor: "name"}, or torchviz-style
    {"name": tensor}; a Module in it names its parameters "name.path") and ``model``
    (its parameters by qualified name) say so explicitly; otherwise the tensors and
    modules in the calling code's variables are used (pass ``names={}`` for none).
    ``direction`` is "LR", "TB" or "auto" (whichever fits the page better). ``collapse``
    (a module depth, or a list of qualified module names; the collapse menu switches
    it) draws each such module as one box. ``live=True`` keeps watching every backward
    pass until :meth:`close`. The view holds the graph's nodes (and so their saved
    tensors) while it lives.
    """

    def __init__(self, tensor, direction: str = "auto", max_nodes: int = 300, *,
                 names=None, model=None, collapse=None, live: bool = False,
                 interval: float = 0.1):
        import ipywidgets as w

        from ...autograd import graph as build_graph
        from ...autograd.graph import Graph

        if direction not in ("auto", "LR", "TB"):
            raise ValueError(f"GraphView: direction must be 'auto', 'LR' or 'TB', got "
                             f"{direction!r}")
        if isinstance(tensor, Graph):
            self.graph = tensor
        else:
            tensors = tensor if isinstance(tensor, (list, tuple)) else [tensor]
            self.graph = build_graph(*tensors)
        scope = scope_of_caller(2) if names is None else ()
        self.names = resolve_names(self.graph, names, model, scope)
        self.model = model
        self._auto = direction == "auto"
        self.direction = "LR" if self._auto else direction
        self.max_nodes = max_nodes
        self.collapse = self._as_collapse(collapse)
        self.collapsed = None
        self.finished: set = set()
        self.grad_norms: dict = {}
        self.animating = False
        self.selected = None
        self._ids = {n.id for n in self.graph.nodes}
        self.clock = RedrawClock(interval)
        self._remove_observer = None
        self._syncing = False
        self._choices = collapse_choices(self.graph, model)
        self._relayout()

        self.picture = Picture()
        self._direction = w.ToggleButtons(options=[("left → right", "LR"),
                                                   ("top → bottom", "TB")],
                                          value=self.direction,
                                          tooltips=["inputs at the left, the output at "
                                                    "the right", "inputs at the top, the "
                                                    "output at the bottom"],
                                          **TOGGLE_LOOK)
        self._collapse = w.Dropdown(options=self._collapse_options(), value=self.collapse,
                                    description="collapse", layout=w.Layout(width="190px"))
        if len(self._choices) < 2:  # no module in the graph: nothing to collapse
            self._collapse.layout.display = "none"
        self._picker = w.Dropdown(options=self._picker_options(), value=_NO_NODE,
                                  description="node",
                                  layout=w.Layout(width="100%", max_width="420px"))
        self._details = w.HTML()
        self._direction.observe(self._on_direction, names="value")
        self._collapse.observe(self._on_collapse, names="value")
        self._picker.observe(self._on_pick, names="value")
        toolbar = flex_row([self._direction, self._collapse, *self.picture.controls])
        self.widget = w.VBox([toolbar, self._picker, self.picture.html, self._details],
                             layout=w.Layout(width="100%"))
        self.widget.add_class("hx-graph-view")
        self.refresh()
        if live:
            self._remove_observer = self._observe()

    @staticmethod
    def _as_collapse(collapse):
        if collapse is None:
            return 0
        return tuple(collapse) if isinstance(collapse, (list, tuple)) else int(collapse)

    def _drawn(self):
        """The graph as drawn: collapsed modules are single nodes of kind "group"."""
        return self.collapsed.graph if self.collapsed is not None else self.graph

    def _relayout(self) -> None:
        c = self.collapse
        self.collapsed = (collapse_graph(self.graph, list(c) if isinstance(c, tuple) else c,
                                         self.model) if c else None)
        hint = cap_hint(self.graph, self.collapsed)
        if self._auto:
            self.direction, self._layout = choose_direction(
                self._drawn(), self.max_nodes, self.names, hint)
        else:
            self._layout = layout_graph(self._drawn(), self.direction, self.max_nodes,
                                        self.names, hint)

    def _collapse_options(self):
        options = list(self._choices)
        if self.collapse not in [v for _, v in options]:
            label = (", ".join(self.collapse) if isinstance(self.collapse, tuple)
                     else f"depth {self.collapse}")
            options.append((label, self.collapse))
        return options

    def _picker_options(self):
        by_id = self._drawn().by_id()
        return [("(pick a node to see its details)", _NO_NODE)] + [
            (f"{k}: {node_label(by_id[i], self.names)}  {svg.fmt_shape(by_id[i].shape)}", i)
            for k, i in enumerate(self._layout.shown)]

    # -- display -----------------------------------------------------------------------
    def __repr__(self) -> str:
        nodes = self.graph.nodes
        if not nodes:
            return ("GraphView: no autograd graph (the tensor does not require grad; make "
                    "a leaf with requires_grad=True).")
        kinds = {}
        for n in nodes:
            kinds[n.kind] = kinds.get(n.kind, 0) + 1
        fed = {s for s, _ in self.graph.edges}
        ends = [node_label(n, self.names) for n in nodes if n.id not in fed]
        parts = ", ".join(f"{k} {kinds[k]}" for k in ("leaf", "parameter", "op", "output")
                          if kinds.get(k))
        saved = sum(n.saved_bytes for n in nodes)
        return (f"GraphView of {', '.join(ends)}: {len(nodes)} "
                f"node{'s' if len(nodes) != 1 else ''} ({parts}), {len(self.graph.edges)} "
                f"edge{'s' if len(self.graph.edges) != 1 else ''}, saved for backward "
                f"{svg.fmt_bytes(saved)}. Display it in a notebook for the picture, or "
                f"write it with .save_svg('graph.svg').")

    def to_svg(self) -> str:
        """The current picture as an SVG string."""
        return render_graph_svg(self.graph, self.finished, self.direction,
                                animating=self.animating, selected=self.selected,
                                names=self.names, max_nodes=self.max_nodes,
                                layout=self._layout, collapsed=self.collapsed)

    def refresh(self) -> None:
        """Redraw now (live updates wait for the redraw clock; this does not)."""
        self._redraw()

    def _draw(self) -> None:
        self.picture.show(self.to_svg())
        self._details.value = self.details_html(self.selected)

    def _on_direction(self, change) -> None:
        if self._syncing:
            return
        self._auto = False
        self.direction = change["new"]
        self._relayout()
        self.refresh()

    def _on_collapse(self, change) -> None:
        self.set_collapse(change["new"])

    def set_collapse(self, collapse) -> None:
        """Switch collapsing (None or 0, a module depth, or a list of module names) and
        redraw; the node picker follows (a selection that no longer shows is cleared)."""
        self.collapse = self._as_collapse(collapse)
        self._relayout()
        if self._direction.value != self.direction:  # "auto" chose again
            self._syncing = True
            try:
                self._direction.value = self.direction
            finally:
                self._syncing = False
        if self._collapse.value != self.collapse:
            self._collapse.options = self._collapse_options()
            self._collapse.value = self.collapse
        if self.selected not in self._layout.shown:
            self.selected = None
        self._picker.options = self._picker_options()
        self._picker.value = _NO_NODE if self.selected is None else self.selected
        self.refresh()

    def _on_pick(self, change) -> None:
        self.select(None if change["new"] == _NO_NODE else change["new"])

    def select(self, node_id) -> None:
        """Ring node ``node_id`` and show its details (None clears)."""
        self.selected = node_id
        value = _NO_NODE if node_id is None else node_id
        if self._picker.value != value:
            self._picker.value = value
        self.refresh()

    def reveal(self, node_id):
        """Select the graph node ``node_id`` (an ``hx.autograd.graph`` NodeInfo id), or
        the collapsed module box that holds it: whichever is drawn. Returns the id
        selected, or None where neither is drawn (the selection is then kept)."""
        drawn = node_id
        if self.collapsed is not None:
            drawn = self.collapsed.member_of.get(node_id, node_id)
        if drawn not in self._layout.shown:
            return None
        self.select(drawn)
        return drawn

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
            f'<td style="font-family:monospace;overflow-wrap:anywhere">{svg.esc(v)}</td>'
            f'</tr>' for k, v in rows)
        return (f'<div style="font:12px sans-serif;padding:4px;max-width:100%">'
                f'<b>{svg.esc(d["label"])}</b><table style="margin-top:4px">{cells}'
                f'</table></div>')

    # -- live backward -----------------------------------------------------------------
    def _observe(self, slowdown: float = 0.0):
        from ...autograd import add_backward_observer

        def on_event(event, node, norms):
            nid = id(node)
            if nid not in self._ids or event != "finish":
                return
            self.finished.add(nid)
            self.grad_norms[nid] = norms
            if slowdown > 0:
                self.refresh()
                time.sleep(slowdown)
            elif self.clock.due():
                self.refresh()

        return add_backward_observer(on_event)

    @contextmanager
    def watch(self, slowdown: float = 0.0):
        """Animate the backward passes run inside the ``with`` block: each node lights
        up when the engine finishes it (redraws on the redraw clock; ``slowdown`` seconds
        of pause after each node make a small graph's pass visible step by step)."""
        self.finished.clear()
        self.grad_norms.clear()
        self.animating = True
        self.refresh()
        remove = self._observe(slowdown)
        try:
            yield self
        finally:
            remove()
            self.animating = False
            self._settle()

    def close(self) -> None:
        """Stop a ``live=True`` view and close its widgets."""
        if self._remove_observer is not None:
            self._remove_observer()
            self._remove_observer = None
        self.widget.close()
