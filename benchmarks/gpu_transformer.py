"""Training steps of a 6-block pre-norm Transformer (dim 512, 8 heads, sequence 512,
batch 16: about 19M parameters, 1.1 TFLOP a step) in Haelixe on the GPU and in PyTorch
(CUDA, TF32 off), side by side in one run: the same model (haelixe.nn's TransformerBlock
and its PyTorch twin, starting from the same weights), the same batches, AdamW, and
``loss.item()`` every step, as real training reads it.

    python benchmarks/gpu_transformer.py --dtype f32     # fp32 both
    python benchmarks/gpu_transformer.py --dtype bf16    # Haelixe: bf16 weights, autocast,
                                                         # F32 master weights; PyTorch:
                                                         # bf16 autocast
    python benchmarks/gpu_transformer.py --dtype f16     # float16 autocast + GradScaler
    python benchmarks/gpu_transformer.py --dtype bf16 --own-f32   # also Haelixe's fp32
                                                         # step, in the same rounds
    python benchmarks/gpu_transformer.py --small         # tiny: a smoke test (lavapipe;
                                                         # PyTorch on the CPU)

The frameworks are timed in alternating rounds so that machine noise hits both alike;
steps/s is reported as the median over rounds with the range in brackets.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import haelixe  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torch_twins import rope_and_block  # a neighbour in benchmarks/

import haelixe as hx
from haelixe import nn
from haelixe.nn import functional as F
from haelixe.optim import AdamW

FULL = dict(blocks=6, dim=512, heads=8, seq=512, batch=16)
SMALL = dict(blocks=2, dim=32, heads=2, seq=16, batch=2)
LR, WEIGHT_DECAY = 3e-4, 0.01


def make_batches(cfg, n, seed=0):
    rng = np.random.default_rng(seed)
    shape = (cfg["batch"], cfg["seq"], cfg["dim"])
    return [(rng.standard_normal(shape, dtype=np.float32),
             rng.standard_normal(shape, dtype=np.float32)) for _ in range(n)]


def haelixe_model(cfg):
    hx.manual_seed(0)
    return nn.Sequential(*[nn.TransformerBlock(cfg["dim"], cfg["heads"])
                           for _ in range(cfg["blocks"])])


def stepper(data, step):
    """run(n) -> the n losses: ``step(x, y)`` (one training step, returning the loss as
    a float: loss.item() every step) over the batches in turn."""
    state = {"i": 0}

    def run(n):
        losses = []
        for _ in range(n):
            x, y = data[state["i"] % len(data)]
            state["i"] += 1
            losses.append(step(x, y))
        return losses

    return run


def haelixe_stepper(model, batches, dtype):
    model = model.to("gpu")
    if dtype == "bf16":
        model = model.to(hx.bfloat16)
    opt = AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY,
                master_weights=dtype == "bf16")
    scaler = hx.amp.GradScaler() if dtype == "f16" else None
    low = {"bf16": hx.bfloat16, "f16": hx.float16}.get(dtype)

    def step(x, y):
        opt.zero_grad()
        with hx.autocast(dtype=low or hx.bfloat16, enabled=low is not None):
            loss = F.mse_loss(model(x), y)
        _backward_and_step(loss, opt, scaler)
        return loss.item()

    return stepper([(hx.from_numpy(x).to("gpu"), hx.from_numpy(y).to("gpu"))
                    for x, y in batches], step)


def _backward_and_step(loss, opt, scaler):
    if scaler is None:
        loss.backward()
        opt.step()
        return
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()


def torch_stepper(hmodel, batches, dtype, cfg, device):
    import torch
    from torch import nn as tnn

    _, Block = rope_and_block()
    model = tnn.Sequential(*[Block(cfg["dim"], cfg["heads"], cfg["seq"])
                             for _ in range(cfg["blocks"])])
    # the same starting weights: haelixe's "0.attn.qkv.weight" is torch's "0.qkv.weight"
    own = {k.replace("attn.", "").replace("mlp.", ""): v
           for k, v in hmodel.state_dict().items()}
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(np.asarray(own[name].float().numpy())))
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    low = {"bf16": torch.bfloat16, "f16": torch.float16}.get(dtype)
    scaler = torch.amp.GradScaler(device) if dtype == "f16" else None

    def step(x, y):
        opt.zero_grad()
        with torch.autocast(device_type=device, dtype=low or torch.bfloat16,
                            enabled=low is not None):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        _backward_and_step(loss, opt, scaler)
        return loss.item()

    return stepper([(torch.from_numpy(x).to(device), torch.from_numpy(y).to(device))
                    for x, y in batches], step)


def torch_device(small: bool):
    """"cuda" with TF32 off, "cpu" for a --small run without CUDA, or None."""
    try:
        import torch
    except ImportError:
        return None
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        return "cuda"
    return "cpu" if small else None


def rounds(runners, steps, n_rounds):
    """Alternating timed rounds; steps/s per round for each runner."""
    rates = {name: [] for name in runners}
    for _ in range(n_rounds):
        for name, run in runners.items():
            t0 = time.perf_counter()
            run(steps)
            rates[name].append(steps / (time.perf_counter() - t0))
    return rates


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", choices=("f32", "bf16", "f16"), default="f32")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--steps", type=int, default=None, help="steps per timed round")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--own-f32", action="store_true",
                    help="with --dtype bf16/f16: time Haelixe's fp32 step in the same "
                         "alternating rounds and report the 16-bit step's ratio to it")
    args = ap.parse_args(argv)
    cfg = SMALL if args.small else FULL
    steps = args.steps or (2 if args.small else 10)
    n_rounds = args.rounds or (2 if args.small else 5)
    warmup = args.warmup or (1 if args.small else 5)

    from haelixe.backends.wgpu.backend import get_backend

    info = get_backend().info
    print(f"adapter: {info['device']} ({info['backend']}); model {cfg}; dtype {args.dtype}",
          flush=True)
    batches = make_batches(cfg, 4)
    hmodel = haelixe_model(cfg)
    print(f"parameters: {hmodel.num_parameters():,}")
    runners = {}
    device = torch_device(args.small)
    if device is not None:
        runners[f"torch ({device})"] = torch_stepper(hmodel, batches, args.dtype, cfg, device)
    runners["haelixe (gpu)"] = haelixe_stepper(hmodel, batches, args.dtype)
    own = "haelixe (gpu, f32)"
    if args.own_f32 and args.dtype != "f32":
        runners[own] = haelixe_stepper(haelixe_model(cfg), batches, "f32")
    first = {name: run(1)[0] for name, run in runners.items()}  # same weights, same batch
    print("first-step loss: " + ", ".join(f"{n} {v:.6f}" for n, v in first.items()))
    for run in runners.values():
        run(warmup)
    rates = rounds(runners, steps, n_rounds)
    report = {"dtype": args.dtype, "config": cfg, "first_loss": first, "steps_per_s": {}}
    for name, r in rates.items():
        med = statistics.median(r)
        report["steps_per_s"][name] = {"median": med, "min": min(r), "max": max(r)}
        print(f"{name:>16}: {med:8.2f} steps/s [{min(r):.2f}-{max(r):.2f}] over "
              f"{n_rounds} rounds of {steps} steps")
    med = {name: r["median"] for name, r in report["steps_per_s"].items()}
    if device is not None:
        report["ratio"] = med["haelixe (gpu)"] / med[f"torch ({device})"]
        print(f"haelixe / torch steps/s: {report['ratio']:.2f}")
    if own in med:
        # per round too: both ran in the same round, so machine drift cancels there
        per_round = [a / b for a, b in zip(rates["haelixe (gpu)"], rates[own])]
        report["ratio_to_own_f32"] = med["haelixe (gpu)"] / med[own]
        print(f"haelixe {args.dtype} / haelixe f32 steps/s: {report['ratio_to_own_f32']:.2f} "
              f"(per round {statistics.median(per_round):.2f} "
              f"[{min(per_round):.2f}-{max(per_round):.2f}])")
    return report


if __name__ == "__main__":
    main()
