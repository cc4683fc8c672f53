"""Optimizers (flat parameter buffers, one pass per step) and learning-rate schedules."""

from ..nn.utils import clip_grad_norm_, clip_grad_value_
from . import lr_scheduler
from .adam import Adam, AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .schedule import CosineAnnealing
from .sgd import SGD

_MISSING = {
    "RMSprop": "Adam (hx.optim.Adam), which also scales steps by a running mean of g^2",
    "Adagrad": "Adam (hx.optim.Adam)",
    "Adadelta": "Adam (hx.optim.Adam)",
    "Adamax": "Adam (hx.optim.Adam)",
    "NAdam": "Adam (hx.optim.Adam) or SGD(nesterov=True)",
    "RAdam": "Adam with a LinearLR warm-up (hx.optim.lr_scheduler.LinearLR)",
    "SparseAdam": "Adam (hx.optim.Adam); gradients are dense",
}


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), _MISSING)
