"""Recurrent layers with PyTorch's signatures, parameter names and initialisation: RNN,
LSTM (with proj_size), GRU and their cells.

A layer multiplies its input by ``weight_ih`` once for every time step together (one
matrix product over (seq, batch)), then runs the recurrence, one product by ``weight_hh``
and the gate arithmetic per step, the LSTM's and the GRU's as one fused node
(ops/fused.py: LSTMCellFn, GRUCellFn); backward forms the gradients of ``weight_hh`` and
``bias_hh`` once per sequence, not once per step. Packed sequences
(nn.utils.rnn.PackedSequence) are not supported: pad the batch and pass the padded
tensor."""

from __future__ import annotations

import math

from .. import creation
from ..amp import autocast_dtype, cast_inputs
from ..autograd.function import Function, wrap_grads
from ..autograd.mode import no_grad
from ..backends.base import K_ADD, Kernel
from ..ops.fused import GRUCellFn, LSTMCellFn
from ..ops.indexing import cat, stack
from ..tensor import Tensor
from . import functional as F
from .module import Module, Parameter

#: gate blocks per mode (rows of weight_ih = gates * hidden_size)
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


class _RecurrentProduct(Function):
    """h @ W^T + b (+ xp, the step's input projection, where given) for one time step of
    a recurrence whose steps share W and b, read through ``wt``, W^T made contiguous
    once for the sequence (BLAS multiplies a few rows by a contiguous matrix about twice
    as fast as through a transposed view, and the copy is shared by every step). The
    gradient of h is given per step; those of W and b once for the whole sequence, by
    the first step's node (made first, so it runs backward last), from every step's
    (gradient, h) on a shared tape: one large product instead of a small one per step,
    as PyTorch's fused RNN kernels do."""

    twice_differentiable = False
    label = "RecurrentProduct"

    @staticmethod
    def forward(ctx, h, w, b, xp, wt, tape, first):
        ctx.save_for_backward(h, w)
        ctx.tape, ctx.first, ctx.has_bias = tape, first, b is not None
        # the backend's kernels on the raw arrays: the layer checked the shapes, dtypes
        # and devices once for the sequence, and the product's output is fresh, so the
        # in-place adds need none of add_'s checks (a quarter of an LSTM step's time)
        h, wt = cast_inputs("matmul", h, wt)  # (autocast's matmul rule, as h @ wt has)
        be = h._be
        out = be.matmul(h._data, wt._data)
        for term in (b, xp):
            if term is not None:
                be.map_into(K_ADD, out, (term._data,))
        return out

    @staticmethod
    def backward(ctx, g):
        h, w = ctx.saved_tensors
        ctx.tape.append((g, h))
        dh = g @ w
        if not ctx.first:
            return dh, None, None, g, None, None, None
        gs, hs = zip(*ctx.tape)
        ctx.tape.clear()
        g_all = cat(gs) if len(gs) > 1 else gs[0]
        h_all = cat(hs) if len(hs) > 1 else hs[0]
        db = g_all.sum(0) if ctx.has_bias else None
        return dh, g_all.mT @ h_all, db, g, None, None, None


#: the Elman RNN's activations and their gradients from their outputs, as nn.RNN's
#: per-step tanh and relu nodes compute them
_K_TANH = Kernel("rnn_seq_tanh", lambda m, x: m.tanh(x), 1)
_K_RELU = Kernel("rnn_seq_relu", lambda m, x: m.maximum(x, 0), 1)
_K_DTANH = Kernel("rnn_seq_dtanh", lambda m, g, y: g * (1.0 - y * y), 2)
_K_DRELU = Kernel("rnn_seq_drelu", lambda m, g, y: g * (y > 0), 2)


class _RecurrentSequence(Function):
    """A whole recurrent layer in one direction, after its input projection: (xp (T, B,
    gates * n), every step's x @ W_ih^T + b_ih; h0 (B, n); c0 (LSTM) or None; W_hh,
    b_hh; wt, W_hh^T contiguous; the mode) -> every step's output stacked, (T, B, n),
    or for the LSTM (T, B, 2n), each step's h and c side by side (its cell's output).
    One node for the sequence, where a node per step for the product, the cell and the
    views of its output cost more than their kernels at a language model's sizes:
    forward and backward run the steps on the backend's raw arrays (per step a product,
    its adds and the cell's one pass), and backward forms the gradients of W_hh and
    b_hh once, from every step's, as PyTorch's fused kernels do."""

    twice_differentiable = False
    label = "RecurrentSequence"

    @staticmethod
    def forward(ctx, xp, h0, c0, w, b, wt, mode, reverse):
        be = xp._be
        xpd, wtd = xp._data, wt._data
        steps, n = xp.shape[0], h0.shape[-1]
        order = range(steps - 1, -1, -1) if reverse else range(steps)
        h, c = h0._data, None if c0 is None else c0._data
        outs, acts, prev = [None] * steps, [None] * steps, [None] * steps
        for t in order:
            x_t = be.reshape(be.narrow(xpd, 0, t, 1), xpd.shape[1:])
            pre = be.matmul(h, wtd)  # (fresh: the adds go into it in place)
            if b is not None:
                be.map_into(K_ADD, pre, (b._data,))
            prev[t] = (h, c)
            if mode == "GRU":  # (the candidate reads h's projection apart from x's)
                outs[t], act = be.gru_cell(x_t, pre, h)
                acts[t] = (act, pre)
                h = outs[t]
                continue
            be.map_into(K_ADD, pre, (x_t,))
            if mode == "LSTM":
                outs[t], acts[t] = be.lstm_cell(pre, c)
                h, c = be.narrow(outs[t], -1, 0, n), be.narrow(outs[t], -1, n, n)
            else:
                h = outs[t] = be.map(_K_RELU if mode == "RNN_RELU" else _K_TANH, [pre],
                                     pre.dtype)
        ctx.save_for_backward(w)
        ctx.outs, ctx.acts, ctx.prev, ctx.order, ctx.mode = outs, acts, prev, order, mode
        ctx.has_bias = b is not None
        ctx.label = {"LSTM": "LSTM", "GRU": "GRU"}.get(mode, "RNN")
        return be.join(outs, 0, True)

    @staticmethod
    def backward(ctx, g):  # (first order only: the backend's kernels on raw arrays)
        (w,) = ctx.saved_tensors
        gd = g._data
        be, wd, mode = w._be, w._data, ctx.mode
        outs, acts, prev = ctx.outs, ctx.acts, ctx.prev
        # per step the gradient of its product h @ W_hh^T + b_hh, and of its xp
        dpre, dxp = [None] * len(outs), [None] * len(outs)
        dh = dc = None
        for t in reversed(ctx.order):
            gy = be.reshape(be.narrow(gd, 0, t, 1), outs[t].shape)
            if dh is not None:  # what step t + 1 (in the steps' order) sends back
                gy = be.add(gy, dh if mode != "LSTM" else
                            be.join([dh, dc], dh.ndim - 1, False))
            if mode == "LSTM":
                dpre[t], dc = be.lstm_cell_backward(acts[t], prev[t][1], outs[t], gy)
                dh = be.matmul(dpre[t], wd)
            elif mode == "GRU":
                act, hp = acts[t]
                dxp[t], dpre[t], direct = be.gru_cell_backward(act, hp, prev[t][0], gy)
                dh = be.add(direct, be.matmul(dpre[t], wd))
            else:
                dpre[t] = be.map(_K_DRELU if mode == "RNN_RELU" else _K_DTANH,
                                 [gy, outs[t]], gy.dtype)
                dh = be.matmul(dpre[t], wd)
        every = be.join(dpre, 0, True)
        steps, batch, width = every.shape
        rows = be.reshape(every, (steps * batch, width))
        h_prev = be.join([h for h, _ in prev], 0, True)
        h_prev = be.reshape(h_prev, (steps * batch, h_prev.shape[-1]))
        dw = be.matmul(be.mT(rows), h_prev)
        db = be.sum(rows, (0,), False) if ctx.has_bias else None
        d_xp = be.join(dxp, 0, True) if mode == "GRU" else every
        return wrap_grads((d_xp, dh, dc, dw, db, None, None, None))


# -- one time step, given pre = x @ W_ih^T + b_ih + h @ W_hh^T + b_hh (GRU: the two
# projections xp and hp apart) -------------------------------------------------------------
def _rnn_step(pre, relu):
    return pre.relu() if relu else pre.tanh()


def _lstm_step(gates, c, w_hr):
    n = c.shape[-1]
    hc = LSTMCellFn.apply(gates, c)  # (h, c') side by side
    h, c = hc.narrow(-1, 0, n), hc.narrow(-1, n, n)
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_step(xp, hp, h):
    return GRUCellFn.apply(xp, hp, h)


def _add_parameters(module, shapes, dtype, device):
    for name, shape in shapes:
        setattr(module, name, Parameter(creation.empty(*shape, dtype=dtype, device=device)))


def _uniform_init(module):
    bound = 1.0 / math.sqrt(module.hidden_size)
    with no_grad():
        for p in module.parameters():
            p.uniform_(-bound, bound)


def _check_cell_input(op, x, input_size):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: input must be a tensor, got {type(x).__name__}")
    if x.ndim not in (1, 2) or x.shape[-1] != input_size:
        raise ValueError(f"{op}: expected input of shape (batch, {input_size}) or "
                         f"({input_size},), got {x.shape}")


class RNNBase(Module):
    """The shared machinery of RNN, LSTM and GRU (PyTorch's nn.RNNBase)."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be a positive integer, got "
                             f"{hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"{name}: num_layers must be a positive integer, got "
                             f"{num_layers!r}")
        if isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(f"{name}: dropout should be a number in range [0, 1] "
                             f"representing the probability of an element being zeroed, "
                             f"got {dropout!r}")
        if proj_size < 0:
            raise ValueError(f"{name}: proj_size should be a positive integer or zero to "
                             f"disable projections, got {proj_size}")
        if proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size has to be smaller than hidden_size "
                             f"({proj_size} >= {hidden_size})")
        if proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size argument is only supported for LSTM, "
                             f"not RNN or GRU")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bidirectional
        self.proj_size = proj_size
        dirs = 2 if bidirectional else 1
        out = proj_size or hidden_size
        gate = _GATES[mode] * hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else out * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                shapes = [("weight_ih" + sfx, (gate, layer_in)),
                          ("weight_hh" + sfx, (gate, out))]
                if bias:
                    shapes += [("bias_ih" + sfx, (gate,)), ("bias_hh" + sfx, (gate,))]
                if proj_size:
                    shapes.append(("weight_hr" + sfx, (proj_size, hidden_size)))
                _add_parameters(self, shapes, dtype, device)
                self._flat_weights_names += [pname for pname, _ in shapes]
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias uniform in +-1/sqrt(hidden_size), as PyTorch."""
        _uniform_init(self)

    @property
    def all_weights(self) -> list:
        return [[getattr(self, n) for n in self._flat_weights_names
                 if n.split("_", 2)[2] == sfx[1:]] for sfx in self._suffixes()]

    def _suffixes(self):
        for layer in range(self.num_layers):
            yield f"_l{layer}"
            if self.bidirectional:
                yield f"_l{layer}_reverse"

    def _weights(self, sfx):
        # by attribute: a pruned or normalized weight is a tensor recomputed by a hook
        def get(name):
            return getattr(self, name, None)

        return (get("weight_ih" + sfx), get("weight_hh" + sfx), get("bias_ih" + sfx),
                get("bias_hh" + sfx), get("weight_hr" + sfx))

    def flatten_parameters(self) -> None:
        """Nothing to do, as in PyTorch away from cuDNN ("otherwise, it's a no-op"):
        the weights are used where they are."""

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s

    # -- forward ------------------------------------------------------------------------
    def _check_input(self, x, hx):
        name = type(self).__name__
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: input must be a tensor, got {type(x).__name__}")
        if x.ndim not in (2, 3):
            raise ValueError(f"{name}: expected input to be 2-D (unbatched) or 3-D, got "
                             f"{x.ndim}-D input of shape {x.shape}")
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"{name}: input.size(-1) must be equal to input_size. "
                               f"Expected {self.input_size}, got {x.shape[-1]}")

    def _states(self, hx, batch, x, batched):
        """(h0, c0) as (layers * dirs, batch, size) tensors (c0 None but for LSTM)."""
        name = type(self).__name__
        dirs = 2 if self.bidirectional else 1
        out = self.proj_size or self.hidden_size
        lead = (self.num_layers * dirs, batch)
        if hx is None:
            h0 = creation.zeros(*lead, out, dtype=x.dtype, device=x.device)
            c0 = creation.zeros(*lead, self.hidden_size, dtype=x.dtype, device=x.device) \
                if self.mode == "LSTM" else None
            return h0, c0
        if self.mode == "LSTM":
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"{name}: hx must be a tuple (h_0, c_0) of tensors")
            h0, c0 = hx
        else:
            if not isinstance(hx, Tensor):
                raise TypeError(f"{name}: hx must be a tensor, got {type(hx).__name__}")
            h0, c0 = hx, None
        pairs = [(h0, out, "h_0" if c0 is not None else "hx")]
        if c0 is not None:
            pairs.append((c0, self.hidden_size, "c_0"))
        fixed = []
        for t, size, what in pairs:
            want = lead + (size,) if batched else (lead[0], size)
            if t.shape != want:
                raise RuntimeError(f"{name}: expected {what} of size {list(want)}, got "
                                   f"{list(t.shape)}")
            fixed.append(t if batched else t.unsqueeze(1))
        return fixed[0], (fixed[1] if c0 is not None else None)

    def forward(self, input, hx=None):
        self._check_input(input, hx)
        batched = input.ndim == 3
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        h0, c0 = self._states(hx, x.shape[1], x, batched)
        dirs = 2 if self.bidirectional else 1
        hs, cs = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                y, h, c = self._direction(x, h0[k], None if c0 is None else c0[k],
                                          self._weights(sfx), reverse=bool(d))
                outs.append(y)
                hs.append(h)
                cs.append(c)
            x = outs[0] if dirs == 1 else cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        h_n = stack(hs)
        state = (h_n, stack(cs)) if self.mode == "LSTM" else h_n
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        if not batched:
            x = x.squeeze(1)
            state = (state[0].squeeze(1), state[1].squeeze(1)) if self.mode == "LSTM" \
                else state.squeeze(1)
        return x, state

    def _direction(self, x, h, c, weights, reverse):
        """One layer in one direction over x (seq, batch, features): (outputs, h_n,
        c_n). The input projection of every step is one product."""
        w_ih, w_hh, b_ih, b_hh, w_hr = weights
        if not x.shape[0]:
            raise ValueError(f"{type(self).__name__}: the input has no time steps "
                             f"(sequence length 0)")
        xp = F.linear(x, w_ih, b_ih)
        mode, tape = self.mode, []
        with no_grad():
            w_hh_t = w_hh.mT.contiguous()
        if w_hr is None and autocast_dtype() is None and h.dtype is w_hh.dtype is xp.dtype \
                and (c is None or c.dtype is h.dtype) and (b_hh is None or b_hh.dtype is h.dtype):
            y = _RecurrentSequence.apply(xp, h, c, w_hh, b_hh, w_hh_t, mode, reverse)
            last = y[0 if reverse else -1]  # (the state after the last step taken)
            if mode != "LSTM":
                return y, last, None
            n = c.shape[-1]
            return y.narrow(-1, 0, n), last.narrow(-1, 0, n), last.narrow(-1, n, n)
        steps = xp.unbind(0)
        order = range(len(steps) - 1, -1, -1) if reverse else range(len(steps))
        outs = [None] * len(steps)
        for k, t in enumerate(order):
            # the GRU's candidate reads h's projection apart: its input's is not added
            pre = _RecurrentProduct.apply(h, w_hh, b_hh, None if mode == "GRU" else steps[t],
                                          w_hh_t, tape, k == 0)
            if mode == "LSTM":
                h, c = _lstm_step(pre, c, w_hr)
            elif mode == "GRU":
                h = _gru_step(steps[t], pre, h)
            else:
                h = _rnn_step(pre, mode == "RNN_RELU")
            outs[t] = h
        return stack(outs), h, c


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu), as
    torch.nn.RNN: (input, h_0) -> (output, h_n)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}; select from "
                             f"'tanh' or 'relu'")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU",
                         input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s + (", nonlinearity='relu'" if self.nonlinearity == "relu" else "")


class LSTM(RNNBase):
    """Long short-term memory, gates (i, f, g, o) as torch.nn.LSTM: (input, (h_0, c_0))
    -> (output, (h_n, c_n)); ``proj_size`` projects h by weight_hr."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit, gates (r, z, n) as torch.nn.GRU: (input, h_0) -> (output,
    h_n)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)


# -- cells ----------------------------------------------------------------------------------
class RNNCellBase(Module):
    def __init__(self, input_size: int, hidden_size: int, bias: bool, gates: int,
                 device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        shapes = [("weight_ih", (gates * hidden_size, input_size)),
                  ("weight_hh", (gates * hidden_size, hidden_size))]
        if bias:
            shapes += [("bias_ih", (gates * hidden_size,)), ("bias_hh", (gates * hidden_size,))]
        _add_parameters(self, shapes, dtype, device)
        if not bias:
            self.bias_ih = self.bias_hh = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every weight and bias uniform in +-1/sqrt(hidden_size), as PyTorch."""
        _uniform_init(self)

    def _prepare(self, x, hx, n_states):
        """(batched x, states as (batch, hidden) tensors, whether x was batched)."""
        name = type(self).__name__
        _check_cell_input(name, x, self.input_size)
        batched = x.ndim == 2
        x = x if batched else x.unsqueeze(0)
        if hx is None:
            zeros = creation.zeros(x.shape[0], self.hidden_size, dtype=x.dtype,
                                   device=x.device)
            return x, [zeros] * n_states, batched
        states = list(hx) if n_states == 2 else [hx]
        want = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        for s in states:
            if not isinstance(s, Tensor) or s.shape != want:
                got = s.shape if isinstance(s, Tensor) else type(s).__name__
                raise RuntimeError(f"{name}: expected hidden state of shape {want}, got "
                                   f"{got}")
        return x, [s if batched else s.unsqueeze(0) for s in states], batched

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        return s + ("" if self.bias else ", bias=False")


class RNNCell(RNNCellBase):
    """One step of nn.RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r}; select "
                             f"from 'tanh' or 'relu'")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, (h,), batched = self._prepare(input, hx, 1)
        pre = F.linear(x, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh,
                                                                    self.bias_hh)
        h = _rnn_step(pre, self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One step of nn.LSTM: (input, (h, c)) -> (h', c')."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        x, (h, c), batched = self._prepare(input, hx, 2)
        gates = F.linear(x, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh,
                                                                      self.bias_hh)
        h, c = _lstm_step(gates, c, None)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One step of nn.GRU: (input, h) -> h'."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, (h,), batched = self._prepare(input, hx, 1)
        h = _gru_step(F.linear(x, self.weight_ih, self.bias_ih),
                      F.linear(h, self.weight_hh, self.bias_hh), h)
        return h if batched else h.squeeze(0)


__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell",
           "GRUCell"]
