"""Fused neural-network ops: one kernel forward, one kernel backward.

Each keeps the few intermediates its backward needs (a pre-activation, an inverse RMS,
a log-sum-exp) instead of a chain of elementary nodes. Their backward calls raw kernels,
so they are differentiable once (twice_differentiable = False) except RoPE, which is
linear and whose backward is itself a RoPE.
"""

from __future__ import annotations

from ..autograd.function import SINK, Function, wrap_grads
from ..autograd.mode import STATE
from ..backends.base import Kernel
from ..tensor import Tensor
from .elementwise import ACTIVATIONS
from .registry import declare


class LinearFn(Function):
    """y = act(x @ w.T + b) over any leading dims; act None | "gelu" | "gelu_tanh"."""

    label = "Linear"
    twice_differentiable = False

    @staticmethod
    def forward(ctx, x, w, b, activation):
        act = None if activation is None else ACTIVATIONS[activation]
        y, pre = x._be.linear(x._data, w._data, None if b is None else b._data, act)
        ctx.save_for_backward(x, w)
        ctx.pre = pre
        ctx.activation = activation
        ctx.has_bias = b is not None
        ctx.bias_shape = None if b is None else b.shape
        # without an activation the backward is two products and a sum, written with ops
        # under create_graph (hessian, torch.func's nested transforms); the activation's
        # derivative lives in the kernel alone
        ctx.twice_differentiable = activation is None and x.dtype is w.dtype
        if activation is not None or x.dtype is not w.dtype:
            # (a float32 input read rounded to a 16-bit weight's dtype, under autocast: a
            # precision change the graph shows here, as a Cast node would)
            ctx.label = "Linear" + ("" if activation is None else f"+{activation.upper()}") + \
                ("" if x.dtype is w.dtype else f"({x.dtype.name}->{w.dtype.name})")
        return y

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        nx, nw, nb, _ = ctx.next
        if not STATE.grad_enabled:  # first order: the backend's one kernel
            act = None if ctx.activation is None else ACTIVATIONS[ctx.activation]
            dx, dw, db = x._be.linear_backward(x._data, w._data, ctx.pre, g._data, act,
                                               ctx.has_bias and nb is not None,
                                               nx is not None)
            return wrap_grads((dx, dw if nw is not None else None, db, None))
        rows = g.reshape(-1, w.shape[0])
        dx = g.matmul(w) if nx is not None else None
        dw = rows.mT.matmul(x.reshape(-1, w.shape[1])) if nw is not None else None
        db = rows.sum(0).sum_to(ctx.bias_shape) if ctx.has_bias and nb is not None else None
        return dx, dw, db, None


class BatchNormFn(Function):
    """Training-mode batch norm: each channel of x (N, C, *) normalised by the batch's
    moments over every other dim (``mean``, ``var``: the backend's raw arrays, shaped
    (1, C, 1, ...), computed once by the caller, which updates the running statistics
    from them too), then scaled by w and shifted by b. One kernel forward and one
    backward, the moments' own gradient included; with a graph to build (double
    backward) the backward is composed of differentiable ops instead."""

    label = "BatchNorm"

    @staticmethod
    def forward(ctx, x, w, b, mean, var, eps):
        be = x._be
        shape = mean.shape
        y, rstd = be.normalize(x._data, None if w is None else be.reshape(w._data, shape),
                               None if b is None else be.reshape(b._data, shape),
                               mean, var, eps)
        ctx.save_for_backward(x, w)
        ctx.stats, ctx.eps, ctx.has_bias = (mean, rstd), eps, b is not None
        return y

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        axes = (0,) + tuple(range(2, x.ndim))
        if STATE.grad_enabled:
            return BatchNormFn._composed_backward(ctx, x, w, g, axes)
        be, (mean, rstd) = x._be, ctx.stats
        dx, dw, db = be.normalize_backward(
            x._data, None if w is None else be.reshape(w._data, mean.shape), mean, rstd,
            g._data, axes, axes)
        wrap = Tensor._wrap
        return (wrap(dx), None if w is None else wrap(be.reshape(dw, w.shape)),
                wrap(db) if ctx.has_bias else None, None, None, None)

    @staticmethod
    def _composed_backward(ctx, x, w, g, axes):
        shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        mean = x.mean(axes, keepdim=True)
        rstd = (x.var(axes, correction=0, keepdim=True) + ctx.eps).rsqrt()
        xhat = (x - mean) * rstd
        gx = g if w is None else g * w.reshape(shape)
        dx = rstd * (gx - gx.mean(axes, keepdim=True)
                     - xhat * (gx * xhat).mean(axes, keepdim=True))
        return (dx, None if w is None else (g * xhat).sum(axes),
                g.sum(axes) if ctx.has_bias else None, None, None, None)


def batch_norm_training(x, w, b, eps):
    """(y, mean, var) of batch norm by the batch's own statistics: the moments computed
    once, read by the normalisation and returned (detached, (C,)) for the running
    statistics; w and b taken in x's dtype."""
    be = x._be
    mean, var = be.moments(x._data, (0,) + tuple(range(2, x.ndim)))
    w, b = (t if t is None or t.dtype is x.dtype else t.to(x.dtype) for t in (w, b))
    y = BatchNormFn.apply(x, w, b, mean, var, eps)
    c = (x.shape[1],)
    return y, Tensor._wrap(be.reshape(mean, c)), Tensor._wrap(be.reshape(var, c))


K_RUNNING = Kernel("running_stat", lambda m, r, x, keep, take: r * keep + x * take, 4)


def update_running(running, stat, momentum, scale=1.0):
    """running = (1 - momentum) * running + momentum * scale * stat, in place, in one
    kernel pass (a batch norm's running statistics, PyTorch's formula; ``stat`` a raw
    array of the batch's, any shape of running's size). The in-place ops it stands for
    were three, each with its checks, the step's largest share on small images."""
    be, dt = running._be, running.dtype.np
    stat = be.reshape(stat if stat.dtype == dt else be.cast(stat, dt), running.shape)
    be.map_into(K_RUNNING, running._data, [stat, dt.type(1.0 - momentum),
                                           dt.type(momentum * scale)])
    running._storage.version += 1


class RMSNormFn(Function):
    label = "RMSNorm"
    twice_differentiable = False

    @staticmethod
    def forward(ctx, x, w, eps):
        y, rstd = x._be.rmsnorm(x._data, None if w is None else w._data, eps)
        ctx.save_for_backward(x, w)
        ctx.rstd = rstd
        return y

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        dx, dw = x._be.rmsnorm_backward(x._data, None if w is None else w._data, ctx.rstd,
                                        g._data)
        return Tensor._wrap(dx), (Tensor._wrap(dw) if dw is not None else None), None


class LayerNormFn(Function):
    label = "LayerNorm"
    twice_differentiable = False

    @staticmethod
    def forward(ctx, x, w, b, eps):
        y, mean, rstd = x._be.layernorm(x._data, None if w is None else w._data,
                                        None if b is None else b._data, eps)
        ctx.save_for_backward(x, w)
        ctx.stats = (mean, rstd)
        ctx.bias_dtype = None if b is None else b.dtype  # (may differ from x's: autocast)
        return y

    @staticmethod
    def backward(ctx, g):  # (first order only: the backend's one kernel)
        x, w = ctx.saved_tensors
        mean, rstd = ctx.stats
        dx, dw, db = x._be.layernorm_backward(x._data, None if w is None else w._data,
                                              mean, rstd, g._data)
        if ctx.bias_dtype is not None and ctx.bias_dtype is not x.dtype:
            db = Tensor._wrap(db).to(ctx.bias_dtype)
        return wrap_grads((dx, dw, None if ctx.bias_dtype is None else db, None))


class RoPEFn(Function):
    """Rotate-half rotary embedding; the backward is the inverse rotation."""

    label = "RoPE"
    small_state = True

    @staticmethod
    def forward(ctx, x, cos, sin, inverse):
        ctx.save_for_backward(cos, sin)  # version-checked: edited tables would misrotate
        ctx.inverse = inverse
        return x._be.rope(x._data, cos._data, sin._data, inverse)

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        return RoPEFn.apply(g, cos, sin, not ctx.inverse), None, None, None


class AttentionFn(Function):
    """softmax(q k^T * scale [+ mask]) v, keeping the log-sum-exp and whatever more the
    backend saves for its backward (attention_for_backward), and the output, saved like
    the inputs, so an in-place edit of it is caught at backward."""

    label = "Attention"
    twice_differentiable = False
    saves_output = True

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, mask):
        args = (q._data, k._data, v._data, causal, scale, None if mask is None else mask._data)
        if ctx is SINK:  # no node to hold anything for a backward
            return q._be.attention(*args)[0]
        out, ctx.lse, ctx.kernel_saved = q._be.attention_for_backward(*args)
        ctx.save_for_backward(q, k, v, mask)
        ctx.causal, ctx.scale = causal, scale
        return out

    @staticmethod
    def backward(ctx, g):
        q, k, v, mask, out = ctx.saved_tensors
        dq, dk, dv = q._be.attention_backward(
            q._data, k._data, v._data, out._data, ctx.lse, g._data, ctx.causal, ctx.scale,
            None if mask is None else mask._data, ctx.kernel_saved)
        wrap = Tensor._wrap
        return (wrap(dq).sum_to(q.shape), wrap(dk).sum_to(k.shape), wrap(dv).sum_to(v.shape),
                None, None, None)


class LSTMCellFn(Function):
    """The pointwise part of one LSTM step, after its products: (gates (batch, 4n),
    c (batch, n)) -> hc (batch, 2n), h then c' side by side (the caller views the two
    halves). One kernel forward and one backward instead of the ten elementwise nodes
    the step's gate arithmetic would record."""

    label = "LSTMCell"
    twice_differentiable = False
    saves_output = True

    @staticmethod
    def forward(ctx, gates, c):
        hc, ctx.act = gates._be.lstm_cell(gates._data, c._data)
        ctx.save_for_backward(c)
        return hc

    @staticmethod
    def backward(ctx, g):
        c, hc = ctx.saved_tensors
        dgates, dc = c._be.lstm_cell_backward(ctx.act, c._data, hc._data, g._data)
        return Tensor._wrap(dgates), Tensor._wrap(dc)


class GRUCellFn(Function):
    """The pointwise part of one GRU step, after its products: (xp, hp (batch, 3n), h
    (batch, n)) -> h'. One kernel forward and one backward, as LSTMCellFn."""

    label = "GRUCell"
    twice_differentiable = False

    @staticmethod
    def forward(ctx, xp, hp, h):
        out, ctx.act = h._be.gru_cell(xp._data, hp._data, h._data)
        ctx.save_for_backward(hp, h)
        return out

    @staticmethod
    def backward(ctx, g):
        hp, h = ctx.saved_tensors
        dxp, dhp, dh = h._be.gru_cell_backward(ctx.act, hp._data, h._data, g._data)
        wrap = Tensor._wrap
        return wrap(dxp), wrap(dhp), wrap(dh)


class MSELossFn(Function):
    """mean((x - y)^2) of two tensors of one shape; the gradient is scaled by the
    incoming one, so 10 * loss has ten times the gradient (a loss that ignores it is a
    common slip)."""

    label = "MSELoss"
    small_state = True

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x._be.mse_loss(x._data, y._data)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        nx, ny = ctx.next
        if STATE.grad_enabled:  # create_graph: composed, so the gradient has a graph
            n = x.numel()
            dx = (x - y) * (g * (2.0 / n if n else float("nan")))
        else:
            dx = Tensor._wrap(x._be.mse_loss_backward(x._data, y._data, g._data))
        return (dx if nx is not None else None, -dx if ny is not None else None)


class CrossEntropyFn(Function):
    """Cross-entropy of (M, C) logits at (M,) class indices, with a per-class weight
    (or None), an ignore_index, a label smoothing and a reduction: one node over the backend's
    cross_entropy, whose backward is softmax - one_hot, scaled, on raw arrays."""

    label = "CrossEntropyLoss"

    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, reduction, label_smoothing, batch):
        be = x._be
        loss, ctx.state = be.cross_entropy(x._data, target._data,
                                           None if weight is None else weight._data,
                                           ignore_index, reduction, label_smoothing)
        if reduction == "none":
            loss = be.reshape(loss, batch)
        ctx.save_for_backward(x)
        return loss

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        be, saved = x._be, ctx.state
        m = x.shape[0]
        none = (None,) * 6
        if STATE.grad_enabled:  # create_graph: composed, so the gradient has a graph
            logp, safe, w, total, kept, weight, smoothing = saved
            scale = g.reshape(-1) if g.ndim else g
            if total is not None:
                scale = scale / Tensor._wrap(total)
            # q_i: each row's target distribution (before the scale)
            q = Tensor._wrap(be.scatter_add(logp.shape, 1, be.reshape(safe, (m, 1)),
                                            be.reshape(w, (m, 1))))
            if smoothing:
                spread = 1.0 if weight is None else Tensor._wrap(weight)
                q = q * (1 - smoothing) + Tensor._wrap(kept).reshape(m, 1) * spread * (
                    smoothing / logp.shape[1])
            scale = scale.reshape(m, 1) if scale.ndim else scale
            return ((x.softmax(1) * q.sum(1, keepdim=True) - q) * scale,) + none
        # first order: the backend's kernel
        gd = be.reshape(g._data, (m,)) if g.ndim else g._data
        return (Tensor._wrap(be.cross_entropy_backward(saved, gd)),) + none


class SoftCrossEntropyFn(Function):
    """Cross-entropy of (M, C) logits against (M, C) class probabilities, with a label
    smoothing, a per-class weight (or None) and a reduction: one node over the backend's
    cross_entropy_soft. The target and the weight get gradients too, as PyTorch's."""

    label = "CrossEntropyLoss"

    @staticmethod
    def forward(ctx, x, target, weight, reduction, label_smoothing, batch):
        be = x._be
        loss, ctx.state = be.cross_entropy_soft(
            x._data, target._data, None if weight is None else weight._data, reduction,
            label_smoothing)
        if reduction == "none":
            loss = be.reshape(loss, batch)
        ctx.smoothing = label_smoothing
        ctx.save_for_backward(x, target, weight)
        return loss

    @staticmethod
    def backward(ctx, g):
        x, target, weight = ctx.saved_tensors
        be, (logp, q, total) = x._be, ctx.state
        _, n_target, n_weight = ctx.next[:3]
        graph = STATE.grad_enabled  # create_graph: composed, so the gradients have one
        if total is not None:  # (the mean's M)
            g = g / float(total)
        g_rows = g.reshape(-1, 1) if g.ndim else g
        if graph:
            logp_t = x.log_softmax(1)
            q_t = target if weight is None else target * weight
            if ctx.smoothing:
                spread = 1.0 if weight is None else weight
                q_t = q_t * (1 - ctx.smoothing) + spread * (ctx.smoothing / x.shape[1])
            dx = (logp_t.exp() * q_t.sum(1, keepdim=True) - q_t) * g_rows
        else:
            logp_t = Tensor._wrap(logp)
            gd = g._data if not g.ndim else be.reshape(g._data, (x.shape[0],))
            dx = Tensor._wrap(be.cross_entropy_soft_backward((logp, q, None), gd))
        dtarget = dweight = None
        if n_target is not None:  # -logp * (1 - smoothing) * weight * g
            dtarget = -logp_t * (1 - ctx.smoothing) * g_rows
            if weight is not None:
                dtarget = dtarget * weight
        if n_weight is not None:  # -sum_i g_i * logp_i * (the smoothed target)_i
            mixed = target * (1 - ctx.smoothing) + ctx.smoothing / x.shape[1]
            dweight = -(logp_t * mixed * g_rows).sum(0)
        return dx, dtarget, dweight, None, None, None


# (linear, the norms, attention and the losses are declared on their functional forms,
# in nn/: ``@fused(LinearFn, ...)``; RoPE's is Haelixe's own, F.apply_rope)
declare("rope", arity=1, dtypes="float")
