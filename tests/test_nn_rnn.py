"""nn.RNN, nn.LSTM, nn.GRU and their cells against PyTorch's with the same weights:
parameter names and shapes, outputs, final states and every gradient, over layers,
directions, batch_first, unbatched inputs, projections and given initial states."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd.graph import graph

torch = pytest.importorskip("torch")

DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


def _copy_weights(mine, ref, device="cpu"):
    names = [n for n, _ in ref.named_parameters()]
    assert [n for n, _ in mine.named_parameters()] == names
    for (n, p), (_, q) in zip(mine.named_parameters(), ref.named_parameters()):
        assert p.shape == tuple(q.shape), n
    state = {n: hx.tensor(q.detach().numpy().astype(np.float64)) for n, q in
             ref.named_parameters()}
    mine.load_state_dict(state)
    return mine.to(device)


def _close(a, b, tol, what):
    np.testing.assert_allclose(np.asarray(a.detach().numpy(), np.float64),
                               b.detach().double().numpy(), rtol=tol, atol=tol,
                               err_msg=what)


def _flatten(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flatten(o)]
    return [out]


def _run_both(make, x_shape, states, device, dtype=np.float64, seed=0, **call):
    """Build the module in both libraries with the same weights, run it forward and
    backward (a weighted sum of every output) and compare everything."""
    torch.manual_seed(seed)
    ref = make(torch.nn).double() if dtype == np.float64 else make(torch.nn)
    mine = make(hx.nn)
    mine = _copy_weights(mine.double() if dtype == np.float64 else mine, ref, device)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    st = [rng.standard_normal(s).astype(dtype) for s in states]
    tx = torch.tensor(x, requires_grad=True)
    ts = [torch.tensor(s, requires_grad=True) for s in st]
    hxx = hx.tensor(x, device=device, requires_grad=True)
    hs = [hx.tensor(s, device=device, requires_grad=True) for s in st]

    def pack(v):
        if not v:
            return ()
        return ((v[0], v[1]) if len(v) == 2 else v[0],)

    out_t = _flatten(ref(tx, *pack(ts)))
    out_h = _flatten(mine(hxx, *pack(hs)))
    tol = 1e-9 if dtype == np.float64 else 2e-5
    assert len(out_t) == len(out_h)
    weights = [rng.standard_normal(tuple(o.shape)) for o in out_t]
    for a, b in zip(out_h, out_t):
        assert a.shape == tuple(b.shape)
        _close(a, b, tol, "output")
    sum(((o * torch.tensor(w, dtype=o.dtype)).sum() for o, w in zip(out_t, weights))
        ).backward()
    sum(((o * hx.tensor(w.astype(dtype), device=device)).sum()
         for o, w in zip(out_h, weights))).backward()
    _close(hxx.grad, tx.grad, tol, "input grad")
    for a, b in zip(hs, ts):
        _close(a.grad, b.grad, tol, "state grad")
    for (n, p), (_, q) in zip(mine.named_parameters(), ref.named_parameters()):
        _close(p.grad, q.grad, tol, f"grad of {n}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind, kwargs", [
    ("RNN", {}), ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
    ("RNN", {"bidirectional": True, "bias": False}),
    ("LSTM", {}), ("LSTM", {"num_layers": 2, "bidirectional": True}),
    ("LSTM", {"proj_size": 3, "num_layers": 2}),
    ("GRU", {}), ("GRU", {"num_layers": 2, "bidirectional": True}),
])
def test_recurrent_layer_matches_pytorch(kind, kwargs, device, request):
    if device == "gpu":
        request.getfixturevalue("be")
    dtype = np.float64 if device == "cpu" else np.float32
    _run_both(lambda nn: getattr(nn, kind)(4, 5, **kwargs), (6, 3, 4), [], device, dtype)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_batch_first_given_states_and_unbatched_inputs_match_pytorch(kind):
    dirs, layers, h = 2, 2, 5
    out = 3 if kind == "LSTM" else h
    kw = {"num_layers": layers, "bidirectional": True, "batch_first": True}
    if kind == "LSTM":
        kw["proj_size"] = 3
    states = [(dirs * layers, 2, out)] + ([(dirs * layers, 2, h)] if kind == "LSTM" else [])
    _run_both(lambda nn: getattr(nn, kind)(4, h, **kw), (2, 7, 4), states, "cpu")
    states = [(dirs * layers, out)] + ([(dirs * layers, h)] if kind == "LSTM" else [])
    _run_both(lambda nn: getattr(nn, kind)(4, h, **kw), (7, 4), states, "cpu")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_pytorch(kind, device, request):
    if device == "gpu":
        request.getfixturevalue("be")
    dtype = np.float64 if device == "cpu" else np.float32
    n = 2 if kind == "LSTMCell" else 1
    _run_both(lambda nn: getattr(nn, kind)(4, 5), (3, 4), [(3, 5)] * n, device, dtype)
    _run_both(lambda nn: getattr(nn, kind)(4, 5), (4,), [(5,)] * n, device, dtype)
    _run_both(lambda nn: getattr(nn, kind)(4, 5, bias=False), (3, 4), [], device, dtype)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_compiled_cells_match_pytorch(kind):
    """With the CPU's compiled cell kernels loaded (where numba is installed), the layer
    in float64 and float32 against PyTorch's."""
    from haelixe.backends import cpu_jit

    getattr(hx.nn, kind)(4, 5)(hx.randn(2, 3, 4))[0].sum().backward()
    getattr(hx.nn, kind)(4, 5).double()(hx.randn(2, 3, 4).double())[0].sum().backward()
    cpu_jit.wait()
    for dtype in (np.float64, np.float32):
        _run_both(lambda nn: getattr(nn, kind)(4, 5, num_layers=2), (6, 3, 4), [], "cpu",
                  dtype)


def test_float32_lstm_language_model_step_matches_pytorch():
    _run_both(lambda nn: nn.LSTM(8, 16, num_layers=2), (12, 4, 8), [], "cpu",
              np.float32)


def test_parameter_names_shapes_and_init_follow_pytorch():
    for kind, kw in (("LSTM", {"num_layers": 2, "bidirectional": True, "proj_size": 2}),
                     ("GRU", {"num_layers": 3}), ("RNN", {"bias": False})):
        mine, ref = getattr(hx.nn, kind)(3, 4, **kw), getattr(torch.nn, kind)(3, 4, **kw)
        assert [(n, p.shape) for n, p in mine.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in ref.named_parameters()]
        for p in mine.parameters():
            assert float(p.abs().max()) <= 0.5  # uniform in +-1/sqrt(4)
        assert len(mine.all_weights) == len(ref.all_weights)
        assert repr(mine).replace("hx.", "") == repr(ref)
    cell = hx.nn.LSTMCell(3, 4)
    assert [n for n, _ in cell.named_parameters()] == \
        [n for n, _ in torch.nn.LSTMCell(3, 4).named_parameters()]


def test_dropout_between_layers_only_in_training():
    hx.manual_seed(0)
    lstm = hx.nn.LSTM(3, 4, num_layers=2, dropout=0.5).double()
    x = hx.randn(5, 2, 3, dtype="float64")
    a, _ = lstm(x)
    b, _ = lstm(x)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())  # a new dropout mask each call
    lstm.eval()
    c, _ = lstm(x)
    d, _ = lstm(x)
    np.testing.assert_array_equal(c.detach().numpy(), d.detach().numpy())


def test_bad_inputs_and_arguments_raise_clear_errors():
    lstm = hx.nn.LSTM(3, 4)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
        lstm(hx.randn(5, 2, 7))
    with pytest.raises(RuntimeError, match="expected h_0 of size \\[1, 2, 4\\]"):
        lstm(hx.randn(5, 2, 3), (hx.zeros(1, 3, 4), hx.zeros(1, 2, 4)))
    with pytest.raises(TypeError, match="tuple"):
        lstm(hx.randn(5, 2, 3), hx.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="4-D input"):
        lstm(hx.randn(1, 5, 2, 3))
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        hx.nn.RNNBase("GRU", 3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        hx.nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="nonlinearity"):
        hx.nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="dropout"):
        hx.nn.GRU(3, 4, dropout=2.0)
    with pytest.raises(RuntimeError, match="hidden state of shape"):
        hx.nn.GRUCell(3, 4)(hx.randn(2, 3), hx.zeros(3, 4))
    with pytest.raises(ValueError, match="expected input of shape"):
        hx.nn.RNNCell(3, 4)(hx.randn(2, 5))


@pytest.mark.parametrize("kind", ["GRU", "LSTM", "RNN"])
def test_sequence_gradients_of_weight_hh_survive_retain_graph_and_partial_outputs(kind):
    torch.manual_seed(4)
    ref = getattr(torch.nn, kind)(3, 4).double()
    mine = _copy_weights(getattr(hx.nn, kind)(3, 4).double(), ref)
    x = np.random.default_rng(4).standard_normal((6, 2, 3))
    out_t, _ = ref(torch.tensor(x))
    out_h, _ = mine(hx.tensor(x))
    out_t[2].sum().backward(retain_graph=True)  # a middle step only: later steps unused
    out_h[2].sum().backward(retain_graph=True)
    out_t.sum().backward()
    out_h.sum().backward()
    for (n, p), (_, q) in zip(mine.named_parameters(), ref.named_parameters()):
        _close(p.grad, q.grad, 1e-10, f"grad of {n}")
    with pytest.raises(RuntimeError, match="create_graph"):
        out, _ = mine(hx.tensor(x))
        hx.autograd.grad(out.sum(), mine.weight_hh_l0, create_graph=True)


@pytest.mark.parametrize("kind, kwargs, autocast", [
    ("GRU", {}, True), ("LSTM", {}, True), ("LSTM", {"proj_size": 2}, False)])
def test_steps_left_to_their_own_nodes_record_one_fused_cell_node_each(kind, kwargs,
                                                                       autocast):
    # under autocast, and for an LSTM with a projection, each step is its own nodes, and
    # the gate arithmetic of a step is one node (LSTMCell, GRUCell), not a node per op
    layer = getattr(hx.nn, kind)(3, 4, **kwargs)
    with hx.autocast(dtype=hx.bfloat16, enabled=autocast):
        y, _ = layer(hx.randn(5, 2, 3))
    ops = Counter(n.op for n in graph(y).nodes)
    assert ops[kind + "Cell"] == 5
    assert not {"Sigmoid", "Tanh", "Mul", "Add", "Sub"} & set(ops)


@pytest.mark.parametrize("kind, op", [("LSTM", "LSTM"), ("GRU", "GRU"), ("RNN", "RNN")])
def test_a_layer_is_one_node_per_direction(kind, op):
    # the whole recurrence of a layer and direction is one node: no node per step
    out = getattr(hx.nn, kind)(3, 4, num_layers=2, bidirectional=True)(hx.randn(5, 2, 3))
    ops = Counter(n.op for n in graph(*_flatten(out)).nodes)
    assert ops[op] == 4
    assert not {"LSTMCell", "GRUCell", "RecurrentProduct", "Sigmoid", "Tanh"} & set(ops)
    assert ops["Slice"] <= 4 * 4  # per direction: its outputs, last step, h and c views


@pytest.mark.parametrize("kw, x_shape, states", [
    ({"num_layers": 2, "bidirectional": True, "batch_first": True}, (2, 7, 4),
     [(4, 2, 5)] * 2),
    ({"num_layers": 2, "bidirectional": True}, (7, 4), [(4, 5)] * 2),  # unbatched
    ({"bias": False}, (6, 3, 4), [(1, 3, 5)] * 2),
    ({}, (1, 3, 4), []),  # one time step
])
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN", "RNN relu"])
def test_sequence_node_matches_pytorch(kind, kw, x_shape, states):
    """The one-node layers against PyTorch in float64 and float32 (outputs, states and
    every gradient) with given states, batch_first, unbatched input, no bias, one step."""
    if kind != "LSTM":
        states = states[:1]
    if kind == "RNN relu":
        kind, kw = "RNN", {**kw, "nonlinearity": "relu"}
    _run_both(lambda nn: getattr(nn, kind)(4, 5, **kw), x_shape, states, "cpu")
    _run_both(lambda nn: getattr(nn, kind)(4, 5, **kw), x_shape, states, "cpu", np.float32,
              seed=1)
