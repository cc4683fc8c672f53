"""Elementwise ops. A few primitives carry their own derivative; the rest are built
from them (sub is add of a negation, rsqrt's derivative is written with pow...).

Binary ops broadcast like numpy (the backend reads zero strides in place) and the
gradient of a broadcast input is summed back to its shape. Mixed dtypes promote as in
PyTorch; a Python scalar never widens a tensor's dtype.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import layout
from ..autograd.function import Function
from ..autograd.mode import STATE
from ..dtype import bool_, promote_types, result_type_scalar
from .convert import cast

# -- operand preparation -------------------------------------------------------------------


def _scalar_raw(be, value, dtype):
    """A Python scalar as a numpy scalar of the tensor's dtype: every backend takes one
    as an operand (the GPU passes its value to the kernel, with no buffer to fill)."""
    return dtype.np.type(value)


def as_tensor_like(value, ref):
    """``value`` (scalar, list, numpy array or Tensor) as a tensor on ``ref``'s device."""
    if isinstance(value, Tensor):
        return value
    from ..creation import tensor

    dtype = None
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        dtype = result_type_scalar(ref.dtype, value)
    return tensor(value, dtype=dtype, device=ref.device)


def _check_same_device(op, a, b):
    if a.device is not b.device:
        raise RuntimeError(
            f"{op}: expected both tensors on the same device, got {a.device.type} (shape "
            f"{a.shape}) and {b.device.type} (shape {b.shape}); move one with .to(...)")


def _promote_pair(op, a, b):
    _check_same_device(op, a, b)
    if a.dtype is not b.dtype:
        dt = promote_types(a.dtype, b.dtype)
        a, b = cast(a, dt), cast(b, dt)
    return a, b


def _is_scalar(x):
    return isinstance(x, numbers.Number) or (isinstance(x, np.generic) and x.ndim == 0)


# -- binary primitives ---------------------------------------------------------------------


class Add(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (a.shape, b.shape)
        return a._be.add(a._data, b._data)

    @staticmethod
    def backward(ctx, g):
        sa, sb = ctx.shapes
        na, nb = ctx.next
        return (g.sum_to(sa) if na is not None else None,
                g.sum_to(sb) if nb is not None else None)


class Sub(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = (a.shape, b.shape)
        return a._be.sub(a._data, b._data)

    @staticmethod
    def backward(ctx, g):
        sa, sb = ctx.shapes
        na, nb = ctx.next
        return (g.sum_to(sa) if na is not None else None,
                (-g).sum_to(sb) if nb is not None else None)


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a._be.mul(a._data, b._data)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.next
        if not STATE.grad_enabled:
            # first order only (the hottest backward of all): the kernel directly
            mul, gd, wrap = g._be.mul, g._data, Tensor._wrap
            return (wrap(mul(gd, b._data)).sum_to(a.shape) if na is not None else None,
                    wrap(mul(gd, a._data)).sum_to(b.shape) if nb is not None else None)
        return ((g * b).sum_to(a.shape) if na is not None else None,
                (g * a).sum_to(b.shape) if nb is not None else None)


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a._be.div(a._data, b._data)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.next
        ga = (g / b).sum_to(a.shape) if na is not None else None
        gb = (-g * a / (b * b)).sum_to(b.shape) if nb is not None else None
        return ga, gb


class Pow(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a._be.pow(a._data, b._data)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.next
        ga = (g * b * a ** (b - 1.0)).sum_to(a.shape) if na is not None else None
        gb = None
        if nb is not None:
            # d/db a^b = a^b ln a; where a == 0 the limit is 0 (for b > 0)
            safe = where(a > 0, a, ones_like(a))
            gb = (g * a ** b * safe.log()).sum_to(b.shape)
        return ga, gb


class MinMax(Function):
    """maximum / minimum of two tensors; ties split the gradient evenly."""

    @staticmethod
    def forward(ctx, a, b, kind):
        ctx.save_for_backward(a, b)
        ctx.kind = kind
        return getattr(a._be, kind)(a._data, b._data)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        pick_a = (a > b) if ctx.kind == "maximum" else (a < b)
        tie = (a == b).to(g.dtype) * 0.5
        wa = pick_a.to(g.dtype) + tie
        wb = 1.0 - wa
        return (g * wa).sum_to(a.shape), (g * wb).sum_to(b.shape), None


# -- scalar variants (no 0-d tensor is built for a Python number) --------------------------


class AddScalar(Function):
    @staticmethod
    def forward(ctx, x, s):
        return x._be.add(x._data, _scalar_raw(x._be, s, x.dtype))

    @staticmethod
    def backward(ctx, g):
        return g, None


class MulScalar(Function):
    @staticmethod
    def forward(ctx, x, s):
        ctx.s = s
        return x._be.mul(x._data, _scalar_raw(x._be, s, x.dtype))

    @staticmethod
    def backward(ctx, g):
        return g * ctx.s, None


class RSubScalar(Function):
    """s - x"""

    @staticmethod
    def forward(ctx, x, s):
        return x._be.sub(_scalar_raw(x._be, s, x.dtype), x._data)

    @staticmethod
    def backward(ctx, g):
        return -g, None


class RDivScalar(Function):
    """s / x"""

    @staticmethod
    def forward(ctx, x, s):
        ctx.save_for_backward(x)
        ctx.s = s
        return x._be.div(_scalar_raw(x._be, s, x.dtype), x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -g * ctx.s / (x * x), None


class PowScalar(Function):
    """x ** p"""

    @staticmethod
    def forward(ctx, x, p):
        ctx.save_for_backward(x)
        ctx.p = p
        if p == 2:
            return x._be.mul(x._data, x._data)
        return x._be.pow(x._data, _scalar_raw(x._be, p, x.dtype))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        p = ctx.p
        if p == 2:
            return g * x * 2.0, None
        if p == 1:
            return g, None
        if p == 0:
            return g * 0.0, None  # (p * x ** -1 would be 0 * inf = nan at x == 0)
        return g * p * x ** (p - 1), None


class RPowScalar(Function):
    """s ** x"""

    @staticmethod
    def forward(ctx, x, s):
        ctx.save_for_backward(x)
        ctx.s = s
        return x._be.pow(_scalar_raw(x._be, s, x.dtype), x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (ctx.s ** x) * math.log(ctx.s), None


def _binary(op, prim, scalar_prim, a, b):
    if b.__class__ is Tensor and a.dtype is b.dtype and a.device is b.device:
        # the common case first: nothing to promote, move or convert
        if a.shape != b.shape:
            layout.broadcast_shapes(a.shape, b.shape, op=op)
        return prim.apply(a, b)
    if _is_scalar(b):
        dt = result_type_scalar(a.dtype, b)
        if dt is not a.dtype:
            a = cast(a, dt)
        return scalar_prim(a, b)
    if not isinstance(b, Tensor):
        b = as_tensor_like(b, a)
    a, b = _promote_pair(op, a, b)
    if a.shape != b.shape:
        layout.broadcast_shapes(a.shape, b.shape, op=op)
    return prim.apply(a, b)


def add(a, b):
    return _binary("add", Add, AddScalar.apply, a, b)


def _sub_scalar(x, s):
    return AddScalar.apply(x, -s)


def sub(a, b):
    return _binary("sub", Sub, _sub_scalar, a, b)


def rsub(a, s):
    """s - a for a non-tensor s."""
    if _is_scalar(s):
        dt = result_type_scalar(a.dtype, s)
        return RSubScalar.apply(cast(a, dt), s)
    return sub(as_tensor_like(s, a), a)


def mul(a, b):
    return _binary("mul", Mul, MulScalar.apply, a, b)


def div(a, b):
    if _is_scalar(b):
        if not a.dtype.is_floating_point:
            a = cast(a, result_type_scalar(a.dtype, 1.0))
        return MulScalar.apply(a, 1.0 / b) if b != 0 else _binary(
            "div", Div, None, a, as_tensor_like(float(b), a))
    b = b if isinstance(b, Tensor) else as_tensor_like(b, a)
    if not a.dtype.is_floating_point and not b.dtype.is_floating_point:
        a = cast(a, result_type_scalar(a.dtype, 1.0))
    return _binary("div", Div, None, a, b)


def rdiv(a, s):
    """s / a for a non-tensor s."""
    if _is_scalar(s):
        if not a.dtype.is_floating_point:
            a = cast(a, result_type_scalar(a.dtype, 1.0))
        return RDivScalar.apply(a, s)
    return div(as_tensor_like(s, a), a)


def pow(a, b):
    if _is_scalar(b):
        dt = result_type_scalar(a.dtype, b)
        return PowScalar.apply(cast(a, dt), b)
    return _binary("pow", Pow, None, a, b)


def rpow(a, s):
    if _is_scalar(s):
        if not a.dtype.is_floating_point:
            a = cast(a, result_type_scalar(a.dtype, 1.0))
        return RPowScalar.apply(a, s)
    return pow(as_tensor_like(s, a), a)


def binary_minmax(kind, a, b):
    b = b if isinstance(b, Tensor) else as_tensor_like(b, a)
    a, b = _promote_pair(kind, a, b)
    layout.broadcast_shapes(a.shape, b.shape, op=kind)
    return MinMax.apply(a, b, kind)


# -- unary primitives ----------------------------------------------------------------------


class Neg(Function):
    @staticmethod
    def forward(ctx, x):
        return x._be.neg(x._data)

    @staticmethod
    def backward(ctx, g):
        return -g


class Abs(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._be.abs(x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * sign(x)


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._be.exp(x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        # The output is recomputed rather than saved: a saved output could be edited in
        # place unseen, and recomputing keeps its graph for second derivatives.
        y = x.exp()
        return g * y


class Log(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._be.log(x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / x


class Sqrt(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._be.sqrt(x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x.sqrt()
        return g * 0.5 / y


class Rsqrt(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._be.rsqrt(x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * -0.5 * x ** -1.5


class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._be.tanh(x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x.tanh()
        return g * (1.0 - y * y)


class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._be.sigmoid(x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        y = x.sigmoid()
        return g * y * (1.0 - y)


class Relu(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._be.relu(x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (x > 0).to(g.dtype)


class Silu(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._be.silu(x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = x.sigmoid()
        return g * (s * (1.0 + x * (1.0 - s)))


class Gelu(Function):
    """GELU, exact (erf) or the tanh approximation."""

    @staticmethod
    def forward(ctx, x, approximate):
        ctx.save_for_backward(x)
        ctx.approximate = approximate
        return x._be.gelu(x._data, approximate)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        fused = getattr(x._be, "gelu_backward", None)
        if fused is not None and not STATE.grad_enabled and g.dtype is x.dtype:
            # g * gelu'(x) in one kernel; the composed form below is kept for
            # create_graph, where the gradient needs its own graph
            return Tensor._wrap(fused(x._data, g._data, ctx.approximate)), None
        if ctx.approximate == "tanh":
            c = math.sqrt(2.0 / math.pi)
            inner = (x + 0.044715 * x * x * x) * c
            th = inner.tanh()
            d = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * (c * (1.0 + 0.134145 * x * x))
        else:
            cdf = 0.5 * (1.0 + _erf(x * (1.0 / math.sqrt(2.0))))
            d = cdf + x * (1.0 / math.sqrt(2.0 * math.pi)) * (-0.5 * x * x).exp()
        return g * d, None


class _Erf(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        be = x._be
        if hasattr(be, "erf"):  # the GPU's own kernel: no round trip through the host
            return be.erf(x._data)
        from ..backends.cpu import erf

        return be.from_numpy(erf(be.to_numpy(x._data)))

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * (2.0 / math.sqrt(math.pi)) * (-(x * x)).exp()


def _erf(x):
    return _Erf.apply(x)


class Sin(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._be.sin(x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()


class Cos(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x._be.cos(x._data)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return -g * x.sin()


class Clamp(Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.bounds = (lo, hi)
        return x._be.clamp(x._data, lo, hi)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        lo, hi = ctx.bounds
        keep = None
        if lo is not None:
            keep = x >= lo
        if hi is not None:
            k = x <= hi
            keep = k if keep is None else keep & k
        return g * keep.to(g.dtype), None, None


def gelu(x, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return Gelu.apply(x, approximate)


def clamp(x, lo=None, hi=None):
    if lo is None and hi is None:
        raise ValueError("clamp: at least one of min and max must be given")
    for bound in (lo, hi):  # a float bound makes an integer tensor float, as in PyTorch
        if bound is not None and result_type_scalar(x.dtype, bound) is not x.dtype:
            x = cast(x, result_type_scalar(x.dtype, bound))
    return Clamp.apply(x, lo, hi)


# -- ops without a gradient ----------------------------------------------------------------


def _no_grad_wrap(raw):
    return Tensor._wrap(raw)


def compare(kind, a, b):
    be = a._be
    if _is_scalar(b):
        rb = _scalar_raw(be, b, result_type_scalar(a.dtype, b))
        if not a.dtype.is_floating_point and isinstance(b, float):
            a = cast(a, result_type_scalar(a.dtype, b))
        return _no_grad_wrap(getattr(be, kind)(a._data, rb))
    if not isinstance(b, Tensor):
        b = as_tensor_like(b, a)
    a, b = _promote_pair(kind, a, b)
    layout.broadcast_shapes(a.shape, b.shape, op=kind)
    return _no_grad_wrap(getattr(be, kind)(a._data, b._data))


def sign(x):
    return _no_grad_wrap(x._be.sign(x._data))


def logical_not(x):
    if x.dtype is not bool_:
        raise TypeError(f"~ (logical not) needs a bool tensor, got {x.dtype.name}")
    return compare("eq", x, False)


def logical(kind, a, b):
    if a.dtype is not bool_ or (isinstance(b, Tensor) and b.dtype is not bool_):
        raise TypeError(f"logical {kind} needs bool tensors")
    b = b if isinstance(b, Tensor) else as_tensor_like(b, a)
    if kind == "and":
        return _no_grad_wrap(a._be.mul(a.to("int32")._data, b.to("int32")._data)).bool()
    return _no_grad_wrap(a._be.maximum(a.to("int32")._data, b.to("int32")._data)).bool()


def where(cond, a, b):
    from .indexing import where as _where

    return _where(cond, a, b)


def ones_like(x):
    from ..creation import ones_like as _ones_like

    return _ones_like(x)


from ..tensor import Tensor  # noqa: E402
