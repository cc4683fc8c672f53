"""The character language model: its text, its model (tied head, causal), sampling, the
command line, and its training against PyTorch's from the same weights and batches."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import benchmark_script
import numpy as np
import pytest

import haelixe as hx
from haelixe import charlm
from haelixe.data.text import CharCorpus, next_char_pairs, stdlib_docstrings

REPO = Path(__file__).resolve().parents[1]
TINY = dict(dim=32, heads=2, layers=1, context=16, batch_size=4, eval_batches=2, warmup=4)


@pytest.fixture(scope="module")
def corpus():
    return CharCorpus.from_stdlib()


def tiny_config(steps=10):
    return replace(charlm.SIZES["fast"], steps=steps, **TINY)


# -- the text ----------------------------------------------------------------------------
def test_stdlib_text_is_the_same_on_every_call(corpus):
    assert stdlib_docstrings() == corpus.text
    assert len(corpus.text) > 100_000
    assert set(corpus.text) <= set(corpus.chars)
    assert corpus.chars == sorted(corpus.chars) and "\t" not in corpus.chars
    assert all(c == "\n" or " " <= c <= "~" for c in corpus.chars)  # printable ASCII


def test_corpus_codes_round_trip_and_split():
    c = CharCorpus("hello world, hello text\n" * 10, val_fraction=0.2)
    assert c.chars == sorted(set(c.text))
    assert c.decode(c.encode("hello")) == "hello"
    assert len(c.splits["train"]) == 192 and len(c.splits["val"]) == 48
    assert c.decode(np.concatenate([c.splits["train"], c.splits["val"]])) == c.text
    with pytest.raises(ValueError, match="'Z' is not in the vocabulary"):
        c.encode("Zebra")


def test_batches_are_windows_and_their_next_characters():
    c = CharCorpus("".join(chr(ord("a") + i % 26) for i in range(500)))
    x, y = c.batch("train", 6, 10, np.random.default_rng(1))
    assert x.shape == y.shape == (6, 10) and x.dtype == np.int64
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    np.testing.assert_array_equal((x + 1) % 26, y)  # the alphabet: next = this + 1
    again = c.batch("train", 6, 10, np.random.default_rng(1))
    np.testing.assert_array_equal(again[0], x)
    with pytest.raises(ValueError, match="split must be 'train' or 'val'"):
        c.batch("test", 1, 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="too few for a context of 60"):
        c.batch("val", 1, 60, np.random.default_rng(0))


def test_corpus_refuses_bad_arguments():
    with pytest.raises(ValueError, match="val_fraction"):
        CharCorpus("some text", val_fraction=1.0)
    with pytest.raises(RuntimeError, match="none of the 1 modules"):
        stdlib_docstrings(("sys",))  # built in: no source to read


# -- the model -----------------------------------------------------------------------------
def test_head_is_tied_to_the_embedding():
    hx.manual_seed(0)
    m = charlm.CharLM(20, dim=16, heads=2, layers=2, context=8)
    assert m.head.weight is m.tok_emb.weight
    names = [n for n, _ in m.named_parameters()]
    assert "head.weight" not in names and "tok_emb.weight" in names  # counted once
    state = m.state_dict()
    assert "head.weight" in state and "tok_emb.weight" in state  # both names, as PyTorch
    assert all(b.attn.causal for b in m.blocks)
    # GPT-2's initialisation: small weights, so the first loss is the uniform guess
    std = float(m.tok_emb.weight.detach().numpy().std())
    assert 0.015 < std < 0.025
    idx, targets = hx.randint(0, 20, (3, 8)), hx.randint(0, 20, (3, 8))
    loss = charlm.lm_loss(m(idx), targets)
    assert abs(loss.item() - math.log(20)) < 0.1


def test_logits_do_not_see_later_characters():
    hx.manual_seed(0)
    m = charlm.CharLM(12, dim=16, heads=2, layers=2, context=8)
    a = np.array([[1, 2, 3, 4, 5, 6, 7, 8]])
    b = a.copy()
    b[0, 5:] = [11, 0, 9]
    la, lb = (m(hx.tensor(v)).detach().numpy() for v in (a, b))
    np.testing.assert_allclose(la[0, :5], lb[0, :5], rtol=1e-5, atol=1e-6)
    assert not np.allclose(la[0, 5:], lb[0, 5:])


def test_weight_decay_groups_split_matrices_from_vectors():
    m = charlm.CharLM(10, dim=8, heads=2, layers=1, context=4)
    decay, plain = charlm.param_groups(m, 0.1)
    assert decay["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert all(p.ndim == 2 for p in decay["params"])
    assert all(p.ndim == 1 for p in plain["params"])
    assert len(decay["params"]) + len(plain["params"]) == len(list(m.parameters()))


def test_schedule_warms_up_then_follows_the_cosine():
    cfg = replace(charlm.SIZES["fast"], steps=50, warmup=10, lr=1e-2, min_lr_ratio=0.1)
    opt = hx.optim.AdamW([hx.zeros(2, requires_grad=True)], lr=cfg.lr)
    sched = charlm.warmup_cosine(opt, cfg)
    lrs = []
    for _ in range(cfg.steps):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(1e-3) and lrs[10] == pytest.approx(1e-2)
    assert np.all(np.diff(lrs[:11]) > 0) and np.all(np.diff(lrs[10:]) < 0)
    t = np.arange(10, 50) - 10
    np.testing.assert_allclose(lrs[10:], 1e-3 + 0.5 * 9e-3 * (1 + np.cos(np.pi * t / 40)),
                               rtol=1e-9)


# -- sampling ------------------------------------------------------------------------------
def test_top_k_one_is_greedy_and_sampling_repeats_with_the_seed():
    hx.manual_seed(3)
    m = charlm.CharLM(15, dim=16, heads=2, layers=1, context=6)
    start = hx.tensor(np.array([[1, 2, 3]]))
    out = charlm.generate(m, start, 10, temperature=0.7, top_k=1)
    assert out.shape == (1, 13)
    seq = start
    for _ in range(10):  # greedy by hand, over the same sliding window
        nxt = m(seq[:, -6:])[:, -1, :].argmax(-1, keepdim=True)
        seq = hx.cat([seq, nxt], dim=1)
    np.testing.assert_array_equal(out.numpy(), seq.numpy())
    draws = []
    for _ in range(2):
        hx.manual_seed(7)
        draws.append(charlm.generate(m, start, 12, temperature=1.5, top_k=5).numpy())
    np.testing.assert_array_equal(*draws)
    assert m.training  # generate restores the mode
    with pytest.raises(ValueError, match="temperature must be > 0"):
        charlm.generate(m, start, 1, temperature=0.0)


def test_top_k_keeps_only_the_k_likeliest():
    hx.manual_seed(0)
    m = charlm.CharLM(30, dim=16, heads=2, layers=1, context=8)
    start = hx.tensor(np.array([[4] * 8]))
    allowed = set(np.argsort(m(start)[0, -1].detach().numpy())[-3:])
    hx.manual_seed(1)
    got = {int(charlm.generate(m, start, 1, temperature=5.0, top_k=3)[0, -1].item())
           for _ in range(40)}
    assert got <= allowed and len(got) > 1


# -- training --------------------------------------------------------------------------------
def test_short_training_beats_the_uniform_guess(corpus):
    res = charlm.train(steps=60, corpus=corpus, sample_chars=30, **TINY)
    assert res["steps"] == 60 and res["first_step_s"] > 0 and res["steps_per_sec"] > 0
    assert abs(res["first_loss"] - res["uniform_loss"]) < 0.1
    assert res["val_loss"] < res["uniform_loss"] - 1.0, res
    assert len(res["sample"]) == 30 and set(res["sample"]) <= set(corpus.chars)


def test_training_matches_pytorch_from_the_same_weights_and_batches(corpus):
    pytest.importorskip("torch")
    bench = benchmark_script.load("charlm_vs_torch")
    cfg = tiny_config(steps=12)
    lines = []
    result = bench.compare(cfg, corpus, rounds=2, log=lines.append)
    assert result["first_loss"]["haelixe"] == pytest.approx(result["first_loss"]["pytorch"],
                                                            rel=1e-5)
    for split in ("train", "val"):
        assert result["losses"]["haelixe"][split] == pytest.approx(
            result["losses"]["pytorch"][split], rel=1e-4), split
    assert bench.report(cfg, result, log=lines.append)
    assert any("within 1%" in line for line in lines)
    assert all(len(r) == 2 for r in result["rates"].values())


@pytest.mark.gpu
def test_gpu_training_follows_the_cpu(be, corpus):
    cpu = charlm.train(steps=3, corpus=corpus, sample_chars=0, **TINY)
    gpu = charlm.train(steps=3, device="gpu", corpus=corpus, sample_chars=5, **TINY)
    assert gpu["device"] == "gpu" and len(gpu["sample"]) == 5
    for key in ("first_loss", "train_loss", "val_loss"):
        assert gpu[key] == pytest.approx(cpu[key], rel=2e-3), key


def _replays_what_eager_steps_compute(corpus, device):
    cfg = tiny_config(steps=8)
    model, opt, sched = charlm.build(corpus.vocab_size, cfg, device, 0)
    rng = np.random.default_rng(0)
    for _ in range(cfg.steps):
        x, y = corpus.batch("train", cfg.batch_size, cfg.context, rng)
        charlm.train_step(model, opt, sched, x, y, cfg.grad_clip, device)
    eager = charlm.estimate_loss(model, charlm.eval_batches(corpus, cfg, 0), device)
    res = charlm.train(steps=cfg.steps, device=device, corpus=corpus, sample_chars=0, **TINY)
    assert res["python_steps"] == 3  # a warm-up call and two recorded: 5 replays
    assert (res["train_loss"], res["val_loss"]) == (eager["train"], eager["val"])


def test_cpu_training_is_captured_and_replays_what_eager_steps_compute(corpus,
                                                                   one_blas_thread):
    _replays_what_eager_steps_compute(corpus, "cpu")


@pytest.mark.gpu
def test_gpu_training_is_captured_and_replays_what_eager_steps_compute(be, corpus):
    _replays_what_eager_steps_compute(corpus, "gpu")


# -- the command line --------------------------------------------------------------------------
def _cli(*args):
    env = dict(os.environ, PYTHONPATH=str(REPO), OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "haelixe.charlm", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def test_cli_json_is_alone_on_stdout_and_the_summary_on_stderr():
    out = _cli("--steps", "3", "--sample-chars", "25", "--top-k", "5", "--json")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert record["steps"] == 3 and record["device"] == "cpu" and record["size"] == "fast"
    assert record["uniform_loss"] == pytest.approx(math.log(record["vocab_size"]))
    for key in ("first_loss", "train_loss", "val_loss", "first_step_s", "steps_per_sec"):
        assert math.isfinite(record[key]) and record[key] > 0, key
    assert len(record["sample"]) == 25 and record["top_k"] == 5
    assert record["config"]["dim"] == charlm.SIZES["fast"].dim
    assert "validation loss" in out.stderr and "steps/s after it" in out.stderr


def test_cli_refuses_bad_arguments():
    out = _cli("--steps", "0")
    assert out.returncode == 2 and "--steps must be at least 1" in out.stderr
    out = _cli("--device", "tpu")
    assert out.returncode == 2 and "invalid choice: 'tpu'" in out.stderr


def test_next_char_pairs_and_its_error():
    codes = np.arange(10, 30)
    x, y = next_char_pairs(codes, [0, 18], 1)
    assert x.tolist() == [[10], [28]] and y.tolist() == [[11], [29]]
    with pytest.raises(ValueError, match="do not fit 20 codes"):
        next_char_pairs(codes, [15], 5)


def test_sample_next_greedy_at_top_k_one_and_refuses_a_zero_temperature():
    logits = hx.tensor(np.array([[0.1, 3.0, -1.0], [2.0, 0.0, 1.9]], np.float32))
    assert charlm.sample_next(logits, 0.3, top_k=1).tolist() == [[1], [0]]
    with pytest.raises(ValueError, match="temperature must be > 0"):
        charlm.sample_next(logits, 0.0)


def test_lr_plan_is_what_training_uses():
    cfg = tiny_config(steps=12)
    steps, lrs = charlm.lr_plan(cfg)
    used = []
    charlm.train(corpus=CharCorpus("abcdefgh " * 40), sample_chars=0,
                 on_step=lambda step, loss, lr, model: used.append(lr), **TINY, steps=12)
    assert steps.tolist() == list(range(1, 13))
    np.testing.assert_allclose(used, lrs, rtol=1e-12)


def test_dashboard_hooks_measure_the_validation_loss():
    corpus = CharCorpus("the quick brown fox jumps over the lazy dog\n" * 30)
    cfg = tiny_config()
    hooks = charlm.dashboard_hooks(corpus, cfg)
    assert hooks["baseline"] == pytest.approx(math.log(corpus.vocab_size))
    assert "ln" in hooks["baseline_label"] and hooks["loss_label"] == "cross-entropy"
    hx.manual_seed(0)
    model = charlm.CharLM.from_config(corpus.vocab_size, cfg)
    val = charlm.estimate_loss(model, {"val": charlm.eval_batches(corpus, cfg, 0)["val"]},
                               "cpu")["val"]
    assert hooks["evaluate"](model) == pytest.approx(val)
    assert abs(val - hooks["baseline"]) < 0.2 and model.training
