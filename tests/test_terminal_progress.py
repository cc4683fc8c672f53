"""The command-line apps' progress bar measures its rate and time left over the steps after
the slow first one."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("tqdm")

from haelixe.progress import TerminalProgress  # noqa: E402


def test_time_left_is_measured_after_the_slow_first_step(capsys):
    with TerminalProgress(100) as bar:
        time.sleep(0.3)  # the first step: model, kernels, one step
        bar.update(1, 100, 1.0)
        for step in range(2, 11):
            bar.update(step, 100, 0.5)
        shown = bar._bar.format_dict
        assert shown["n"] == 10 and shown["initial"] == 1
        # the clock restarted after the first step: 9 fast steps, not 0.3 s of set-up
        assert shown["elapsed"] < 0.25
    assert "first step=0.3" in capsys.readouterr().err


def test_a_one_step_run_keeps_its_bar():
    with TerminalProgress(1) as bar:
        bar.update(1, 1, 0.5)
        assert bar._bar.format_dict["n"] == 1
