"""ATen's native forms of the norms and dropout (torch.native_layer_norm,
native_batch_norm, native_group_norm, native_dropout), its RNN cells (torch.lstm_cell,
gru_cell, rnn_tanh_cell, rnn_relu_cell) and its embedding_bag: what the nn functions
return with the extra results ATen's kernels give (the statistics, the mask, the bags'
bookkeeping). Each composes F's op, or the step nn.LSTMCell and its kin take, so the
gradients are theirs. nn is imported at the first call, so ``import haelixe`` stays
light."""

from __future__ import annotations

import numpy as np

from . import creation
from .autograd.mode import STATE, no_grad
from .dtype import bool_
from .errors import OpError, OpTypeError
from .ops.registry import declare
from .tensor import Tensor


def _F():
    from .nn import functional
    return functional


def _statistics(x, dims, eps):
    """The mean and 1 / sqrt(biased variance + eps) of x over ``dims`` (kept), computed
    in float32 for a 16-bit x and returned in x's dtype, as ATen's CPU kernels do."""
    wide = x.float() if x.dtype.itemsize == 2 else x
    mean = wide.mean(dims, keepdim=True)
    rstd = (wide.var(dims, correction=0, keepdim=True) + eps).rsqrt()
    return mean.to(x.dtype), rstd.to(x.dtype)


def _float_input(op, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: input must be a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise OpTypeError(f"{op}: not implemented for {x.dtype.name} tensors (as in "
                          f"PyTorch); convert with .float() first")


# -- norms ----------------------------------------------------------------------------------
def native_layer_norm(input, normalized_shape, weight, bias, eps):  # noqa: A002
    """native_layer_norm(input, normalized_shape, weight, bias, eps)
    -> (Tensor, Tensor, Tensor)

    (F.layer_norm(input, normalized_shape, weight, bias, eps), mean, rstd): the mean
    and 1 / sqrt(variance + eps) of each normalised slice, of shape input.shape[:axis]
    + (1,) * len(normalized_shape), without gradients (as PyTorch's)."""
    _float_input("native_layer_norm", input)
    out = _F().layer_norm(input, normalized_shape, weight, bias, eps)
    n = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    with no_grad():
        mean, rstd = _statistics(input, tuple(range(input.ndim - n, input.ndim)), eps)
    return out, mean, rstd


def native_batch_norm(input, weight, bias, running_mean, running_var, training,  # noqa: A002
                      momentum, eps):
    """native_batch_norm(input, weight, bias, running_mean, running_var, training,
    momentum, eps) -> (Tensor, Tensor, Tensor)

    (F.batch_norm's output, save_mean, save_invstd): while training, each channel's
    batch mean and 1 / sqrt(biased variance + eps) (the running statistics are updated
    in place, as F.batch_norm does); in evaluation two empty tensors, as PyTorch's."""
    _float_input("native_batch_norm", input)
    out = _F().batch_norm(input, running_mean, running_var, weight, bias, training,
                          momentum, eps)
    if not training:
        return out, input.new_empty(0), input.new_empty(0)
    with no_grad():
        dims = (0,) + tuple(range(2, input.ndim))
        mean, invstd = _statistics(input, dims, eps)
    return out, mean.reshape(-1), invstd.reshape(-1)


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):  # noqa: A002,N803
    """native_group_norm(input, weight, bias, N, C, HxW, group, eps)
    -> (Tensor, Tensor, Tensor)

    (F.group_norm(input, group, weight, bias, eps), mean, rstd) for input of N samples,
    C channels and HxW positions per channel: mean and rstd (N, group), differentiable
    (PyTorch's count only beside a gradient of the output: alone they give none)."""
    op = "native_group_norm"
    _float_input(op, input)
    if input.numel() != N * C * HxW:
        raise OpError(f"{op}: expected input.numel() == N * C * HxW, got {input.numel()} "
                      f"elements (shape {input.shape}) for N={N}, C={C}, HxW={HxW}")
    if input.ndim < 2 or tuple(input.shape[:2]) != (N, C):
        raise OpError(f"{op}: N={N} and C={C} must be the input's first two dims, got "
                      f"shape {input.shape}")
    if group < 1 or C % group:
        raise OpError(f"{op}: Expected number of channels in input to be divisible by "
                      f"num_groups, but got input of shape {input.shape} and "
                      f"num_groups={group}")
    out = _F().group_norm(input, group, weight, bias, eps)
    mean, rstd = _statistics(input.reshape(N, group, -1), (2,), eps)
    return out, mean.reshape(N, group), rstd.reshape(N, group)


# -- dropout ---------------------------------------------------------------------------------
def native_dropout(input, p, train):  # noqa: A002
    """native_dropout(input, p, train) -> (Tensor, Tensor)

    (output, mask): while training (``train`` True or None) each element kept with
    probability 1 - p (mask True) and scaled by 1 / (1 - p), zeroed otherwise (p = 1
    zeroes all); else a copy of input and a mask of True. The gradient is the mask's
    scaling, through the product."""
    if not isinstance(input, Tensor):
        raise TypeError(f"native_dropout: input must be a Tensor, got {type(input).__name__}")
    if input.numel() == 0:  # (PyTorch returns the input itself, and an empty mask)
        return input, input.new_empty(input.shape)
    if train is None or train:
        if not 0.0 <= p <= 1.0:
            raise OpError(f"native_dropout: p must be in [0, 1], got {p}")
        if not input.dtype.is_floating_point:
            raise OpTypeError(f"native_dropout: result type float can't be cast to the "
                              f"input's {input.dtype.name} (as in PyTorch); convert with "
                              f".float() first, or pass train=False")
        mask = creation.rand(*input.shape, device=input.device) >= p
        scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
        return input * mask * scale, mask
    return input.clone(), creation.ones(*input.shape, dtype="bool", device=input.device)


# -- RNN cells: one step of nn.RNNCell, LSTMCell and GRUCell, given their weights ---------------
_LAYERS = {"lstm_cell": "LSTMCell", "gru_cell": "GRUCell", "rnn_tanh_cell": "RNNCell",
           "rnn_relu_cell": "RNNCell"}


def _projections(op, gates, input, h, w_ih, w_hh, b_ih, b_hh):  # noqa: A002
    for name, t in (("input", input), ("hx", h), ("w_ih", w_ih), ("w_hh", w_hh)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    if gates > 1:  # (the gated cells are float kernels; the plain ones take integers too)
        _float_input(op, input)
    elif input.dtype is bool_:
        raise OpTypeError(f"{op}: not implemented for bool tensors (as in PyTorch); "
                          f"convert with .float() first")
    if input.ndim != 2 or h.ndim != 2:  # (PyTorch's cells take batches only)
        raise OpError(f"{op}: expected input (batch, input_size) and a hidden state "
                      f"(batch, hidden_size), got shapes {input.shape} and {h.shape}; "
                      f"unsqueeze(0) a single sample (nn.{_LAYERS[op]} takes one as it is)")
    n = h.shape[-1]
    if w_ih.ndim != 2 or w_hh.ndim != 2 or input.shape[-1] != w_ih.shape[1] or \
            w_hh.shape[1] != n or w_ih.shape[0] != gates * n or w_hh.shape[0] != gates * n \
            or input.shape[:-1] != h.shape[:-1]:
        raise OpError(f"{op}: input {input.shape} and hidden state {h.shape} do not fit "
                      f"w_ih {w_ih.shape} and w_hh {w_hh.shape}: expected w_ih "
                      f"({gates} * hidden_size, input_size) and w_hh ({gates} * "
                      f"hidden_size, hidden_size), and one batch for input and state")
    F = _F()
    return F.linear(input, w_ih, b_ih), F.linear(h, w_hh, b_hh)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    """lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> (Tensor, Tensor)

    One LSTM step, as nn.LSTMCell's: hx = (h, c); returns (h', c')."""
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        raise TypeError("lstm_cell: hx must be a pair (h, c) of tensors")
    from .nn.rnn import _lstm_step

    h, c = hx
    xp, hp = _projections("lstm_cell", 4, input, h, w_ih, w_hh, b_ih, b_hh)
    if not isinstance(c, Tensor) or c.shape != h.shape:
        raise OpError(f"lstm_cell: the cell state c must have h's shape {h.shape}, got "
                      f"{getattr(c, 'shape', type(c).__name__)}")
    return _lstm_step(xp + hp, c, None)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    """gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> Tensor

    One GRU step, as nn.GRUCell's: the new hidden state."""
    from .nn.rnn import _gru_step

    xp, hp = _projections("gru_cell", 3, input, hx, w_ih, w_hh, b_ih, b_hh)
    return _gru_step(xp, hp, hx)


def _rnn_cell(op, relu, input, hx, w_ih, w_hh, b_ih, b_hh):  # noqa: A002
    from .nn.rnn import _rnn_step

    xp, hp = _projections(op, 1, input, hx, w_ih, w_hh, b_ih, b_hh)
    return _rnn_step(xp + hp, relu)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    """rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> Tensor

    One step of nn.RNNCell with tanh: tanh(input w_ih^T + b_ih + hx w_hh^T + b_hh)."""
    return _rnn_cell("rnn_tanh_cell", False, input, hx, w_ih, w_hh, b_ih, b_hh)


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    """rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None) -> Tensor

    One step of nn.RNNCell with relu: relu(input w_ih^T + b_ih + hx w_hh^T + b_hh)."""
    return _rnn_cell("rnn_relu_cell", True, input, hx, w_ih, w_hh, b_ih, b_hh)


# -- embedding_bag: ATen's four results ------------------------------------------------------------
_MODES = ("sum", "mean", "max")


def embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                  per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0,
    sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None)
    -> (Tensor, Tensor, Tensor, Tensor)

    ATen's form of F.embedding_bag (the weight first, ``mode`` 0 sum, 1 mean, 2 max):
    (output, offset2bag, bag_size, max_indices) as PyTorch's CPU kernel gives them:
    output is F.embedding_bag's; offset2bag each index's bag (empty for a sum without
    padding_idx over float32, float16 or bfloat16 rows: the kernel's fast path); bag_size
    each bag's count of indices other than padding_idx (zeros for a sum); max_indices, for
    max, the row each output element came from (num_bags, embedding_dim), for mean
    bag_size again, for sum zeros. Only output has a gradient."""
    op = "torch.embedding_bag"
    if isinstance(mode, bool) or mode not in (0, 1, 2):
        raise OpError(f"{op}: `mode` must be sum, mean, or max: 0, 1 or 2 here (ATen's "
                      f"ints; F.embedding_bag takes the names), got {mode!r}")
    for name, t in (("weight", weight), ("indices", indices), ("offsets", offsets)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    if indices.ndim != 1 or offsets.ndim != 1:
        raise OpError(f"{op}: indices and offsets must be 1-D, got shapes {indices.shape} "
                      f"and {offsets.shape} (F.embedding_bag takes 2-D bags)")
    if scale_grad_by_freq or sparse:
        raise OpError(f"{op}: scale_grad_by_freq and sparse gradients are not part of "
                      f"Haelixe; leave them False")
    output = _F().embedding_bag(indices, weight, offsets, mode=_MODES[mode],
                                per_sample_weights=per_sample_weights,
                                include_last_offset=include_last_offset,
                                padding_idx=padding_idx)
    extras = _bag_bookkeeping(weight, indices, offsets, mode, include_last_offset,
                              padding_idx, output.shape[0])
    return (output,) + tuple(_on(a, weight) for a in extras)


def _on(array, like):
    return Tensor._wrap(like._be.from_numpy(np.ascontiguousarray(array, np.int64)))


def _bag_bookkeeping(weight, indices, offsets, mode, include_last_offset, padding_idx, bags):
    """offset2bag, bag_size and max_indices (host int64 arrays) of PyTorch's CPU kernel."""
    idx = indices.detach().cpu().numpy().astype(np.int64)
    starts_all = offsets.detach().cpu().numpy().astype(np.int64)
    starts = starts_all[:bags]
    pad = None if padding_idx is None else padding_idx % weight.shape[0]
    # (PyTorch's fast path of a sum leaves offset2bag empty: 16- and 32-bit float rows)
    fast = pad is None and weight.dtype.name in ("float32", "float16", "bfloat16") and \
        weight.strides[1] == 1
    bag_of = np.zeros(idx.shape[0], np.int64)
    if idx.size and starts.size:  # (each index's bag: the last start at or before it)
        bag_of = np.searchsorted(starts, np.arange(idx.shape[0]), side="right") - 1
        bag_of = np.clip(bag_of, 0, bags - 1)
    counted = idx != pad if pad is not None else np.ones(idx.shape, bool)
    sizes = np.bincount(bag_of[counted], minlength=bags)[:bags] if bags else np.zeros(0)
    offset2bag = np.zeros(0, np.int64) if mode == 0 and fast else bag_of
    if mode == 0:
        # (zeros, one per bag where the weight will get a gradient, else one per offset:
        # PyTorch's forward-only kernel sizes them by the offsets, include_last_offset's
        # last one too)
        n = bags if weight.requires_grad and STATE.grad_enabled else starts_all.shape[0]
        return offset2bag, np.zeros(n, np.int64), np.zeros(n, np.int64)
    if mode == 1:
        return offset2bag, sizes, sizes
    rows = weight.detach().cpu().float().numpy() if weight.dtype.itemsize == 2 else \
        weight.detach().cpu().numpy()
    best = np.zeros((bags, weight.shape[1]), np.int64)
    for b in range(bags):  # (the first row of each bag's largest value, per column)
        members = idx[(bag_of == b) & counted]
        if members.size:
            best[b] = members[np.argmax(rows[members], axis=0)]
    return offset2bag, sizes, best


for _name in ("native_layer_norm", "native_batch_norm", "native_group_norm", "lstm_cell",
              "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"):
    declare(_name, arity=2)
declare("native_dropout")

__all__ = ["native_layer_norm", "native_batch_norm", "native_group_norm", "native_dropout",
           "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "embedding_bag"]
