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
