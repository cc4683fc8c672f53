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


def test_runtime_dir_is_made_private_when_unset(monkeypatch, tmp_path):
    import os
    import stat
    import tempfile

    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    path = context.ensure_runtime_dir()
    assert path is not None and os.environ["XDG_RUNTIME_DIR"] == path
    st = os.stat(path)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
    assert st.st_uid == os.getuid()
    os.chmod(path, 0o755)  # a loosened directory is tightened again
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "gone"))
    assert context.ensure_runtime_dir() == path
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700


def test_runtime_dir_keeps_a_valid_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert context.ensure_runtime_dir() is None
    import os

    assert os.environ["XDG_RUNTIME_DIR"] == str(tmp_path)


@pytest.mark.gpu
def test_adapter_creation_prints_no_runtime_dir_warning(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    env["TMPDIR"] = str(tmp_path)
    code = ("from haelixe.backends.wgpu import context\n"
            "try:\n    context.get_context()\n"
            "except context.GpuUnavailableError:\n    print('no adapter')\n")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    if "no adapter" in run.stdout:
        pytest.skip("no wgpu adapter")
    assert run.returncode == 0, run.stderr
    assert "XDG_RUNTIME_DIR" not in run.stderr
