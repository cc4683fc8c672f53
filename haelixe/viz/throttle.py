"""Redraw throttling that keeps a live widget's cost a small share of the wall clock.

Live widgets record numbers on every event (cheap) and redraw only when
:meth:`Throttle.due` says so: never more often than ``interval`` seconds, and never so
often that drawing takes more than ``budget`` of the elapsed time (a redraw that took
50 ms with a 2% budget waits at least 2.5 s for the next). The clock starts at the first
``due()`` call, so a short burst of work pays for no redraw at all; a final explicit
refresh shows where it ended.
"""

from __future__ import annotations

import time


class Throttle:
    """Decides when a live picture may be redrawn.

    ``due()`` is False on its first call (which starts the clock), then True at most
    once per ``interval`` seconds and after at least ``last_cost / budget`` seconds since
    the last redraw; wrap each redraw in ``with throttle.timing():`` so its cost is
    measured (a redraw before the clock starts, say a widget's first picture, seeds the
    cost estimate).
    """

    def __init__(self, interval: float = 0.25, budget: float = 0.02):
        if interval < 0 or not 0 < budget <= 1:
            raise ValueError(f"Throttle: need interval >= 0 and 0 < budget <= 1, got "
                             f"interval={interval}, budget={budget}")
        self.interval = interval
        self.budget = budget
        self.last_cost = 0.0
        self.total_cost = 0.0  # seconds spent in all timed redraws
        self._next = None  # perf_counter time before which no redraw is due
        self.redraws = 0

    def _gap(self) -> float:
        return max(self.interval, self.last_cost / self.budget)

    def due(self, now: float | None = None) -> bool:
        now = time.perf_counter() if now is None else now
        if self._next is None:
            self._next = now + self._gap()
            return False
        return now >= self._next

    def restart(self) -> None:
        """Start the clock again at the next ``due()`` (a new burst of work)."""
        self._next = None

    def timing(self):
        return _Timing(self)

    def _done(self, start: float, end: float) -> None:
        self.last_cost = end - start
        self.total_cost += self.last_cost
        self.redraws += 1
        if self._next is not None:
            self._next = end + self._gap()


class _Timing:
    __slots__ = ("throttle", "start")

    def __init__(self, throttle):
        self.throttle = throttle

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.throttle._done(self.start, time.perf_counter())
        return False
