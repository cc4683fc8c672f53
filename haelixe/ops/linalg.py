"""Matrix multiplication: batched, broadcasting, numpy's rules for 1-D operands."""

from __future__ import annotations

import math

from .. import layout
from ..amp import cast_inputs
from ..autograd.function import Function, wrap_grads
from ..autograd.mode import STATE
from ..dtype import promote_types
from ..errors import OpError
from ..tensor import Tensor
from .convert import as_tensor_like
from .registry import declare, tensor_method


class MatMul(Function):
    """a @ b for ndim >= 2. Backward multiplies by transposed *views* (g @ b.mT), which
    the backend reads through their strides, so no transpose is ever copied."""

    small_state = True

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a._be.matmul(a._data, b._data)

    @staticmethod
    def backward(ctx, g):
        if not STATE.grad_enabled:
            return wrap_grads(MatMul._array_backward(ctx, g._data))
        a, b = ctx.saved_tensors
        na, nb = ctx.next
        ga = matmul(g, b.mT).sum_to(a.shape) if na is not None else None
        gb = matmul(a.mT, g).sum_to(b.shape) if nb is not None else None
        return ga, gb

    @staticmethod
    def _array_backward(ctx, gd):
        # first order (the gradient needs no graph of its own): the backend's kernel on
        # the raw arrays, as the registry's elementwise gradients run; the checks and
        # promotions of matmul() were done by the forward
        a, b = ctx.saved_tensors
        na, nb = ctx.next
        be = b._be
        ga = None
        if na is not None:
            ga = be.matmul(gd, be.mT(b._data))
            if ga.shape != a.shape:  # (a broadcast batch: summed back)
                ga = Tensor._wrap(ga).sum_to(a.shape)
        if nb is None:
            return ga, None
        if len(b.shape) == 2 and len(a.shape) > 2:
            # a matrix shared by a batch: the batch folds into the product's inner dim
            # (one matmul, no per-batch products to sum afterwards)
            (k, n), rows = b.shape, math.prod(a.shape[:-1])
            return ga, be.matmul(be.mT(be.reshape(a._data, (rows, k))),
                                 be.reshape(gd, (rows, n)))
        return ga, Tensor._wrap(be.matmul(be.mT(a._data), gd)).sum_to(b.shape)


def _promote_pair(op, a, b):
    if a.device is not b.device:
        raise RuntimeError(f"{op}: expected both tensors on the same device, got "
                           f"{a.device.type} (shape {a.shape}) and {b.device.type} (shape "
                           f"{b.shape}); move one with .to(...)")
    if a.dtype is not b.dtype:
        dt = promote_types(a.dtype, b.dtype)
        a, b = a.to(dt), b.to(dt)
    if a.dtype.kind == "bool":
        raise TypeError(f"{op}: not defined for bool tensors (as in PyTorch); convert with "
                        f".int() or .float() first")
    return a, b


def matmul(input, other):
    """matmul(input, other) -> Tensor

    The matrix product, with numpy's rules: 1-D operands are a row (first) or a column
    (second) vector, removed from the result; the batch dims broadcast."""
    a, b = input, other  # (short names: the checks below read both often)
    if not isinstance(a, Tensor):
        if getattr(a, "is_sparse", False):  # (haelixe.sparse: its own product)
            return a.mm(b)
        raise TypeError(f"matmul: expected a Tensor, got {type(a).__name__}")
    if b.__class__ is not Tensor:
        if getattr(b, "is_sparse", False):
            return b.__rmatmul__(a)
        b = as_tensor_like(b, a, a.dtype)
    na, nb = len(a.shape), len(b.shape)  # (the ndim property, read once)
    if na == 0 or nb == 0:
        raise OpError(f"matmul: both operands need at least 1 dim, got shapes {a.shape} "
                      f"and {b.shape}; use * for scalars")
    if STATE.autocast is not None:
        a, b = cast_inputs("matmul", a, b)
    if a.dtype is not b.dtype or a.device is not b.device or a.dtype.kind == "bool":
        a, b = _promote_pair("matmul", a, b)
    if a.shape[-1] != b.shape[-2 if nb > 1 else 0]:
        raise OpError(
            f"matmul: shapes {a.shape} and {b.shape} cannot be multiplied: the last dim of "
            f"the first ({a.shape[-1]}) must equal the "
            f"{'second-to-last' if nb > 1 else 'only'} dim of the second "
            f"({b.shape[-2 if nb > 1 else 0]})")
    if na == 1 and nb == 1:
        return MatMul.apply(a.unsqueeze(0), b.unsqueeze(1)).reshape(())
    if na == 1:
        return MatMul.apply(a.unsqueeze(0), b).squeeze(-2)
    if nb == 1:
        return MatMul.apply(a, b.unsqueeze(1)).squeeze(-1)
    if na > 2 and nb > 2:  # (a matrix broadcasts against any batch)
        layout.broadcast_shapes(a.shape[:-2], b.shape[:-2], op="matmul (batch dims)")
    return MatMul.apply(a, b)


def bmm(input, mat2):
    """Batched matrix product of two 3-D tensors (b, n, m) @ (b, m, p)."""
    a, b = input, mat2
    if a.ndim != 3 or b.ndim != 3:
        raise OpError(f"bmm: expected 3-D tensors, got shapes {a.shape} and {b.shape}; "
                      f"use matmul for other ranks")
    if a.shape[0] != b.shape[0]:
        raise OpError(f"bmm: batch sizes {a.shape[0]} and {b.shape[0]} differ")
    return matmul(a, b)


declare("matmul", arity=2)
declare("bmm", arity=2)
declare("mm", arity=2)
tensor_method(matmul, function=True)
tensor_method(bmm, function=True)


def _two_of_rank(op, input, other, ndim: int, fix: str) -> None:
    """Refuse ``op`` unless both operands are tensors of ``ndim`` dims."""
    if not isinstance(other, Tensor) or input.ndim != ndim or other.ndim != ndim:
        shape = getattr(other, "shape", type(other).__name__)
        raise RuntimeError(f"{op}: expected two {ndim}-D tensors, got shapes {input.shape} "
                           f"and {shape}; {fix}")


@tensor_method(function=True)
def mm(input, mat2):
    """The product of two matrices (2-D tensors); matmul for other ranks."""
    if getattr(input, "is_sparse", False) or getattr(mat2, "is_sparse", False):
        return matmul(input, mat2)  # (a sparse matrix's own product, haelixe.sparse)
    _two_of_rank("mm", input, mat2, 2, "use matmul (@) for other ranks")
    return matmul(input, mat2)


@tensor_method(function=True)
def outer(input, vec2):
    """The outer product of two vectors: (n,) and (m,) give (n, m), input[i] * vec2[j]."""
    _two_of_rank("outer", input, vec2, 1, "flatten() them, or use matmul for matrices")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


declare("outer", arity=2)
Tensor.ger = outer  # (PyTorch's older name)
Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = lambda self, other: matmul(as_tensor_like(other, self, self.dtype), self)
