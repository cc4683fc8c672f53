"""Higher-level derivatives of a function (PyTorch's torch.autograd.functional):
jacobian, hessian and vector products with them, each built from ``grad`` passes.

Every function takes ``inputs`` as a tensor or a tuple of tensors and shapes its results
the way PyTorch does: a tuple where the inputs (or outputs) were a tuple, a plain tensor
where they were one. Without ``create_graph`` the results carry no history."""

from __future__ import annotations

import numpy as np

from ..creation import zeros_like
from ..tensor import Tensor
from .api import grad as _autograd_grad_api
from .mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _as_tuple(obj, what, op):
    """(tuple of tensors, was it a tuple?), with PyTorch's TypeError otherwise."""
    was_tuple = isinstance(obj, (tuple, list))
    items = tuple(obj) if was_tuple else (obj,)
    for i, item in enumerate(items):
        if not isinstance(item, Tensor):
            where = f"the value at index {i} has" if was_tuple else f"the given {what} has"
            raise TypeError(f"The {what} given to {op} must be either a Tensor or a tuple of "
                            f"Tensors but {where} type {type(item)}.")
    return items, was_tuple


def _untuple(res, was_tuple):
    """A tuple result back to the caller's form: one level per flag in ``was_tuple``."""
    if isinstance(was_tuple, tuple):
        outer, inner = was_tuple
        if not inner:
            res = tuple(r[0] for r in res)
        if not outer:
            res = res[0]
        return res
    return res if was_tuple else res[0]


def _prepare(inputs, create_graph, need_graph=True):
    """Fresh inputs to differentiate against: a view that keeps the caller's graph when
    ``create_graph`` (so results can be differentiated again), else a detached copy."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(need_graph))
    return tuple(out)


def _finish(res, create_graph):
    """Results without history unless the caller asked for a graph."""
    if isinstance(res, Tensor):
        return res if create_graph else res.detach()
    return tuple(_finish(r, create_graph) for r in res)


def _grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """hx.autograd.grad over the outputs that carry history; None for an input the
    outputs do not reach (and for every input when no output carries history)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return _autograd_grad_api([o for o, _ in pairs], list(inputs), [g for _, g in pairs],
                              retain_graph=create_graph if retain_graph is None
                              else retain_graph,
                              create_graph=create_graph, allow_unused=True)


def _check_outputs_require_grad(outputs, strict):
    if not strict:
        return
    for i, o in enumerate(outputs):
        if not o.requires_grad:
            raise RuntimeError(f"Output {i} of the user-provided function does not require "
                               f"gradients. The outputs must be computed in a differentiable "
                               f"manner from the input when running in strict mode.")


def _zeros_for_missing(grads, refs, strict, create_graph, stage):
    """Zeros (the true derivative) where ``grad`` found no path; in strict mode an
    error instead, worded for the pass that found none."""
    out = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(_STRICT_MESSAGES[stage].format(i=i))
            g = zeros_like(ref)
        out.append(g)
    return tuple(out)


_STRICT_MESSAGES = {
    "back": "The output of the user-provided function is independent of input {i}. This is "
            "not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
                   "This is not allowed in strict mode.",
}


def _check_v(v, refs, was_tuple, op_what):
    """``v`` as a tuple matching ``refs`` in length and shapes (PyTorch's errors)."""
    if len(v) != len(refs):
        if was_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(refs)} but got "
                               f"{len(v)}.")
        raise RuntimeError(f"The given v should contain a single Tensor ({op_what}).")
    for i, (vi, ref) in enumerate(zip(v, refs)):
        if tuple(vi.shape) != tuple(ref.shape):
            prefix = f"Entry {i} in v" if was_tuple else "v"
            raise RuntimeError(f"{prefix} has invalid size: should be {tuple(ref.shape)} but "
                               f"got {tuple(vi.shape)}.")


def _call(func, inputs, op):
    outputs, was_tuple = _as_tuple(func(*inputs), "outputs of the user-provided function", op)
    return outputs, was_tuple


def _v_or_ones(v, refs, was_tuple, op, none_message):
    if v is None:
        if len(refs) != 1 or refs[0].numel() != 1:
            raise RuntimeError(none_message)
        return (refs[0].detach() * 0 + 1,)
    v, _ = _as_tuple(v, "v", op)
    _check_v(v, refs, was_tuple, op)
    return tuple(vi.to(ref.dtype) if vi.dtype != ref.dtype else vi for vi, ref in zip(v, refs))


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product, ``v`` shaped like the outputs
    (may be None only for a one-element output), the product shaped like the inputs."""
    with enable_grad():
        inputs, in_tuple = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepare(inputs, create_graph)
        outputs, out_tuple = _call(func, inputs, "vjp")
        _check_outputs_require_grad(outputs, strict)
        v = _v_or_ones(v, outputs, out_tuple, "vjp",
                       "The vector v can only be None if the user-provided function returns a "
                       "single Tensor with a single element.")
        grads = _grad(outputs, inputs, v, create_graph=create_graph)
        grads = _zeros_for_missing(grads, inputs, strict, create_graph, "back")
    return (_untuple(_finish(outputs, create_graph), out_tuple),
            _untuple(_finish(grads, create_graph), in_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product, ``v`` shaped like the inputs
    (may be None only for a one-element input), the product shaped like the outputs.
    Computed by the double-backward trick: the vjp is linear in its vector u, so the
    gradient of (u -> u^T J) . v with respect to u is J v."""
    with enable_grad():
        inputs, in_tuple = _as_tuple(inputs, "inputs", "jvp")
        inputs = _prepare(inputs, create_graph)
        v = _v_or_ones(v, inputs, in_tuple, "jvp",
                       "The vector v can only be None if the input to the user-provided "
                       "function is a single Tensor with a single element.")
        outputs, out_tuple = _call(func, inputs, "jvp")
        _check_outputs_require_grad(outputs, strict)
        u = tuple((o.detach() * 0).requires_grad_(True) for o in outputs)
        back = _grad(outputs, inputs, u, create_graph=True)
        _check_back_reached(back, strict)
        pairs = [(b, vi) for b, vi in zip(back, v) if b is not None]
        if pairs:
            fwd = _grad([b for b, _ in pairs], u, [vi for _, vi in pairs],
                        create_graph=create_graph)
        else:
            fwd = (None,) * len(u)
        fwd = _zeros_for_missing(fwd, outputs, strict, create_graph, "back_trick")
    return (_untuple(_finish(outputs, create_graph), out_tuple),
            _untuple(_finish(fwd, create_graph), out_tuple))


def _check_back_reached(back, strict):
    if strict:
        for i, b in enumerate(back):
            if b is None:
                raise RuntimeError(_STRICT_MESSAGES["back"].format(i=i))


def _assemble(rows, n, inp, basis, create_graph):
    """The (n, *inp.shape) matrix whose row k is rows[k] (None: a zero row). Without
    create_graph the rows are plain data, joined on the host; with it the matrix is
    sum_k e_k (x) rows[k], which keeps each row's history (this layer sits below the ops,
    so it has no stack to call)."""
    from ..creation import tensor, zeros

    if not create_graph:
        host = np.zeros((n,) + tuple(inp.shape), dtype=inp.dtype.np)
        for k, r in enumerate(rows):
            if r is not None:
                host[k] = r.detach().cpu().numpy()
        return tensor(host, dtype=inp.dtype, device=inp.device)
    out = zeros(n, *inp.shape, dtype=inp.dtype, device=inp.device)
    ones = (1,) * inp.ndim
    for k, r in enumerate(rows):
        if r is not None:
            out = out + basis[k].reshape((n,) + ones) * r.reshape((1,) + tuple(inp.shape))
    return out


def _jacobian_rows(outputs, inputs, create_graph, strict):
    """J[i][j] (output i by input j, shape out_i.shape + in_j.shape), one backward pass
    per output element."""
    from ..creation import eye

    result = []
    for i, out in enumerate(outputs):
        n = out.numel()
        rows = [[None] * n for _ in inputs]
        basis = eye(n, dtype=out.dtype, device=out.device) if n else None
        if n and out.requires_grad:
            for k in range(n):
                g = _grad((out,), inputs, (basis[k].reshape(out.shape),),
                          create_graph=create_graph, retain_graph=True)
                for j, gj in enumerate(g):
                    if gj is None and strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is "
                                           f"independent of input {j}. This is not allowed "
                                           f"in strict mode.")
                    rows[j][k] = gj
        result.append(tuple(
            _assemble(rows[j], n, inp, basis, create_graph).reshape(
                tuple(out.shape) + tuple(inp.shape)) for j, inp in enumerate(inputs)))
    return tuple(result)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for output i and input j a tensor of shape
    out_i.shape + in_j.shape, nested in tuples where outputs / inputs were tuples.
    ``vectorize`` is accepted and computes the same values row by row."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                         'Hint: If your function has more outputs than inputs, '
                         '"forward-mode" tends to be more performant. Otherwise, prefer to '
                         'use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError("torch.autograd.functional.jacobian: `create_graph=True`"
                                      " and `strategy=\"forward-mode\"` are not supported "
                                      "together (yet). Please either set `create_graph=False`"
                                      " or `strategy=\"reverse-mode\"`.")
        if not vectorize:
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-"
                                      "reverse Hessian is only implemented for "
                                      "`vectorize=True`.")
    if strict and vectorize:
        raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and "
                           "`vectorized=True` are not supported together. Please either set "
                           "`strict=False` or `vectorize=False`.")
    with enable_grad():
        inputs, in_tuple = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepare(inputs, create_graph)
        outputs, out_tuple = _call(func, inputs, "jacobian")
        _check_outputs_require_grad(outputs, strict)
        jac = _jacobian_rows(outputs, inputs, create_graph, strict)
    return _untuple(_finish(jac, create_graph), (out_tuple, in_tuple))


def _single_scalar(func, op):
    def scalar(*inp):
        out = func(*inp)
        outs, was_tuple = _as_tuple(out, "outputs of the user-provided function", op)
        if was_tuple or len(outs) != 1:
            raise RuntimeError(f"The function given to {op} should return a single Tensor")
        if outs[0].numel() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {op} should "
                               f"contain a single element")
        return outs[0].squeeze()
    return scalar


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar ``func`` at ``inputs``: the Jacobian of its gradient, of
    shape in.shape + in.shape (a tuple of tuples over pairs of inputs for tuple inputs)."""
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    scalar = _single_scalar(func, "hessian")
    _, in_tuple = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*inp):
        g = jacobian(scalar, inp, create_graph=True)
        if strict:
            for i, gi in enumerate(g):
                if not gi.requires_grad:
                    raise RuntimeError(f"While computing the hessian, found that the "
                                       f"jacobian of the user-provided function with "
                                       f"respect to input {i} is independent of the input. "
                                       f"This is not allowed in strict mode: a linear "
                                       f"function, for example, has a zero hessian; pass "
                                       f"strict=False to get zeros.")
        return g

    res = jacobian(gradient, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    if not in_tuple:
        return res[0]
    return res


def _second_order(func, inputs, v, create_graph, strict, op):
    with enable_grad():
        inputs, in_tuple = _as_tuple(inputs, "inputs", op)
        inputs = _prepare(inputs, create_graph)
        v = _v_or_ones(v, inputs, in_tuple, op,
                       "The vector v can only be None if the input to the user-provided "
                       "function is a single Tensor with a single element.")
        outputs, out_tuple = _call(func, inputs, op)
        if out_tuple or len(outputs) != 1:
            raise RuntimeError(f"The function given to {op} should return a single Tensor")
        if outputs[0].numel() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {op} should "
                               f"contain a single element")
        _check_outputs_require_grad(outputs, strict)
        first = _grad(outputs, inputs, create_graph=True)
        first = _zeros_for_missing(first, inputs, strict, True, "double_back")
        second = _grad(first, inputs, v, create_graph=create_graph)
        second = _zeros_for_missing(second, inputs, strict, create_graph, "double_back")
    return (_finish(outputs[0], create_graph), _untuple(_finish(second, create_graph),
                                                        in_tuple))


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a scalar ``func``, ``v`` shaped like the inputs."""
    return _second_order(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v) for a scalar ``func``; H is symmetric for a twice
    differentiable function, so this is v^T H transposed."""
    return _second_order(func, inputs, v, create_graph, strict, "hvp")
