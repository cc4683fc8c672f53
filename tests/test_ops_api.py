"""The everyday tensor ops a PyTorch user reaches for, against PyTorch: forward, float64
gradients (and gradcheck), and the GPU (software adapter in CI) against the CPU."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")


def arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


IDX = np.array([[0, 2, 1, 0], [1, 0, 2, 2]])

#: name -> (haelixe fn, torch fn, input arrays): each fn takes the tensors of its library
CASES = {
    "sort": (lambda x: x.sort(dim=1).values, lambda x: x.sort(dim=1).values, [arr(3, 5)]),
    "sort_desc": (lambda x: x.sort(0, descending=True).values,
                  lambda x: x.sort(0, descending=True).values, [arr(4, 3)]),
    "topk": (lambda x: x.topk(2, dim=-1).values * 1.0,
             lambda x: x.topk(2, dim=-1).values * 1.0, [arr(3, 6)]),
    "topk_smallest": (lambda x: x.topk(3, 0, largest=False).values,
                      lambda x: x.topk(3, 0, largest=False).values, [arr(5, 2)]),
    "cumsum": (lambda x: hx.cumsum(x, 1), lambda x: torch.cumsum(x, 1), [arr(3, 7)]),
    "cumsum_dim0": (lambda x: x.cumsum(0), lambda x: x.cumsum(0), [arr(9, 2)]),
    "cumprod": (lambda x: x.cumprod(1), lambda x: x.cumprod(1), [arr(2, 5)]),
    "cumprod_zero": (lambda x: (x * hx.tensor([1.0, 0.0, 1.0, 1.0], dtype=hx.float64))
                     .cumprod(1),
                     lambda x: (x * torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64))
                     .cumprod(1), [arr(3, 4)]),
    "tril": (lambda x: x.tril(), lambda x: x.tril(), [arr(4, 5)]),
    "triu_k": (lambda x: hx.triu(x, 1), lambda x: torch.triu(x, 1), [arr(2, 4, 4)]),
    "tril_neg": (lambda x: x.tril(-1), lambda x: x.tril(-1), [arr(5, 3)]),
    "einsum_mm": (lambda a, b: hx.einsum("ij,jk->ik", a, b),
                  lambda a, b: torch.einsum("ij,jk->ik", a, b), [arr(3, 4), arr(4, 2)]),
    "einsum_bmm": (lambda a, b: hx.einsum("bij,bkj->bik", a, b),
                   lambda a, b: torch.einsum("bij,bkj->bik", a, b),
                   [arr(2, 3, 4), arr(2, 5, 4)]),
    "einsum_attn": (lambda q, k: hx.einsum("bhqd,bhkd->bhqk", q, k),
                    lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k),
                    [arr(1, 2, 3, 4), arr(1, 2, 5, 4)]),
    "einsum_outer": (lambda a, b: hx.einsum("i,j->ij", a, b),
                     lambda a, b: torch.einsum("i,j->ij", a, b), [arr(3), arr(4)]),
    "einsum_total": (lambda a: hx.einsum("ij->", a), lambda a: torch.einsum("ij->", a),
                     [arr(3, 2)]),
    "einsum_implicit": (lambda a, b: hx.einsum("ij,jk", a, b),
                        lambda a, b: torch.einsum("ij,jk", a, b), [arr(2, 3), arr(3, 2)]),
    "einsum_transpose": (lambda a: hx.einsum("ijk->kji", a),
                         lambda a: torch.einsum("ijk->kji", a), [arr(2, 3, 4)]),
    "bmm": (lambda a, b: hx.bmm(a, b), lambda a, b: torch.bmm(a, b),
            [arr(2, 3, 4), arr(2, 4, 5)]),
    "scatter": (lambda x, s: x.scatter(1, hx.tensor([[0, 3], [2, 1]], device=x.device), s),
                lambda x, s: x.scatter(1, torch.tensor([[0, 3], [2, 1]]), s),
                [arr(2, 5), arr(2, 2)]),
    "scatter_add": (lambda x, s: x.scatter_add(1, hx.tensor(IDX, device=x.device), s),
                    lambda x, s: x.scatter_add(1, torch.tensor(IDX), s),
                    [arr(2, 3), arr(2, 4)]),
    "index_select": (lambda x: x.index_select(1, hx.tensor([2, 0, 2], device=x.device)),
                     lambda x: x.index_select(1, torch.tensor([2, 0, 2])), [arr(3, 4)]),
    "index_add": (lambda x, s: hx.index_add(x, 0, hx.tensor([0, 2, 0], device=x.device), s,
                                            alpha=2.0),
                  lambda x, s: torch.index_add(x, 0, torch.tensor([0, 2, 0]), s, alpha=2.0),
                  [arr(3, 2), arr(3, 2)]),
    "norm_p3_dim": (lambda x: x.norm(3, dim=1, keepdim=True),
                    lambda x: x.norm(3, dim=1, keepdim=True), [arr(3, 4)]),
    "norm_2": (lambda x: x.norm(), lambda x: x.norm(), [arr(3, 4)]),
    "norm_inf": (lambda x: x.norm(float("inf"), dim=0), lambda x: x.norm(float("inf"), dim=0),
                 [arr(3, 4)]),
    "remainder": (lambda a, b: a % b, lambda a, b: a % b,
                  [arr(3, 4), np.abs(arr(3, 4, seed=1)) + 0.5]),
    "max_dim": (lambda x: hx.max(x, 1).values, lambda x: torch.max(x, 1).values, [arr(3, 4)]),
    "min_dim": (lambda x: hx.min(x, 0, keepdim=True).values,
                lambda x: torch.min(x, 0, keepdim=True).values, [arr(3, 4)]),
    "logsumexp": (lambda x: x.logsumexp(1), lambda x: x.logsumexp(1), [arr(3, 4)]),
    "repeat": (lambda x: x.repeat(2, 1, 3), lambda x: x.repeat(2, 1, 3), [arr(3, 2)]),
    "repeat_tuple": (lambda x: x.T.repeat((1, 2)), lambda x: x.T.repeat((1, 2)), [arr(3, 2)]),
    "scatter_": (lambda x, s: (x * 1).scatter_(1, hx.tensor([[0, 3], [2, 1]], device=x.device),
                                               s),
                 lambda x, s: (x * 1).scatter_(1, torch.tensor([[0, 3], [2, 1]]), s),
                 [arr(2, 5), arr(2, 2)]),
    "scatter_add_": (lambda x, s: (x * 1).scatter_add_(1, hx.tensor(IDX, device=x.device), s),
                     lambda x, s: (x * 1).scatter_add_(1, torch.tensor(IDX), s),
                     [arr(2, 3), arr(2, 4)]),
    "masked_fill_": (lambda x: (x * 1).masked_fill_(x.detach() > 0, 0.5),
                     lambda x: (x * 1).masked_fill_(x.detach() > 0, 0.5), [arr(3, 4)]),
}
NONDIFF = {
    "argsort": (lambda x: x.argsort(dim=0), lambda x: x.argsort(dim=0), [arr(4, 3)]),
    "argmin": (lambda x: hx.argmin(x, 1, keepdim=True), lambda x: torch.argmin(x, 1, True),
               [arr(3, 4)]),
    "argmax_fn": (lambda x: hx.argmax(x), lambda x: torch.argmax(x), [arr(3, 4)]),
    "topk_indices": (lambda x: x.topk(2).indices, lambda x: x.topk(2).indices, [arr(3, 6)]),
    "any_dim": (lambda x: (x > 1).any(1), lambda x: (x > 1).any(1), [arr(3, 4)]),
    "all_keep": (lambda x: (x > -2).all(0, keepdim=True),
                 lambda x: (x > -2).all(0, keepdim=True), [arr(3, 4)]),
    "any_item": (lambda x: hx.tensor((x > 0).any().item()),
                 lambda x: torch.tensor((x > 0).any().item()), [arr(3)]),
    "int_cumsum": (lambda x: (x > 0).cumsum(0), lambda x: (x > 0).cumsum(0), [arr(5)]),
    "float_floordiv": (lambda x: x // 0.3, lambda x: x // 0.3, [arr(6)]),
    "int_floordiv": (lambda x: (x * 10).long() // 3, lambda x: (x * 10).long() // 3,
                     [arr(6)]),
    "int_mod_neg": (lambda x: (x * 10).long() % -3, lambda x: (x * 10).long() % -3,
                    [arr(6)]),
}


def _run(case, lib, dtype="float64", device="cpu"):
    fh, ft, arrays = case
    if lib == "torch":
        ts = [torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True)
              for a in arrays]
        return ts, ft(*ts)
    hs = [hx.tensor(a, dtype=dtype, device=device, requires_grad=True) for a in arrays]
    return hs, fh(*hs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradients_match_pytorch(name):
    ts, tout = _run(CASES[name], "torch")
    hs, hout = _run(CASES[name], "hx")
    np.testing.assert_allclose(hout.detach().numpy(), tout.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    gy = np.random.default_rng(7).standard_normal(tuple(tout.shape))
    tout.backward(torch.tensor(gy))
    hout.backward(hx.tensor(gy))
    for h, t in zip(hs, ts):
        np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=name)


@pytest.mark.parametrize("name", sorted(NONDIFF))
def test_index_and_bool_results_match_pytorch(name):
    fh, ft, arrays = NONDIFF[name]
    got = fh(*(hx.tensor(a) for a in arrays))
    want = ft(*(torch.tensor(a) for a in arrays))
    assert got.dtype.name == str(want.dtype).replace("torch.", ""), name
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("name", ["cumsum", "cumprod_zero", "topk", "sort", "scatter",
                                  "einsum_bmm", "tril", "index_add", "norm_p3_dim", "repeat",
                                  "repeat_tuple", "masked_fill_", "scatter_", "scatter_add_"])
def test_gradcheck(name):
    fh, _, arrays = CASES[name]
    xs = [hx.tensor(a, requires_grad=True) for a in arrays]
    assert hx.autograd.gradcheck(fh, xs, name=name)


def test_multinomial_draws_follow_the_weights_and_the_seed():
    hx.manual_seed(3)
    probs = hx.tensor([[0.1, 0.0, 0.9], [0.5, 0.5, 0.0]])
    s = hx.multinomial(probs, 4000, replacement=True)
    assert s.shape == (2, 4000) and s.dtype is hx.int64
    counts = np.stack([np.bincount(r, minlength=3) for r in s.numpy()]) / 4000
    np.testing.assert_allclose(counts, probs.numpy(), atol=0.03)
    hx.manual_seed(3)
    assert (hx.multinomial(probs, 4000, replacement=True).numpy() == s.numpy()).all()
    draw = hx.multinomial(hx.tensor([1.0, 1.0, 1.0, 1.0]), 4)
    assert sorted(draw.tolist()) == [0, 1, 2, 3]  # without replacement: each once
    with pytest.raises(RuntimeError, match="replacement=True"):
        hx.multinomial(hx.tensor([1.0, 0.0]), 2)
    with pytest.raises(RuntimeError, match="non-negative"):
        hx.multinomial(hx.tensor([1.0, -1.0]), 1)


def test_errors_name_the_op_and_the_fix():
    x = hx.zeros(2, 3)
    with pytest.raises(IndexError, match="index_select: index 5 is out of bounds"):
        x.index_select(1, hx.tensor([5]))
    with pytest.raises(RuntimeError, match=r"topk: k \(4\)"):
        x.topk(4)
    with pytest.raises(ValueError, match="einsum: 'ij' names 2 dims"):
        hx.einsum("ij->i", hx.zeros(3))
    with pytest.raises(RuntimeError, match="tril: input needs at least 2 dims"):
        hx.zeros(3).tril()
    with pytest.raises(RuntimeError, match=r"repeat: sizes \(2,\) for a tensor of shape"):
        x.repeat(2)
    with pytest.raises(ValueError, match=r"repeat: sizes"):  # (an OpError: both kinds)
        x.repeat(2)
    with pytest.raises(TypeError, match="masked_fill: mask must be a bool tensor"):
        x.masked_fill_(x, 1.0)


def test_repeat_edge_shapes_and_masked_fill_in_place():
    for shape, sizes in (((), (2, 3)), ((0, 2), (3, 1)), ((2, 3), (0, 1)), ((1,), (1,))):
        a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        got, want = hx.tensor(a).repeat(*sizes), torch.tensor(a).repeat(*sizes)
        assert got.shape == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    x = hx.tensor([1.0, -2.0, 3.0])
    alias = x[1:]
    assert x.masked_fill_(x < 0, 0.0) is x
    assert alias.tolist() == [0.0, 3.0]  # written into the same storage


@pytest.mark.parametrize("dtype", ["bool", "int32", "int64", "float16", "bfloat16"])
def test_tril_triu_keep_the_dtype(dtype):
    # a causal mask is built as ones(t, t, dtype=bool).tril() and must stay a bool mask
    ones = np.ones((3, 4), np.float32)
    for op in ("tril", "triu"):
        got = getattr(hx.tensor(ones).to(dtype), op)(1)
        want = getattr(torch.tensor(ones).to(getattr(torch, dtype)), op)(1)
        assert got.dtype.name == dtype
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["sort", "topk", "cumsum", "cumsum_dim0", "tril", "triu_k",
                                  "einsum_attn", "scatter", "scatter_add", "index_select",
                                  "index_add", "norm_p3_dim", "max_dim", "logsumexp", "repeat",
                                  "masked_fill_", "scatter_", "scatter_add_"])
def test_gpu_equals_cpu(be, name):
    _, cpu = _run(CASES[name], "hx", "float32")
    hs, gpu = _run(CASES[name], "hx", "float32", "gpu")
    np.testing.assert_allclose(gpu.detach().cpu().numpy(), cpu.detach().numpy(), rtol=2e-5,
                               atol=2e-5, err_msg=name)
    gpu.sum().backward()
    assert all(h.grad is not None and h.grad.device.type == "gpu" for h in hs)


def test_movedim_isposinf_isneginf_and_shift_errors_match_pytorch():
    import math

    import torch

    a = np.arange(24.0).reshape(2, 3, 4)
    for src, dst in ((0, -1), ((0, 1), (2, 0)), (-1, 1), ((), ())):
        got, want = hx.tensor(a).movedim(src, dst), torch.tensor(a).movedim(src, dst)
        assert got.shape == tuple(want.shape) and got.tolist() == want.tolist()
    assert hx.moveaxis(hx.tensor(a), 2, 0).shape == (4, 2, 3)
    with pytest.raises(RuntimeError, match="movedim: source"):
        hx.tensor(a).movedim((0, 1), 2)
    with pytest.raises(RuntimeError, match="bitwise_left_shift: needs integer"):
        hx.tensor([1.0]) << 2  # (PyTorch raises RuntimeError; the error is a TypeError too)
    v = [-math.inf, 0.0, math.inf, math.nan]
    for name in ("isposinf", "isneginf"):
        assert getattr(hx, name)(hx.tensor(v)).tolist() == getattr(torch, name)(
            torch.tensor(v)).tolist()
