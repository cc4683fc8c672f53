"""Reverse-mode automatic differentiation over a graph built per forward pass."""

from . import functional
from .api import backward, grad
from .engine import add_backward_observer
from .function import AccumulateGrad, Function, SavedTensorError
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .graph import Graph, NodeInfo, graph
from .mode import detect_anomaly, enable_grad, is_grad_enabled, no_grad, set_grad_enabled

__all__ = [
    "functional", "backward", "grad", "add_backward_observer", "AccumulateGrad", "Function",
    "SavedTensorError", "GradcheckError", "gradcheck", "gradgradcheck", "Graph", "NodeInfo",
    "graph", "detect_anomaly", "enable_grad", "is_grad_enabled", "no_grad",
    "set_grad_enabled",
]
