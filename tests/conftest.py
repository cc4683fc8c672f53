"""Shared fixtures: the layout maker (see layouts.py) and the GPU backend."""

from __future__ import annotations

import pytest
from layouts import LAYOUTS


@pytest.fixture(params=list(LAYOUTS))
def make(request):
    """make(a) -> (tensor, values) through one layout per parametrisation."""
    return LAYOUTS[request.param]


@pytest.fixture(scope="session")
def be():
    """The GPU backend on whatever wgpu adapter exists (software adapters count); the
    test is skipped, with the reason, where there is none."""
    from haelixe.backends.wgpu.context import GpuUnavailableError

    try:
        from haelixe.backends.wgpu.backend import get_backend

        return get_backend()
    except GpuUnavailableError as err:
        pytest.skip(f"no wgpu adapter: {err}")


@pytest.fixture
def one_blas_thread():
    """BLAS on one thread for the test: the thread policy picks a product's threads from
    the cores idle at the call, and a split product rounds differently, so two runs
    compared bit for bit (eager against a replay) must not depend on the machine's load."""
    import haelixe as hx

    before = hx.get_num_threads()
    hx.set_num_threads(1)
    yield
    hx.set_num_threads(before)
