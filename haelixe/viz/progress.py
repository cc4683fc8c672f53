"""ProgressBar: how far a long loop has come (step k of N, the latest loss, time spent
and left), redrawn on the redraw clock so a slow loop still moves on the page.

    from haelixe.denoise import train
    result = train(epochs=6, progress=hx.viz.ProgressBar())   # progress(step, total, loss)
"""

from __future__ import annotations

import time

from . import svg
from .clock import RedrawClock
from .display import LiveWidget, Picture

__all__ = ["ProgressBar", "render_progress_svg"]

WIDTH, HEIGHT = 560, 46


def render_progress_svg(step: int, total: int | None, loss: float | None = None,
                        elapsed: float | None = None, label: str = "training") -> str:
    """One bar with the numbers above it (root ``<svg class="hx-progressbar"
    data-step=... data-total=...>``)."""
    words = [f"{label}: step {step}" + (f"/{total}" if total else "")]
    if loss is not None:
        words.append(f"loss {loss:.4g}")
    if elapsed is not None:
        words.append(f"{elapsed:.1f} s")
        if total and step and step < total:
            words.append(f"about {elapsed / step * (total - step):.0f} s left")
    done = min(step / total, 1.0) if total else 0.0
    parts = [svg.text(12, 17, " · ".join(words), 12, svg.INK),
             svg.rect(12, 26, WIDTH - 24, 8, svg.RULE, rx=4),
             svg.rect(12, 26, (WIDTH - 24) * done, 8, svg.SERIES_TARGET, rx=4,
                      class_="hx-progressbar-done")]
    return svg.document(WIDTH, HEIGHT, "".join(parts), "hx-progressbar", data_step=step,
                        data_total=total or "")


class ProgressBar(LiveWidget):
    """A live progress bar for a loop; call it once per step as ``bar(step, total,
    loss)`` (the signature of ``haelixe.denoise.train``'s ``progress``). ``total`` may
    also be given up front. The saved page's static picture shows the end state once the
    last step is reached (or after :meth:`finish`)."""

    def __init__(self, total: int | None = None, label: str = "training", *,
                 interval: float = 0.25, now=time.perf_counter):
        import ipywidgets as w

        self.total, self.label = total, label
        self.step, self.loss = 0, None
        self.now = now
        self.clock = RedrawClock(interval, now=now)
        self._t0 = None
        self.picture = Picture(zoom_buttons=False)
        self.widget = w.VBox([self.picture.html], layout=w.Layout(width="100%"))
        self.widget.add_class("hx-progressbar-view")
        self._redraw()

    def __repr__(self) -> str:
        return (f"ProgressBar: {self.label} step {self.step}"
                + (f"/{self.total}" if self.total else "") + ".")

    def elapsed(self) -> float | None:
        return None if self._t0 is None else self.now() - self._t0

    def __call__(self, step: int, total: int | None = None, loss: float | None = None):
        if self._t0 is None:
            self._t0 = self.now()
        self.step = int(step)
        if total is not None:
            self.total = int(total)
        if loss is not None:
            self.loss = float(loss)
        if self.total and self.step >= self.total:
            self.finish()
        elif self.clock.due():
            self._redraw()

    update = __call__

    def to_svg(self) -> str:
        return render_progress_svg(self.step, self.total, self.loss, self.elapsed(),
                                   self.label)

    def finish(self) -> None:
        """Draw the end state, on the page and in its static copy."""
        self._settle()
