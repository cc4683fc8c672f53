"""nn.MultiheadAttention, nn.Transformer and its encoder/decoder layers against PyTorch's
with the same weights: parameter names, outputs, attention weights and gradients, with
bool and float masks, key padding, batch_first, norm_first and kdim/vdim."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")

DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


def _same_weights(mine, ref, device="cpu"):
    assert [(n, tuple(p.shape)) for n, p in mine.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in ref.named_parameters()]
    if next(ref.parameters()).dtype == torch.float64:
        mine = mine.double()
    mine.load_state_dict({n: hx.tensor(p.detach().numpy()) for n, p in
                          ref.state_dict().items()})
    return mine.to(device)


def _close(a, b, tol, what=""):
    np.testing.assert_allclose(np.asarray(a.detach().numpy(), np.float64),
                               b.detach().double().numpy(), rtol=tol, atol=tol,
                               err_msg=what)


def _inputs(rng, shapes, dtype, device):
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    return ([hx.tensor(a, device=device, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def _mask(m, device):
    return None if m is None else hx.tensor(m.numpy(), device=device)


def _check_backward(outs_h, outs_t, leaves_h, leaves_t, mine, ref, tol):
    rng = np.random.default_rng(9)
    ws = [rng.standard_normal(tuple(o.shape)) for o in outs_t]
    sum((o * torch.tensor(w, dtype=o.dtype)).sum() for o, w in zip(outs_t, ws)).backward()
    sum((o * hx.tensor(w.astype(o.dtype.name),
                       device=outs_h[0].device)).sum()
        for o, w in zip(outs_h, ws)).backward()
    for a, b in zip(leaves_h, leaves_t):
        _close(a.grad, b.grad, tol, "input grad")
    for (n, p), (_, q) in zip(mine.named_parameters(), ref.named_parameters()):
        _close(p.grad, q.grad, tol, f"grad of {n}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("need_weights, average", [(True, True), (True, False),
                                                   (False, True)])
def test_multihead_self_attention_with_masks_matches_pytorch(device, need_weights,
                                                             average, request):
    if device == "gpu":
        request.getfixturevalue("be")
    dtype, tol = (np.float64, 1e-9) if device == "cpu" else (np.float32, 1e-4)
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(8, 2)
    ref = ref.double() if dtype == np.float64 else ref
    mine = _same_weights(hx.nn.MultiheadAttention(8, 2), ref, device)
    rng = np.random.default_rng(0)
    (x,), (tx,) = _inputs(rng, [(5, 3, 8)], dtype, device)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=tx.dtype)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    for attn_mask, kpm in ((None, None), (causal, None), (causal != 0, pad), (None, pad)):
        ot, wt = ref(tx, tx, tx, key_padding_mask=kpm, attn_mask=attn_mask,
                     need_weights=need_weights, average_attn_weights=average)
        oh, wh = mine(x, x, x, key_padding_mask=_mask(kpm, device),
                      attn_mask=_mask(attn_mask, device), need_weights=need_weights,
                      average_attn_weights=average)
        _close(oh, ot, tol, "output")
        assert (wh is None) == (wt is None)
        if wt is not None:
            _close(wh, wt, tol, "weights")
    _check_backward([oh], [ot], [x], [tx], mine, ref, tol)


def test_multihead_cross_attention_kdim_vdim_batch_first_and_unbatched():
    torch.manual_seed(1)
    ref = torch.nn.MultiheadAttention(6, 3, kdim=4, vdim=5, batch_first=True).double()
    mine = _same_weights(hx.nn.MultiheadAttention(6, 3, kdim=4, vdim=5, batch_first=True),
                         ref)
    rng = np.random.default_rng(1)
    hs, ts = _inputs(rng, [(2, 3, 6), (2, 7, 4), (2, 7, 5)], np.float64, "cpu")
    mask3 = torch.tensor(rng.standard_normal((2 * 3, 3, 7)))
    ot, wt = ref(*ts, attn_mask=mask3)
    oh, wh = mine(*hs, attn_mask=_mask(mask3, "cpu"))
    _close(oh, ot, 1e-9)
    _close(wh, wt, 1e-9)
    _check_backward([oh, wh], [ot, wt], hs, ts, mine, ref, 1e-9)
    ot, wt = ref(ts[0][0], ts[1][0], ts[2][0])
    oh, wh = mine(hs[0][0], hs[1][0], hs[2][0])
    _close(oh, ot, 1e-9)
    _close(wh, wt, 1e-9)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_first, activation", [(False, "relu"), (True, "gelu")])
def test_transformer_matches_pytorch(device, norm_first, activation, request):
    if device == "gpu":
        request.getfixturevalue("be")
    dtype, tol = (np.float64, 1e-8) if device == "cpu" else (np.float32, 2e-4)
    torch.manual_seed(2)
    kw = {"d_model": 8, "nhead": 2, "num_encoder_layers": 2, "num_decoder_layers": 2,
          "dim_feedforward": 16, "dropout": 0.0, "norm_first": norm_first,
          "activation": activation}
    ref = torch.nn.Transformer(**kw)
    ref = ref.double() if dtype == np.float64 else ref
    mine = _same_weights(hx.nn.Transformer(**kw), ref, device)
    rng = np.random.default_rng(2)
    hs, ts = _inputs(rng, [(6, 2, 8), (4, 2, 8)], dtype, device)
    tgt_mask = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=ts[0].dtype)
    pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    ot = ref(*ts, tgt_mask=tgt_mask, src_key_padding_mask=pad,
             memory_key_padding_mask=pad)
    oh = mine(*hs, tgt_mask=_mask(tgt_mask, device), src_key_padding_mask=_mask(pad, device),
              memory_key_padding_mask=_mask(pad, device))
    _close(oh, ot, tol, "output")
    _check_backward([oh], [ot], hs, ts, mine, ref, tol)


def test_encoder_stack_as_a_language_model_uses_it_matches_pytorch():
    torch.manual_seed(3)
    make = lambda nn: nn.TransformerEncoder(  # noqa: E731
        nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True), 2)
    ref = make(torch.nn).double()
    mine = _same_weights(make(hx.nn), ref)
    rng = np.random.default_rng(3)
    hs, ts = _inputs(rng, [(2, 5, 8)], np.float64, "cpu")
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
    mine_mask = hx.nn.Transformer.generate_square_subsequent_mask(5, dtype="float64")
    np.testing.assert_array_equal(mine_mask.numpy(), mask.numpy())
    ot = ref(ts[0], mask=mask)
    oh = mine(hs[0], mask=mine_mask)
    _close(oh, ot, 1e-9)
    _check_backward([oh], [ot], hs, ts, mine, ref, 1e-9)


def test_transformer_can_be_subclassed_as_word_language_model_does():
    class Model(hx.nn.Transformer):
        def __init__(self, ntoken, ninp):
            super().__init__(d_model=ninp, nhead=2, dim_feedforward=16,
                             num_encoder_layers=1)
            self.input_emb = hx.nn.Embedding(ntoken, ninp)
            self.decoder = hx.nn.Linear(ninp, ntoken)

        def forward(self, src):
            mask = self.generate_square_subsequent_mask(len(src))
            return self.decoder(self.encoder(self.input_emb(src), mask=mask))

    model = Model(11, 8)
    out = model(hx.tensor(np.arange(12).reshape(6, 2) % 11))
    assert out.shape == (6, 2, 11)
    out.sum().backward()
    assert model.encoder.layers[0].self_attn.in_proj_weight.grad is not None


def test_bad_attention_arguments_raise_clear_errors():
    with pytest.raises(AssertionError, match="divisible by num_heads"):
        hx.nn.MultiheadAttention(6, 4)
    mha = hx.nn.MultiheadAttention(4, 2)
    x = hx.randn(3, 2, 4)
    with pytest.raises(RuntimeError, match="2D attn_mask"):
        mha(x, x, x, attn_mask=hx.zeros(2, 3))
    with pytest.raises(AssertionError, match="key_padding_mask"):
        mha(x, x, x, key_padding_mask=hx.zeros(3, 3, dtype="bool"))
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(AssertionError, match="expecting query of 4 features"):
        mha(hx.randn(3, 2, 5), x, x)
    with pytest.raises(RuntimeError, match="activation should be relu/gelu"):
        hx.nn.TransformerEncoderLayer(4, 2, activation="tanh")
