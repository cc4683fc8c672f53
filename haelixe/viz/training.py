"""TrainingDashboard: loss (per step, smoothed, held-out), learning rate, a sample of
the model's output and the latest text sample, live while training runs.

Pure part: :class:`TrainingHistory` holds the numbers and :func:`render_training_panels`
draws them as SVG panels (loss, learning rate, sample, text). Widget part:
:meth:`TrainingDashboard.update` records one step (cheap); at a fixed step interval it
asks the caller's ``evaluate(model)`` for the held-out loss and ``sample(model)`` for a
prediction, and it redraws on the redraw clock: at most every ``interval`` seconds and
at least once a second while steps come, however fast the machine is. The default
interval, 0.75 s, is for the browser: each redraw ships a fresh SVG that the page parses
and lays out on the same cores the training loop runs on, a cost the kernel never sees.

The dashboard knows nothing of the model or the task: what to evaluate, what to sample
and the baseline to beat come from the caller (``haelixe.denoise.dashboard_hooks()``
gives the denoiser's).
"""

from __future__ import annotations

import re
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from . import svg
from .chart import Axes, dot_swatch, line_swatch
from .clock import RedrawClock
from .display import LiveWidget, Picture

__all__ = ["TrainingHistory", "render_training_panels", "render_training_svg",
           "TrainingDashboard"]

PANEL_H = 250
LOSS_W, LR_W, SAMPLE_W, TEXT_W = 430, 300, 400, 560
_SMOOTH = 0.05  # weight of the newest loss in the smoothed curve


@dataclass
class TrainingHistory:
    """Everything the dashboard draws, as plain numbers."""

    steps: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    smooth: list = field(default_factory=list)  # bias-corrected moving average of loss
    lr: list = field(default_factory=list)
    heldout_steps: list = field(default_factory=list)
    heldout: list = field(default_factory=list)
    baseline: float | None = None  # a loss to beat (e.g. predicting the noisy input)
    baseline_label: str = "baseline"
    loss_label: str = "loss"
    total_steps: int | None = None
    lr_plan: object = None  # optional (steps, lrs): the planned schedule, drawn dashed
    sample: dict | None = None  # {"step", "input", "target", "prediction", ...}
    texts: list = field(default_factory=list)  # [(step, text)], newest last
    _acc: float = field(default=0.0, repr=False)
    _weight: float = field(default=0.0, repr=False)

    def record(self, step: int, loss: float, lr: float) -> None:
        self.steps.append(step)
        self.loss.append(loss)
        self.lr.append(lr)
        self._acc = (1 - _SMOOTH) * self._acc + _SMOOTH * loss
        self._weight = (1 - _SMOOTH) * self._weight + _SMOOTH
        self.smooth.append(self._acc / self._weight)

    def record_heldout(self, step: int, value: float) -> None:
        if not self.heldout_steps or self.heldout_steps[-1] != step:
            self.heldout_steps.append(step)
            self.heldout.append(float(value))

    def record_text(self, step: int, text: str, keep: int = 4) -> None:
        self.texts.append((int(step), str(text)))
        del self.texts[:-keep]


# -- drawing -----------------------------------------------------------------------------

def _xmax(h) -> float:
    return max(h.total_steps or 0, h.steps[-1] if h.steps else 1, 1)


def _loss_panel(h) -> str:
    vals = [v for v in (*h.loss, *h.heldout, h.baseline) if v is not None and v > 0]
    lo, hi = (min(vals), max(vals)) if vals else (1e-3, 1.0)
    # a log axis for losses that span decades (an MSE); within one decade (a
    # cross-entropy of 2 to 4.6) a log axis would stretch to the next power of ten
    log = hi > 10 * lo
    span = (lo / 1.3, hi * 1.3) if log else (lo - 0.08 * (hi - lo), hi + 0.08 * (hi - lo))
    ax = Axes(LOSS_W, PANEL_H, (0, _xmax(h)), span, log=log, title=h.loss_label,
              xlabel="step")
    legend = [("train", line_swatch(svg.SERIES_RAW, width=1)),
              ("smoothed", line_swatch(svg.SERIES_TARGET)),
              ("held-out", line_swatch(svg.SERIES_PREDICTION, width=1.6))]
    if h.baseline is not None:
        legend.append((h.baseline_label, line_swatch(svg.MUTED, "4 3", 1)))
    parts = [ax.frame(legend)]
    if h.steps:
        parts.append(ax.line(h.steps, h.loss, svg.SERIES_RAW, 0.9, cls="train"))
        parts.append(ax.line(h.steps, h.smooth, svg.SERIES_TARGET, 1.8, cls="smooth"))
    else:
        parts.append(ax.message("waiting for the first step"))
    parts.append(ax.hline(h.baseline, svg.MUTED, cls="baseline"))
    if h.heldout:
        parts.append(ax.line(h.heldout_steps, h.heldout, svg.SERIES_PREDICTION, 1.6,
                             cls="heldout"))
        parts.append(ax.dots(h.heldout_steps, h.heldout, svg.SERIES_PREDICTION, 2.8,
                             cls="heldout-points"))
    return svg.document(LOSS_W, PANEL_H, "".join(parts), "hx-training hx-training-loss",
                        data_step=h.steps[-1] if h.steps else 0,
                        data_heldout_points=len(h.heldout))


def _lr_panel(h) -> str:
    plan = h.lr_plan
    lrs = list(h.lr) + (list(plan[1]) if plan is not None else [])
    ax = Axes(LR_W, PANEL_H, (0, _xmax(h)), (0, max(lrs, default=1e-3) * 1.1 or 1),
              title="learning rate", xlabel="step")
    legend = [("used", line_swatch(svg.SERIES_TARGET))]
    if plan is not None:
        legend.append(("planned", line_swatch(svg.FAINT, "4 3", 1.2)))
    parts = [ax.frame(legend)]
    if plan is not None:
        parts.append(ax.line(plan[0], plan[1], svg.FAINT, 1.2, dash="4 3", cls="plan"))
    if h.steps:
        parts.append(ax.line(h.steps, h.lr, svg.SERIES_TARGET, 1.8, cls="lr"))
    return svg.document(LR_W, PANEL_H, "".join(parts), "hx-training hx-training-lr")


def _sample_panel(h) -> str:
    s = h.sample
    if s is None:
        ax = Axes(SAMPLE_W, PANEL_H, (0, 1), (0, 1), title="sample", xlabel="position")
        body = ax.frame() + ax.message("a sample comes with the first evaluation")
        return svg.document(SAMPLE_W, PANEL_H, body, "hx-training hx-training-sample")
    labels = s.get("labels", ("input", "target", "prediction"))
    series = [np.asarray(s[k], dtype=np.float64).reshape(-1)
              for k in ("input", "target", "prediction") if s.get(k) is not None]
    vals = np.concatenate(series) if series else np.zeros(1)
    pad = 0.08 * (vals.max() - vals.min() + 1e-9)
    n = max(len(a) for a in series) if series else 1
    ax = Axes(SAMPLE_W, PANEL_H, (0, n - 1), (vals.min() - pad, vals.max() + pad),
              title=f"{s.get('title', 'sample')} (step {s['step']})", xlabel="position")
    legend = [(labels[0], dot_swatch(svg.SERIES_INPUT)),
              (labels[1], line_swatch(svg.SERIES_TARGET, width=2)),
              (labels[2], line_swatch(svg.SERIES_PREDICTION, "6 4", 2))]
    parts = [ax.frame(legend)]
    if s.get("input") is not None:
        a = np.asarray(s["input"], dtype=np.float64).reshape(-1)
        parts.append(ax.dots(np.arange(len(a)), a, svg.SERIES_INPUT, 2.4, cls="input"))
    if s.get("target") is not None:
        a = np.asarray(s["target"], dtype=np.float64).reshape(-1)
        parts.append(ax.line(np.arange(len(a)), a, svg.SERIES_TARGET, 2, cls="target"))
    if s.get("prediction") is not None:
        a = np.asarray(s["prediction"], dtype=np.float64).reshape(-1)
        parts.append(ax.line(np.arange(len(a)), a, svg.SERIES_PREDICTION, 2, dash="6 4",
                             cls="prediction"))
    return svg.document(SAMPLE_W, PANEL_H, "".join(parts), "hx-training hx-training-sample")


def wrap_words(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces; a word longer
    than a line is cut. Every character is kept (spaces end the line they close)."""
    lines, line = [], ""
    for word in re.split(r"(?<= )", text):  # each piece keeps its trailing space
        while len(word.rstrip(" ")) > width:  # a word longer than a line
            if line:
                lines.append(line)
                line = ""
            lines.append(word[:width])
            word = word[width:]
        if len(line) + len(word.rstrip(" ")) > width:
            lines.append(line)
            line = ""
        line += word
    lines.append(line)
    return lines


def _text_panel(h) -> str:
    """The text samples, newest first, wrapped in a monospace block."""
    size, line_h = 11, 15
    per_line = int((TEXT_W - 24) / (size * 0.61))
    parts = [svg.text(12, 18, "text samples", 12.5, svg.INK, weight="600",
                      class_="hx-chart-title")]
    y = 40
    for step, text in reversed(h.texts):
        parts.append(svg.text(12, y, f"step {step}", 10, svg.MUTED))
        y += line_h
        for raw in text.splitlines() or [""]:
            for line in wrap_words(raw, per_line):
                if y > PANEL_H - 8:
                    break
                parts.append(svg.text(12, y, line, size, svg.INK, svg.MONO,
                                      xml_space="preserve", class_="hx-text-sample"))
                y += line_h
        y += 6
        if y > PANEL_H - 8:
            break
    return svg.document(TEXT_W, PANEL_H, "".join(parts), "hx-training hx-training-text")


def render_training_panels(history: TrainingHistory, *, sample: bool = True) -> list[str]:
    """The dashboard as SVG panels: loss (log scale: per step, smoothed, held-out points
    at their steps, the baseline), learning rate (used; planned when known), the latest
    sample (when ``sample``) and the latest text samples (when there are any)."""
    panels = [_loss_panel(history), _lr_panel(history)]
    if sample:
        panels.append(_sample_panel(history))
    if history.texts:
        panels.append(_text_panel(history))
    return panels


def render_training_svg(history: TrainingHistory, *, sample: bool = True) -> str:
    """The panels side by side in one SVG (for saving)."""
    return svg.side_by_side(render_training_panels(history, sample=sample), "hx-training")


# -- the widget --------------------------------------------------------------------------

class TrainingDashboard(LiveWidget):
    """Live training curves, one call per step.

        dash = hx.viz.TrainingDashboard(total_steps=600, **hx.denoise.dashboard_hooks())
        dash                                            # display it
        hx.denoise.train(..., on_step=dash.update)      # or dash(step, loss, lr, model)
        dash.finish()

    ``update`` records the step. Every ``eval_every`` steps (default: a twelfth of
    ``total_steps``) it calls ``evaluate(model)`` for a point of the held-out curve and
    ``sample(model)`` for the sample panel (a dict of 1-D arrays "input", "target",
    "prediction", with optional "labels" and "title"). ``baseline`` is a loss to beat,
    drawn as a line and reported as given (``baseline_label`` names it). ``show_text``
    shows a text sample (a language model's output). ``lr_plan``: (steps, lrs) of the
    planned schedule. ``memory``: a MemoryView whose timeline gets a mark per step.
    ``now``: the time source (seconds), replaceable for tests.
    """

    static_basis = LR_W

    def __init__(self, total_steps: int | None = None, *, evaluate=None, sample=None,
                 baseline: float | None = None, baseline_label: str = "baseline",
                 loss_label: str = "loss", eval_every: int | None = None, lr_plan=None,
                 memory=None, interval: float = 0.75, now=time.perf_counter):
        import ipywidgets as w

        self.evaluate_fn = evaluate
        self.sample_fn = sample
        self.eval_every = int(eval_every or (max(1, total_steps // 12) if total_steps
                                             else 100))
        self.memory = memory
        self.history = TrainingHistory(total_steps=total_steps, lr_plan=lr_plan,
                                       baseline=None if baseline is None else
                                       float(baseline), baseline_label=baseline_label,
                                       loss_label=loss_label)
        self.now = now
        self.clock = RedrawClock(interval, now=now)
        self._model = None
        self._t0 = None
        self._last_eval = None
        self.picture = Picture()
        self._status = w.HTML(layout=w.Layout(width="100%"))
        self.widget = w.VBox([self._status, *self.picture.controls, self.picture.html],
                             layout=w.Layout(width="100%"))
        self.widget.add_class("hx-training-dashboard")
        self._redraw()

    def __repr__(self) -> str:
        h = self.history
        if not h.steps:
            return "TrainingDashboard, waiting for the first step."
        return (f"TrainingDashboard at {self._status_parts()[0]}: "
                + " · ".join(self._status_parts()[1:]) + ".")

    # -- recording ---------------------------------------------------------------------
    def update(self, step: int, loss: float, lr: float, model=None) -> None:
        """Record one training step; evaluate on the step interval; redraw when due."""
        if self._t0 is None:  # the first step shows at once
            self._t0 = self.now()
            self.clock.restart()
        self.history.record(int(step), float(loss), float(lr))
        if model is not None and (self._model is None or self._model() is not model):
            # Weakly: a dashboard left displayed must not keep a finished model's
            # parameters (GPU buffers included) alive.
            self._model = weakref.ref(model)
        if self.memory is not None:
            self.memory.mark_step(step)
        if int(step) % self.eval_every == 0:
            self.evaluate(model)
        if self.clock.due():
            self._redraw()

    __call__ = update  # so the dashboard itself can be passed as on_step

    def show_text(self, step: int, text: str) -> None:
        """Show a text sample (say, what a language model writes at ``step``); the
        panel keeps the latest few."""
        self.history.record_text(step, text)
        if self.clock.due():
            self._redraw()

    def evaluate(self, model=None) -> None:
        """Call ``evaluate`` and ``sample`` on the model now (at the latest step)."""
        model = model or (self._model() if self._model is not None else None)
        h = self.history
        if model is None or not h.steps or self._last_eval == h.steps[-1]:
            return
        step = h.steps[-1]
        self._last_eval = step
        if self.evaluate_fn is not None:
            h.record_heldout(step, float(self.evaluate_fn(model)))
        if self.sample_fn is not None:
            h.sample = {"step": step, **self.sample_fn(model)}

    # -- drawing -----------------------------------------------------------------------
    def panels(self) -> list[str]:
        return render_training_panels(self.history, sample=self.sample_fn is not None
                                      or self.history.sample is not None)

    def to_svg(self) -> str:
        return svg.side_by_side(self.panels(), "hx-training")

    def static_svgs(self) -> list[str]:
        return self.panels()

    def static_extra_html(self) -> str:
        return self.status_html()

    def _status_parts(self) -> list[str]:
        h = self.history
        # three significant digits: what a notebook's "{:.4f}" prints for these losses
        parts = [f"step {h.steps[-1]}" + (f"/{h.total_steps}" if h.total_steps else ""),
                 f"loss {h.loss[-1]:.3g}"]
        if h.heldout:
            parts.append(f"held-out {h.heldout[-1]:.3g} (step {h.heldout_steps[-1]})")
        if h.baseline is not None:
            parts.append(f"{h.baseline_label} {h.baseline:.3g}")
        parts.append(f"lr {h.lr[-1]:.3g}")
        if self._t0 is not None and len(h.steps) > 1:
            elapsed = max(self.now() - self._t0, 1e-9)
            rate = (len(h.steps) - 1) / elapsed
            parts.append(f"{rate:.1f} steps/s · {elapsed:.0f} s")
            if h.total_steps and rate > 0 and h.steps[-1] < h.total_steps:
                parts.append(f"about {(h.total_steps - h.steps[-1]) / rate:.0f} s left")
        return parts

    def status_html(self) -> str:
        h = self.history
        if not h.steps:  # the first step builds the model and compiles kernels: seconds
            text = "waiting for the first step (it builds the model and compiles its kernels)"
            done = 0.0
        else:
            text = " · ".join(self._status_parts())
            done = min(h.steps[-1] / h.total_steps, 1.0) if h.total_steps else 0.0
        bar = ""
        if h.total_steps:
            bar = (f'<div style="height:4px;background:{svg.RULE};border-radius:2px;'
                   f'margin-top:3px;max-width:100%"><div class="hx-training-progress" '
                   f'style="height:4px;width:{100 * done:.1f}%;background:'
                   f'{svg.SERIES_TARGET};border-radius:2px"></div></div>')
        return (f'<div class="hx-training-status" style="font:12px {svg.SANS};'
                f'color:{svg.INK};max-width:100%">{svg.esc(text)}{bar}</div>')

    def _draw(self) -> None:
        self.picture.show(self.panels())
        self._status.value = self.status_html()

    def refresh(self, model=None) -> None:
        """Redraw now (evaluating first when ``model`` is given)."""
        if model is not None:
            self.evaluate(model)
        self._redraw()

    def finish(self, model=None) -> None:
        """After the last step: evaluate there (unless done), redraw, and bring the saved
        page's static picture up to date."""
        self.evaluate(model)
        self._settle()
