"""Shared fixtures: the layout maker (see layouts.py) and the GPU backend."""

from __future__ import annotations

import importlib
import os

import pytest
from layouts import LAYOUTS

from haelixe.backends import cpu_jit


def pytest_configure(config):
    """Under HAELIXE_BLOCK_IMPORTS (make test-portable), the blocked modules must really
    be unimportable here: a blocker that did not load would pass the run vacuously.
    Compiled kernels load in the calling thread (here and in the interpreters tests
    start): a test of one checks the compiled form from its first call, and results do
    not depend on a loader's timing."""
    cpu_jit.set_background(False)
    os.environ.setdefault("HAELIXE_JIT_BACKGROUND", "0")
    for name in filter(None, os.environ.get("HAELIXE_BLOCK_IMPORTS", "").split(",")):
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        raise pytest.UsageError(f"HAELIXE_BLOCK_IMPORTS names {name!r}, but it imports: "
                                f"put tests/blocked_imports first on PYTHONPATH")


def pytest_collection_modifyitems(config, items):
    if cpu_jit.numba_installed():
        return
    skip = pytest.mark.skip(reason="checks the compiled CPU kernels; numba is not installed")
    for item in items:
        if "numba" in item.keywords:
            item.add_marker(skip)


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


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    """Each device in turn: "cpu", then "gpu" (marked gpu, skipped without an adapter).
    A test file may define its own ``device`` fixture instead."""
    if request.param == "gpu":
        request.getfixturevalue("be")
    return request.param


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
