"""Shape/stride arithmetic for GPU views and the metadata block kernels read.

Every kernel reads one ``array<i32>`` of metadata (binding 0) laid out as

    [0, 8)              kernel scalars (counts, flags, float32 bit patterns)
    8                   ndim of the iteration space (after merging dims)
    [9, 9 + MAXD)       its shape, padded with 1
    then per operand k (base = OPS_BASE + k * OP_STRIDE):
        base            element offset
        base + 1        one extra stride (the reduced axis of row kernels)
        base + 2 ...    MAXD strides in elements (0 where broadcast, may be negative)

``shaders/common.wgsl`` holds the matching WGSL (``coords``, ``op_offset``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .array import GpuArray, contiguous_strides

MAXD = 8
N_SCALARS = 8
OPS_BASE = N_SCALARS + 1 + MAXD
OP_STRIDE = 2 + MAXD
#: Steps of a kernel's data-sized loop per invocation, at most. Software adapters
#: (llvmpipe, lavapipe) end every shader loop after 65535 iterations, counting the nested
#: ones (a step of a row reduction also runs red_offset's loop over up to MAXD dims), and
#: the result is silently short: kernels split their work or take a composed path.
STEPS_PER_INVOCATION = 4096


def f32_bits(x: float) -> int:
    """A Python float as the int32 that holds its float32 bits (for metadata)."""
    return int(np.array(x, np.float32).view(np.int32))


def broadcast_shapes(*shapes) -> tuple:
    """numpy's broadcasting of shapes, with an error naming them."""
    # (most calls: shapes that agree, or a batch shape beside a matrix's (); numpy's
    # rule costs a microsecond)
    given = [s for s in shapes if s] or [()]
    first = given[0]
    if all(s == first for s in given):
        return tuple(first)
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"shapes {' and '.join(map(str, shapes))} do not broadcast") from None


def broadcast_strides(a: GpuArray, shape) -> tuple:
    """Strides that read ``a`` as if broadcast to ``shape`` (0 on broadcast dims)."""
    return broadcast_strides_of(a.shape, a.strides, shape)


def broadcast_strides_of(a_shape, a_strides, shape) -> tuple:
    """:func:`broadcast_strides` of a layout given as its shape and strides."""
    if a_shape == shape and 1 not in shape:  # (the common case, without the loop)
        return a_strides
    lead = len(shape) - len(a_shape)
    if lead < 0:
        raise ValueError(f"cannot broadcast shape {a_shape} to {tuple(shape)}")
    out = [0] * lead
    for n, s, target in zip(a_shape, a_strides, shape[lead:]):
        if n == target:
            out.append(s if n != 1 else 0)
        elif n == 1:
            out.append(0)
        else:
            raise ValueError(f"cannot broadcast shape {a_shape} to {tuple(shape)}")
    return tuple(out)


def broadcast_to(a: GpuArray, shape) -> GpuArray:
    shape = tuple(shape)
    return a.view(shape, broadcast_strides(a, shape), a.offset)


def permute(a: GpuArray, axes) -> GpuArray:
    return a.view(tuple(a.shape[i] for i in axes), tuple(a.strides[i] for i in axes), a.offset)


def swap_last2(a: GpuArray) -> GpuArray:
    axes = list(range(a.ndim))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return permute(a, axes)


def reshape_view(a: GpuArray, shape) -> GpuArray | None:
    """``a`` with a new shape without copying, or None when its strides do not allow it
    (numpy's rule: each new dim must lie inside a group of old dims that is contiguous)."""
    shape = tuple(int(n) for n in shape)
    if math.prod(shape) != a.size:
        raise ValueError(f"cannot reshape {a.shape} to {shape}")
    if a.size == 0 or a.is_contiguous():
        return a.view(shape, contiguous_strides(shape), a.offset)
    old = [(n, s) for n, s in zip(a.shape, a.strides) if n != 1]
    new_strides, i = [], 0
    for n in shape:
        if n == 1:
            new_strides.append(0)
            continue
        if i >= len(old):
            return None
        # take old dims until their product reaches n; they must be contiguous together
        prod, j = old[i][0], i
        while prod < n:
            j += 1
            if j >= len(old) or old[j - 1][1] != old[j][1] * old[j][0]:
                return None
            prod *= old[j][0]
        if prod == n:
            new_strides.append(old[j][1])
            i = j + 1
        else:  # split one old dim: n must divide it
            on, os = old[i]
            if j != i or on % n:
                return None
            new_strides.append(os * (on // n))
            old[i] = (on // n, os)
    return a.view(shape, tuple(new_strides), a.offset)


def merge_dims(shape, strides_list):
    """Drop size-1 dims and merge neighbours that every operand walks contiguously.

    Returns (shape, [strides per operand]) as tuples; the iteration order (C order over
    ``shape``) is unchanged, only the index arithmetic gets cheaper.
    """
    return _merged(tuple(shape), tuple(map(tuple, strides_list)))


@functools.lru_cache(maxsize=4096)  # every dispatch asks; a training step repeats its layouts
def _merged(shape, strides_list):
    dims = [d for d, n in enumerate(shape) if n != 1]
    m_shape = [shape[d] for d in dims]
    m_strides = [[s[d] for d in dims] for s in strides_list]
    i = len(m_shape) - 2
    while i >= 0:
        if all(st[i] == st[i + 1] * m_shape[i + 1] for st in m_strides):
            m_shape[i] *= m_shape[i + 1]
            del m_shape[i + 1]
            for st in m_strides:
                st[i] = st[i + 1]
                del st[i + 1]
        i -= 1
    return tuple(m_shape), tuple(map(tuple, m_strides))


def meta_block(scalars, shape, operands, merge: bool = True, what: str = "kernel"):
    """The metadata ints for an iteration over ``shape``.

    ``operands`` is a list of (strides, offset) or (strides, offset, extra) with strides
    aligned to ``shape``. Scalars (ints) fill slots 0..7.
    """
    strides_list = [op[0] for op in operands]
    if merge:
        shape, strides_list = merge_dims(shape, strides_list)
    nd = len(shape)
    if nd > MAXD:
        raise ValueError(f"{what}: {nd} dims after merging; the GPU kernels "
                         f"handle at most {MAXD} (make the tensor contiguous first)")
    if len(scalars) > N_SCALARS:
        raise ValueError("too many kernel scalars")
    # appended in slot order (every dispatch builds one: a list grown by extend is a
    # third of the cost of slice assignments into a zeroed one)
    meta = [*map(int, scalars), *_ZEROS[len(scalars):], nd, *shape, *_ONES[nd:]]
    for op, strides in zip(operands, strides_list):
        meta.append(int(op[1]))
        meta.append(int(op[2]) if len(op) > 2 else 0)
        meta.extend(strides)
        meta.extend(_ZEROS[len(strides):])
    return meta


_ZEROS = (0,) * MAXD  # (N_SCALARS == MAXD: one run of zeros pads either)
_ONES = (1,) * MAXD


def grid(n_workgroups: int, max_per_dim: int = 65535) -> tuple:
    """A (x, y, 1) grid holding ``n_workgroups``; kernels rebuild the flat id from both."""
    n = max(int(n_workgroups), 1)
    if n <= max_per_dim:
        return (n, 1, 1)
    y = -(-n // max_per_dim)
    return (-(-n // y), y, 1)
