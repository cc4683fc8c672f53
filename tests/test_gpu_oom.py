"""The GPU allocator's out-of-memory path: a buffer the adapter refuses (wgpu raising in
create_buffer, or a request past its largest storage binding) becomes Haelixe's
OutOfMemoryError, a RuntimeError as PyTorch's torch.cuda.OutOfMemoryError is, after the
cached slabs are given back and the request is retried once; the allocator's counters stay
consistent and the next allocation works."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import haelixe as hx
from haelixe.memory import OutOfMemoryError

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def gpu(be):
    """Every test here needs an adapter (conftest's ``be`` skips without one)."""
    return be


@pytest.fixture
def alloc():
    from haelixe.backends.wgpu.allocator import gpu_allocator

    a = gpu_allocator()
    a.empty_cache()  # no earlier test's slab serves these requests
    return a


def _refusing(monkeypatch, alloc, times, error="GPUOutOfMemoryError"):
    """create_buffer raises wgpu's ``error`` for the next ``times`` slabs the allocator
    asks for (of at least 16 KiB: the dispatcher's own small buffers are left alone)."""
    import wgpu

    device = alloc.driver.device
    real = type(device).create_buffer
    calls = []

    def create_buffer(self, *args, **kwargs):
        if self is device and kwargs.get("usage") == alloc.driver.usage \
                and kwargs.get("size", 0) >= 1 << 14:
            calls.append(kwargs["size"])
            if len(calls) <= times:
                raise getattr(wgpu, error)("buffer refused (injected)")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(type(device), "create_buffer", create_buffer)
    return calls


def _consistent(s):
    assert s["cached_bytes"] == s["reserved_bytes"] - s["allocated_bytes"] \
        - s["captured_bytes"] >= 0
    assert sum(b["allocated_bytes"] for b in s["bins"].values()) == s["allocated_bytes"]


@pytest.mark.parametrize("error", ["GPUOutOfMemoryError", "GPUValidationError"])
def test_refused_buffer_releases_cache_retries_once_then_raises_oom(monkeypatch, alloc,
                                                                     error):
    cached = alloc.allocate(3 * 4096 + 1)
    del cached  # a free slab the failing call must give back first
    before = alloc.stats()
    assert before["cached_blocks"] >= 1
    calls = _refusing(monkeypatch, alloc, times=2, error=error)
    with pytest.raises(OutOfMemoryError) as info:
        alloc.allocate(5 * 4096 + 3)
    assert isinstance(info.value, RuntimeError) and len(calls) == 2  # tried, retried
    msg = str(info.value)
    for text in ("gpu", "20483 bytes", "allocated", "reserved", "injected",
                 "empty_cache()", "smaller batch", "drop references to tensors"):
        assert text in msg, (text, msg)
    after = alloc.stats()
    assert after["cached_blocks"] == 0 and after["num_ooms"] == before["num_ooms"] + 1
    assert after["driver_frees"] >= before["driver_frees"] + before["cached_blocks"]
    assert after["allocated_bytes"] == before["allocated_bytes"]
    assert after["active_blocks"] == before["active_blocks"]
    _consistent(after)
    monkeypatch.undo()
    block = alloc.allocate(5 * 4096 + 3)
    assert block.size >= 5 * 4096 + 3
    del block
    t = hx.arange(6, dtype=hx.float32, device="gpu") * 2
    np.testing.assert_array_equal(t.numpy(), np.arange(6) * 2)


def test_refused_once_succeeds_on_the_retry_after_the_cache_is_released(monkeypatch, alloc):
    del_me = alloc.allocate(7 * 4096 + 5)
    del del_me
    before = alloc.stats()
    calls = _refusing(monkeypatch, alloc, times=1)
    block = alloc.allocate(9 * 4096 + 7)
    assert len(calls) == 2 and block.size >= 9 * 4096 + 7
    after = alloc.stats()
    assert after["cached_blocks"] == 0 and after["num_ooms"] == before["num_ooms"]
    assert after["driver_frees"] >= before["driver_frees"] + before["cached_blocks"]
    _consistent(after)


def test_request_past_the_largest_buffer_raises_oom_naming_the_limit(alloc):
    limit = alloc.driver.max_size
    before = alloc.stats()
    with pytest.raises(OutOfMemoryError) as info:
        alloc.allocate(limit + 1)
    msg = str(info.value)
    for text in (f"{limit + 1} bytes", f"{limit} bytes", "largest storage binding",
                 "allocated", "reserved", "smaller batch", "empty_cache()"):
        assert text in msg, (text, msg)
    after = alloc.stats()
    assert after["num_ooms"] == before["num_ooms"] + 1
    assert after["allocated_bytes"] == before["allocated_bytes"]
    _consistent(after)
    block = alloc.allocate(4096)
    assert block.size == 4096



def test_a_block_collected_in_a_reference_cycle_leaves_a_usable_buffer_in_the_cache(alloc):
    """The garbage collector finalizes a cycle's objects in any order: the slab's wgpu
    buffer must still be alive when its Block hands it back for reuse."""
    n = 12_345 * 4
    for _ in range(3):
        block = alloc.allocate(n)
        cycle = [block]
        cycle.append(cycle)
        del block, cycle
        gc.collect()
        again = hx.full((12_345,), 2.0, device="gpu")  # the same bin: the cached slab
        assert again.sum().item() == 2 * 12_345
        del again
