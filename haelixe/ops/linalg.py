"""Matrix multiplication: batched, broadcasting, numpy's rules for 1-D operands."""

from __future__ import annotations

from .. import layout
from ..amp import cast_inputs
from ..autograd.function import Function
from ..autograd.mode import STATE
from .elementwise import _promote_pair


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


def matmul(a, b):
    if not isinstance(b, Tensor):
        from .elementwise import as_tensor_like

        b = as_tensor_like(b, a)
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


from ..tensor import Tensor  # noqa: E402
