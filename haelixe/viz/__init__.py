"""Notebook widgets that show what the engine does: the autograd graph, the allocator's
bins, stride layouts and training curves.

    import haelixe as hx
    hx.viz.GraphView(loss)          # the autograd DAG; view.watch() animates backward
    hx.viz.MemoryView("gpu")        # allocator bins, tags and timeline, live
    hx.viz.LayoutView(x)            # logical grid beside the storage it strides over
    hx.viz.TrainingDashboard()      # loss, learning rate and predictions, live

Each widget pairs a pure render function (state -> SVG string or matplotlib Figure,
usable headless) with its ipywidgets plumbing; ``widget.widget`` is the ipywidgets box
to place inside other layouts. Nothing is loaded from the network.
"""

from .graph import GraphView, layout_graph, render_graph_svg
from .layout import LayoutCompare, LayoutView, render_layout_svg
from .memory import MemoryTimeline, MemoryView, render_memory_svg
from .throttle import Throttle
from .training import TrainingDashboard, TrainingHistory, render_training_figure

__all__ = [
    "GraphView", "render_graph_svg", "layout_graph",
    "MemoryView", "MemoryTimeline", "render_memory_svg",
    "LayoutView", "LayoutCompare", "render_layout_svg",
    "TrainingDashboard", "TrainingHistory", "render_training_figure",
    "Throttle",
]
