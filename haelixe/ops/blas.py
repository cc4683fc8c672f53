"""BLAS-style products composed of matmul and elementwise ops: addmm, addmv, addr,
addbmm, baddbmm, addcmul, addcdiv (each with its in-place form), dot, vdot, mv, inner,
ger, chain_matmul, dist and renorm. Each records the ops it is made of, so autograd and
every backend come with them; none needs a derivative of its own."""

from __future__ import annotations

import inspect
import numbers
import warnings

from .. import layout
from ..dtype import bool_, promote_types
from ..errors import OpError, OpTypeError
from ..tensor import Tensor
from .composite import _in_place
from .indexing import where
from .linalg import matmul, outer
from .linalg_compose import multi_dot
from .linalg_norms import vector_norm
from .registry import declare, function, tensor_method


def _tensor(op, name, t):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    return t


def _rank(op, name, t, ndim):
    _tensor(op, name, t)
    if t.ndim != ndim:
        raise OpError(f"{op}: {name} must be a {ndim}-D tensor, got shape {t.shape}")


def _one_dtype(op, named):
    """PyTorch's products refuse operands of different dtypes or devices (no promotion)."""
    (n0, t0), *rest = named
    for n, t in rest:
        if t.dtype is not t0.dtype:
            raise OpTypeError(f"{op}: {n0} and {n} must have the same dtype, got "
                              f"{t0.dtype.name} and {t.dtype.name}; convert one with "
                              f".to(...)")
        if t.device is not t0.device:
            raise RuntimeError(f"{op}: {n0} on {t0.device.type}, {n} on {t.device.type}; "
                               f"move one with .to(...)")
    if t0.dtype is bool_:
        raise OpTypeError(f"{op}: not defined for bool tensors (as in PyTorch); convert "
                          f"with .int() or .float() first")


def _coefficient(value, dtype):
    """beta / alpha / value as the result's dtype takes it: integers truncate it."""
    if isinstance(value, Tensor):
        value = value.item()
    if dtype is bool_:
        return bool(value)
    return value if dtype.is_floating_point else int(value)


def _broadcasts_to(shape, target):
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(shape[::-1], target[::-1]))


def _scaled_sum(op, input, product, beta, alpha):
    """beta * input + alpha * product, input broadcast to the product's shape; with
    beta == 0 input is ignored (its NaN and inf too), as PyTorch's BLAS does, though its
    gradient (zero) still reaches it."""
    if not _broadcasts_to(input.shape, product.shape):
        raise OpError(f"{op}: input of shape {input.shape} does not broadcast to the "
                      f"product's shape {product.shape}")
    dt = product.dtype
    beta, alpha = _coefficient(beta, dt), _coefficient(alpha, dt)
    if dt is bool_:  # (addr of bools: or and and, as PyTorch computes them)
        part = product if alpha else product & False
        return (input & beta) | part if beta else where(True, part, input)
    scaled = product if alpha == 1 else product * alpha
    if beta == 0:
        return where(True, scaled, input)  # (input's gradient: zeros)
    return scaled + (input if beta == 1 else input * beta)


@tensor_method(function=True)
def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):  # noqa: A002 (PyTorch's names)
    """addmm(input, mat1, mat2, *, beta=1, alpha=1) -> Tensor

    beta * input + alpha * (mat1 @ mat2): mat1 (n, m), mat2 (m, p), input broadcast to
    (n, p); beta=0 ignores input's values."""
    _no_out("addmm", out)
    _rank("addmm", "mat1", mat1, 2)
    _rank("addmm", "mat2", mat2, 2)
    _one_dtype("addmm", (("input", _tensor("addmm", "input", input)), ("mat1", mat1),
                         ("mat2", mat2)))
    _inner_size("addmm", mat1, mat2)
    return _scaled_sum("addmm", input, matmul(mat1, mat2), beta, alpha)


@tensor_method(function=True)
def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):  # noqa: A002
    """addmv(input, mat, vec, *, beta=1, alpha=1) -> Tensor

    beta * input + alpha * (mat @ vec): mat (n, m), vec (m,), input broadcast to (n,)."""
    _no_out("addmv", out)
    _rank("addmv", "mat", mat, 2)
    _rank("addmv", "vec", vec, 1)
    _one_dtype("addmv", (("input", _tensor("addmv", "input", input)), ("mat", mat),
                         ("vec", vec)))
    _inner_size("addmv", mat, vec)
    return _scaled_sum("addmv", input, matmul(mat, vec), beta, alpha)


@tensor_method(function=True)
def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):  # noqa: A002
    """addr(input, vec1, vec2, *, beta=1, alpha=1) -> Tensor

    beta * input + alpha * outer(vec1, vec2), input broadcast to (n, m); bool tensors
    give (beta and input) or (alpha and vec1[i] and vec2[j])."""
    _no_out("addr", out)
    _rank("addr", "vec1", vec1, 1)
    _rank("addr", "vec2", vec2, 1)
    named = (("input", _tensor("addr", "input", input)), ("vec1", vec1), ("vec2", vec2))
    if not all(t.dtype is bool_ for _, t in named):  # (bools: PyTorch's one exception)
        _one_dtype("addr", named)
    return _scaled_sum("addr", input, outer(vec1, vec2), beta, alpha)


@tensor_method(function=True)
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):  # noqa: A002
    """baddbmm(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor

    beta * input + alpha * (batch1 @ batch2) per batch: batch1 (b, n, m), batch2
    (b, m, p), input broadcast to (b, n, p)."""
    _no_out("baddbmm", out)
    _batches("baddbmm", batch1, batch2)
    _one_dtype("baddbmm", (("input", _tensor("baddbmm", "input", input)),
                           ("batch1", batch1), ("batch2", batch2)))
    return _scaled_sum("baddbmm", input, matmul(batch1, batch2), beta, alpha)


@tensor_method(function=True)
def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):  # noqa: A002
    """addbmm(input, batch1, batch2, *, beta=1, alpha=1) -> Tensor

    beta * input + alpha * the sum over b of batch1[b] @ batch2[b]: batch1 (b, n, m),
    batch2 (b, m, p), input broadcast to (n, p)."""
    _no_out("addbmm", out)
    _batches("addbmm", batch1, batch2)
    _one_dtype("addbmm", (("input", _tensor("addbmm", "input", input)),
                          ("batch1", batch1), ("batch2", batch2)))
    (b, n, m), p = batch1.shape, batch2.shape[2]
    # (the batch folded into the inner dim: one product, in the operands' dtype)
    summed = matmul(batch1.permute(1, 0, 2).reshape(n, b * m), batch2.reshape(b * m, p))
    return _scaled_sum("addbmm", input, summed, beta, alpha)


def _no_out(op, out):
    if out is not None:
        raise OpError(f"{op}: out= is not supported; assign the result instead")


def _inner_size(op, a, b):
    if a.shape[-1] != b.shape[0]:
        raise OpError(f"{op}: shapes {a.shape} and {b.shape} cannot be multiplied "
                      f"({a.shape[-1]} != {b.shape[0]})")


def _batches(op, batch1, batch2):
    _rank(op, "batch1", batch1, 3)
    _rank(op, "batch2", batch2, 3)
    if batch1.shape[0] != batch2.shape[0]:
        raise OpError(f"{op}: batch1 and batch2 must have the same number of matrices, "
                      f"got shapes {batch1.shape} and {batch2.shape}")
    if batch1.shape[2] != batch2.shape[1]:
        raise OpError(f"{op}: shapes {batch1.shape} and {batch2.shape} cannot be "
                      f"multiplied ({batch1.shape[2]} != {batch2.shape[1]})")


def _addc(op, input, tensor1, tensor2, value, combine):
    for name, t in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        _tensor(op, name, t)
    dt = promote_types(promote_types(input.dtype, tensor1.dtype), tensor2.dtype)
    if dt is bool_:
        raise OpTypeError(f"{op}: not defined for bool tensors (as in PyTorch); convert "
                          f"with .int() or .float() first")
    term = combine(tensor1, tensor2)
    value = _coefficient(value, dt)
    return input + (term if value == 1 else term * value)


def _quotient(tensor1, tensor2):
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        raise OpTypeError(f"addcdiv: integer division ({tensor1.dtype.name} / "
                          f"{tensor2.dtype.name}) is not supported (as in PyTorch); "
                          f"convert tensor1 or tensor2 with .float() first")
    return tensor1 / tensor2


@tensor_method(function=True)
def addcmul(input, tensor1, tensor2, *, value=1, out=None):  # noqa: A002
    """addcmul(input, tensor1, tensor2, *, value=1) -> Tensor

    input + value * tensor1 * tensor2, elementwise (broadcast, dtypes promoted)."""
    _no_out("addcmul", out)
    return _addc("addcmul", input, tensor1, tensor2, value, lambda a, b: a * b)


@tensor_method(function=True)
def addcdiv(input, tensor1, tensor2, *, value=1, out=None):  # noqa: A002
    """addcdiv(input, tensor1, tensor2, *, value=1) -> Tensor

    input + value * tensor1 / tensor2, elementwise (broadcast, dtypes promoted); two
    integer tensors are refused, as PyTorch refuses their division."""
    _no_out("addcdiv", out)
    return _addc("addcdiv", input, tensor1, tensor2, value, _quotient)


def _grad_source(*tensors):
    """The first operand that requires grad (the in-place record must carry it)."""
    return next((t for t in tensors if isinstance(t, Tensor) and t._requires_grad), None)


def _in_place_product(fn):
    """Tensor.<fn>_: ``fn(self, first, second, **keywords)`` written into self's memory
    (of self's shape), with fn's signature less ``out=``."""
    op = fn.__name__
    sig = inspect.signature(fn)
    sig = sig.replace(parameters=[p for p in sig.parameters.values() if p.name != "out"])

    def method(input, first, second, **keywords):  # noqa: A002
        sig.bind(input, first, second, **keywords)  # (an unknown keyword: fn's TypeError)
        return _in_place(input, op, lambda x: fn(x, first, second, **keywords),
                         _grad_source(first, second))

    method.__name__ = method.__qualname__ = op + "_"
    method.__signature__ = sig
    method.__doc__ = f"{op}_{str(sig).replace('input, ', '', 1)} -> Tensor\n\nIn-place " \
                     f"{op}: the result (of this tensor's shape) written into its memory."
    return method


for _product in (addmm, addmv, addr, baddbmm, addbmm, addcmul, addcdiv):
    tensor_method(name=_product.__name__ + "_")(_in_place_product(_product))


# -- vector products -------------------------------------------------------------------
def _vectors(op, input, other, other_name):
    _rank(op, "input", input, 1)
    _rank(op, other_name, other, 1)
    if input.shape[0] != other.shape[0]:
        raise OpError(f"{op}: inconsistent tensor size, expected input and {other_name} "
                      f"to have the same number of elements, got {input.shape[0]} and "
                      f"{other.shape[0]}")
    _one_dtype(op, (("input", input), (other_name, other)))
    return matmul(input, other)


@tensor_method(function=True)
def dot(input, tensor, *, out=None):  # noqa: A002
    """dot(input, tensor) -> Tensor

    The dot product of two 1-D tensors of one size and dtype (a 0-d tensor)."""
    _no_out("dot", out)
    return _vectors("dot", input, tensor, "tensor")


@tensor_method(function=True)
def vdot(input, other, *, out=None):  # noqa: A002
    """vdot(input, other) -> Tensor

    The dot product of two 1-D tensors, the first conjugated (real tensors: dot)."""
    _no_out("vdot", out)
    return _vectors("vdot", input, other, "other")


@tensor_method(function=True)
def mv(input, vec, *, out=None):  # noqa: A002
    """mv(input, vec) -> Tensor

    The product of a matrix (n, m) and a vector (m,), a vector (n,)."""
    _no_out("mv", out)
    _rank("mv", "input", input, 2)
    _rank("mv", "vec", vec, 1)
    _inner_size("mv", input, vec)
    _one_dtype("mv", (("input", input), ("vec", vec)))
    return matmul(input, vec)


@tensor_method(function=True)
def inner(input, other, *, out=None):  # noqa: A002
    """inner(input, other) -> Tensor

    The sum of products over the last dims of both (of one size): the result's shape is
    input.shape[:-1] + other.shape[:-1]; a 0-d operand multiplies the other."""
    _no_out("inner", out)
    _tensor("inner", "input", input)
    _tensor("inner", "other", other)
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise OpError(f"inner: the last dims of input (shape {input.shape}) and other "
                      f"(shape {other.shape}) must match, got {input.shape[-1]} and "
                      f"{other.shape[-1]}")
    _one_dtype("inner", (("input", input), ("other", other)))
    k = input.shape[-1]
    out = matmul(input.reshape(-1, k), other.reshape(-1, k).mT)
    return out.reshape(input.shape[:-1] + other.shape[:-1])


@function
def ger(input, vec2, *, out=None):  # noqa: A002
    """ger(input, vec2) -> Tensor

    outer's older name: the outer product of two vectors."""
    _no_out("ger", out)
    return outer(input, vec2)


@function
def chain_matmul(*matrices, out=None):
    """chain_matmul(*matrices) -> Tensor

    The product of the 2-D tensors in the cheapest order (deprecated, as in PyTorch:
    use linalg.multi_dot, which takes a list)."""
    _no_out("chain_matmul", out)
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future "
                  "release; use linalg.multi_dot instead, which takes a list of two or "
                  "more tensors", UserWarning, stacklevel=2)
    if not matrices:
        raise OpError("chain_matmul: expected one or more tensors")
    for i, t in enumerate(matrices):
        _rank("chain_matmul", f"tensor {i}", t, 2)
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(matrices)


# -- distances and norms ---------------------------------------------------------------
def _norm_order(op, p):
    if isinstance(p, Tensor):
        p = p.item()
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"{op}: p must be a number, got {p!r}")
    return float(p)


def _float_input(op, x):
    if not x.dtype.is_floating_point:
        raise OpTypeError(f"{op}: expected a floating point tensor, got {x.dtype.name} "
                          f"(shape {x.shape}); convert with .float() first")


@tensor_method(function=True)
def dist(input, other, p=2):  # noqa: A002
    """dist(input, other, p=2) -> Tensor

    The p-norm of input - other (broadcast, dtypes promoted), as one vector."""
    _tensor("dist", "input", input)
    _tensor("dist", "other", other)
    dt = promote_types(input.dtype, other.dtype)
    if not dt.is_floating_point:
        raise OpTypeError(f"dist: expected floating point tensors, got {input.dtype.name} "
                          f"and {other.dtype.name}; convert with .float() first")
    layout.broadcast_shapes(input.shape, other.shape, op="dist")
    return vector_norm(input - other, _norm_order("dist", p))


def _renorm(x, p, dim, maxnorm):
    op = "renorm"
    p = _norm_order(op, p)
    if p <= 0:
        raise OpError(f"{op}: non-positive norm (p={p:g}) is not supported; pass p > 0")
    if isinstance(maxnorm, Tensor):
        maxnorm = maxnorm.item()
    if maxnorm < 0:
        raise OpError(f"{op}: maxnorm must be >= 0, got {maxnorm}")
    _float_input(op, x)
    if x.ndim == 0:
        raise OpError(f"{op}: input needs at least one dim, got a 0-d tensor")
    d = layout.normalize_dim(dim, x.ndim, op)
    others = tuple(i for i in range(x.ndim) if i != d)
    norms = vector_norm(x, p, others, keepdim=True) if others else x.abs()
    # (PyTorch's guard: 1e-7 added to the norm, so a zero slice divides by no zero)
    factor = where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    return x * factor.to(x.dtype)


@tensor_method(function=True)
def renorm(input, p, dim, maxnorm, *, out=None):  # noqa: A002
    """renorm(input, p, dim, maxnorm) -> Tensor

    input with each slice along ``dim`` whose p-norm exceeds ``maxnorm`` scaled down to
    norm maxnorm (by maxnorm / (norm + 1e-7)); the other slices unchanged."""
    _no_out("renorm", out)
    return _renorm(input, p, dim, maxnorm)


@tensor_method(name="renorm_")
def renorm_(input, p, dim, maxnorm):  # noqa: A002
    """renorm_(p, dim, maxnorm) -> Tensor

    In-place renorm."""
    return _in_place(input, "renorm", lambda x: _renorm(x, p, dim, maxnorm))


for _name in ("addmm", "addmv", "addr", "baddbmm", "addbmm", "addcmul", "addcdiv"):
    declare(_name, arity=3, dtypes="any")
for _name in ("dot", "vdot", "mv", "inner", "ger", "chain_matmul"):
    declare(_name, arity=2, dtypes="any")
declare("dist", arity=2)
declare("renorm")
