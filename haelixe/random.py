"""The process-wide random generator behind rand/randn/init and dropout."""

from __future__ import annotations

import numpy as np

_state = {"gen": np.random.default_rng(0)}


def manual_seed(seed: int) -> None:
    """Seed every random draw Haelixe makes (initialisation, rand, dropout, data)."""
    _state["gen"] = np.random.default_rng(int(seed))


def generator() -> np.random.Generator:
    return _state["gen"]
