"""Train the Transformer denoiser end to end (headless).

    python -m haelixe.denoise --task random --epochs 100 --steps-per-epoch 50 --json

Model: Linear(1, 64) -> TransformerBlock(64, 4) -> RMSNorm(64) -> Linear(64, 1), AdamW
(weight decay 0.01) with the learning rate cosine-annealed from 1e-3 to 5e-5 over the
epochs. Prints the final train MSE, the held-out MSE, the trivial baselines, the time to
the first step (model built, kernels compiled or loaded from their cache, one step run)
and steps/s over the steps after it; with --json standard output is one JSON object (the
summary goes to standard error). The training step is captured after its first call and
replayed (hx.capture), on the CPU and on the GPU (--device gpu): the same results, bit
for bit, without the step's Python.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time

import numpy as np

import haelixe as hx

from . import nn
from .data.sine import SineTask, baselines, heldout_set
from .nn import functional as F
from .optim import AdamW, CosineAnnealing


class Denoiser(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4):
        super().__init__()
        self.embed = nn.Linear(1, dim)
        self.block = nn.TransformerBlock(dim, heads)
        self.norm = nn.RMSNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        return self.head(self.norm(self.block(self.embed(x))))


def _autocast(dtype):
    if dtype == "bf16":
        from .amp import autocast

        return autocast(dtype=hx.bfloat16)
    import contextlib

    return contextlib.nullcontext()


def evaluate(model, noisy: np.ndarray, clean: np.ndarray, device, dtype="f32",
             batch: int = 256) -> float:
    """Mean squared error of the model's prediction against the clean signal."""
    total, n = 0.0, 0
    was_training = model.training
    model.eval()
    with hx.no_grad(), _autocast(dtype):
        for i in range(0, len(noisy), batch):
            x = hx.from_numpy(noisy[i:i + batch]).to(device)
            pred = model(x).float().cpu().numpy().astype(np.float64)
            total += float(np.sum((pred - clean[i:i + batch]) ** 2))
            n += pred.size
    model.train(was_training)
    return total / n


def heldout(task: str = "random", batch_size: int | None = None,
            data_path: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The (noisy, clean) set ``train`` reports its held-out and baseline MSEs on: the
    seed batch itself for the "seed" task, else the fixed held-out set."""
    if task == "seed" and not data_path:
        return SineTask("seed", batch_size).eval_set()
    return heldout_set()


def _device_of(model):
    return next(iter(model.parameters())).device


def dashboard_hooks(task: str = "random", dtype: str = "f32", batch_size: int | None = None,
                    data_path: str | None = None, example: int = 0) -> dict:
    """What a training dashboard needs to follow this app, as keyword arguments for
    ``hx.viz.TrainingDashboard``: ``evaluate(model)`` (the held-out MSE, on the set
    ``train`` reports on), ``sample(model)`` (one held-out sequence: noisy input, clean
    target, prediction) and ``baseline``, the MSE of predicting the noisy input (train's
    ``noise_mse``)."""
    noisy, clean = heldout(task, batch_size, data_path)
    k = example % len(noisy)

    def evaluate_model(model) -> float:
        return evaluate(model, noisy, clean, _device_of(model), dtype)

    def sample(model) -> dict:
        was_training = model.training
        model.eval()
        try:
            with hx.no_grad(), _autocast(dtype):
                x = hx.from_numpy(np.ascontiguousarray(noisy[k:k + 1])).to(_device_of(model))
                pred = model(x).float().cpu().numpy().reshape(-1)
        finally:
            model.train(was_training)
        return {"input": noisy[k].reshape(-1), "target": clean[k].reshape(-1),
                "prediction": pred.astype(np.float64), "title": "held-out example",
                "labels": ("noisy", "clean", "denoised")}

    return {"evaluate": evaluate_model, "sample": sample,
            "baseline": baselines(noisy, clean).predict_input,
            "baseline_label": "noise", "loss_label": "loss (MSE)"}


def train(task: str = "random", epochs: int = 100, steps_per_epoch: int = 50,
          device: str = "cpu", dtype: str = "f32", batch_size: int | None = None,
          seed: int = 0, lr_max: float = 1e-3, lr_min: float = 5e-5, progress=None,
          on_step=None, data_path: str | None = None) -> dict:
    """Train and return the result record. ``on_step(step, loss, lr, model)`` is called
    after every step (the training dashboard hooks in here). ``data_path`` trains on a
    dataset file written by ``hx.data.write_sine_dataset`` instead of fresh batches."""
    start = time.perf_counter()
    hx.manual_seed(seed)
    if data_path:
        from .data.sine_file import SineFileTask

        data = SineFileTask(data_path, batch_size or 16, seed)
    else:
        data = SineTask(task, batch_size, seed)
    model = Denoiser().to(device)
    if dtype == "bf16":
        model.to(hx.bfloat16)
    # The step is captured once and replayed (hx.capture): its backend calls run without
    # the Python above them (on the GPU, one submit a step); the optimizer keeps its
    # learning rate and step counts in tensors for that (capturable)
    opt = AdamW(model.parameters(), lr=lr_max, weight_decay=0.01,
                master_weights=(dtype == "bf16"), capturable=True)
    sched = CosineAnnealing(opt, total=epochs, lr_max=lr_max, lr_min=lr_min)

    python_steps = 0  # steps whose Python ran (a replay runs none)

    def train_step(x, y):
        nonlocal python_steps
        python_steps += 1
        # every parameter gets a gradient each step: zeroed in place, backward keeps
        # accumulating into the optimizer's flat gradient buffer
        opt.zero_grad(set_to_none=False)
        loss = F.mse_loss(model(x).float(), y)
        loss.backward()
        opt.step()
        return loss

    captured = hx.capture(train_step, device=device)
    total_steps = epochs * steps_per_epoch
    last_epoch_losses = []
    step = 0
    first_step_at = None
    with _autocast(dtype):
        for _epoch in range(epochs):
            last_epoch_losses = []
            for _ in range(steps_per_epoch):
                noisy, clean = data.batch()
                loss = captured(noisy, clean)  # (host batches go into its static inputs)
                value = loss.item()
                last_epoch_losses.append(value)
                step += 1
                if first_step_at is None:
                    first_step_at = time.perf_counter()
                if on_step is not None:
                    on_step(step, value, opt.lr, model)
                if progress is not None:
                    progress(step, total_steps, value)
            sched.step()
    end = time.perf_counter()
    eval_noisy, eval_clean = heldout(task, batch_size, data_path)
    base = baselines(eval_noisy, eval_clean)
    return {
        "task": task,
        "final_mse": float(np.mean(last_epoch_losses)),
        "heldout_mse": evaluate(model, eval_noisy, eval_clean, device, dtype),
        "noise_mse": base.predict_input,
        "zero_mse": base.predict_zero,
        # the training loop's speed: the first step (kernel compilation or cache loads,
        # first allocations) is reported on its own
        "steps_per_sec": (total_steps - 1) / (end - first_step_at) if total_steps > 1
        and end > first_step_at else math.nan,
        "first_step_s": (first_step_at - start) if first_step_at is not None else math.nan,
        "epochs": epochs,
        "steps": total_steps,
        "device": str(device),
        "dtype": dtype,
        "parameters": model.num_parameters(),
        # steps whose Python ran: the warm-up and the two recorded ones (the rest were
        # replayed)
        "python_steps": python_steps,
        "model": model,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m haelixe.denoise", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=["seed", "random"], default="random")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--steps-per-epoch", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=None,
                   help="default 4 for seed (its fixed batch), 16 for random")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", metavar="PATH", default=None,
                   help="train from a dataset directory (hx.data.write_sine_dataset)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout (the summary on stderr)")
    args = p.parse_args(argv)

    from .progress import TerminalProgress

    with TerminalProgress(args.epochs * args.steps_per_epoch) as bar:
        result = train(args.task, args.epochs, args.steps_per_epoch, args.device,
                       args.dtype, args.batch_size, args.seed, progress=bar.update,
                       data_path=args.data)
    result.pop("model")
    # with --json, stdout carries the JSON object alone; the summary goes to stderr
    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout)
    say(f"task {result['task']} on {result['device']} ({result['dtype']}), "
        f"{result['steps']} steps")
    say(f"final train MSE     {result['final_mse']:.4g}")
    say(f"held-out MSE        {result['heldout_mse']:.4g}")
    say(f"predict-input MSE   {result['noise_mse']:.4g}   (the noise itself)")
    say(f"predict-zero MSE    {result['zero_mse']:.4g}")
    say(f"first step          {result['first_step_s']:.2f} s   (model, kernels, one step)")
    say(f"steps/s             {result['steps_per_sec']:.1f}   (after the first step)")
    replayed = result["steps"] - result["python_steps"]
    if replayed:
        say(f"replayed steps      {replayed} of {result['steps']}   (hx.capture)")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
