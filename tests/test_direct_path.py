"""The elementwise ops' direct path (Backend.direct): two float32/float64 operands of one
dtype and device (tensors, or a tensor and a Python number) skip Function.apply and
Backend.map. What it records must be what apply records, bit for bit: anomaly mode
takes apply's path, so it is the oracle here."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx
from haelixe.autograd.function import SavedTensorError
from haelixe.ops.registry import OPS, Elementwise

#: binary ops with a gradient whose CPU kernel is one numpy ufunc
BINARY = sorted(n for n, d in OPS.items()
                if isinstance(d, Elementwise) and d.arity == 2 and not d.params
                and d.differentiable and isinstance(d.kernel.cpu, np.ufunc))
#: unary ops with a gradient whose CPU kernel is one numpy ufunc
UNARY = sorted(n for n, d in OPS.items()
               if isinstance(d, Elementwise) and d.arity == 1 and not d.params
               and d.differentiable and isinstance(d.kernel.cpu, np.ufunc))
#: (a's shape or a number, b's shape or a number)
OPERANDS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((3, 4), 1.5),
            (0.75, (3, 4)), ((3, 4), 2), ((), ()), ((0, 4), (4,))]


#: where an op's domain is narrower than (0.5, 2): inside it, away from its edges
DOMAIN = {"asin": (0.1, 0.9), "acos": (0.1, 0.9), "atanh": (0.1, 0.9), "acosh": (1.5, 3.0)}


def _operand(spec, dtype, seed, name=None):
    if not isinstance(spec, tuple):
        return spec
    g = np.random.default_rng(seed)
    # positive and away from zero: every op here is defined and smooth there
    low, high = DOMAIN.get(name, (0.5, 2.0))
    return hx.from_numpy(g.uniform(low, high, spec).astype(dtype)).requires_grad_()


def _run(name, *operands, leaves=None):
    """(output values, the node's fields, the gradient of each leaf: the tensor
    operands unless ``leaves`` names the tensors they are views of)."""
    leaves = [t for t in operands if isinstance(t, hx.Tensor)] if leaves is None else leaves
    for t in leaves:
        t.grad = None
    front = hx.__dict__[name] if name in hx.__dict__ else OPS[name].apply
    out = front(*operands)
    node = out.grad_fn
    fields = (type(node), len(node.next), node.in_shapes, node.args,
              tuple(s is None for s in node.saved), tuple(node._versions),
              (node.out_shape, node.out_dtype, node.out_device))
    out.sum().backward()
    grads = [t.grad.numpy() for t in leaves if t.grad is not None]
    return out.detach().numpy(), fields, grads


def _same(direct, applied, what):
    np.testing.assert_array_equal(direct[0], applied[0], err_msg=what)
    assert direct[1] == applied[1], what
    for gd, ga in zip(direct[2], applied[2]):
        np.testing.assert_array_equal(gd, ga, err_msg=what)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", BINARY)
def test_direct_path_records_what_apply_records(name, dtype):
    for i, (sa, sb) in enumerate(OPERANDS):
        a, b = _operand(sa, dtype, i), _operand(sb, dtype, 100 + i)
        direct = _run(name, a, b)
        with hx.autograd.detect_anomaly():  # apply's path (it checks every output)
            applied = _run(name, a, b)
        assert direct[0].dtype == np.dtype(dtype)
        _same(direct, applied, f"{name} {sa} {sb}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_direct_path_records_what_apply_records(name, dtype):
    for i, shape in enumerate([(3, 4), (), (0, 2)]):
        x = _operand(shape, dtype, i, name)
        direct = _run(name, x)
        with hx.autograd.detect_anomaly():
            applied = _run(name, x)
        assert direct[0].dtype == np.dtype(dtype)
        _same(direct, applied, f"{name} {shape}")


def test_direct_path_takes_no_apply(monkeypatch):
    """The fast path is taken: a + b, x * 2.0 and 1.0 - x work with apply broken (and
    take it again for a dtype the path does not serve)."""
    a = hx.randn(3, 4).requires_grad_()
    b = hx.randn(3, 4)
    for op in ("add", "mul", "sub", "exp"):
        def refuse(*args):
            raise AssertionError("apply was called")
        monkeypatch.setattr(OPS[op].function_class, "apply", refuse)
    y = (a + b) * 2.0
    z = 1.0 - y
    assert type(z.grad_fn).__name__ == "Sub" and z.requires_grad
    z.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((3, 4), -2.0, np.float32))
    e = a.exp()  # keeps its output for backward: record adds the alias
    e.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), -2.0 + np.exp(a.detach().numpy()), rtol=1e-6)
    monkeypatch.undo()
    c = a.bfloat16()  # not served by the direct path: apply's own
    assert (c + c).dtype is hx.bfloat16


def test_direct_path_keeps_the_saved_versions():
    a = hx.randn(3, 4).requires_grad_()
    b = hx.randn(3, 4).requires_grad_()
    h = a * 1.0
    y = h * b  # saves h and b
    h.add_(1.0)
    with pytest.raises(SavedTensorError, match="modified by an inplace operation"):
        y.sum().backward()
    y = (a * 1.0) * 3.0  # saves no tensor: the number is kept by value
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((3, 4), 3.0, np.float32))


def test_numbers_out_of_float32_range_take_apply():
    x = hx.ones(2, dtype=hx.float32)
    assert np.isinf((x * 1e39).numpy()).all()
    assert np.isinf((x * 10 ** 39).numpy()).all()
    assert np.isnan((x * float("nan")).numpy()).all()
    big = hx.ones(2, dtype=hx.float64)
    np.testing.assert_array_equal((big * 1e300).numpy(), [1e300, 1e300])


def test_broadcast_error_names_the_op():
    with pytest.raises(ValueError, match="add"):
        hx.ones(3, 4) + hx.ones(5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_direct_path_on_strided_views_records_what_apply_records(dtype):
    """Transposed, flipped and expanded operands (numpy's ufunc may then lay its output
    out in another order): the same values, node and gradients as apply's path."""
    g = np.random.default_rng(3)
    base = hx.from_numpy(g.uniform(0.5, 2.0, (4, 3)).astype(dtype)).requires_grad_()
    row = hx.from_numpy(g.uniform(0.5, 2.0, (1, 4)).astype(dtype)).requires_grad_()
    views = {"transposed": lambda: base.T, "flipped": lambda: base.T.flip(0),
             "expanded": lambda: row.expand(3, 4)}
    leaves = [base, row]
    for name in ("add", "mul", "div", "maximum"):
        for va in views.values():
            for vb in views.values():
                direct = _run(name, va(), vb(), leaves=leaves)
                with hx.autograd.detect_anomaly():
                    applied = _run(name, va(), vb(), leaves=leaves)
                assert direct[2], name  # some leaf got a gradient
                _same(direct, applied, name)
        for va in views.values():
            direct = _run("exp", va(), leaves=leaves)
            with hx.autograd.detect_anomaly():
                applied = _run("exp", va(), leaves=leaves)
            _same(direct, applied, "exp")


def test_int_and_bool_operands_keep_apply_and_pytorch_dtypes():
    i = hx.arange(6).reshape(2, 3)
    assert (i + i).dtype is hx.int64 and (i * 2).dtype is hx.int64
    assert (i / 2).dtype is hx.float32  # true division promotes, as PyTorch
    b = i > 2
    assert (b + b).dtype is hx.bool and (b * 1.5).dtype is hx.float32
    np.testing.assert_array_equal((i + i).numpy(), np.arange(6).reshape(2, 3) * 2)
