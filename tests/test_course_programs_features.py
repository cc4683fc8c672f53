"""Features that PyTorch course material leans on, each against PyTorch: numpy's keyword
names on reductions (``sum(1, keepdims=True)``), the legacy ``torch.Tensor(...)``
constructor, and a clear error for index tensors whose shapes do not broadcast."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")


def _pair(shape=(3, 4), dtype=np.float64, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return hx.tensor(a), torch.tensor(a)


# -- numpy's names: keepdims= for keepdim=, axis= for dim= -----------------------------------
#: name -> a call with numpy's names, the same for both libraries
NUMPY_NAMED = {
    "sum keepdims": lambda m, x: x.sum(1, keepdims=True),
    "function sum keepdims": lambda m, x: m.sum(x, 0, keepdims=True),
    "mean axis keepdims": lambda m, x: x.mean(axis=1, keepdims=True),
    "amax keepdims": lambda m, x: x.amax(1, keepdims=True),
    "max values keepdims": lambda m, x: x.max(axis=0, keepdims=True).values,
    "argmax axis": lambda m, x: x.argmax(axis=1),
    "argmin axis keepdims": lambda m, x: m.argmin(x, axis=0, keepdims=True),
    "logsumexp keepdims": lambda m, x: x.logsumexp(1, keepdims=True),
    "prod keepdims": lambda m, x: x.prod(1, keepdims=True),
    "var keepdims": lambda m, x: x.var(1, keepdims=True),
    "std axis keepdims": lambda m, x: x.std(axis=0, keepdims=True),
    "all keepdims": lambda m, x: (x > 0).all(1, keepdims=True),
}


@pytest.mark.parametrize("name", sorted(NUMPY_NAMED))
@pytest.mark.parametrize("shape", [(3, 4), (1, 5)], ids=str)
def test_numpy_keyword_names_bind_as_pytorchs(name, shape):
    h, t = _pair(shape)
    call = NUMPY_NAMED[name]
    ours, want = call(hx, h), call(torch, t)
    assert ours.shape == tuple(want.shape)
    assert str(ours.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(ours.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_numpy_names_on_a_strided_input_and_in_the_gradient():
    a = np.random.default_rng(1).standard_normal((4, 3))
    h = hx.tensor(a).requires_grad_()
    t = torch.tensor(a, requires_grad=True)
    # (a transposed input: keepdims= goes through the same reduction as keepdim=)
    oh = h.T.exp() / h.T.exp().sum(1, keepdims=True)
    ot = t.T.exp() / t.T.exp().sum(1, keepdims=True)
    np.testing.assert_allclose(oh.detach().numpy(), ot.detach().numpy(), rtol=1e-12)
    w = np.random.default_rng(2).standard_normal(oh.shape)
    (oh * hx.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_numpy_name_and_pytorch_name_together_is_an_error():
    h, _ = _pair()
    with pytest.raises(TypeError, match="keepdim"):
        h.sum(1, keepdim=True, keepdims=True)
    with pytest.raises(TypeError, match="dim"):
        h.argmax(dim=0, axis=0)


def test_numpy_names_leave_the_published_signature_alone():
    import inspect

    assert "keepdims" not in inspect.signature(hx.Tensor.argmax).parameters
    assert list(inspect.signature(hx.argmax).parameters) == ["input", "dim", "keepdim"]


# -- torch.Tensor(...), the legacy constructor ------------------------------------------------
@pytest.mark.parametrize("args", [([2.0],), ([[1, 2], [3, 4]],), ((2, 3),), ([],),
                                  (np.arange(3),), (np.ones((2, 2), np.float64),)],
                         ids=["float list", "nested int list", "tuple is data", "empty list",
                              "int array", "float64 array"])
def test_legacy_constructor_from_data_is_default_float(args):
    ours, want = hx.Tensor(*args), torch.Tensor(*args)
    assert ours.dtype is hx.float32 and want.dtype is torch.float32
    assert ours.shape == tuple(want.shape)
    np.testing.assert_array_equal(ours.numpy(), want.numpy())
    assert not ours.requires_grad


@pytest.mark.parametrize("args", [(2, 3), (hx.Size([4]),), (0,), ()],
                         ids=["sizes", "a Size", "zero", "nothing"])
def test_legacy_constructor_with_sizes_is_uninitialised_of_that_shape(args):
    targs = tuple(torch.Size(a) if isinstance(a, hx.Size) else a for a in args)
    ours, want = hx.Tensor(*args), torch.Tensor(*targs)
    assert ours.shape == tuple(want.shape)
    assert ours.dtype is hx.float32


def test_legacy_constructor_of_a_tensor_is_an_alias_in_the_graph():
    x = hx.ones(3, requires_grad=True)
    y = hx.Tensor(x)
    assert y is not x and y.requires_grad and y.grad_fn is not None
    (y * hx.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 2.0, 3.0])
    i = hx.tensor([1, 2])
    assert hx.Tensor(i).dtype is hx.int64  # (PyTorch's too: the tensor's own dtype)


def test_legacy_constructor_as_the_micrograd_lecture_uses_it():
    ours = hx.Tensor([2.0]).double()
    ours.requires_grad = True
    want = torch.Tensor([2.0]).double()
    want.requires_grad = True
    (ours * 3.0).tanh().backward()
    (want * 3.0).tanh().backward()
    assert ours.dtype is hx.float64
    np.testing.assert_allclose(ours.grad.numpy(), want.grad.numpy(), rtol=1e-12)


def test_legacy_constructor_refuses_what_pytorchs_refuses():
    with pytest.raises(TypeError, match="sequence"):
        hx.Tensor(2.5)
    with pytest.raises(TypeError):
        torch.Tensor(2.5)
    with pytest.raises(ValueError, match="sizes"):
        hx.Tensor(-1)


def test_subclass_of_tensor_builds_through_the_legacy_constructor():
    class Tagged(hx.Tensor):
        pass

    t = Tagged([1.0, 2.0])
    assert type(t) is Tagged
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])
    p = hx.nn.Parameter(hx.ones(2))  # (its own __new__ still runs)
    assert isinstance(p, hx.nn.Parameter) and p.requires_grad


# -- index tensors whose shapes do not broadcast ----------------------------------------------
def test_index_tensors_that_do_not_broadcast_raise_a_clear_index_error():
    x = hx.zeros(5, 4)
    with pytest.raises(IndexError, match=r"shape mismatch.*\[3\], \[4\]"):
        x[hx.arange(3), hx.arange(4)]
    with pytest.raises(IndexError, match="shape mismatch"):
        torch.zeros(5, 4)[torch.arange(3), torch.arange(4)]
    with pytest.raises(IndexError, match=r"shape mismatch.*\[2\], \[3\]"):
        x[hx.tensor([True, False, True, False, False]), hx.arange(3)] = 1.0


def test_index_tensors_that_broadcast_pick_as_pytorchs():
    h, t = _pair((5, 4))
    for key in [([[0], [3]], [0, 1, 2]), ([True, False, True, False, True], [1, 2, 3])]:
        ours = h[hx.tensor(key[0]), hx.tensor(key[1])]
        want = t[torch.tensor(key[0]), torch.tensor(key[1])]
        np.testing.assert_array_equal(ours.numpy(), want.numpy())


# -- torch.histogram's default bins ------------------------------------------------------------
@pytest.mark.parametrize("values", [np.random.default_rng(3).standard_normal(500), np.ones(3),
                                    np.zeros(0)], ids=["normal", "constant", "empty"])
@pytest.mark.parametrize("density", [False, True])
def test_histogram_without_bins_takes_pytorchs_hundred(values, density):
    ours = hx.histogram(hx.tensor(values), density=density)
    want = torch.histogram(torch.tensor(values), density=density)
    assert ours.hist.shape == (100,) and ours.bin_edges.shape == (101,)
    np.testing.assert_allclose(ours.bin_edges.numpy(), want.bin_edges.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.hist.numpy(), want.hist.numpy(), rtol=1e-12, equal_nan=True)
    hist, edges = hx.tensor(values).float().histogram(density=density)  # (the method too)
    assert hist.dtype is hx.float32 and edges.shape == (101,)


# -- writes into part of a tensor while autograd records -------------------------------------
def _writes(m, a, w):
    """setitem and in-place ops on views, in the patterns the backprop exercises use."""
    A = m.tensor(a, requires_grad=True)
    W = m.tensor(w, requires_grad=True)
    x = A * 2 + 1
    x[m.arange(3), m.tensor([0, 2, 1])] -= 1  # (advanced setitem of a non-leaf)
    x /= 3
    d = m.zeros(4, 5, dtype=m.float64)
    for k, i in enumerate([1, 3, 1]):  # (a 0-d index tensor selects a view: += into it)
        d[m.tensor(i)] += W[k]
    e = A * 3.0
    v = e[:, 1:3]  # (a strided view, written twice, then read)
    v *= W[0, :2]
    v += 1
    f = A * 1.0
    f[1] = W[2, :4] * 3  # (basic setitem of a value that requires grad)
    f[:, 0] = 7.0
    g = (A * 1.0).t()
    g[1:3, 0] = W[1, :2]  # (into a view of a transposed base)
    out = (x * A).sum() + (d ** 2).sum() + (e * A).sum() + (v ** 2).sum() + (f ** 3).sum() \
        + (g ** 2).sum()
    return out, (x, d, e, v, f, g), (A, W)


def test_writes_into_part_of_a_tensor_record_pytorchs_gradients():
    rng = np.random.default_rng(4)
    a, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 5))
    results = []
    for m in (hx, torch):
        out, values, leaves = _writes(m, a, w)
        out.backward()
        results.append([t.detach().numpy() for t in (out, *values)] +
                       [t.grad.numpy() for t in leaves])
    for ours, want in zip(*results):
        np.testing.assert_allclose(ours, want, rtol=1e-10, atol=1e-12)


def test_writes_into_part_of_a_tensor_pass_gradcheck_and_gradgradcheck():
    from haelixe.autograd import gradcheck, gradgradcheck

    rng = np.random.default_rng(5)
    a = hx.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    w = hx.tensor(rng.standard_normal(4), requires_grad=True)

    def fn(a, w):
        y = a * a
        y[0] = w.sin()
        y[[1, 2], [3, 0]] += w[:2] * w[2:]
        z = y.t()
        z[1] *= w[1]
        return y

    assert gradcheck(fn, (a, w))
    assert gradgradcheck(fn, (a, w))


def test_a_written_value_drops_its_leading_ones_as_pytorchs():
    results = []
    for m in (hx, torch):
        w = m.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
        out = m.zeros(4, 3, dtype=m.float64)
        for i in range(2):
            out[i] = w[i:i + 1] * (i + 1)  # (a (1, 3) row into a (3,) region)
        out[2:] = w[None, :1] * 5.0  # (a (1, 1, 3) value into a (2, 3) region)
        (out * out).sum().backward()
        results.append((out.detach().numpy(), w.grad.numpy()))
    for ours, want in zip(*results):
        np.testing.assert_allclose(ours, want, rtol=1e-12)
    with pytest.raises(RuntimeError, match=r"setitem: shapes \(2,\) and \(2, 3\) cannot be"):
        hx.zeros(3, dtype=hx.float64)[hx.tensor([0, 1])] = hx.ones(
            2, 3, dtype=hx.float64, requires_grad=True)


def test_a_write_into_a_view_of_a_leaf_that_requires_grad_is_refused():
    leaf = hx.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        leaf[1:] += hx.ones(2)
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        leaf[[0]] = 1.0


def test_a_view_taken_before_another_write_is_refused_at_backward():
    w = hx.randn(4, dtype=hx.float64, requires_grad=True)
    b = hx.zeros(4, dtype=hx.float64)
    first, second = b[0:2], b[1:3]  # (overlapping views: the first is stale after)
    first += w[:2]
    second += w[2:]
    with pytest.raises(RuntimeError, match="view was taken before an in-place op"):
        (first * first).sum().backward()


def test_views_read_before_a_write_elsewhere_keep_pytorchs_gradients():
    rng = np.random.default_rng(7)
    x0, w0 = rng.standard_normal((4, 3)), rng.standard_normal(3)
    results = []
    for m in (hx, torch):
        w = m.tensor(w0, requires_grad=True)
        x = m.tensor(x0, requires_grad=True)
        h = x * 1.0
        for t in range(1, 4):  # (a recurrence into a preallocated tensor)
            h[t] = m.tanh(h[t - 1] + x[t] * w)
        first = h[1:3]
        h[3:] *= 2.0  # (a row no live view covers: the views of rows 0..2 stay right)
        h[3] = h[1] + 1.0
        out = (h ** 2).sum() + first.sum()
        out.backward()
        results.append((out.item(), x.grad.numpy(), w.grad.numpy()))
    for ours, want in zip(*results):
        np.testing.assert_allclose(ours, want, rtol=1e-10)


def test_a_product_keeps_only_the_operands_a_computed_gradient_reads():
    a = np.random.default_rng(10).standard_normal((4, 3))
    results = []
    for m in (hx, torch):
        x = m.tensor(a, requires_grad=True)
        h = x * 1.0
        h[0] = h[1] * 2.0  # (h[1] is not kept: a number needs no gradient)
        z = x * 1.0
        y = z * m.tensor(a)  # (z is not kept: the constant needs no gradient)
        z += 1.0
        ((h ** 2).sum() + y.sum()).backward()
        results.append(x.grad.numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12)


def test_a_view_read_before_a_write_over_it_is_refused_at_backward():
    x = hx.randn(3, 2, dtype=hx.float64, requires_grad=True)
    h = x * 1.0
    h[1] = h[0] + h[1]  # (the view of row 1 was read, then row 1 written)
    with pytest.raises(RuntimeError, match="view was taken before an in-place op"):
        h.sum().backward()


def test_a_written_softmax_output_is_refused_at_backward_as_pytorchs():
    x = hx.randn(2, 3, requires_grad=True)
    y = x.softmax(1)
    y[hx.arange(2), hx.tensor([0, 2])] -= 1  # (its values are fine: the backprop exercise)
    np.testing.assert_allclose(y.detach().sum(1).numpy(), [0.0, 0.0], atol=1e-6)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.gpu
def test_writes_into_part_of_a_tensor_on_the_gpu_equal_the_cpu(be):
    rng = np.random.default_rng(6)
    a, w = rng.standard_normal((3, 4)), rng.standard_normal(4)
    grads = []
    for device in ("cpu", "gpu"):
        A = hx.tensor(a.astype(np.float32), device=device, requires_grad=True)
        W = hx.tensor(w.astype(np.float32), device=device, requires_grad=True)
        y = A * 2.0
        y[hx.tensor([0, 2], device=device), hx.tensor([1, 3], device=device)] = W[:2]
        v = y[1]
        v += W
        (y * y).sum().backward()
        assert y.device.type == device
        grads.append((y.detach().cpu().numpy(), A.grad.cpu().numpy(), W.grad.cpu().numpy()))
    for ours, want in zip(*grads):
        np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-6)


# -- a counts model and a one-hot network, as a bigram lecture builds them ----------------
def _bigram_nll(m, pairs, n_chars):
    counts = m.zeros((n_chars, n_chars), dtype=m.int32)
    for a, b in pairs:  # (int32 counts, one 0-d-indexed += at a time)
        counts[a, b] += 1
    probs = (counts + 1).float()
    probs /= probs.sum(1, keepdims=True)
    total = 0.0
    for a, b in pairs:
        total += m.log(probs[a, b])
    return counts, probs, -total / len(pairs)


def test_a_counts_model_gives_pytorchs_numbers_exactly():
    rng = np.random.default_rng(8)
    pairs = [tuple(int(v) for v in p) for p in rng.integers(0, 6, (200, 2))]
    ours, want = _bigram_nll(hx, pairs, 6), _bigram_nll(torch, pairs, 6)
    assert ours[0].dtype is hx.int32 and ours[1].dtype is hx.float32
    np.testing.assert_array_equal(ours[0].numpy(), want[0].numpy())
    np.testing.assert_allclose(ours[1].numpy(), want[1].numpy(), rtol=1e-7)
    assert abs(ours[2].item() - want[2].item()) <= 1e-6 * abs(want[2].item())


def test_a_one_hot_network_step_gives_pytorchs_loss_and_gradient():
    rng = np.random.default_rng(9)
    xs, ys = rng.integers(0, 7, 40), rng.integers(0, 7, 40)
    w0 = rng.standard_normal((7, 7)).astype(np.float32)
    results = []
    for m in (hx, torch):
        x, y = m.tensor(xs), m.tensor(ys)
        w = m.tensor(w0, requires_grad=True)
        enc = m.nn.functional.one_hot(x, num_classes=7).float()
        counts = (enc @ w).exp()
        probs = counts / counts.sum(1, keepdims=True)
        loss = -probs[m.arange(len(xs)), y].log().mean() + 0.01 * (w ** 2).mean()
        loss.backward()
        w.data += -50 * w.grad
        results.append((loss.item(), w.grad.numpy().copy(), w.detach().numpy().copy()))
    for ours, want in zip(*results):
        np.testing.assert_allclose(ours, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_factories_take_their_size_as_a_keyword_as_pytorchs(name):
    for size in ((2, 3), [4], hx.Size([1, 2]), ()):
        made = getattr(hx, name)(size=size, dtype=hx.float64)
        theirs = getattr(torch, name)(size=tuple(size), dtype=torch.float64)
        assert made.shape == tuple(theirs.shape) and made.dtype is hx.float64
    with pytest.raises(TypeError, match="size given twice"):
        getattr(hx, name)(2, size=(3,))
