"""TrainingDashboard: loss (train and held-out), learning rate, and the denoiser's
prediction against the clean and noisy signal, live during training.

Pure part: :class:`TrainingHistory` holds the numbers and :func:`render_training_figure`
draws them as a matplotlib Figure (no pyplot, so nothing global changes and it works
headless). Widget part: :class:`TrainingDashboard.update` records one step (cheap) and,
when the :class:`~haelixe.viz.throttle.Throttle` allows, evaluates the held-out set,
predicts one example and redraws into an ``ipywidgets.Image``.
"""

from __future__ import annotations

import io
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from . import svg
from .throttle import Throttle

__all__ = ["TrainingHistory", "render_training_figure", "TrainingDashboard"]

_TRAIN, _SMOOTH, _HELD = "#9cc3ea", "#1f4e8c", svg.WASTE
_LR, _CLEAN, _NOISY, _PRED = svg.TAG_COLORS["optimizer_state"], "#2f8f5b", "#9aa5b1", \
    svg.WASTE


@dataclass
class TrainingHistory:
    """Everything the dashboard draws, as plain numbers."""

    steps: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    lr: list = field(default_factory=list)
    heldout_steps: list = field(default_factory=list)
    heldout: list = field(default_factory=list)
    baseline: float | None = None  # held-out MSE of predicting the noisy input
    total_steps: int | None = None
    lr_plan: object = None  # optional (steps, lrs): the planned schedule, drawn dashed
    prediction: dict | None = None  # {"step", "noisy", "clean", "pred"} 1-D arrays

    def record(self, step: int, loss: float, lr: float) -> None:
        self.steps.append(step)
        self.loss.append(loss)
        self.lr.append(lr)


def _smooth(values, alpha: float = 0.05) -> np.ndarray:
    """Exponential moving average, bias-corrected so the start is not pulled to 0."""
    v = np.asarray(values, dtype=np.float64)
    out, acc, w = np.empty_like(v), 0.0, 0.0
    for k, x in enumerate(v):
        acc = (1 - alpha) * acc + alpha * x
        w = (1 - alpha) * w + alpha
        out[k] = acc / w
    return out


def _thin(x, y, limit: int = 3000):
    """Every k-th point, so drawing stays fast on long runs."""
    k = max(1, len(x) // limit)
    return x[::k], y[::k]


def _style(ax, title: str) -> None:
    ax.set_title(title, fontsize=10.5, loc="left", color=svg.INK, fontweight="bold")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for side in ("left", "bottom"):
        ax.spines[side].set_color("#c0c7cf")
    ax.tick_params(labelsize=8.5, colors=svg.MUTED)
    ax.grid(True, color=svg.RULE, linewidth=0.7)
    ax.set_axisbelow(True)


def _build(fig):
    axes = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.35, 1, 1.2]})
    a_loss, a_lr, a_pred = axes
    art = {"axes": axes}
    _style(a_loss, "loss (MSE)")
    a_loss.set_yscale("log")
    a_loss.set_xlabel("step", fontsize=9, color=svg.MUTED)
    art["train"], = a_loss.plot([], [], color=_TRAIN, lw=0.8, label="train")
    art["smooth"], = a_loss.plot([], [], color=_SMOOTH, lw=1.8, label="train (smoothed)")
    art["held"], = a_loss.plot([], [], color=_HELD, lw=1.6, marker="o", ms=3.5,
                               label="held-out")
    art["base"] = a_loss.axhline(np.nan, color=svg.MUTED, lw=1, ls="--",
                                 label="predict noisy input")
    a_loss.legend(fontsize=8, frameon=False, loc="upper right")
    _style(a_lr, "learning rate")
    a_lr.set_xlabel("step", fontsize=9, color=svg.MUTED)
    art["plan"], = a_lr.plot([], [], color=_LR, lw=1, ls="--", alpha=0.6, label="planned")
    art["lr"], = a_lr.plot([], [], color=_LR, lw=1.8, label="used")
    a_lr.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    a_lr.yaxis.get_offset_text().set_fontsize(8)
    _style(a_pred, "held-out example")
    a_pred.set_xlabel("position in sequence", fontsize=9, color=svg.MUTED)
    art["noisy"], = a_pred.plot([], [], ls="none", marker="o", ms=3, color=_NOISY,
                                label="noisy input")
    art["clean"], = a_pred.plot([], [], color=_CLEAN, lw=1.6, label="clean")
    art["pred"], = a_pred.plot([], [], color=_PRED, lw=1.8, label="prediction")
    a_pred.legend(fontsize=8, frameon=False, loc="upper right", ncols=3)
    fig._hx_artists = art
    return art


def render_training_figure(history: TrainingHistory, fig=None):
    """Draw ``history`` as a matplotlib Figure of three panels: loss (log scale: train,
    its moving average, held-out points, the predict-the-noisy-input line), learning
    rate (used, and planned when known) and one held-out prediction. Pass the Figure of
    an earlier call as ``fig`` to update it in place (faster than building anew)."""
    from matplotlib.figure import Figure

    if fig is None:
        # Fixed margins: a layout engine would re-measure every label on every redraw.
        fig = Figure(figsize=(11.5, 3.3), dpi=96)
        fig.subplots_adjust(left=0.055, right=0.99, bottom=0.15, top=0.9, wspace=0.2)
    art = getattr(fig, "_hx_artists", None) or _build(fig)
    a_loss, a_lr, a_pred = art["axes"]
    h = history
    steps = np.asarray(h.steps, dtype=np.float64)
    xmax = max(h.total_steps or 0, steps[-1] if len(steps) else 1, 1)
    if len(steps):
        loss = np.asarray(h.loss, dtype=np.float64)
        art["train"].set_data(*_thin(steps, loss))
        art["smooth"].set_data(*_thin(steps, _smooth(loss)))
        art["lr"].set_data(*_thin(steps, np.asarray(h.lr, dtype=np.float64)))
    art["held"].set_data(h.heldout_steps, h.heldout)
    art["base"].set_ydata([h.baseline if h.baseline is not None else np.nan] * 2)
    if h.lr_plan is not None:
        art["plan"].set_data(*h.lr_plan)
    ys = [v for v in (*h.loss, *h.heldout, h.baseline) if v is not None and v > 0]
    if ys:
        lo, hi = min(ys), max(ys)
        a_loss.set_ylim(lo / 1.3, hi * 1.3)
    for ax in (a_loss, a_lr):
        ax.set_xlim(0, xmax)
    lrs = list(h.lr) + (list(h.lr_plan[1]) if h.lr_plan is not None else [])
    if lrs:
        a_lr.set_ylim(0, max(lrs) * 1.1 or 1)
    p = h.prediction
    if p is not None:
        t = np.arange(len(p["clean"]))
        art["noisy"].set_data(t, p["noisy"])
        art["clean"].set_data(t, p["clean"])
        art["pred"].set_data(t, p["pred"])
        vals = np.concatenate([p["noisy"], p["clean"], p["pred"]])
        pad = 0.35 * (vals.max() - vals.min() + 1e-9)
        a_pred.set_xlim(-0.5, len(t) - 0.5)
        a_pred.set_ylim(vals.min() - 0.1 * pad, vals.max() + pad)
        a_pred.set_title(f"held-out example (step {p['step']})", fontsize=10.5, loc="left",
                         color=svg.INK, fontweight="bold")
    return fig


def _figure_png(fig) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    buf = io.BytesIO()
    canvas.print_png(buf)
    return buf.getvalue()


class TrainingDashboard:
    """Live training curves for the denoiser, one call per step.

        dash = hx.viz.TrainingDashboard(total_steps=3000)
        dash                                            # display it
        hx.denoise.train(..., on_step=dash.update)      # or dash(step, loss, lr, model)
        dash.finish()

    ``update`` records the step; every redraw (throttled to ``interval`` seconds and to
    ``budget`` of the wall time, evaluation included) also measures the held-out MSE and
    predicts one held-out sequence. heldout: (noisy, clean) arrays, None for the first
    ``heldout_size`` sequences of the sine task's held-out set, or False for none.
    lr_plan: (steps, lrs) of the planned schedule. memory: a MemoryView whose timeline
    gets a mark per step.
    """

    def __init__(self, total_steps: int | None = None, *, heldout=None,
                 heldout_size: int = 64, example: int = 0, lr_plan=None, dtype: str = "f32",
                 interval: float = 0.5, budget: float = 0.02, memory=None):
        import ipywidgets as w

        if heldout is None:
            from ..data.sine import heldout_set

            noisy, clean = heldout_set()
            heldout = (noisy[:heldout_size], clean[:heldout_size])
        self.heldout = heldout if heldout is not False else None
        self.example = example
        self.dtype = dtype
        self.memory = memory
        self.history = TrainingHistory(total_steps=total_steps, lr_plan=lr_plan)
        if self.heldout is not None:
            noisy, clean = self.heldout
            self.history.baseline = float(np.mean((noisy.astype(np.float64) - clean) ** 2))
        self.throttle = Throttle(interval, budget)
        self._model = None
        self._fig = None
        self._t0 = None
        self._image = w.Image(format="png", layout=w.Layout(max_width="100%"))
        self._status = w.HTML()
        self.widget = w.VBox([self._status, self._image])
        # Draw the empty axes now. The first draw pays for loading fonts; the second
        # measures a redraw, doubled as the first estimate because a redraw in training
        # also evaluates the model and draws more points.
        self._fig = render_training_figure(self.history)
        self._image.value = _figure_png(self._fig)
        self.refresh()
        self.throttle.last_cost *= 2

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def update(self, step: int, loss: float, lr: float, model=None) -> None:
        """Record one training step; redraw when the throttle allows."""
        if self._t0 is None:
            self._t0 = time.perf_counter()
        self.history.record(int(step), float(loss), float(lr))
        if model is not None and (self._model is None or self._model() is not model):
            # Weakly: a dashboard left displayed must not keep a finished model's
            # parameters (GPU buffers included) alive.
            self._model = weakref.ref(model)
        if self.memory is not None:
            self.memory.mark_step(step)
        if self.throttle.due():
            self.refresh()

    __call__ = update  # so the dashboard itself can be passed as on_step

    def evaluate(self, model=None) -> None:
        """Measure the held-out MSE and predict the example sequence now."""
        model = model or (self._model() if self._model is not None else None)
        if model is None or self.heldout is None or not self.history.steps:
            return
        from ..denoise import evaluate

        noisy, clean = self.heldout
        device = next(iter(model.parameters())).device
        step = self.history.steps[-1]
        if not self.history.heldout_steps or self.history.heldout_steps[-1] != step:
            self.history.heldout_steps.append(step)
            self.history.heldout.append(evaluate(model, noisy, clean, device, self.dtype))
        self.history.prediction = {"step": step, **self._predict(model, device)}

    def _predict(self, model, device) -> dict:
        import haelixe as hx

        noisy, clean = self.heldout
        k = self.example % len(noisy)
        was_training = model.training
        model.eval()
        try:
            with hx.no_grad():
                x = hx.from_numpy(np.ascontiguousarray(noisy[k:k + 1])).to(device)
                pred = model(x).float().cpu().numpy().reshape(-1)
        finally:
            model.train(was_training)
        return {"noisy": noisy[k].reshape(-1), "clean": clean[k].reshape(-1),
                "pred": pred.astype(np.float64)}

    def figure(self):
        """The current picture as a new matplotlib Figure (pure; for tests and export)."""
        return render_training_figure(self.history)

    def status_html(self) -> str:
        h = self.history
        if not h.steps:
            return '<span style="color:#616e7c;font:12px sans-serif">waiting for step 1'
        parts = [f"step {h.steps[-1]}" + (f"/{h.total_steps}" if h.total_steps else ""),
                 f"loss {h.loss[-1]:.4g}"]
        if h.heldout:
            parts.append(f"held-out {h.heldout[-1]:.4g}")
        if h.baseline is not None:
            parts.append(f"noise {h.baseline:.4g}")
        parts.append(f"lr {h.lr[-1]:.3g}")
        if self._t0 is not None and len(h.steps) > 1:
            rate = (len(h.steps) - 1) / max(time.perf_counter() - self._t0, 1e-9)
            parts.append(f"{rate:.1f} steps/s")
        return (f'<span style="font:12px sans-serif;color:#1f2933">{" · ".join(parts)}'
                f'</span>')

    def refresh(self, model=None) -> None:
        """Evaluate and redraw now (not throttled)."""
        with self.throttle.timing():
            self.evaluate(model)
            self._fig = render_training_figure(self.history, self._fig)
            self._image.value = _figure_png(self._fig)
            self._status.value = self.status_html()

    def finish(self, model=None) -> None:
        """The final redraw after the last step (throttling may have skipped it)."""
        self.refresh(model)

    def save_png(self, path) -> None:
        with open(path, "wb") as f:
            f.write(_figure_png(self.figure()))
