"""The backward engine: graph recording, accumulation, errors, higher derivatives,
hooks, in-place checks, anomaly detection and the introspection hooks."""

from __future__ import annotations

import time

import numpy as np
import pytest
from layouts import assert_close, leaf, rng

import haelixe as hx
from haelixe.autograd import SavedTensorError


def randn(*shape, seed=0, requires_grad=True):
    t = hx.from_numpy(rng(seed).standard_normal(shape))
    return t.requires_grad_() if requires_grad else t


# -- graph recording -----------------------------------------------------------------------

def test_nodes_only_when_an_input_requires_grad():
    a, b = randn(3), randn(3, seed=1, requires_grad=False)
    assert (b * 2).grad_fn is None and not (b * 2).requires_grad
    y = a * b
    assert y.grad_fn is not None and y.grad_fn.name == "Mul" and y.requires_grad
    assert not y.is_leaf and a.is_leaf and b.is_leaf
    with hx.no_grad():
        z = a * b
    assert z.grad_fn is None and not z.requires_grad


def test_no_grad_as_decorator_and_nested_enable_grad():
    a = randn(2)

    @hx.no_grad()
    def f(x):
        return x * 2

    assert f(a).grad_fn is None

    @hx.no_grad  # without the call, as PyTorch allows
    def f2(x):
        return x * 2

    assert f2(a).grad_fn is None and f2.__name__ == "f2"
    assert hx.is_grad_enabled()
    with hx.no_grad():
        assert not hx.is_grad_enabled()
        with hx.enable_grad():
            assert (a * 2).requires_grad
        assert (a * 2).grad_fn is None
    assert (a * 2).requires_grad


def test_detach_and_requires_grad_():
    a = randn(3)
    y = a * 2
    d = y.detach()
    assert d.grad_fn is None and not d.requires_grad and d.is_leaf
    assert d.storage is y.storage  # detach shares memory
    b = hx.ones(3)
    assert b.requires_grad_() is b and b.requires_grad
    b.requires_grad_(False)
    assert not b.requires_grad
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)


# -- gradients through views ---------------------------------------------------------------

def test_expand_and_broadcast_gradients_reduce_back():
    a = randn(3, 1)
    b = randn(4, seed=1)
    (a * b).sum().backward()
    assert_close(a.grad, np.broadcast_to(b.detach().numpy().sum(), (3, 1)))
    assert_close(b.grad, np.broadcast_to(a.detach().numpy().sum(), (4,)))
    c = randn(1, 3, seed=2)
    (c.expand(5, 2, 3) * 2.0).sum().backward()
    assert_close(c.grad, np.full((1, 3), 20.0))


def test_slices_and_flips_scatter_into_the_base():
    x = randn(4, 5)
    w = rng(3).standard_normal((2, 2))
    y = x[1::2, ::-3].flip(0)  # (2, 2)
    (y * hx.from_numpy(w)).sum().backward()
    expected = np.zeros((4, 5))
    expected[1::2, ::-3] = w[::-1]
    assert_close(x.grad, expected)
    assert x.grad.shape == x.shape


def test_integer_array_indexing_scatter_adds_repeated_indices():
    x = randn(4, 3)
    x[[0, 2, 0, 0]].sum().backward()
    expected = np.zeros((4, 3))
    expected[0] = 3.0
    expected[2] = 1.0
    assert_close(x.grad, expected)
    z = randn(5)
    (z[hx.tensor([1, 1, 4])] * hx.tensor([1.0, 2.0, 3.0], dtype=hx.float64)).sum().backward()
    assert_close(z.grad, [0.0, 3.0, 0.0, 0.0, 3.0])


def test_gather_backward_accumulates_repeats():
    x = randn(2, 3)
    x.gather(1, hx.tensor([[0, 0], [2, 1]])).sum().backward()
    assert_close(x.grad, [[2.0, 0.0, 0.0], [0.0, 1.0, 1.0]])


def test_gather_of_one_value_per_slice_puts_each_gradient_once():
    # one index per row (argmax's, a loss's target), an index smaller than the input
    # along another dim, and a repeated value: each picked cell gets its own gradient
    x = randn(3, 4, 2)
    index = hx.tensor([[[1, 0]], [[3, 3]]])  # (2, 1, 2): rows 0-1 of 3, along dim 1
    weights = hx.tensor([[[1.0, 2.0]], [[3.0, 4.0]]], dtype=hx.float64)
    (x.gather(1, index) * weights).sum().backward()
    expected = np.zeros((3, 4, 2))
    expected[0, 1, 0], expected[0, 0, 1], expected[1, 3, 0], expected[1, 3, 1] = 1, 2, 3, 4
    assert_close(x.grad, expected)


# -- the engine ----------------------------------------------------------------------------

def test_long_chain_backward_has_no_recursion_limit():
    x = hx.tensor(1.0, requires_grad=True)
    y = x
    n = 100_000
    t0 = time.perf_counter()
    for _ in range(n):
        y = y + 1.0
    y.backward()
    assert x.grad.item() == 1.0
    assert y.item() == n + 1.0
    del y  # freeing the chain must not recurse either
    assert time.perf_counter() - t0 < 30


def test_leaf_grad_accumulates_in_place():
    x = randn(3, 4)
    (x * 2.0).sum().backward()
    g = x.grad
    buf = g._data
    (x * 3.0).sum().backward()
    assert x.grad is g and x.grad._data is buf
    assert_close(x.grad, np.full((3, 4), 5.0))
    # through a shared gradient (add passes one tensor to both inputs) and an expand
    a, b = randn(2), randn(2, seed=1)
    (a + b).sum().backward()
    (a + b).sum().backward()
    assert_close(a.grad, [2.0, 2.0])
    assert_close(b.grad, [2.0, 2.0])
    assert a.grad.storage is not b.grad.storage


def test_leaf_grad_after_create_graph_is_not_shared():
    a, b = randn(2), randn(2, seed=1)
    (a + b).sum().backward(create_graph=True)
    (a + b).sum().backward()
    assert_close(a.grad, [2.0, 2.0])
    assert_close(b.grad, [2.0, 2.0])


def test_backward_inputs_accumulates_only_those():
    a, b = randn(2), randn(2, seed=1)
    y = (a * b).sum()
    y.backward(inputs=[a], retain_graph=True)
    assert b.grad is None
    g = a.grad
    y.backward(inputs=[a])
    assert a.grad is g
    assert_close(a.grad, 2 * b.detach().numpy())


def test_backward_of_non_scalar_without_gradient_is_an_error():
    y = randn(2, 3) * 2
    with pytest.raises(RuntimeError) as e:
        y.backward()
    msg = str(e.value)
    assert "only for scalar outputs" in msg and "(2, 3)" in msg and "gradient=" in msg
    x = randn(2, 3, seed=1)
    (x * 2).backward(gradient=hx.ones(2, 3, dtype=hx.float64))
    assert_close(x.grad, np.full((2, 3), 2.0))
    with pytest.raises(RuntimeError, match="does not match the output shape"):
        (x * 2).backward(gradient=hx.ones(3, dtype=hx.float64))


def test_backward_of_tensor_without_grad_is_an_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        hx.ones(2).sum().backward()


def test_second_backward_through_freed_graph_is_an_error():
    x = randn(3)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(SavedTensorError) as e:
        y.backward()
    msg = str(e.value)
    assert "second time" in msg and "retain_graph=True" in msg
    assert y.grad_fn.saved is None  # the saved tensors were released


def test_saved_tensors_are_freed_after_backward_unless_retained():
    import gc
    import weakref

    x = randn(3)
    for retain in (False, True):
        h = x * 2.0
        buffer = weakref.ref(h.storage)
        y = h.sin().sum()  # Sin saves h, nothing else holds it
        del h
        gc.collect()
        assert buffer() is not None
        y.backward(retain_graph=retain)
        gc.collect()
        assert (buffer() is not None) == retain


def test_retain_graph_allows_a_second_backward():
    x = randn(3)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    assert_close(x.grad, 2 * first)


def test_grad_returns_without_touching_dot_grad():
    x = randn(3)
    y = (x * x).sum()
    (g,) = hx.autograd.grad(y, [x])
    assert_close(g, 2 * x.detach().numpy())
    assert x.grad is None
    z = randn(2, seed=1)
    with pytest.raises(RuntimeError, match="not reachable"):
        hx.autograd.grad((x * 2).sum(), [x, z])
    gx, gz = hx.autograd.grad((x * 2).sum(), [x, z], allow_unused=True)
    assert gz is None
    assert_close(gx, np.full(3, 2.0))


def test_grad_with_grad_outputs():
    x = randn(3)
    w = hx.tensor([1.0, 2.0, 3.0], dtype=hx.float64)
    (g,) = hx.autograd.grad(x * 2, x, grad_outputs=w)
    assert_close(g, [2.0, 4.0, 6.0])


def test_custom_function_with_a_wrong_gradient_shape_is_named():
    class BadSum(hx.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x._be.sum(x._data, (0,), False)

        @staticmethod
        def backward(ctx, g):
            return g  # forgot to expand back to the input's shape

    x = randn(2, 3)
    with pytest.raises(RuntimeError, match=r"backward of BadSum returned a gradient of "
                                           r"shape \(3,\) for input 0, but that input "
                                           r"\(made by Mul\) has shape \(2, 3\)"):
        BadSum.apply(x * 2.0).sum().backward()
    class ArraySum(BadSum):
        @staticmethod
        def backward(ctx, g):
            return np.ones((2, 3))  # an array, not a tensor

    with pytest.raises(TypeError, match=r"backward of ArraySum returned a ndarray, not a "
                                        r"Tensor, for input 0.*hx.from_numpy"):
        ArraySum.apply(x * 2.0).sum().backward()
    # the check runs for the Functions users write; Haelixe's own ops skip it on every
    # node (their gradients are tested against PyTorch's)
    assert BadSum.checks_gradients
    assert not type((x * 2.0).grad_fn).checks_gradients
    assert not type(x.sum().grad_fn).checks_gradients


# -- second derivatives --------------------------------------------------------------------

def second_derivative(f, x):
    """Diagonal of the Hessian of sum(f(x)) for elementwise f."""
    (g,) = hx.autograd.grad(f(x).sum(), [x], create_graph=True)
    assert g.requires_grad
    (h,) = hx.autograd.grad(g.sum(), [x])
    return h


def test_second_derivative_of_tanh():
    x = leaf(rng(1).standard_normal((3, 4)))
    t = np.tanh(x.detach().numpy())
    assert_close(second_derivative(lambda v: v.tanh(), x), -2 * t * (1 - t * t), rtol=1e-10)


@pytest.mark.parametrize("name, f, d2", [
    ("exp", lambda v: v.exp(), np.exp),
    ("sin", lambda v: v.sin(), lambda a: -np.sin(a)),
    ("cube", lambda v: v ** 3, lambda a: 6 * a),
    ("sigmoid", lambda v: v.sigmoid(),
     lambda a: (s := 1 / (1 + np.exp(-a))) * (1 - s) * (1 - 2 * s)),
    ("log", lambda v: (v * v + 1.0).log(), lambda a: (2 - 2 * a * a) / (a * a + 1) ** 2),
    ("sqrt", lambda v: (v * v + 1.0).sqrt(), lambda a: (a * a + 1) ** -1.5),
])
def test_second_derivatives_elementwise(name, f, d2):
    x = leaf(rng(2).standard_normal((2, 3)))
    assert_close(second_derivative(f, x), d2(x.detach().numpy()), rtol=1e-8, atol=1e-10)


def test_second_derivative_through_matmul():
    # f(x) = sum((x @ w)^2): grad = 2 (x w) w^T, Hessian-vector with ones: 2 * 1 (w w^T)
    x = leaf(rng(3).standard_normal((2, 3)))
    w = hx.from_numpy(rng(4).standard_normal((3, 4)))
    (g,) = hx.autograd.grad(((x @ w) ** 2).sum(), [x], create_graph=True)
    (h,) = hx.autograd.grad(g.sum(), [x])
    wn = w.numpy()
    assert_close(h, 2 * np.ones((2, 3)) @ wn @ wn.T, rtol=1e-10)


def test_second_derivative_through_reductions():
    x = leaf(rng(5).standard_normal((3, 4)))
    # d/dx of sum_i (sum_j x_ij)^2 = 2 s_i; d2 summed over j: 2 * 4 per row
    (g,) = hx.autograd.grad((x.sum(1) ** 2).sum(), [x], create_graph=True)
    (h,) = hx.autograd.grad(g.sum(), [x])
    assert_close(h, np.full((3, 4), 8.0))
    # mean: (mean_j x_ij)^2 -> grad 2 m_i / 4, second: 2 * 4 / 16 per entry
    (g,) = hx.autograd.grad((x.mean(1) ** 2).sum(), [x], create_graph=True)
    (h,) = hx.autograd.grad(g.sum(), [x])
    assert_close(h, np.full((3, 4), 0.5))


def test_second_derivative_through_softmax_matches_finite_differences():
    x = leaf(rng(6).standard_normal((2, 4)))
    w = hx.from_numpy(rng(7).standard_normal((2, 4)))
    assert hx.autograd.gradgradcheck(lambda v: (v.softmax(-1) * w).sum(), [x])
    assert hx.autograd.gradgradcheck(lambda v: (v.log_softmax(0) * w).sum(), [x])


# -- hooks ---------------------------------------------------------------------------------

def test_register_hook_modifies_gradient_and_can_be_removed():
    x = randn(3)
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10.0)
    (x * 2.0).sum().backward()
    assert_close(x.grad, np.full(3, 20.0))
    assert_close(seen[0], np.full(3, 2.0))
    handle.remove()
    x.grad = None
    (x * 2.0).sum().backward()
    assert_close(x.grad, np.full(3, 2.0))
    assert len(seen) == 1


def test_hook_on_intermediate_changes_what_flows_upstream():
    x = randn(3)
    y = x * 3.0
    y.register_hook(lambda g: g * 0.0 + 1.0)
    (y * y).sum().backward()
    assert_close(x.grad, np.full(3, 3.0))


def test_retain_grad_keeps_intermediate_gradients():
    x = randn(3)
    y = x * 2.0
    y.retain_grad()
    z = randn(3, seed=1)
    (y * z).sum().backward()
    assert_close(y.grad, z.detach().numpy())
    assert_close(x.grad, 2 * z.detach().numpy())
    y2 = x * 2.0
    (y2 * z).sum().backward()
    assert y2.grad is None  # not retained


# -- in-place ops and version counters -----------------------------------------------------

@pytest.mark.parametrize("op, name", [
    (lambda t: t.add_(1.0), "add_"), (lambda t: t.mul_(2.0), "mul_"),
    (lambda t: t.sub_(1.0), "sub_"), (lambda t: t.zero_(), "zero_"),
    (lambda t: t.copy_(hx.ones(3, dtype=hx.float64)), "copy_"),
    (lambda t: t.clamp_(-0.1, 0.1), "clamp_"),
])
def test_editing_a_saved_tensor_makes_backward_name_the_op(op, name):
    x = randn(3)
    a = x * 1.0  # non-leaf, saved by Sin below
    y = a.sin()
    v = a.storage.version
    op(a)
    assert a.storage.version > v
    with pytest.raises(SavedTensorError) as e:
        y.sum().backward()
    msg = str(e.value)
    assert "modified by an inplace operation" in msg and "Sin" in msg
    assert f"version {v}" in msg


def test_editing_a_saved_leaf_under_no_grad_is_caught():
    w = randn(3)
    x = hx.from_numpy(rng(1).standard_normal(3))
    y = (w * x).sum()  # (w's gradient reads x: x is kept)
    with hx.no_grad():
        x.mul_(0.5)
    with pytest.raises(SavedTensorError, match="Mul"):
        y.backward()


def test_an_operand_no_gradient_reads_is_not_kept_as_pytorchs():
    w = randn(3)
    x = hx.from_numpy(rng(1).standard_normal(3))
    y = (w * x).sum()  # (x needs no gradient, so w, which only x's reads, is not kept)
    with hx.no_grad():
        w.mul_(0.5)
    y.backward()
    assert_close(w.grad, x.detach().numpy())


@pytest.mark.parametrize("op, expected", [
    (lambda t: t.add_(2.0), lambda a: np.full_like(a, 1.0)),
    (lambda t: t.mul_(3.0), lambda a: np.full_like(a, 3.0)),
    (lambda t: t.sub_(hx.ones(3, dtype=hx.float64)), lambda a: np.full_like(a, 1.0)),
    (lambda t: t.zero_(), lambda a: np.zeros_like(a)),
    (lambda t: t.clamp_(-0.5, 0.5), lambda a: ((a >= -0.5) & (a <= 0.5)).astype(float)),
])
def test_in_place_ops_on_non_leaves_are_differentiable(op, expected):
    x = randn(3, seed=4)
    a = x * 1.0
    op(a)
    assert a.grad_fn is not None
    a.sum().backward()
    assert_close(x.grad, expected(x.detach().numpy()))


def test_view_taken_before_a_recorded_in_place_op_refuses_a_stale_gradient():
    x = randn(2, 3)
    a = x * 1.0
    b = a[0]  # a view of a's old values
    a.mul_(2.0)  # b's values double; its graph does not know
    with pytest.raises(SavedTensorError, match="Slice: this view was taken before"):
        b.sum().backward()
    # taken after the in-place op, the view's gradient is right
    x2 = randn(2, 3)
    a2 = x2 * 1.0
    a2.mul_(2.0)
    a2[0].sum().backward()
    assert_close(x2.grad, [[2.0] * 3, [0.0] * 3])
    # an edit under no_grad does not change a view's derivative: no error
    w = randn(2, 3)
    y = w[0].sum()
    with hx.no_grad():
        w.add_(1.0)
    y.backward()
    assert_close(w.grad, [[1.0] * 3, [0.0] * 3])


def test_in_place_on_a_leaf_that_requires_grad_is_refused():
    x = randn(3)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x.add_(1.0)
    with hx.no_grad():
        x.add_(1.0)  # what optimizers do


def test_setitem_while_recording_records_the_write():
    x = randn(3)
    t = hx.zeros(3, dtype=hx.float64)
    t[0] = x[0] * 2.0  # (basic index: through a view of t)
    t[[1, 2]] = x[:2] * 3.0  # (advanced index)
    assert t.requires_grad and t.grad_fn is not None
    (t * hx.tensor([1.0, 10.0, 100.0], dtype=hx.float64)).sum().backward()
    assert_close(x.grad, [2.0 + 30.0, 300.0, 0.0])
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x[[0]] = 1.0
    with hx.no_grad():
        t[[0, 1]] = x[:2]
    assert_close(t, np.r_[x.detach().numpy()[:2], 3.0 * x.detach().numpy()[1]])


def test_in_place_ops_write_values():
    t = hx.from_numpy(np.arange(4.0))
    t.add_(1.0).mul_(2.0).sub_(hx.ones(4, dtype=hx.float64))
    assert t.tolist() == [1.0, 3.0, 5.0, 7.0]
    t.clamp_(2.0, 6.0)
    assert t.tolist() == [2.0, 3.0, 5.0, 6.0]
    t.copy_(hx.tensor([9.0]))
    assert t.tolist() == [9.0] * 4
    t.zero_()
    assert t.tolist() == [0.0] * 4


# -- anomaly detection ---------------------------------------------------------------------

# numpy warns where PyTorch is silent; these tests make NaN / Inf on purpose
pytestmark_fp = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytestmark_fp
def test_detect_anomaly_names_the_forward_op():
    x = hx.tensor([-1.0, 1.0], requires_grad=True)
    with hx.autograd.detect_anomaly():
        with pytest.raises(RuntimeError) as e:
            x.log()
    assert "forward of Log" in str(e.value) and "NaN" in str(e.value)
    assert not np.isnan(x.detach().numpy()).any()


@pytestmark_fp
def test_detect_anomaly_names_the_backward_op():
    x = hx.tensor([0.0, 4.0], requires_grad=True)
    with hx.autograd.detect_anomaly():
        y = x.sqrt().sum()  # finite forward, infinite derivative at 0
        with pytest.raises(RuntimeError) as e:
            y.backward()
    msg = str(e.value)
    assert "backward of Sqrt" in msg and "Inf" in msg
    assert "the forward of Sqrt was called from" in msg and "test_autograd.py" in msg


@pytestmark_fp
def test_without_anomaly_mode_nan_passes_silently():
    x = hx.tensor([-1.0], requires_grad=True)
    assert np.isnan(x.log().item())


# -- introspection -------------------------------------------------------------------------

def test_graph_nodes_and_edges_for_a_small_graph():
    a = randn(2, 3)
    b = randn(3, 4, seed=1)
    a.name = "a"
    y = ((a @ b).relu() * 2.0).sum()
    g = hx.autograd.graph(y)
    ops = sorted(n.op for n in g.nodes)
    assert ops == sorted(["a", "leaf", "MatMul", "Relu", "Mul", "Sum"])
    assert len(g.edges) == 5
    by = g.by_id()
    kinds = {by[i].op: by[i].kind for i in by}
    assert kinds["Sum"] == "output" and kinds["a"] == "leaf" and kinds["MatMul"] == "op"
    mm = next(n for n in g.nodes if n.op == "MatMul")
    assert mm.shape == (2, 4) and mm.dtype == "float64" and mm.device == "cpu"
    assert mm.saved_bytes == (6 + 12) * 8 and not mm.is_leaf
    leaves = [n for n in g.nodes if n.is_leaf]
    assert {n.shape for n in leaves} == {(2, 3), (3, 4)}
    layers = g.generations()
    assert by[layers[-1][0]].op == "Sum" and len(layers) == 5


def test_graph_of_shared_input_has_one_node_per_tensor():
    a = randn(3)
    y = a * a + a
    g = hx.autograd.graph(y)
    assert len(g.nodes) == 3  # leaf, Mul, Add
    assert len(g.edges) == 4  # a->Mul twice, Mul->Add, a->Add


def test_backward_observer_sees_every_node_with_grad_norms():
    a = randn(2, 3)
    b = randn(2, 3, seed=1)
    y = (a * b).sum()
    events = []
    remove = hx.autograd.add_backward_observer(
        lambda ev, node, norms: events.append((ev, node.name, norms)))
    try:
        y.backward()
    finally:
        remove()
    names = [n for ev, n, _ in events if ev == "start"]
    assert sorted(names) == ["AccumulateGrad", "AccumulateGrad", "Mul", "Sum"]
    for name in names:  # every start is followed by its finish
        i = next(k for k, e in enumerate(events) if e[:2] == ("start", name))
        assert ("finish", name) in [e[:2] for e in events[i + 1:]]
    finish = {(n, i): norms for i, (ev, n, norms) in enumerate(events) if ev == "finish"}
    mul_norms = next(v for (n, _), v in finish.items() if n == "Mul")
    assert mul_norms[0] == pytest.approx(np.linalg.norm(b.detach().numpy()))
    assert mul_norms[1] == pytest.approx(np.linalg.norm(a.detach().numpy()))
    (a * b).sum().backward()
    assert len(events) == 8  # removed: the second backward was not observed


def test_each_node_runs_once_after_every_node_that_feeds_it():
    # a diamond whose branches differ in length, a node reached twice from one consumer
    # and a consumer made later that backward never reaches (it must not be waited on)
    a = randn(3, 4)
    h = a.exp()
    long = ((h * 2.0).sin() + 1.0).tanh()
    short = h * h
    unreached = (h * 5.0).sum()
    y = (long + short).sum()
    consumers = {}
    stack = [y.grad_fn]
    while stack:
        node = stack.pop()
        for nxt in node.next:
            if nxt is not None:
                if nxt not in consumers:
                    stack.append(nxt)
                consumers.setdefault(nxt, set()).add(node)
    order = []
    remove = hx.autograd.add_backward_observer(
        lambda ev, node, norms: order.append(node) if ev == "start" else None)
    try:
        y.backward()
    finally:
        remove()
    assert len(order) == len(set(order)) == len(consumers) + 1
    at = {node: i for i, node in enumerate(order)}
    for node, feeders in consumers.items():
        assert all(at[f] < at[node] for f in feeders), node.name
    want = np.exp(a.detach().numpy().astype(np.float64))
    inner = np.sin(2 * want) + 1.0
    dh = (1 - np.tanh(inner) ** 2) * np.cos(2 * want) * 2 + 2 * want
    assert_close(a.grad, dh * want, rtol=1e-5, atol=1e-6)
    assert unreached.grad_fn.next[0].saved is not None  # its Mul never ran: still whole


def test_graph_nodes_remember_the_module_that_made_them():
    from haelixe import nn

    model = nn.Sequential(nn.Linear(3, 4), nn.RMSNorm(4))
    x = hx.randn(2, 3, requires_grad=True)
    out = (model(x) * 2.0).sum()
    by_op = {n.op: n.module for n in hx.autograd.graph(out).nodes if n.kind != "leaf"}
    assert by_op["Linear"] is model[0]
    assert by_op["RMSNorm"] is model[1]
    assert by_op["Mul"] is None  # made outside any module
    assert hx.autograd.mode.STATE.modules == []


@pytest.mark.parametrize("first", ["mul", "exp"])
def test_a_leaf_reached_by_two_nodes_gets_both_gradients(first):
    # The engine accumulates a leaf's gradient as soon as its last edge delivers it;
    # one that arrived earlier by another edge must be in the sum, whichever node runs
    # first (the order of the two terms decides which one waits).
    w = hx.tensor(np.array([0.5, -1.0, 2.0], dtype=np.float64), requires_grad=True)
    terms = {"mul": lambda: (w * 3.0).sum(), "exp": lambda: w.exp().sum()}
    a, b = terms[first](), terms["exp" if first == "mul" else "mul"]()
    (a + b).backward()
    np.testing.assert_allclose(w.grad.numpy(), 3.0 + np.exp(w.detach().numpy()))
    (a.detach() + terms["mul"]()).backward()  # accumulates into the existing .grad
    np.testing.assert_allclose(w.grad.numpy(), 6.0 + np.exp(w.detach().numpy()))


def test_tied_weight_gets_the_gradient_of_both_uses():
    hx.manual_seed(0)
    emb = hx.nn.Embedding(5, 3)
    idx = hx.tensor(np.array([[1, 2, 2]]))
    h = emb(idx)
    logits = h @ emb.weight.T  # the tied head: the same leaf by a second path
    logits.sum().backward()
    w = emb.weight.detach().numpy().astype(np.float64)
    expect = np.zeros_like(w) + w[[1, 2, 2]].sum(0)  # through the head: every row
    np.add.at(expect, [1, 2, 2], np.broadcast_to(w.sum(0), (3, 3)))  # through the lookup
    np.testing.assert_allclose(emb.weight.grad.numpy(), expect, rtol=1e-5, atol=1e-6)


# -- partial gradients: slices of one tensor add into one buffer ----------------------------
def _device(name):
    if name == "gpu":
        from haelixe.backends.wgpu.context import gpu_available

        if not gpu_available():
            pytest.skip("no wgpu adapter")
    return name


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_slices_of_one_tensor_sum_into_one_gradient(device, dtype):
    # q, k and v sliced out of one projection, as attention does; k used twice
    dev = _device(device)
    g = rng(3)
    w = g.standard_normal((3, 4, 5)).astype(np.float32)
    x = hx.tensor(w, device=dev).to(dtype).detach().requires_grad_()
    h = x * 2.0
    q, k, v = h[0], h[1], h[2]
    coef = [g.standard_normal((4, 5)).astype(np.float32) for _ in range(4)]
    c = [hx.tensor(a, device=dev).to(dtype) for a in coef]
    loss = (q * c[0]).sum() + (k * c[1]).sum() + (v * c[2]).sum() + (k[1:, ::2] * 3.0).sum()
    loss.backward()
    want = 2.0 * np.stack([coef[0], coef[1], coef[2]])
    want[1, 1:, ::2] += 6.0
    tol = 2e-2 if dtype == "bfloat16" else 1e-6
    assert_close(x.grad.float().cpu(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
@pytest.mark.parametrize("slice_first", [True, False])
def test_a_partial_gradient_never_writes_into_a_tensor_held_elsewhere(device, slice_first):
    # y's gradient comes from an add (which hands its incoming gradient to both of its
    # inputs: one tensor, also w's) and from a slice: adding the slice's part into the
    # add's tensor in place would change w's gradient too
    dev = _device(device)
    x = hx.tensor(np.arange(4.0, dtype=np.float32), device=dev).requires_grad_()
    w = hx.tensor(np.ones(4, np.float32), device=dev).requires_grad_()
    y = x * 2.0
    c = (y + w).sum()
    z = y[1:3].sum() * 5.0
    (z + c if slice_first else c + z).backward()
    assert_close(w.grad.cpu(), np.ones(4))
    assert_close(x.grad.cpu(), 2.0 * np.array([1.0, 6.0, 6.0, 1.0]))


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_slices_of_a_permuted_view_send_their_gradient_back_in_its_memory_order(device):
    # attention's heads: q, k, v sliced out of a permuted (b, t, 3, h, d) projection. The
    # slices' gradients are laid out in the projection's memory order, so the permute's
    # and the reshape's backwards are views: the leaf gets the buffer itself, no copy
    dev = _device(device)
    g = rng(5)
    a = g.standard_normal((2, 3, 3 * 4 * 5)).astype(np.float32)
    coef = g.standard_normal((3, 2, 4, 3, 5)).astype(np.float32)
    x = hx.tensor(a, device=dev, requires_grad=True)
    h = (x * 2.0).reshape(2, 3, 3, 4, 5).permute(2, 0, 3, 1, 4)
    c = hx.tensor(coef, device=dev)
    parts = [h[i] for i in range(3)]
    (sum((p * c[i]).sum() for i, p in enumerate(parts))).backward()
    want = 2.0 * coef.transpose(1, 3, 0, 2, 4).reshape(2, 3, 60)
    assert_close(x.grad.cpu(), want, rtol=1e-6, atol=1e-6)

    from haelixe.ops.views import SliceGrad

    y = hx.tensor(a, device=dev).reshape(2, 3, 3, 4, 5).permute(2, 0, 3, 1, 4)
    part = SliceGrad(y.shape, (1,), hx.tensor(coef[1], device=dev), y._layout).dense()
    back = part.permute(1, 3, 0, 2, 4)
    assert back.is_contiguous() and back.shape == (2, 3, 3, 4, 5)
    assert_close(back.cpu(), np.stack([np.zeros_like(coef[0]), coef[1],
                                       np.zeros_like(coef[0])]).transpose(1, 3, 0, 2, 4))


def test_hooks_and_autograd_grad_see_whole_tensors_from_slices():
    x = hx.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    h = x * 1.0
    seen = []
    h.register_hook(lambda g: seen.append((type(g).__name__, g.shape)))
    (h[0].sum() + 2 * h[1].sum()).backward()
    assert seen == [("Tensor", (2, 3))]
    (gx,) = hx.autograd.grad((x * 1.0)[1].sum(), [x])
    assert isinstance(gx, hx.Tensor) and gx.shape == (2, 3)
    assert_close(gx, [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])


def test_anomaly_mode_checks_a_slices_gradient_whole():
    x = hx.tensor(np.arange(6.0), requires_grad=True)
    with hx.autograd.detect_anomaly():
        (x[1:3] * 2.0).sum().backward()
    assert_close(x.grad, [0.0, 2.0, 2.0, 0.0, 0.0, 0.0])
    y = hx.tensor(np.array([1.0, 0.0, 2.0]), requires_grad=True)
    with hx.autograd.detect_anomaly(), pytest.raises(RuntimeError, match="backward of"):
        (y.sqrt()[0:2] * 1.0).sum().backward()  # sqrt's gradient at 0 is inf


_SLICE_CASES = {
    "empty_and_stepped": ((4, 5), [(slice(0, 0),), (slice(1, 3), slice(None, None, 2))]),
    "zero_d": ((), [(Ellipsis,), ()]),
    "ints_and_slices": ((3, 4), [(1,), (slice(None), 2), (Ellipsis, slice(1, None))]),
    "empty_tensor": ((0, 3), [(slice(None),), (slice(0, 0),)]),
    "three_d": ((2, 3, 4), [(0,), (slice(None), slice(None, None, 2)), (1, 2)]),
}


@pytest.mark.parametrize("view", ["plain", "transposed", "expanded"])
@pytest.mark.parametrize("case", list(_SLICE_CASES))
def test_slices_of_one_tensor_against_pytorch(case, view):
    # several slices of one tensor, 0-size and 0-d included, through view layouts
    torch = pytest.importorskip("torch")
    shape, keys = _SLICE_CASES[case]
    a = np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(shape)

    def loss(x):
        y = x * 1.0
        if view == "transposed" and y.ndim >= 2:
            y = y.transpose(0, 1).transpose(0, 1)
        if view == "expanded" and y.ndim >= 1:
            y = y.unsqueeze(0).expand((2,) + tuple(shape))[1]
        total = 0
        for i, k in enumerate(keys):
            total = total + (y[k] * (i + 2)).sum()
        return total

    x, tx = hx.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    loss(x).backward()
    loss(tx).backward()
    assert_close(x.grad, tx.grad.numpy())


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_the_sum_of_an_empty_tensor_has_a_gradient(device):
    dev = _device(device)
    x = hx.tensor(np.ones((0, 5), np.float32), device=dev, requires_grad=True)
    x.sum().backward()
    assert x.grad.shape == (0, 5)
    y = hx.tensor(np.ones((4, 5), np.float32), device=dev, requires_grad=True)
    y[0:0].sum().backward()
    assert_close(y.grad.cpu(), np.zeros((4, 5)))


# -- first-order gradients of every kind (the array formulas' tensors, views, partial) ------

def _mixed_graph(lib, xs):
    """A graph where first-order gradients of every kind meet: kernels' fresh tensors
    summed with each other and with a slice's partial gradient, a zero-stride view
    (Sum's), one gradient shared by two leaves (an add), into leaves, through matmul and
    softmax."""
    x, w, u, v = xs
    y = x.exp()
    a = y * 2.0 + y / 3.0           # two kernels' gradients for y
    b = y[:, 1:] * y[:, 1:]         # slices: partial gradients for y
    c = (y @ w).softmax(-1)         # matmul and softmax
    d = u + v                       # one gradient for two leaves
    return a.sum() + b.sum() + (c * c).sum() + (d * y[:, :2].sum()).sum()


def test_first_order_gradients_give_pytorchs_gradients_and_own_buffers():
    torch = pytest.importorskip("torch")
    g = rng(3)
    arrays = [g.standard_normal((3, 4)), g.standard_normal((4, 5)),
              g.standard_normal((3, 2)), g.standard_normal((3, 2))]
    ours = [hx.tensor(a).requires_grad_() for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    for _ in range(2):  # the second backward accumulates in place
        _mixed_graph(hx, ours).backward()
        _mixed_graph(torch, theirs).backward()
    for t, r in zip(ours, theirs):
        assert_close(t.grad, r.grad.numpy(), rtol=1e-12, atol=1e-12)
    # u and v got one gradient tensor: each .grad is a buffer of its own
    u, v = ours[2], ours[3]
    u.grad.mul_(0.0)
    assert np.abs(v.grad.numpy()).sum() > 0


def test_first_order_gradients_reach_hooks_retain_grad_and_observers_as_tensors():
    x = randn(3, 4)
    w = randn(4, 5, seed=1)
    h = x * 2.0
    y = h @ w
    seen = []
    h.register_hook(lambda g: seen.append(type(g)))
    x.register_hook(lambda g: seen.append(type(g)))
    y.retain_grad()
    h.retain_grad()
    y.softmax(-1).sum().backward()
    assert seen == [hx.Tensor, hx.Tensor]
    assert isinstance(y.grad, hx.Tensor) and isinstance(h.grad, hx.Tensor)
    assert_close(h.grad, y.grad.numpy() @ w.detach().numpy().T, rtol=1e-12, atol=1e-12)
    assert_close(x.grad, 2 * h.grad.numpy(), rtol=1e-12, atol=1e-12)
    norms = []
    remove = hx.autograd.add_backward_observer(
        lambda ev, node, ns: norms.extend(ns) if ev == "finish" else None)
    try:
        ((x * 2.0) @ w).softmax(-1).sum().backward()
    finally:
        remove()
    # one norm per edge that carried a gradient: Sum 1, Softmax 1, MatMul 2, Mul 1, and
    # the two leaves (a gradient that is not a tensor would have no norm)
    assert sum(isinstance(n, float) for n in norms) == 7
    (gx,) = hx.autograd.grad((x * 3.0).exp().sum(), [x])  # autograd.grad's capture
    assert isinstance(gx, hx.Tensor)
    assert_close(gx, 3 * np.exp(3 * x.detach().numpy()), rtol=1e-12)


def test_a_subclass_with_its_own_backward_runs_it_at_first_order():
    from haelixe.ops.linalg import MatMul

    class HalfGradMatMul(MatMul):
        @staticmethod
        def backward(ctx, g):
            ga, gb = MatMul.backward(ctx, g)
            return ga * 0.5, gb * 0.5

    a, b = randn(2, 3), randn(3, 4, seed=1)
    HalfGradMatMul.apply(a, b).sum().backward()
    assert_close(a.grad, 0.5 * np.ones((2, 4)) @ b.detach().numpy().T, rtol=1e-12)
    assert_close(b.grad, 0.5 * a.detach().numpy().T @ np.ones((2, 4)), rtol=1e-12)


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_gradients_summed_in_place_never_reach_a_buffer_handed_on(device):
    """First-order sums of gradients add into a buffer the engine made; once that buffer
    is handed to a backward (an add passes one gradient to both inputs) it is no longer
    written into, so each input's later gradients stay its own."""
    import torch

    rng = np.random.default_rng(5)
    x0, w0 = rng.standard_normal((3, 4)).astype(np.float32), \
        rng.standard_normal((4, 4)).astype(np.float32)

    def run(x, w):
        u, v = x @ w, x * 2.0
        later = (u * u).sum() + (u @ w).sum() + v.sum()  # reach u and v after p's node
        p = u + v  # p's gradient (a sum of its slices') is passed on to u and v alike
        return (p[:, :2] * 3.0).sum() + (p[:, 2:] * p[:, 2:]).sum() + p.sum() + later

    x, w = (hx.tensor(a, device=device, requires_grad=True) for a in (x0, w0))
    run(x, w).backward()
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x0, w0))
    run(tx, tw).backward()
    for mine, ref in ((x, tx), (w, tw)):
        np.testing.assert_allclose(mine.grad.cpu().numpy(), ref.grad.numpy(), rtol=1e-5,
                                   atol=1e-5)


def test_a_graph_built_by_backward_runs_through_the_given_gradients():
    """create_graph=True: the gradient passed to grad / backward is part of the new graph
    (PyTorch's rule; the jvp-by-double-backward trick needs it), as torch gives."""
    import torch

    for lib in (hx, torch):
        x = lib.tensor([1.0, 2.0, -3.0], requires_grad=True)
        v = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
        (vjp,) = lib.autograd.grad((x * x).sin(), x, v, create_graph=True)
        u = lib.tensor([1.0, 0.25, -2.0])
        (jvp,) = lib.autograd.grad(vjp, v, u)  # J u, through v
        w = lib.tensor([2.0, 3.0, 4.0], requires_grad=True)
        y = x.exp()
        y.backward(w, create_graph=True)
        x.grad.sum().backward()
        if lib is hx:
            mine = (jvp.numpy(), w.grad.numpy())
        else:
            theirs = (jvp.numpy(), w.grad.numpy())
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("stacked", [False, True])
def test_cat_and_stack_gradients_reach_every_kind_of_consumer(stacked):
    """A first-order cat/stack backward hands each input its part of the gradient, a
    strided view: to a leaf, to nodes whose first-order formula runs on raw arrays (an
    elementwise op, a Linear, an embedding's lookup) and to one made of views (a
    transpose); values as PyTorch's."""
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(8)
    a, b, w = r.standard_normal((4, 3)), r.standard_normal((3, 4)), r.standard_normal((3, 3))
    table, idx = r.standard_normal((5, 3)), np.array([0, 4, 4, 1])
    g = r.standard_normal((4, 5, 3) if stacked else (4, 15))

    def run(lib):
        ts = [lib.tensor(v, requires_grad=True) for v in (a, b, w, table)]
        ta, tb, tw, tt = ts
        parts = [ta, ta * 2.0, tb.t(), lib.nn.functional.linear(ta, tw),
                 lib.nn.functional.embedding(lib.tensor(idx), tt)]
        joined = lib.stack(parts, 1) if stacked else lib.cat(parts, 1)
        (joined * lib.tensor(g)).sum().backward()
        return [t.grad.numpy() for t in ts]

    for got, want in zip(run(hx), run(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
