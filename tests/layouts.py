"""Layouts and helpers shared by the engine-core and autograd tests.

``LAYOUTS`` builds a tensor with given logical values through one physical layout:
contiguous, transposed, sliced with a step, broadcast (a zero stride) or flipped (a
negative stride). Each maker returns ``(tensor, values)``: ``values`` is the numpy array
the tensor must equal (the broadcast maker repeats ``a``'s first row along dim 0, since a
zero stride can only show repeated values).
"""

from __future__ import annotations

import numpy as np

import haelixe as hx


def _c(a):
    return np.array(a, order="C", copy=True)  # (ascontiguousarray would make 0-d 1-d)


def _contiguous(a):
    return hx.from_numpy(_c(a)), a


def _transposed(a):
    # The bytes are laid out in reversed-dim order; .permute makes the logical order.
    if a.ndim == 0:
        return _contiguous(a)
    if a.ndim == 1:
        pair = hx.from_numpy(_c(np.stack([a, a], axis=1)))  # (n, 2)
        return pair.T[1], a  # stride 2 through a transpose
    rev = tuple(range(a.ndim - 1, -1, -1))
    base = hx.from_numpy(_c(a.transpose(rev)))
    return base.permute(rev), a


def _sliced(a):
    # Every other element of a bigger buffer: numpy steps dim 0 before from_numpy sees
    # it, Haelixe steps the other dims.
    if a.ndim == 0:
        return _contiguous(a)
    big = np.zeros(tuple(2 * n + 1 for n in a.shape), a.dtype)
    big[(slice(1, None, 2),) * a.ndim] = a
    t = hx.from_numpy(big[1::2])
    return t[(slice(None),) + (slice(1, None, 2),) * (a.ndim - 1)], a


def _broadcast(a):
    if a.ndim == 0:
        return hx.from_numpy(_c(a)).expand(()), a
    row = _c(a[:1])
    t = hx.from_numpy(row).expand(a.shape)
    return t, np.broadcast_to(row, a.shape).copy()


def _flipped(a):
    dims = tuple(range(a.ndim))
    base = hx.from_numpy(_c(np.flip(a, dims) if dims else a))
    return (base.flip(dims) if dims else base), a


LAYOUTS = {
    "contiguous": _contiguous,
    "transposed": _transposed,
    "sliced": _sliced,
    "broadcast": _broadcast,
    "flipped": _flipped,
}

#: layouts with every element in its own cell (what gradcheck can perturb)
DISTINCT_LAYOUTS = ("transposed", "sliced", "flipped")


def leaf(a, kind="transposed"):
    """A float64 leaf tensor requiring grad with ``a``'s values in a non-contiguous
    layout (for gradcheck)."""
    t, _ = LAYOUTS[kind](np.asarray(a, np.float64))
    t = t.detach().requires_grad_()
    return t


def rng(seed=0):
    return np.random.default_rng(seed)


def assert_close(t, expected, rtol=1e-5, atol=1e-6):
    got = t.detach().numpy() if isinstance(t, hx.Tensor) else np.asarray(t)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                               rtol=rtol, atol=atol)
