"""F.embedding_bag and nn.EmbeddingBag against PyTorch: the three modes over 1-D inputs
with offsets (empty bags among them), 2-D inputs, include_last_offset, padding_idx,
per_sample_weights, max_norm and scale_grad_by_freq; float64 gradients of the weight and
the per-sample weights (and gradcheck); strided inputs, index dtypes, PyTorch's errors and
the ones Haelixe adds where PyTorch's kernels disagree; the layer's constructor, repr,
state, from_pretrained; and the GPU against the CPU."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
F, TF = hx.nn.functional, torch.nn.functional
MODES = ("sum", "mean", "max")
WEIGHT = np.random.default_rng(0).standard_normal((7, 3))

#: (indices, offsets or None, options): bags of several lengths, empty ones, repeated
#: rows, padding among them
BAGS = [
    ([0, 2, 2, 5, 1, 2, 3, 3], [0, 3, 3, 6], {}),
    ([0, 2, 2, 5, 1, 2, 3, 3], [0, 3, 3, 6], {"padding_idx": 3}),
    ([0, 2, 2, 5, 1, 2, 3, 3], [0, 3, 3, 6, 8], {"include_last_offset": True,
                                                  "padding_idx": -5}),
    ([6, 6, 0, 4], [0, 0, 1, 4], {"include_last_offset": True}),
    ([[0, 2, 2], [5, 1, 6]], None, {}),
    ([[1, 1, 1], [5, 1, 1]], None, {"padding_idx": 1}),
    ([1, 1, 4], [0, 2], {"padding_idx": 1}),
    ([], [0, 0], {}),
    ([4], [0], {}),
]


def _run(lib, functional, idx, offsets, weight, mode, psw=None, dtype="int64", **kw):
    index = lib.tensor(np.array(idx, np.int64)).to(getattr(lib, dtype))
    offs = None if offsets is None else lib.tensor(np.array(offsets, np.int64)).to(
        getattr(lib, dtype))
    return functional.embedding_bag(index, weight, offs, mode=mode, per_sample_weights=psw,
                                    **kw)


def _compare(idx, offsets, mode, kw, with_psw=False, dtype="int64"):
    x, t = hx.tensor(WEIGHT, requires_grad=True), torch.tensor(WEIGHT, requires_grad=True)
    p = np.random.default_rng(1).standard_normal(np.shape(idx)) if with_psw else None
    ph = None if p is None else hx.tensor(p, requires_grad=True)
    pt = None if p is None else torch.tensor(p, requires_grad=True)
    got = _run(hx, F, idx, offsets, x, mode, ph, dtype, **kw)
    want = _run(torch, TF, idx, offsets, t, mode, pt, dtype, **kw)
    assert got.shape == tuple(want.shape) and got.dtype is hx.float64
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                               atol=1e-14)
    gy = np.random.default_rng(2).standard_normal(tuple(want.shape))
    got.backward(hx.tensor(gy))
    want.backward(torch.tensor(gy))
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)
    if p is not None:
        np.testing.assert_allclose(ph.grad.numpy(), pt.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("idx,offsets,kw", BAGS, ids=[f"{i}{o}{k}" for i, o, k in BAGS])
def test_embedding_bag_matches_pytorch_values_and_float64_gradients(idx, offsets, kw, mode):
    if not np.size(idx) and mode == "max":
        # (PyTorch's max over no indices at all reads past its buffers; Haelixe gives
        # the zeros of empty bags)
        got = _run(hx, F, idx, offsets, hx.tensor(WEIGHT), mode, **kw)
        np.testing.assert_array_equal(got.numpy(), np.zeros((len(offsets), 3)))
        return
    _compare(idx, offsets, mode, kw)


@pytest.mark.parametrize("idx,offsets,kw", BAGS[:7], ids=[f"{i}{o}{k}" for i, o, k in BAGS[:7]])
def test_per_sample_weights_scale_each_row_of_a_sum_as_pytorchs(idx, offsets, kw):
    _compare(idx, offsets, "sum", kw, with_psw=True)


@pytest.mark.parametrize("mode", MODES)
def test_int32_indices_and_offsets_of_another_index_dtype(mode):
    idx, offsets = [0, 2, 2, 5, 1, 2, 3, 3], [0, 3, 3, 6]
    _compare(idx, offsets, mode, {}, dtype="int32")
    got = F.embedding_bag(hx.tensor(idx, dtype=hx.int32), hx.tensor(WEIGHT),
                          hx.tensor(offsets), mode=mode)
    want = TF.embedding_bag(torch.tensor(idx, dtype=torch.int32), torch.tensor(WEIGHT),
                            torch.tensor(offsets), mode=mode)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_max_picks_the_first_of_tied_rows_as_pytorch():
    w = np.array([[1.0, 2.0], [1.0, 0.5], [0.0, 2.0], [-np.inf, -np.inf]])
    for idx in ([0, 1, 2], [2, 1, 0], [3, 3], [1, 3, 1]):
        x, t = hx.tensor(w, requires_grad=True), torch.tensor(w, requires_grad=True)
        got = F.embedding_bag(hx.tensor(idx), x, hx.tensor([0]), mode="max")
        want = TF.embedding_bag(torch.tensor(idx), t, torch.tensor([0]), mode="max")
        np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
        got.sum().backward()
        want.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy(), err_msg=str(idx))


def test_embedding_bag_reads_strided_weights_indices_and_per_sample_weights():
    base = np.random.default_rng(3).standard_normal((3, 7))
    idx = np.array([[0, 6, 2, 2], [5, 1, 3, 0]])
    p = np.random.default_rng(4).standard_normal((4, 2))
    for mode in MODES:
        kw = {"mode": mode}
        hp, tp = (None, None) if mode != "sum" else (hx.tensor(p).T, torch.tensor(p).T)
        got = F.embedding_bag(hx.tensor(idx)[:, ::-1], hx.tensor(base).T,
                              per_sample_weights=hp, **kw)
        want = TF.embedding_bag(torch.tensor(idx).flip(1), torch.tensor(base).T,
                                per_sample_weights=tp, **kw)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, err_msg=mode)


@pytest.mark.parametrize("mode", MODES)
def test_embedding_bag_passes_gradcheck_and_gradgradcheck(mode):
    idx, offsets = hx.tensor([0, 2, 2, 5, 1, 3]), hx.tensor([0, 3, 3])
    w = hx.tensor(np.random.default_rng(5).permutation(18).reshape(6, 3) * 0.3,
                  requires_grad=True)
    p = hx.tensor(np.linspace(-1.0, 2.0, 6), requires_grad=True)
    if mode == "sum":
        def f(v, q):
            return F.embedding_bag(idx, v, offsets, mode=mode, per_sample_weights=q)
        assert gradcheck(f, (w, p)) and gradgradcheck(f, (w, p))
    else:
        def g(v):
            return F.embedding_bag(idx, v, offsets, mode=mode, padding_idx=1)
        assert gradcheck(g, (w,)) and gradgradcheck(g, (w,))


def test_16_bit_weights_keep_their_dtype():
    idx, offsets = [0, 2, 2, 5, 1], [0, 2]
    for dtype in ("float16", "bfloat16", "float32"):
        for mode in MODES:
            got = F.embedding_bag(hx.tensor(idx), hx.tensor(WEIGHT, dtype=dtype),
                                  hx.tensor(offsets), mode=mode)
            want = TF.embedding_bag(torch.tensor(idx), torch.tensor(WEIGHT).to(
                getattr(torch, dtype)), torch.tensor(offsets), mode=mode)
            assert got.dtype.name == dtype
            np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=2e-2,
                                       atol=1e-2)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_scale_grad_by_freq_divides_each_rows_gradient_by_its_count(mode):
    # (PyTorch's CPU kernel scales rows by the wrong counts here, so the reference is
    # its documented rule: F.embedding's scaled gradient, then the bags' reduction)
    idx, offsets = [0, 2, 2, 5, 1, 2, 3, 3], [0, 3, 3, 6]
    for pad in (None, 3):
        x = hx.tensor(WEIGHT, requires_grad=True)
        got = F.embedding_bag(hx.tensor(idx), x, hx.tensor(offsets), mode=mode,
                              scale_grad_by_freq=True, padding_idx=pad)
        t = torch.tensor(WEIGHT, requires_grad=True)
        rows = TF.embedding(torch.tensor(idx), t, padding_idx=pad, scale_grad_by_freq=True)
        keep = torch.tensor([i != pad for i in idx], dtype=torch.float64)[:, None]
        bags = [(0, 3), (3, 3), (3, 6), (6, 8)]
        sums = [(rows * keep)[a:b].sum(0) for a, b in bags]
        counts = [max(float(keep[a:b].sum()), 1.0) for a, b in bags]
        want = torch.stack([s / c for s, c in zip(sums, counts)] if mode == "mean" else sums)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
        gy = np.random.default_rng(6).standard_normal((4, 3))
        got.backward(hx.tensor(gy))
        want.backward(torch.tensor(gy))
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_max_norm_renormalises_the_named_rows_in_place_as_pytorch():
    idx, offsets = [0, 2, 2, 5, 1], [0, 2]
    for norm_type, max_norm in ((2, 1.5), (1, 2.0), (float("inf"), 0.8)):
        for mode in MODES:
            w, v = WEIGHT * 3, WEIGHT * 3
            x, t = hx.tensor(w), torch.tensor(v)
            got = F.embedding_bag(hx.tensor(idx), x, hx.tensor(offsets), max_norm=max_norm,
                                  norm_type=norm_type, mode=mode)
            want = TF.embedding_bag(torch.tensor(idx), t, torch.tensor(offsets),
                                    max_norm=max_norm, norm_type=norm_type, mode=mode)
            np.testing.assert_allclose(x.numpy(), t.numpy(), rtol=1e-12)  # (the weight)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
            np.testing.assert_array_equal(x.numpy()[[3, 4, 6]], w[[3, 4, 6]])  # (unnamed)
    # a leaf that requires grad is renormalised too, its gradient that of the new rows
    x = hx.tensor(WEIGHT * 3, requires_grad=True)
    t = torch.tensor(WEIGHT * 3, requires_grad=True)
    F.embedding_bag(hx.tensor(idx), x, hx.tensor(offsets), max_norm=1.0).sum().backward()
    TF.embedding_bag(torch.tensor(idx), t, torch.tensor(offsets), max_norm=1.0).sum().backward()
    np.testing.assert_allclose(x.detach().numpy(), t.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)


def test_the_deprecated_argument_order_is_swapped_back_with_a_warning():
    idx, offsets = torch.tensor([0, 2, 1]), torch.tensor([0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = TF.embedding_bag(torch.tensor(WEIGHT), idx, offsets, mode="sum")
    with pytest.warns(UserWarning, match="argument order is \\(input, weight"):
        got = F.embedding_bag(hx.tensor(WEIGHT), hx.tensor(idx.numpy()),
                              hx.tensor(offsets.numpy()), mode="sum")
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


#: calls PyTorch refuses, as (indices, weight, offsets, options) of each library
REFUSED = [
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), m.tensor([1]), {}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), m.tensor([0, 3]), {}),
    lambda m: (m.tensor([0, 7]), m.ones(7, 3), m.tensor([0]), {}),
    lambda m: (m.tensor([0, -1]), m.ones(7, 3), m.tensor([0]), {}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), m.tensor([0]), {"padding_idx": 7}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), m.tensor([0]), {"padding_idx": -8}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), m.tensor([], dtype=m.int64),
               {"include_last_offset": True}),
    lambda m: (m.tensor([[0, 1]]), m.ones(7, 3), m.tensor([0]), {}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), None, {}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), m.tensor([[0]]), {}),
    lambda m: (m.ones(1, 2, 1).long(), m.ones(7, 3), None, {}),
    lambda m: (m.tensor([0, 1]), m.ones(21), m.tensor([0]), {}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), m.tensor([0]), {"mode": "min"}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), m.tensor([0]),
               {"mode": "max", "scale_grad_by_freq": True}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), m.tensor([0]), {"mode": "max", "sparse": True}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), m.tensor([0]),
               {"mode": "mean", "per_sample_weights": m.ones(2)}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), m.tensor([0]),
               {"mode": "sum", "per_sample_weights": m.ones(3)}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3), m.tensor([0]),
               {"mode": "sum", "per_sample_weights": m.ones(2, dtype=m.float64)}),
    lambda m: (m.tensor([0.0, 1.0]), m.ones(7, 3), m.tensor([0]), {}),
    lambda m: (m.tensor([0, 1]), m.ones(7, 3).long(), m.tensor([0]), {}),
    lambda m: (m.zeros(3, 0).long(), m.ones(7, 3), None, {}),
]


@pytest.mark.parametrize("make", REFUSED)
def test_embedding_bag_refuses_what_pytorch_refuses(make):
    idx, w, offsets, kw = make(torch)
    with pytest.raises(Exception) as theirs:
        TF.embedding_bag(idx, w, offsets, **kw)
    idx, w, offsets, kw = make(hx)
    with pytest.raises(type(theirs.value)) as ours:
        F.embedding_bag(idx, w, offsets, **kw)
    assert str(ours.value).startswith("embedding_bag: ")


def test_embedding_bag_refuses_what_pytorchs_kernels_disagree_on_and_sparse_gradients():
    w, idx = hx.ones(7, 3), hx.tensor([0, 1, 2, 3])
    # PyTorch's sum drops the indices past the last offset, its mean counts them, its
    # max takes them
    with pytest.raises(RuntimeError, match="the last offset is where the last bag ends, "
                                           "the input's length 4; got 2"):
        F.embedding_bag(idx, w, hx.tensor([0, 1, 2]), include_last_offset=True)
    # (its max takes decreasing offsets; its sum and mean refuse them only where the
    # memory read past the shorter bag happens to fail its index check: not every run)
    for mode in ("sum", "mean", "max"):
        with pytest.raises(RuntimeError, match=r"offsets must not decrease .* got \[0, 3, 1\]"):
            F.embedding_bag(idx, w, hx.tensor([0, 3, 1]), mode=mode)
    with pytest.raises(NotImplementedError, match="Haelixe has no sparse tensors; pass "
                                                  "sparse=False"):
        F.embedding_bag(idx, w, hx.tensor([0]), sparse=True)
    with pytest.raises(IndexError, match=r"index 1 of input takes value 9, which is not in "
                                         r"the valid range \[0, 7\)"):
        F.embedding_bag(hx.tensor([0, 9]), w, hx.tensor([0]))


# -- the layer ---------------------------------------------------------------------------
LAYER_ARGS = [((5, 3), {}), ((5, 3), {"mode": "sum", "padding_idx": -1}),
              ((6, 2), {"max_norm": 2.0, "norm_type": 1.0, "scale_grad_by_freq": True,
                        "mode": "max", "padding_idx": 0, "include_last_offset": True}),
              ((4, 4), {"mode": "sum", "norm_type": 2})]


@pytest.mark.parametrize("args,kw", LAYER_ARGS, ids=[str(k) for _, k in LAYER_ARGS])
def test_the_embedding_bag_layer_is_pytorchs(args, kw):
    ours, theirs = hx.nn.EmbeddingBag(*args, **kw), torch.nn.EmbeddingBag(*args, **kw)
    assert type(ours).__module__ == "haelixe.nn.fused_layers"
    assert repr(ours) == repr(theirs)
    for name in ("num_embeddings", "embedding_dim", "max_norm", "norm_type",
                 "scale_grad_by_freq", "mode", "sparse", "include_last_offset", "padding_idx"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    assert isinstance(ours.weight, hx.nn.Parameter) and ours.weight.shape == args
    assert ours.weight.dtype is hx.float32
    if ours.padding_idx is not None:
        assert not ours.weight.detach().numpy()[ours.padding_idx].any()


def test_the_embedding_bag_layer_computes_pytorchs_bags_with_its_weight():
    theirs = torch.nn.EmbeddingBag(7, 3, mode="sum", padding_idx=2)
    ours = hx.nn.EmbeddingBag(7, 3, mode="sum", padding_idx=2)
    ours.load_state_dict({"weight": theirs.weight.detach().numpy()})
    idx, offsets = [0, 2, 2, 5, 1, 6], [0, 3, 3]
    p = np.random.default_rng(7).standard_normal(6).astype(np.float32)
    got = ours(hx.tensor(idx), hx.tensor(offsets), hx.tensor(p))
    want = theirs(torch.tensor(idx), torch.tensor(offsets), torch.tensor(p))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-6)
    assert hx.nn.EmbeddingBag(7, 3)(hx.tensor([[0, 1], [2, 3]])).shape == (2, 3)
    assert str(inspect.signature(type(ours).forward)) == \
        "(self, input, offsets=None, per_sample_weights=None)"


def test_the_embedding_bag_layer_takes_a_weight_dtype_and_device():
    layer = hx.nn.EmbeddingBag(4, 2, dtype=hx.float64)
    assert layer.weight.dtype is hx.float64
    w = hx.tensor(WEIGHT)
    given = hx.nn.EmbeddingBag(7, 3, _weight=w)
    np.testing.assert_array_equal(given.weight.detach().numpy(), WEIGHT)
    with pytest.raises(AssertionError, match="does not match num_embeddings and "
                                             "embedding_dim"):
        hx.nn.EmbeddingBag(6, 3, _weight=w)
    with pytest.raises(AssertionError, match="padding_idx 5 must be within num_embeddings"):
        hx.nn.EmbeddingBag(5, 3, padding_idx=5)
    with pytest.raises(AssertionError):
        torch.nn.EmbeddingBag(5, 3, padding_idx=5)


def test_from_pretrained_freezes_the_given_embeddings_as_pytorchs():
    for freeze in (True, False):
        ours = hx.nn.EmbeddingBag.from_pretrained(hx.tensor(WEIGHT), freeze=freeze,
                                                  mode="max", padding_idx=1)
        theirs = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(WEIGHT), freeze=freeze,
                                                       mode="max", padding_idx=1)
        assert isinstance(ours, hx.nn.EmbeddingBag) and repr(ours) == repr(theirs)
        assert ours.weight.requires_grad is theirs.weight.requires_grad is (not freeze)
        idx = [[0, 1, 4], [6, 6, 2]]
        np.testing.assert_allclose(ours(hx.tensor(idx)).detach().numpy(),
                                   theirs(torch.tensor(idx)).detach().numpy(), rtol=1e-12)
    assert list(inspect.signature(hx.nn.EmbeddingBag.from_pretrained).parameters) == \
        list(inspect.signature(torch.nn.EmbeddingBag.from_pretrained).parameters)
    with pytest.raises(AssertionError, match="embeddings must be a 2-D tensor"):
        hx.nn.EmbeddingBag.from_pretrained(hx.ones(3))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_embedding_bag_on_the_gpu_equals_the_cpu(be, mode):
    idx, offsets = [0, 2, 2, 5, 1, 2, 3, 3], [0, 3, 3, 6]
    p = np.linspace(-1.0, 1.0, 8).astype(np.float32)
    out = []
    for device in ("cpu", "gpu"):
        w = hx.tensor(WEIGHT.astype(np.float32), device=device, requires_grad=True)
        q = hx.tensor(p, device=device, requires_grad=True) if mode == "sum" else None
        y = F.embedding_bag(hx.tensor(idx, device=device), w,
                            hx.tensor(offsets, device=device), mode=mode,
                            per_sample_weights=q, padding_idx=5)
        assert y.device.type == device
        y.square().sum().backward()
        out.append((y.detach().cpu().numpy(), w.grad.cpu().numpy(),
                    None if q is None else q.grad.cpu().numpy()))
    for c, g in zip(*out):
        if c is not None:
            np.testing.assert_allclose(g, c, rtol=1e-5, atol=1e-6)
