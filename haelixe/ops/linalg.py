"""Matrix multiplication: batched, broadcasting, numpy's rules for 1-D operands."""

from __future__ import annotations

from .. import layout
from ..amp import cast_inputs
from ..autograd.function import Function
from ..autograd.mode import STATE
from ..dtype import promote_types
from ..tensor import Tensor
from .registry import declare, tensor_method


class MatMul(Function):
    """a @ b for ndim >= 2. Backward multiplies by transposed *views* (g @ b.mT), which
    the backend reads through their strides, so no transpose is ever copied."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a._be.matmul(a._data, b._data)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        na, nb = ctx.next
        ga = matmul(g, b.mT).sum_to(a.shape) if na is not None else None
        gb = matmul(a.mT, g).sum_to(b.shape) if nb is not None else None
        return ga, gb


def _promote_pair(op, a, b):
    if a.device is not b.device:
        raise RuntimeError(f"{op}: expected both tensors on the same device, got "
                           f"{a.device.type} (shape {a.shape}) and {b.device.type} (shape "
                           f"{b.shape}); move one with .to(...)")
    if a.dtype is not b.dtype:
        dt = promote_types(a.dtype, b.dtype)
        a, b = a.to(dt), b.to(dt)
    if not a.dtype.is_floating_point:
        raise TypeError(f"{op}: integer and bool tensors are not multiplied here (dtype "
                        f"{a.dtype.name}); convert with .float() first")
    return a, b


def _as_tensor(b, a):
    if isinstance(b, Tensor):
        return b
    from ..creation import tensor

    return tensor(b, dtype=a.dtype, device=a.device)


def matmul(a, b):
    if not isinstance(a, Tensor):
        raise TypeError(f"matmul: expected a Tensor, got {type(a).__name__}")
    b = _as_tensor(b, a)
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: both operands need at least 1 dim, got shapes {a.shape} "
                         f"and {b.shape}; use * for scalars")
    if STATE.autocast is not None:
        a, b = cast_inputs("matmul", a, b)
    a, b = _promote_pair("matmul", a, b)
    if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        raise ValueError(
            f"matmul: shapes {a.shape} and {b.shape} cannot be multiplied: the last dim of "
            f"the first ({a.shape[-1]}) must equal the "
            f"{'second-to-last' if b.ndim > 1 else 'only'} dim of the second "
            f"({b.shape[-2 if b.ndim > 1 else 0]})")
    if a.ndim == 1 and b.ndim == 1:
        return MatMul.apply(a.unsqueeze(0), b.unsqueeze(1)).reshape(())
    if a.ndim == 1:
        return MatMul.apply(a.unsqueeze(0), b).squeeze(-2)
    if b.ndim == 1:
        return MatMul.apply(a, b.unsqueeze(1)).squeeze(-1)
    if a.ndim > 2 or b.ndim > 2:
        layout.broadcast_shapes(a.shape[:-2], b.shape[:-2], op="matmul (batch dims)")
    return MatMul.apply(a, b)


def bmm(a, b):
    """Batched matrix product of two 3-D tensors (b, n, m) @ (b, m, p)."""
    if a.ndim != 3 or b.ndim != 3:
        raise ValueError(f"bmm: expected 3-D tensors, got shapes {a.shape} and {b.shape}; "
                         f"use matmul for other ranks")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"bmm: batch sizes {a.shape[0]} and {b.shape[0]} differ")
    return matmul(a, b)


declare("matmul", arity=2)
declare("bmm", arity=2)
tensor_method(matmul, function=True)
tensor_method(bmm, function=True)
Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = lambda self, other: matmul(_as_tensor(other, self), self)
