"""Steps the capture tests of both devices run (test_capture.py on the CPU,
test_gpu_capture.py on the GPU): a small MLP's training step, a tiny language model's
(embedding, cross_entropy with ignored targets, AdamW), their batches, and a helper that
calls a captured function a few times."""

from __future__ import annotations

import numpy as np

import haelixe as hx
from haelixe import nn
from haelixe.nn import functional as F
from haelixe.optim import SGD, Adam, AdamW

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


# -- training runs, eager and captured, compared bit for bit -------------------------------
def train_run(model, opt, batches, captured: bool, device, on_call=None, warmup=1):
    """(losses, parameters, optimizer state, calls that ran the Python, the step) after
    one step per batch; the captured run gets host batches (copied into its static
    inputs), the eager one device tensors."""
    calls = []

    def step_fn(x, y):
        calls.append(1)
        opt.zero_grad(set_to_none=False)
        loss = F.mse_loss(model(x).float(), y)
        loss.backward()
        opt.step()
        return loss

    step = hx.capture(step_fn, device=device, warmup=warmup) if captured else step_fn
    losses = []
    for i, (x, y) in enumerate(batches):
        if captured:
            loss = step(x, y)
        else:
            loss = step(hx.from_numpy(x).to(device), hx.from_numpy(y).to(device))
        losses.append(loss.item())
        if on_call is not None:
            on_call(i)
    state = {(i, n): t.numpy() for i, entry in opt.state_dict()["state"].items()
             for n, t in entry.items()}
    params = [p.detach().numpy() for p in model.parameters()]
    return losses, params, state, len(calls), step


def assert_identical(eager, replayed):
    assert eager[0] == replayed[0]  # float for float: bit-identical losses
    for a, b in zip(eager[1], replayed[1]):
        np.testing.assert_array_equal(a, b)
    assert eager[2].keys() == replayed[2].keys()
    for k in eager[2]:
        np.testing.assert_array_equal(eager[2][k], replayed[2][k])


def mlp(device, seed=0):
    hx.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 32), nn.GELU(), nn.Linear(32, 32), nn.GELU(),
                         nn.Linear(32, 3)).to(device)


def mlp_batches(n, batch=8, seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((batch, 6)).astype(np.float32),
             rng.standard_normal((batch, 3)).astype(np.float32)) for _ in range(n)]


OPTIMIZERS = {
    "adamw": lambda ps: AdamW(ps, lr=3e-3, weight_decay=0.05, capturable=True),
    "adam_amsgrad_l2": lambda ps: Adam(ps, lr=3e-3, weight_decay=0.01, amsgrad=True,
                                       capturable=True),
    "sgd_nesterov": lambda ps: SGD(ps, lr=0.05, momentum=0.9, nesterov=True,
                                   weight_decay=0.01, capturable=True),
    "sgd_dampening_maximize": lambda ps: SGD(ps, lr=0.01, momentum=0.5, dampening=0.2,
                                             maximize=True, capturable=True),
}
