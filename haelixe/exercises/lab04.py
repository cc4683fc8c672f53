"""Lab 04 · The GPU: the exercises and their checkers.

The size classes are the allocator's own (``haelixe.memory.round_size`` / ``bin_of``);
the reclamation question is judged against what the allocator reports when the answer
is checked, and the feedback draws the allocator as MemoryView does; the dominant
kernel is asked of made-up steps, each with the trap a first reading falls into.
"""

from __future__ import annotations

from .. import memory
from ..profiler import KernelEvent, Profile
from ..viz.memory import render_memory_svg
from ..viz.svg import fmt_bytes
from .core import Lab, first_hint
from .values import as_int_tuple

LAB = Lab(4, "The GPU")

# -- 4.1 the size class and bin of an allocation ------------------------------------------

SIZES = (1, 511, 512, 513, 640, 641, 1000, 1024, 1025, 1536, 5000, 70_000, 1 << 20,
         (1 << 20) + 1, 1_000_000, 4_000_000)


def _next_power_of_two(n: int) -> int:
    return max(memory.MIN_BLOCK, 1 << (n - 1).bit_length())


@LAB.exercise("4.1", "The size class and bin of an allocation",
              section="3. The binning slab allocator")
def bins(answer, fb):
    for n in SIZES:
        want = (memory.round_size(n), memory.bin_of(n))
        call = f"bin_for({n})"
        raw = fb.call(answer, n, shown=call)
        got, complaint = as_int_tuple(raw, 2, call)
        if complaint:
            fb.fail(complaint, expected=want, got=raw,
                    hint="return the pair (bin size in bytes, bin index)")
        if got == want:
            continue
        size, index = got
        step = (1 << (n.bit_length() - 1)) // 4 if n > memory.MIN_BLOCK else 0
        hint = first_hint(
            (size == want[0],
             f"the size is right; the index counts bins from 0 ({memory.MIN_BLOCK} bytes), "
             f"then 4 per power of two: 640, 768, 896, 1024 are bins 1 to 4, 1280 ... 2048 "
             f"bins 5 to 8"),
            (size == _next_power_of_two(n),
             f"that is the next power of two; the allocator splits each interval "
             f"(2^k, 2^(k+1)] into 4 equal steps, so {n} bytes fit a {want[0]}-byte bin and "
             f"waste stays under a quarter"),
            (n == want[0] and size == n + step,
             f"{n} is itself a bin size: a request of exactly a bin's size is served by that "
             f"bin (round up, never past an exact fit)"),
            (n <= memory.MIN_BLOCK,
             f"every request of up to {memory.MIN_BLOCK} bytes shares bin 0"),
            otherwise="take p, the power of two at or below n; the step is p / 4; round n "
                      "up to a multiple of the step")
        fb.fail(f"{call}: a request of {n} bytes", expected=want, got=got, hint=hint)
    return "every size lands in the allocator's own bin, edges and exact fits included"


# -- 4.2 a reclamation question, answered by reading MemoryView ---------------------------

REQUEST = 1000 * 1000 * 4  # the scenario's tensors: 1000 x 1000 float32
BIN = memory.round_size(REQUEST)


def _bin_counts(stats) -> tuple[int, int]:
    b = stats["bins"].get(BIN, {})
    return b.get("in_use", 0), b.get("cached", 0)


@LAB.exercise("4.2", "Reclamation, read from MemoryView",
              section="4. Deterministic reclamation")
def reclamation(answer, fb):
    raw = fb.call(answer, shown="reclamation_answer()")  # (first: a stub is "not done")
    try:
        stats = memory.memory_stats("gpu")
    except RuntimeError:
        fb.fail("the GPU allocator has not started: run the scenario cell above first")
    truth = _bin_counts(stats)
    got, complaint = as_int_tuple(raw, 2, "reclamation_answer()")
    if complaint:
        fb.fail(complaint, hint="return the pair (slabs in use, slabs cached) of the 4 MiB "
                                "bin, as MemoryView labels it above its bar ('in use+cached')")
    if got == truth:
        return (f"the {fmt_bytes(BIN)} bin holds {truth[0]} slabs in use and {truth[1]} "
                f"cached, as MemoryView shows")
    in_use, cached = got
    same_count = in_use + cached == sum(truth)
    hint = first_hint(
        (same_count and in_use < truth[0],
         "a view keeps its base's Storage, and so its slab, alive: `del a` removes a name, "
         "but `top = a[:500]` still reads that slab"),
        (same_count and in_use > truth[0],
         "a slab goes back to its bin's free list the moment its last reference dies: "
         "after `del`, a tensor nothing else refers to is cached at once"),
        (cached == 0 and truth[1] > 0,
         "a freed slab is not given back to the driver: it stays reserved, cached in its "
         "bin for the next request of that size, until empty_cache()"),
        otherwise="count the slabs the scenario made (one per new 4 MB tensor), then ask "
                  "of each: does anything, a name or a view, still refer to it?")
    fb.fail(f"the {fmt_bytes(BIN)} bin: (in use, cached)", expected=truth, got=got,
            hint=hint, pictures=[(f"the allocator now: the label above the "
                                  f"{fmt_bytes(BIN)} bar reads 'in use+cached'",
                                  render_memory_svg(stats))])


# -- 4.3 the kernel that dominates a step ----------------------------------------------------

def _dispatch(name, us, phase="forward", calls=1, kind="dispatch", device="gpu"):
    return [KernelEvent(name, device, kind, [], [], 0, int(us * 1000), 0, 0, phase=phase)
            for _ in range(calls)]


# (what the step looks like, its kernels): each one a trap a first answer falls into
STEPS = (
    ("one long call against twenty short ones",
     _dispatch("matmul.wgsl:matmul", 900) + _dispatch("elementwise.wgsl:map_flat", 60,
                                                       calls=20)),
    ("a backend op (its time holds its dispatches' and a wait) beside the dispatches",
     _dispatch("synchronize", 5000, kind="op") + _dispatch("norm.wgsl:rmsnorm", 100, calls=3)
     + _dispatch("matmul.wgsl:matmul", 200, calls=2)),
    ("one kernel in the forward and the backward, another in the backward only",
     _dispatch("matmul.wgsl:matmul", 240)
     + _dispatch("matmul.wgsl:matmul", 130, "backward", calls=2)
     + _dispatch("attention.wgsl:attention_dq", 150, "backward", calls=3)),
)


def _dominant(prof) -> str:
    total: dict = {}
    for e in prof.kernels():
        total[e.name] = total.get(e.name, 0) + e.duration_ns
    return max(total, key=total.get)


@LAB.exercise("4.3", "The kernel that dominates a step",
              section="7. Where a step's time and memory go")
def dominant(answer, fb):
    for what, events in STEPS:
        prof = Profile.from_events(events)
        want = _dominant(prof)
        got = fb.call(answer, prof, shown="dominant_kernel(prof)")
        if got == want:
            continue
        if not isinstance(got, str):
            fb.fail(f"a step with {what}: dominant_kernel(prof) should return a kernel's "
                    f"name (a str, as KernelEvent.name)", expected=want, got=got,
                    hint="return e.name of the kernel, not the event or its time")
        longest_call = max(prof.kernels(), key=lambda e: e.duration_ns).name
        hint = first_hint(
            (got == longest_call and got != want,
             "that is the longest single call; a kernel's share of the step is every call "
             "of it added up: many short calls can outweigh one long one"),
            (got == "synchronize",
             "synchronize is a backend op, not a kernel: an op's time holds the dispatches "
             "it encoded and, here, a wait for the GPU; read prof.kernels(), the dispatches"),
            (got in {e.name for e in prof.kernels()},
             "add up every call of a kernel, in whichever phase or node it ran: KernelView "
             "draws one bar per kernel and node, so one kernel may have several bars"),
            otherwise="sum e.duration_ns over prof.kernels() per e.name, then take the "
                      "name with the largest sum")
        fb.fail(f"a step with {what}", expected=want, got=got, hint=hint)
    return ("a kernel dominates by its calls times their length, summed over every phase "
            "and node that ran it (the table's total column; KernelView splits it into a "
            "bar per node)")
