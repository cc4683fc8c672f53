"""The binning slab allocator: size classes, caching, deterministic reuse, stats, events."""

import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haelixe import memory
from haelixe.memory import (
    MIN_BLOCK,
    Allocator,
    MemoryEvent,
    NumpyDriver,
    OutOfMemoryError,
    bin_of,
    bin_size,
    current_tag,
    get_allocator,
    register_allocator,
    round_size,
    tagged,
)

sizes = st.integers(min_value=0, max_value=1 << 40)
divs = st.sampled_from([1, 2, 4, 8, 16, 64])


class CountingDriver(NumpyDriver):
    """NumpyDriver that remembers what it handed out and got back; ``budget`` makes it
    raise MemoryError like a full device."""

    def __init__(self, budget=None):
        self.live = {}
        self.freed = []
        self.budget = budget

    def malloc(self, nbytes):
        if self.budget is not None and sum(map(len, self.live.values())) + nbytes > self.budget:
            raise MemoryError("device full")
        h = super().malloc(nbytes)
        self.live[id(h)] = h
        return h

    def free(self, handle):
        del self.live[id(handle)]
        self.freed.append(len(handle))


def make(**kw):
    return Allocator("test", CountingDriver(kw.pop("budget", None)), **kw)


# -- size classes ------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(sizes, divs)
def test_round_size_bound(n, d):
    r = round_size(n, d)
    assert r >= n and r % 8 == 0
    if n <= MIN_BLOCK:
        assert r == MIN_BLOCK
    else:
        # the stated guarantee: waste strictly below n / divisions (and below one step)
        assert (r - n) * d < n
        assert r - n < (1 << (n.bit_length() - 1)) // d
    assert round_size(r, d) == r


@settings(max_examples=300, deadline=None)
@given(sizes, sizes, divs)
def test_round_size_and_bin_monotone(a, b, d):
    a, b = min(a, b), max(a, b)
    assert round_size(a, d) <= round_size(b, d)
    assert bin_of(a, d) <= bin_of(b, d)


@settings(max_examples=300, deadline=None)
@given(sizes, divs)
def test_bin_index_matches_size(n, d):
    i = bin_of(n, d)
    assert bin_size(i, d) == round_size(n, d)
    assert bin_of(bin_size(i, d), d) == i


@given(st.integers(0, 2000), divs)
def test_bin_indices_are_dense_and_increasing(i, d):
    assert bin_of(bin_size(i, d), d) == i
    assert bin_size(i, d) < bin_size(i + 1, d)


def test_round_size_examples():
    assert [round_size(n) for n in (0, 1, 512, 513, 640, 641, 1000, 1024, 1025, 3000)] == \
        [512, 512, 512, 640, 640, 768, 1024, 1024, 1280, 3072]
    assert [bin_of(n) for n in (1, 513, 1024, 1025, 3000)] == [0, 1, 4, 5, 10]
    assert round_size(513, divisions=1) == 1024
    with pytest.raises(ValueError):
        round_size(-1)
    with pytest.raises(TypeError):
        round_size(1.5)
    with pytest.raises(ValueError):
        round_size(100, divisions=3)


# -- caching and reclamation -------------------------------------------------------------

def test_freed_block_is_reused_with_same_handle():
    a = make()
    b = a.allocate(1000)
    h = b.handle
    del b
    c = a.allocate(900)  # same bin (1024)
    assert c.handle is h and c.size == 1024 and c.requested == 900
    s = a.stats()
    assert s["cache_hits"] == 1 and s["driver_allocs"] == 1 and s["cache_misses"] == 1


def test_block_not_reused_while_referenced():
    a = make()
    b = a.allocate(1000)
    view = b.handle[10:20]  # a view keeps the numpy buffer, but only the Block counts
    keep = [b]
    del b
    c = a.allocate(1000)
    assert c.handle is not keep[0].handle
    assert a.stats()["driver_allocs"] == 2
    del keep[:]
    d = a.allocate(1000)
    assert np.shares_memory(d.handle, view)  # now, and only now, the slab is reused


def test_steady_state_has_no_driver_allocs():
    a = make()
    pattern = [1000, 4096, 70_000, 1000, 123_456, 8]
    after_first = None
    for it in range(100):
        live = [a.allocate(n) for n in pattern]
        tmp = a.allocate(5000, tag="temporary")  # dies mid-step, like an intermediate
        del tmp
        live.append(a.allocate(5000))
        del live
        if it == 0:
            after_first = a.stats()["driver_allocs"]
    s = a.stats()
    assert after_first == len(pattern) + 1
    assert s["driver_allocs"] == after_first and s["driver_frees"] == 0
    assert s["num_allocs"] == 100 * (len(pattern) + 2) == s["num_frees"]
    assert s["allocated_bytes"] == 0 and s["active_blocks"] == 0


def test_stable_reuse_hands_out_the_same_slabs_whatever_the_free_order():
    """reuse="stable": a step that repeats its requests gets the same slabs each time,
    even when its temporaries die in an order that rotates them ("recent" does not)."""
    for reuse, same in (("stable", True), ("recent", False)):
        a = make(reuse=reuse)
        seen = []
        for _ in range(4):
            x, y, z = (a.allocate(1000) for _ in range(3))  # one bin
            seen.append((x.handle.ctypes.data, y.handle.ctypes.data, z.handle.ctypes.data))
            del y, x, z  # freed in another order than taken
        assert (len(set(seen[1:])) == 1) is same, reuse
        assert a.stats()["driver_allocs"] == 3
    with pytest.raises(ValueError, match="reuse must be"):
        make(reuse="oldest")


def test_stats_worked_example():
    a = make()
    w = a.allocate(1000, tag="parameter")  # 1024, bin 4
    x = a.allocate(3000)  # 3072, bin 10
    y = a.allocate(100)  # 512, bin 0
    s = a.stats()
    assert (s["allocated_bytes"], s["requested_bytes"], s["reserved_bytes"]) == (4608, 4100, 4608)
    assert (s["active_blocks"], s["cached_blocks"]) == (3, 0)
    assert s["by_tag"] == {"parameter": 1024, "gradient": 0, "optimizer_state": 0,
                           "activation": 3584, "temporary": 0}
    del x
    s = a.stats()
    assert (s["allocated_bytes"], s["requested_bytes"], s["reserved_bytes"]) == (1536, 1100, 4608)
    assert (s["active_blocks"], s["cached_blocks"], s["cached_bytes"]) == (2, 1, 3072)
    assert s["bins"] == {
        512: {"bin": 0, "in_use": 1, "cached": 0, "requested_bytes": 100,
              "allocated_bytes": 512},
        1024: {"bin": 4, "in_use": 1, "cached": 0, "requested_bytes": 1000,
               "allocated_bytes": 1024},
        3072: {"bin": 10, "in_use": 0, "cached": 1, "requested_bytes": 0,
               "allocated_bytes": 0},
    }
    z = a.allocate(2600)  # also the 3072 bin (steps of 512 above 2048): a cache hit
    s = a.stats()
    assert s["cache_hits"] == 1 and s["driver_allocs"] == 3
    assert s["bins"][3072]["in_use"] == 1 and s["bins"][3072]["requested_bytes"] == 2600
    assert (s["peak_allocated_bytes"], s["peak_reserved_bytes"]) == (4608, 4608)
    del z, y
    a.reset_peak_stats()
    s = a.stats()
    assert (s["peak_allocated_bytes"], s["peak_reserved_bytes"]) == (1024, 4608)
    assert (s["num_allocs"], s["num_frees"]) == (4, 3)
    del w
    assert a.stats()["by_tag"]["parameter"] == 0


def test_empty_cache_releases_to_driver():
    a = make()
    keep = a.allocate(10_000)
    for n in (1000, 2000, 3000):
        a.allocate(n)  # dropped at once: cached
    assert a.stats()["cached_blocks"] == 3
    freed = a.empty_cache()
    assert freed == 1024 + 2048 + 3072
    assert sorted(a.driver.freed) == [1024, 2048, 3072]
    s = a.stats()
    assert s["cached_blocks"] == 0 and s["driver_frees"] == 3
    assert s["reserved_bytes"] == s["allocated_bytes"] == keep.size
    assert len(a.driver.live) == 1


def test_module_level_helpers_and_registry():
    cpu = get_allocator("cpu")
    assert get_allocator(None) is cpu and isinstance(cpu.driver, NumpyDriver)

    class Dev:
        type = "test-memory-device"

    mine = make()
    assert register_allocator(Dev.type, mine) is None
    try:
        assert get_allocator(Dev()) is mine
        b = mine.allocate(10)
        del b
        assert memory.memory_stats(Dev())["cached_blocks"] == 1
        assert memory.empty_cache(Dev.type) == 512
        memory.reset_peak_stats(Dev.type)
        assert memory.memory_stats(Dev.type)["peak_reserved_bytes"] == 0
    finally:
        memory._registry.pop(Dev.type, None)
    with pytest.raises(RuntimeError, match="no allocator registered"):
        get_allocator("no-such-device")


# -- out of memory -----------------------------------------------------------------------

def test_oom_empties_cache_then_raises_with_numbers():
    a = make(cap_bytes=8192)
    live = a.allocate(3000)  # 3072
    for n in (1000, 2000):
        a.allocate(n)  # cached: 1024 + 2048
    assert a.stats()["reserved_bytes"] == 6144
    ok = a.allocate(4000)  # 4096: fits only once the cache is given back
    s = a.stats()
    assert s["driver_frees"] == 2 and s["cached_blocks"] == 0 and s["reserved_bytes"] == 7168
    del ok  # cached again, so the failing call must empty it first
    with pytest.raises(OutOfMemoryError) as info:
        a.allocate(6000)  # 6144 > 8192 - 3072
    msg = str(info.value)
    assert isinstance(info.value, RuntimeError)
    for text in ("test", "6000 bytes", "6144 bytes", "reserved 3072 bytes",
                 "allocated 3072 bytes", "5120 bytes (5.00 KiB) is free", "8192 bytes",
                 "smaller batch", "empty_cache()", "cap"):
        assert text in msg, (text, msg)
    s = a.stats()
    assert s["cached_blocks"] == 0 and s["num_ooms"] == 1 and s["reserved_bytes"] == 3072
    assert live.size == 3072


def test_driver_memory_error_retries_after_emptying_cache():
    a = make(budget=4096)
    a.allocate(3000)  # cached 3072
    b = a.allocate(2000)  # driver full: cache released, retried, succeeds
    assert b.size == 2048 and a.stats()["driver_frees"] == 1
    with pytest.raises(OutOfMemoryError, match="driver failed"):
        a.allocate(4000)


# -- tags --------------------------------------------------------------------------------

def test_tagged_context_and_retag():
    a = make()
    assert current_tag() == "activation"
    with tagged("parameter"):
        p = a.allocate(100)
        with tagged("optimizer_state"):
            m = a.allocate(100)
        q = a.allocate(100, tag="gradient")
        seen = []
        t = threading.Thread(target=lambda: seen.append(current_tag()))
        t.start()
        t.join()
    assert seen == ["activation"]  # the default tag is per thread
    assert (p.tag, m.tag, q.tag, a.allocate(1).tag) == (
        "parameter", "optimizer_state", "gradient", "activation")
    assert current_tag() == "activation"
    p.retag("temporary")
    assert a.stats()["by_tag"]["temporary"] == 512 and a.stats()["by_tag"]["parameter"] == 0
    with pytest.raises(ValueError, match="unknown allocation tag"):
        p.retag("weights")
    with pytest.raises(ValueError), tagged("nope"):
        pass


# -- events ------------------------------------------------------------------------------

def test_events_in_order_with_kinds():
    a = make()
    got = []
    unsubscribe = a.subscribe(got.append)
    b = a.allocate(1000)
    del b
    c = a.allocate(1000, tag="gradient")
    c.retag("parameter")
    del c
    a.empty_cache()
    kinds = [(e.kind, e.size, e.requested, e.tag) for e in got]
    assert kinds == [
        ("alloc", 1024, 1000, "activation"),
        ("free", 1024, 1000, "activation"),
        ("reuse", 1024, 1000, "gradient"),
        ("retag", 1024, 1000, "parameter"),
        ("free", 1024, 1000, "parameter"),
        ("release", 1024, 0, None),
    ]
    assert [e.seq for e in got] == list(range(got[0].seq, got[0].seq + 6))
    assert [(e.allocated_bytes, e.reserved_bytes) for e in got] == [
        (1024, 1024), (0, 1024), (1024, 1024), (1024, 1024), (0, 1024), (0, 0)]
    assert all(isinstance(e, MemoryEvent) and e.bin == 4 for e in got)
    assert a.events() == got and a.events(last=2) == got[-2:]
    unsubscribe()
    unsubscribe()  # idempotent
    a.allocate(10)
    assert len(got) == 6 and len(a.events()) == 8  # history still records


def test_event_history_is_bounded_and_subscriber_errors_do_not_break_allocation():
    a = make(history=4)
    for _ in range(5):
        a.allocate(10)
    assert [(e.seq, e.kind) for e in a.events()] == [
        (7, "reuse"), (8, "free"), (9, "reuse"), (10, "free")]

    def broken(ev):
        raise KeyError("widget bug")

    unsubscribe = a.subscribe(broken)
    with pytest.warns(RuntimeWarning, match="widget bug"):
        b = a.allocate(10)
        assert b.size == 512
        del b
    unsubscribe()
    quiet = make(history=0)
    quiet.allocate(10)
    assert quiet.events() == []


# -- robustness --------------------------------------------------------------------------

def test_block_dying_inside_a_critical_section_is_deferred_not_lost():
    a = make()
    holder = [a.allocate(1000)]

    def drop(ev):  # a subscriber releasing a block while the allocator is mid-update
        if ev.kind == "alloc" and holder:
            holder.clear()

    a.subscribe(drop)
    b = a.allocate(5000)
    s = a.stats()
    assert s["active_blocks"] == 1 and s["cached_blocks"] == 1 and b.size == 5120


def test_threads_allocating_concurrently_keep_counts_exact():
    a = make()

    def work():
        for _ in range(200):
            x = a.allocate(700)
            y = a.allocate(3000)
            del x, y

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    gc.collect()
    s = a.stats()
    assert s["active_blocks"] == 0 and s["allocated_bytes"] == 0
    assert s["num_allocs"] == s["num_frees"] == 1600
    assert s["driver_allocs"] <= 8


def test_live_block_at_interpreter_exit_is_silent():
    path = os.path.join(os.path.dirname(__file__), os.pardir, "haelixe", "memory.py")
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('hx_memory', {path!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['hx_memory'] = m\n"
        "spec.loader.exec_module(m)\n"
        "m.KEEP = [m.get_allocator('cpu').allocate(n) for n in (10, 5000)]\n"
        "m.SELF = m.KEEP\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr


# -- private pools (hx.capture) ----------------------------------------------------------
def test_a_private_pool_keeps_its_slabs_from_other_allocations():
    a = make()
    outside = a.allocate(1000)
    pool = a.private_pool()
    with pool.routing():
        x = a.allocate(3000)
        slab = x.handle
        assert pool.serial(slab) == 0
        del x  # freed while routing: back to the pool, not to the shared cache
        y = a.allocate(3000)  # the pool's own free slab serves its next block
        assert y.handle is slab and pool.serial(slab) == 1
        del y
    pool.reserve(outside.handle)
    s = a.stats()
    assert (s["captured_bytes"], s["captured_blocks"], s["cached_blocks"]) == (3072, 1, 0)
    assert s["cached_bytes"] == 0 and s["reserved_bytes"] == 3072 + 1024
    assert a.allocate(3000).handle is not slab  # no one else gets it
    outside_slab = outside.handle
    del outside  # a reserved slab whose owner died: kept, and listed as lost
    assert [id(h) for h in pool.lost] == [id(outside_slab)]
    assert a.stats()["captured_bytes"] == 3072 + 1024
    pool.release()
    s = a.stats()
    assert (s["captured_bytes"], s["captured_blocks"]) == (0, 0)
    assert a.allocate(3000).handle is slab  # cached again: served to anyone
    assert a.allocate(1000).handle is outside_slab


def test_a_slab_two_pools_keep_stays_kept_until_both_are_released():
    a = make()
    w = a.allocate(2000)
    first, second = a.private_pool(), a.private_pool()
    first.reserve(w.handle)
    second.reserve(w.handle)
    slab = w.handle
    del w
    assert first.lost and second.lost  # both are told its owner died
    first.release()
    assert a.stats()["captured_blocks"] == 1  # the second still keeps it
    assert a.allocate(2000).handle is not slab
    second.release()
    assert a.stats()["captured_blocks"] == 0
    assert a.allocate(2000).handle is slab


def test_only_one_pool_routes_at_a_time():
    a = make()
    with a.private_pool().routing():
        with pytest.raises(RuntimeError, match="already taking"):
            with a.private_pool().routing():
                pass
