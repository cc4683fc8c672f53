"""Deterministic reclamation on the GPU, through the public tensor API: a slab goes back
to its bin exactly when the last Storage using it dies (views and tensors saved for
backward keep it alive), and a training loop reaches a steady state in which the driver
is asked for nothing new."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import haelixe as hx

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def gpu(be):
    """Every test here needs an adapter (conftest's ``be`` skips without one)."""
    return be


SHAPE = (333, 257)  # a bin of its own: nothing else in these tests shares it


def _slab(t):
    return t.storage.data.handle


def test_a_view_keeps_the_slab_until_it_dies():
    gc.collect()
    t = hx.zeros(*SHAPE, device="gpu")
    slab = _slab(t)
    view = t[::3, 1:]
    del t
    other = hx.zeros(*SHAPE, device="gpu")
    assert _slab(other) is not slab          # the view still reads that slab
    del view
    again = hx.zeros(*SHAPE, device="gpu")
    assert _slab(again) is slab              # its last reference died: reused at once
    del other, again


def _in_use(nbytes):
    from haelixe.memory import get_allocator, round_size

    alloc = get_allocator("gpu")
    return alloc.stats()["bins"].get(round_size(nbytes), {}).get("in_use", 0)


def test_a_saved_tensor_keeps_the_slab_until_backward_frees_it():
    gc.collect()
    nbytes = SHAPE[0] * SHAPE[1] * 4
    x = hx.randn(*SHAPE, device="gpu", requires_grad=True)
    base = _in_use(nbytes)                   # x's own slab included
    h = x * 2.0
    slab = _slab(h)
    loss = (h * h).sum()                     # Mul saves h; the product itself is gone
    del h
    assert _in_use(nbytes) == base + 1       # h lives on, in the graph only
    probe = hx.zeros(*SHAPE, device="gpu")
    assert _slab(probe) is not slab          # ...so its slab is not handed out
    del probe
    loss.backward()                          # frees the saved tensors as it goes
    assert _in_use(nbytes) == base + 1       # what is left in the bin: x.grad
    x.grad = None
    assert _in_use(nbytes) == base


def test_training_reaches_a_steady_state_without_driver_allocations():
    from haelixe.data.sine import random_batch
    from haelixe.denoise import Denoiser
    from haelixe.nn import functional as F
    from haelixe.optim import AdamW

    hx.manual_seed(0)
    model = Denoiser(dim=32, heads=2).to("gpu")
    opt = AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    allocs = []
    for _ in range(6):
        noisy, clean = random_batch(rng, 4)
        x, y = hx.from_numpy(noisy).to("gpu"), hx.from_numpy(clean).to("gpu")
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        allocs.append(hx.memory_stats("gpu")["driver_allocs"])
    assert allocs[-1] == allocs[2], allocs   # steps 4-6 asked the driver for nothing
