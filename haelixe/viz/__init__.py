"""Notebook widgets that show what the engine does: the autograd graph, the allocator's
bins, stride layouts and training curves.

Each widget pairs a pure render function (state -> SVG string or matplotlib Figure,
usable headless) with its ipywidgets plumbing. Nothing is loaded from the network.
"""

from .graph import GraphView, layout_graph, render_graph_svg

__all__ = ["GraphView", "layout_graph", "render_graph_svg"]
