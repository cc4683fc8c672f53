"""TrainingDashboard: the figure holds the recorded numbers; updates are throttled; it
hooks into the denoiser's training loop with one call per step."""

from __future__ import annotations

import numpy as np
import pytest

from haelixe.viz.training import TrainingDashboard, TrainingHistory, render_training_figure


def test_figure_draws_the_history():
    h = TrainingHistory(total_steps=10, baseline=0.09)
    for s in range(1, 11):
        h.record(s, 1.0 / s, 1e-3 * (1 - s / 20))
    h.heldout_steps, h.heldout = [5, 10], [0.3, 0.2]
    h.prediction = {"step": 10, "noisy": np.ones(8), "clean": np.zeros(8),
                    "pred": np.full(8, 0.5)}
    fig = render_training_figure(h)
    a_loss, a_lr, a_pred = fig.axes
    lines = {ln.get_label(): ln for ln in a_loss.get_lines()}
    np.testing.assert_allclose(lines["train"].get_ydata(), h.loss)
    np.testing.assert_allclose(lines["held-out"].get_xdata(), [5, 10])
    assert lines["predict noisy input"].get_ydata()[0] == pytest.approx(0.09)
    np.testing.assert_allclose(a_lr.get_lines()[1].get_ydata(), h.lr)
    preds = {ln.get_label(): ln for ln in a_pred.get_lines()}
    np.testing.assert_allclose(preds["prediction"].get_ydata(), 0.5)
    assert a_loss.get_xlim() == (0, 10)
    assert render_training_figure(h, fig) is fig  # redraws reuse the figure


def test_dashboard_follows_the_denoiser_training_loop():
    from haelixe.denoise import train

    noisy = np.random.default_rng(0).normal(size=(8, 32, 1)).astype(np.float32)
    dash = TrainingDashboard(total_steps=20, heldout=(noisy, noisy * 0.5), interval=60.0)
    result = train(epochs=2, steps_per_epoch=10, on_step=dash)
    dash.finish(result["model"])
    h = dash.history
    assert h.steps == list(range(1, 21)) and len(h.loss) == len(h.lr) == 20
    assert h.heldout_steps == [20] and h.heldout[-1] > 0  # a short run: finish() only
    assert h.prediction["pred"].shape == (32,)
    assert dash._image.value[:4] == b"\x89PNG"
    assert "step 20/20" in dash._status.value
    assert dash.figure() is not dash._fig


def test_throttle_keeps_redraws_rare():
    dash = TrainingDashboard(total_steps=1000, heldout=False, interval=60.0)
    drawn = dash.throttle.redraws  # the empty picture at construction
    for s in range(1, 500):
        dash.update(s, 1.0 / s, 1e-3)
    assert dash.throttle.redraws == drawn
    dash.throttle._next = 0.0  # as if the budget allowed a redraw now
    dash.update(500, 0.002, 1e-3)
    assert dash.throttle.redraws == drawn + 1
    assert not dash.throttle.due()  # and the next one waits again
    assert len(dash.history.steps) == 500


def test_throttle_keeps_drawing_within_its_budget():
    from haelixe.viz.throttle import Throttle

    th = Throttle(interval=0.0, budget=0.1)
    th.last_cost = 0.05
    t = 100.0
    assert not th.due(t)  # starts the clock
    drawn = 0.0
    while t < 200.0:
        t += 0.01
        if th.due(t):
            th._done(t, t + 0.05)  # each redraw costs 50 ms
            t += 0.05
            drawn += 0.05
    assert drawn <= 0.1 * 100.0 + 0.05 and drawn >= 0.1 * 100.0 * 0.9
