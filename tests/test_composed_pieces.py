"""A kernel's numpy form over large arrays of one shape runs a piece at a time
(backends/cpu.py's PIECE): the same values, bit for bit, as the whole at once; and
map_into writes such an update into its destination piece by piece."""

import numpy as np
import pytest

from haelixe.backends import backend_for, cpu
from haelixe.backends.base import K_ADAMW_M, K_ADAMW_P, Backend
from haelixe.device import CPU

RNG = np.random.default_rng(0)


def _arrays(n, k, shape=None):
    shape = shape or (n,)
    return [RNG.standard_normal(shape).astype(np.float32) ** 2 + 0.1 for _ in range(k)]


@pytest.mark.parametrize("n", [4 * cpu.PIECE, 5 * cpu.PIECE + 17])
def test_pieces_give_the_whole_formula_s_values(n):
    p, m, v = _arrays(n, 3)
    scalars = [np.float32(0.999), np.float32(3e-4), np.float32(1.2), np.float32(1e-8)]
    whole = K_ADAMW_P.fn(cpu._MATH, p, m, v, *scalars)
    got = cpu._by_pieces(K_ADAMW_P.fn, [p, m, v, *scalars])
    assert got.dtype == whole.dtype and got.shape == whole.shape
    np.testing.assert_array_equal(got, whole)


def test_pieces_keep_the_shape_and_leave_other_layouts_whole():
    (a, b) = _arrays(0, 2, (8, cpu.PIECE))
    got = cpu._by_pieces(K_ADAMW_M.fn, [a, b, np.float32(0.9), np.float32(0.1)])
    assert got.shape == (8, cpu.PIECE)
    np.testing.assert_array_equal(got, K_ADAMW_M.fn(cpu._MATH, a, b, np.float32(0.9),
                                                    np.float32(0.1)))
    # broadcast operands, a strided view, or too few elements: no pieces
    assert cpu._pieces([a, b[:1]]) is None
    assert cpu._pieces([a[:, ::2], b[:, ::2]]) is None
    assert cpu._pieces([a[:1], b[:1]]) is None
    assert cpu._pieces([a, 2.0])[1] == a.shape


def test_an_optimizer_update_written_in_pieces_equals_the_whole():
    be = backend_for(CPU)
    n = 4 * cpu.PIECE + 3
    p, g, m, v = _arrays(n, 4)
    ref = [x.astype(np.float64) for x in (p, g, m, v)]
    Backend.adamw_step(be, p, g, m, v, 1e-3, 0.9, 0.999, 1e-8, 0.01, 3)
    rp, rg, rm, rv = ref
    rm = 0.9 * rm + 0.1 * rg
    rv = 0.999 * rv + 0.001 * rg * rg
    bc1, bc2 = 1 - 0.9 ** 3, 1 - 0.999 ** 3
    rp = rp * (1 - 1e-3 * 0.01) - 1e-3 / bc1 * rm / (np.sqrt(rv) / np.sqrt(bc2) + 1e-8)
    np.testing.assert_allclose(m, rm, rtol=1e-6)
    np.testing.assert_allclose(v, rv, rtol=1e-6)
    np.testing.assert_allclose(p, rp, rtol=1e-5, atol=1e-7)


# The special functions whose float64 values depend in their last bits on the other
# elements evaluated with them (the same accuracy either way): the incomplete gammas
# iterate until every element of the array has converged, and Airy's Ai and the
# modified Bessel K sum their quadratures with a BLAS matrix-vector product, whose
# order of additions for a row depends on the block's size
ITERATIVE = {"igamma", "igammac", "airy_ai", "modified_bessel_k0", "modified_bessel_k1",
             "scaled_modified_bessel_k0", "scaled_modified_bessel_k1"}


def _engine_kernels():
    import gc

    import haelixe.nn  # noqa: F401 (the modules that declare kernels, all imported)
    import haelixe.optim  # noqa: F401
    import haelixe.special  # noqa: F401
    from haelixe.backends.base import Kernel

    return sorted((o for o in gc.get_objects() if type(o) is Kernel and o.cpu is None),
                  key=lambda k: k.name)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_kernel_s_numpy_form_is_elementwise_in_pieces(dtype):
    """Each kernel the engine declares (ops, gradients, fused defaults, optimizers), in
    pieces, equals its whole-array value: a formula that read across elements (a
    reduction, a shift) would not, and pieces would make it silently wrong."""
    kernels = _engine_kernels()
    assert len(kernels) > 200
    n = 4 * cpu.PIECE + 7
    rng = np.random.default_rng(1)
    checked = 0
    for k in kernels:
        xs = [(rng.random(n) * 2.5 + 0.5).astype(dtype) for _ in range(k.arity)]
        with np.errstate(all="ignore"):
            try:
                whole = k.fn(cpu._MATH, *xs)
            except (TypeError, ValueError):  # (an integer-only kernel)
                continue
            if not isinstance(whole, np.ndarray) or whole.shape != (n,):
                continue
            got = cpu._by_pieces(k.fn, xs)
        if k.name in ITERATIVE:
            np.testing.assert_allclose(got, whole, rtol=1e-13, err_msg=k.name)
        else:
            np.testing.assert_array_equal(got, whole, err_msg=k.name)
        checked += 1
    assert checked > 200
