"""What torch.linalg's host decompositions share: the checks PyTorch makes of a matrix
input, the read to the host and the way back to the input's device, the errors that name
the batch element, and Factor, the graph node of one host-computed result.

numpy's LAPACK computes each decomposition in the input's own precision (float32 in
float32, as PyTorch's CPU kernels), on the host for every device: a GPU input is read
back and its results are sent to the GPU again. The gradients are written with Haelixe
ops, so they run where the tensors are and have graphs of their own.
"""

from __future__ import annotations

import math

import numpy as np

from ..autograd.function import Function
from ..autograd.mode import STATE
from ..dtype import bfloat16, float16
from ..errors import OpError, OpTypeError
from ..tensor import Tensor


class LinAlgError(OpError):
    """torch.linalg.LinAlgError: a matrix the op cannot take (singular, not positive-
    definite, no convergence). A RuntimeError, as PyTorch's; a ValueError too."""


def check_float(op, t, name="A", low_precision=False):
    """Refuse what LAPACK cannot take, as PyTorch does: integers and bools always,
    bfloat16 and float16 unless ``low_precision`` (the ops composed of elementwise ops
    and sums take them)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected a Tensor for {name}, got {type(t).__name__}")
    dt = t.dtype
    if not dt.is_floating_point:
        raise OpTypeError(f"{op}: Expected a floating point tensor as {name}, got "
                          f"{dt.name} (shape {t.shape}); convert with .float() or "
                          f".double() first")
    if not low_precision and dt in (bfloat16, float16):
        raise OpTypeError(f"{op}: {dt.name} is not supported (LAPACK has no 16-bit "
                          f"routines; PyTorch refuses it too); convert with .float() first")


def check_matrices(op, A, name="A", square=True, low_precision=False):
    """``A`` a batch of (square) float matrices, shape (*, m, n), or a clear error."""
    check_float(op, A, name, low_precision)
    if A.ndim < 2:
        raise OpError(f"{op}: The input tensor {name} must have at least 2 dimensions, got "
                      f"shape {A.shape}; a matrix is (m, n), a batch of them (*, m, n)")
    if square and A.shape[-1] != A.shape[-2]:
        raise OpError(f"{op}: {name} must be batches of square matrices, but they are "
                      f"{A.shape[-2]} by {A.shape[-1]} matrices (shape {A.shape})")


def host(t) -> np.ndarray:
    """``t``'s values as a C-contiguous numpy array (a read-back on the GPU)."""
    return np.ascontiguousarray(t.detach().cpu().numpy())


def on_device(array, like) -> Tensor:
    """A fresh tensor of ``array``'s values on ``like``'s device, in ``array``'s dtype."""
    a = np.array(array, order="C", copy=True)
    return Tensor._wrap(like._be.from_numpy(a))


def batch_prefix(index, batch_shape) -> str:
    """PyTorch's "(Batch element i): " for a batched input (flat index), else ""."""
    return f"(Batch element {index}): " if batch_shape else ""


def stack(a) -> np.ndarray:
    """The matrices of ``a`` (*, m, n) as one batch dim: (batch, m, n), a view."""
    return a.reshape((math.prod(a.shape[:-2]),) + a.shape[-2:])


def first_failing(matrices, attempt):
    """(flat index, exception) of the first matrix of a batch (shape (*, m, n)) that
    ``attempt`` raises numpy's LinAlgError for, or None."""
    for i, m in enumerate(stack(matrices)):
        try:
            attempt(m)
        except np.linalg.LinAlgError as e:
            return i, e
    return None


def batch_failure(op, a, attempt, what) -> LinAlgError:
    """numpy's LinAlgError for the batch ``a`` as PyTorch's: ``what`` failed, at the first
    matrix that ``attempt`` fails for."""
    found = first_failing(a, attempt)
    i = found[0] if found is not None else 0
    return LinAlgError(f"{op}: {batch_prefix(i, a.shape[:-2])}{what} (shape {a.shape})")


def zero_pivot(matrix):
    """The 1-based position of the first exact zero on the diagonal of U in the LU
    factorization with partial pivoting (LAPACK's getrf info), or None."""
    a = np.array(matrix, copy=True)
    n = a.shape[0]
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if a[p, k] == 0:
            return k + 1
        a[[k, p]] = a[[p, k]]
        a[k + 1:, k:] -= np.outer(a[k + 1:, k] / a[k, k], a[k, k:])
    return None


class HostResult:
    """The arrays a decomposition computed on the host for its inputs, what a backward
    reads: ``gradient(inputs, outputs, grads)`` gives one gradient per input (grads: one
    per output, None for an output no gradient reached); ``recompute(*inputs)`` runs
    the op again, recorded, for a backward that builds a graph (create_graph), so the
    outputs it reads depend on the inputs there too."""

    __slots__ = ("label", "arrays", "gradient", "recompute")

    def __init__(self, label, arrays, gradient, recompute):
        self.label, self.arrays = label, arrays
        self.gradient, self.recompute = gradient, recompute


class Factor(Function):
    """One output of a host decomposition, as a graph node. Each output of a
    decomposition is its own node (Q and R, the eigenvalues and the eigenvectors), and
    each node's backward is the decomposition's gradient with its output's gradient
    alone: the standard formulas are linear in the outputs' gradients, so the nodes'
    gradients add up to the whole."""

    @staticmethod
    def forward(ctx, part, result, *inputs):
        ctx.save_for_backward(*inputs)
        ctx.part, ctx.result, ctx.label = part, result, result.label
        a = np.array(result.arrays[part], order="C", copy=True)  # (the output's own)
        return inputs[0]._be.from_numpy(a)

    @staticmethod
    def backward(ctx, g):
        inputs = ctx.saved_tensors
        r = ctx.result
        if STATE.grad_enabled:
            outputs = r.recompute(*inputs)
        else:
            outputs = tuple(on_device(a, inputs[0]) for a in r.arrays)
        grads = [None] * len(outputs)
        grads[ctx.part] = g
        return (None, None, *r.gradient(inputs, outputs, grads))


def record(label, arrays, inputs, gradient, recompute) -> tuple:
    """The tensors of ``arrays`` (host results computed from ``inputs``) on the first
    input's device, each a Factor node where some input requires grad."""
    if not (STATE.grad_enabled and any(t.requires_grad for t in inputs)):
        return tuple(on_device(a, inputs[0]) for a in arrays)
    result = HostResult(label, arrays, gradient, recompute)
    return tuple(Factor.apply(i, result, *inputs) for i in range(len(arrays)))
