"""The character language model (haelixe.charlm) in Haelixe and in PyTorch (CPU), side by
side in one run: same model, same initial weights (Haelixe's, loaded into PyTorch through
its state dict, tied head included), same batches, same AdamW with weight decay on the
matrices, warm-up then cosine, gradient clipping.

After ``--steps`` steps both losses (the training loss and the validation loss, over the
same fixed batches) are printed with their relative difference, which must stay within 1%.
The training is timed in ``--rounds`` chunks that alternate between the two frameworks, so
that machine noise hits both alike; steps/s is reported as the median and range over the
rounds, after the first step (whose time is reported apart).

    python benchmarks/charlm_vs_torch.py                       # fast size, 300 steps
    python benchmarks/charlm_vs_torch.py --size full --steps 1000
    python benchmarks/charlm_vs_torch.py --tiny --steps 20 --rounds 2   # a check it runs
    python benchmarks/charlm_vs_torch.py --device gpu    # against PyTorch CUDA (TF32 off)

Haelixe runs the app's step as ``python -m haelixe.charlm`` does (captured after its first
call and replayed: charlm.StepRunner), on the CPU and on the GPU; PyTorch its eager step;
both read the loss every step.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from dataclasses import replace

import numpy as np

from haelixe import charlm
from haelixe.data.text import CharCorpus

TOLERANCE = 0.01  # relative difference allowed between the two frameworks' losses
TINY = dict(dim=32, heads=2, layers=1, context=16, batch_size=4, eval_batches=2, warmup=4)


class HaelixeRun:
    """The app's own training step (haelixe.charlm.build and StepRunner)."""

    def __init__(self, cfg, vocab_size, seed=0, device="cpu"):
        self.cfg, self.device = cfg, device
        self.model, self.opt, self.sched = charlm.build(vocab_size, cfg, device, seed)
        self.step = charlm.StepRunner(self.model, self.opt, self.sched, cfg.grad_clip, device)

    def losses(self, batches) -> dict:
        return charlm.estimate_loss(self.model, batches, self.device)

    def state_arrays(self) -> dict:
        return {k: v.numpy().copy() for k, v in self.model.state_dict().items()}


def torch_model(vocab_size, cfg):
    """The same CharLM in PyTorch, under the same state-dict names."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class RoPE(nn.Module):
        def __init__(self, head_dim, seq):
            super().__init__()
            inv = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
            ang = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None, :]
            self.register_buffer("cos", ang.cos().float(), persistent=False)
            self.register_buffer("sin", ang.sin().float(), persistent=False)

        def forward(self, x):
            t, h = x.shape[-2], x.shape[-1] // 2
            cos, sin = self.cos[:t], self.sin[:t]
            x1, x2 = x[..., :h], x[..., h:]
            return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    class Attention(nn.Module):
        def __init__(self, dim, heads, seq):
            super().__init__()
            self.heads, self.hd = heads, dim // heads
            self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
            self.rope = RoPE(self.hd, seq)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
            o = F.scaled_dot_product_attention(self.rope(q), self.rope(k), v, is_causal=True)
            return self.proj(o.transpose(1, 2).reshape(b, t, c))

    class MLP(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

        def forward(self, x):
            return self.fc2(F.gelu(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self, dim, heads, seq):
            super().__init__()
            self.norm1, self.norm2 = nn.RMSNorm(dim, eps=1e-6), nn.RMSNorm(dim, eps=1e-6)
            self.attn, self.mlp = Attention(dim, heads, seq), MLP(dim)

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class CharLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = nn.Embedding(vocab_size, cfg.dim)
            self.blocks = nn.ModuleList([Block(cfg.dim, cfg.heads, cfg.context)
                                         for _ in range(cfg.layers)])
            self.norm = nn.RMSNorm(cfg.dim, eps=1e-6)
            self.head = nn.Linear(cfg.dim, vocab_size, bias=False)
            self.head.weight = self.tok_emb.weight

        def forward(self, idx):
            x = self.tok_emb(idx)
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))

    return CharLM()


class TorchRun:
    """PyTorch's own modules, AdamW, SequentialLR(LinearLR, CosineAnnealingLR) and
    clip_grad_norm_, started from the given state dict (strictly)."""

    def __init__(self, cfg, vocab_size, state: dict, device="cpu"):
        import torch

        self.torch, self.cfg = torch, cfg
        self.device = "cuda" if device == "gpu" else "cpu"
        self.model = torch_model(vocab_size, cfg)
        self.model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()},
                                   strict=True)
        self.model.to(self.device)
        params = list(self.model.parameters())
        self.opt = torch.optim.AdamW(
            [{"params": [p for p in params if p.ndim >= 2], "weight_decay": cfg.weight_decay},
             {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
            lr=cfg.lr, betas=cfg.betas)
        sched = torch.optim.lr_scheduler
        warm = max(1, min(cfg.warmup, cfg.steps - 1))
        self.sched = sched.SequentialLR(self.opt, [
            sched.LinearLR(self.opt, start_factor=1.0 / warm, total_iters=warm),
            sched.CosineAnnealingLR(self.opt, T_max=max(1, cfg.steps - warm),
                                    eta_min=cfg.lr * cfg.min_lr_ratio),
        ], milestones=[warm])

    def _loss(self, x, y):
        to = self.device
        logits = self.model(self.torch.from_numpy(x).to(to))
        return self.torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), self.torch.from_numpy(y).to(to).reshape(-1))

    def step(self, x, y) -> float:
        loss = self._loss(x, y)
        self.opt.zero_grad()
        loss.backward()
        self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        self.sched.step()
        return loss.item()

    def losses(self, batches) -> dict:
        self.model.eval()
        with self.torch.no_grad():
            out = {split: float(np.mean([self._loss(x, y).item() for x, y in pairs]))
                   for split, pairs in batches.items()}
        self.model.train()
        return out


def compare(cfg, corpus, rounds: int = 5, seed: int = 0, log=print, device="cpu") -> dict:
    """Train both for cfg.steps steps on the same batches, timed in alternating rounds;
    returns the losses and the per-round steps/s of each."""
    ours = HaelixeRun(cfg, corpus.vocab_size, seed, device)
    runs = {"haelixe": ours}
    try:
        import torch

        if device == "gpu" and not torch.cuda.is_available():
            raise ImportError("no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False  # (full fp32, as Haelixe's)
        torch.backends.cudnn.allow_tf32 = False
        torch.manual_seed(seed)
        runs["pytorch"] = TorchRun(cfg, corpus.vocab_size, ours.state_arrays(), device)
    except ImportError as err:
        log(f"PyTorch not available ({err}): timing Haelixe alone")
    rng = np.random.default_rng(seed)
    batches = [corpus.batch("train", cfg.batch_size, cfg.context, rng)
               for _ in range(cfg.steps)]
    first_loss, first_s = {}, {}
    for name, run in runs.items():
        t0 = time.perf_counter()
        first_loss[name] = run.step(*batches[0])
        first_s[name] = time.perf_counter() - t0
    from haelixe.backends import cpu_jit

    cpu_jit.wait()  # the rates are the steady state's: the compiled CPU kernels loaded
    rest = batches[1:]
    chunks = [rest[i * len(rest) // rounds:(i + 1) * len(rest) // rounds]
              for i in range(rounds)]
    rates = {name: [] for name in runs}
    for chunk in chunks:
        for name, run in runs.items():
            t0 = time.perf_counter()
            for x, y in chunk:
                run.step(x, y)
            if chunk:
                rates[name].append(len(chunk) / (time.perf_counter() - t0))
    fixed = charlm.eval_batches(corpus, cfg, seed)
    return {"losses": {name: run.losses(fixed) for name, run in runs.items()},
            "first_loss": first_loss, "first_step_s": first_s, "rates": rates,
            "device": device}


def report(cfg, result, log=print) -> bool:
    """Print the comparison; True when every loss is within TOLERANCE of PyTorch's."""
    losses, rates = result["losses"], result["rates"]
    log(f"charlm: dim {cfg.dim}, {cfg.layers} layers x {cfg.heads} heads, context "
        f"{cfg.context}, batch {cfg.batch_size}, {cfg.steps} steps, on the "
        f"{result.get('device', 'cpu')}")
    ok = True
    for split in ("train", "val"):
        line = f"  {split:5s} loss  haelixe {losses['haelixe'][split]:.4f}"
        if "pytorch" in losses:
            theirs = losses["pytorch"][split]
            rel = abs(losses["haelixe"][split] - theirs) / theirs
            ok &= rel <= TOLERANCE
            line += (f"  pytorch {theirs:.4f}  difference {100 * rel:.4f}% "
                     f"({'within' if rel <= TOLERANCE else 'OUTSIDE'} "
                     f"{100 * TOLERANCE:g}%)")
        log(line)
    for name in rates:
        r = rates[name]
        spread = f"{min(r):.1f}-{max(r):.1f}" if r else "n/a"
        med = statistics.median(r) if r else math.nan
        log(f"  {name:8s} {med:8.1f} steps/s (median of {len(r)} rounds, range {spread}); "
            f"first step {result['first_step_s'][name]:.3f} s")
    if "pytorch" in rates and rates["pytorch"] and rates["haelixe"]:
        ratio = statistics.median(rates["haelixe"]) / statistics.median(rates["pytorch"])
        log(f"  ratio haelixe / pytorch (medians): {ratio:.2f}x")
    return ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", choices=sorted(charlm.SIZES), default="fast")
    p.add_argument("--tiny", action="store_true", help="a very small model: checks it runs")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    args = p.parse_args(argv)
    cfg = replace(charlm.SIZES[args.size], steps=args.steps, **(TINY if args.tiny else {}))
    corpus = CharCorpus.from_stdlib()
    ok = report(cfg, compare(cfg, corpus, args.rounds, args.seed, device=args.device))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
