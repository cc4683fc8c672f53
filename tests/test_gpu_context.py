"""The GPU context's failure mode: no adapter gives GpuUnavailableError with a fix.
Runs without a GPU (the adapter list is faked)."""

from __future__ import annotations

import pytest

from haelixe.backends.wgpu import context


def test_no_adapter_raises_with_install_hint(monkeypatch):
    wgpu = pytest.importorskip("wgpu")
    monkeypatch.setattr(wgpu.gpu, "enumerate_adapters_sync", lambda: [])
    with pytest.raises(context.GpuUnavailableError) as err:
        context._create_context()
    assert isinstance(err.value, RuntimeError)
    msg = str(err.value)
    assert "mesa-vulkan-drivers" in msg and 'device="cpu"' in msg


def test_software_adapters_are_reported_as_software():
    class FakeAdapter:
        info = {"device": "llvmpipe (LLVM 15.0.6, 256 bits)", "vendor": "llvmpipe",
                "adapter_type": "CPU", "backend_type": "Vulkan", "description": "Mesa"}

    class FakeDevice:
        features = set()
        limits = {"max-buffer-size": 1 << 30}

    info = context._describe(FakeAdapter(), FakeDevice())
    assert info["software"] is True and info["backend"] == "Vulkan"
    assert info["limits"] == {"max-buffer-size": 1 << 30}
