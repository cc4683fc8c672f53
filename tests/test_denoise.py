"""The denoiser end to end: a short run must beat the trivial baselines."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from haelixe.data.sine import baselines, heldout_set, seed_batch
from haelixe.denoise import Denoiser, train


def test_seed_task_baselines_match_the_reference():
    noisy, clean = seed_batch()
    assert noisy.shape == (4, 32, 1)
    b = baselines(noisy, clean)
    assert abs(b.predict_zero - 0.625) < 1e-6
    assert abs(b.predict_input - 0.0849) < 5e-5


def test_random_task_noise_level():
    noisy, clean = heldout_set()
    assert noisy.shape == (256, 32, 1)
    assert abs(baselines(noisy, clean).predict_input - 0.09) < 0.005
    np.testing.assert_array_equal(heldout_set()[0], noisy)  # fixed


def test_model_shape_is_the_reference_architecture():
    m = Denoiser()
    kinds = [type(c).__name__ for c in m.children()]
    assert kinds == ["Linear", "TransformerBlock", "RMSNorm", "Linear"]
    assert (m.embed.in_features, m.embed.out_features) == (1, 64)
    assert m.block.attn.num_heads == 4


def test_short_training_beats_predicting_the_input():
    res = train("random", epochs=4, steps_per_epoch=50)
    # well below the noise itself: the model denoises rather than copies
    assert res["heldout_mse"] < 0.5 * res["noise_mse"], res
    assert res["final_mse"] < 0.5 * res["noise_mse"], res


def test_cli_json_is_alone_on_stdout_and_the_summary_on_stderr():
    out = subprocess.run(
        [sys.executable, "-m", "haelixe.denoise", "--task", "seed", "--epochs", "2",
         "--steps-per-epoch", "10", "--json"], capture_output=True, text=True, check=True)
    record = json.loads(out.stdout)
    assert "held-out MSE" in out.stderr
    for key in ("final_mse", "heldout_mse", "noise_mse", "steps_per_sec", "first_step_s",
                "epochs", "steps", "device", "dtype"):
        assert key in record
    # the first step is timed on its own, and steps/s counts only the steps after it
    assert 0 < record["first_step_s"] < 60 and record["steps_per_sec"] > 0
    assert record["steps"] == 20 and record["device"] == "cpu" and record["dtype"] == "f32"


def _replays_with_the_eager_losses(device):
    """The app captures its step (hx.capture): one warm-up call and two recorded run
    their Python, the rest are replays, and every loss equals that of the same run done
    eagerly, bit for bit."""
    import haelixe as hx
    from haelixe.data.sine import SineTask
    from haelixe.nn import functional as F
    from haelixe.optim import AdamW, CosineAnnealing

    losses = []
    result = train("random", epochs=2, steps_per_epoch=5, device=device, batch_size=4,
                   on_step=lambda step, value, lr, model: losses.append(value))
    assert result["python_steps"] == 3 and result["steps"] == 10

    hx.manual_seed(0)
    data = SineTask("random", 4, 0)
    model = Denoiser().to(device)
    opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, capturable=True)
    sched = CosineAnnealing(opt, total=2, lr_max=1e-3, lr_min=5e-5)
    eager = []
    for _epoch in range(2):
        for _ in range(5):
            noisy, clean = data.batch()
            opt.zero_grad(set_to_none=False)
            loss = F.mse_loss(model(hx.from_numpy(noisy).to(device)).float(),
                              hx.from_numpy(clean).to(device))
            loss.backward()
            opt.step()
            eager.append(loss.item())
        sched.step()
    assert losses == eager
    assert len(set(losses)) == len(losses)  # (ten steps that each changed the model)


def test_cpu_training_replays_its_step_with_the_eager_losses(one_blas_thread):
    _replays_with_the_eager_losses("cpu")


@pytest.mark.gpu
def test_gpu_training_replays_its_step_with_the_eager_losses(be):
    _replays_with_the_eager_losses("gpu")


def test_cli_summary_prints_a_tiny_mse_with_its_precision(monkeypatch, capsys):
    import haelixe.denoise as app

    def trained(*args, **kwargs):
        return {"task": "seed", "device": "cpu", "dtype": "f32", "steps": 2, "model": None,
                "final_mse": 6.6e-7, "heldout_mse": 6.5e-7, "noise_mse": 0.0849,
                "zero_mse": 0.625, "first_step_s": 0.4, "steps_per_sec": 900.0,
                "python_steps": 2}

    monkeypatch.setattr(app, "train", trained)
    app.main(["--task", "seed", "--epochs", "1", "--steps-per-epoch", "2"])
    out = capsys.readouterr().out
    assert "final train MSE     6.6e-07" in out and "held-out MSE        6.5e-07" in out
    assert "predict-zero MSE    0.625" in out
