"""The CPU backend with numba's one-pass kernels for the fused ops: the softmax family,
the norms, RoPE, attention (cpu_attention), an embedding's backward and the AdamW step
run as the compiled loops of cpu_kernels, and composite elementwise ops as the ufuncs
cpu_jit compiles from their declarations (see cpu._compile).

Each method here is the compiled form of a contract method whose readable default,
composed from primitives, is in base.py: without numba, ``CPUBackend`` (cpu.py) runs
those defaults on numpy, with the same results to rounding. cpu.py picks this class
when numba can be imported. Until a method's kernel has loaded (cpu_jit loads them in
the background), the method runs that default too: its kernel handle raises
cpu_jit.Loading before it writes anything, and ``@composed_while_loading`` runs the
base class's method instead.
"""

from __future__ import annotations

import math

import numpy as np

from .base import K_MUL
from .cpu import _LOW_SET, CPUBackend, _check_rope_dtype, computes_in_f32
from .cpu_jit import composed_while_loading, kernels

_JIT_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _index_add_rows(out, key, values) -> bool:
    """out[key] += values (repeats accumulating) in one compiled pass where key is one
    integer array picking rows of out (an embedding's backward); False, with nothing
    added, for other keys and dtypes, and for an index out of range (np.add.at then
    raises its own error). np.add.at walks the subspace of every index apart, 100x
    slower on rows this short."""
    if len(key) != 1 or out.ndim < 1 or out.dtype not in _JIT_FLOATS \
            or values.dtype != out.dtype:
        return False
    index = key[0]
    if not isinstance(index, np.ndarray) or index.dtype.kind != "i" \
            or values.shape != index.shape + out.shape[1:]:
        return False
    width = math.prod(out.shape[1:])
    return kernels().index_add_rows(out.reshape(out.shape[0], width),
                                    np.ascontiguousarray(index).reshape(-1),
                                    np.ascontiguousarray(values).reshape(index.size, width))


class CompiledCPUBackend(CPUBackend):
    """CPUBackend with the fused ops compiled (numba)."""

    @composed_while_loading
    def softmax(self, x, axis):
        return _rows(kernels().softmax_rows, x, axis)

    @composed_while_loading
    def log_softmax(self, x, axis):
        return _rows(kernels().log_softmax_rows, x, axis)

    @composed_while_loading
    def softmax_backward(self, y, g, axis, log):
        return _rows(kernels().softmax_backward_rows, y, axis, g, extra=(log,))

    @composed_while_loading
    def sum_windows_into(self, out, cols, kernel, stride, dilation):
        # two lead dims and one or two windowed ones, float32/64: one compiled loop
        # (numpy's strided adds run per row of positions: 4-wide rows on a small image)
        d = len(kernel)
        if d not in (1, 2) or out.ndim != 2 + d or out.dtype not in _JIT_FLOATS \
                or cols.dtype != out.dtype:
            return False
        if d == 1:  # (a 1-tall image)
            out, cols = out[:, :, None], cols[:, :, None, :, None]
            kernel, stride, dilation = (1, *kernel), (1, *stride), (1, *dilation)
        if out.strides[0] < out.strides[1]:  # (the outer loop over the outer dim)
            out, cols = out.swapaxes(0, 1), cols.swapaxes(0, 1)
        if abs(out.strides[1]) < abs(out.strides[3]):  # (channels-last: them innermost)
            kernels().sum_windows_channels_last(cols.transpose(0, 4, 5, 2, 3, 1),
                                                out.transpose(0, 2, 3, 1), *stride, *dilation)
        else:
            kernels().sum_windows_2d(cols, out, *stride, *dilation)
        return True

    @composed_while_loading
    def windows_into(self, out, x, before, kernel, stride, dilation):
        # two lead dims and one or two windowed ones, float32/64: one compiled pass,
        # where the composed form pads a copy of x and then copies its windows
        d = len(kernel)
        if d not in (1, 2) or x.ndim != 2 + d or x.dtype not in _JIT_FLOATS \
                or out.dtype != x.dtype:
            return False
        if d == 1:  # (a 1-tall image)
            x, out = x[:, :, None], out[:, :, None, :, None]
            before, stride, dilation = (0, *before), (1, *stride), (1, *dilation)
        if abs(out.strides[1]) < abs(out.strides[-1]):  # (the channels innermost)
            kernels().padded_windows_channels_last(x.transpose(0, 2, 3, 1),
                                                   out.transpose(0, 4, 5, 2, 3, 1),
                                                   *before, *stride, *dilation)
        else:  # (the columns' own order: (C, *kernel, N, *positions))
            kernels().padded_windows_2d(x, out.transpose(1, 2, 3, 0, 4, 5), *before,
                                        *stride, *dilation)
        return True

    @composed_while_loading
    def window_max(self, x, kernel, stride, dilation):
        # one compiled pass for float32/64 and one or two windowed dims (the default's
        # copy of the windows and argmax run per 4-cell row: a 2x2 pool's)
        d = len(kernel)
        if d not in (1, 2) or x.dtype not in _JIT_FLOATS:
            return None
        if d == 1:
            x = x[:, :, None]
            kernel, stride, dilation = (1, *kernel), (1, *stride), (1, *dilation)
        out = tuple((n - dl * (k - 1) - 1) // s + 1
                    for n, k, s, dl in zip(x.shape[2:], kernel, stride, dilation))
        last = x.transpose(0, 2, 3, 1)
        if last.flags.c_contiguous:  # (a channels-last image: the channels innermost)
            y = np.empty((x.shape[0], *out, x.shape[1]), x.dtype)
            picked = np.empty(y.shape, np.int64)
            kernels().window_max_channels_last(last, y, picked, *kernel, *stride, *dilation)
            y, picked = y.transpose(0, 3, 1, 2), picked.transpose(0, 3, 1, 2)
        else:
            win = _windows_view(x, kernel, stride, dilation, out)
            like = win.strides[:2] + win.strides[4:]  # (the outputs laid out as x)
            order = sorted(range(4), key=lambda i: -abs(like[i]))
            y = np.empty(tuple((x.shape[:2] + out)[i] for i in order), x.dtype)
            picked = np.empty(y.shape, np.int64)
            kernels().window_max_2d(_loop_order(win, order), y, picked)
            back = np.argsort(order)
            y, picked = y.transpose(back), picked.transpose(back)
        return (y[:, :, 0], picked[:, :, 0]) if d == 1 else (y, picked)

    @composed_while_loading
    def route_max_into(self, out, g, picked, kernel, stride, dilation):
        d = len(kernel)
        if d not in (1, 2) or out.dtype not in _JIT_FLOATS or g.dtype != out.dtype:
            return False
        if d == 1:
            out, g, picked = out[:, :, None], g[:, :, None], picked[:, :, None]
            kernel, stride, dilation = (1, *kernel), (1, *stride), (1, *dilation)
        win = _windows_view(out, kernel, stride, dilation, g.shape[2:])
        order = sorted(range(4), key=lambda i: -abs(picked.strides[i]))
        kernels().route_max_2d(g.transpose(order), picked.transpose(order),
                               _loop_order(win, order))
        return True

    @composed_while_loading
    def index_add(self, shape, key, values):
        out = np.zeros(shape, values.dtype)
        if _index_add_rows(out, key, values):
            return out
        return super().index_add(shape, key, values)

    # Cross-entropy at class indices without a class weight or smoothing (a language
    # model's loss) in one compiled call each way, where the composed form makes about
    # ten numpy calls over (rows, classes) arrays of a few thousand elements
    @composed_while_loading
    def cross_entropy(self, x, target, weight, ignore_index, reduction, label_smoothing):
        if weight is not None or label_smoothing or reduction == "none" or x.ndim != 2 \
                or x.dtype not in _JIT_FLOATS or target.dtype.kind not in "iu" or not x.size:
            return super().cross_entropy(x, target, weight, ignore_index, reduction,
                                         label_smoothing)
        m = x.shape[0]
        logp = np.empty(x.shape, x.dtype)
        safe = np.empty(m, target.dtype)
        w = np.empty(m, x.dtype)
        loss, total = kernels().cross_entropy_rows(
            np.ascontiguousarray(x), np.ascontiguousarray(target), ignore_index, logp, safe, w)
        loss = np.array(loss, x.dtype)
        total = np.array(total, x.dtype) if reduction == "mean" else None
        if total is not None:
            loss = self.div(loss, total)
        return loss, (logp, safe, w, total, w, None, label_smoothing)

    @composed_while_loading
    def cross_entropy_backward(self, saved, g):
        logp, safe, w, total, _, weight, smoothing = saved
        if weight is not None or smoothing or logp.dtype not in _JIT_FLOATS \
                or not logp.size:
            return super().cross_entropy_backward(saved, g)
        if total is not None:
            g = self.div(g, total)
        s = np.ascontiguousarray(self.map(K_MUL, [w, g], logp.dtype))
        out = np.empty(logp.shape, logp.dtype)
        kernels().cross_entropy_backward_rows(np.ascontiguousarray(logp),
                                              np.ascontiguousarray(safe), s, out)
        return out

    # An LSTM or GRU step's pointwise part in one compiled pass each way (cpu_kernels),
    # where the composed form makes about ten numpy passes and copies over arrays of a
    # few thousand elements: float32/float64, any batch shape, made C-contiguous first
    @composed_while_loading
    def lstm_cell(self, gates, c):
        n = c.shape[-1]
        if not _cell_compiles(c, gates):
            return super().lstm_cell(gates, c)
        return _cell_rows(kernels().lstm_cell_rows, n, [(gates, 4), (c, 1)],
                          [(c.shape[:-1] + (2 * n,), 2), (gates.shape, 4)])

    @composed_while_loading
    def lstm_cell_backward(self, act, c, hc, ghc):
        if not _cell_compiles(c, act, hc, ghc):
            return super().lstm_cell_backward(act, c, hc, ghc)
        return _cell_rows(kernels().lstm_cell_backward_rows, c.shape[-1],
                          [(act, 4), (c, 1), (hc, 2), (ghc, 2)], [(act.shape, 4), (c.shape, 1)])

    @composed_while_loading
    def gru_cell(self, xp, hp, h):
        if not _cell_compiles(h, xp, hp):
            return super().gru_cell(xp, hp, h)
        return _cell_rows(kernels().gru_cell_rows, h.shape[-1], [(xp, 3), (hp, 3), (h, 1)],
                          [(h.shape, 1), (xp.shape, 3)])

    @composed_while_loading
    def gru_cell_backward(self, act, hp, h, g):
        if not _cell_compiles(h, act, hp, g):
            return super().gru_cell_backward(act, hp, h, g)
        return _cell_rows(kernels().gru_cell_backward_rows, h.shape[-1],
                          [(act, 3), (hp, 3), (h, 1), (g, 1)],
                          [(act.shape, 3), (act.shape, 3), (h.shape, 1)])

    # The norms run one compiled pass per row (cpu_kernels); statistics are saved per
    # row, shaped x.shape[:-1] + (1,) as the contract says.
    @composed_while_loading
    @computes_in_f32
    def rmsnorm(self, x, w, eps):
        x2 = _as_rows(x)
        y = np.empty(x2.shape, x.dtype)
        rstd = np.empty(x2.shape[0], x.dtype)
        kernels().rmsnorm_rows(x2, _weight(w, x2, 1), eps, y, rstd)
        return y.reshape(x.shape), rstd.reshape(x.shape[:-1] + (1,))

    @composed_while_loading
    @computes_in_f32
    def rmsnorm_backward(self, x, w, rstd, gy):
        x2, g2 = _as_rows(x), _as_rows(gy)
        dx = np.empty(x2.shape, x.dtype)
        dw = np.zeros(x2.shape[1], np.float64)
        kernels().rmsnorm_backward_rows(x2, _weight(w, x2, 1), _flat(rstd), g2, dx, dw)
        return dx.reshape(x.shape), (dw.astype(w.dtype) if w is not None else None)

    @composed_while_loading
    @computes_in_f32
    def layernorm(self, x, w, b, eps):
        x2 = _as_rows(x)
        y = np.empty(x2.shape, x.dtype)
        mean = np.empty(x2.shape[0], x.dtype)
        rstd = np.empty(x2.shape[0], x.dtype)
        kernels().layernorm_rows(x2, _weight(w, x2, 1), _weight(b, x2, 0), eps, y, mean,
                                 rstd)
        stat = x.shape[:-1] + (1,)
        return y.reshape(x.shape), mean.reshape(stat), rstd.reshape(stat)

    @composed_while_loading
    @computes_in_f32
    def layernorm_backward(self, x, w, mean, rstd, gy):
        x2, g2 = _as_rows(x), _as_rows(gy)
        n = x2.shape[1]
        dx = np.empty(x2.shape, x.dtype)
        dw, db = np.zeros(n, np.float64), np.zeros(n, np.float64)
        kernels().layernorm_backward_rows(x2, _weight(w, x2, 1), _flat(mean), _flat(rstd),
                                          g2, dx, dw, db)
        return (dx.reshape(x.shape), dw.astype(w.dtype) if w is not None else None,
                db.astype(x.dtype))

    @composed_while_loading
    def moments(self, x, axes):
        # a batch norm's (statistics per channel, float32/64): two compiled passes over
        # (rows, C), where the composed form makes four, each a temporary
        order = _channel_order(x, axes)
        if order is None:
            return super().moments(x, axes)
        x2 = _channel_rows(x, order)
        mean, var = np.empty(x2.shape[1], x.dtype), np.empty(x2.shape[1], x.dtype)
        kernels().column_moments(x2, mean, var)
        kept = tuple(n if i == order[-1] else 1 for i, n in enumerate(x.shape))
        return mean.reshape(kept), var.reshape(kept)

    @composed_while_loading
    def normalize(self, x, w, b, mean, var, eps):
        # a batch norm's (operands per channel) on a channels-last image: one compiled
        # pass over (rows, C), the output laid out as x (other layouts: the default's)
        axes = tuple(i for i in range(x.ndim) if mean.ndim != x.ndim or mean.shape[i] == 1)
        order = _channel_order(x, axes)
        if order is None or not x.transpose(order).flags.c_contiguous or \
                any(a is not None and (a.dtype != x.dtype or a.size != mean.size)
                    for a in (w, b, mean, var)):
            return super().normalize(x, w, b, mean, var, eps)
        x2 = _channel_rows(x, order)
        rstd = 1 / np.sqrt(var + x.dtype.type(eps))
        y2 = np.empty(x2.shape, x.dtype)
        kernels().normalize_columns(x2, _flat(mean), _flat(rstd), _weight(w, x2, 1),
                                    _weight(b, x2, 0), y2)
        return _from_channel_rows(y2, x.shape, order), rstd

    @composed_while_loading
    def normalize_backward(self, x, w, mean, rstd, gy, axes, param_axes):
        # a batch norm's (statistics and parameters per channel, float32/64): two
        # compiled passes over (rows, C), the channel last, where the composed form
        # makes a dozen passes
        order = _channel_order(x, axes)
        if order is None or tuple(axes) != tuple(param_axes) or gy.dtype != x.dtype or \
                (w is not None and w.dtype != x.dtype):
            return super().normalize_backward(x, w, mean, rstd, gy, axes, param_axes)
        c = x.shape[order[-1]]
        x2, g2 = _channel_rows(x, order), _channel_rows(gy, order)
        dx2 = np.empty(x2.shape, x.dtype)
        dw, db = np.zeros(c, np.float64), np.zeros(c, np.float64)
        kernels().batchnorm_backward_rows(x2, _weight(w, x2, 1), _flat(mean), _flat(rstd),
                                          g2, dx2, dw, db)
        dx = _from_channel_rows(dx2, x.shape, order)
        return (dx, None if w is None else dw.astype(w.dtype).reshape(w.shape),
                db.astype(x.dtype))

    @composed_while_loading
    @computes_in_f32
    def rope(self, x, cos, sin, inverse=False):
        _check_rope_dtype(x)
        shape = x.shape
        if x.ndim > 5:  # (the kernel takes up to five dims, any strides)
            x = np.ascontiguousarray(x).reshape((-1,) + shape[-2:])
        x5 = x.reshape((1,) * (5 - x.ndim) + x.shape) if x.ndim < 5 else x
        out = np.empty(x5.shape, x.dtype)
        t = x.dtype.type
        kernels().rope5(x5, _same(cos, x.dtype), _same(sin, x.dtype),
                        t(-1.0 if inverse else 1.0), out)
        return out.reshape(shape)

    @composed_while_loading
    @computes_in_f32
    def attention(self, q, k, v, causal, scale, mask=None):
        from .cpu_attention import attention_forward

        return attention_forward(q, k, v, causal, scale, mask)

    @composed_while_loading
    def attention_for_backward(self, q, k, v, causal, scale, mask=None):
        """(out, lse, probabilities or None): the direct path's probabilities, where
        they fit cpu_attention.KEEP_PROBS_BYTES. BF16/F16 keep none (theirs are float32,
        which computes_in_f32 would round on the way out)."""
        if q.dtype in _LOW_SET:
            return super().attention_for_backward(q, k, v, causal, scale, mask)
        from .cpu_attention import attention_forward_keeping

        return attention_forward_keeping(q, k, v, causal, scale, mask)

    @composed_while_loading
    @computes_in_f32
    def attention_backward(self, q, k, v, out, lse, gout, causal, scale, mask=None,
                           saved=None):
        from .cpu_attention import attention_backward

        return attention_backward(q, k, v, out, lse, gout, causal, scale, mask, saved)

    @composed_while_loading
    def adamw_step(self, p, g, m, v, lr, beta1, beta2, eps, weight_decay, step):
        self._adamw(p, g, m, v, lr, beta1, beta2, eps, weight_decay, 1.0 - beta1 ** step,
                    1.0 - beta2 ** step)

    @composed_while_loading
    def adamw_step_capturable(self, p, g, m, v, lr, step, beta1, beta2, eps, weight_decay):
        # the count and lr read here, on every call (a replay of a captured step runs this
        # method too); the bias corrections in their dtype, as the generic kernel does,
        # then the fused pass of adamw_step
        t = step.dtype.type
        n = step.reshape(-1)[0]
        bc1, bc2 = t(1.0) - t(beta1) ** n, t(1.0) - t(beta2) ** n
        self._adamw(p, g, m, v, float(lr.reshape(-1)[0]), beta1, beta2, eps, weight_decay,
                    float(bc1), float(bc2))

    def _adamw(self, p, g, m, v, lr, beta1, beta2, eps, weight_decay, bc1, bc2):
        args = (lr, beta1, beta2, eps, weight_decay, bc1, bc2)
        bufs = (p, g, m, v)
        if p.dtype in _JIT_FLOATS and all(b.dtype == p.dtype for b in bufs):
            kernels().adamw_flat(p, g, m, v, *args)
            return
        # 16-bit buffers: the same pass in float32, each buffer rounded back once
        p32, g32, m32, v32 = (b.astype(np.float32) for b in bufs)
        kernels().adamw_flat(p32, g32, m32, v32, *args)
        for dst, src in ((p, p32), (m, m32), (v, v32)):
            np.copyto(dst, src, casting="unsafe")


def _windows_view(x, kernel, stride, dilation, out):
    """The windows view (N, C, *kernel, *out) of x (N, C, *spatial), as ops/windows.py
    lays it out."""
    st = x.strides
    return np.lib.stride_tricks.as_strided(
        x, x.shape[:2] + tuple(kernel) + tuple(out),
        st[:2] + tuple(s * dl for s, dl in zip(st[2:], dilation)) +
        tuple(s * k for s, k in zip(st[2:], stride)))


def _loop_order(win, order):
    """The windows view (a, b, kh, kw, ho, wo) with its four non-kernel dims in
    ``order`` (indices into (a, b, ho, wo)), the kernel dims kept in the middle: the
    compiled window loops run along the last, the smallest stride."""
    dims = (0, 1, 4, 5)
    return win.transpose(dims[order[0]], dims[order[1]], 2, 3, dims[order[2]],
                         dims[order[3]])


def _as_rows(x):
    """``x`` as a C-contiguous (rows, last dim) array (a view where it already is)."""
    if not x.ndim:
        return x.reshape(1, 1)
    return np.ascontiguousarray(x).reshape(math.prod(x.shape[:-1]), x.shape[-1])


def _channel_order(x, axes):
    """The dims of x with the one dim not in ``axes`` (a batch norm's channels) last,
    for the per-channel kernels; None where more than one dim is kept, or for a dtype
    they do not take."""
    keep = [i for i in range(x.ndim) if i not in axes]
    if len(keep) != 1 or x.dtype not in _JIT_FLOATS:
        return None
    return (*axes, keep[0])


def _channel_rows(x, order):
    """x as (rows, C), its dims in ``order`` (a view where x is channels-last)."""
    return x.transpose(order).reshape(math.prod(x.shape[d] for d in order[:-1]),
                                      x.shape[order[-1]])


def _from_channel_rows(y2, shape, order):
    """_channel_rows' inverse: a (rows, C) result seen as ``shape`` (channels-last in
    memory)."""
    return y2.reshape(tuple(shape[i] for i in order)).transpose(np.argsort(order))


def _flat(stat):
    return np.ascontiguousarray(stat).reshape(-1)


def _same(a, dtype):
    return np.ascontiguousarray(a, dtype=dtype)


def _cell_compiles(state, *others) -> bool:
    """Whether a recurrent cell's kernel takes these arrays: a non-empty float32/64
    ``state`` (batch, n) and the cell's other arrays of its dtype."""
    return bool(state.shape[-1] and state.size) and state.dtype in _JIT_FLOATS and \
        all(a.dtype == state.dtype for a in others)


def _cell_rows(kernel, n, inputs, outputs):
    """Run a recurrent cell's kernel on ``inputs`` ((array, k): k * n wide) made
    C-contiguous (rows, k * n), into new arrays of ``outputs`` ((shape, k)) in the
    state's dtype, which it returns."""
    dtype = inputs[-1][0].dtype
    made = tuple(np.empty(shape, dtype) for shape, _ in outputs)
    kernel(*(np.ascontiguousarray(a).reshape(-1, k * n) for a, k in inputs),
           *(m.reshape(-1, k * n) for m, (_, k) in zip(made, outputs)))
    return made


def _weight(w, x2, fill):
    """A norm's weight or bias as a contiguous vector (``fill`` when it is absent)."""
    if w is None:
        return np.full(x2.shape[1], fill, x2.dtype)
    return np.ascontiguousarray(w, dtype=x2.dtype).reshape(-1)


def _rows(kernel, x, axis, *others, extra=()):
    """A row kernel (softmax family) applied along ``axis``: ``kernel(x2, out, *others2,
    *extra)`` on (rows, length) arrays, ``others`` (of x's shape) passed after the
    output. The usual call (the last dim of a C-contiguous float32/64 array) goes
    straight to the kernel: on small tensors the general path's moves and copies cost as
    much as the kernel itself. Otherwise the axis is moved last and made contiguous."""
    n = x.shape[-1] if x.ndim else 0
    if n and axis == x.ndim - 1 and x.dtype in _JIT_FLOATS and x.flags.c_contiguous:
        rows = x.size // n
        out = np.empty(x.shape, x.dtype)
        if others:  # (often broadcasts: the gradient of a sum or a mean after a softmax)
            extra = (*[np.ascontiguousarray(o, x.dtype).reshape(rows, n) for o in others],
                     *extra)
        kernel(x.reshape(rows, n), out.reshape(rows, n), *extra)
        return out
    if x.dtype in _LOW_SET:  # float32 inside (see sum), rounded once at the end
        return _rows(kernel, x.astype(np.float32), axis,
                     *(o.astype(np.float32) for o in others), extra=extra).astype(x.dtype)
    if x.dtype not in _JIT_FLOATS:
        x = x.astype(np.float64)
        others = [o.astype(np.float64) for o in others]
    last = axis == x.ndim - 1
    xm = x if last else np.moveaxis(x, axis, -1)
    x2 = _as_rows(xm)
    out = np.empty(x2.shape, x.dtype)
    kernel(x2, out, *(_as_rows(o if last else np.moveaxis(o, axis, -1)).astype(
        x.dtype, copy=False) for o in others), *extra)
    out = out.reshape(xm.shape)
    return out if last else np.ascontiguousarray(np.moveaxis(out, -1, axis))
