"""F.ctc_loss and nn.CTCLoss against PyTorch's: values and float64 gradients for every
reduction, both target layouts, repeated labels, empty targets, short inputs,
infeasible targets (with and without zero_infinity), unbatched input, inputs that are
not log_softmax-normalised, float32, PyTorch's errors, and the GPU against the CPU."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import haelixe as hx
from haelixe.errors import OpError, OpIndexError, OpTypeError

HF = hx.nn.functional
T, N, C = 6, 4, 4
#: padded targets: a repeated label (needs a blank between its copies), a label equal to
#: the blank's class, read as a label (not the last: see below), an empty target, a
#: target that fills its input
TARGETS = np.array([[1, 1, 2], [3, 0, 2], [2, 2, 2], [1, 3, 1]])
#: (input_lengths, target_lengths): full inputs; shorter ones; infeasible ones
#: ([1, 1] in 1 step, [2, 2, 2] in 5 steps: it needs 5 only without repeats), an empty
#: input with an empty and with a non-empty target
LENGTHS = {"full": ([6, 6, 6, 6], [3, 3, 0, 3]),
           "short": ([5, 3, 1, 4], [2, 1, 0, 3]),
           "infeasible": ([1, 6, 4, 6], [2, 3, 3, 3]),
           "empty_input": ([0, 0, 6, 2], [0, 1, 1, 1])}


def _log_probs(seed, normalised=True, shape=(T, N, C)):
    a = np.random.default_rng(seed).standard_normal(shape) * 1.5
    return torch.tensor(a).log_softmax(-1).numpy() if normalised else a


def _both(a, targets, il, tl, dtype="float64", **kw):
    """(haelixe loss, its leaf), (PyTorch loss, its leaf) of one call."""
    h = hx.tensor(a, dtype=dtype, requires_grad=True)
    t = torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True)
    ht, tt = hx.tensor(targets), torch.tensor(targets)
    return (HF.ctc_loss(h, ht, il, tl, **kw), h), (F.ctc_loss(t, tt, il, tl, **kw), t)


def _backward(pair, gy, lib):
    loss, leaf = pair
    loss.backward(lib.tensor(gy))
    return leaf.grad.numpy()


@pytest.mark.parametrize("normalised", [True, False])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("lengths", sorted(LENGTHS))
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_values_and_float64_gradients_match_pytorch(reduction, lengths, zero_infinity,
                                                    normalised):
    il, tl = LENGTHS[lengths]
    a = _log_probs(1, normalised)
    ours, theirs = _both(a, TARGETS, il, tl, reduction=reduction,
                         zero_infinity=zero_infinity)
    want = theirs[0].detach().numpy()
    assert ours[0].shape == tuple(want.shape) and ours[0].dtype is hx.float64
    np.testing.assert_allclose(ours[0].detach().numpy(), want, rtol=1e-11, atol=1e-12)
    gy = np.random.default_rng(2).standard_normal(want.shape)
    g_t = _backward(theirs, gy, torch)
    np.testing.assert_allclose(_backward(ours, gy, hx), g_t, rtol=1e-9, atol=1e-12,
                               equal_nan=True)
    if lengths == "infeasible":  # (the case is what its name says)
        assert np.isinf(F.ctc_loss(torch.tensor(a), torch.tensor(TARGETS), il, tl,
                                   reduction="none").numpy()).sum() == 2
        assert np.isnan(g_t).any() != zero_infinity


def test_a_last_label_equal_to_the_blank_gets_the_gradient_of_its_loss():
    """PyTorch's docs say a target is never the blank; its forward reads one as a label,
    and so does Haelixe's, but at the last step its backward keeps only one of the two
    alignments ending there when both are of the blank's class. Haelixe's is the
    gradient of the loss: through log_softmax, the central differences of the logits."""
    logits = np.random.default_rng(14).standard_normal((4, 1, 3))
    targets, il, tl = np.array([[2, 0]]), [4], [2]
    z = hx.tensor(logits, requires_grad=True)
    loss = HF.ctc_loss(z.log_softmax(2), hx.tensor(targets), il, tl, reduction="sum")
    want = F.ctc_loss(torch.tensor(logits).log_softmax(2), torch.tensor(targets), il, tl,
                      reduction="sum")
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-12)
    loss.backward()

    def f(v):
        lp = torch.tensor(v).log_softmax(2)
        return F.ctc_loss(lp, torch.tensor(targets), il, tl, reduction="sum").item()
    numeric = np.zeros_like(logits)
    for i in np.ndindex(logits.shape):
        d = np.zeros_like(logits)
        d[i] = 1e-6
        numeric[i] = (f(logits + d) - f(logits - d)) / 2e-6
    np.testing.assert_allclose(z.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_losses_of_each_case_are_what_the_alignments_give():
    """Two steps, two classes, target [1]: the alignments are (1, 1), (0, 1), (1, 0);
    target [1, 1] has none in two steps (it needs 1, blank, 1); an empty target one
    (blank, blank); an empty input and target the empty alignment (loss 0)."""
    p = np.array([[0.3, 0.7], [0.6, 0.4]])
    lp = hx.tensor(np.log(p)[:, None, :].repeat(3, 1))
    loss = HF.ctc_loss(lp, hx.tensor([[1, 1], [1, 0], [0, 0]]), [2, 2, 2], [2, 1, 0],
                       reduction="none").numpy()
    want = [np.inf, -np.log(0.7 * 0.4 + 0.3 * 0.4 + 0.7 * 0.6), -np.log(0.3 * 0.6)]
    np.testing.assert_allclose(loss, want, rtol=1e-12)
    assert HF.ctc_loss(lp, hx.tensor([[1]] * 3), [0, 0, 0], [0, 0, 0],
                       reduction="sum").item() == 0.0


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_concatenated_targets_equal_padded_ones_and_pytorchs(reduction):
    il, tl = LENGTHS["short"]
    flat = np.concatenate([row[:n] for row, n in zip(TARGETS, tl)])
    a = _log_probs(3)
    ours, theirs = _both(a, flat, il, tl, reduction=reduction)
    padded, _ = _both(a, TARGETS, il, tl, reduction=reduction)
    np.testing.assert_allclose(ours[0].detach().numpy(), theirs[0].detach().numpy(),
                               rtol=1e-11)
    np.testing.assert_array_equal(ours[0].detach().numpy(), padded[0].detach().numpy())
    gy = np.ones(theirs[0].shape)
    np.testing.assert_allclose(_backward(ours, gy, hx), _backward(theirs, gy, torch),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["tensor", "list", "tuple", "tensor_int32",
                                  "tensor_2d"])
def test_lengths_as_tensors_lists_or_tuples(kind):
    il, tl = LENGTHS["short"]
    make = {"tensor": lambda lib, v: lib.tensor(v),
            "list": lambda lib, v: list(v), "tuple": lambda lib, v: tuple(v),
            "tensor_int32": lambda lib, v: lib.tensor(v, dtype=lib.int32),
            "tensor_2d": lambda lib, v: lib.tensor([v])}[kind]
    a = _log_probs(4)
    got = HF.ctc_loss(hx.tensor(a), hx.tensor(TARGETS), make(hx, il), make(hx, tl))
    want = F.ctc_loss(torch.tensor(a), torch.tensor(TARGETS), make(torch, il),
                      make(torch, tl))
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)


@pytest.mark.parametrize("lengths", ["0-d tensors", "lists"])
@pytest.mark.parametrize("targets,tl", [([1, 2, 1], 3), ([[3, 1, 1, 0]], 2), ([], 0)])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_unbatched_input_matches_pytorch(targets, tl, reduction, lengths):
    """(T, C) log-probabilities: 1-D targets are the one target (sum(target_lengths)
    long), 2-D ones a padded batch of one; the lengths one each."""
    a, target = _log_probs(5, shape=(T, C)), np.array(targets, np.int64)
    out = []
    for lib in (hx, torch):
        x = lib.tensor(a, requires_grad=True)
        il, tl_ = (lib.tensor(T - 1), lib.tensor(tl)) if lengths == "0-d tensors" else \
            ([T - 1], [tl])
        loss = lib.nn.functional.ctc_loss(x, lib.tensor(target), il, tl_,
                                          reduction=reduction)
        assert loss.shape == ()
        loss.backward()
        out.append((loss.item(), x.grad.numpy()))
    (got, g), (want, w) = out
    np.testing.assert_allclose(got, want, rtol=1e-11)
    np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)
    assert np.all(g[T - 1] == 0) and np.any(g[T - 2] != 0)  # (beyond its input length)


# (blanks that are no target's last label: see above)
@pytest.mark.parametrize("blank", [0, 3])
def test_another_blank_matches_pytorch(blank):
    a = _log_probs(6)
    il, tl = LENGTHS["full"]
    ours, theirs = _both(a, TARGETS, il, tl, blank=blank, reduction="sum")
    np.testing.assert_allclose(ours[0].item(), theirs[0].item(), rtol=1e-11)
    gy = np.array(1.0)
    np.testing.assert_allclose(_backward(ours, gy, hx), _backward(theirs, gy, torch),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_float32_matches_pytorch_and_keeps_its_dtype(reduction):
    il, tl = LENGTHS["short"]
    a = _log_probs(7).astype(np.float32)
    ours, theirs = _both(a, TARGETS.astype(np.int32), il, tl, dtype="float32",
                         reduction=reduction)
    assert ours[0].dtype is hx.float32
    np.testing.assert_allclose(ours[0].detach().numpy(), theirs[0].detach().numpy(),
                               rtol=2e-6, atol=2e-6)
    gy = np.ones(theirs[0].shape, np.float32)
    g = _backward(ours, gy, hx)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, _backward(theirs, gy, torch), rtol=2e-5, atol=2e-6)


def test_targets_of_other_dtypes_are_read_as_pytorch_reads_them():
    a = _log_probs(8)
    il, tl = LENGTHS["full"]
    for dtype in ("int16", "uint8", "float32", "bool"):
        t = TARGETS.astype(dtype) if dtype != "float32" else TARGETS + 0.6
        got = HF.ctc_loss(hx.tensor(a), hx.tensor(t), il, tl, reduction="none")
        want = F.ctc_loss(torch.tensor(a), torch.tensor(t), il, tl, reduction="none")
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-11, err_msg=dtype)


def test_the_layer_is_pytorchs():
    a = _log_probs(9)
    il, tl = LENGTHS["short"]
    layer, theirs = hx.nn.CTCLoss(blank=1, zero_infinity=True), torch.nn.CTCLoss(1, "mean",
                                                                                  True)
    assert repr(layer) == repr(theirs) == "CTCLoss()"
    assert (layer.blank, layer.reduction, layer.zero_infinity) == (1, "mean", True)
    assert not list(layer.parameters()) and not layer.state_dict()
    got = layer(hx.tensor(a), hx.tensor(TARGETS), hx.tensor(il), hx.tensor(tl))
    want = theirs(torch.tensor(a), torch.tensor(TARGETS), torch.tensor(il), torch.tensor(tl))
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-11)
    assert list(inspect.signature(hx.nn.CTCLoss.forward).parameters) == \
        list(inspect.signature(torch.nn.CTCLoss.forward).parameters)
    assert HF.ctc_loss.__doc__.startswith("ctc_loss(log_probs, targets, input_lengths, "
                                          "target_lengths, blank=0, reduction='mean', "
                                          "zero_infinity=False)")
    with pytest.raises(ValueError, match="CTCLoss: reduction"):
        hx.nn.CTCLoss(reduction="avg")


def test_a_second_derivative_is_refused():
    x = hx.tensor(_log_probs(10), requires_grad=True)
    loss = HF.ctc_loss(x, hx.tensor(TARGETS), *LENGTHS["full"])
    with pytest.raises(Exception, match="CtcLoss"):
        hx.autograd.grad(loss, x, create_graph=True, retain_graph=True)
    (g,) = hx.autograd.grad(loss, x)
    assert g.shape == (T, N, C)


def _call(lib, log_probs=None, targets=TARGETS, il=None, tl=None, dtype="float64", **kw):
    """ctc_loss of ``lib`` (torch or hx) on the full lengths as lists, with changes;
    its error, or None. Numpy arrays become tensors of ``lib``."""
    a = _log_probs(11) if log_probs is None else log_probs
    dt = getattr(lib, dtype)
    x = lib.tensor(a).to(dt) if lib is torch else lib.tensor(a, dtype=dt)

    def arg(v):
        return lib.tensor(v) if isinstance(v, np.ndarray) else v
    il, tl = (LENGTHS["full"][0] if il is None else il), (LENGTHS["full"][1] if tl is None
                                                          else tl)
    try:
        lib.nn.functional.ctc_loss(x, arg(targets), arg(il), arg(tl), **kw)
    except Exception as e:  # noqa: BLE001 (both sides' errors are compared)
        return e
    return None


_IL, _TL = (np.array(v) for v in LENGTHS["full"])
#: calls PyTorch refuses: (the change, the error Haelixe raises, a phrase of its text)
BAD = [
    ({"il": [7, 6, 6, 6]}, OpError, r"input_lengths must lie in \[0, 6\]"),
    ({"il": [-1, 6, 6, 6]}, OpError, "input_lengths must lie"),
    ({"tl": [-1, 2, 0, 3]}, OpError, "target_lengths must be >= 0"),
    ({"tl": [4, 2, 0, 3]}, OpError, "shorter than the longest target length 4"),
    ({"il": [6, 6, 6]}, OpError, "input_lengths must be of size batch_size"),
    ({"tl": [1, 1, 1, 1, 1]}, OpError, "target_lengths must be of size batch_size"),
    ({"blank": 4}, OpError, r"blank must be in label range \[0, 4\)"),
    ({"blank": -1}, OpError, "blank must be in label range"),
    ({"reduction": "avg"}, ValueError, "reduction must be"),
    ({"targets": TARGETS[:3]}, OpError, r"one row per sample \(4\)"),
    ({"targets": TARGETS.reshape(-1)}, OpError, r"sum\(target_lengths\) = 9"),
    ({"targets": TARGETS[None]}, OpError, "targets must be"),
    ({"log_probs": _log_probs(11)[None]}, OpError, r"log_probs must be \(T, N, C\)"),
    ({"log_probs": _log_probs(11)[:0]}, OpError, "must not be empty"),
    ({"dtype": "float16"}, OpTypeError, "float32 or float64"),
    ({"dtype": "int64"}, OpTypeError, "float32 or float64"),
    ({"il": _IL.astype(float), "tl": _TL}, OpTypeError, "input_lengths must be integral"),
    ({"il": _IL, "tl": _TL > 0}, OpTypeError, "target_lengths must be integral"),
    ({"il": _IL}, TypeError, "both be tensors"),
    ({"tl": _TL}, TypeError, "both be tensors"),
    ({"il": (6.0, 6, 6, 6)}, TypeError, "input_lengths must hold ints"),
    ({"il": 6}, TypeError, "input_lengths must be a tensor or a list"),
    ({"blank": 1.0}, TypeError, "blank must be an int"),
    ({"targets": TARGETS.tolist()}, TypeError, "targets must be a tensor"),
]


@pytest.mark.parametrize("change,error,text", BAD, ids=[str(i) for i in range(len(BAD))])
def test_pytorchs_errors_are_raised_clearly(change, error, text):
    assert _call(torch) is None and _call(hx) is None  # (the unchanged call runs)
    want, got = _call(torch, **change), _call(hx, **change)
    assert want is not None, f"PyTorch takes {change}"
    assert isinstance(got, error), f"{change}: {got!r}"
    assert str(got).startswith("ctc_loss: ") and re.search(text, str(got)), str(got)


def test_a_target_outside_the_classes_is_refused():
    """(PyTorch's CPU kernel reads outside log_probs there: no value to match)"""
    for bad in (4, -1):
        t = TARGETS.copy()
        t[3, 2] = bad
        with pytest.raises(OpIndexError, match=f"target 2 of sample 3 is {bad}"):
            HF.ctc_loss(hx.tensor(_log_probs(12)), hx.tensor(t), *LENGTHS["full"])
    t = TARGETS.copy()
    t[2, 0] = 9  # (past target_length 0: never read)
    HF.ctc_loss(hx.tensor(_log_probs(12)), hx.tensor(t), *LENGTHS["full"])


@pytest.mark.gpu
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_the_gpu_equals_the_cpu(be, reduction):
    a = _log_probs(13, shape=(4, 2, 3)).astype(np.float32)
    targets, il, tl = np.array([[1, 1], [2, 0]]), [4, 3], [2, 1]
    out = []
    for device in ("cpu", "gpu"):
        x = hx.tensor(a, device=device, requires_grad=True)
        loss = HF.ctc_loss(x, hx.tensor(targets, device=device), hx.tensor(il, device=device),
                           hx.tensor(tl, device=device), reduction=reduction)
        assert loss.device.type == device
        loss.sum().backward()
        assert x.grad.device.type == device
        out.append((loss.detach().cpu().numpy(), x.grad.cpu().numpy()))
    for c, g in zip(*out):
        np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-6)


def test_under_autocast_a_bfloat16_input_is_computed_in_float32():
    a = _log_probs(15).astype(np.float32)
    x = hx.tensor(a, dtype="bfloat16")
    with pytest.raises(OpTypeError, match="float32 or float64"):
        HF.ctc_loss(x, hx.tensor(TARGETS), *LENGTHS["full"])
    with hx.autocast(dtype=hx.bfloat16):
        loss = HF.ctc_loss(x, hx.tensor(TARGETS), *LENGTHS["full"])
    want = F.ctc_loss(torch.tensor(a).bfloat16().float(), torch.tensor(TARGETS),
                      *LENGTHS["full"])
    assert loss.dtype is hx.float32
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-6)
