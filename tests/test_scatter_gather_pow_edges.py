"""Edge cases each device must give as PyTorch does: scatter where an index repeats (the
last write in order, as PyTorch's CPU), gather with an index smaller than the input along
the other dims, pow of -inf with a fractional exponent, argmin at an integer's least
value."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import haelixe as hx


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_with_repeated_indices_and_a_smaller_gather_index(device, dim):
    rng = np.random.default_rng(0)
    index = rng.integers(0, 3, (3, 4, 5))  # (repeats along every dim)
    x, src = (rng.standard_normal((4, 5, 6)).astype(np.float32) for _ in range(2))
    got = hx.tensor(x, device=device).scatter(dim, hx.tensor(index, device=device),
                                              hx.tensor(src, device=device))
    want = torch.tensor(x).scatter(dim, torch.tensor(index), torch.tensor(src))
    assert np.array_equal(got.cpu().numpy(), want.numpy())
    got = hx.tensor(x, device=device).gather(dim, hx.tensor(index, device=device))
    assert np.array_equal(got.cpu().numpy(), torch.tensor(x).gather(dim, torch.tensor(index))
                          .numpy())
    got = hx.zeros(5, dtype=hx.int32, device=device).scatter(
        0, hx.tensor([4, 4, 0], device=device), 7)
    assert got.cpu().tolist() == [7, 0, 0, 0, 7]


def test_pow_of_minus_infinity_and_argmin_at_the_least_int(device):
    for c in (0.3, 3.3, -1.5, 3.0, 2.0, -3.0):
        h = hx.tensor([-math.inf, -2.0], device=device, requires_grad=True)
        t = torch.tensor([-math.inf, -2.0], requires_grad=True)
        (h ** c).sum().backward()
        (t ** c).sum().backward()
        np.testing.assert_equal((h ** c).detach().cpu().numpy(), (t ** c).detach().numpy())
        np.testing.assert_equal(h.grad.cpu().numpy(), t.grad.numpy())
    for dtype in ("int32", "int64"):
        for v in ([0, -2 ** 31], [-2 ** 31, 0], [5, 2 ** 31 - 1, 5]):
            h = hx.tensor(v, dtype=getattr(hx, dtype), device=device)
            assert h.argmin().item() == torch.tensor(v, dtype=getattr(torch, dtype)).argmin()
