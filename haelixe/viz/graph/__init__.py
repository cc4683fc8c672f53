"""GraphView and its parts, one job each: :mod:`.model` (labels, names, collapsing
modules), :mod:`.placement` (layered layout and edge routes), :mod:`.drawing` (SVG) and
:mod:`.widget` (the notebook widget)."""

from .drawing import render_graph_svg
from .model import Collapsed, Group, collapse_choices, collapse_graph, node_label
from .placement import GraphLayout, layout_graph
from .widget import GraphView

__all__ = ["GraphView", "render_graph_svg", "layout_graph", "GraphLayout", "node_label",
           "collapse_graph", "collapse_choices", "Collapsed", "Group"]
