"""TrainingDashboard: the panels hold the recorded numbers; the held-out curve gets a
point at a fixed step interval; redraws follow the clock on fast and slow machines; the
noise it reports is the caller's; labels are never cut; colours match the labs' plots;
ProgressBar follows a loop the same way."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from haelixe.viz import svg
from haelixe.viz.chart import Axes
from haelixe.viz.clock import RedrawClock
from haelixe.viz.progress import ProgressBar
from haelixe.viz.training import (
    TrainingDashboard,
    TrainingHistory,
    render_training_panels,
)

NS = "{http://www.w3.org/2000/svg}"
ROOT = Path(__file__).resolve().parents[1]


class FakeClock:
    """A time source the test moves by hand."""

    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t


def _points(el):
    return [tuple(map(float, p.split(","))) for p in el.get("points").split()]


def _by_class(root, cls, tag="polyline"):
    return next(e for e in root.iter(f"{NS}{tag}") if e.get("class") == cls)


def _history():
    h = TrainingHistory(total_steps=10, baseline=0.09, baseline_label="noise")
    for s in range(1, 11):
        h.record(s, 1.0 / s, 1e-3 * (1 - s / 20))
    h.record_heldout(5, 0.3)
    h.record_heldout(10, 0.2)
    h.sample = {"step": 10, "input": np.ones(8), "target": np.zeros(8),
                "prediction": np.full(8, 0.5)}
    return h


def test_panels_draw_the_history():
    h = _history()
    loss, lr, sample = (ET.fromstring(p) for p in render_training_panels(h))
    assert loss.get("data-step") == "10" and loss.get("data-heldout-points") == "2"
    vals = [(1, 1.0), (10, 0.1)]
    ax = Axes(430, 250, (0, 10), (0.09 / 1.3, 1.0 * 1.3), log=True, title="loss",
              xlabel="step")
    train = _points(_by_class(loss, "train"))
    assert len(train) == 10
    for (step, value), (x, y) in zip(vals, (train[0], train[-1])):
        assert x == pytest.approx(float(ax.px(step)), abs=0.01)
        assert y == pytest.approx(float(ax.py(value)), abs=0.01)
    dots = [(float(c.get("cx")), float(c.get("cy")))
            for c in _by_class(loss, "heldout-points", "g").iter(f"{NS}circle")]
    assert dots == [(pytest.approx(float(ax.px(s)), abs=0.01),
                     pytest.approx(float(ax.py(v)), abs=0.01)) for s, v in [(5, 0.3),
                                                                             (10, 0.2)]]
    base = _by_class(loss, "baseline", "line")
    assert float(base.get("y1")) == pytest.approx(float(ax.py(0.09)), abs=0.01)
    assert len(_points(_by_class(lr, "lr"))) == 10
    pred = _points(_by_class(sample, "prediction"))
    assert len({y for _, y in pred}) == 1 and len(pred) == 8
    assert "(step 10)" in ET.tostring(sample, "unicode")


def test_held_out_points_come_at_a_fixed_step_interval():
    seen = []

    def evaluate(model):
        seen.append(model)
        return 0.5

    dash = TrainingDashboard(total_steps=40, evaluate=evaluate, eval_every=10,
                             baseline=0.25, baseline_label="noise")
    class Model:  # the dashboard only hands it to evaluate
        pass

    model = Model()
    for s in range(1, 41):
        dash.update(s, 1.0, 1e-3, model)
    assert dash.history.heldout_steps == [10, 20, 30, 40] and seen == [model] * 4
    dash.finish()  # step 40 was evaluated already: no second point
    assert dash.history.heldout_steps == [10, 20, 30, 40]
    assert TrainingDashboard(total_steps=600).eval_every == 50  # a twelfth of the run


def test_dashboard_follows_the_denoiser_training_loop():
    from haelixe.denoise import dashboard_hooks, train

    hooks = dashboard_hooks()
    dash = TrainingDashboard(total_steps=20, eval_every=10, interval=60.0, **hooks)
    result = train(epochs=2, steps_per_epoch=10, on_step=dash)
    dash.finish(result["model"])
    h = dash.history
    assert h.steps == list(range(1, 21)) and len(h.loss) == len(h.lr) == 20
    assert h.heldout_steps == [10, 20] and h.heldout[-1] == pytest.approx(
        result["heldout_mse"], rel=1e-6)
    assert h.baseline == result["noise_mse"]  # the noise it reports is the caller's
    assert f"noise {result['noise_mse']:.3g}" in dash._status.value
    assert f"{result['noise_mse']:.4f}" == f"{h.baseline:.4f}"
    assert h.sample["prediction"].shape == (32,) and h.sample["step"] == 20
    assert "step 20/20" in dash._status.value
    assert 'class="hx-training hx-training-loss"' in dash.picture.html.value
    assert "viewBox" in dash.picture.html.value


def test_redraws_follow_the_clock_on_fast_and_slow_machines():
    for seconds_per_step in (0.002, 0.05, 1.7):  # fast, ordinary, very slow
        clock = FakeClock()
        dash = TrainingDashboard(total_steps=10_000, interval=0.25, now=clock)
        drawn, start = [], clock.t
        for s in range(1, 10_001):
            clock.t += seconds_per_step
            before = dash.clock.redraws
            dash.update(s, 1.0 / s, 1e-3)
            if dash.clock.redraws > before:
                drawn.append(clock.t)
            if clock.t - start > 20:
                break
        gaps = np.diff([start] + drawn)
        assert gaps.max() <= max(1.0, seconds_per_step) + 1e-9  # at least once a second
        assert gaps[1:].min() >= min(0.25, seconds_per_step) - 1e-9  # at most 4 a second
        assert drawn[0] == pytest.approx(start + seconds_per_step)  # the first step shows


def test_a_slow_redraw_stretches_the_gap_but_not_beyond_a_second():
    clock = FakeClock()
    c = RedrawClock(0.25, now=clock)
    assert c.due()
    with c.timing():
        clock.t += 0.6  # a redraw that takes 0.6 s on this machine
    clock.t += 0.99
    assert not c.due()
    clock.t += 0.01
    assert c.due()
    with c.timing():
        clock.t += 0.01
    clock.t += 0.25
    assert c.due()  # cheap again: the interval


def _ytick_left_edges(panel):
    root = ET.fromstring(panel)
    return [float(t.get("x")) - svg.text_width(t.text, float(t.get("font-size")))
            for t in root.iter(f"{NS}text") if t.get("class") == "hx-ytick"]


def test_y_labels_are_never_cut():
    empty = TrainingHistory(total_steps=100)
    assert "waiting for the first step" in render_training_panels(empty)[0]
    huge, tiny = TrainingHistory(), TrainingHistory()
    for s in range(1, 5):
        huge.record(s, 3e6 * s, 123.456 * s)
        tiny.record(s, 2e-7 * s, 1e-7 * s)
    for h in (empty, huge, tiny):
        for panel in render_training_panels(h, sample=False):
            edges = _ytick_left_edges(panel)
            assert edges and min(edges) >= 0, (edges, panel[:200])


def test_show_text_draws_the_latest_samples():
    dash = TrainingDashboard(total_steps=10)
    for s in range(1, 8):
        dash.show_text(s, f"sample number {s}\nsecond line")
    panel = ET.fromstring(dash.panels()[-1])
    assert panel.get("class") == "hx-training hx-training-text"
    texts = [t.text for t in panel.iter(f"{NS}text")]
    assert "step 7" in texts and "sample number 7" in texts and "second line" in texts
    assert "step 1" not in texts  # the panel keeps the latest few
    assert len(dash.history.texts) == 4


def test_colours_match_the_labs_plots():
    nb = json.loads((ROOT / "labs" / "05_transformer_denoiser.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    used = dict(re.findall(r'\.plot\((noisy|clean|pred)\[[^\n]*?color="(#[0-9a-fA-F]{6})"',
                           code))
    assert set(used) == {"noisy", "clean", "pred"}, used
    assert used["noisy"].lower() == svg.SERIES_INPUT
    assert used["clean"].lower() == svg.SERIES_TARGET
    assert used["pred"].lower() == svg.SERIES_PREDICTION
    h = _history()
    sample = render_training_panels(h)[2]
    for cls, color in (("target", svg.SERIES_TARGET), ("prediction", svg.SERIES_PREDICTION)):
        assert _by_class(ET.fromstring(sample), cls).get("stroke") == color


def test_repr_and_static_picture():
    dash = TrainingDashboard(total_steps=10, baseline=0.0901, baseline_label="noise")
    assert repr(dash) == "TrainingDashboard, waiting for the first step."
    dash.update(1, 0.5, 1e-3)
    assert repr(dash).startswith("TrainingDashboard at step 1/10: loss 0.5")
    html = dash._repr_mimebundle_()["text/html"]
    assert html.count("<img") == 2 and "noise 0.0901" in html  # loss, lr: no sampler


def test_progress_bar_moves_on_the_clock_and_ends_full():
    clock = FakeClock()
    bar = ProgressBar(label="training", now=clock)
    drawn = bar.clock.redraws
    for s in range(1, 100):
        clock.t += 0.01
        bar(s, 100, 0.5)
    assert 3 <= bar.clock.redraws - drawn <= 5  # about 1 s at most 4 a second
    root = ET.fromstring(bar.to_svg())
    assert root.get("data-step") == "99" and "about 0 s left" in bar.to_svg()
    clock.t += 0.01
    bar(100, 100, 0.25)
    root = ET.fromstring(bar.picture.svg)
    assert root.get("data-step") == "100"
    done = next(r for r in root.iter(f"{NS}rect") if r.get("class") == "hx-progressbar-done")
    assert float(done.get("width")) == pytest.approx(560 - 24)
    assert repr(bar) == "ProgressBar: training step 100/100."


def test_progress_bar_follows_the_denoiser_training_loop():
    from haelixe.denoise import train

    bar = ProgressBar()
    train(epochs=2, steps_per_epoch=5, progress=bar)
    root = ET.fromstring(bar.picture.svg)
    assert (root.get("data-step"), root.get("data-total")) == ("10", "10")
    assert bar.loss is not None and "step 10/10 · loss" in bar.to_svg()


def test_by_default_the_dashboard_redraws_at_most_every_three_quarters_of_a_second():
    # each redraw ships an SVG the browser parses on the cores training runs on
    clock = FakeClock()
    dash = TrainingDashboard(total_steps=10_000, now=clock)
    drawn = []
    for s in range(1, 2001):
        clock.t += 0.005
        before = dash.clock.redraws
        dash.update(s, 1.0 / s, 1e-3)
        if dash.clock.redraws > before:
            drawn.append(clock.t)
    gaps = np.diff(drawn)
    assert gaps.min() >= 0.75 - 1e-9 and gaps.max() <= 1.0 + 1e-9
    assert len(drawn) <= 10 / 0.75 + 1


def test_before_the_first_step_the_status_says_what_it_waits_for():
    dash = TrainingDashboard(total_steps=10)
    assert "compiles its kernels" in dash._status.value



def _ytick_values(panel):
    root = ET.fromstring(panel)
    return [float(t.text) for t in root.iter(f"{NS}text") if t.get("class") == "hx-ytick"]


def test_a_loss_within_one_decade_gets_an_axis_that_fits_it():
    h = TrainingHistory(total_steps=300, baseline=4.56)
    for s, v in enumerate(np.linspace(4.6, 2.1, 300), start=1):
        h.record(s, float(v), 1e-3)
    ticks = _ytick_values(render_training_panels(h)[0])
    assert ticks and max(ticks) <= 5 and min(ticks) >= 1.5  # not stretched to 10 or 20


def test_a_loss_over_decades_keeps_its_log_axis():
    h = TrainingHistory(total_steps=300)
    for s, v in enumerate(np.geomspace(1.0, 0.01, 300), start=1):
        h.record(s, float(v), 1e-3)
    ticks = _ytick_values(render_training_panels(h)[0])
    assert {0.01, 0.1, 1.0} <= set(ticks)


def test_text_samples_wrap_at_spaces_and_keep_every_character():
    from haelixe.viz.training import wrap_words

    text = "Return the number of items in a container. abcdefghijklmnopqrstuvwxyz0123 end"
    lines = wrap_words(text, 12)
    assert "".join(lines) == text
    assert all(len(line.rstrip(" ")) <= 12 for line in lines)
    words = set(text.split())
    fitting = {w for w in words if len(w) <= 12}
    # a word that fits a line is never cut across two
    assert fitting <= {w for line in lines for w in line.split()}
