"""Train a character-level language model on the standard library's docstrings (headless).

    python -m haelixe.charlm --steps 300 --device cpu --json
    python -m haelixe.charlm --size full            # the larger model, longer run

Model (nanoGPT-style): token embedding -> pre-norm causal TransformerBlocks (RoPE,
RMSNorm, GELU MLP) -> RMSNorm -> a head whose weight is the embedding's (tied), trained
with cross-entropy and AdamW (weight decay on matrices only), the learning rate warmed
up linearly and then cosine-annealed, gradients clipped to norm 1. The text is every
docstring of a fixed list of standard-library modules, so nothing is downloaded.

Prints the uniform-guess loss ln(vocab), the train and validation loss, the time to the
first step and the steps/s after it, and a sample drawn with temperature and top-k;
with --json standard output is one JSON object (the summary goes to standard error). The
training step is captured after its first call and replayed (hx.capture), on the CPU and
on the GPU (--device gpu): the same results, bit for bit, without the step's Python.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

import haelixe as hx

from . import nn
from .data.text import CharCorpus
from .nn import functional as F
from .optim import AdamW, lr_scheduler


@dataclass(frozen=True)
class Config:
    """Model size and training schedule. ``SIZES`` holds the presets."""

    dim: int = 64
    heads: int = 4
    layers: int = 2
    context: int = 64
    batch_size: int = 16
    steps: int = 300
    lr: float = 3e-3
    min_lr_ratio: float = 0.1  # the cosine ends at lr * min_lr_ratio
    warmup: int = 30
    weight_decay: float = 0.1
    betas: tuple = (0.9, 0.99)
    grad_clip: float = 1.0
    eval_batches: int = 8


SIZES = {
    # trains in seconds on two CPU cores; the loss falls well below ln(vocab)
    "fast": Config(),
    # nanoGPT's small character model, at a context a CPU can afford
    "full": Config(dim=192, heads=6, layers=4, context=128, batch_size=32, steps=3000,
                   lr=1e-3, warmup=100, eval_batches=20),
}


class CharLM(nn.Module):
    """Characters in, next-character logits out: (batch, t) int64 -> (batch, t, vocab)."""

    def __init__(self, vocab_size: int, dim: int = 64, heads: int = 4, layers: int = 2,
                 context: int = 64):
        super().__init__()
        self.vocab_size, self.context = vocab_size, context
        self.tok_emb = nn.Embedding(vocab_size, dim)
        self.blocks = nn.ModuleList([nn.TransformerBlock(dim, heads, causal=True)
                                     for _ in range(layers)])
        self.norm = nn.RMSNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # tied: one parameter under two names
        self._init_weights(layers)

    def _init_weights(self, layers: int) -> None:
        """GPT-2's: weights N(0, 0.02), the projections into the residual stream
        scaled by 1/sqrt(2 * layers), biases zero, norms one."""
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.ndim == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(
                    ("proj.weight", "fc2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    @classmethod
    def from_config(cls, vocab_size: int, cfg: Config) -> CharLM:
        return cls(vocab_size, cfg.dim, cfg.heads, cfg.layers, cfg.context)

    def forward(self, idx):
        x = self.tok_emb(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def lm_loss(logits, targets):
    """Mean cross-entropy of (batch, t, vocab) logits against (batch, t) targets."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def param_groups(model, weight_decay: float) -> list:
    """Weight decay on matrices (linear weights, the tied embedding); none on biases
    and norm scales, as nanoGPT."""
    params = list(model.parameters())
    return [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]


def warmup_cosine(opt, cfg: Config):
    """Linear warm-up from lr / warmup to lr over ``warmup`` steps, then cosine down to
    lr * min_lr_ratio at the last step (PyTorch's SequentialLR of LinearLR and
    CosineAnnealingLR)."""
    warm = max(1, min(cfg.warmup, cfg.steps - 1))
    return lr_scheduler.SequentialLR(opt, [
        lr_scheduler.LinearLR(opt, start_factor=1.0 / warm, total_iters=warm),
        lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, cfg.steps - warm),
                                       eta_min=cfg.lr * cfg.min_lr_ratio),
    ], milestones=[warm])


def lr_plan(cfg: Config) -> tuple[np.ndarray, np.ndarray]:
    """(steps 1..cfg.steps, the learning rate each will use): the schedule, before
    training (a dashboard draws it as the plan)."""
    opt = AdamW([hx.zeros(1, requires_grad=True)], lr=cfg.lr)
    sched = warmup_cosine(opt, cfg)
    lrs = []
    for _ in range(cfg.steps):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    return np.arange(1, cfg.steps + 1), np.array(lrs)


def eval_batches(corpus: CharCorpus, cfg: Config, seed: int) -> dict:
    """The fixed batches the loss is estimated on: the same for every evaluation."""
    rng = np.random.default_rng(seed + 1)
    return {split: [corpus.batch(split, cfg.batch_size, cfg.context, rng)
                    for _ in range(cfg.eval_batches)] for split in ("train", "val")}


def estimate_loss(model, batches: dict, device) -> dict:
    """Mean loss over each split's fixed batches, in eval mode and without a graph."""
    was_training = model.training
    model.eval()
    out = {}
    with hx.no_grad():
        for split, pairs in batches.items():
            losses = [lm_loss(model(hx.from_numpy(x).to(device)),
                              hx.from_numpy(y).to(device)).item() for x, y in pairs]
            out[split] = float(np.mean(losses))
    model.train(was_training)
    return out


def sample_next(logits, temperature: float = 1.0, top_k=None):
    """One draw per row of ``logits`` (batch, vocab), as (batch, 1) int64: the logits
    divided by ``temperature`` (below 1 sharpens, above 1 flattens), all but the
    ``top_k`` largest set to -inf, softmax, one multinomial draw (hx.manual_seed makes it
    repeatable)."""
    if temperature <= 0:
        raise ValueError(f"sample_next: temperature must be > 0, got {temperature}")
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    return hx.multinomial(logits.softmax(-1), 1)


def dashboard_hooks(corpus: CharCorpus, cfg: Config, seed: int = 0) -> dict:
    """What a training dashboard needs to follow this app, as keyword arguments for
    ``hx.viz.TrainingDashboard``: ``evaluate(model)``, the validation loss over the fixed
    batches ``train`` reports on at the end, and the uniform guess ln(vocab) as the
    baseline."""
    val = {"val": eval_batches(corpus, cfg, seed)["val"]}

    def evaluate(model) -> float:
        return estimate_loss(model, val, next(iter(model.parameters())).device)["val"]

    return {"evaluate": evaluate, "baseline": math.log(corpus.vocab_size),
            "baseline_label": f"uniform guess ln {corpus.vocab_size}",
            "loss_label": "cross-entropy"}


def generate(model, idx, max_new_tokens: int, temperature: float = 1.0, top_k=None,
             pick=sample_next):
    """Extend ``idx`` (batch, t) by ``max_new_tokens`` characters, each drawn by
    ``pick(last logits, temperature, top_k)`` from the model's prediction over the last
    ``model.context`` characters."""
    if temperature <= 0:
        raise ValueError(f"generate: temperature must be > 0, got {temperature}")
    was_training = model.training
    model.eval()
    with hx.no_grad():
        for _ in range(max_new_tokens):
            logits = model(idx[:, -model.context:])[:, -1, :]
            idx = hx.cat([idx, pick(logits, temperature, top_k)], dim=1)
    model.train(was_training)
    return idx


def sample(model, corpus: CharCorpus, n_chars: int = 200, prompt: str = "\n",
           temperature: float = 0.8, top_k=10, device=None, pick=sample_next) -> str:
    """``n_chars`` characters sampled after ``prompt``, as text (the prompt excluded)."""
    device = device or next(iter(model.parameters())).device
    start = hx.from_numpy(corpus.encode(prompt).reshape(1, -1)).to(device)
    out = generate(model, start, n_chars, temperature, top_k, pick)
    return corpus.decode(out[0, len(prompt):].cpu().numpy())


def build(vocab_size: int, cfg: Config, device="cpu", seed: int = 0):
    """(model, optimizer, scheduler) for ``cfg``, the weights drawn after
    hx.manual_seed(seed)."""
    hx.manual_seed(seed)
    model = CharLM.from_config(vocab_size, cfg).to(device)
    # the optimizer keeps its learning rate and step counts in tensors, so that train()
    # can capture the step (hx.capture)
    opt = AdamW(param_groups(model, cfg.weight_decay), lr=cfg.lr, betas=cfg.betas,
                capturable=True)
    return model, opt, warmup_cosine(opt, cfg)


def loss_step(model, opt, x, y, grad_clip: float):
    """Forward, backward, clip and AdamW on the batch (x, y) of device tensors; returns
    the loss before the update (a tensor: nothing is read back, so the GPU can capture
    it). The scheduler steps outside."""
    loss = lm_loss(model(x), y)
    # every parameter gets a gradient each step: zeroed in place, backward keeps
    # accumulating into the optimizer's flat gradient buffer
    opt.zero_grad(set_to_none=False)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    opt.step()
    return loss


def train_step(model, opt, sched, x: np.ndarray, y: np.ndarray, grad_clip: float,
               device="cpu") -> float:
    """One step on the batch (x, y): forward, backward, clip, AdamW, schedule. Returns
    the loss before the update."""
    loss = loss_step(model, opt, hx.from_numpy(x).to(device), hx.from_numpy(y).to(device),
                     grad_clip)
    sched.step()
    return loss.item()


class StepRunner:
    """``runner(x, y)``: train_step on host batches, the way train() runs it: the step is
    captured after its first call and replayed (hx.capture), as the denoiser's: its
    backend calls run without its Python (on the GPU, one submit a step), and the index
    checks of the embedding and of cross_entropy are among them."""

    def __init__(self, model, opt, sched, grad_clip: float, device="cpu"):
        self.model, self.opt, self.sched, self.grad_clip = model, opt, sched, grad_clip
        self.device = hx.device(device)
        self.python_steps = 0  # steps whose Python ran (a replay runs none)
        self._captured = hx.capture(self._step, device=self.device)

    def _step(self, x, y):
        self.python_steps += 1
        return loss_step(self.model, self.opt, x, y, self.grad_clip)

    def __call__(self, x: np.ndarray, y: np.ndarray) -> float:
        loss = self._captured(x, y)  # (host batches go into its static inputs)
        self.sched.step()
        return loss.item()


def train(size: str = "fast", steps: int | None = None, device: str = "cpu",
          seed: int = 0, corpus: CharCorpus | None = None, progress=None, on_step=None,
          sample_chars: int = 200, temperature: float = 0.8, top_k=10, **overrides) -> dict:
    """Train a CharLM and return the result record (the model under "model").
    ``overrides`` replace fields of the size's Config (dim=, lr=, batch_size=, ...).
    ``on_step(step, loss, lr, model)`` is called after every step (a dashboard hooks
    in here); ``progress(step, total, loss)`` drives a progress bar."""
    if size not in SIZES:
        raise ValueError(f"charlm: size must be one of {sorted(SIZES)}, got {size!r}")
    cfg = replace(SIZES[size], **overrides, **({"steps": steps} if steps else {}))
    corpus = corpus or CharCorpus.from_stdlib()
    model, opt, sched = build(corpus.vocab_size, cfg, device, seed)
    rng = np.random.default_rng(seed)
    fixed = eval_batches(corpus, cfg, seed)
    run_step = StepRunner(model, opt, sched, cfg.grad_clip, device)
    start = time.perf_counter()
    first_step_s, losses = None, []
    for step in range(1, cfg.steps + 1):
        x, y = corpus.batch("train", cfg.batch_size, cfg.context, rng)
        lr = sched.get_last_lr()[0]
        value = run_step(x, y)
        losses.append(value)
        if first_step_s is None:
            first_step_s = time.perf_counter() - start
            after_first = time.perf_counter()
        if on_step is not None:
            on_step(step, value, lr, model)
        if progress is not None:
            progress(step, cfg.steps, value)
    rest = time.perf_counter() - after_first
    final = estimate_loss(model, fixed, device)
    return {
        "size": size,
        "steps": cfg.steps,
        "device": str(device),
        "vocab_size": corpus.vocab_size,
        "corpus_chars": len(corpus.text),
        "parameters": model.num_parameters(),
        "uniform_loss": math.log(corpus.vocab_size),
        "first_loss": losses[0],
        "train_loss": final["train"],
        "val_loss": final["val"],
        "first_step_s": first_step_s,
        "steps_per_sec": (cfg.steps - 1) / rest if cfg.steps > 1 and rest > 0 else None,
        # all steps on the CPU; on the GPU the warm-up and the two recorded ones (the rest
        # were replayed)
        "python_steps": run_step.python_steps,
        "sample": sample(model, corpus, sample_chars, temperature=temperature, top_k=top_k,
                         device=device) if sample_chars else "",
        "temperature": temperature,
        "top_k": top_k,
        "config": asdict(cfg),
        "model": model,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m haelixe.charlm", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", choices=sorted(SIZES), default="fast",
                   help="fast: seconds on a CPU (default); full: the larger model")
    p.add_argument("--steps", type=int, default=None,
                   help="training steps (default: the size's, fast 300, full 3000)")
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--lr", type=float, default=None, help="peak learning rate")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample-chars", type=int, default=200)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout (the summary on stderr)")
    args = p.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        p.error(f"--steps must be at least 1, got {args.steps}")
    overrides = {k: v for k, v in (("batch_size", args.batch_size), ("lr", args.lr))
                 if v is not None}

    from .progress import TerminalProgress

    total = args.steps or SIZES[args.size].steps
    with TerminalProgress(total) as bar:
        result = train(args.size, args.steps, args.device, args.seed,
                       progress=bar.update, sample_chars=args.sample_chars,
                       temperature=args.temperature, top_k=args.top_k, **overrides)
    result.pop("model")
    rate = result["steps_per_sec"]
    # with --json, stdout carries the JSON object alone; the summary goes to stderr
    say = functools.partial(print, file=sys.stderr if args.json else sys.stdout)
    say(f"charlm ({result['size']}) on {result['device']}: {result['parameters']} "
        f"parameters, vocab {result['vocab_size']}, {result['steps']} steps")
    say(f"uniform guess ln(vocab)  {result['uniform_loss']:.4f}")
    say(f"first-step loss          {result['first_loss']:.4f}")
    say(f"train loss               {result['train_loss']:.4f}")
    say(f"validation loss          {result['val_loss']:.4f}")
    say(f"time to first step       {result['first_step_s']:.2f} s")
    say("steps/s after it         " + (f"{rate:.1f}" if rate is not None else "n/a"))
    if result["python_steps"] < result["steps"]:
        say(f"replayed steps           {result['steps'] - result['python_steps']} of "
            f"{result['steps']}   (hx.capture)")
    say(f"sample (temperature {result['temperature']}, top-k {result['top_k']}):")
    say(result["sample"])
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
