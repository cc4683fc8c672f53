"""Models equivalent to three public PyTorch programs' (minGPT's GPT, makemore's six model
types, word_language_model's 2-layer LSTM), trained in Haelixe and in PyTorch (CPU) side by
side in one run: the same code written once over a namespace of either library, the same
initial weights (PyTorch's, loaded into Haelixe through the state dict), the same batches,
the same optimizer.

For each model it prints the loss of both after ``--steps`` steps on fixed held-out
batches and their relative difference (it must stay within 1%), steps/s of both as the
median and range over ``--rounds`` rounds that alternate between the frameworks (so that
machine noise hits both alike), under one thread each and under the default thread
counts, and the time of each framework's first step of a fresh model. Haelixe's compiled
kernels load in the background meanwhile (its first steps run their composed forms); the
timed rounds start once they have loaded, and the wait is printed.

    python benchmarks/real_programs.py                 # 200 steps, every model
    python benchmarks/real_programs.py --quick         # 40 steps, fewer rounds
    python benchmarks/real_programs.py --models rnn,gru,lstm --threads 1

Dropout is 0 in every model (the two libraries draw different random masks); the data
are token sequences from a fixed random Markov chain, so the models have something to
learn. Sizes are those programs' defaults where a CPU run allows, smaller elsewhere
(``SIZES``).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

TOLERANCE = 0.01
SIZES = {
    # minGPT's gpt-mini (6 layers, 6 heads, 192 wide) over chargpt-like character data
    "gpt": dict(vocab=65, block=64, batch=16, n_layer=6, n_head=6, n_embd=192, lr=5e-4),
    # makemore's defaults: n_embd 64, n_embd2 64, 4 layers / 4 heads, block 16, batch 32
    "bigram": dict(vocab=27, block=16, batch=32, lr=5e-4),
    "mlp": dict(vocab=27, block=16, batch=32, n_embd=64, n_embd2=64, lr=5e-4),
    "rnn": dict(vocab=27, block=16, batch=32, n_embd=64, n_embd2=64, lr=5e-4),
    "gru": dict(vocab=27, block=16, batch=32, n_embd=64, n_embd2=64, lr=5e-4),
    "bow": dict(vocab=27, block=16, batch=32, n_embd=64, n_embd2=64, lr=5e-4),
    "transformer": dict(vocab=27, block=16, batch=32, n_layer=4, n_head=4, n_embd=64,
                        lr=5e-4),
    # word_language_model's LSTM (emsize = nhid = 200, 2 layers, bptt 35, batch 20), over
    # a 2000-word vocabulary
    "lstm": dict(vocab=2000, block=35, batch=20, n_embd=200, n_layer=2, lr=20.0),
}


class Lib:
    """The names the models use, from one library."""

    def __init__(self, name):
        self.name = name
        if name == "torch":
            import torch

            self.lib, self.nn, self.F = torch, torch.nn, torch.nn.functional
            self.clip = torch.nn.utils.clip_grad_norm_
            self.tensor = lambda a: torch.from_numpy(np.ascontiguousarray(a))
            self.settle = lambda: None
        else:
            import haelixe as hx

            self.lib, self.nn, self.F = hx, hx.nn, hx.nn.functional
            self.clip = hx.nn.utils.clip_grad_norm_
            from haelixe.backends import cpu_jit

            self.tensor = lambda a: hx.tensor(np.ascontiguousarray(a))
            self.settle = cpu_jit.wait  # the compiled kernels still loading
        self.optim = self.lib.optim

    def set_threads(self, n):
        if self.name == "torch":
            self.lib.set_num_threads(n)
        else:
            from haelixe.backends import threads

            threads.set_num_threads(n)


# -- the models, written once over a Lib ---------------------------------------------------
def new_gelu(L, x):
    """minGPT's NewGELU (the tanh approximation), written out as minGPT writes it."""
    return 0.5 * x * (1.0 + L.lib.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 *
                                                                     L.lib.pow(x, 3.0))))


def gpt_parts(L):
    nn, F = L.nn, L.F

    class CausalSelfAttention(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"])
            self.c_proj = nn.Linear(c["n_embd"], c["n_embd"])
            self.register_buffer("bias", L.lib.tril(L.lib.ones(c["block"], c["block"]))
                                 .view(1, 1, c["block"], c["block"]))
            self.n_head, self.n_embd = c["n_head"], c["n_embd"]

        def forward(self, x):
            b, t, c = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
            q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
            v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            return self.c_proj(y)

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.ln_1 = nn.LayerNorm(c["n_embd"])
            self.attn = CausalSelfAttention(c)
            self.ln_2 = nn.LayerNorm(c["n_embd"])
            self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"])
            self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"])

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.c_proj(new_gelu(L, self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.wte = nn.Embedding(c["vocab"], c["n_embd"])
            self.wpe = nn.Embedding(c["block"], c["n_embd"])
            self.h = nn.ModuleList([Block(c) for _ in range(c["n_layer"])])
            self.ln_f = nn.LayerNorm(c["n_embd"])
            self.lm_head = nn.Linear(c["n_embd"], c["vocab"], bias=False)

        def forward(self, idx):
            t = idx.size(1)
            pos = L.lib.arange(0, t, dtype=L.lib.int64).unsqueeze(0)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return GPT


def makemore_models(L):
    nn, F, lib = L.nn, L.F, L.lib

    class Bigram(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.logits = nn.Parameter(lib.zeros((c["vocab"], c["vocab"])))

        def forward(self, idx):
            return self.logits[idx]

    class MLP(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.block_size, self.vocab_size = c["block"], c["vocab"]
            self.wte = nn.Embedding(c["vocab"] + 1, c["n_embd"])
            self.mlp = nn.Sequential(nn.Linear(c["block"] * c["n_embd"], c["n_embd2"]),
                                     nn.Tanh(), nn.Linear(c["n_embd2"], c["vocab"]))

        def forward(self, idx):
            embs = []
            for _ in range(self.block_size):
                embs.append(self.wte(idx))
                idx = lib.roll(idx, 1, 1)
                idx[:, 0] = self.vocab_size  # the blank token
            return self.mlp(lib.cat(embs, -1))

    class RNNCell(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.xh_to_h = nn.Linear(c["n_embd"] + c["n_embd2"], c["n_embd2"])

        def forward(self, xt, hprev):
            return F.tanh(self.xh_to_h(lib.cat([xt, hprev], dim=1)))

    class GRUCell(nn.Module):
        def __init__(self, c):
            super().__init__()
            n = c["n_embd"] + c["n_embd2"]
            self.xh_to_z = nn.Linear(n, c["n_embd2"])
            self.xh_to_r = nn.Linear(n, c["n_embd2"])
            self.xh_to_hbar = nn.Linear(n, c["n_embd2"])

        def forward(self, xt, hprev):
            xh = lib.cat([xt, hprev], dim=1)
            r = F.sigmoid(self.xh_to_r(xh))
            hbar = F.tanh(self.xh_to_hbar(lib.cat([xt, r * hprev], dim=1)))
            z = F.sigmoid(self.xh_to_z(xh))
            return (1 - z) * hprev + z * hbar

    class RNN(nn.Module):
        def __init__(self, c, cell):
            super().__init__()
            self.start = nn.Parameter(lib.zeros(1, c["n_embd2"]))
            self.wte = nn.Embedding(c["vocab"], c["n_embd"])
            self.cell = RNNCell(c) if cell == "rnn" else GRUCell(c)
            self.lm_head = nn.Linear(c["n_embd2"], c["vocab"])

        def forward(self, idx):
            b, t = idx.size()
            emb = self.wte(idx)
            hprev = self.start.expand((b, -1))
            hiddens = []
            for i in range(t):
                hprev = self.cell(emb[:, i, :], hprev)
                hiddens.append(hprev)
            return self.lm_head(lib.stack(hiddens, 1))

    class CausalBoW(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.register_buffer("bias", lib.tril(lib.ones(c["block"], c["block"]))
                                 .view(1, c["block"], c["block"]))

        def forward(self, x):
            b, t, _ = x.size()
            att = lib.zeros((b, t, t)).masked_fill(self.bias[:, :t, :t] == 0,
                                                   float("-inf"))
            return F.softmax(att, dim=-1) @ x

    class BoWBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cbow = CausalBoW(c)
            self.c_fc = nn.Linear(c["n_embd"], c["n_embd2"])
            self.c_proj = nn.Linear(c["n_embd2"], c["n_embd"])

        def forward(self, x):
            x = x + self.cbow(x)
            return x + self.c_proj(F.tanh(self.c_fc(x)))

    class BoW(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.wte = nn.Embedding(c["vocab"], c["n_embd"])
            self.wpe = nn.Embedding(c["block"], c["n_embd"])
            self.context_block = BoWBlock(c)
            self.lm_head = nn.Linear(c["n_embd"], c["vocab"])

        def forward(self, idx):
            t = idx.size(1)
            pos = lib.arange(0, t, dtype=lib.int64).unsqueeze(0)
            return self.lm_head(self.context_block(self.wte(idx) + self.wpe(pos)))

    return {"bigram": Bigram, "mlp": MLP, "rnn": lambda c: RNN(c, "rnn"),
            "gru": lambda c: RNN(c, "gru"), "bow": BoW, "transformer": gpt_parts(L)}


def lstm_model(L):
    nn = L.nn

    class RNNModel(nn.Module):
        """word_language_model's RNNModel('LSTM', ...): embedding, nn.LSTM, decoder."""

        def __init__(self, c):
            super().__init__()
            self.encoder = nn.Embedding(c["vocab"], c["n_embd"])
            self.rnn = nn.LSTM(c["n_embd"], c["n_embd"], c["n_layer"], dropout=0.0)
            self.decoder = nn.Linear(c["n_embd"], c["vocab"])

        def forward(self, x, hidden):
            out, hidden = self.rnn(self.encoder(x), hidden)
            return L.F.log_softmax(self.decoder(out), dim=-1), hidden

    return RNNModel


# -- one training run -----------------------------------------------------------------------
def markov_tokens(rng, vocab, n):
    """n tokens from a fixed sparse random Markov chain over ``vocab`` symbols."""
    trans = np.random.default_rng(12345).dirichlet(np.full(vocab, 0.05), size=vocab)
    cum = trans.cumsum(1)
    out = np.empty(n, np.int64)
    out[0] = rng.integers(vocab)
    u = rng.random(n)
    for i in range(1, n):
        out[i] = min(np.searchsorted(cum[out[i - 1]], u[i]), vocab - 1)
    return out


def batches(kind, c, count, seed):
    rng = np.random.default_rng(seed)
    b, t = c["batch"], c["block"]
    stream = markov_tokens(rng, c["vocab"], count * b * (t + 1))
    out = []
    for k in range(count):
        chunk = stream[k * b * (t + 1):(k + 1) * b * (t + 1)].reshape(b, t + 1)
        x, y = chunk[:, :-1].copy(), chunk[:, 1:].copy()
        if kind != "lstm":
            y[:, -3:][rng.random((b, 3)) < 0.3] = -1  # makemore's ignored positions
        else:
            x, y = x.T.copy(), y.T.copy()  # (seq, batch), as word_language_model
        out.append((x, y))
    return out


class Run:
    """One model in one library: its optimizer and its training step."""

    def __init__(self, L, kind, c, torch_state=None):
        self.L, self.kind, self.c = L, kind, c
        if kind == "gpt":
            self.model = gpt_parts(L)(c)
        elif kind == "lstm":
            self.model = lstm_model(L)(c)
        else:
            self.model = makemore_models(L)[kind](c)
        if torch_state is not None:
            self.model.load_state_dict({k: L.tensor(v) for k, v in torch_state.items()})
        params = list(self.model.parameters())
        if kind == "lstm":
            self.opt = L.optim.SGD(params, lr=c["lr"])
        elif kind == "gpt":
            self.opt = L.optim.AdamW(params, lr=c["lr"], betas=(0.9, 0.95),
                                     weight_decay=0.1)
        else:
            self.opt = L.optim.AdamW(params, lr=c["lr"], betas=(0.9, 0.99), eps=1e-8,
                                     weight_decay=0.01)
        self.hidden = None

    def loss(self, x, y):
        L = self.L
        if self.kind == "lstm":
            if self.hidden is None:
                z = L.lib.zeros(self.c["n_layer"], x.shape[1], self.c["n_embd"])
                self.hidden = (z, z)
            self.hidden = tuple(h.detach() for h in self.hidden)  # repackage_hidden
            out, self.hidden = self.model(x, self.hidden)
            return L.F.nll_loss(out.view(-1, self.c["vocab"]), y.view(-1))
        logits = self.model(x)
        return L.F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1),
                                 ignore_index=-1)

    def step(self, x, y) -> float:
        loss = self.loss(x, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.L.clip(self.model.parameters(), 0.25 if self.kind == "lstm" else 1.0)
        self.opt.step()
        return loss.item()

    def eval_loss(self, data) -> float:
        with self.L.lib.no_grad():
            saved, self.hidden = self.hidden, None
            total = float(np.mean([self.loss(x, y).item() for x, y in data]))
            self.hidden = saved
            return total


def compare(kind, steps, rounds, thread_counts):
    import torch

    c = SIZES[kind]
    Ls = {"haelixe": Lib("haelixe"), "torch": Lib("torch")}
    data = {name: [(L.tensor(x), L.tensor(y)) for x, y in batches(kind, c, steps, 1)]
            for name, L in Ls.items()}
    held = {name: [(L.tensor(x), L.tensor(y)) for x, y in batches(kind, c, 4, 2)]
            for name, L in Ls.items()}
    torch.manual_seed(0)
    ref = Run(Ls["torch"], kind, c)
    state = {k: v.detach().numpy().copy() for k, v in ref.model.state_dict().items()}
    mine = Run(Ls["haelixe"], kind, c, state)
    runs = {"torch": ref, "haelixe": mine}
    first = {}
    for name in ("haelixe", "torch"):
        t0 = time.perf_counter()
        runs[name].step(*data[name][0])
        first[name] = time.perf_counter() - t0
    t0 = time.perf_counter()
    Ls["haelixe"].settle()
    first["loaded"] = time.perf_counter() - t0
    rates = {}
    done = 1
    per_round = max(1, (steps - 1) // (rounds * len(thread_counts)))
    for threads in thread_counts:
        for L in Ls.values():
            L.set_threads(threads)
        rates[threads] = {"haelixe": [], "torch": []}
        for r in range(rounds):
            order = ("haelixe", "torch") if r % 2 == 0 else ("torch", "haelixe")
            chunk = [(i % steps) for i in range(done, done + per_round)]
            for name in order:
                Ls["haelixe"].settle()  # (kernels that became hot in a loop since: loaded)
                t0 = time.perf_counter()
                for i in chunk:
                    runs[name].step(*data[name][i])
                rates[threads][name].append(len(chunk) / (time.perf_counter() - t0))
            done += per_round
    for L in Ls.values():
        L.set_threads(thread_counts[-1])
    for i in range(done, steps):  # the rest of the steps, untimed
        for name in ("haelixe", "torch"):
            runs[name].step(*data[name][i])
    losses = {name: runs[name].eval_loss(held[name]) for name in runs}
    return losses, rates, first, max(steps, done)


def fmt(v):
    return f"{statistics.median(v):7.1f} [{min(v):.1f}..{max(v):.1f}]"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="40 steps, 3 rounds")
    ap.add_argument("--models", default=",".join(SIZES))
    ap.add_argument("--threads", default="1,default",
                    help="thread counts to time, comma separated ('default': the "
                         "libraries' own)")
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.rounds = 40, 3
    import os

    import torch

    default = torch.get_num_threads() or os.cpu_count()
    counts = [default if t == "default" else int(t) for t in args.threads.split(",")]
    print(f"{args.steps} steps per model; steps/s as median [range] over {args.rounds} "
          f"rounds per thread count {counts}; first step of a fresh model apart")
    failed = []
    for kind in args.models.split(","):
        losses, rates, first, steps = compare(kind, args.steps, args.rounds, counts)
        rel = abs(losses["haelixe"] - losses["torch"]) / abs(losses["torch"])
        ok = rel <= TOLERANCE
        failed += [] if ok else [kind]
        print(f"\n{kind}: held-out loss after {steps} steps haelixe {losses['haelixe']:.5f} "
              f"torch {losses['torch']:.5f} (rel diff {rel:.1e}{'' if ok else ' > 1%'}); "
              f"first step haelixe {first['haelixe'] * 1e3:.1f} ms (its compiled kernels "
              f"loaded {first['loaded'] * 1e3:.0f} ms after), torch "
              f"{first['torch'] * 1e3:.1f} ms")
        for threads, r in rates.items():
            ratio = statistics.median(r["haelixe"]) / statistics.median(r["torch"])
            print(f"  {threads} thread(s): steps/s haelixe {fmt(r['haelixe'])}  torch "
                  f"{fmt(r['torch'])}  ratio {ratio:.2f}x")
    if failed:
        raise SystemExit(f"losses differ by more than 1%: {', '.join(failed)}")


if __name__ == "__main__":
    main()
