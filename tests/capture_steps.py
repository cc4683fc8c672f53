"""Steps the capture tests of both devices run (test_capture.py on the CPU,
test_gpu_capture.py on the GPU): a small MLP's training step, a tiny language model's
(embedding, cross_entropy with ignored targets, AdamW), their batches, and a helper that
calls a captured function a few times."""

from __future__ import annotations

import numpy as np

import haelixe as hx
from haelixe import nn
from haelixe.nn import functional as F
from haelixe.optim import AdamW

X = np.ones((4, 8), np.float32)
Y = np.zeros((4, 4), np.float32)
VOCAB, DIM = 11, 8


def model_and_opt(device="cpu", capturable=True, dropout=0.0):
    hx.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Dropout(dropout),
                          nn.Linear(16, 4)).to(device)
    return model, AdamW(model.parameters(), lr=1e-2, capturable=capturable)


def call(fn, *args, times=4, **kwargs):
    """hx.capture(fn, **kwargs) called ``times`` times on ``args``; returns the step."""
    step = hx.capture(fn, **kwargs)
    for _ in range(times):
        step(*args)
    return step


def train_step(model, opt, extra=None):
    """zero_grad, MSE, backward, step; then ``extra(loss)`` (what a test slips in)."""
    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if extra is not None:
            extra(loss)
        return loss

    return train_step


def lm_step(device="cpu"):
    """(step, params): embedding, tanh, Linear head, cross_entropy, AdamW. Its index checks
    cannot read indices back inside a captured step."""
    hx.manual_seed(0)
    emb, head = nn.Embedding(VOCAB, DIM).to(device), nn.Linear(DIM, VOCAB).to(device)
    params = [*emb.parameters(), *head.parameters()]
    opt = AdamW(params, lr=1e-2, capturable=True)

    def train_step(x, y):
        opt.zero_grad(set_to_none=False)
        logits = head(emb(x).tanh())
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    return train_step, params


def lm_batches(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        # repeated rows (the embedding's gradient adds them in the positions' order) and
        # negative indices (counting from the end)
        x = rng.integers(-VOCAB, VOCAB, (3, 5))
        y = rng.integers(0, VOCAB, (3, 5))
        y[0, :2] = -100  # ignore_index
        out.append((x, y))
    return out
