"""Notebook widgets that show what the engine does: the autograd graph, the allocator's
bins, stride layouts and training curves.

    import haelixe as hx
    hx.viz.GraphView(loss)          # the autograd DAG; view.watch() animates backward
    hx.viz.MemoryView("gpu")        # allocator bins, tags and timeline, live
    hx.viz.MemorySnapshotView(snap) # a recorded step's memory by category, its peak
    hx.viz.KernelView(prof)         # a profiled step's kernels, linked to nodes and WGSL
    hx.viz.LayoutView(x)            # logical grid beside the storage it strides over
    hx.viz.TrainingDashboard()      # loss, learning rate and samples, live
    hx.viz.ProgressBar()            # steps, loss and time left of a training loop

Each widget pairs a pure render function (state -> SVG string, usable headless) with its
ipywidgets plumbing; ``widget.widget`` is the ipywidgets box to place inside other
layouts. Every picture fits the output area (or zooms), and a saved notebook shows a
static copy of it before it runs. Widgets read the engine only through its introspection
hooks (``haelixe.autograd.graph``, ``add_backward_observer``, ``haelixe.memory``) and get
anything app-specific (an evaluate function, a sampler) from the caller. Nothing is
loaded from the network.
"""

try:
    import ipywidgets as _ipywidgets  # noqa: F401
except ImportError as _err:
    raise ModuleNotFoundError(
        "haelixe.viz needs the notebook extras (ipywidgets): pip install 'haelixe[lab]'",
        name="ipywidgets") from _err

from .clock import RedrawClock
from .graph import GraphView, layout_graph, render_graph_svg
from .kernels import KernelView, render_kernels_svg
from .layout import LayoutCompare, LayoutView, render_layout_svg
from .memory import MemoryTimeline, MemoryView, render_memory_svg
from .memory_snapshot import MemorySnapshotView, render_snapshot_svg
from .progress import ProgressBar
from .training import TrainingDashboard, TrainingHistory, render_training_svg

__all__ = [
    "GraphView", "render_graph_svg", "layout_graph",
    "MemoryView", "MemoryTimeline", "render_memory_svg",
    "MemorySnapshotView", "render_snapshot_svg", "KernelView", "render_kernels_svg",
    "LayoutView", "LayoutCompare", "render_layout_svg",
    "TrainingDashboard", "TrainingHistory", "render_training_svg",
    "ProgressBar", "RedrawClock",
]
