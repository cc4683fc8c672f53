"""Redraw throttling that keeps a live widget's cost a small share of the wall clock.

Live widgets record numbers on every event (cheap) and redraw only when
:meth:`Throttle.due` says so: never more often than ``interval`` seconds, and only while
the time spent drawing since the clock started stays within ``budget`` of the time
elapsed, counting the next redraw at the cost of the last one (a 50 ms redraw with a 2%
budget comes about every 2.5 s). The account is cumulative, so a redraw that costs more
than expected delays the ones after it. The clock starts at the first ``due()`` call: a
short burst of work pays for no redraw at all, and a final explicit refresh shows where
it ended.
"""

from __future__ import annotations

import time


class Throttle:
    """Decides when a live picture may be redrawn.

    ``due()`` is False on its first call (which starts the clock), then True when at
    least ``interval`` seconds have passed since the last redraw and one more redraw at
    ``last_cost`` keeps the drawing time within ``budget`` of the time since the start.
    Wrap each redraw in ``with throttle.timing():`` so its cost is measured; a redraw
    before the clock starts (a widget's first picture) only seeds the cost estimate.
    """

    def __init__(self, interval: float = 0.25, budget: float = 0.02):
        if interval < 0 or not 0 < budget <= 1:
            raise ValueError(f"Throttle: need interval >= 0 and 0 < budget <= 1, got "
                             f"interval={interval}, budget={budget}")
        self.interval = interval
        self.budget = budget
        self.last_cost = 0.0
        self.total_cost = 0.0  # seconds spent in all timed redraws
        self.redraws = 0
        self._start = None  # perf_counter time the clock started
        self._spent = 0.0  # drawing seconds since the start
        self._next = None  # perf_counter time before which no redraw is due

    def due(self, now: float | None = None) -> bool:
        now = time.perf_counter() if now is None else now
        if self._start is None:
            self._start, self._spent = now, 0.0
            self._next = now + max(self.interval, self.last_cost / self.budget)
            return False
        return now >= self._next

    def restart(self) -> None:
        """Start the clock again at the next ``due()`` (a new burst of work)."""
        self._start = None

    def timing(self):
        return _Timing(self)

    def _done(self, start: float, end: float) -> None:
        self.last_cost = end - start
        self.total_cost += self.last_cost
        self.redraws += 1
        if self._start is not None:
            self._spent += self.last_cost
            self._next = max(end + self.interval,
                             self._start + (self._spent + self.last_cost) / self.budget)


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
