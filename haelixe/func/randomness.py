"""vmap's ``randomness``: what a random draw inside a mapped function does.

'error' refuses every draw (PyTorch's default: a draw per slice or one for all is a
choice the caller makes); 'different' lets each slice draw its own values (the slices
run one after another, so they draw in turn from the generator); 'same' gives every
slice the same draws (the default generator's state is put back before each slice)."""

from __future__ import annotations

import contextlib
import threading

from .. import random

MODES = ("error", "different", "same")

_ACTIVE = threading.local()  # the randomness of each vmap running on this thread


def check(randomness) -> None:
    if randomness not in MODES:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', "
                           f"or 'same'. Got {randomness}")


def _modes() -> list:
    if not hasattr(_ACTIVE, "modes"):
        _ACTIVE.modes = []
    return _ACTIVE.modes


def _refuse_in_error_mode() -> None:
    if "error" in _modes():
        raise RuntimeError("vmap: called random operation while in randomness error mode. "
                           "Please either use the 'same' or 'different' randomness flags "
                           "on vmap or perform the randomness operation out of vmap")


@contextlib.contextmanager
def mode(randomness: str):
    """Draws inside follow ``randomness`` (an enclosing vmap's 'error' still refuses)."""
    modes = _modes()
    modes.append(randomness)
    installed = random.draw_guard is None
    if installed:
        random.draw_guard = _refuse_in_error_mode
    try:
        yield
    finally:
        modes.pop()
        if installed:
            random.draw_guard = None


class Slices:
    """Runs before each slice: for 'same', puts the default generator's state back to
    where it was before the first."""

    def __init__(self, randomness: str):
        self.state = random.get_rng_state() if randomness == "same" else None

    def next(self) -> None:
        if self.state is not None:
            random.set_rng_state(self.state)
