"""Optimizers (flat parameter buffers, one pass per step) and learning-rate schedules."""

from ..nn.utils import clip_grad_norm_, clip_grad_value_
from . import lr_scheduler, swa_utils
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .schedule import CosineAnnealing
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "NAdam", "RAdam", "Rprop", "ASGD", "LBFGS", "CosineAnnealing", "lr_scheduler",
           "swa_utils",
           "clip_grad_norm_", "clip_grad_value_"]

_MISSING = {
    "SparseAdam": "Adam (hx.optim.Adam); gradients are dense",
}


def __getattr__(name):
    from ..closest import missing_attribute

    raise missing_attribute(__name__, name, globals(), _MISSING)
