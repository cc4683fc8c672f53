"""Optimizers and schedules."""

from .adamw import AdamW
from .clip import clip_grad_norm_
from .optimizer import Optimizer
from .schedule import CosineAnnealing
from .sgd import SGD
