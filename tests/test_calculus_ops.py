"""trapezoid, cumulative_trapezoid, gradient and histogram against PyTorch: values,
dtypes, shapes, float64 gradients, edge cases and errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import haelixe as hx

RNG = np.random.default_rng(4)
A = RNG.standard_normal((4, 5))
X5 = np.sort(RNG.random(5)) * 3
X4 = np.sort(RNG.random(4)) * 2


def close(h, t, tol=1e-12):
    assert tuple(h.shape) == tuple(t.shape), (h.shape, t.shape)
    assert str(h.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(h.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def grads_match(fh, ft, *arrays):
    """Values and float64 gradients (for a random upstream gradient) of every input."""
    hs = [hx.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    oh, ot = fh(*hs), ft(*ts)
    oh, ot = (oh, ot) if isinstance(ot, tuple) else ((oh,), (ot,))
    for a, b in zip(oh, ot):
        close(a, b)
    ups = [RNG.standard_normal(tuple(b.shape)) for b in ot]
    sum((a * hx.tensor(u)).sum() for a, u in zip(oh, ups)).backward()
    sum((b * torch.tensor(u)).sum() for b, u in zip(ot, ups)).backward()
    for h, t in zip(hs, ts):
        close(h.grad, t.grad)


@pytest.mark.parametrize("op", ["trapezoid", "cumulative_trapezoid"])
@pytest.mark.parametrize("kw", [{}, {"dx": 0.3}, {"dim": 0}, {"dx": 2, "dim": -2}])
def test_integration_with_dx_matches_torch(op, kw):
    grads_match(lambda y: getattr(hx, op)(y, **kw), lambda y: getattr(torch, op)(y, **kw), A)


@pytest.mark.parametrize("op", ["trapezoid", "cumulative_trapezoid"])
def test_integration_with_x_matches_torch(op):
    # 1-d coordinates, and coordinates of y's shape (both get gradients)
    grads_match(lambda y, x: getattr(hx, op)(y, x), lambda y, x: getattr(torch, op)(y, x),
                A, X5)
    grads_match(lambda y, x: getattr(hx, op)(y, x, dim=0),
                lambda y, x: getattr(torch, op)(y, x, dim=0), A, X4)
    xs = np.cumsum(RNG.random((4, 5)), 1)
    grads_match(lambda y, x: getattr(hx, op)(y, x), lambda y, x: getattr(torch, op)(y, x),
                A, xs)
    # a 2-d x broadcasting against a 3-d y
    y3 = RNG.standard_normal((2, 4, 5))
    grads_match(lambda y, x: getattr(hx, op)(y, x), lambda y, x: getattr(torch, op)(y, x),
                y3, xs)


@pytest.mark.parametrize("op", ["trapezoid", "cumulative_trapezoid"])
@pytest.mark.parametrize("shape", [(3, 0), (3, 1), (0, 4), (6,), (2, 3, 4)])
def test_integration_edge_shapes_and_dtypes(op, shape):
    a = RNG.integers(-3, 4, shape)
    close(getattr(hx, op)(hx.tensor(a)), getattr(torch, op)(torch.tensor(a)))
    f = a.astype(np.float32)
    close(getattr(hx, op)(hx.tensor(f), dx=0.5), getattr(torch, op)(torch.tensor(f), dx=0.5),
          1e-6)
    # non-contiguous samples
    t = np.asfortranarray(RNG.standard_normal(shape))
    close(getattr(hx, op)(hx.tensor(t).transpose(0, -1)),
          getattr(torch, op)(torch.tensor(t).transpose(0, -1)))


def test_integration_errors():
    y = hx.tensor(A)
    for op in ("trapezoid", "cumulative_trapezoid"):
        with pytest.raises(RuntimeError, match=f"{op}: There must be one `x` value"):
            getattr(hx, op)(y, hx.tensor(X4))
        with pytest.raises(RuntimeError, match="There must be one `x` value"):
            getattr(torch, op)(torch.tensor(A), torch.tensor(X4))
        with pytest.raises(IndexError, match=f"{op}: dim 2 is out of range"):
            getattr(hx, op)(y, dim=2)
        with pytest.raises(IndexError, match="Dimension out of range"):
            getattr(torch, op)(torch.tensor(A), dim=2)
        with pytest.raises(RuntimeError, match="not both"):
            getattr(hx, op)(y, hx.tensor(X5), dx=2.0)
        with pytest.raises(TypeError, match="y must be a Tensor"):
            getattr(hx, op)(A)


SPACINGS = [1, 0.5, "per-dim", "coordinates"]


def _spacing(kind, lib):
    wrap = hx.tensor if lib is hx else torch.tensor
    return {1: 1, 0.5: 0.5, "per-dim": [0.5, 2.0], "coordinates": [wrap(X4), wrap(X5)],
            }[kind]


@pytest.mark.parametrize("kind", SPACINGS)
@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient_matches_torch(kind, edge_order):
    grads_match(lambda f: hx.gradient(f, spacing=_spacing(kind, hx), edge_order=edge_order),
                lambda f: torch.gradient(f, spacing=_spacing(kind, torch),
                                         edge_order=edge_order), A)


@pytest.mark.parametrize("dim", [1, -2, [1], (0, 1), [-1, 0]])
def test_gradient_dims(dim):
    grads_match(lambda f: hx.gradient(f, dim=dim, edge_order=2),
                lambda f: torch.gradient(f, dim=dim, edge_order=2), A)
    n = 1 if isinstance(dim, int) else len(dim)
    sp = [2.0] * n
    grads_match(lambda f: hx.gradient(f, spacing=sp, dim=dim),
                lambda f: torch.gradient(f, spacing=sp, dim=dim), A)


def test_gradient_shapes_dtypes_and_layouts():
    a = RNG.integers(-5, 5, (3, 3, 4))
    got, want = hx.gradient(hx.tensor(a)), torch.gradient(torch.tensor(a))
    assert isinstance(got, tuple) and len(got) == len(want) == 3
    for g, w in zip(got, want):
        close(g, w)
    got = hx.gradient(hx.tensor(a.astype(np.float32)).permute(2, 0, 1), edge_order=2)
    want = torch.gradient(torch.tensor(a.astype(np.float32)).permute(2, 0, 1), edge_order=2)
    for g, w in zip(got, want):
        close(g, w, 1e-6)
    # exactly edge_order + 1 samples: no interior points
    for n, eo in ((2, 1), (3, 2)):
        v = RNG.standard_normal(n)
        close(hx.gradient(hx.tensor(v), edge_order=eo)[0],
              torch.gradient(torch.tensor(v), edge_order=eo)[0])


def test_gradient_errors_as_torch():
    f, t = hx.tensor(A), torch.tensor(A)
    cases = [({"edge_order": 3}, "only supports edge_order=1 and edge_order=2"),
             ({"spacing": [1.0, 2.0, 3.0]}, "a list of length equal to 'self.dim\\(\\) = 2'"),
             ({"spacing": [1.0, 2.0], "dim": 0}, "spacing and dim arguments to have the "
                                                 "same length")]
    for kw, msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            hx.gradient(f, **kw)
        with pytest.raises(RuntimeError, match=msg):
            torch.gradient(t, **kw)
    for lib, v in ((hx, hx.ones(2, 3)), (torch, torch.ones(2, 3))):
        with pytest.raises(RuntimeError, match="each dimension size to be at least "
                                               "edge_order\\+1"):
            lib.gradient(v, edge_order=2)
    with pytest.raises(RuntimeError, match="1-d with one coordinate per sample"):
        hx.gradient(f, spacing=[hx.tensor(X5), hx.tensor(X5)])
    with pytest.raises(TypeError, match="mixes numbers and coordinate tensors"):
        hx.gradient(f, spacing=[1.0, hx.tensor(X5)])
    with pytest.raises(TypeError):
        torch.gradient(t, spacing=[1.0, torch.tensor(X5)])
    with pytest.raises(IndexError, match="gradient"):
        hx.gradient(f, dim=2)
    with pytest.raises(TypeError, match="input must be a Tensor"):
        hx.gradient(A)


def _hist_pair(values, bins, **kw):
    hb = hx.tensor(bins) if isinstance(bins, np.ndarray) else bins
    tb = torch.tensor(bins) if isinstance(bins, np.ndarray) else bins
    hkw, tkw = dict(kw), dict(kw)
    if "weight" in kw:
        hkw["weight"], tkw["weight"] = hx.tensor(kw["weight"]), torch.tensor(kw["weight"])
    return hx.histogram(hx.tensor(values), hb, **hkw), \
        torch.histogram(torch.tensor(values), tb, **tkw)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kw", [{}, {"range": (-1.0, 0.7)}, {"density": True},
                                {"weighted": True}, {"weighted": True, "density": True}])
def test_histogram_with_int_bins_matches_torch(dtype, seed, kw):
    r = np.random.default_rng(seed)
    v = r.standard_normal((6, 7)).astype(dtype)
    kw = dict(kw)
    if kw.pop("weighted", False):
        kw["weight"] = r.random((6, 7)).astype(dtype)
    got, want = _hist_pair(v, 9, **kw)
    assert type(got).__name__ == "histogram" and got._fields == ("hist", "bin_edges")
    # (edges within an ulp: hx.linspace and torch.linspace round the steps apart)
    close(got.bin_edges, want.bin_edges, 1e-6 if dtype is np.float32 else 1e-12)
    close(got.hist, want.hist, 1e-6 if dtype is np.float32 else 1e-12)


def test_histogram_with_edges_and_edge_cases():
    r = np.random.default_rng(1)
    v = r.standard_normal(40)
    edges = np.array([-2.0, -0.5, 0.0, 0.25, 1.5])
    for kw in ({}, {"density": True}, {"weight": r.random(40)}):
        got, want = _hist_pair(v, edges, **kw)
        close(got.hist, want.hist)
        close(got.bin_edges, want.bin_edges)
    # values on the edges: left-closed bins, the last one closed on both sides
    on = np.array([0.0, 1.0, 2.0, 3.0, 3.0, -1.0, 4.0])
    for bins in (3, np.array([0.0, 1.0, 2.0, 3.0])):
        got, want = _hist_pair(on, bins, range=(0.0, 3.0)) if isinstance(bins, int) else \
            _hist_pair(on, bins)
        close(got.hist, want.hist)
    # all equal, empty, 0-d
    for vals in (np.array([2.0, 2.0]), np.zeros(0), np.array(1.5)):
        got, want = _hist_pair(vals, 4)
        close(got.hist, want.hist)
        close(got.bin_edges, want.bin_edges)
    # Tensor.histogram
    got = hx.tensor(v).histogram(5)
    close(got.hist, torch.tensor(v).histogram(5).hist)


def test_histogram_errors():
    v = hx.tensor([1.0, 2.0])
    with pytest.raises(NotImplementedError, match="histogram: not implemented for int64"):
        hx.histogram(hx.tensor([1, 2]), 3)
    with pytest.raises(RuntimeError):
        torch.histogram(torch.tensor([1, 2]), 3)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        hx.histogram(v, 0)
    with pytest.raises(RuntimeError, match="not finite"):
        hx.histogram(hx.tensor([1.0, float("nan")]), 3)
    with pytest.raises(RuntimeError):
        torch.histogram(torch.tensor([1.0, float("nan")]), 3)
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        hx.histogram(v, 3, range=(2.0, 1.0))
    with pytest.raises(RuntimeError, match="weight must be a tensor of input's shape"):
        hx.histogram(v, 3, weight=hx.ones(3))
    with pytest.raises(RuntimeError, match="bin edges must be increasing"):
        hx.histogram(v, hx.tensor([0.0, 2.0, 1.0]))


@pytest.mark.gpu
def test_on_the_gpu_equals_the_cpu(be):
    a = A.astype(np.float32)
    cpu, gpu = hx.tensor(a), hx.tensor(a, device="gpu")
    for fn in (lambda y: hx.trapezoid(y, dx=0.5), lambda y: hx.cumulative_trapezoid(y),
               lambda y: hx.gradient(y, edge_order=2)[1],
               lambda y: hx.gradient(y, spacing=[y.new_tensor(X4.astype(np.float32)),
                                          y.new_tensor(X5.astype(np.float32))])[1],
               lambda y: hx.histogram(y, 5).hist):
        out = fn(gpu)
        assert out.device.type == "gpu"
        np.testing.assert_allclose(out.cpu().numpy(), fn(cpu).numpy(), rtol=1e-5, atol=1e-5)
