"""Which ``k`` entries of a 1-D array PyTorch's CPU ``topk`` picks, ties included.

Pruning zeroes the entries ``topk`` names, so where several entries tie at the cut the
mask depends on which of them PyTorch's selection keeps. Its CPU kernel runs the C++
standard library's selection over (value, index) pairs: a heap selection when
``64 * k <= n``, else an introselect (median-of-three quickselect). Without a tie at the
cut every algorithm picks the same set, found here with numpy; with one, those two
algorithms are replayed step by step on the entries' ranks, so that the same tied
entries are kept.
"""

from __future__ import annotations

import numpy as np


def topk_positions(values: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """The positions of the ``k`` smallest (or largest) entries of the 1-D ``values``,
    the same set as ``torch.topk(values, k, largest=largest).indices`` on the CPU (NaN
    counts as larger than every number, as there)."""
    values = np.asarray(values).reshape(-1)
    n = values.size
    if k <= 0:
        return np.zeros(0, np.int64)
    if k >= n:
        return np.arange(n, dtype=np.int64)
    if not np.isnan(values).any():
        key = values.astype(np.float64) if not largest else -values.astype(np.float64)
        cut = np.partition(key, k - 1)[k - 1]
        below, tied = key < cut, key == cut
        if int(below.sum()) + int(tied.sum()) == k:  # no tie straddles the cut
            return np.flatnonzero(below | tied)
    # ranks compare as the values do (all NaNs one rank, above every number)
    _, rank = np.unique(values, return_inverse=True)
    rank = rank.reshape(-1).astype(np.int64)
    keys = (-rank if largest else rank).tolist()
    items = list(zip(keys, range(n)))
    if 64 * k <= n:
        _heap_select(items, k)
    else:
        _introselect(items, k - 1)
    return np.sort(np.fromiter((i for _, i in items[:k]), np.int64, k))


# -- the selection algorithms, on a list of (key, index) ordered by key alone -----------------
def _introselect(a: list, nth: int) -> None:
    first, last = 0, len(a)
    depth = 2 * ((last - first).bit_length() - 1)
    while last - first > 3:
        if depth == 0:
            _heap_select(a, nth + 1, first, last)
            a[first], a[nth] = a[nth], a[first]
            return
        depth -= 1
        cut = _partition_around_median(a, first, last)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(a, first, last)


def _partition_around_median(a: list, first: int, last: int) -> int:
    mid = first + (last - first) // 2
    x, y, z = first + 1, mid, last - 1
    kx, ky, kz = a[x][0], a[y][0], a[z][0]
    if kx < ky:
        median = y if ky < kz else (z if kx < kz else x)
    else:
        median = x if kx < kz else (z if ky < kz else y)
    a[first], a[median] = a[median], a[first]
    pivot = a[first][0]
    lo, hi = first + 1, last
    while True:
        while a[lo][0] < pivot:
            lo += 1
        hi -= 1
        while pivot < a[hi][0]:
            hi -= 1
        if not lo < hi:
            return lo
        a[lo], a[hi] = a[hi], a[lo]
        lo += 1


def _insertion_sort(a: list, first: int, last: int) -> None:
    for i in range(first + 1, last):
        item = a[i]
        if item[0] < a[first][0]:
            a[first + 1:i + 1] = a[first:i]
            a[first] = item
        else:
            j = i
            while item[0] < a[j - 1][0]:
                a[j] = a[j - 1]
                j -= 1
            a[j] = item


def _heap_select(a: list, middle: int, first: int = 0, last: int | None = None) -> None:
    """The ``middle - first`` smallest of a[first:last] into a[first:middle], as a
    max-heap built and refilled the way the C++ library does."""
    last = len(a) if last is None else last
    size = middle - first
    if size >= 2:
        for parent in range((size - 2) // 2, -1, -1):
            _adjust_heap(a, first, parent, size, a[first + parent])
    for i in range(middle, last):
        if a[i][0] < a[first][0]:
            item = a[i]
            a[i] = a[first]
            _adjust_heap(a, first, 0, size, item)


def _adjust_heap(a: list, base: int, hole: int, size: int, item) -> None:
    top = hole
    child = hole
    while child < (size - 1) // 2:
        child = 2 * (child + 1)
        if a[base + child][0] < a[base + child - 1][0]:
            child -= 1
        a[base + hole] = a[base + child]
        hole = child
    if size % 2 == 0 and child == (size - 2) // 2:
        child = 2 * (child + 1)
        a[base + hole] = a[base + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and a[base + parent][0] < item[0]:
        a[base + hole] = a[base + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[base + hole] = item
