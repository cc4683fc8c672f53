"""One regression test per defect found by trying Haelixe as a PyTorch user would (the
engine items; files, optimizers and datasets have theirs beside their own tests:
test_serialization, test_data_memmap, test_optim_parity, test_nn_modules)."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import haelixe as hx
import haelixe.nn.functional as F
from haelixe.autograd import SavedTensorError

torch = pytest.importorskip("torch")


def test_item01_augmented_assignment_is_in_place():
    x = hx.zeros(3)
    alias = x
    x += 1
    x *= 3.0
    x -= hx.ones(3)
    x /= 2.0
    assert x is alias and alias.tolist() == [1.0, 1.0, 1.0]
    p = hx.ones(2, requires_grad=True)
    (p * 3.0).sum().backward()
    before = p.storage
    with hx.no_grad():
        p -= 0.1 * p.grad  # a manual SGD step changes the parameter itself
    assert p.storage is before
    np.testing.assert_allclose(p.detach().numpy(), [0.7, 0.7], rtol=1e-6)


@pytest.mark.parametrize("edit, aux, build", [
    ("gather index", [0, 1, 0], lambda x, aux: x.gather(0, aux)),
    ("where condition", [True, False, True], lambda x, aux: hx.where(aux, x, x * 2.0)),
    ("masked_fill mask", [True, False, True], lambda x, aux: x.masked_fill(aux, 0.0)),
    ("advanced-index key", [0, 1, 0], lambda x, aux: x[aux]),
])
def test_item04_tensors_read_by_backward_are_version_checked(edit, aux, build):
    x = hx.tensor([1.0, 2.0, 3.0], requires_grad=True)
    aux = hx.tensor(aux)
    y = build(x, aux)
    aux.fill_(1)
    with pytest.raises(SavedTensorError, match="modified by an inplace operation"):
        y.sum().backward()


def test_item04_the_reported_gather_case_raises_like_pytorch():
    x = hx.tensor([1.0, 2.0, 3.0], requires_grad=True)
    i = hx.tensor([0, 0])
    y = x.gather(0, i)
    i.fill_(2)
    with pytest.raises(SavedTensorError):
        y.sum().backward()


def test_item04_attention_output_and_rope_tables_are_version_checked():
    q, k, v = (hx.randn(1, 2, 4, 8, requires_grad=True) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v)
    with hx.no_grad():
        out.mul_(2.0)
    with pytest.raises(SavedTensorError):
        out.sum().backward()
    cos, sin = F.rope_tables(4, 8)
    x = hx.randn(1, 4, 8, requires_grad=True)
    y = F.apply_rope(x, cos, sin)
    cos.mul_(0.5)
    with pytest.raises(SavedTensorError):
        y.sum().backward()


def test_item05_from_numpy_shares_memory_with_strided_fortran_slices():
    a = np.asfortranarray(np.arange(24.0).reshape(4, 6))[::2, 1::2]
    t = hx.from_numpy(a)
    a[0, 0] = 100.0
    assert t[0, 0].item() == 100.0
    t[1, 2] = -5.0
    assert a[1, 2] == -5.0


@pytest.mark.parametrize("expr", [
    "x.sigmoid()", "x.exp()", "hx.tensor(True).exp()", "x.sum()", "x32.sum()",
    "f16 * hx.tensor(2.0, dtype=hx.float64)", "f32 - hx.tensor(0.5, dtype=hx.float64)",
    "x32 * 2.5", "x.sum(dim=())", "b.sum()", "b + b", "x // 2", "x % 2",
])
def test_item06_result_dtypes_follow_pytorch(expr):
    env = {"hx": hx, "x": hx.tensor([0, 1, 2]), "x32": hx.tensor([1, 2], dtype=hx.int32),
           "f16": hx.ones(2, dtype=hx.float16), "f32": hx.ones(2), "b": hx.tensor([True])}
    tenv = {"hx": torch, "x": torch.tensor([0, 1, 2]),
            "x32": torch.tensor([1, 2], dtype=torch.int32),
            "f16": torch.ones(2, dtype=torch.float16), "f32": torch.ones(2),
            "b": torch.tensor([True])}
    texpr = expr.replace("hx.tensor(", "hx.tensor(").replace("dtype=hx.", "dtype=hx.")
    got, want = eval(expr, env), eval(texpr, tenv)
    assert got.dtype.name == str(want.dtype).replace("torch.", ""), expr
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-3)


@pytest.mark.parametrize("expr", ["x32.add_(1.7)", "x32.div_(2)", "x64.mul_(f)",
                                  "hx.tensor([True]).add_(1)"])
def test_item06_in_place_casts_that_lose_values_raise(expr):
    env = {"hx": hx, "x32": hx.tensor([1, 2], dtype=hx.int32),
           "x64": hx.tensor([1, 2]), "f": hx.tensor([0.5, 0.5])}
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        eval(expr, env)


def test_item06_silu_and_gelu_refuse_ints_as_pytorch():
    for f in (lambda t: t.silu(), lambda t: t.gelu()):
        with pytest.raises(TypeError, match="not defined for int64"):
            f(hx.tensor([1, 2]))


def test_item07_norm_at_zero_has_a_zero_gradient():
    x = hx.zeros(3, requires_grad=True)
    x.norm().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("f", [lambda t: t.abs(), lambda t: t.relu()])
def test_item07_second_derivative_through_abs_and_relu_is_zero(f):
    x = hx.tensor([-1.0, 2.0], dtype=hx.float64, requires_grad=True)
    (g,) = hx.autograd.grad(f(x).sum(), [x], create_graph=True)
    g.sum().backward()  # PyTorch: zeros; before: no graph, so this raised
    assert x.grad.tolist() == [0.0, 0.0]


def test_item07_retain_grad_keeps_the_gradient_after_later_hooks():
    x = hx.ones(2, requires_grad=True)
    y = x * 2.0
    y.retain_grad()
    y.register_hook(lambda g: g * 10.0)
    y.sum().backward()
    assert y.grad.tolist() == [10.0, 10.0]  # PyTorch: retained after every hook


def test_item08_grad_mode_is_per_thread():
    x = hx.ones(2, requires_grad=True)
    inside, seen = threading.Event(), threading.Event()

    def other():
        with hx.no_grad():
            inside.set()
            seen.wait(5)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(5)
    assert (x * 2.0).requires_grad  # this thread still records
    seen.set()
    t.join()


@pytest.mark.parametrize("expr", [
    "hx.zeros(2, 0)[1]", "hx.zeros(0, 3).flip(1)", "list(hx.zeros(2, 0))",
    "hx.zeros(0, 4).split(2, 1)", "hx.zeros(4, 0).chunk(2)", "hx.zeros(3, 0).unbind(0)",
    "hx.stack([hx.zeros(0), hx.zeros(0)])", "hx.cat([hx.zeros(0, 2), hx.zeros(0, 2)])",
])
def test_item10_views_of_empty_tensors(expr):
    got = eval(expr, {"hx": hx})
    want = eval(expr, {"hx": torch})
    if isinstance(got, (list, tuple)):
        assert [t.shape for t in got] == [tuple(t.shape) for t in want]
    else:
        assert got.shape == tuple(want.shape)


@pytest.mark.parametrize("expr", [
    "F.gelu(hx.tensor(0.5))", "hx.tensor(2.0).sum(0)", "hx.tensor(2.0).mean(0)",
    "hx.tensor(2.0).max(0).values", "hx.tensor(2.0).softmax(0)",
    "hx.zeros(3, 0).softmax(1)", "hx.tensor([True, False]).min(0).values",
    "hx.tensor([True, False]).sign()", "hx.tensor([2.0, 3.0]) ** True",
])
def test_item11_zero_dim_empty_and_bool_edges(expr):
    got = eval(expr, {"hx": hx, "F": F})
    want = eval(expr, {"hx": torch, "F": torch.nn.functional})
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.float().numpy(), want.float().numpy(), rtol=1e-6)


def test_item11_the_variance_of_one_number_is_nan_as_pytorch():
    with warnings.catch_warnings():  # (PyTorch warns about the degrees of freedom)
        warnings.simplefilter("ignore", UserWarning)
        want = torch.tensor(2.0).var().item()
    assert np.isnan(hx.tensor(2.0).var().item()) and np.isnan(want)


@pytest.mark.parametrize("expr, message", [
    ("F.embedding(hx.tensor([5]), hx.zeros(3, 2))", "index 5 is out of bounds for dim 0"),
    ("hx.zeros(3)[hx.tensor([True, False])]", "bool mask of shape \\(2,\\) does not match"),
    ("hx.tensor([[1, 2], [3]])", "ragged"),
    ("F.layer_norm(hx.zeros(2, 5), 5).shape", None),
    ("hx.device('cpu')", None),
    ("(hx.zeros(2) > 1).any().item()", None),
])
def test_item17_messages_are_haelixes_own(expr, message):
    env = {"hx": hx, "F": F}
    if message is None:
        eval(expr, env)
        return
    with pytest.raises((IndexError, ValueError, TypeError)) as e:
        eval(expr, env)
    assert "numpy" not in str(e.value) and __import__("re").search(message, str(e.value))


def test_item18_cpu_memory_stats_say_what_they_count():
    stats = hx.memory_stats()
    assert stats["tensors_use_allocator"] is False and "numpy" in stats["note"]
    block = hx.memory.get_allocator("cpu").allocate(4 << 20)
    assert hx.memory_stats()["allocated_bytes"] >= 4 << 20
    del block


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("edit", ["output", "input"])
def test_softmax_in_place_rules_are_pytorchs(log, edit):
    """softmax and log_softmax keep their output for backward, as PyTorch's do: changing
    the output in place before backward is refused (in both), changing the input is not,
    and the gradient is then PyTorch's."""
    data = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    weights = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)

    def run(lib):
        x = lib.tensor(data, requires_grad=True)
        h = x * 1.0
        y = h.log_softmax(-1) if log else h.softmax(-1)
        if edit == "output":
            y.mul_(2.0)
        else:
            h.add_(1.0)
        (y * lib.tensor(weights)).sum().backward()
        return x.grad.numpy()

    if edit == "output":
        with pytest.raises(RuntimeError):
            run(torch)
        with pytest.raises(SavedTensorError, match="modified by an inplace operation"):
            run(hx)
    else:
        np.testing.assert_allclose(run(hx), run(torch), rtol=1e-5, atol=1e-6)
