"""The sine-denoising task written to a dataset file and trained from it."""

from __future__ import annotations

import json

import numpy as np

from haelixe.data import MemmapDataset, SineFileTask, random_batch, write_sine_dataset


def test_sine_dataset_matches_the_task_and_is_reproducible(tmp_path):
    write_sine_dataset(tmp_path / "a", n=300, seed=4, chunk=128)
    write_sine_dataset(tmp_path / "b", n=300, seed=4, chunk=128)
    a, b = MemmapDataset(tmp_path / "a"), MemmapDataset(tmp_path / "b")
    assert a.fields == ("inputs", "targets") and len(a) == 300
    assert a.meta["task"] == "sine-random" and a.meta["seed"] == 4
    np.testing.assert_array_equal(a.arrays["inputs"], b.arrays["inputs"])
    # chunk k is random_batch from the generator seeded (seed, k)
    noisy, clean = random_batch(np.random.default_rng([4, 1]), 128)
    np.testing.assert_array_equal(a.arrays["inputs"][128:256], noisy)
    np.testing.assert_array_equal(a.arrays["targets"][128:256], clean)
    assert a.arrays["inputs"].shape == (300, 32, 1)


def test_file_task_cycles_epochs(tmp_path):
    write_sine_dataset(tmp_path / "s", n=40, seed=0)
    task = SineFileTask(tmp_path / "s", batch_size=16, seed=0)
    assert len(task.loader) == 2  # the partial batch of 8 is dropped
    batches = [task.batch() for _ in range(5)]  # runs into the third epoch
    assert all(x.shape == (16, 32, 1) and y.dtype == np.float32 for x, y in batches)
    assert not np.array_equal(batches[0][0], batches[2][0])  # a new order per epoch


def test_denoiser_trains_from_the_file(tmp_path, capsys):
    from haelixe.denoise import main

    write_sine_dataset(tmp_path / "s", n=64, seed=0)
    assert main(["--data", str(tmp_path / "s"), "--epochs", "1", "--steps-per-epoch", "3",
                 "--batch-size", "8", "--json"]) == 0
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert r["steps"] == 3 and np.isfinite(r["final_mse"])
