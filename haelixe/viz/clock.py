"""When a live picture redraws: on the wall clock, whatever the machine's speed.

Live widgets record numbers on every event (cheap) and ask :meth:`RedrawClock.due`
whether to redraw. The first call is due at once (a picture never waits for a budget to
build up), then a redraw is due ``interval`` seconds after the last one ended. A redraw
that is slow for this machine stretches the gap to ``slow_factor`` times its own cost,
but never beyond ``max_interval``: as long as the caller asks at least that often (every
training step does), the picture moves at least once per ``max_interval`` seconds on any
machine, and at most once per ``interval``.
"""

from __future__ import annotations

import time


class RedrawClock:
    """Decides when a live picture is redrawn; wrap each redraw in ``with
    clock.timing():`` so its cost is measured. ``max_interval`` defaults to one second
    (or ``interval``, when that is longer). ``now`` is the time source (seconds),
    replaceable for tests."""

    def __init__(self, interval: float = 0.25, max_interval: float | None = None,
                 slow_factor: float = 4.0, now=time.perf_counter):
        if max_interval is None:  # once a second, unless asked for rarer redraws
            max_interval = max(1.0, interval)
        if not 0 < interval <= max_interval:
            raise ValueError(f"RedrawClock: need 0 < interval <= max_interval, got "
                             f"interval={interval}, max_interval={max_interval}")
        self.interval, self.max_interval = interval, max_interval
        self.slow_factor, self.now = slow_factor, now
        self.redraws = 0
        self.last_cost = 0.0
        self.total_cost = 0.0  # seconds spent in all timed redraws
        self._next = None  # time from which a redraw is due; None: due now

    def due(self) -> bool:
        return self._next is None or self.now() >= self._next

    def restart(self) -> None:
        """Make the next :meth:`due` true (a new burst of work starts)."""
        self._next = None

    def timing(self):
        return _Timing(self)

    def _done(self, start: float, end: float) -> None:
        self.last_cost = max(end - start, 0.0)
        self.total_cost += self.last_cost
        self.redraws += 1
        gap = min(max(self.interval, self.slow_factor * self.last_cost), self.max_interval)
        self._next = end + gap


class _Timing:
    __slots__ = ("clock", "start")

    def __init__(self, clock):
        self.clock = clock

    def __enter__(self):
        self.start = self.clock.now()
        return self

    def __exit__(self, *exc):
        self.clock._done(self.start, self.clock.now())
        return False
